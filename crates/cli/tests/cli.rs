//! The `nertrain` binary end to end on the shipped sample: fit, resume, eval, tag, and the errors
//! users get for bad input.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::{
    eval_json, learning_curve, nertrain, nertrain_ok, scratch, scratch_at, shared, snapshot,
    stderr, stdout, workspace,
};

/// Small enough to train in seconds, good enough to find the sample's entities.
const QUICK: [&str; 8] = [
    "--set",
    "model.word_dim=30",
    "--set",
    "model.hidden=30",
    "--set",
    "train.epochs=3",
    "--set",
    "model.char_filters=20",
];

fn fit(output: &Path, extra: &[&str]) -> Output {
    fit_with_env(output, extra, None)
}

/// `fit` with one more environment variable (the run directory's failpoints).
fn fit_with_env(output: &Path, extra: &[&str], env: Option<(&str, &str)>) -> Output {
    let out = format!("train.output={}", output.display());
    let mut args = vec!["fit", "--config", "configs/sample.toml", "--set", &out];
    args.extend(QUICK);
    args.extend(extra);
    let mut command = Command::new(env!("CARGO_BIN_EXE_nertrain"));
    command.args(&args).current_dir(workspace());
    if let Some((key, value)) = env {
        command.env(key, value);
    }
    command.output().unwrap()
}

/// One model trained on the sample, shared by the tests that only read it.
fn model() -> &'static Path {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    MODEL.get_or_init(|| {
        let dir = shared("model").join("run");
        let output = fit(&dir, &[]);
        assert!(output.status.success(), "fit failed: {}", stderr(&output));
        dir
    })
}

#[test]
fn fit_writes_a_complete_model_directory() {
    let dir = model();
    for file in [
        "model.json",
        "vocab.json",
        "model.bpk",
        "config.toml",
        "metrics.jsonl",
        "checkpoint/state.json",
        "test.json",
    ] {
        assert!(dir.join(file).exists(), "{file} missing");
    }
    let metrics = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.lines().count(), 3);
    let last: serde_json::Value = serde_json::from_str(metrics.lines().last().unwrap()).unwrap();
    assert!(
        last["dev_f1"].as_f64().unwrap() > 50.0,
        "the sample is learnable: {last}"
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn refuses_to_overwrite_a_run_or_resume_a_different_one() {
    let dir = scratch_at("refuse", "run");
    assert!(fit(&dir, &["--set", "train.epochs=1"]).status.success());
    let again = fit(&dir, &["--set", "train.epochs=1"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr(&again).contains("--resume"), "{}", stderr(&again));
    let changed = fit(
        &dir,
        &[
            "--set",
            "train.epochs=1",
            "--set",
            "train.lr=0.5",
            "--resume",
        ],
    );
    assert_eq!(changed.status.code(), Some(1));
    assert!(stderr(&changed).contains("differs"), "{}", stderr(&changed));
}

#[test]
fn resumed_training_matches_an_uninterrupted_run() {
    let whole = scratch_at("whole", "run");
    assert!(fit(&whole, &["--set", "train.epochs=3"]).status.success());
    // Stopped after one epoch, then continued to three.
    let split = scratch_at("split", "run");
    assert!(fit(&split, &["--set", "train.epochs=1"]).status.success());
    let resumed = fit(&split, &["--set", "train.epochs=3", "--resume"]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert!(
        stdout(&resumed).contains("resuming"),
        "{}",
        stdout(&resumed)
    );
    assert_eq!(learning_curve(&split).len(), 3);
    assert_eq!(
        learning_curve(&whole),
        learning_curve(&split),
        "same seed, same run"
    );
    let tagged = |dir: &Path| {
        stdout(&nertrain(&[
            "tag",
            "--model",
            dir.to_str().unwrap(),
            "--format",
            "conll",
            "--input",
            "data/sample/dev.txt",
        ]))
    };
    assert_eq!(
        tagged(&whole),
        tagged(&split),
        "the best models predict alike"
    );
    // Written alike too, byte for byte (parameter ids included), as a sweep's restored trial
    // is checked against an uninterrupted one.
    for file in ["model.bpk", "dev.json", "vocab.json", "model.json"] {
        let read = |dir: &Path| std::fs::read(dir.join(file)).unwrap();
        assert!(
            read(&whole) == read(&split),
            "{file} differs after resuming"
        );
    }
}

#[test]
fn eval_prints_conlleval_report_and_writes_predictions() {
    let dir = scratch("eval");
    let output_file = dir.join("pred.txt");
    let out = nertrain(&[
        "eval",
        "--model",
        model().to_str().unwrap(),
        "--data",
        "data/sample/test.txt",
        "--output",
        output_file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = stdout(&out);
    assert!(
        report.starts_with("processed 1618 tokens with 333 phrases; found: "),
        "{report}"
    );
    assert!(
        report.contains("              PER: precision: "),
        "{report}"
    );

    // The written predictions score the same with --predicted, as conlleval would.
    let again = nertrain(&["eval", "--predicted", output_file.to_str().unwrap()]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(stdout(&again), report);

    let json = nertrain(&[
        "eval",
        "--predicted",
        output_file.to_str().unwrap(),
        "--json",
    ]);
    let value: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(value["tokens"], 1618);
    assert!(value["types"]["LOC"]["f1"].as_f64().is_some());
}

#[test]
fn eval_predicted_scores_the_spec_cases() {
    let dir = scratch("spec");
    let file = dir.join("cases.txt");
    // Gold / predicted from specs/span-f1.md, one sentence each: 1+see the table.
    let cases = [
        ("B-PER I-PER O", "I-PER I-PER O"),
        ("B-LOC I-LOC O O", "B-LOC I-LOC O I-LOC"),
        ("B-ORG I-ORG O", "B-ORG I-PER O"),
        ("B-PER O", "B-PER I-LOC"),
        ("I-PER I-PER O I-LOC", "B-PER I-PER O B-LOC"),
        ("I-PER B-PER O", "I-PER B-PER O"),
        ("B-PER I-PER O O", "B-PER I-PER I-LOC I-LOC"),
        ("B-PER B-PER O", "B-PER I-PER O"),
        ("B-PER", "B-PER"),
        ("I-PER", "I-PER"),
    ];
    let mut text = String::new();
    for (gold, predicted) in cases {
        for (g, p) in gold.split(' ').zip(predicted.split(' ')) {
            text.push_str(&format!("w {g} {p}\n"));
        }
        text.push('\n');
    }
    std::fs::write(&file, text).unwrap();
    let out = nertrain(&["eval", "--predicted", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The sums of the spec's per-case counts: gold 13, found 16, correct 10.
    assert!(
        stdout(&out)
            .starts_with("processed 28 tokens with 13 phrases; found: 16 phrases; correct: 10.\n"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn tag_outputs_text_conll_and_json_with_offsets() {
    let model = model().to_str().unwrap();
    let text = "Peter Schmidt was born in Berlin .";
    let out = nertrain(&["tag", "--model", model, text]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        "[Peter Schmidt]PER was born in [Berlin]LOC ."
    );

    let json = |text: &str| -> serde_json::Value {
        let out = nertrain(&["tag", "--model", model, "--format", "json", text]);
        serde_json::from_str(stdout(&out).trim()).unwrap()
    };
    let value = json("Peter Schmidt was born in Berlin.");
    let entities = value["entities"].as_array().unwrap();
    let berlin = entities
        .iter()
        .find(|e| e["text"] == "Berlin")
        .expect("Berlin found");
    assert_eq!(
        (berlin["start"].as_u64(), berlin["end"].as_u64()),
        (Some(26), Some(32))
    );
    // Offsets count characters, not bytes: every entity's text is its character range.
    let text = "Çağlar Öztürk flew from Zürich to Berlin with Toyota «today».";
    let chars: Vec<char> = text.chars().collect();
    for entity in json(text)["entities"].as_array().unwrap() {
        let (start, end) = (
            entity["start"].as_u64().unwrap() as usize,
            entity["end"].as_u64().unwrap() as usize,
        );
        assert_eq!(
            chars[start..end].iter().collect::<String>(),
            entity["text"].as_str().unwrap()
        );
    }

    let out = nertrain(&["tag", "--model", model, "--format", "conll", "Hello there"]);
    let conll = stdout(&out);
    let lines: Vec<&str> = conll.split('\n').collect();
    assert_eq!(lines.len(), 4, "two words, a blank line: {conll:?}");
    assert!(
        lines[0].starts_with("Hello ") && lines[1].starts_with("there ") && lines[2].is_empty()
    );
}

#[test]
fn tag_reads_lines_from_a_file_and_keeps_empty_lines() {
    let dir = scratch("tag-input");
    let input = dir.join("in.txt");
    std::fs::write(&input, "Maria Rossi lives in Paris .\n\nToyota said so .\n").unwrap();
    let out = nertrain(&[
        "tag",
        "--model",
        model().to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[1].contains("\"entities\":[]"));
}

#[test]
fn malformed_inputs_are_clear_errors() {
    let dir = scratch("bad");
    let model = model().to_str().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path.to_str().unwrap().to_string()
    };
    let cases = [
        (
            write("ragged.txt", b"Peter B-PER\nlives in O\n"),
            "ragged.txt:2: expected 2 columns (as on line 1), found 3",
        ),
        (write("empty.txt", b""), "empty.txt: no sentences"),
        (
            write("utf8.txt", b"Peter B-PER\nBer\xfflin B-LOC\n"),
            "utf8.txt:2: invalid UTF-8",
        ),
        (
            write("badtag.txt", b"Peter PERSON\n"),
            "badtag.txt:1: expected a tag O, B-TYPE",
        ),
    ];
    for (file, expected) in &cases {
        let out = nertrain(&["eval", "--model", model, "--data", file]);
        assert_eq!(out.status.code(), Some(1), "{file}");
        assert!(stderr(&out).contains(expected), "{file}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"));
    }
    let missing = nertrain(&[
        "eval",
        "--model",
        dir.join("nope").to_str().unwrap(),
        "--data",
        &cases[0].0,
    ]);
    assert!(
        stderr(&missing).contains("no such model directory"),
        "{}",
        stderr(&missing)
    );
    let not_model = nertrain(&[
        "eval",
        "--model",
        dir.to_str().unwrap(),
        "--data",
        &cases[0].0,
    ]);
    assert!(
        stderr(&not_model).contains("not a nertrain model directory"),
        "{}",
        stderr(&not_model)
    );
    let usage = nertrain(&["eval"]);
    assert_eq!(usage.status.code(), Some(2));
}

#[test]
fn unseen_tags_and_very_long_sentences_are_handled() {
    let dir = scratch("handled");
    let path = dir.join("unseen.txt");
    std::fs::write(&path, "Peter B-PER\nvisited O\nMars B-PLANET\n").unwrap();
    let out = nertrain(&[
        "eval",
        "--model",
        model().to_str().unwrap(),
        "--data",
        path.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("never saw in training") && stderr(&out).contains("PLANET"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).contains("PLANET: precision:   0.00%"));

    let long: String = (0..5000)
        .map(|i| {
            if i % 7 == 0 {
                "Berlin B-LOC\n".to_string()
            } else {
                "and O\n".to_string()
            }
        })
        .collect();
    let path = dir.join("long.txt");
    std::fs::write(&path, long).unwrap();
    let out = nertrain(&[
        "eval",
        "--model",
        model().to_str().unwrap(),
        "--data",
        path.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("processed 5000 tokens with 715 phrases;"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn fit_check_prints_the_resolved_experiment_and_writes_nothing() {
    let output = scratch_at("fit-check", "run");
    let out = output.to_str().unwrap();
    let checked = nertrain(&[
        "fit",
        "--config",
        "configs/sample.toml",
        "--set",
        "train.lr=0.02",
        "--set",
        &format!("train.output={out:?}"),
        "--check",
    ]);
    assert!(checked.status.success(), "{}", stderr(&checked));
    let resolved: toml::Table = stdout(&checked).parse().expect("TOML on stdout");
    assert_eq!(resolved["train"]["lr"].as_float(), Some(0.02));
    assert_eq!(resolved["model"]["hidden"].as_integer(), Some(50));
    assert!(!output.exists(), "--check wrote {}", output.display());
    // A key the experiment lacks, or a value of the wrong type: an error naming it.
    for (set, says) in [
        ("train.lrr=0.1", "unknown key `train.lrr`"),
        ("model.hidden=1.5", "model.hidden"),
    ] {
        let refused = nertrain(&[
            "fit",
            "--config",
            "configs/sample.toml",
            "--set",
            set,
            "--check",
        ]);
        assert!(
            !refused.status.success() && stderr(&refused).contains(says),
            "{set}"
        );
    }
    // A backend the binary was built without is refused as well, before anything starts.
    let gpu = nertrain(&[
        "fit",
        "--config",
        "configs/sample.toml",
        "--set",
        "train.backend=\"wgpu\"",
        "--check",
    ]);
    if cfg!(feature = "wgpu") {
        assert!(gpu.status.success(), "{}", stderr(&gpu));
    } else {
        assert!(!gpu.status.success(), "a flex-only binary accepted wgpu");
        assert!(stderr(&gpu).contains("--features wgpu"), "{}", stderr(&gpu));
    }
}

#[test]
fn config_errors_name_the_key() {
    let out = nertrain(&[
        "fit",
        "--config",
        "configs/sample.toml",
        "--set",
        "model.hiden=3",
    ]);
    // A mistake in an override is one of the command line.
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown key `model.hiden`; did you mean `model.hidden`?"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("error: --set model.hiden=3: unknown key"),
        "{}",
        stderr(&out)
    );
    for (set, expected) in [
        (
            "train.lr=-1",
            "error: --set train.lr=-1: train.lr: expected a positive number",
        ),
        (
            "train.epochs=x",
            "error: --set train.epochs=x: train.epochs: invalid type",
        ),
        (
            "novalue",
            "error: --set novalue: expected section.key=value",
        ),
    ] {
        let out = nertrain(&["fit", "--config", "configs/sample.toml", "--set", set]);
        assert_eq!(out.status.code(), Some(2), "{set}");
        assert!(stderr(&out).contains(expected), "{set}: {}", stderr(&out));
    }
    // A mistake in the file names the file and the line of the key.
    let dir = scratch("config-line");
    let config = dir.join("bad.toml");
    let text = std::fs::read_to_string(workspace().join("configs/sample.toml")).unwrap();
    std::fs::write(&config, text.replace("hidden = 50", "hidden = 0")).unwrap();
    let line = text.lines().position(|l| l == "hidden = 50").unwrap() + 1;
    let out = nertrain(&["fit", "--config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!(
            "{}:{line}: model.hidden: expected 1 to 4096",
            config.display()
        )),
        "{}",
        stderr(&out)
    );
    std::fs::write(&config, text.replace("epochs = 8", "epochs = \"8\"")).unwrap();
    let line = text.lines().position(|l| l == "epochs = 8").unwrap() + 1;
    let out = nertrain(&["fit", "--config", config.to_str().unwrap()]);
    assert!(
        stderr(&out).contains(&format!(
            "{}:{line}: train.epochs: invalid type",
            config.display()
        )),
        "{}",
        stderr(&out)
    );
    let out = nertrain(&["fit", "--config", "configs/missing.toml"]);
    assert!(
        stderr(&out).contains("configs/missing.toml: cannot read"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn tag_json_gives_confidences_marginals_and_nbest() {
    let model = model().to_str().unwrap();
    let out = nertrain(&[
        "tag",
        "--model",
        model,
        "--format",
        "json",
        "--probs",
        "--nbest",
        "3",
        "Peter Schmidt was born in Berlin .",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let value: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    let entities = value["entities"].as_array().unwrap();
    assert!(!entities.is_empty());
    for entity in entities {
        let confidence = entity["confidence"].as_f64().unwrap();
        assert!(confidence > 0.0 && confidence <= 1.0 + 1e-9, "{entity}");
    }
    let tokens = value["tokens"].as_array().unwrap();
    assert_eq!(tokens.len(), 7);
    for token in tokens {
        let probs = token["probs"].as_object().unwrap();
        let total: f64 = probs.values().map(|p| p.as_f64().unwrap()).sum();
        assert!((total - 1.0).abs() < 1e-6, "{token}");
        // The decoded tag is a tag of the model.
        assert!(probs.contains_key(token["tag"].as_str().unwrap()));
    }
    let nbest = value["nbest"].as_array().unwrap();
    assert_eq!(nbest.len(), 3);
    let probabilities: Vec<f64> = nbest
        .iter()
        .map(|a| a["probability"].as_f64().unwrap())
        .collect();
    assert!(
        probabilities.windows(2).all(|w| w[0] >= w[1])
            && probabilities.iter().sum::<f64>() <= 1.0 + 1e-9
    );
    let strip = |es: &serde_json::Value| -> Vec<(String, u64, u64)> {
        es.as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["label"].to_string(),
                    e["start"].as_u64().unwrap(),
                    e["end"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(
        strip(&nbest[0]["entities"]),
        strip(&value["entities"]),
        "the first of the n best is the best path"
    );

    let text = nertrain(&["tag", "--model", model, "--nbest", "2", "Peter was here ."]);
    let lines: Vec<String> = stdout(&text).lines().map(String::from).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[1].starts_with("  #1 p=") && lines[2].starts_with("  #2 p="));
}

#[test]
fn eval_reports_calibration() {
    let model = model().to_str().unwrap();
    let out = nertrain(&[
        "eval",
        "--model",
        model,
        "--data",
        "data/sample/dev.txt",
        "--calibration",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = stdout(&out);
    assert!(
        report.contains("confidence    entities  mean conf.  precision"),
        "{report}"
    );
    let value = eval_json(Path::new(model), &[]);
    let bins = value["calibration"].as_array().unwrap();
    assert_eq!(bins.len(), 10);
    let binned: u64 = bins.iter().map(|b| b["entities"].as_u64().unwrap()).sum();
    assert_eq!(
        binned,
        value["overall"]["found"].as_u64().unwrap(),
        "every predicted entity is binned"
    );
    let unconstrained = nertrain(&[
        "eval",
        "--model",
        model,
        "--data",
        "data/sample/dev.txt",
        "--unconstrained",
    ]);
    assert!(unconstrained.status.success());
}

#[test]
fn convert_rewrites_the_tag_column() {
    let dir = scratch("convert");
    let input = dir.join("iob1.txt");
    std::fs::write(&input, "Acme NNP I-ORG\nzorbs VBZ O\nDutch JJ I-MISC\nplan NN O\n\nPeter NNP I-PER\nHolm NNP B-PER\n").unwrap();
    let out = nertrain(&[
        "convert",
        "--from",
        "iob1",
        "--to",
        "iob2",
        input.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "Acme NNP B-ORG\nzorbs VBZ O\nDutch JJ B-MISC\nplan NN O\n\nPeter NNP B-PER\nHolm NNP B-PER\n"
    );
    let output = dir.join("iobes.txt");
    let out = nertrain(&[
        "convert",
        "--to",
        "iobes",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    assert_eq!(
        std::fs::read_to_string(&output).unwrap(),
        "Acme NNP S-ORG\nzorbs VBZ O\nDutch JJ S-MISC\nplan NN O\n\nPeter NNP S-PER\nHolm NNP S-PER\n"
    );
    let wrong = nertrain(&[
        "convert",
        "--from",
        "iob2",
        "--to",
        "iobes",
        input.to_str().unwrap(),
    ]);
    assert_eq!(wrong.status.code(), Some(1));
    assert!(
        stderr(&wrong).contains("iob1.txt:1: \"I-ORG\" is not well formed iob2"),
        "{}",
        stderr(&wrong)
    );
}

#[test]
fn iobes_training_writes_the_files_scheme() {
    let dir = scratch_at("iobes", "run");
    let out = fit(
        &dir,
        &[
            "--set",
            "data.train_scheme=iobes",
            "--set",
            "train.epochs=2",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("model.json")).unwrap()).unwrap();
    assert_eq!(meta["train_scheme"], "iobes");
    assert_eq!(meta["file_scheme"], "iob2");
    let out = nertrain(&[
        "tag",
        "--model",
        dir.to_str().unwrap(),
        "--format",
        "conll",
        "--input",
        "data/sample/dev.txt",
    ]);
    let tags: Vec<&str> = std::str::from_utf8(&out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(1))
        .collect();
    assert!(!tags.is_empty());
    assert!(
        tags.iter()
            .all(|t| !t.starts_with("E-") && !t.starts_with("S-")),
        "output is IOB2"
    );
}

/// Kills a training run at several points with SIGINT or SIGKILL, resumes it until it finishes,
/// and expects the same learning curve and predictions as a run never interrupted.
#[test]
fn interrupted_runs_resume_to_the_same_result() {
    let long = ["--set", "train.epochs=5", "--set", "train.patience=5"];
    let whole = scratch_at("uninterrupted", "run");
    assert!(fit(&whole, &long).status.success());
    let predictions = |dir: &Path| {
        stdout(&nertrain(&[
            "tag",
            "--model",
            dir.to_str().unwrap(),
            "--format",
            "conll",
            "--input",
            "data/sample/dev.txt",
        ]))
    };
    for (name, signal, delay_ms) in [
        ("int-a", "-INT", 700),
        ("int-b", "-INT", 1500),
        ("kill-a", "-KILL", 500),
        ("kill-b", "-KILL", 1100),
        ("kill-c", "-KILL", 1800),
    ] {
        let dir = scratch_at(name, "run");
        let out = format!("train.output={}", dir.display());
        let mut args = vec!["fit", "--config", "configs/sample.toml", "--set", &out];
        args.extend(QUICK);
        args.extend(long);
        let mut child = Command::new(env!("CARGO_BIN_EXE_nertrain"))
            .args(&args)
            .current_dir(workspace())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        let status = child.wait().unwrap();
        if signal == "-INT" && !status.success() {
            assert_eq!(
                status.code(),
                Some(130),
                "{name}: Ctrl-C saves and exits with 130"
            );
        }
        if dir.join("model.json").exists() {
            let mut resume = args.clone();
            resume.push("--resume");
            let resumed = nertrain(&resume);
            assert!(resumed.status.success(), "{name}: {}", stderr(&resumed));
        } else {
            assert!(fit(&dir, &long).status.success());
        }
        assert_eq!(learning_curve(&dir), learning_curve(&whole), "{name}");
        assert_eq!(epoch_records(&dir), epoch_records(&whole), "{name}");
        assert_eq!(predictions(&dir), predictions(&whole), "{name}");
        assert_eq!(
            predictions_and_scores(&dir),
            predictions_and_scores(&whole),
            "{name}"
        );
    }
}

#[test]
fn a_diverging_loss_stops_training_with_its_epoch_and_batch() {
    let dir = scratch_at("nan", "run");
    let out = fit(
        &dir,
        &["--set", "train.lr=1e20", "--set", "train.clip_norm=0"],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("error: the loss became NaN in epoch 1 at batch"),
        "{err}"
    );
    assert!(err.contains("no model was saved"), "{err}");
    assert!(!dir.join("model.bpk").exists());
}

#[test]
fn damaged_model_directories_are_explained() {
    let dir = scratch_at("damaged", "run");
    std::fs::create_dir_all(&dir).unwrap();
    let copy = |name: &str| std::fs::copy(model().join(name), dir.join(name)).unwrap();
    for name in ["model.json", "vocab.json", "model.bpk", "config.toml"] {
        copy(name);
    }
    let tag = || nertrain(&["tag", "--model", dir.to_str().unwrap(), "Peter"]);
    assert!(tag().status.success(), "an intact copy works");

    let meta = std::fs::read_to_string(model().join("model.json")).unwrap();
    std::fs::write(
        dir.join("model.json"),
        meta.replace("\"hidden\": 30", "\"hidden\": 31"),
    )
    .unwrap();
    assert!(
        stderr(&tag()).contains("model.bpk: weights do not fit this model"),
        "{}",
        stderr(&tag())
    );
    copy("model.json");

    let weights = std::fs::read(model().join("model.bpk")).unwrap();
    std::fs::write(dir.join("model.bpk"), &weights[..weights.len() / 2]).unwrap();
    assert!(stderr(&tag()).contains("truncated"), "{}", stderr(&tag()));
    std::fs::write(dir.join("model.bpk"), &weights[..4]).unwrap();
    assert!(
        stderr(&tag())
            .contains("model.bpk: not a readable weights file: it is truncated or damaged"),
        "{}",
        stderr(&tag())
    );
    copy("model.bpk");

    std::fs::write(dir.join("vocab.json"), "{\"normalization\":{\"lowercase\":false,\"digits_to_zero\":true},\"words\":[],\"chars\":[],\"tags\":[]}").unwrap();
    assert!(
        stderr(&tag()).contains("vocab.json: vocabulary sizes"),
        "{}",
        stderr(&tag())
    );
    std::fs::remove_file(dir.join("vocab.json")).unwrap();
    assert!(
        stderr(&tag()).contains("not a nertrain model directory"),
        "{}",
        stderr(&tag())
    );
    copy("vocab.json");

    // A model saved before a setting existed loads with the setting's default.
    let without_char_hidden: String = meta
        .lines()
        .filter(|line| !line.contains("\"char_hidden\""))
        .collect::<Vec<_>>()
        .join("\n");
    assert_ne!(without_char_hidden.len(), meta.len());
    std::fs::write(dir.join("model.json"), without_char_hidden).unwrap();
    assert!(tag().status.success(), "{}", stderr(&tag()));

    std::fs::write(
        dir.join("model.json"),
        meta.replace("\"format\": 1", "\"format\": 99"),
    )
    .unwrap();
    assert!(
        stderr(&tag()).contains("model format 99"),
        "{}",
        stderr(&tag())
    );
    let out = tag();
    assert_eq!(out.status.code(), Some(1));
    assert!(!stderr(&out).contains("panicked"));
}

#[test]
fn report_confusion_and_curves() {
    let dir = model();
    let svg = std::fs::read_to_string(dir.join("curves.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("span F1"));
    assert!(
        svg.contains(r#"width="800" height="900""#),
        "the chart's size"
    );
    assert!(svg.contains("best: epoch"), "the best epoch is marked");
    let out = nertrain(&["report", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = stdout(&out);
    assert_eq!(
        report
            .lines()
            .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
            .count(),
        3,
        "a line per epoch: {report}"
    );
    assert!(
        report.contains("best epoch") && report.contains("              PER "),
        "{report}"
    );

    let out = nertrain(&[
        "eval",
        "--model",
        dir.to_str().unwrap(),
        "--data",
        "data/sample/test.txt",
        "--confusion",
    ]);
    let text = stdout(&out);
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("gold \\ predicted"))
        .collect();
    assert_eq!(table.len(), 6, "header, four types, spurious: {text}");
    let widths: Vec<usize> = table.iter().map(|l| l.len()).collect();
    assert!(
        widths.iter().all(|&w| w == widths[0]),
        "aligned columns: {table:?}"
    );
}

#[test]
fn tag_stops_quietly_when_its_reader_goes_away() {
    use std::io::{BufRead, BufReader, Write};
    let mut child = Command::new(env!("CARGO_BIN_EXE_nertrain"))
        .args(["tag", "--model", model().to_str().unwrap(), "--input", "-"])
        .current_dir(workspace())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        // Far more output than a pipe buffers, so writes go on after the reader has gone.
        for _ in 0..20_000 {
            if writeln!(stdin, "Peter Schmidt was born in Berlin .").is_err() {
                break;
            }
        }
    });
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("[Berlin]"), "{first}");
    // The reader is dropped here, like `| head -1`.
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(output.status.success(), "exit {:?}", output.status.code());
    assert!(
        output.stderr.is_empty(),
        "quiet: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn pretrained_vectors_start_the_embeddings_and_extend_the_vocabulary() {
    let dir = scratch("vectors");
    // Vectors for every word of the sample's dev set (which has names train never uses), dim 30.
    let dev = std::fs::read_to_string(workspace().join("data/sample/dev.txt")).unwrap();
    let mut words: Vec<&str> = dev
        .lines()
        .filter_map(|l| l.split(' ').next())
        .filter(|w| !w.is_empty() && *w != "-DOCSTART-")
        .collect();
    words.sort();
    words.dedup();
    let vectors: String = words
        .iter()
        .enumerate()
        .map(|(i, w)| {
            format!(
                "{} {}\n",
                w.to_lowercase(),
                (0..30)
                    .map(|d| format!("{:.3}", ((i * 31 + d) % 17) as f64 / 17.0 - 0.5))
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        })
        .collect();
    let path = dir.join("vectors.txt");
    std::fs::write(&path, format!("{} 30\n{vectors}", words.len())).unwrap();
    let vectors_set = format!("data.vectors={}", path.display());

    let out = fit(
        &dir.join("run"),
        &["--set", &vectors_set, "--set", "train.epochs=1"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let log = stdout(&out);
    let added: usize = log
        .split(" words added")
        .next()
        .unwrap()
        .rsplit("; ")
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(added > 0, "dev-only names join the vocabulary: {log}");
    assert!(
        log.contains("word embeddings start from pretrained vectors"),
        "{log}"
    );

    let wrong = fit(
        &dir.join("wrong"),
        &["--set", &vectors_set, "--set", "model.word_dim=20"],
    );
    assert_eq!(wrong.status.code(), Some(1));
    assert!(
        stderr(&wrong).contains("model.word_dim is 20 but the vectors in"),
        "{}",
        stderr(&wrong)
    );
}

/// The sample rewritten as another corpus might come: two TAB-separated columns, no
/// `-DOCSTART-`, and another tag set (three types, one of the sample's four dropped).
fn write_two_column_corpus(dir: &Path) {
    let rename = |tag: &str| -> String {
        match tag.split_once('-') {
            Some((prefix, "PER")) => format!("{prefix}-GENE"),
            Some((prefix, "LOC")) => format!("{prefix}-CELL_LINE"),
            Some((prefix, "ORG")) => format!("{prefix}-PROTEIN"),
            _ => "O".to_string(),
        }
    };
    for split in ["train", "dev", "test"] {
        let text =
            std::fs::read_to_string(workspace().join(format!("data/sample/{split}.txt"))).unwrap();
        let mut out = String::new();
        for line in text.lines() {
            if line.starts_with("-DOCSTART-") {
                continue;
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            match (fields.first(), fields.last()) {
                (Some(word), Some(tag)) => {
                    out.push_str(&format!("{word}\t{}\n", rename(tag)));
                }
                _ => out.push('\n'),
            }
        }
        std::fs::write(dir.join(format!("{split}.tsv")), out).unwrap();
    }
}

/// The CoNLL-2003 experiment files train on a corpus of another layout when only the paths and
/// columns change (and the epochs, to keep the test short).
#[test]
fn conll_configs_train_on_another_layout_by_changing_paths_and_columns() {
    let dir = scratch("layout");
    write_two_column_corpus(&dir);
    let path = |split: &str| dir.join(format!("{split}.tsv")).display().to_string();
    for config in [
        "configs/conll.toml",
        "configs/conll-adam.toml",
        "configs/conll-word.toml",
        "configs/conll-charlstm.toml",
        "configs/conll-lm.toml",
    ] {
        let run = dir.join(
            config
                .trim_start_matches("configs/")
                .trim_end_matches(".toml"),
        );
        let settings = [
            format!("data.train={}", path("train")),
            format!("data.dev={}", path("dev")),
            format!("data.test={}", path("test")),
            "data.word_column=0".to_string(),
            "data.tag_column=1".to_string(),
            format!("train.output={}", run.display()),
            "train.epochs=4".to_string(),
        ];
        let mut args = vec!["fit", "--config", config];
        for setting in &settings {
            args.extend(["--set", setting]);
        }
        let out = nertrain(&args);
        assert!(out.status.success(), "{config}: {}", stderr(&out));

        let out = nertrain(&[
            "eval",
            "--model",
            run.to_str().unwrap(),
            "--data",
            &path("test"),
            "--json",
        ]);
        assert!(out.status.success(), "{config}: {}", stderr(&out));
        let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        let types: Vec<&String> = report["types"].as_object().unwrap().keys().collect();
        assert_eq!(types, ["CELL_LINE", "GENE", "PROTEIN"], "{config}");
        let f1 = report["overall"]["f1"].as_f64().unwrap();
        eprintln!("{config} on the two-column corpus: test F1 {f1:.2}");
        assert!(f1 > 70.0, "{config}: test F1 {f1} after 4 epochs");
    }
}

/// `metrics.jsonl` without its timings: equal only if every epoch trained and scored the same.
fn epoch_records(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut record: serde_json::Value = serde_json::from_str(l).unwrap();
            let fields = record.as_object_mut().unwrap();
            for timing in [
                "train_seconds",
                "sentences_per_second",
                "tokens_per_second",
                "eval_seconds",
            ] {
                assert!(fields.remove(timing).is_some(), "{timing} recorded");
            }
            record
        })
        .collect()
}

/// What a model predicts and scores on the sample's dev set.
fn predictions_and_scores(dir: &Path) -> (String, serde_json::Value) {
    let model = dir.to_str().unwrap();
    let tagged = nertrain_ok(&[
        "tag",
        "--model",
        model,
        "--format",
        "json",
        "--probs",
        "--input",
        "data/sample/dev.txt",
    ]);
    (tagged, eval_json(dir, &[]))
}

#[test]
fn overwrite_replaces_a_run_only_after_reading_the_new_data() {
    let dir = scratch_at("overwrite", "run");
    assert!(fit(&dir, &["--set", "train.epochs=1"]).status.success());
    let before = snapshot(&dir);
    let scratch_dir = dir.parent().unwrap();
    let bad_tags = scratch_dir.join("bad.txt");
    std::fs::write(&bad_tags, "Peter B-PER\nlives O\nin O\nBerlin LOCATION\n").unwrap();
    let bad_vectors = scratch_dir.join("vectors.txt");
    std::fs::write(&bad_vectors, "peter 0.1 0.2\nberlin 0.3\n").unwrap();
    let dev = "data.dev=\"nope.txt\"".to_string();
    let train = format!("data.train={:?}", bad_tags.display().to_string());
    let vectors = format!("data.vectors={:?}", bad_vectors.display().to_string());
    for (set, expected) in [
        (dev.as_str(), "nope.txt: cannot read"),
        (train.as_str(), "bad.txt:4: expected a tag"),
        (vectors.as_str(), "vectors.txt:2"),
    ] {
        let out = fit(
            &dir,
            &["--set", "train.epochs=1", "--set", set, "--overwrite"],
        );
        assert_eq!(out.status.code(), Some(1), "{set}");
        assert!(stderr(&out).contains(expected), "{set}: {}", stderr(&out));
        assert!(snapshot(&dir) == before, "{set}: the old run is intact");
    }
    // A file of the user's in a run directory outlives an overwrite; the run's files are new.
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    let out = fit(&dir, &["--set", "train.epochs=2", "--overwrite"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "mine"
    );
    assert_eq!(epoch_records(&dir).len(), 2);
}

#[test]
fn a_directory_that_is_not_a_run_is_never_written_or_deleted() {
    let dir = scratch_at("foreign", "corpus");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        workspace().join("data/sample/train.txt"),
        dir.join("train.txt"),
    )
    .unwrap();
    std::fs::write(dir.join("model.json"), "{\"weights\": \"somewhere\"}").unwrap();
    let before = snapshot(&dir);
    for extra in [&[][..], &["--overwrite"][..], &["--resume"][..]] {
        let out = fit(&dir, extra);
        assert_eq!(out.status.code(), Some(1), "{extra:?}");
        assert!(snapshot(&dir) == before, "{extra:?}: {}", stderr(&out));
    }
    let out = fit(&dir, &[]);
    assert!(
        stderr(&out).contains("not empty and not a nertrain run"),
        "{}",
        stderr(&out)
    );
    // An empty directory is fine to train into.
    let empty = scratch_at("foreign-empty", "run");
    std::fs::create_dir_all(&empty).unwrap();
    assert!(fit(&empty, &["--set", "train.epochs=1"]).status.success());
}

#[test]
fn resume_without_a_checkpoint_keeps_the_finished_model() {
    let dir = scratch_at("no-checkpoint", "run");
    assert!(fit(&dir, &["--set", "train.epochs=1"]).status.success());
    std::fs::remove_dir_all(dir.join("checkpoint")).unwrap();
    let before = snapshot(&dir);
    let out = fit(&dir, &["--set", "train.epochs=2", "--resume"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no checkpoint (checkpoint/ is missing)"),
        "{}",
        stderr(&out)
    );
    assert!(snapshot(&dir) == before);
}

/// A save that fails, or a process that dies while saving, at each step of an epoch's commit:
/// the run directory agrees with itself on the best epoch, and resuming finishes the run exactly
/// as an uninterrupted one.
#[test]
fn failed_and_crashed_saves_leave_a_consistent_run_that_resumes_exactly() {
    let long = ["--set", "train.epochs=3", "--set", "train.patience=3"];
    let whole = scratch_at("save-whole", "run");
    assert!(fit(&whole, &long).status.success());
    let first = scratch_at("save-first", "run");
    assert!(fit(&first, &["--set", "train.epochs=1"]).status.success());
    for point in [
        "checkpoint:2",
        "swap:2",
        "publish:2",
        "checkpoint:2:abort",
        "swap:2:abort",
        "publish:2:abort",
    ] {
        let dir = scratch_at(&point.replace(':', "-"), "run");
        let out = fit_with_env(&dir, &long, Some(("NERTRAIN_FAILPOINT", point)));
        assert!(!out.status.success(), "{point}");
        // Epoch 1 is what the directory shows, whole: model, dev scores, metrics and report.
        assert_eq!(epoch_records(&dir), epoch_records(&first), "{point}");
        assert_eq!(
            std::fs::read(dir.join("dev.json")).unwrap(),
            std::fs::read(first.join("dev.json")).unwrap(),
            "{point}"
        );
        assert_eq!(
            predictions_and_scores(&dir),
            predictions_and_scores(&first),
            "{point}"
        );
        let report = nertrain(&["report", dir.to_str().unwrap()]);
        assert!(report.status.success(), "{point}: {}", stderr(&report));
        if !point.ends_with("abort") {
            let names: Vec<String> = std::fs::read_dir(&dir)
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            assert!(
                names
                    .iter()
                    .all(|n| !n.ends_with(".partial") && !n.ends_with(".old")),
                "{point}: left behind: {names:?}"
            );
        }
        let resumed = fit(&dir, &[&long[..], &["--resume"]].concat());
        assert!(resumed.status.success(), "{point}: {}", stderr(&resumed));
        assert_eq!(epoch_records(&dir), epoch_records(&whole), "{point}");
        assert_eq!(
            predictions_and_scores(&dir),
            predictions_and_scores(&whole),
            "{point}"
        );
    }
}

#[test]
fn a_moved_run_resumes_and_a_changed_one_names_what_changed() {
    let dir = scratch_at("moved", "run");
    assert!(fit(&dir, &["--set", "train.epochs=1"]).status.success());
    let moved = scratch_at("moved-to", "run");
    std::fs::create_dir_all(&moved).unwrap();
    for (from, bytes) in snapshot(&dir).0 {
        let to = moved.join(from.strip_prefix(&dir).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::write(to, bytes).unwrap();
    }
    let changed = fit(
        &moved,
        &[
            "--set",
            "train.epochs=2",
            "--set",
            "train.lr=0.5",
            "--set",
            "model.dropout=0.1",
            "--resume",
        ],
    );
    assert_eq!(changed.status.code(), Some(1));
    assert!(
        stderr(&changed).contains("model.dropout, train.lr differ from the run's experiment"),
        "{}",
        stderr(&changed)
    );
    let resumed = fit(&moved, &["--set", "train.epochs=2", "--resume"]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert_eq!(epoch_records(&moved).len(), 2);
}

#[test]
fn numeric_flags_are_range_checked() {
    let model = model().to_str().unwrap();
    for args in [
        &[
            "bench",
            "--train",
            "x",
            "--dev",
            "y",
            "--eval-batch-size",
            "0",
        ][..],
        &["bench", "--train", "x", "--dev", "y", "--batch-size", "0"],
        &["bench", "--train", "x", "--dev", "y", "--steps", "0"],
        &["bench", "--train", "x", "--dev", "y", "--steps", "-3"],
        &["tag", "--model", model, "--batch-size", "0", "Peter"],
        &["tag", "--model", model, "--nbest", "0", "Peter"],
        &["eval", "--model", model, "--data", "x", "--batch-size", "0"],
    ] {
        let out = nertrain(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{args:?}");
    }
}

#[test]
fn tag_reads_stdin_when_given_no_text() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nertrain"))
        .args(["tag", "--model", model().to_str().unwrap()])
        .current_dir(workspace())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"Anna Schmidt arrived in Lisbon .\nPeter\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(stdout(&out).lines().count(), 2, "{}", stdout(&out));
    assert!(stdout(&out).contains("]PER"), "{}", stdout(&out));
}

/// A line far longer than any sentence is tagged in pieces of at most 250 words, cut after a
/// sentence end when there is one: without one, the same entities at the same offsets as those
/// pieces tagged one by one; with them, entities whose offsets point at their text.
#[test]
fn a_very_long_line_is_tagged_in_pieces() {
    let words: Vec<String> = std::fs::read_to_string(workspace().join("data/sample/dev.txt"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        // Words the tokenizer keeps whole, none of them a sentence end.
        .filter(|w| w.chars().all(char::is_alphanumeric))
        .map(String::from)
        .take(1100)
        .collect();
    let dir = scratch("long-line");
    let pieces: Vec<String> = words.chunks(250).map(|c| c.join(" ")).collect();
    std::fs::write(dir.join("one.txt"), words.join(" ")).unwrap();
    std::fs::write(dir.join("pieces.txt"), pieces.join("\n")).unwrap();
    let tagged = |file: &str| {
        let out = nertrain(&[
            "tag",
            "--model",
            model().to_str().unwrap(),
            "--format",
            "json",
            "--input",
            dir.join(file).to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .collect::<Vec<_>>()
    };
    let entities = |tagged: &serde_json::Value, offset: u64| {
        tagged["entities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let start = e["start"].as_u64().unwrap() + offset;
                (e["label"].clone(), start, e["text"].clone())
            })
            .collect::<Vec<_>>()
    };
    let whole = tagged("one.txt");
    let mut expected = Vec::new();
    let mut offset = 0;
    for (piece, tagged) in pieces.iter().zip(tagged("pieces.txt")) {
        expected.extend(entities(&tagged, offset));
        offset += piece.chars().count() as u64 + 1;
    }
    assert!(expected.len() > 50, "{expected:?}");
    assert_eq!(entities(&whole[0], 0), expected);

    let sentences = std::fs::read_to_string(workspace().join("data/sample/dev.txt"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect::<Vec<_>>()
        .join(" ");
    std::fs::write(dir.join("sentences.txt"), &sentences).unwrap();
    let whole = tagged("sentences.txt");
    let chars: Vec<char> = sentences.chars().collect();
    let found = entities(&whole[0], 0);
    assert!(found.len() > 100);
    for (_, start, text) in found {
        let text = text.as_str().unwrap();
        let start = start as usize;
        let at: String = chars[start..start + text.chars().count()].iter().collect();
        assert_eq!(at, text);
    }
}

#[test]
fn malformed_iobes_is_read_alike_by_eval_and_convert_with_a_warning() {
    let dir = scratch("malformed-iobes");
    let file = dir.join("pred.txt");
    std::fs::write(&file, "Anna S-PER S-PER\nSchmidt I-PER I-PER\nsaid O O\n").unwrap();
    let out = nertrain(&["eval", "--predicted", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out)
            .starts_with("processed 3 tokens with 2 phrases; found: 2 phrases; correct: 2."),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains("pred.txt:2: \"I-PER\" is not well formed iobes here"),
        "{}",
        stderr(&out)
    );
    let out = nertrain(&["convert", "--to", "iob2", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "Anna S-PER B-PER\nSchmidt I-PER B-PER\nsaid O O\n"
    );
    assert!(stderr(&out).contains("warning: "), "{}", stderr(&out));
}

#[test]
fn report_refuses_dev_scores_of_another_epoch_than_the_best() {
    let dir = scratch_at("report-mismatch", "run");
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["model.json", "metrics.jsonl", "dev.json"] {
        std::fs::copy(model().join(name), dir.join(name)).unwrap();
    }
    let dev = std::fs::read_to_string(dir.join("dev.json")).unwrap();
    let mut scores: serde_json::Value = serde_json::from_str(&dev).unwrap();
    let best = scores["epoch"].as_u64().expect("dev.json names its epoch");
    scores["epoch"] = serde_json::json!(best + 7);
    std::fs::write(dir.join("dev.json"), scores.to_string()).unwrap();
    let out = nertrain(&["report", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!(
            "the dev scores are of epoch {} but metrics.jsonl marks epoch {best} best",
            best + 7
        )),
        "{}",
        stderr(&out)
    );
}

/// The sample trained to read documents (full size: the document tests need a model that knows
/// the sample's first names).
fn document_model() -> &'static Path {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    MODEL.get_or_init(|| {
        let dir = shared("document-model").join("run");
        let out = format!("train.output={}", dir.display());
        let output = nertrain(&[
            "fit",
            "--config",
            "configs/sample.toml",
            "--set",
            &out,
            "--set",
            "data.context=document",
            "--set",
            "model.mention_dim=10",
        ]);
        assert!(output.status.success(), "fit failed: {}", stderr(&output));
        assert!(
            stdout(&output).contains("document consistency"),
            "the weight is chosen on dev: {}",
            stdout(&output)
        );
        dir
    })
}

/// The label `tag --format json` gives the entity that covers character `at` of the text.
fn label_at(json_line: &str, at: usize) -> Option<String> {
    let tagged: serde_json::Value = serde_json::from_str(json_line).unwrap();
    tagged["entities"].as_array().unwrap().iter().find_map(|e| {
        let (start, end) = (e["start"].as_u64().unwrap(), e["end"].as_u64().unwrap());
        (start..end)
            .contains(&(at as u64))
            .then(|| e["label"].as_str().unwrap().to_string())
    })
}

/// A word's row in the inference cache can differ in its last bits with the words it was
/// computed with; filled by whichever thread met the word first, the same text tagged twice gave
/// different probabilities. (The document model: the smaller test model happened not to show it.)
#[test]
fn tagging_gives_the_same_bits_on_one_thread_and_two() {
    let tag = |threads: &str| {
        let output = Command::new(env!("CARGO_BIN_EXE_nertrain"))
            .args(["tag", "--model", document_model().to_str().unwrap()])
            .args([
                "--format",
                "json",
                "--probs",
                "--input",
                "data/sample/dev.txt",
            ])
            .env("RAYON_NUM_THREADS", threads)
            .current_dir(workspace())
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        output.stdout
    };
    let one = tag("1");
    for _ in 0..3 {
        assert!(tag("2") == one, "two threads tagged differently from one");
    }
}

#[test]
fn tag_recognises_a_second_mention_from_the_first_in_its_document() {
    let model = document_model().to_str().unwrap();
    let meta = std::fs::read_to_string(document_model().join("model.json")).unwrap();
    assert!(meta.contains("\"document\""), "{meta}");
    let first = "The talks with Priya Zorbel went well.";
    let seconds = [
        "Zorbel won.",
        "Zorbel said nothing.",
        "Zorbel left early.",
        "Then Zorbel won.",
        "ZORBEL WON .",
        "Zorbel and the team met in Lima.",
    ];
    let mut recognised_only_with_context = 0;
    for second in seconds {
        let paragraph = format!("{first} {second}");
        let at = first.len() + 1 + second.to_lowercase().find("zorbel").unwrap();
        let with = nertrain(&[
            "tag",
            "--model",
            model,
            "--format",
            "json",
            "--consistency",
            "100",
            &paragraph,
        ]);
        assert!(with.status.success(), "{}", stderr(&with));
        let with = stdout(&with);
        assert_eq!(
            label_at(&with, first.find("Zorbel").unwrap()).as_deref(),
            Some("PER"),
            "the first mention: {with}"
        );
        assert_eq!(
            label_at(&with, at).as_deref(),
            Some("PER"),
            "the second mention follows the first: {with}"
        );
        let alone = nertrain(&[
            "tag",
            "--model",
            model,
            "--format",
            "json",
            "--consistency",
            "0",
            &paragraph,
        ]);
        if label_at(&stdout(&alone), at).as_deref() != Some("PER") {
            recognised_only_with_context += 1;
        }
    }
    assert!(
        recognised_only_with_context > 0,
        "some second mention is a PER only because of the first"
    );

    // Lines up to a blank one are one document: the second mention on its own line still follows
    // the first; after a blank line it does not see it.
    let input = scratch_at("document-lines", "input.txt");
    std::fs::write(
        &input,
        format!("{first}\n{}\n\n{}\n", seconds[0], seconds[0]),
    )
    .unwrap();
    let output = nertrain(&[
        "tag",
        "--model",
        model,
        "--format",
        "json",
        "--consistency",
        "100",
        "--input",
        input.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines: Vec<String> = stdout(&output).lines().map(String::from).collect();
    assert_eq!(lines.len(), 4, "one JSON object per line: {lines:?}");
    assert_eq!(label_at(&lines[1], 0).as_deref(), Some("PER"), "{lines:?}");
    let apart = nertrain(&[
        "tag",
        "--model",
        model,
        "--format",
        "json",
        "--consistency",
        "100",
        seconds[0],
    ]);
    assert_eq!(lines[3], stdout(&apart).trim_end(), "a new document");
}

#[test]
fn eval_reads_documents_and_takes_a_consistency_weight() {
    let model = document_model().to_str().unwrap();
    for weight in ["0", "4"] {
        let output = nertrain(&[
            "eval",
            "--model",
            model,
            "--data",
            "data/sample/test.txt",
            "--consistency",
            weight,
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
        assert!(
            stdout(&output).starts_with("processed "),
            "{}",
            stdout(&output)
        );
    }
    let bad = nertrain(&[
        "eval",
        "--model",
        model,
        "--data",
        "data/sample/test.txt",
        "--consistency",
        "-1",
    ]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    let config = fit(
        &scratch_at("mention-without-documents", "run"),
        &["--set", "model.mention_dim=5"],
    );
    assert!(!config.status.success());
    assert!(
        stderr(&config).contains("model.mention_dim"),
        "{}",
        stderr(&config)
    );
}

#[test]
fn with_dev_trains_a_second_model_on_train_and_dev_for_the_chosen_epochs() {
    let dir = scratch_at("with-dev", "run");
    let output = fit(&dir, &["--set", "train.with_dev=true"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("not held out"),
        "{}",
        stdout(&output)
    );
    let best = epoch_records(&dir)
        .iter()
        .rfind(|m| m["best"] == true)
        .map(|m| m["epoch"].as_u64().unwrap())
        .unwrap();
    let with_dev = dir.join("with-dev");
    let records = epoch_records(&with_dev);
    assert_eq!(records.len() as u64, best, "as many epochs as the best");
    assert!(
        records.iter().all(|m| m["best"] == true),
        "the last is kept"
    );
    let meta = std::fs::read_to_string(with_dev.join("model.json")).unwrap();
    assert!(meta.contains("\"trained_on_dev\": true"), "{meta}");
    let report = nertrain(&["report", with_dev.to_str().unwrap()]);
    assert!(
        stdout(&report).contains("not held out"),
        "{}",
        stdout(&report)
    );
    let vocabulary_bytes = |dir: &Path| std::fs::read(dir.join("vocab.json")).unwrap().len();
    assert!(
        vocabulary_bytes(&with_dev) > vocabulary_bytes(&dir),
        "dev's words join the vocabulary"
    );
    // Replacing the run replaces its with-dev run too.
    let again = fit(&dir, &["--overwrite"]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(!with_dev.exists());
}
