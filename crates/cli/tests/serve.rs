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
fn answers_equal_tag_json_for_sentence_and_document_models() {
    for context in ["sentence", "document"] {
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
        assert_eq!(info["context"], context);
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
        "POST /tag HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
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
