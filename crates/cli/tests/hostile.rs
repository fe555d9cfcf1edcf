//! What hostile clients and files do, through the binary: clients that stall, bodies and answers
//! too large, a text past the word bound among innocent ones, data after the JSON; a lock file
//! linked elsewhere, a model whose tokenizer cannot be built, an override of two lines, span
//! files whose offsets miss every word, and text that would break the offline page. Time and
//! memory are checked as bounds set by the server's own settings, not as machine speed.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{Server, nertrain, sample_model, scratch, scratch_at, stderr, stdout};

/// This process's child's peak resident memory, in MiB (Linux).
fn peak_mib(pid: u32) -> f64 {
    let process = procfs::process::Process::new(pid as i32).unwrap();
    process.status().unwrap().vmhwm.unwrap() as f64 / 1024.0
}

/// Writes all of `body` after a request head, then reads the whole answer, as Python's
/// `urllib` does: a server that closes before reading the body resets the connection.
fn send_all_then_read(address: &str, body: &[u8]) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let head = format!(
        "POST /tag HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \
         {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer)
}

#[test]
fn stalled_clients_neither_hold_the_server_nor_delay_its_stop() {
    let model = sample_model("sentence");
    let server = Server::start(
        &model,
        &[
            "--header-timeout",
            "1",
            "--body-timeout",
            "2",
            "--max-connections",
            "6",
            "--shutdown-grace",
            "3",
        ],
        None,
    );
    // Every connection the server takes at once, stalled: half a head, nothing, half a body.
    let mut stalled = Vec::new();
    for i in 0..6 {
        let mut stream = TcpStream::connect(&server.address).unwrap();
        let sent: &[u8] = match i % 3 {
            0 => b"POST /tag HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le",
            1 => b"",
            _ => b"POST /tag HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"text\"",
        };
        stream.write_all(sent).unwrap();
        stalled.push(stream);
    }
    let started = Instant::now();
    let (status, body) = server.tag(&serde_json::json!({"text": "Peter lives in Berlin."}));
    assert_eq!(status, 200, "{body}");
    // Freed by the head and body timeouts, not by the stalled clients.
    assert!(started.elapsed() < Duration::from_secs(10));
    // Half a body is answered 408 once the body timeout passes.
    let mut answer = String::new();
    stalled[2].read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    // A stop with a client stalled mid-request (and one idle) ends within the grace.
    let mut half = TcpStream::connect(&server.address).unwrap();
    half.write_all(b"POST /tag HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 50\r\n\r\n{")
        .unwrap();
    let _idle = TcpStream::connect(&server.address).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let stopping = Instant::now();
    let (exit, log) = server.terminate();
    assert!(exit.success(), "{log}");
    assert!(stopping.elapsed() < Duration::from_secs(3 + 5), "{log}");
}

#[test]
fn oversized_bodies_and_answers_are_refused_and_the_server_stays_small() {
    let model = sample_model("sentence");
    let server = Server::start(&model, &["--max-answer", "16000000"], None);
    // A client that sends the whole body before reading still reads the 413.
    let big = serde_json::json!({"text": "a ".repeat(1_000_000)}).to_string();
    let answer = send_all_then_read(&server.address, big.as_bytes()).unwrap();
    assert!(answer.starts_with("HTTP/1.1 413"), "{}", &answer[..100]);
    assert!(answer.contains("the body is over"), "{answer}");
    // Commas with probabilities: a body under the limit whose answer would be hundreds of
    // times its size. Four at once, each refused before tagging.
    let commas = serde_json::json!({"text": ",".repeat(500_000), "probs": true}).to_string();
    std::thread::scope(|scope| {
        let answers: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| server.request("POST", "/tag", commas.as_bytes())))
            .collect();
        for answer in answers {
            let (status, body) = answer.join().unwrap();
            assert_eq!(status, 413, "{body}");
            assert!(body.contains("without probs"), "{body}");
        }
    });
    // The same text without probabilities fits, and is answered.
    let plain = serde_json::json!({"text": ",".repeat(20_000)}).to_string();
    let (status, body) = server.request("POST", "/tag", plain.as_bytes());
    assert_eq!(status, 200, "{body}");
    // A body with more after its JSON is not read as its first object.
    let (status, body) = server.request("POST", "/tag", br#"{"text": "Anna"} x"#);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("trailing characters"), "{body}");
    assert!(
        peak_mib(server.child.id()) < 512.0,
        "peak {} MiB",
        peak_mib(server.child.id())
    );
    let (exit, log) = server.terminate();
    assert!(exit.success(), "{log}");
}

#[test]
fn a_text_past_the_word_bound_is_its_requests_400_and_no_one_elses() {
    let model = sample_model("sentence");
    let server = Server::start(&model, &["--max-body", "3000000"], None);
    let too_long = ")".repeat(1_000_001);
    let bad = serde_json::json!({"texts": ["Anna", too_long]}).to_string();
    let good = serde_json::json!({"texts": ["Peter lives in Berlin."]}).to_string();
    std::thread::scope(|scope| {
        let bad = scope.spawn(|| server.request("POST", "/tag", bad.as_bytes()));
        let good: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| server.request("POST", "/tag", good.as_bytes())))
            .collect();
        let (status, body) = bad.join().unwrap();
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("texts[1]: more than 1000000 words"), "{body}");
        for good in good {
            let (status, body) = good.join().unwrap();
            assert_eq!(status, 200, "{body}");
        }
    });
}

#[test]
fn the_answer_bound_holds_for_hostile_texts() {
    let model = sample_model("document");
    let tagger =
        nertrain_tagger::Tagger::load(&model, &burn::tensor::Device::flex()).expect("the model");
    let texts = [
        "Anna Schmidt, who works for Siemens, arrived in Lisbon.".to_string(),
        "\u{0}\u{1}\"\\<>&".repeat(50),
        ",".repeat(3000),
        "Zoë visited Zürich 🙂 and Kyoto. ".repeat(40),
        "A. B. C. D. E.".repeat(30),
    ];
    for (marginals, nbest) in [(false, 1), (true, 1), (true, 5), (false, 100)] {
        let options = nertrain_tagger::TagOptions {
            marginals,
            nbest,
            ..tagger.options()
        };
        let tagged = tagger
            .tag(&texts, nertrain_tagger::Layout::Texts, options)
            .unwrap();
        for (text, tagged) in texts.iter().zip(tagged) {
            let tokens = tagged.tokens.len();
            let json = serde_json::to_string(&tagged.into_record(tagger.tags())).unwrap();
            let bound = nertrain_tagger::record_size_bound(text, tokens, tagger.tags(), &options);
            assert!(json.len() <= bound, "{} > {bound}", json.len());
        }
    }
}

#[test]
fn a_lock_file_linked_elsewhere_is_refused_and_its_target_kept() {
    let dir = scratch("linked-lock");
    let run = dir.join("run");
    std::fs::create_dir(&run).unwrap();
    let outside = dir.join("precious.txt");
    std::fs::write(&outside, "keep me").unwrap();
    std::fs::hard_link(&outside, run.join(".nertrain.lock")).unwrap();
    let output = format!("train.output={}", run.display());
    let out = nertrain(&[
        "fit",
        "--config",
        "configs/sample.toml",
        "--set",
        &output,
        "--set",
        "train.epochs=1",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("hard link"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
}

#[test]
fn a_model_whose_tokenizer_cannot_be_built_is_named_in_full() {
    let model = sample_model("sentence");
    let changed = scratch_at("tokenizer-rules", "run");
    std::fs::create_dir(&changed).unwrap();
    for entry in std::fs::read_dir(&model).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), changed.join(entry.file_name())).unwrap();
        }
    }
    let meta = changed.join("model.json");
    let mut description: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta).unwrap()).unwrap();
    for (field, value) in [
        ("rules", serde_json::json!(99)),
        ("keep", serde_json::json!(["U.S.", ""])),
    ] {
        let mut changed_description = description.clone();
        changed_description["tokenizer"][field] = value;
        std::fs::write(&meta, changed_description.to_string()).unwrap();
        let out = nertrain(&["tag", "--model", changed.to_str().unwrap(), "Anna"]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&meta.display().to_string()),
            "{}",
            stderr(&out)
        );
    }
    description["tokenizer"]["keep"] = serde_json::json!(["U.S."]);
    std::fs::write(&meta, description.to_string()).unwrap();
    let out = nertrain(&["tag", "--model", changed.to_str().unwrap(), "Anna"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn an_override_of_two_lines_is_a_usage_error() {
    let out = nertrain(&[
        "fit",
        "--config",
        "configs/sample.toml",
        "--set",
        "train.epochs=1\ntrain.output=\"/tmp/elsewhere\"",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("on one line"), "{}", stderr(&out));
}

#[test]
fn span_files_whose_offsets_miss_the_words_are_not_trained_on() {
    let dir = scratch("misaligned");
    // Offsets one past where the entities are, as a tool counting from 1 would write them.
    let mut lines = String::new();
    for i in 0..20 {
        lines.push_str(
            &serde_json::json!({
                "text": format!("Anna Kovacs flew to Lisbon on day {i}."),
                "spans": [
                    {"start": 1, "end": 12, "label": "PER"},
                    {"start": 21, "end": 27, "label": "LOC"}
                ]
            })
            .to_string(),
        );
        lines.push('\n');
    }
    let data = dir.join("train.jsonl");
    std::fs::write(&data, lines).unwrap();
    let out = nertrain(&[
        "fit",
        "--config",
        "configs/sample.toml",
        "--set",
        &format!("data.train={}", data.display()),
        "--set",
        &format!("train.output={}", dir.join("run").display()),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("40 of its 40 spans do not start and end at word boundaries"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.join("run").exists());
}

#[test]
fn text_with_markup_leaves_the_offline_page_whole() {
    let model = sample_model("sentence");
    let text = "Anna <!--<script>alert(1)</script> & </script> in Berlin";
    let out = nertrain(&[
        "tag",
        "--model",
        model.to_str().unwrap(),
        "--format",
        "html",
        text,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = stdout(&out);
    let start = page
        .find(r#"<script id="records" type="application/json">"#)
        .unwrap();
    let data = &page[start..];
    let data = &data[data.find('>').unwrap() + 1..data.find("</script>").unwrap()];
    assert!(!data.contains(['<', '>', '&']), "{data}");
    let records: Vec<serde_json::Value> = serde_json::from_str(data).unwrap();
    assert_eq!(records[0]["text"], text);
    // The page's own script follows, whole.
    assert_eq!(page.matches("<script").count(), 2, "{page}");
}

#[test]
fn a_request_that_fails_in_a_batch_fails_alone() {
    let model = sample_model("sentence");
    // A wait long enough for the two requests to be tagged as one batch.
    let server = Server::start(
        &model,
        &["--batch-wait-ms", "300"],
        Some(("NERTRAIN_FAILPOINT", "serve-panic")),
    );
    std::thread::scope(|scope| {
        let failing = scope.spawn(|| server.tag(&serde_json::json!({"texts": ["panic"]})));
        std::thread::sleep(Duration::from_millis(50));
        let innocent = scope.spawn(|| server.tag(&serde_json::json!({"texts": ["Anna"]})));
        let (status, body) = failing.join().unwrap();
        assert_eq!(status, 500, "{body}");
        let (status, body) = innocent.join().unwrap();
        assert_eq!(status, 200, "{body}");
    });
    let (_, log) = server.terminate();
    assert!(log.contains("POST /tag 500 texts=0"), "{log}");
}
