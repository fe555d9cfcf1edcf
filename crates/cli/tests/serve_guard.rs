//! `nertrain serve` as a backend no stranger can steer, within bounds: HTTP Basic credentials on
//! the routes that start work, learning pinned to the operator's Label Studio, one server per
//! versions directory, a stop within the grace whatever Label Studio does, and `/predict`
//! bounded before it tokenises.

mod common;

use std::io::BufRead;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::{Server, sample_model, scratch, stderr};

/// `studio:s3cret`, and `studio:wrong`, as HTTP Basic sends them.
const GOOD: &str = "Authorization: Basic c3R1ZGlvOnMzY3JldA==";
const WRONG: &str = "Authorization: Basic c3R1ZGlvOndyb25n";
const CREDENTIALS: [(&str, &str); 2] =
    [("BASIC_AUTH_USER", "studio"), ("BASIC_AUTH_PASS", "s3cret")];

const CONFIG: &str = r#"<View><Labels name="ents" toName="doc"><Label value="PER"/><Label value="LOC"/><Label value="ORG"/><Label value="MISC"/></Labels><Text name="doc" value="$body"/></View>"#;

fn predict_body(tasks: usize, config: &str) -> Vec<u8> {
    let tasks: Vec<serde_json::Value> = (0..tasks)
        .map(|i| serde_json::json!({"id": i + 1, "data": {"body": "Anna met Bob in Oslo ."}}))
        .collect();
    serde_json::json!({"tasks": tasks, "label_config": config})
        .to_string()
        .into_bytes()
}

fn status(line: &str) -> u16 {
    line[9..12].parse().unwrap()
}

/// `nertrain serve ARGS` expected to refuse to start: its output, or a failure naming what it
/// did instead if it is still serving after 30 s.
fn refused_serve(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_nertrain"));
    command
        .arg("serve")
        .args(args)
        .current_dir(common::workspace())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    common::without_studio_env(&mut command);
    command.envs(env.iter().copied());
    let mut child = command.spawn().unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(30) {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "serve {args:?} started rather than refused: {}",
                stderr(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn studio_routes_ask_for_basic_credentials_and_auth_all_closes_the_rest() {
    let model = sample_model("sentence");
    let server = Server::start_with(&model, &[], &CREDENTIALS);
    let body = predict_body(2, CONFIG);
    let setup = serde_json::json!({"project": "1.1", "schema": CONFIG})
        .to_string()
        .into_bytes();
    let webhook = br#"{"action": "START_TRAINING", "project": {"id": 1}}"#;
    for (method, path, body) in [
        ("POST", "/predict", &body[..]),
        ("POST", "/setup", &setup[..]),
        ("POST", "/webhook", &webhook[..]),
        ("GET", "/versions", &b""[..]),
    ] {
        for headers in [&[][..], &[WRONG][..]] {
            let (line, answer) = server.exchange_with(method, path, body, headers);
            assert_eq!(status(&line), 401, "{path} {headers:?}: {line} {answer}");
            assert!(answer.contains("HTTP Basic"), "{answer}");
        }
    }
    let (line, answer) = server.exchange_with("POST", "/predict", &body, &[GOOD]);
    assert_eq!(status(&line), 200, "{answer}");
    let (line, _) = server.exchange_with("POST", "/setup", &setup, &[GOOD]);
    assert_eq!(status(&line), 200);
    // Tagging, the page and the model stay open unless asked.
    assert_eq!(
        server.tag(&serde_json::json!({"text": "Anna flew."})).0,
        200
    );
    assert_eq!(server.request("GET", "/", b"").0, 200);
    drop(server);

    let closed = Server::start_with(&model, &["--auth-all"], &CREDENTIALS);
    let tag = br#"{"text": "Anna flew."}"#;
    assert_eq!(closed.request("POST", "/tag", tag).0, 401);
    assert_eq!(closed.request("GET", "/", b"").0, 401);
    assert_eq!(closed.request("GET", "/model", b"").0, 401);
    assert_eq!(closed.request("GET", "/health", b"").0, 200);
    let (line, _) = closed.exchange_with("POST", "/tag", tag, &[GOOD]);
    assert_eq!(status(&line), 200);
}

#[test]
fn learning_where_others_reach_needs_credentials_and_a_url_never_shows_its_password() {
    let model = sample_model("sentence");
    let versions = scratch("serve-guard-open");
    let serve = |extra: &[&str], env: &[(&str, &str)]| {
        let mut args = vec!["--model", model.to_str().unwrap()];
        args.extend_from_slice(extra);
        refused_serve(&args, env)
    };
    let dir = versions.to_str().unwrap();
    let open = serve(&["--addr", "0.0.0.0:0", "--train-into", dir], &[]);
    assert!(!open.status.success());
    let message = stderr(&open);
    assert!(
        message.contains("anyone who reaches it could replace the served model")
            && message.contains("BASIC_AUTH_USER"),
        "{message}"
    );
    let auth_all = serve(&["--addr", "127.0.0.1:0", "--auth-all"], &[]);
    assert!(!auth_all.status.success() && stderr(&auth_all).contains("--auth-all"));
    let userinfo = serve(
        &["--addr", "127.0.0.1:0", "--train-into", dir],
        &[
            ("LABEL_STUDIO_URL", "http://admin:hunter2@127.0.0.1:9"),
            ("LABEL_STUDIO_API_KEY", "k"),
        ],
    );
    assert!(!userinfo.status.success());
    let message = stderr(&userinfo);
    assert!(
        message.contains("LABEL_STUDIO_URL") && !message.contains("hunter2"),
        "{message}"
    );
    std::fs::remove_dir_all(&versions).ok();
}

#[test]
fn a_dev_file_to_judge_versions_is_checked_before_serving() {
    let model = sample_model("sentence");
    let versions = scratch("serve-guard-dev");
    let dir = versions.to_str().unwrap();
    let untagged = versions.with_extension("untagged.txt");
    std::fs::write(&untagged, "Peter B-PER\nlives\n").unwrap();
    let serve = |extra: &[&str]| {
        let mut args = vec!["--model", model.to_str().unwrap(), "--addr", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        stderr(&refused_serve(&args, &[]))
    };
    let missing = serve(&["--train-into", dir, "--dev", "no/such/dev.txt"]);
    assert!(missing.contains("no/such/dev.txt"), "{missing}");
    // A token without a gold tag: named by file and line.
    let file = untagged.to_str().unwrap();
    let message = serve(&["--train-into", dir, "--dev", file]);
    assert!(
        message.contains(file) && message.contains(":2"),
        "{message}"
    );
    // It replaces the held-out tasks, and judges only what is learned.
    let dev = "data/sample/dev.txt";
    let both = serve(&["--train-into", dir, "--dev", dev, "--heldout-percent", "10"]);
    assert!(both.contains("--heldout-percent"), "{both}");
    let alone = serve(&["--dev", dev]);
    assert!(alone.contains("--train-into"), "{alone}");
    std::fs::remove_file(&untagged).ok();
    std::fs::remove_dir_all(&versions).ok();
}

#[test]
fn setup_can_neither_redirect_learning_nor_name_a_query() {
    let model = sample_model("sentence");
    let versions = scratch("serve-guard-setup");
    let server = Server::start(&model, &["--train-into", versions.to_str().unwrap()], None);
    let setup = |hostname: &str| {
        let body = serde_json::json!({"project": "1.1", "schema": CONFIG,
            "hostname": hostname, "access_token": "abc"});
        server.request("POST", "/setup", body.to_string().as_bytes())
    };
    for bad in [
        "http://127.0.0.1:22/api/anything?x=1",
        "http://127.0.0.1:22/label-studio/../api",
        "http://127.0.0.1:22/a%2Fb",
    ] {
        let (code, answer) = setup(bad);
        assert_eq!(code, 400, "{bad}: {answer}");
        assert!(answer.contains("hostname"), "{answer}");
    }
    // Label Studio served under a path names it as its hostname: the base its API goes under.
    assert_eq!(setup("http://127.0.0.1:8080/label-studio").0, 200);
    // The same Label Studio again (a new token) is fine; another is refused, at another path too.
    assert_eq!(setup("http://127.0.0.1:8080/label-studio/").0, 200);
    for other in [
        "http://127.0.0.1:9999/label-studio",
        "http://127.0.0.1:8080",
    ] {
        let (code, answer) = setup(other);
        assert_eq!(code, 403, "{answer}");
        assert!(
            answer.contains("http://127.0.0.1:8080/label-studio"),
            "{answer}"
        );
    }
    drop(server);
    std::fs::remove_dir_all(&versions).ok();

    // With LABEL_STUDIO_URL (a path prefix included), the operator's choice stands: what setup
    // names is not used, so a Label Studio that names itself otherwise still connects.
    let versions = scratch("serve-guard-setup-env");
    let server = Server::start_with(
        &model,
        &["--train-into", versions.to_str().unwrap()],
        &[
            ("LABEL_STUDIO_URL", "http://127.0.0.1:8080/label-studio"),
            ("LABEL_STUDIO_API_KEY", "k"),
        ],
    );
    let body = serde_json::json!({"project": "1.1", "schema": CONFIG,
        "hostname": "http://studio.internal/label-studio", "access_token": "abc"});
    let (code, answer) = server.request("POST", "/setup", body.to_string().as_bytes());
    assert_eq!(code, 200, "{answer}");
    drop(server);
    std::fs::remove_dir_all(&versions).ok();
}

#[test]
fn one_server_learns_into_a_versions_directory() {
    let model = sample_model("sentence");
    let versions = scratch("serve-guard-lock");
    let dir = versions.to_str().unwrap();
    let first = Server::start(&model, &["--train-into", dir], None);
    let second = refused_serve(
        &[
            "--model",
            model.to_str().unwrap(),
            "--addr",
            "127.0.0.1:0",
            "--train-into",
            dir,
        ],
        &[],
    );
    assert!(!second.status.success());
    let message = stderr(&second);
    assert!(
        message.contains("another nertrain serve learns into it")
            && message.contains(&format!("process {}", first.child.id())),
        "{message}"
    );
    // Refused before it says it serves: a script reading the first line is not misled.
    assert!(!message.contains("serving"), "{message}");
    drop(first);
    std::fs::remove_dir_all(&versions).ok();
}

#[test]
fn sigterm_ends_the_server_within_the_grace_while_label_studio_never_answers() {
    let model = sample_model("sentence");
    let versions = scratch("serve-guard-grace");
    // A "Label Studio" that accepts connections and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let held = std::thread::spawn(move || {
        let mut streams = Vec::new();
        for stream in silent.incoming().take(4) {
            streams.push(stream);
        }
        std::thread::sleep(Duration::from_secs(600));
    });
    let server = Server::start_with(
        &model,
        &[
            "--train-into",
            versions.to_str().unwrap(),
            "--shutdown-grace",
            "1",
        ],
        &[("LABEL_STUDIO_URL", &url), ("LABEL_STUDIO_API_KEY", "k")],
    );
    let webhook = br#"{"action": "START_TRAINING", "project": {"id": 1}}"#;
    assert_eq!(server.request("POST", "/webhook", webhook).0, 200);
    // The training is fetching (epoch 0) from the silent server.
    std::thread::sleep(Duration::from_millis(500));
    let (_, body) = server.request("GET", "/model", b"");
    let learning: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(learning["learning"]["training"]["epoch"], 0, "{body}");
    let started = Instant::now();
    server.sigterm();
    let mut server = server;
    let exited = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > Duration::from_secs(20) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let seconds = started.elapsed().as_secs_f64();
    assert!(
        exited.is_some(),
        "still running {seconds:.1} s after SIGTERM"
    );
    assert!(seconds < 5.0, "{seconds:.1} s to stop with a 1 s grace");
    drop(held);
    std::fs::remove_dir_all(&versions).ok();
}

/// The request log's line for the next `/predict` answered.
fn predict_line(server: &mut Server) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            server.log.read_line(&mut line).unwrap() > 0,
            "the log ended"
        );
        if line.contains("/predict") {
            return line;
        }
    }
}

#[test]
fn predict_counts_its_texts_before_tokenising_and_tags_each_text_once() {
    let model = sample_model("sentence");
    let mut server = Server::start(&model, &["--max-queued", "100"], None);
    // More texts than the queue ever holds: 413 naming the limit, not 503 forever.
    let (line, answer) = server.exchange("POST", "/predict", &predict_body(101, CONFIG));
    assert_eq!(status(&line), 413, "{line} {answer}");
    assert!(
        answer.contains("--max-queued") && answer.contains("101"),
        "{answer}"
    );
    predict_line(&mut server);
    // Fifty controls on one text, and the check control beside them: the text is tagged once
    // per task, and no entity is logged as left out.
    let many: String = (0..50)
        .map(|i| format!(r#"<Labels name="c{i}" toName="doc"><Label value="PER"/><Label value="LOC"/><Label value="ORG"/><Label value="MISC"/></Labels>"#))
        .collect();
    let config = format!(
        r#"<View>{many}<Labels name="check" toName="doc"><Label value="check"/></Labels><Text name="doc" value="$body"/></View>"#
    );
    let (line, answer) = server.exchange("POST", "/predict", &predict_body(10, &config));
    assert_eq!(status(&line), 200, "{answer}");
    let logged = predict_line(&mut server);
    assert!(logged.contains(" texts=10 "), "{logged}");
    assert!(!logged.contains("left out"), "{logged}");
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    let regions = answer["results"][0]["result"].as_array().unwrap();
    assert!(!regions.is_empty());
    // Entities go to the first control with their label; the check control marks the regions
    // to decide.
    assert!(
        regions
            .iter()
            .all(|r| r["from_name"] == "c0" || r["value"]["labels"][0] == "check"),
        "{regions:?}"
    );
    drop(server);

    // --max-answer bounds predictions as it bounds /tag's answers.
    let mut small = Server::start(&model, &["--max-answer", "4096"], None);
    let (line, answer) = small.exchange("POST", "/predict", &predict_body(50, CONFIG));
    assert_eq!(status(&line), 413, "{answer}");
    assert!(answer.contains("--max-answer"), "{answer}");
    predict_line(&mut small);
    let (line, _) = small.exchange("POST", "/predict", &predict_body(1, CONFIG));
    assert_eq!(status(&line), 200);
}

#[test]
fn a_page_elsewhere_cannot_steer_a_local_server() {
    use std::io::{Read, Write};
    let model = sample_model("sentence");
    let versions = scratch("serve-guard-origin");
    // On loopback without credentials, as the operator may run it, learning from a Label Studio
    // named by the environment.
    let server = Server::start_with(
        &model,
        &[
            "--train-into",
            versions.to_str().unwrap(),
            "--allowed-host",
            "nertrain.internal",
        ],
        &[
            (
                "LABEL_STUDIO_URL",
                "http://studio.internal:8080/label-studio",
            ),
            ("LABEL_STUDIO_API_KEY", "k"),
        ],
    );
    let address = server.address.clone();
    let port = address.rsplit_once(':').unwrap().1.to_string();
    let send = |method: &str, path: &str, headers: &[String], body: &str| -> (u16, String) {
        let mut stream = std::net::TcpStream::connect(&address).unwrap();
        let head: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\n{head}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        (status(&answer), answer)
    };
    let own = format!("Host: {address}");
    let json = "Content-Type: application/json".to_string();
    let setup = serde_json::json!({"project": "1.1", "schema": CONFIG,
        "hostname": "http://evil.example", "access_token": "abc"})
    .to_string();
    let tag = r#"{"text": "Anna met Bob in Berlin ."}"#;
    // A page on a name rebound to 127.0.0.1: its Host is its own name.
    let rebound = format!("Host: evil.example:{port}");
    for (method, path, body) in [
        ("POST", "/setup", &setup[..]),
        ("POST", "/versions/base/serve", ""),
        ("POST", "/tag", tag),
        ("GET", "/model", ""),
    ] {
        let (code, answer) = send(method, path, &[rebound.clone(), json.clone()], body);
        assert_eq!(code, 403, "{path}: {answer}");
        assert!(answer.contains("--allowed-host evil.example"), "{answer}");
    }
    assert_eq!(send("GET", "/health", &[], "").0, 403, "no Host");
    // A page elsewhere sending "simple" cross-site requests to the server's own address.
    let evil = "Origin: http://evil.example".to_string();
    let plain = "Content-Type: text/plain".to_string();
    for (path, body) in [
        ("/setup", &setup[..]),
        ("/versions/base/serve", ""),
        (
            "/webhook",
            r#"{"action": "START_TRAINING", "project": {"id": 1}}"#,
        ),
        ("/tag", tag),
    ] {
        for headers in [
            [own.clone(), evil.clone(), plain.clone()],
            [own.clone(), evil.clone(), json.clone()],
            [own.clone(), "Origin: null".into(), json.clone()],
        ] {
            let (code, answer) = send("POST", path, &headers, body);
            assert_eq!(code, 403, "{path} {headers:?}: {answer}");
        }
    }
    // Without an Origin, a body that is not said to be JSON is still refused where it starts
    // work or changes what is served.
    for path in ["/setup", "/versions/base/serve", "/webhook", "/predict"] {
        let (code, answer) = send("POST", path, &[own.clone(), plain.clone()], "{}");
        assert_eq!(code, 415, "{path}: {answer}");
        assert!(answer.contains("application/json"), "{answer}");
    }
    let (code, answer) = send("POST", "/setup", std::slice::from_ref(&own), &setup);
    assert_eq!(code, 415, "no Content-Type: {answer}");
    // Nothing of that changed what is served: Berlin is still a location.
    let (code, tagged) = server.tag(&serde_json::json!({"text": "Anna met Bob in Berlin ."}));
    assert_eq!(code, 200);
    let labels: Vec<&str> = tagged["entities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["label"].as_str().unwrap())
        .collect();
    assert!(labels.contains(&"LOC"), "{tagged}");
    // The server's own page, the configured Label Studio's origin, the names allowed and the
    // loopback names are taken.
    let allowed = [
        vec![
            own.clone(),
            format!("Origin: http://{address}"),
            json.clone(),
        ],
        vec![
            own.clone(),
            "Origin: http://studio.internal:8080".into(),
            json.clone(),
        ],
        vec![format!("Host: nertrain.internal:{port}"), json.clone()],
        vec![format!("Host: localhost:{port}"), json.clone()],
        vec![format!("Host: [::1]:{port}"), json.clone()],
    ];
    for headers in allowed {
        let (code, answer) = send("POST", "/tag", &headers, tag);
        assert_eq!(code, 200, "{headers:?}: {answer}");
    }
    drop(server);
    std::fs::remove_dir_all(&versions).ok();
}
