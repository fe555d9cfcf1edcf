//! The annotation loop, II, through the binary: training on partial labels (CoNLL `-`, span files
//! with `partial` or `known` regions), refusing them where every label is needed, and continuing a
//! trained model on more data and new labels (`--start-from`), exactly resumable.

mod common;

use std::path::Path;
use std::process::Output;

use common::{learning_curve, nertrain, scratch, stderr, stdout};

/// `fit` on the sample's config with small sizes for 3 epochs; `extra` are more arguments.
fn fit(output: &Path, extra: &[&str]) -> Output {
    common::fit_small(output, 3, extra)
}

/// The sample's training file with the tag of each token `hide` picks (sentence, token, tag)
/// replaced by `with`.
fn rewritten(
    dir: &Path,
    name: &str,
    hide: impl Fn(usize, usize, &str) -> bool,
    with: &str,
) -> String {
    let text = std::fs::read_to_string(common::workspace().join("data/sample/train.txt")).unwrap();
    let (mut sentence, mut token) = (0, 0);
    let mut out = String::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        if fields.len() < 2 || fields[0] == "-DOCSTART-" {
            if token > 0 {
                sentence += 1;
            }
            token = 0;
            out.push_str(line);
        } else {
            let tag = fields[fields.len() - 1];
            let tag = if hide(sentence, token, tag) {
                with
            } else {
                tag
            };
            out.push_str(&format!("{} {tag}", fields[..fields.len() - 1].join(" ")));
            token += 1;
        }
        out.push('\n');
    }
    let path = dir.join(name);
    std::fs::write(&path, out).unwrap();
    path.to_str().unwrap().to_string()
}

fn test_f1(run: &Path, label: &str) -> f64 {
    let scores: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("test.json")).unwrap()).unwrap();
    scores["types"][label]["f1"].as_f64().unwrap()
}

#[test]
fn unlabelled_entities_are_learned_from_where_they_are_labelled() {
    let dir = scratch("partial-conll");
    // Two sentences in three lose their PER labels: as unknown, or (what a tool without partial
    // labels forces) as O.
    let hidden = |s: usize, _: usize, tag: &str| !s.is_multiple_of(3) && tag.ends_with("-PER");
    let unknown = rewritten(&dir, "unknown.txt", hidden, "-");
    let outside = rewritten(&dir, "outside.txt", hidden, "O");
    let train = |file: &str| format!("data.train={file:?}");
    let partial = fit(&dir.join("unknown"), &["--set", &train(&unknown)]);
    assert!(partial.status.success(), "{}", stderr(&partial));
    let as_o = fit(&dir.join("outside"), &["--set", &train(&outside)]);
    assert!(as_o.status.success(), "{}", stderr(&as_o));
    let (partial, as_o) = (
        test_f1(&dir.join("unknown"), "PER"),
        test_f1(&dir.join("outside"), "PER"),
    );
    assert!(
        partial > as_o + 5.0,
        "PER F1 {partial} with unknown labels, {as_o} with O"
    );

    let vocab: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("unknown/vocab.json")).unwrap())
            .unwrap();
    let tags = vocab["tags"].to_string();
    assert!(!tags.contains("\"-\""), "unknown is not a tag: {tags}");
}

#[test]
fn unknown_labels_are_refused_where_every_label_is_needed() {
    let dir = scratch("partial-refused");
    let some = rewritten(&dir, "some.txt", |s, t, _| s == 2 && t == 1, "-");
    let dev = fit(&dir.join("run"), &["--set", &format!("data.dev={some:?}")]);
    assert_eq!(dev.status.code(), Some(1));
    let message = stderr(&dev);
    assert!(
        message.contains("some.txt:") && message.contains("unknown label"),
        "{message}"
    );
    assert!(!dir.join("run").exists(), "nothing written");

    let none = rewritten(&dir, "none.txt", |_, _, _| true, "-");
    let nothing = fit(
        &dir.join("run"),
        &["--set", &format!("data.train={none:?}")],
    );
    assert_eq!(nothing.status.code(), Some(1));
    assert!(
        stderr(&nothing).contains("no labelled token"),
        "{}",
        stderr(&nothing)
    );

    let model = common::sample_model("sentence");
    let eval = nertrain(&["eval", "--model", model.to_str().unwrap(), "--data", &some]);
    assert_ne!(eval.status.code(), Some(0));
    assert!(stderr(&eval).contains("unknown label"), "{}", stderr(&eval));
}

#[test]
fn span_files_say_which_regions_were_annotated() {
    let dir = scratch("partial-spans");
    let lines = [
        // Only the spans are known: "Berlin" may be an entity nobody marked.
        r#"{"text": "Anna Kovacs flew to Berlin.", "spans": [{"start": 0, "end": 11, "label": "PER"}], "partial": true}"#,
        // The first sentence was read in full; the second not at all.
        r#"{"text": "Peter Weber lives in Paris. Maria Schmidt visits Vienna.", "spans": [{"start": 0, "end": 11, "label": "PER"}, {"start": 21, "end": 26, "label": "LOC"}], "known": [[0, 27]]}"#,
        r#"{"text": "Tom Baker met Sara Ivanova in Prague.", "spans": [{"start": 0, "end": 9, "label": "PER"}, {"start": 14, "end": 26, "label": "PER"}, {"start": 30, "end": 36, "label": "LOC"}]}"#,
    ];
    let file = dir.join("partial.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let file = file.to_str().unwrap();
    let run = fit(
        &dir.join("run"),
        &[
            "--set",
            &format!("data.train={file:?}"),
            "--set",
            "train.epochs=1",
        ],
    );
    assert!(run.status.success(), "{}", stderr(&run));

    // As CoNLL, the unannotated tokens are `-`, and the PER span's end is kept in IOBES.
    let converted = stdout(&nertrain(&["convert", "--to", "iobes", file]));
    assert!(
        converted.starts_with("-DOCSTART- O\n\nAnna B-PER\nKovacs E-PER\nflew -\n"),
        "{converted}"
    );
    assert!(
        converted.contains("Paris S-LOC\n. O\n\nMaria -\n"),
        "{converted}"
    );

    let model = common::sample_model("sentence");
    let eval = nertrain(&["eval", "--model", model.to_str().unwrap(), "--data", file]);
    assert_ne!(eval.status.code(), Some(0));
    let message = stderr(&eval);
    assert!(
        message.contains("partial.jsonl:1") && message.contains("only part"),
        "{message}"
    );

    std::fs::write(
        dir.join("bad.jsonl"),
        r#"{"text": "Short.", "spans": [], "known": [[0, 40]]}"#,
    )
    .unwrap();
    let bad = dir.join("bad.jsonl");
    let run = fit(
        &dir.join("bad"),
        &["--set", &format!("data.train={:?}", bad.to_str().unwrap())],
    );
    assert_eq!(run.status.code(), Some(1));
    assert!(
        stderr(&run).contains("bad.jsonl:1: known region 0..40"),
        "{}",
        stderr(&run)
    );
}

#[test]
fn a_model_continues_on_new_data_and_new_labels() {
    let dir = scratch("continue");
    let without_misc = rewritten(&dir, "no-misc.txt", |_, _, tag| tag.ends_with("-MISC"), "O");
    let first = dir.join("first");
    let run = fit(&first, &["--set", &format!("data.train={without_misc:?}")]);
    assert!(run.status.success(), "{}", stderr(&run));
    let from = first.to_str().unwrap();

    let grown = dir.join("grown");
    let run = fit(&grown, &["--start-from", from]);
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(
        stdout(&run).contains("new tags: B-MISC, I-MISC"),
        "{}",
        stdout(&run)
    );
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(grown.join("model.json")).unwrap()).unwrap();
    assert_eq!(meta["started_from"]["path"], from);
    assert_eq!(
        meta["started_from"]["tags_added"],
        serde_json::json!(["B-MISC", "I-MISC"])
    );
    let tags = |run: &Path| -> Vec<String> {
        let vocab: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run.join("vocab.json")).unwrap())
                .unwrap();
        serde_json::from_value(vocab["tags"].clone()).unwrap()
    };
    let (old, new) = (tags(&first), tags(&grown));
    assert_eq!(new[..old.len()], old[..], "old tags keep their ids");
    assert!(test_f1(&grown, "MISC") > 50.0, "the new label is learned");

    // Its first epoch starts where the first model ended: far below a fresh model's first loss.
    let fresh = learning_curve(&first)[0].0;
    let continued = learning_curve(&grown)[0].0;
    assert!(
        continued < fresh / 2.0,
        "first-epoch loss {continued} continued, {fresh} fresh"
    );

    // Exactly resumable, as any run.
    let split = dir.join("split");
    assert!(
        fit(&split, &["--start-from", from, "--set", "train.epochs=1"])
            .status
            .success()
    );
    let resumed = fit(&split, &["--start-from", from, "--resume"]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert_eq!(learning_curve(&split), learning_curve(&grown));

    // Rehearsal mixes the old file in.
    let rehearsed = fit(
        &dir.join("rehearsed"),
        &[
            "--start-from",
            from,
            "--set",
            &format!("data.rehearse={without_misc:?}"),
            "--set",
            "data.rehearse_sentences=100",
            "--set",
            "train.epochs=1",
        ],
    );
    assert!(rehearsed.status.success(), "{}", stderr(&rehearsed));
    assert!(
        stdout(&rehearsed).contains("rehearsal: 100 sentences"),
        "{}",
        stdout(&rehearsed)
    );
}

#[test]
fn a_model_continues_only_as_the_network_it_is() {
    let dir = scratch("continue-refused");
    let first = dir.join("first");
    assert!(fit(&first, &["--set", "train.epochs=1"]).status.success());
    let from = first.to_str().unwrap();
    let wider = fit(
        &dir.join("wider"),
        &["--start-from", from, "--set", "model.hidden=40"],
    );
    assert_eq!(wider.status.code(), Some(1));
    assert!(
        stderr(&wider).contains("model.hidden is 40"),
        "{}",
        stderr(&wider)
    );
    // How it reads its data is kept too, each setting named with both values.
    for (setting, expected) in [
        (
            "model.char_features=\"lstm\"",
            "model.char_features is \"lstm\" in the experiment but \"cnn\" in the model",
        ),
        (
            "data.context=\"document\"",
            "data.context is \"document\" in the experiment but \"sentence\" in the model",
        ),
        (
            "data.lowercase=true",
            "data.lowercase is true in the experiment but false in the model",
        ),
        (
            "data.train_scheme=\"iobes\"",
            "data.train_scheme is \"iobes\" in the experiment but \"iob2\" in the model",
        ),
    ] {
        let refused = fit(
            &dir.join("refused"),
            &["--start-from", from, "--set", setting],
        );
        assert_eq!(refused.status.code(), Some(1), "{setting}");
        assert!(stderr(&refused).contains(expected), "{}", stderr(&refused));
    }
    // Regularisation may change: the run's model takes the experiment's.
    let looser = dir.join("looser");
    let out = fit(
        &looser,
        &[
            "--start-from",
            from,
            "--set",
            "model.dropout=0.1",
            "--set",
            "train.epochs=1",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(looser.join("model.json")).unwrap()).unwrap();
    assert_eq!(meta["model"]["dropout"], 0.1);
    let missing = fit(&dir.join("missing"), &["--start-from", "/nonexistent/run"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("/nonexistent/run"),
        "{}",
        stderr(&missing)
    );
    let rehearse = fit(
        &dir.join("rehearse"),
        &["--set", "data.rehearse=\"data/sample/dev.txt\""],
    );
    assert_eq!(rehearse.status.code(), Some(1));
    assert!(
        stderr(&rehearse).contains("train.start_from"),
        "{}",
        stderr(&rehearse)
    );
}

#[test]
fn a_job_continues_a_model_and_says_each_epoch_and_how_it_ended() {
    let dir = scratch("fit-job");
    let first = dir.join("first");
    assert!(fit(&first, &["--set", "train.epochs=1"]).status.success());
    let job = |output: &Path, train: &str, epochs: usize| {
        let events = output.with_extension("events.jsonl");
        let job = serde_json::json!({
            "start_from": first,
            "train": train,
            "heldout": "data/sample/test.txt",
            "output": output,
            "epochs": epochs,
            "events": events,
        });
        let file = output.with_extension("job.json");
        std::fs::write(&file, job.to_string()).unwrap();
        let out = common::nertrain(&["fit", "--job", file.to_str().unwrap()]);
        let events: Vec<serde_json::Value> = std::fs::read_to_string(&events)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (out, events)
    };
    let output = dir.join("continued");
    let (out, events) = job(&output, "data/sample/dev.txt", 2);
    assert!(out.status.success(), "{}", stderr(&out));
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["epoch", "epoch", "done"]);
    // What the events say is what the run recorded: held-out F1 as its dev F1, and its test.
    let metrics = std::fs::read_to_string(output.join("metrics.jsonl")).unwrap();
    let second: serde_json::Value = serde_json::from_str(metrics.lines().nth(1).unwrap()).unwrap();
    assert_eq!(events[1]["heldout_f1"], second["dev_f1"]);
    assert_eq!(events[1]["epochs"], 2);
    let test: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(output.join("test.json")).unwrap()).unwrap();
    let dev: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(output.join("dev.json")).unwrap()).unwrap();
    assert_eq!(
        test["overall"], dev["overall"],
        "the held-out file is dev and test"
    );
    let config = std::fs::read_to_string(output.join("config.toml")).unwrap();
    assert!(config.contains("with_dev = false"), "{config}");
    // A run that fails says why in its events too.
    let (out, events) = job(&dir.join("failed"), "/nonexistent/train.txt", 2);
    assert!(!out.status.success());
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["event"], "error");
    assert!(
        events[0]["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/train.txt"),
        "{}",
        events[0]
    );
    // Its events go into a new file: one that is there (another run's events, or a model's
    // own description) is refused before anything is written.
    let file = output.with_extension("job.json");
    for existing in [
        output.with_extension("events.jsonl"),
        first.join("model.json"),
    ] {
        let mut job: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        job["events"] = serde_json::json!(existing);
        job["output"] = serde_json::json!(dir.join("again"));
        let again = dir.join("again.job.json");
        std::fs::write(&again, job.to_string()).unwrap();
        let before = std::fs::read(&existing).unwrap();
        let out = common::nertrain(&["fit", "--job", again.to_str().unwrap()]);
        assert!(!out.status.success());
        let message = stderr(&out);
        assert!(
            message.contains(&format!("{} exists", existing.display())),
            "{message}"
        );
        assert_eq!(std::fs::read(&existing).unwrap(), before);
        assert!(!dir.join("again").exists());
    }
    // The job says everything: settings beside it are refused.
    let out = common::nertrain(&[
        "fit",
        "--job",
        file.to_str().unwrap(),
        "--set",
        "train.lr=0.1",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn a_score_job_scores_a_model_as_its_training_chose_the_epoch() {
    // The studio's learner judges a new version by the scores its training recorded on the
    // held-out texts, and the served model by a score job on them: the two must be one way of
    // scoring, an export's texts cut by the treebank rules as `fit` cuts them.
    let dir = scratch("score-job");
    let first = dir.join("first");
    assert!(fit(&first, &["--set", "train.epochs=1"]).status.success());
    let heldout = common::workspace().join("data/sample/rawtext.jsonl");
    let output = dir.join("continued");
    let job = serde_json::json!({
        "start_from": first,
        "train": "data/sample/dev.txt",
        "heldout": heldout,
        "output": output,
        "epochs": 1,
        "events": dir.join("continued.events.jsonl"),
    });
    let file = dir.join("continued.job.json");
    std::fs::write(&file, job.to_string()).unwrap();
    let out = common::nertrain(&["fit", "--job", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let score = |model: &Path, name: &str, open: &[&str]| {
        let scores = dir.join(format!("{name}.json"));
        let job = serde_json::json!({
            "model": model,
            "data": heldout,
            "open_labels": open,
            "scores": scores,
        });
        let file = dir.join(format!("{name}.job.json"));
        std::fs::write(&file, job.to_string()).unwrap();
        let out = common::nertrain(&["eval", "--job", file.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = std::fs::read_to_string(&scores).unwrap();
        serde_json::from_str::<serde_json::Value>(&text).unwrap()
    };
    let recorded: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(output.join("test.json")).unwrap()).unwrap();
    let scored = score(&output, "new", &[]);
    assert_eq!(scored["overall"], recorded["overall"]);
    assert_eq!(scored["types"], recorded["types"]);
    // Open labels are left out, as training leaves them out of its own scores.
    let served = score(&first, "served", &["MISC"]);
    let types = served["types"].as_object().unwrap();
    assert!(
        types.contains_key("PER") && !types.contains_key("MISC"),
        "{served}"
    );
    // The job says everything: options beside it are refused, and a job that is not one is
    // named, with nothing written.
    let out = common::nertrain(&["eval", "--job", file.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let bad = dir.join("bad.job.json");
    std::fs::write(&bad, r#"{"model": "x", "data": "y"}"#).unwrap();
    let out = common::nertrain(&["eval", "--job", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    let message = stderr(&out);
    assert!(
        message.contains("bad.job.json") && message.contains("not a score job"),
        "{message}"
    );
}

#[test]
fn a_job_continuing_a_jobs_model_does_not_train_twice_on_what_its_caller_sends_again() {
    // As `serve`'s learner runs them: each job is sent every annotation so far, so the file a
    // job-trained version was trained on is in the next job's. Its base's training file is
    // gone (the model was copied to the server), so nothing is there to rehearse.
    let dir = scratch("fit-job-chain");
    let base_train = dir.join("base-train.txt");
    std::fs::copy(
        common::workspace().join("data/sample/train.txt"),
        &base_train,
    )
    .unwrap();
    let base = dir.join("base");
    let train = format!("data.train={:?}", base_train.to_str().unwrap());
    assert!(
        fit(&base, &["--set", "train.epochs=1", "--set", &train])
            .status
            .success()
    );
    std::fs::remove_file(&base_train).unwrap();
    // `rehearse_own` as the learner sets it: yes when continuing the base, no for a version.
    let job = |from: &Path, name: &str| {
        let sent = dir.join(format!("{name}-annotations.txt"));
        std::fs::copy(common::workspace().join("data/sample/dev.txt"), &sent).unwrap();
        let output = dir.join(name);
        let file = dir.join(format!("{name}.job.json"));
        let job = serde_json::json!({
            "start_from": from,
            "train": sent,
            "heldout": "data/sample/test.txt",
            "output": output,
            "epochs": 1,
            "events": dir.join(format!("{name}.events.jsonl")),
            "rehearse_own": from == base,
        });
        std::fs::write(&file, job.to_string()).unwrap();
        let out = common::nertrain(&["fit", "--job", file.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        let config = std::fs::read_to_string(output.join("config.toml")).unwrap();
        let rehearsed = config
            .lines()
            .find_map(|line| line.strip_prefix("rehearse = "))
            .map(str::to_string);
        (output, rehearsed)
    };
    let (first, rehearsed) = job(&base, "v1");
    assert_eq!(rehearsed, None);
    let (_, rehearsed) = job(&first, "v2");
    assert_eq!(
        rehearsed, None,
        "v2 rehearsed v1's annotations, which its own file holds again"
    );
    // With the base's training file at hand, every version rehearses it, and only it.
    std::fs::copy(
        common::workspace().join("data/sample/train.txt"),
        &base_train,
    )
    .unwrap();
    let base_file = Some(format!("{:?}", base_train.to_str().unwrap()));
    let (first, rehearsed) = job(&base, "w1");
    assert_eq!(rehearsed, base_file);
    let (_, rehearsed) = job(&first, "w2");
    assert_eq!(rehearsed, base_file);
}
