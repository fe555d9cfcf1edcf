//! `nertrain serve` end to end on loopback: answers equal `tag --format json`, every bad request
//! gets its status and a JSON error, overload gets 503 and the server stays up, a panic while
//! tagging is a 500 with an id, and SIGTERM lets the requests in flight finish.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{Server, sample_model, tag_json};

fn sample_texts() -> Vec<String> {
    vec![
        "Anna Schmidt, who works for Siemens, arrived in Lisbon on Monday.".into(),
        "Peter Novak moved to Oslo. Novak said Oslo was cold!".into(),
        "The U.S. didn't pay $3.5 million to Reuters (London) on 1996-08-28.".into(),
        "Zoë visited Zürich 🙂 and Kyoto.".into(),
    ]
}

#[test]
fn answers_equal_tag_json_for_sentence_document_and_dictionary_models() {
    for context in ["sentence", "document", "dictionary"] {
        let model = sample_model(context);
        let texts = sample_texts();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let expected = tag_json(&model, &refs);
        let server = Server::start(&model, &[], None);
        let (status, body) = server.tag(&serde_json::json!({ "texts": texts }));
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body.as_array().unwrap(),
            &expected,
            "{context}: one request of all"
        );
        // One text at a time: the same entities (confidences may differ in the last digits, as
        // the word cache fills in another order).
        for (text, expected) in texts.iter().zip(&expected) {
            let (status, body) = server.tag(&serde_json::json!({ "text": text }));
            assert_eq!(status, 200);
            let entities = |record: &serde_json::Value| -> Vec<(u64, u64, String)> {
                record["entities"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| {
                        (
                            e["start"].as_u64().unwrap(),
                            e["end"].as_u64().unwrap(),
                            e["label"].as_str().unwrap().to_string(),
                        )
                    })
                    .collect()
            };
            assert_eq!(entities(&body), entities(expected), "{context}: {text}");
        }
        let (status, body) = server.tag(&serde_json::json!({
            "texts": [texts[0]], "probs": true, "nbest": 3
        }));
        assert_eq!(status, 200);
        assert_eq!(body[0]["nbest"].as_array().unwrap().len(), 3);
        assert!(body[0]["tokens"][0]["probs"].is_object());
        let (status, info) = server.request("GET", "/model", b"");
        assert_eq!(status, 200);
        let info: serde_json::Value = serde_json::from_str(&info).unwrap();
        if context == "dictionary" {
            assert_eq!(info["context"], "sentence");
            assert_eq!(
                info["dictionary"]["labels"],
                serde_json::json!(["LOC", "ORG", "PER_LAST"])
            );
        } else {
            assert_eq!(info["context"], context);
            assert!(info.get("dictionary").is_none(), "{info}");
        }
        assert_eq!(
            info["labels"],
            serde_json::json!(["LOC", "MISC", "ORG", "PER"])
        );
        assert!(info["dev_f1"].as_f64().unwrap() > 50.0);
        assert_eq!(server.request("GET", "/health", b"").0, 200);
        let (status, page) = server.request("GET", "/", b"");
        assert_eq!(status, 200);
        assert!(
            page.contains("fetch(\"/tag\"") && !page.contains("http"),
            "self-contained"
        );
    }
}

#[test]
fn the_server_decodes_with_the_operating_points_as_tag_does() {
    let model = sample_model("sentence");
    let texts = sample_texts();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut args = vec!["--bias", "PER=1.5", "--threshold", "LOC=0.9"];
    let with = tag_json_with(&model, &args, &refs);
    let server = Server::start(&model, &args, None);
    let (status, body) = server.tag(&serde_json::json!({ "texts": texts }));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body.as_array().unwrap(), &with);
    let (_, info) = server.request("GET", "/model", b"");
    let info: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(info["biases"], serde_json::json!({ "PER": 1.5 }));
    assert_eq!(info["thresholds"], serde_json::json!({ "LOC": 0.9 }));
    let (status, body) = server.tag(&serde_json::json!({ "texts": texts, "all_entities": true }));
    assert_eq!(status, 200, "{body}");
    args.clear();
    let without = tag_json_with(&model, &args, &refs);
    assert_eq!(body.as_array().unwrap(), &without);
    assert_ne!(with, without);
}

fn tag_json_with(model: &std::path::Path, args: &[&str], texts: &[&str]) -> Vec<serde_json::Value> {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(texts);
    tag_json(model, &all)
}

#[test]
fn bad_requests_get_their_status_and_a_json_error_naming_the_field() {
    let server = Server::start(
        &sample_model("sentence"),
        &["--max-body", "1000", "--max-texts", "5"],
        None,
    );
    let cases: [(&str, &[u8], &str, u16, &str); 12] = [
        (
            "POST",
            br#"{"texts": [5]}"#,
            "/tag",
            400,
            "texts[0]: invalid type",
        ),
        (
            "POST",
            br#"{"texts": "a"}"#,
            "/tag",
            400,
            "texts: invalid type",
        ),
        ("POST", br#"{"texts": []}"#, "/tag", 400, "texts: empty"),
        (
            "POST",
            br#"{"texts": ["a", " "]}"#,
            "/tag",
            400,
            "texts[1]: empty",
        ),
        (
            "POST",
            br#"{"text": "a", "nbest": 0}"#,
            "/tag",
            400,
            "nbest: 0; expected 1 to 100",
        ),
        (
            "POST",
            br#"{"text": "a", "nbest": 101}"#,
            "/tag",
            400,
            "nbest: 101",
        ),
        (
            "POST",
            br#"{"text": "a", "texts": ["b"]}"#,
            "/tag",
            400,
            "not both",
        ),
        (
            "POST",
            br#"{"text": "a", "colour": 1}"#,
            "/tag",
            400,
            "unknown field `colour`",
        ),
        ("POST", b"{\"text\": \"\xff\"}", "/tag", 400, "not UTF-8"),
        (
            "POST",
            br#"{"texts": ["a","b","c","d","e","f"]}"#,
            "/tag",
            400,
            "at most 5",
        ),
        ("GET", b"", "/tag", 405, "method not allowed"),
        ("GET", b"", "/nowhere", 404, "no such path"),
    ];
    for (method, body, path, status, message) in cases {
        let (got, answer) = server.request(method, path, body);
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(got, status, "{answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(error.contains(message), "{error}");
    }
    let big = format!(r#"{{"text": "{}"}}"#, "a ".repeat(600));
    let (status, answer) = server.request("POST", "/tag", big.as_bytes());
    assert_eq!(status, 413, "{answer}");
    assert!(answer.contains("over 1000 bytes"));
    assert_eq!(
        server.tag(&serde_json::json!({"text": "Anna flew."})).0,
        200
    );
}

#[test]
fn overload_is_503_with_retry_after_and_the_server_stays_up() {
    let server = Server::start(&sample_model("sentence"), &["--max-queued", "4"], None);
    let mut stream = TcpStream::connect(&server.address).unwrap();
    let body = serde_json::json!({"texts": ["a b", "c d", "e f", "g h", "i j"]}).to_string();
    write!(
        stream,
        "POST /tag HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 503"), "{response}");
    assert!(
        response.to_ascii_lowercase().contains("retry-after: 1"),
        "{response}"
    );
    assert!(response.contains("the queue is full"));
    // Many clients at once against a small queue: every answer is 200 or 503, and afterwards
    // the server answers as before.
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..16)
            .map(|_| {
                scope.spawn(|| {
                    server
                        .tag(&serde_json::json!({"texts": ["Anna Schmidt flew to Oslo.", "Peter Novak left."]}))
                        .0
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 503),
        "{statuses:?}"
    );
    assert_eq!(
        server.tag(&serde_json::json!({"text": "Anna flew."})).0,
        200
    );
}

#[test]
fn a_panic_while_tagging_is_a_500_with_an_id_and_the_server_goes_on() {
    let server = Server::start(
        &sample_model("sentence"),
        &[],
        Some(("NERTRAIN_FAILPOINT", "serve-panic")),
    );
    let (status, body) = server.tag(&serde_json::json!({"text": "panic"}));
    assert_eq!(status, 500, "{body}");
    let id = body["id"].as_u64().unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains(&format!("request {id}"))
    );
    assert_eq!(
        server.tag(&serde_json::json!({"text": "Anna flew."})).0,
        200
    );
    let (exit, log) = server.terminate();
    assert!(exit.success());
    assert!(log.contains(&format!("{id} POST /tag 500")), "{log}");
}

#[test]
fn sigterm_stops_accepting_and_finishes_the_requests_in_flight() {
    let server = Server::start(
        &sample_model("sentence"),
        &[
            "--threads",
            "1",
            "--max-texts",
            "40000",
            "--max-queued",
            "40000",
            "--max-body",
            "10000000",
        ],
        None,
    );
    // Seconds of tagging on one thread.
    let texts: Vec<String> = (0..40_000)
        .map(|i| {
            format!("Anna Schmidt {i} , who works for Siemens , arrived in Lisbon on Monday .")
        })
        .collect();
    let answer = std::thread::scope(|scope| {
        let request = scope.spawn(|| server.tag(&serde_json::json!({ "texts": texts })));
        std::thread::sleep(Duration::from_millis(300));
        server.sigterm();
        request.join().unwrap()
    });
    assert_eq!(answer.0, 200);
    assert_eq!(answer.1.as_array().unwrap().len(), 40_000);
    let (exit, log) = server.wait();
    assert!(exit.success(), "{log}");
    assert!(log.contains("stopping: no new connections"), "{log}");
    assert!(log.contains("stopped: every request answered"), "{log}");
    let stopping = log.find("stopping").unwrap();
    let answered = log.find("POST /tag 200").unwrap();
    assert!(
        stopping < answered,
        "the request was in flight when SIGTERM came: {log}"
    );
}

/// The Label Studio config of these tests: names and a data key that are not the defaults.
const STUDIO_CONFIG: &str = r#"<View><Labels name="ents" toName="doc"><Label value="PER"/><Label value="LOC"/></Labels><Text name="doc" value="$body"/></View>"#;

#[test]
fn label_studio_routes_predict_under_the_projects_names_and_refuse_in_the_status_line() {
    let model = sample_model("sentence");
    let server = Server::start(&model, &[], None);
    let texts = sample_texts();
    let json = |value: serde_json::Value| value.to_string().into_bytes();

    let (line, body) = server.exchange(
        "POST",
        "/setup",
        &json(serde_json::json!({
            "project": "3.1700000000", "schema": STUDIO_CONFIG,
            "hostname": "http://localhost:8080", "access_token": "abc"})),
    );
    assert!(line.starts_with("HTTP/1.1 200"), "{line} {body}");
    let setup: serde_json::Value = serde_json::from_str(&body).unwrap();
    let version = setup["model_version"].as_str().unwrap().to_string();
    assert_eq!(version.len(), 12);
    assert!(version.bytes().all(|b| b.is_ascii_hexdigit()));

    // Predictions: one per task, in the project's names, the entities `tag` finds of the
    // config's labels, each with its confidence; a task score in [0, 1]. A project set up
    // needs no config in the request.
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let expected = tag_json(&model, &refs);
    let tasks: Vec<serde_json::Value> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| serde_json::json!({"id": 40 + i, "data": {"body": t, "n": i}}))
        .collect();
    for request in [
        serde_json::json!({"tasks": tasks, "label_config": STUDIO_CONFIG}),
        serde_json::json!({"tasks": tasks, "project": "3.1700000000"}),
    ] {
        let (status, body) = server.request("POST", "/predict", &json(request));
        assert_eq!(status, 200, "{body}");
        let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(answer["model_version"], version.as_str());
        let results = answer["results"].as_array().unwrap();
        assert_eq!(results.len(), texts.len());
        for (result, expected) in results.iter().zip(&expected) {
            let score = result["score"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&score), "{score}");
            let got: Vec<(u64, u64, String)> = result["result"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    assert_eq!(
                        (r["from_name"].as_str(), r["to_name"].as_str()),
                        (Some("ents"), Some("doc"))
                    );
                    assert!(r["score"].as_f64().is_some(), "{r}");
                    let v = &r["value"];
                    (
                        v["start"].as_u64().unwrap(),
                        v["end"].as_u64().unwrap(),
                        v["labels"][0].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            let want: Vec<(u64, u64, String)> = expected["entities"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| ["PER", "LOC"].contains(&e["label"].as_str().unwrap()))
                .map(|e| {
                    (
                        e["start"].as_u64().unwrap(),
                        e["end"].as_u64().unwrap(),
                        e["label"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            assert_eq!(got, want);
        }
    }

    // What cannot be served is refused, and the reason is in the status line, which is all
    // Label Studio shows.
    let no_labels = r#"<View><Text name="doc" value="$body"/></View>"#;
    let other_labels = r#"<View><Labels name="g" toName="doc"><Label value="GENE"/></Labels><Text name="doc" value="$body"/></View>"#;
    let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        (
            "/setup",
            json(serde_json::json!({"project": "3.1", "schema": no_labels})),
            "400",
            "no <Labels> control on a <Text>",
        ),
        (
            "/setup",
            json(serde_json::json!({"project": "3.1", "schema": "<View"})),
            "400",
            "not XML",
        ),
        (
            "/setup",
            json(serde_json::json!({"project": "3.1", "schema": other_labels})),
            "400",
            "none of the labeling config's labels (GENE)",
        ),
        (
            "/setup",
            json(serde_json::json!({"project": "x", "schema": STUDIO_CONFIG})),
            "400",
            "project: expected",
        ),
        (
            "/predict",
            json(
                serde_json::json!({"tasks": [{"data": {"body": "a"}}, {"data": {"text": "b"}}], "label_config": STUDIO_CONFIG}),
            ),
            "400",
            "tasks[1].data.body: missing",
        ),
        (
            "/predict",
            json(
                serde_json::json!({"tasks": [{"data": {"body": 5}}], "label_config": STUDIO_CONFIG}),
            ),
            "400",
            "tasks[0].data.body: expected a string",
        ),
        (
            "/predict",
            json(serde_json::json!({"tasks": [{"data": {"body": "a"}}], "project": "9.1"})),
            "400",
            "the project was not set up",
        ),
        (
            "/predict",
            b"{\"tasks\": 5}".to_vec(),
            "400",
            "tasks: invalid type",
        ),
        (
            "/webhook",
            json(serde_json::json!({"action": "START_TRAINING", "project": {"id": 3}})),
            "409",
            "training is off",
        ),
    ];
    for (path, body, status, message) in cases {
        let (line, answer) = server.exchange("POST", path, &body);
        assert!(
            line.starts_with(&format!("HTTP/1.1 {status} ")),
            "{path}: {line} {answer}"
        );
        assert!(line.contains(message), "{path}: {line}");
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert!(
            answer["error"].as_str().unwrap().contains(message),
            "{answer}"
        );
    }
    // Annotations submitted without --train-into are no error: predictions go on.
    let (status, body) = server.request(
        "POST",
        "/webhook",
        &json(serde_json::json!({"action": "ANNOTATION_CREATED", "project": {"id": 3}})),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("training is off"), "{body}");
    let (status, body) = server.request("GET", "/model", b"");
    assert_eq!(status, 200);
    let model_answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(model_answer["version"], version.as_str());
    assert!(model_answer["learning"].is_null(), "{model_answer}");
}

#[test]
fn annotations_start_a_training_every_n_and_a_failed_training_is_reported() {
    let model = sample_model("sentence");
    let versions = common::scratch("serve-train-every");
    let server = Server::start(
        &model,
        &[
            "--train-into",
            versions.to_str().unwrap(),
            "--train-every",
            "3",
        ],
        None,
    );
    let event = |action: &str| {
        let body = serde_json::json!({"action": action, "project": {"id": 4}}).to_string();
        let (status, body) = server.request("POST", "/webhook", body.as_bytes());
        assert_eq!(status, 200, "{body}");
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["status"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        event("ANNOTATION_CREATED"),
        "1 of 3 annotations toward the next training"
    );
    assert_eq!(
        event("ANNOTATION_UPDATED"),
        "2 of 3 annotations toward the next training"
    );
    assert_eq!(event("ANNOTATION_CREATED"), "training started");
    // Nothing set up and no LABEL_STUDIO_URL: the training fails, says why, and serving goes on.
    let learning = (0..100)
        .find_map(|_| {
            let (_, body) = server.request("GET", "/model", b"");
            let model: serde_json::Value = serde_json::from_str(&body).unwrap();
            let learning = model["learning"].clone();
            if learning["last_error"].is_string() && learning["training"].is_null() {
                return Some(learning);
            }
            std::thread::sleep(Duration::from_millis(50));
            None
        })
        .expect("the training neither failed nor said so");
    let error = learning["last_error"].as_str().unwrap();
    assert!(
        error.contains("no Label Studio to fetch annotations from"),
        "{error}"
    );
    assert_eq!(learning["versions"].as_array().unwrap().len(), 0);
    assert_eq!(
        server.tag(&serde_json::json!({"text": "Anna flew."})).0,
        200
    );
    // Start Training asks outright, and waits for the least interval between trainings.
    let queued = event("START_TRAINING");
    assert!(
        queued.starts_with("training queued: it starts in") && queued.contains("every 60 s"),
        "{queued}"
    );
    std::fs::remove_dir_all(&versions).ok();
}
