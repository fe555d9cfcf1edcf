//! Nothing lost through the annotation loop: annotation tools' exports read as each tool meant
//! them (offset units, answers, annotators) and round-tripped through `convert`, `fit` and
//! `select` with emoji and CJK in the texts; `--start-from` that cannot destroy a run; `select`
//! outputs that cannot replace the pool or break the model.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{nertrain, sample_model, scratch, snapshot, stderr, stdout, tag_json};

/// `fit` on the sample's config with small sizes and one epoch; `extra` are more arguments.
fn fit(output: &Path, extra: &[&str]) -> Output {
    common::fit_small(output, 1, extra)
}

/// `select` of the sample model on `pool`; `extra` are more arguments.
fn select(pool: &Path, budget: &str, extra: &[&str]) -> Output {
    let model = sample_model("sentence");
    let mut args = vec![
        "select",
        "--model",
        model.to_str().unwrap(),
        "--input",
        pool.to_str().unwrap(),
        "--budget",
        budget,
    ];
    args.extend(extra);
    nertrain(&args)
}

/// A trained run in `dir/name`, with its with-dev model when `with_dev`.
fn trained(dir: &Path, name: &str, with_dev: bool) -> PathBuf {
    let run = dir.join(name);
    let with_dev = format!("train.with_dev={with_dev}");
    let out = fit(&run, &["--set", &with_dev]);
    assert!(out.status.success(), "{}", stderr(&out));
    run
}

#[test]
fn continuing_a_model_into_its_own_run_is_refused_and_the_model_kept() {
    let dir = scratch("continue-in-place");
    let run = trained(&dir, "X", true);
    let link = dir.join("link");
    std::os::unix::fs::symlink(&run, &link).unwrap();
    let before = snapshot(&run);
    let cases = [
        (run.clone(), run.clone()),
        (run.clone(), link.clone()),
        (link.clone(), run.clone()),
        (run.join("with-dev"), run.clone()),
    ];
    for (from, output) in cases {
        let out = fit(
            &output,
            &["--start-from", from.to_str().unwrap(), "--overwrite"],
        );
        assert_eq!(out.status.code(), Some(1), "{from:?} into {output:?}");
        assert!(
            stderr(&out).contains("cannot continue a model inside train.output"),
            "{}",
            stderr(&out)
        );
        assert!(
            snapshot(&run) == before,
            "{from:?} into {output:?} changed the run"
        );
    }
}

#[test]
fn a_damaged_start_model_is_named_and_deletes_nothing() {
    let dir = scratch("bad-start");
    let victim = trained(&dir, "victim", false);
    let source = trained(&dir, "source", false);
    let weights = std::fs::read(source.join("model.bpk")).unwrap();
    let damaged = |name: &str, bytes: &[u8]| {
        let copy = dir.join(name);
        std::fs::create_dir_all(&copy).unwrap();
        for file in ["model.json", "vocab.json", "config.toml"] {
            std::fs::copy(source.join(file), copy.join(file)).unwrap();
        }
        std::fs::write(copy.join("model.bpk"), bytes).unwrap();
        copy
    };
    let truncated = damaged("truncated", &weights[..weights.len() / 2]);
    // The same size, its second half NaN (all bits set).
    let mut nan = weights.clone();
    let half = nan.len() / 2;
    nan[half..].fill(0xff);
    let corrupt = damaged("corrupt", &nan);
    let before = snapshot(&victim);
    for from in [&truncated, &corrupt] {
        for output in [victim.clone(), dir.join("new")] {
            let out = fit(
                &output,
                &["--start-from", from.to_str().unwrap(), "--overwrite"],
            );
            assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
            let message = stderr(&out);
            assert!(
                message.contains(&from.join("model.bpk").display().to_string())
                    || message.contains(&from.display().to_string()),
                "{message}"
            );
            assert!(!message.contains("loss became"), "{message}");
            assert!(snapshot(&victim) == before, "{from:?} changed the run");
            assert!(!dir.join("new").exists(), "a half-made run was left");
        }
    }
}

/// The CoNLL lines of `convert --to iob2 FILE`, and its warnings.
fn converted(file: &str) -> (String, String) {
    let out = nertrain(&["convert", "--to", "iob2", file]);
    assert!(out.status.success(), "{file}: {}", stderr(&out));
    (stdout(&out), stderr(&out))
}

#[test]
fn real_exports_with_emoji_and_cjk_read_as_the_tools_meant_them() {
    let (expected, _) = converted("data/annotations/roundtrip/doccano.jsonl");
    for line in [
        "Anna B-PER\nSchmidt I-PER\n",
        "Siemens B-ORG\n",
        "北京 B-LOC\n",
        "東京 B-LOC\n",
        "Peter B-PER\nMüller I-PER\n",
        "BMW B-ORG\n",
    ] {
        assert!(expected.contains(line), "{line:?} in\n{expected}");
    }
    // Label Studio's full export and its JSON-MIN (made by Label Studio's own converter): the
    // later annotation of task 1 by time, the cancelled one of task 2 left out, the task nobody
    // annotated left out with a warning, the annotation without entities kept.
    for export in [
        "data/annotations/roundtrip/label-studio.json",
        "data/annotations/roundtrip/label-studio-min.json",
    ] {
        let (conll, warnings) = converted(export);
        assert_eq!(conll, expected, "{export}");
        assert!(
            warnings.contains("1 task without an annotation"),
            "{export}: {warnings}"
        );
    }
    let (_, warnings) = converted("data/annotations/roundtrip/label-studio-min.json");
    assert!(
        warnings.contains("1 row of a task that has a later annotation"),
        "{warnings}"
    );
    // fit trains on an export as it is.
    let dir = scratch("fit-export");
    let out = fit(
        &dir.join("run"),
        &[
            "--set",
            "data.train=\"data/annotations/roundtrip/label-studio.json\"",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

/// A pool of texts with emoji and CJK before the entities the sample model finds.
const POOL: &str = "🎉🎉 Anna Schmidt , who works for Siemens , arrived in Lisbon on Monday .\n\
                    中文 😀 Peter Müller flew to Berlin .\n\
                    👋 Maria Rossi met Jan Novak in Madrid .\n";

/// `select` on `POOL` as `format`, every text chosen.
fn selected(dir: &Path, format: &str) -> String {
    let pool = dir.join("pool.txt");
    std::fs::write(&pool, POOL).unwrap();
    let out = select(&pool, "3", &["--format", format]);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

/// The entities `tag --format json` finds in each line of `POOL`, as (text, label).
fn tagged_entities() -> Vec<Vec<(String, String)>> {
    let model = sample_model("sentence");
    let texts: Vec<&str> = POOL.lines().collect();
    tag_json(&model, &texts)
        .into_iter()
        .map(|record| {
            record["entities"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    (
                        e["text"].as_str().unwrap().to_string(),
                        e["label"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .collect()
}

/// Each task's entities as its tool shows them: doccano slices JavaScript strings (UTF-16),
/// Label Studio counts code points.
fn shown(text: &str, start: usize, end: usize, utf16: bool) -> String {
    if utf16 {
        let units: Vec<u16> = text.encode_utf16().collect();
        String::from_utf16(&units[start..end]).unwrap()
    } else {
        text.chars().skip(start).take(end - start).collect()
    }
}

#[test]
fn selected_tasks_show_the_right_words_in_each_tool_and_read_back() {
    let dir = scratch("select-roundtrip");
    let mut expected = tagged_entities();
    assert!(
        expected.iter().flatten().count() >= 4,
        "the sample model finds entities: {expected:?}"
    );
    for entities in &mut expected {
        entities.sort();
    }
    expected.sort();

    // doccano: import, then export unchanged (as an annotator who accepts every entity).
    let doccano = selected(&dir, "doccano");
    let mut found = Vec::new();
    for line in doccano.lines() {
        let task: serde_json::Value = serde_json::from_str(line).unwrap();
        let text = task["text"].as_str().unwrap();
        let mut entities: Vec<(String, String)> = task["label"]
            .as_array()
            .unwrap()
            .iter()
            .map(|span| {
                let (start, end) = (span[0].as_u64().unwrap(), span[1].as_u64().unwrap());
                let label = span[2].as_str().unwrap().to_string();
                (shown(text, start as usize, end as usize, true), label)
            })
            .collect();
        entities.sort();
        found.push(entities);
    }
    found.sort();
    assert_eq!(found, expected, "doccano shows the entities tag finds");
    let export = dir.join("doccano-export.jsonl");
    std::fs::write(&export, &doccano).unwrap();
    let (conll, _) = converted(export.to_str().unwrap());
    for (entity, label) in expected.iter().flatten() {
        let first = entity.split(' ').next().unwrap();
        assert!(
            conll.contains(&format!("{first} B-{label}\n")),
            "{entity} ({label}) read back from doccano:\n{conll}"
        );
    }

    // Label Studio: the tasks' predictions, submitted unchanged, come back as an export.
    let tasks: Vec<serde_json::Value> =
        serde_json::from_str(&selected(&dir, "label-studio")).unwrap();
    let mut exported = Vec::new();
    let mut found = Vec::new();
    for (id, task) in tasks.iter().enumerate() {
        let text = task["data"]["text"].as_str().unwrap();
        let result = task["predictions"][0]["result"].clone();
        let mut entities: Vec<(String, String)> = result
            .as_array()
            .unwrap()
            .iter()
            .map(|region| {
                let value = &region["value"];
                let (start, end) = (
                    value["start"].as_u64().unwrap(),
                    value["end"].as_u64().unwrap(),
                );
                let shown = shown(text, start as usize, end as usize, false);
                assert_eq!(shown, value["text"].as_str().unwrap());
                (shown, value["labels"][0].as_str().unwrap().to_string())
            })
            .collect();
        entities.sort();
        found.push(entities);
        exported.push(serde_json::json!({
            "id": id + 1,
            "data": task["data"],
            "annotations": [{"id": id + 1, "result": result, "was_cancelled": false,
                             "updated_at": "2024-05-01T10:00:00.123Z"}],
            "predictions": [],
        }));
    }
    found.sort();
    assert_eq!(found, expected, "Label Studio shows the entities tag finds");
    let export = dir.join("label-studio-export.json");
    std::fs::write(&export, serde_json::to_string_pretty(&exported).unwrap()).unwrap();
    let (from_label_studio, warnings) = converted(export.to_str().unwrap());
    assert!(warnings.is_empty(), "{warnings}");
    let export = dir.join("doccano-export.jsonl");
    let (from_doccano, _) = converted(export.to_str().unwrap());
    assert_eq!(from_label_studio, from_doccano);
}

#[test]
fn select_never_replaces_the_pool_or_writes_into_the_model() {
    let dir = scratch("select-outputs");
    let model = sample_model("sentence");
    let pool = dir.join("pool.txt");
    // Line separators that are not line feeds stay inside their line, as select numbers them.
    let texts = [
        "Anna Schmidt flew to Lisbon .",
        "Peter Müller\u{2028}met Maria Rossi .",
        "Jan Novak works for Siemens .",
        "\u{85}Berlin is cold .",
    ];
    std::fs::write(&pool, texts.join("\n") + "\n").unwrap();
    let select = |extra: &[&str]| {
        let mut args = vec!["--format", "doccano"];
        args.extend(extra);
        select(&pool, "2", &args)
    };
    let original = std::fs::read(&pool).unwrap();
    let model_before = snapshot(&model);
    for (extra, expected) in [
        (vec!["--output", pool.to_str().unwrap()], "it is the pool"),
        (
            vec!["--output", model.join("tasks.json").to_str().unwrap()],
            "inside the model directory",
        ),
        (
            vec!["--output", model.join("model.json").to_str().unwrap()],
            "inside the model directory",
        ),
        (
            vec!["--remaining", model.join("vocab.json").to_str().unwrap()],
            "inside the model directory",
        ),
    ] {
        let out = select(&extra);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(expected), "{}", stderr(&out));
        assert_eq!(std::fs::read(&pool).unwrap(), original);
        assert!(
            snapshot(&model) == model_before,
            "{extra:?} changed the model"
        );
    }

    // The pool left, written over the pool itself once the tasks are out.
    let tasks = dir.join("tasks.jsonl");
    let out = select(&[
        "--output",
        tasks.to_str().unwrap(),
        "--remaining",
        pool.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let chosen: Vec<String> = std::fs::read_to_string(&tasks)
        .unwrap()
        .lines()
        .map(|line| {
            let task: serde_json::Value = serde_json::from_str(line).unwrap();
            task["text"].as_str().unwrap().to_string()
        })
        .collect();
    let left = std::fs::read_to_string(&pool).unwrap();
    let left: Vec<&str> = left.split('\n').filter(|l| !l.is_empty()).collect();
    assert_eq!(chosen.len(), 2);
    assert_eq!(left.len(), 2, "{left:?}");
    let mut all: Vec<&str> = chosen.iter().map(String::as_str).chain(left).collect();
    all.sort();
    let mut expected = texts.to_vec();
    expected.sort();
    assert_eq!(all, expected, "every text either chosen or left, once");
}

#[test]
fn a_pool_line_too_long_is_named_by_file_and_line() {
    let dir = scratch("select-long");
    let pool = dir.join("pool.txt");
    let long = "word ".repeat(1_000_001);
    std::fs::write(&pool, format!("Anna flew .\n\nBerlin .\n{long}\n")).unwrap();
    let out = select(&pool, "2", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("{}:4: more than", pool.display())),
        "{}",
        stderr(&out)
    );
}

#[test]
fn partial_labels_round_trip_through_convert_and_a_full_known_region_scores() {
    let dir = scratch("partial-roundtrip");
    let spans = dir.join("partial.jsonl");
    std::fs::write(
        &spans,
        concat!(
            r#"{"text": "Anna Schmidt flew to Lisbon on Monday .", "spans": [{"start": 0, "end": 12, "label": "PER"}], "known": [[13, 20]]}"#,
            "\n"
        ),
    )
    .unwrap();
    let out = nertrain(&["convert", "--to", "iobes", spans.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let written = stdout(&out);
    assert!(written.contains("Lisbon -\n"), "{written}");
    let conll = dir.join("partial.txt");
    std::fs::write(&conll, &written).unwrap();
    for scheme in ["iobes", "iob2", "iob1"] {
        let out = nertrain(&["convert", "--to", scheme, conll.to_str().unwrap()]);
        assert!(out.status.success(), "{scheme}: {}", stderr(&out));
        assert!(stdout(&out).contains("Lisbon -\n"), "{}", stdout(&out));
    }
    let out = nertrain(&["convert", "--to", "iob2", conll.to_str().unwrap()]);
    assert!(
        stdout(&out).contains("Anna B-PER\nSchmidt I-PER\n"),
        "{}",
        stdout(&out)
    );

    // A known region over the whole text is a text annotated in full: eval scores it.
    let full = dir.join("full.jsonl");
    std::fs::write(
        &full,
        r#"{"text": "Anna Schmidt flew to Lisbon .", "spans": [{"start": 0, "end": 12, "label": "PER"}, {"start": 21, "end": 27, "label": "LOC"}], "known": [[0, 29]]}"#,
    )
    .unwrap();
    let model = sample_model("sentence");
    let out = nertrain(&[
        "eval",
        "--model",
        model.to_str().unwrap(),
        "--data",
        full.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}
