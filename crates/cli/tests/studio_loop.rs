//! The annotation loop as Label Studio's ML backend, on loopback without Label Studio: `/predict`
//! marks on each task the regions `select --regions` would mark, decodes again with the
//! entities an annotator has drawn forced (interactive pre-annotation), and refuses a context it
//! cannot take; versions are served by hand, with the credentials, and only accepted ones.

mod common;

use common::{Server, copy_files, nertrain, sample_model, scratch, scratch_at, stderr};

const CONFIG: &str = r#"<View><Labels name="ents" toName="doc"><Label value="PER"/><Label value="LOC"/><Label value="ORG"/><Label value="MISC"/></Labels><Labels name="check" toName="doc"><Label value="check"/></Labels><Text name="doc" value="$body"/></View>"#;

const GOOD: &str = "Authorization: Basic c3R1ZGlvOnMzY3JldA==";
const CREDENTIALS: [(&str, &str); 2] =
    [("BASIC_AUTH_USER", "studio"), ("BASIC_AUTH_PASS", "s3cret")];

fn texts() -> Vec<String> {
    vec![
        "Anna Schmidt, who works for Siemens, arrived in Lisbon on Monday.".into(),
        "Peter Novak moved to Oslo. Novak said Oslo was cold!".into(),
        "Shares of Atlas Airlines fell 12 percent after the German report.".into(),
        "Tomas Brennan and Tanaka met in Helsinki to discuss the Greek elections.".into(),
        "Zoë visited Zürich 🙂 and Kyoto.".into(),
    ]
}

fn predict(server: &Server, body: serde_json::Value) -> (u16, serde_json::Value) {
    let (status, body) = server.request("POST", "/predict", body.to_string().as_bytes());
    let value = serde_json::from_str(&body).unwrap_or_else(|_| panic!("{status} {body}"));
    (status, value)
}

/// Each result's regions of `from_name`, as (start, end, label).
fn regions(result: &serde_json::Value, from_name: &str) -> Vec<(u64, u64, String)> {
    result["result"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["from_name"] == from_name)
        .map(|r| {
            let v = &r["value"];
            let label = v["labels"][0].as_str().unwrap().to_string();
            (
                v["start"].as_u64().unwrap(),
                v["end"].as_u64().unwrap(),
                label,
            )
        })
        .collect()
}

#[test]
fn predict_marks_the_regions_select_marks_and_forces_what_the_annotator_drew() {
    let model = sample_model("sentence");
    let server = Server::start(&model, &["--regions", "0.95"], None);
    let texts = texts();
    let tasks: Vec<serde_json::Value> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| serde_json::json!({"id": 10 + i, "data": {"body": t}}))
        .collect();
    let (status, answer) = predict(
        &server,
        serde_json::json!({"tasks": tasks, "label_config": CONFIG}),
    );
    assert_eq!(status, 200, "{answer}");
    let results = answer["results"].as_array().unwrap();

    // select, on the same texts with the same threshold and a budget that takes every text
    // with a region: the same regions, as data.known of its tasks, and the same pre-annotation.
    let dir = scratch("studio-loop-regions");
    let pool = dir.join("pool.txt");
    std::fs::write(&pool, texts.join("\n") + "\n").unwrap();
    let chosen = dir.join("chosen.json");
    let output = nertrain(&[
        "select",
        "--model",
        model.to_str().unwrap(),
        "--input",
        pool.to_str().unwrap(),
        "--budget",
        "100000",
        "--budget-unit",
        "tokens",
        "--regions",
        "0.95",
        "--max-similarity",
        "1",
        "--output",
        chosen.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let chosen: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&chosen).unwrap()).unwrap();
    let mut marked = 0;
    for (i, result) in results.iter().enumerate() {
        let checks: Vec<(u64, u64)> = regions(result, "check")
            .into_iter()
            .map(|(s, e, label)| {
                assert_eq!(label, "check");
                (s, e)
            })
            .collect();
        let task = chosen.iter().find(|t| t["data"]["line"] == i + 1);
        let known: Vec<(u64, u64)> = task.map_or_else(Vec::new, |t| {
            serde_json::from_value(t["data"]["known"].clone()).unwrap()
        });
        assert_eq!(checks, known, "text {i}: {result}");
        marked += checks.len();
        // One builder: the same entities, confidences and task score as select's task.
        if let Some(task) = task {
            let prediction = &task["predictions"][0];
            assert_eq!(
                regions(result, "ents"),
                regions(prediction, "label"),
                "text {i}"
            );
            let near = |a: &serde_json::Value, b: &serde_json::Value| {
                (a.as_f64().unwrap() - b.as_f64().unwrap()).abs() < 1e-9
            };
            assert!(
                near(&result["score"], &prediction["score"]),
                "text {i}: {result} {prediction}"
            );
            let confidences = |r: &serde_json::Value, from_name: &str| -> Vec<serde_json::Value> {
                let regions = r["result"].as_array().unwrap().iter();
                regions
                    .filter(|r| r["from_name"] == from_name)
                    .map(|r| r["score"].clone())
                    .collect()
            };
            let (served, written) = (
                confidences(result, "ents"),
                confidences(prediction, "label"),
            );
            assert!(
                served.iter().zip(&written).all(|(a, b)| near(a, b)),
                "text {i}: {result} {prediction}"
            );
        }
    }
    assert!(marked > 0, "no text has a region below 0.95: {answer}");

    // The annotator draws "Anna" as ORG on the first task: decoded again around it.
    let forced = |start: usize, end: usize, text: &str, label: &str| {
        serde_json::json!({"from_name": "ents", "to_name": "doc", "type": "labels",
            "value": {"start": start, "end": end, "text": text, "labels": [label]}})
    };
    let context = |results: Vec<serde_json::Value>| {
        serde_json::json!({"tasks": [tasks[0]], "label_config": CONFIG,
            "params": {"login": null, "password": null, "context": {"result": results}}})
    };
    let (status, answer) = predict(&server, context(vec![forced(0, 4, "Anna", "ORG")]));
    assert_eq!(status, 200, "{answer}");
    let entities = regions(&answer["results"][0], "ents");
    assert!(entities.contains(&(0, 4, "ORG".into())), "{entities:?}");
    assert!(
        entities
            .iter()
            .all(|e| e.0 >= 4 || *e == (0, 4, "ORG".into())),
        "{entities:?}"
    );
    // A context without regions of the entity control changes nothing (but the float rounding
    // of a batch of another shape, in the scores).
    let (_, plain) = predict(&server, context(Vec::new()));
    for from_name in ["ents", "check"] {
        assert_eq!(
            regions(&plain["results"][0], from_name),
            regions(&results[0], from_name)
        );
    }

    // What cannot be forced is refused, naming it.
    let cases = [
        (
            context(vec![
                forced(0, 12, "Anna Schmidt", "PER"),
                forced(5, 12, "Schmidt", "PER"),
            ]),
            422,
            "may not overlap",
        ),
        (
            context(vec![forced(0, 4, "Bob!", "PER")]),
            422,
            "do not point at its text",
        ),
        (
            context(vec![forced(0, 4, "Anna", "GENE")]),
            422,
            "not one of the model's",
        ),
        (
            context(vec![
                forced(0, 4, "Anna", "ORG"),
                forced(4, 0, "Anna", "PER"),
            ]),
            422,
            "context.result[1]: region 4..0 (PER) is reversed",
        ),
        (
            context(vec![forced(2, 2, "Anna", "PER")]),
            422,
            "the text there is empty (the region covers nothing)",
        ),
        (
            context(vec![forced(0, 4, "Anna", "PER"); 10_001]),
            422,
            "context.result: 10001 regions, more than the 10000",
        ),
        (
            serde_json::json!({"tasks": tasks, "label_config": CONFIG,
                "params": {"context": {"result": [forced(0, 4, "Anna", "ORG")]}}}),
            400,
            "one task",
        ),
    ];
    for (body, want, says) in cases {
        let (status, answer) = predict(&server, body);
        assert_eq!(status, want, "{answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(error.contains(says) && error.contains("context"), "{error}");
    }
}

/// The weights id `nertrain serve` gives `model`.
fn served_id(server: &Server) -> String {
    let (status, body) = server.request("GET", "/model", b"");
    assert_eq!(status, 200, "{body}");
    let model: serde_json::Value = serde_json::from_str(&body).unwrap();
    model["version"].as_str().unwrap().to_string()
}

#[test]
fn accepted_versions_are_served_by_hand_with_the_credentials() {
    let base = sample_model("sentence");
    // Another model: the same recipe with another seed (weights files are written alike for
    // alike weights, so it must learn others).
    let other = scratch_at("studio-loop-other", "run");
    let fitted = common::fit_small(&other, 2, &["--set", "train.seed=7"]);
    assert!(fitted.status.success(), "{}", stderr(&fitted));
    let server = Server::start(&base, &[], None);
    let base_id = served_id(&server);
    // Without versions, there is nothing to serve.
    let (status, body) = server.request("POST", "/versions/v1/serve", b"");
    assert_eq!(status, 409, "{body}");
    drop(server);

    // A versions directory as learning leaves it: v1 accepted and served, v2 kept, not served.
    let dir = scratch("studio-loop-versions");
    copy_files(&other, &dir.join("v1"));
    copy_files(&other, &dir.join("v2"));
    let record = |name: &str, served: bool| {
        serde_json::json!({"name": name, "id": null, "served": served, "heldout_f1": 50.0,
            "previous_f1": 40.0, "train_tasks": 8, "heldout_tasks": 2,
            "reason": if served { "no worse" } else { "below the served model" },
            "seconds": 1.0})
    };
    let registry = serde_json::json!({"base": base_id, "project": null, "served": "v1",
        "versions": [record("v1", true), record("v2", false)]});
    std::fs::write(dir.join("versions.json"), registry.to_string()).unwrap();
    let into = dir.to_str().unwrap();
    let server = Server::start_with(&base, &["--train-into", into], &CREDENTIALS);
    let v1_id = served_id(&server);
    assert_ne!(v1_id, base_id);
    let serve = |name: &str, headers: &[&str]| {
        let (line, body) =
            server.exchange_with("POST", &format!("/versions/{name}/serve"), b"", headers);
        (line[9..12].parse::<u16>().unwrap(), body)
    };
    let (status, body) = serve("base", &[]);
    assert_eq!(status, 401, "{body}");
    assert_eq!(served_id(&server), v1_id);
    for (name, want, says) in [
        ("v9", 404, "no version is named"),
        ("v2", 409, "never accepted"),
    ] {
        let (status, body) = serve(name, &[GOOD]);
        assert_eq!(status, want, "{body}");
        assert!(body.contains(says), "{body}");
    }
    // Back to the base model, and forth to v1: served at once, and kept for a restart.
    let (status, body) = serve("base", &[GOOD]);
    assert_eq!(status, 200, "{body}");
    assert_eq!(served_id(&server), base_id);
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("versions.json")).unwrap()).unwrap();
    assert!(saved["served"].is_null(), "{saved}");
    let (status, body) = serve("v1", &[GOOD]);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&v1_id), "{body}");
    assert_eq!(served_id(&server), v1_id);
    drop(server);
    let server = Server::start_with(&base, &["--train-into", into], &CREDENTIALS);
    assert_eq!(served_id(&server), v1_id);
}
