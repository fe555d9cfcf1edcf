//! Dictionary features end to end: the dictionary is stored in the model with its SHA-256 and
//! read back by everything that loads the model; bad dictionaries and settings are errors that
//! name the file and line or the key.

mod common;

use common::{
    fit_small, learning_curve, nertrain, sample_model, scratch, scratch_at, stderr, tag_json,
};

#[test]
fn the_dictionary_is_stored_with_its_hash_and_a_changed_one_is_refused() {
    let model = sample_model("dictionary");
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(model.join("model.json")).unwrap()).unwrap();
    let recorded = &meta["dictionary"];
    assert_eq!(
        recorded["labels"],
        serde_json::json!(["LOC", "ORG", "PER_LAST"])
    );
    assert_eq!(recorded["entries"], 100);
    assert_eq!(meta["sizes"]["dictionary_labels"], 3);
    let stored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(model.join("dictionary.json")).unwrap())
            .unwrap();
    assert_eq!(stored["entries"].as_array().unwrap().len(), 100);

    // A copy whose dictionary was edited is not silently read with other features.
    let copy = scratch("dictionary-changed");
    for entry in std::fs::read_dir(&model).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
        }
    }
    let text = std::fs::read_to_string(copy.join("dictionary.json")).unwrap();
    std::fs::write(copy.join("dictionary.json"), text.replace("Berlin", "Bern")).unwrap();
    let tagged = nertrain(&[
        "tag",
        "--model",
        copy.to_str().unwrap(),
        "Anna flew to Bern .",
    ]);
    assert!(!tagged.status.success());
    let error = stderr(&tagged);
    assert!(
        error.contains("dictionary.json") && error.contains("SHA-256"),
        "{error}"
    );
    std::fs::remove_dir_all(&copy).unwrap();
}

#[test]
fn bad_dictionaries_and_settings_are_errors_naming_them() {
    let dir = scratch("dictionary-errors");
    let lists = dir.join("lists.tsv");
    std::fs::write(&lists, "# places\nLOC\tBerlin\nLOC Paris\n").unwrap();
    let dictionaries = format!("data.dictionaries=[{:?}]", lists.to_str().unwrap());
    let fit = fit_small(
        &dir.join("run"),
        1,
        &["--set", &dictionaries, "--set", "model.dictionary_dim=3"],
    );
    assert!(!fit.status.success());
    let error = stderr(&fit);
    assert!(
        error.contains("lists.tsv:3: expected LABEL<TAB>phrase"),
        "{error}"
    );
    std::fs::write(&lists, "LOC\tBerlin\n").unwrap();
    let fit = fit_small(&dir.join("run"), 1, &["--set", &dictionaries]);
    assert!(!fit.status.success());
    assert!(
        stderr(&fit).contains("model.dictionary_dim"),
        "{}",
        stderr(&fit)
    );
    // A model trained without dictionaries is continued without them: its network has no
    // place for their features.
    let plain = sample_model("sentence");
    let start = format!("train.start_from={:?}", plain.to_str().unwrap());
    // The sample model's own character filters, so that only the dictionary differs.
    let fit = fit_small(
        &dir.join("run"),
        1,
        &[
            "--set",
            "model.char_filters=30",
            "--set",
            &dictionaries,
            "--set",
            "model.dictionary_dim=3",
            "--set",
            &start,
        ],
    );
    assert!(!fit.status.success());
    assert!(
        stderr(&fit).contains("model.dictionary_dim is 3 in the experiment but 0 in the model"),
        "{}",
        stderr(&fit)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_resumed_run_with_dictionary_dropout_matches_an_uninterrupted_one() {
    let dictionary = [
        "--set",
        r#"data.dictionaries=["data/sample/lists.tsv"]"#,
        "--set",
        "model.dictionary_dim=3",
        "--set",
        "train.dictionary_dropout=0.5",
    ];
    let whole = scratch_at("dictionary-whole", "run");
    assert!(fit_small(&whole, 3, &dictionary).status.success());
    let split = scratch_at("dictionary-split", "run");
    assert!(fit_small(&split, 1, &dictionary).status.success());
    let mut resume = dictionary.to_vec();
    resume.push("--resume");
    let resumed = fit_small(&split, 3, &resume);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert_eq!(learning_curve(&split).len(), 3);
    assert_eq!(learning_curve(&whole), learning_curve(&split));
    // And the dropout draws change what is learnt: without it the curve differs.
    let plain = scratch_at("dictionary-no-dropout", "run");
    let mut no_dropout = dictionary.to_vec();
    no_dropout[5] = "train.dictionary_dropout=0";
    assert!(fit_small(&plain, 3, &no_dropout).status.success());
    assert_ne!(learning_curve(&whole), learning_curve(&plain));
}

#[test]
fn dictionaries_given_at_tag_time_extend_or_replace_the_models_without_retraining() {
    let model = sample_model("dictionary");
    let dir = scratch("dictionary-tag-time");
    let text = "Anna Novak flew to Zorblat on Monday .";
    let extra = dir.join("extra.tsv");
    std::fs::write(&extra, "LOC\tZorblat\n").unwrap();
    let probs = |args: &[&str]| -> Vec<serde_json::Value> {
        let record = tag_json(&model, &[&["--probs"], args, &[text]].concat()).remove(0);
        record["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["probs"].clone())
            .collect()
    };
    let before = probs(&[]);
    let extended = probs(&["--dictionary", extra.to_str().unwrap()]);
    // The new entry is a feature of its word: its probabilities move.
    assert_ne!(before[4], extended[4]);
    // Replacing the model's LOC entries by the file's: no other LOC phrase was in the sentence.
    let replaced = probs(&[
        "--dictionary",
        extra.to_str().unwrap(),
        "--replace-dictionary",
    ]);
    assert_eq!(replaced[4], extended[4]);

    // A label the model has no features for, and a model without dictionaries, are errors.
    let tag_with_extra = || {
        nertrain(&[
            "tag",
            "--model",
            model.to_str().unwrap(),
            "--dictionary",
            extra.to_str().unwrap(),
            text,
        ])
    };
    std::fs::write(&extra, "GENE\tBRCA1\n").unwrap();
    let out = tag_with_extra();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "extra.tsv: label GENE is not one of the model's dictionary labels (LOC, ORG, PER_LAST)"
        ),
        "{}",
        stderr(&out)
    );
    let plain = sample_model("sentence");
    let out = nertrain(&[
        "eval",
        "--model",
        plain.to_str().unwrap(),
        "--data",
        "data/sample/dev.txt",
        "--dictionary",
        extra.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("was trained without dictionaries"),
        "{}",
        stderr(&out)
    );

    // What fit says of a dictionary, tag and eval say too: entries given twice and those too
    // long to be features are counted, not dropped without a word.
    let long = vec!["w"; 17].join(" ");
    std::fs::write(&extra, format!("LOC\tZorblat\nLOC\tZorblat\nLOC\t{long}\n")).unwrap();
    for command in ["tag", "eval"] {
        let mut args = vec![command, "--model", model.to_str().unwrap()];
        args.extend(["--dictionary", extra.to_str().unwrap()]);
        if command == "eval" {
            args.extend(["--data", "data/sample/dev.txt"]);
        } else {
            args.push(text);
        }
        let out = nertrain(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stderr(&out)
                .contains("extra.tsv: 1 entries, 1 given twice, 1 of more than 16 words left out"),
            "{command}: {}",
            stderr(&out)
        );
    }
    // A byte that is not UTF-8 is an error at its line.
    std::fs::write(&extra, b"LOC\tBerlin\nLOC\tParis\nLOC\tM\xfcnchen\n").unwrap();
    let out = tag_with_extra();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("extra.tsv:3: invalid UTF-8"),
        "{}",
        stderr(&out)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
