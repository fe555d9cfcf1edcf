//! `nertrain card`: a run's model card, its Hugging Face metadata equal to the scores the run
//! recorded, and a README.md of someone else's never replaced.

mod common;

use common::{fit_small, nertrain, scratch, scratch_at, stderr, stdout, store_recall};
use serde_json::Value;

/// The card's front matter: each `key: value` line, its value JSON (YAML's flow style).
fn front_matter(card: &str) -> serde_json::Map<String, Value> {
    let mut lines = card.lines();
    assert_eq!(lines.next(), Some("---"), "{card}");
    lines
        .take_while(|l| *l != "---")
        .map(|line| {
            let (key, value) = line.split_once(": ").unwrap();
            (key.to_string(), serde_json::from_str(value).unwrap())
        })
        .collect()
}

#[test]
fn the_card_holds_the_scores_the_run_recorded() {
    let run = scratch_at("card", "run");
    assert!(fit_small(&run, 2, &[]).status.success());
    store_recall(&run, "LOC=50");
    let out = nertrain(&["card", "--model", run.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let card = std::fs::read_to_string(run.join("README.md")).unwrap();
    let meta = front_matter(&card);
    assert_eq!(meta["library_name"], "nertrain");
    let index = &meta["model-index"][0];
    assert_eq!(index["name"], "run");
    let results = index["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "dev and test");
    for (result, (file, split, path)) in results.iter().zip([
        ("dev.json", "validation", "data/sample/dev.txt"),
        ("test.json", "test", "data/sample/test.txt"),
    ]) {
        let recorded: Value =
            serde_json::from_str(&std::fs::read_to_string(run.join(file)).unwrap()).unwrap();
        assert_eq!(result["dataset"]["split"], split);
        assert_eq!(result["dataset"]["type"], "sample");
        assert!(
            card.contains(&format!("`{path}`")),
            "the data table names {path}"
        );
        let metric = |name: &str| {
            let metrics = result["metrics"].as_array().unwrap();
            let found = metrics.iter().find(|m| m["name"] == name);
            found.unwrap_or_else(|| panic!("{name} in {result}"))["value"].clone()
        };
        assert_eq!(metric("F1"), recorded["overall"]["f1"]);
        assert_eq!(metric("Recall"), recorded["overall"]["recall"]);
        let types = recorded["types"].as_object().unwrap();
        assert_eq!(types.len(), 4);
        for (label, scores) in types {
            for (key, name) in [
                ("f1", "F1"),
                ("precision", "Precision"),
                ("recall", "Recall"),
            ] {
                assert_eq!(
                    metric(&format!("{label} {name}")),
                    scores[key],
                    "{label} {key}"
                );
            }
        }
    }
    for section in [
        "## Training data",
        "## Model",
        "## Confidence thresholds",
        "## How to tag",
    ] {
        assert!(card.contains(section), "{section}");
    }
    assert!(card.contains("```toml\n"), "the experiment");
    // Written again, it is the same card; a README.md of someone else's stays as it was.
    let again = nertrain(&["card", "--model", run.to_str().unwrap(), "--output", "-"]);
    assert_eq!(stdout(&again), card);
    assert!(
        nertrain(&["card", "--model", run.to_str().unwrap()])
            .status
            .success()
    );
    std::fs::write(run.join("README.md"), "my notes\n").unwrap();
    let refused = nertrain(&["card", "--model", run.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("did not write"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(
        std::fs::read_to_string(run.join("README.md")).unwrap(),
        "my notes\n"
    );
    // Nor elsewhere: --output replaces a card, never another file.
    let notes = run.join("NOTES.md");
    std::fs::write(&notes, "my notes\n").unwrap();
    let elsewhere = nertrain(&[
        "card",
        "--model",
        run.to_str().unwrap(),
        "--output",
        notes.to_str().unwrap(),
    ]);
    assert_eq!(elsewhere.status.code(), Some(2), "{}", stderr(&elsewhere));
    assert!(stderr(&elsewhere).contains("did not write"));
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "my notes\n");
    let card_file = run.join("CARD.md");
    for _ in 0..2 {
        let written = nertrain(&[
            "card",
            "--model",
            run.to_str().unwrap(),
            "--output",
            card_file.to_str().unwrap(),
        ]);
        assert!(written.status.success(), "{}", stderr(&written));
    }
    assert_eq!(std::fs::read_to_string(&card_file).unwrap(), card);
}

#[test]
fn a_directory_that_is_not_a_model_is_named() {
    let dir = scratch("card-empty");
    let out = nertrain(&["card", "--model", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not a nertrain model directory"),
        "{}",
        stderr(&out)
    );
}
