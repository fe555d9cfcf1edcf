//! Operating points end to end: `eval --thresholds` chooses per-label confidence thresholds on
//! a gold file, `--store` keeps them with the model, and `tag` and `eval` apply them (or those
//! given, or none); a run that publishes new weights forgets them.

mod common;

use common::{
    Scratch, eval_json, fit_small, nertrain, scratch_at, stderr, stdout, store_recall,
    stored_thresholds, tag_json, workspace,
};
use serde_json::Value;

/// A copy of the binary's stored sample model, to write thresholds into.
fn model_copy(name: &str) -> Scratch {
    let from = workspace().join("crates/cli/tests/fixtures/before-tokenizers/sentence");
    let dir = scratch_at(name, "model");
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["model.json", "vocab.json", "model.bpk"] {
        std::fs::copy(from.join(file), dir.join(file)).unwrap();
    }
    dir
}

const TEXTS: [&str; 2] = [
    "Peter Weber lives in Berlin and works for Siemens.",
    "Anna Schmidt, who works for Siemens, arrived in Lisbon on Monday.",
];

#[test]
fn thresholds_chosen_on_dev_keep_the_recall_asked_and_apply_everywhere() {
    let model = model_copy("chosen");
    let all = eval_json(&model, &[]);
    let per = &all["types"]["PER"];
    let sweep = eval_json(&model, &["--thresholds", "--recall", "PER=60"]);
    // With every entity kept, the sweep's scores are eval's.
    let kept = &sweep["labels"]["PER"]["all"];
    assert_eq!(kept["recall"], per["recall"]);
    assert_eq!(kept["precision"], per["precision"]);
    let threshold = sweep["chosen"]["PER"]["threshold"].as_f64().unwrap();
    let chosen = &sweep["chosen"]["PER"]["chosen"];
    assert!(0.0 < threshold && threshold < 1.0, "{sweep}");
    // The curve runs from the most confident entity down, each point a threshold.
    let curve = sweep["labels"]["PER"]["curve"].as_array().unwrap();
    let recalls: Vec<f64> = curve
        .iter()
        .map(|p| p["recall"].as_f64().unwrap())
        .collect();
    assert!(recalls.windows(2).all(|w| w[0] <= w[1]), "{recalls:?}");
    assert!(
        !model.join("thresholds.json").exists(),
        "stored without --store"
    );

    let printed = store_recall(&model, "PER=60");
    assert!(printed.contains("PER: threshold"), "{printed}");
    let stored = stored_thresholds(&model);
    assert_eq!(stored["labels"]["PER"]["threshold"], threshold);
    assert_eq!(stored["labels"]["PER"]["chosen"]["target_recall"], 60.0);

    // eval now applies them: PER at the recall and precision chosen, other labels as before.
    let applied = eval_json(&model, &[]);
    let per_applied = &applied["types"]["PER"];
    assert_eq!(per_applied["recall"], chosen["recall"]);
    assert_eq!(per_applied["precision"], chosen["precision"]);
    assert!(per_applied["recall"].as_f64() >= Some(60.0));
    assert!(per_applied["found"].as_u64() < per["found"].as_u64());
    assert_eq!(applied["types"]["LOC"], all["types"]["LOC"]);
    assert_eq!(eval_json(&model, &["--all-entities"]), all);

    // tag leaves the entities below it out, tagging their words O, and keeps the rest.
    let tagged = tag_json(&model, &TEXTS);
    let mut every = vec!["--all-entities"];
    every.extend(TEXTS);
    let untouched = tag_json(&model, &every);
    let mut dropped = 0;
    for (with, without) in tagged.iter().zip(&untouched) {
        let entities = |record: &Value| record["entities"].as_array().unwrap().clone();
        let expected: Vec<Value> = entities(without)
            .into_iter()
            .filter(|e| e["label"] != "PER" || e["confidence"].as_f64().unwrap() >= threshold)
            .collect();
        dropped += entities(without).len() - expected.len();
        assert_eq!(entities(with), expected);
    }
    assert!(
        dropped > 0,
        "the texts have a PER entity under the threshold"
    );
    let conll = nertrain(&[
        "tag",
        "--model",
        model.to_str().unwrap(),
        "--format",
        "conll",
        TEXTS[0],
    ]);
    let tags: Vec<String> = stdout(&conll)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
        .collect();
    assert_eq!(&tags[..2], ["O", "O"], "Peter Weber, left out: {tags:?}");
    assert!(tags.contains(&"B-LOC".to_string()), "{tags:?}");

    // Thresholds given replace the stored ones.
    let mut given = vec!["--threshold", "PER=0"];
    given.extend(TEXTS);
    assert_eq!(tag_json(&model, &given), untouched);
}

#[test]
fn a_recall_past_the_models_own_is_bought_with_a_bias() {
    let model = model_copy("bias");
    let all = eval_json(&model, &[]);
    let per = &all["types"]["PER"];
    assert!(per["recall"].as_f64() < Some(95.0), "{per}");
    let printed = store_recall(&model, "PER=95");
    assert!(printed.contains("PER: bias"), "{printed}");
    let stored = stored_thresholds(&model);
    let bias = stored["labels"]["PER"]["bias"].as_f64().unwrap();
    assert!(
        bias > 0.0 && stored["labels"]["PER"]["threshold"] == 0.0,
        "{stored}"
    );
    // Decoded with the bias, dev's PER recall is the one chosen, paid for in precision.
    let biased = eval_json(&model, &[]);
    let chosen = &stored["labels"]["PER"]["chosen"];
    assert_eq!(biased["types"]["PER"]["recall"], chosen["recall"]);
    assert!(biased["types"]["PER"]["recall"].as_f64() >= Some(95.0));
    assert!(biased["types"]["PER"]["found"].as_u64() > per["found"].as_u64());
    assert_eq!(eval_json(&model, &["--all-entities"]), all);
    let given = format!("PER={bias}");
    assert_eq!(eval_json(&model, &["--bias", &given]), biased);
    // The path stays well formed: every I- tag continues an entity of its type.
    let out = nertrain(&[
        "tag",
        "--model",
        model.to_str().unwrap(),
        "--format",
        "conll",
        "--input",
        "data/sample/pool.txt",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut before = "O".to_string();
    let lines = stdout(&out);
    assert!(lines.lines().filter(|l| l.contains("-PER")).count() > 20);
    for line in lines.lines() {
        let tag = line.split_whitespace().nth(1).unwrap_or("O").to_string();
        if let Some(label) = tag.strip_prefix("I-") {
            assert!(before.ends_with(label), "{before} then {tag}");
        }
        before = tag;
    }
    let range = nertrain(&[
        "tag",
        "--model",
        model.to_str().unwrap(),
        "--bias",
        "PER=101",
        "x",
    ]);
    assert_eq!(range.status.code(), Some(2));
    assert!(stderr(&range).contains("--bias PER=101: expected a number from -100 to 100"));
}

#[test]
fn bad_thresholds_and_recalls_out_of_reach_are_usage_errors() {
    let model = model_copy("bad");
    let m = model.to_str().unwrap();
    let unknown = nertrain(&["tag", "--model", m, "--threshold", "CITY=0.5", "x"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(stderr(&unknown).contains("CITY: not a label of the model (LOC, MISC, ORG, PER)"));
    let range = nertrain(&["tag", "--model", m, "--threshold", "PER=1.5", "x"]);
    assert_eq!(range.status.code(), Some(2));
    assert!(
        stderr(&range).contains("expected a number from 0 to 1"),
        "{}",
        stderr(&range)
    );
    let shape = nertrain(&["tag", "--model", m, "--threshold", "PER", "x"]);
    assert_eq!(shape.status.code(), Some(2));
    assert!(
        stderr(&shape).contains("expected LABEL=NUMBER"),
        "{}",
        stderr(&shape)
    );
    let learner = scratch_at("bad-learner", "versions");
    let learning = nertrain(&[
        "serve",
        "--model",
        m,
        "--train-into",
        learner.to_str().unwrap(),
        "--bias",
        "PER=1",
    ]);
    assert_eq!(learning.status.code(), Some(2));
    assert!(stderr(&learning).contains("a server that learns serves new weights"));
    assert!(!learner.exists(), "refused before anything is written");
    let dev = ["--data", "data/sample/dev.txt", "--thresholds"];
    let mut given = vec!["eval", "--model", m];
    given.extend(dev);
    given.extend(["--bias", "PER=1"]);
    let sweep_with_given = nertrain(&given);
    assert_eq!(sweep_with_given.status.code(), Some(2));
    assert!(stderr(&sweep_with_given).contains("cannot be used with"));
    let mut args = vec!["eval", "--model", m];
    args.extend(dev);
    args.extend(["--recall", "PER=99.9", "--store"]);
    let reach = nertrain(&args);
    assert_eq!(reach.status.code(), Some(2));
    assert!(
        stderr(&reach).contains(
            "PER=99.9: out of reach on data/sample/dev.txt: the model's own entities keep 93.75%"
        ),
        "{}",
        stderr(&reach)
    );
    assert!(!model.join("thresholds.json").exists());
    std::fs::write(
        model.join("thresholds.json"),
        r#"{"labels": {"PER": {"threshold": 2}}}"#,
    )
    .unwrap();
    let broken = nertrain(&["tag", "--model", m, "x"]);
    assert_eq!(broken.status.code(), Some(1));
    assert!(
        stderr(&broken).contains("thresholds.json: labels.PER.threshold: expected a number"),
        "{}",
        stderr(&broken)
    );
}

#[test]
fn new_weights_forget_the_thresholds_chosen_for_the_old() {
    let run = scratch_at("forget", "run");
    assert!(fit_small(&run, 1, &[]).status.success());
    let store = |recall: &str| drop(store_recall(&run, recall));
    store("PER=1");
    let weights = std::fs::read(run.join("model.bpk")).unwrap();
    let resumed = fit_small(&run, 3, &["--resume"]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert_ne!(std::fs::read(run.join("model.bpk")).unwrap(), weights);
    assert!(!run.join("thresholds.json").exists());
    // An overwrite starts a run afresh, thresholds included.
    store("PER=1");
    let again = fit_small(&run, 1, &["--overwrite"]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(!run.join("thresholds.json").exists());
}

#[test]
fn operating_points_chosen_one_after_another_hold_together() {
    let model = model_copy("combined");
    let m = model.to_str().unwrap();
    let choose = |recalls: &[&str]| {
        let mut args = vec!["eval", "--model", m, "--data", "data/sample/dev.txt"];
        args.extend(["--thresholds", "--store"]);
        for recall in recalls {
            args.extend(["--recall", recall]);
        }
        nertrain(&args)
    };
    let per_alone = store_recall(&model, "PER=95");
    assert!(per_alone.contains("PER: bias"), "{per_alone}");
    // ORG's bias takes entities from PER: with it, PER's 95% is out of reach, so ORG's is
    // refused rather than stored beside a PER recall that decoding no longer delivers.
    let before = std::fs::read(model.join("thresholds.json")).unwrap();
    let refused = choose(&["ORG=95"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains(
            "PER=95: out of reach on data/sample/dev.txt with the other \
                                   operating points (ORG bias"
        ),
        "{}",
        stderr(&refused)
    );
    assert_eq!(
        std::fs::read(model.join("thresholds.json")).unwrap(),
        before
    );
    // PER at 90% is chosen again with ORG's bias, and both hold.
    drop(store_recall(&model, "PER=90"));
    let both = store_recall(&model, "ORG=95");
    assert!(
        both.contains("ORG: bias") && both.contains("PER: "),
        "{both}"
    );
    let stored = stored_thresholds(&model);
    let applied = eval_json(&model, &[]);
    for (label, target) in [("PER", 90.0), ("ORG", 95.0)] {
        let chosen = &stored["labels"][label]["chosen"];
        let delivered = &applied["types"][label];
        assert_eq!(delivered["recall"], chosen["recall"], "{label}: {stored}");
        assert_eq!(delivered["precision"], chosen["precision"], "{label}");
        assert!(
            delivered["recall"].as_f64() >= Some(target),
            "{label}: {delivered}"
        );
    }
    // Recalls that cannot be chosen are refused, and nothing is stored.
    let before = std::fs::read(model.join("thresholds.json")).unwrap();
    for (recalls, said) in [
        (&["PER=0"][..], "PER=0: expected a percentage above 0"),
        (&["LOC=90", "LOC=95"][..], "LOC: given twice"),
    ] {
        let out = choose(recalls);
        assert_eq!(out.status.code(), Some(2), "{recalls:?}");
        assert!(stderr(&out).contains(said), "{}", stderr(&out));
    }
    assert_eq!(
        std::fs::read(model.join("thresholds.json")).unwrap(),
        before
    );
    // A label twice in thresholds.json is an error naming it, not the last one silently.
    std::fs::write(
        model.join("thresholds.json"),
        r#"{"labels": {"PER": {"threshold": 0.5}, "PER": {"threshold": 0.1}}}"#,
    )
    .unwrap();
    let twice = nertrain(&["tag", "--model", m, "x"]);
    assert_eq!(twice.status.code(), Some(1));
    assert!(
        stderr(&twice).contains("thresholds.json") && stderr(&twice).contains("PER: given twice"),
        "{}",
        stderr(&twice)
    );
}
