//! A pretrained encoder under the CRF, on the sample with the tiny random checkpoints of
//! `data/encoders`: fitted frozen and fine-tuned, then tagged, scored and served through every
//! interface alike, self-contained once trained, resumed exactly; its marginals, n best paths and
//! thresholds, `select`'s regions, Label Studio's `/predict`, and continued on partial labels;
//! bad checkpoints refused.

mod common;

use std::path::{Path, PathBuf};

use common::{
    Scratch, Server, eval_json, fit_small, learning_curve, nertrain, nertrain_ok, scratch,
    scratch_at, snapshot, stderr, stdout, tag_json, workspace,
};

const TEXTS: [&str; 2] = [
    "Anna Schmidt , who works for Siemens , arrived in Lisbon on Monday .",
    "Peter Blackburn\u{200b} lives in Zwölfkampf .",
];

/// A model fitted on the sample with `family`'s checkpoint, `tuning` as given, for `epochs`.
fn fit_with(name: &str, family: &str, tuning: &str, epochs: usize, extra: &[&str]) -> Scratch {
    let run = scratch_at(name, "run");
    let pretrained = format!("model.pretrained=data/encoders/{family}");
    let tuning = format!("model.pretrained_tuning={tuning}");
    let mut args = vec!["--set", &pretrained, "--set", &tuning];
    args.extend(extra);
    let out = fit_small(&run, epochs, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    run
}

/// `eval --json`'s overall F1 of `model` on the sample's test file.
fn eval_f1(model: &Path) -> f64 {
    let out = nertrain(&[
        "eval",
        "--model",
        model.to_str().unwrap(),
        "--data",
        "data/sample/test.txt",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let value: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    value["overall"]["f1"].as_f64().unwrap()
}

/// The model card `nertrain card` writes for `run`, in a scratch directory `name`.
fn card_of(run: &Path, name: &str) -> String {
    let card = scratch_at(name, "CARD.md");
    let out = nertrain(&[
        "card",
        "--model",
        run.to_str().unwrap(),
        "--output",
        card.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::read_to_string(card).unwrap()
}

fn recorded_test_f1(run: &Path) -> f64 {
    let text = std::fs::read_to_string(run.join("test.json")).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    value["overall"]["f1"].as_f64().unwrap()
}

#[test]
fn a_frozen_encoder_stacked_with_words_tags_alike_everywhere_and_needs_no_checkpoint() {
    let run = fit_with("encoder-frozen", "bert", "frozen", 2, &[]);
    assert!(run.join("subwords.json").is_file());
    // fit's own test score is eval's.
    assert_eq!(eval_f1(&run), recorded_test_f1(&run));

    // The model moved away, without the checkpoint it was trained from, tags the same.
    let tagged = tag_json(&run, &TEXTS);
    let moved = scratch_at("encoder-moved", "model");
    std::fs::create_dir_all(&moved).unwrap();
    for file in ["model.json", "vocab.json", "model.bpk", "subwords.json"] {
        std::fs::copy(run.join(file), moved.join(file)).unwrap();
    }
    assert_eq!(tag_json(&moved, &TEXTS), tagged);

    // Served, the same entities as `tag` gives the same text alone. (Batched with other texts,
    // a model read through tensor operations, as every model with an encoder is, may differ in
    // the last digits of its confidences.)
    let server = Server::start(&moved, &[], None);
    for text in TEXTS {
        let (status, body) = server.tag(&serde_json::json!({ "text": text }));
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body["entities"],
            tag_json(&run, &[text])[0]["entities"],
            "{body}"
        );
    }

    // Its card says what encoder it reads.
    let card = card_of(&run, "encoder-card");
    assert!(
        card.contains("- Pretrained encoder: bert, 2 layers of 32, frozen;"),
        "{card}"
    );

    // Without its tokenizer, the model is refused naming the file.
    std::fs::remove_file(moved.join("subwords.json")).unwrap();
    let out = nertrain(&["tag", "--model", moved.to_str().unwrap(), TEXTS[0]]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("subwords.json"), "{}", stderr(&out));
}

#[test]
fn fine_tuned_and_frozen_encoders_resume_exactly() {
    for tuning in ["fine-tune", "frozen"] {
        let whole = fit_with(
            &format!("encoder-whole-{tuning}"),
            "roberta",
            tuning,
            3,
            &[],
        );
        let split = fit_with(
            &format!("encoder-split-{tuning}"),
            "roberta",
            tuning,
            1,
            &[],
        );
        assert_eq!(
            split.join("checkpoint/encoder-optimizer.bpk").is_file(),
            tuning == "fine-tune"
        );
        let pretrained = "model.pretrained=data/encoders/roberta".to_string();
        let tuning_set = format!("model.pretrained_tuning={tuning}");
        let resume = ["--set", &pretrained, "--set", &tuning_set, "--resume"];
        let out = fit_small(&split, 3, &resume);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(learning_curve(&split).len(), 3);
        assert_eq!(learning_curve(&whole), learning_curve(&split), "{tuning}");
        assert_eq!(eval_f1(&whole), recorded_test_f1(&whole));
    }
}

#[test]
fn a_finished_frozen_run_resumed_reads_no_training_sentence_through_the_encoder() {
    let pretrained = "model.pretrained=data/encoders/bert";
    let frozen = [
        "--set",
        pretrained,
        "--set",
        "model.pretrained_tuning=frozen",
    ];
    let run = scratch_at("encoder-finished", "run");
    let out = fit_small(&run, 2, &frozen);
    assert!(out.status.success(), "{}", stderr(&out));
    let fitted = stdout(&out);
    assert!(fitted.contains("training, "), "{fitted}");
    let (test_f1, curve) = (recorded_test_f1(&run), learning_curve(&run));

    // No epoch is left, so only dev and test are read through the encoder, and scored as before.
    let out = fit_small(&run, 2, &[&frozen[..], &["--resume"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let resumed = stdout(&out);
    assert!(
        resumed.contains("with no epoch left to train") && !resumed.contains("training, "),
        "{resumed}"
    );
    assert_eq!(learning_curve(&run), curve);
    assert_eq!(recorded_test_f1(&run), test_f1);
}

#[test]
fn a_frozen_encoders_layers_kept_between_runs_are_read_back_as_computed() {
    let frozen = [
        "--set",
        "model.pretrained=data/encoders/bert",
        "--set",
        "model.pretrained_tuning=frozen",
    ];
    let cache = scratch_at("encoder-cache", "layers");
    let kept = [&frozen[..], &["--encoder-cache", cache.to_str().unwrap()]].concat();
    let fitted = |name: &str, args: &[&str]| {
        let run = scratch_at(name, "run");
        let out = fit_small(&run, 2, args);
        assert!(out.status.success(), "{}", stderr(&out));
        (learning_curve(&run), recorded_test_f1(&run), out)
    };
    let (curve, test_f1, _) = fitted("encoder-uncached", &frozen);
    // Of the 600 training, 150 dev and 150 test sentences, the first run reads only those it
    // met before (a sentence the sample has twice); the next reads all.
    let read = |out: &std::process::Output| -> usize {
        let said = stdout(out);
        let (before, _) = said.split_once(" read from ").expect(&said);
        before.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let (first_curve, first_f1, out) = fitted("encoder-cached-1", &kept);
    assert!(read(&out) < 900);
    let (second_curve, second_f1, out) = fitted("encoder-cached-2", &kept);
    assert_eq!(read(&out), 900);
    assert_eq!((first_curve, first_f1), (curve.clone(), test_f1));
    assert_eq!((second_curve, second_f1), (curve.clone(), test_f1));

    // A file cut short and one of another sentence are computed again, with a warning each.
    let before = snapshot(&cache);
    let files: Vec<&PathBuf> = before.0.iter().map(|(path, _)| path).collect();
    let whole = &before.0[0].1;
    std::fs::write(files[0], &whole[..whole.len() - 4]).unwrap();
    std::fs::copy(files[1], files[2]).unwrap();
    let (damaged_curve, damaged_f1, out) = fitted("encoder-cached-3", &kept);
    let warned = stderr(&out);
    assert!(
        warned.contains(&format!("{}: ", files[0].display())),
        "{warned}"
    );
    assert!(warned.contains("bytes, expected"), "{warned}");
    assert!(
        warned.contains("the layers of another sentence"),
        "{warned}"
    );
    assert_eq!(read(&out), 898);
    assert_eq!((damaged_curve, damaged_f1), (curve.clone(), test_f1));
    // Each written again as it was, and nothing else left there.
    assert_eq!(snapshot(&cache), before);

    // Poisoned values under a whole header (a NaN; another sentence's values of the same
    // length), a FIFO and a link to a device: each computed again with a warning, never read.
    let (i, j) = (0..files.len())
        .flat_map(|i| (i + 1..files.len()).map(move |j| (i, j)))
        .find(|&(i, j)| before.0[i].1.len() == before.0[j].1.len())
        .expect("two sentences of one length");
    let mut nan = before.0[i].1.clone();
    let at = nan.len() - 4;
    nan[at..].copy_from_slice(&f32::NAN.to_le_bytes());
    std::fs::write(files[i], &nan).unwrap();
    // The header: magic, version, words, width, key and the values' digest, 104 bytes.
    let swapped = [&before.0[j].1[..104], &before.0[i].1[104..]].concat();
    std::fs::write(files[j], swapped).unwrap();
    let others: Vec<&PathBuf> = (0..files.len())
        .filter(|k| ![i, j].contains(k))
        .map(|k| files[k])
        .collect();
    std::fs::remove_file(others[0]).unwrap();
    let made = std::process::Command::new("mkfifo").arg(others[0]).status();
    assert!(made.unwrap().success());
    std::fs::remove_file(others[1]).unwrap();
    std::os::unix::fs::symlink("/dev/zero", others[1]).unwrap();
    let (poisoned_curve, poisoned_f1, out) = fitted("encoder-cached-4", &kept);
    let warned = stderr(&out);
    assert_eq!(
        warned.matches("their digest differs").count(),
        2,
        "{warned}"
    );
    assert!(warned.contains("found a FIFO"), "{warned}");
    assert!(warned.contains("found a device"), "{warned}");
    assert_eq!(read(&out), 896);
    assert_eq!((poisoned_curve, poisoned_f1), (curve, test_f1));
    assert_eq!(snapshot(&cache), before);

    // A store that cannot be made is an error naming it.
    let not_a_dir = [&frozen[..], &["--encoder-cache", "data/sample/train.txt"]].concat();
    let out = fit_small(&scratch_at("encoder-cache-file", "run"), 2, &not_a_dir);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("data/sample/train.txt/")
            && stderr(&out).contains("cannot create the encoder's layer store"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn select_and_eval_read_a_frozen_encoders_layers_from_the_store_fit_filled() {
    let cache = scratch_at("encoder-cache-tagger", "layers");
    let cache_arg = cache.to_str().unwrap();
    let run = fit_with(
        "encoder-cache-tagger-fit",
        "bert",
        "frozen",
        2,
        &["--encoder-cache", cache_arg],
    );
    let model = run.to_str().unwrap();
    // What the store gave, from the line select and eval end with.
    let tally = |out: &std::process::Output| -> (usize, usize) {
        let said = stderr(out);
        let line = said
            .lines()
            .find(|l| l.starts_with("the frozen encoder's layers of "))
            .expect(&said);
        let number = |before: &str| -> usize {
            let (head, _) = line.split_once(before).expect(line);
            head.rsplit(' ').next().unwrap().parse().unwrap()
        };
        (number(" read from "), number(" computed"))
    };

    // eval of the test file reads every sentence fit computed, and scores as fit did.
    let eval = |extra: &[&str]| {
        let mut args = vec!["eval", "--model", model, "--data", "data/sample/test.txt"];
        args.extend(extra);
        let out = nertrain(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        out
    };
    let out = eval(&["--json", "--encoder-cache", cache_arg]);
    assert_eq!(tally(&out), (150, 0));
    assert_eq!(stdout(&out), stdout(&eval(&["--json"])));

    // select over a pool fit never read: computed once, then read, choosing the same tasks.
    let select = |extra: &[&str]| {
        let mut args = vec![
            "select",
            "--model",
            model,
            "--input",
            "data/sample/pool.txt",
            "--budget",
            "60",
            "--budget-unit",
            "tokens",
            "--strategy",
            "mnlp",
            "--regions",
            "budget",
        ];
        args.extend(extra);
        let out = nertrain(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        out
    };
    let tasks = stdout(&select(&[]));
    let kept = ["--encoder-cache", cache_arg];
    let fitted = snapshot(&cache);
    let first = select(&kept);
    let (read, computed) = tally(&first);
    assert!(computed > 0, "{}", stderr(&first));
    assert_eq!(stdout(&first), tasks);
    let second = select(&kept);
    assert_eq!(tally(&second), (read + computed, 0));
    assert_eq!(stdout(&second), tasks);

    // A pool's file cut short is computed again, with a warning naming it, and written again
    // whole.
    let before = snapshot(&cache);
    let (file, whole) = (before.0.iter())
        .find(|entry| !fitted.0.contains(entry))
        .unwrap();
    std::fs::write(file, &whole[..whole.len() - 4]).unwrap();
    let out = select(&kept);
    let warned = stderr(&out);
    assert!(
        warned.contains(&format!("warning: {}: ", file.display()))
            && warned.contains("bytes, expected"),
        "{warned}"
    );
    let (read_again, computed_again) = tally(&out);
    assert!(computed_again >= 1 && read_again + computed_again == read + computed);
    assert_eq!(stdout(&out), tasks);
    assert_eq!(snapshot(&cache), before);

    // eval's store is the tagger's: not for scoring a file of predictions.
    let out = nertrain(&[
        "eval",
        "--predicted",
        "data/sample/test.txt",
        "--encoder-cache",
        cache_arg,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn read_in_documents_fit_and_eval_agree() {
    // Each sentence read with its neighbours' sub-tokens as context, in fit's scoring and in
    // eval's alike.
    let run = fit_with(
        "encoder-documents",
        "bert",
        "fine-tune",
        2,
        &["--set", "data.context=document"],
    );
    assert_eq!(eval_f1(&run), recorded_test_f1(&run));
}

#[test]
fn a_distilbert_encoder_fits_fine_tuned() {
    let run = fit_with("encoder-distilbert", "distilbert", "fine-tune", 1, &[]);
    assert_eq!(eval_f1(&run), recorded_test_f1(&run));
}

/// A copy of `family`'s checkpoint under a fresh directory, `edit` applied to it.
fn broken_checkpoint(name: &str, family: &str, edit: impl FnOnce(&Path)) -> Scratch {
    let dir = scratch_at(name, "checkpoint");
    std::fs::create_dir_all(&dir).unwrap();
    let source = workspace().join("data/encoders").join(family);
    for file in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(source.join(file), dir.join(file)).unwrap();
    }
    edit(&dir);
    dir
}

/// What `fit` says of checkpoint `dir`, which it must refuse without writing a run.
fn refusal(name: &str, dir: &Path) -> String {
    let run = scratch_at(name, "run");
    let pretrained = format!("model.pretrained={}", dir.display());
    let out = fit_small(&run, 1, &["--set", &pretrained]);
    assert!(!out.status.success(), "{name} was fitted");
    assert!(!run.join("model.json").exists());
    stderr(&out)
}

/// `eval --json` of `model` on one sentence of `words` words (the sample's, over and over, all
/// `O`), and the process's peak resident memory in bytes, read while it runs (Linux).
fn eval_peak(model: &Path, words: usize, dir: &Path) -> (serde_json::Value, u64) {
    let sample = std::fs::read_to_string(workspace().join("data/sample/train.txt")).unwrap();
    let forms: Vec<&str> = (sample.lines())
        .filter(|line| !line.is_empty() && !line.starts_with("-DOCSTART-"))
        .map(|line| line.split(' ').next().unwrap())
        .collect();
    let mut text = String::new();
    for form in forms.iter().cycle().take(words) {
        text.push_str(form);
        text.push_str(" O\n");
    }
    let data = dir.join(format!("long-{words}.txt"));
    std::fs::write(&data, text + "\n").unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_nertrain"))
        .args([
            "eval",
            "--model",
            model.to_str().unwrap(),
            "--json",
            "--data",
        ])
        .arg(&data)
        .current_dir(workspace())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let process = procfs::process::Process::new(child.id() as i32).unwrap();
    let mut peak = 0;
    // The high-water mark only grows: its last reading before the exit is the peak, but for
    // what the last few milliseconds allocate.
    while child.try_wait().unwrap().is_none() {
        if let Some(kib) = process.status().ok().and_then(|status| status.vmhwm) {
            peak = peak.max(kib * 1024);
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    (serde_json::from_str(&stdout(&out)).unwrap(), peak)
}

#[test]
fn one_long_sentence_through_the_encoder_costs_each_word_no_more_than_two_rows_of_gates() {
    let hidden = 100;
    let sizes = format!("model.hidden={hidden}");
    let run = fit_with("encoder-long", "bert", "frozen", 1, &["--set", &sizes]);
    let data = scratch("encoder-long-data");
    let (short, at_short) = eval_peak(&run, 10_000, &data);
    let (long, at_long) = eval_peak(&run, 40_000, &data);
    for scores in [&short, &long] {
        assert!(scores["overall"]["f1"].is_number(), "{scores}");
    }
    // What each word adds to the peak: its row of the LSTM's cached input gates, with the
    // BiLSTM's states and the rest of the pipeline's per-word values, but neither every layer
    // of the encoder nor copies of the gates beside the encoder's share of them.
    let per_word = (at_long.saturating_sub(at_short)) as f64 / 30_000.0;
    let gates_row = (8 * hidden * 4) as f64;
    assert!(
        per_word < 2.5 * gates_row,
        "{per_word:.0} bytes a word ({at_short} bytes at 10,000 words, {at_long} at 40,000), \
         against {gates_row} for a row of gates"
    );
}

#[test]
fn bad_checkpoints_are_refused_naming_the_file() {
    let dir = broken_checkpoint("encoder-bad-type", "bert", |dir| {
        let config = dir.join("config.json");
        let text = std::fs::read_to_string(&config).unwrap();
        std::fs::write(&config, text.replace("\"bert\"", "\"gpt2\"")).unwrap();
    });
    let message = refusal("encoder-bad-type-run", &dir);
    assert!(message.contains("config.json"), "{message}");
    assert!(message.contains("gpt2"), "{message}");

    // Another checkpoint's tokenizer: sub-tokens past the encoder's embeddings.
    let roberta = workspace().join("data/encoders/roberta/tokenizer.json");
    let dir = broken_checkpoint("encoder-bad-tokenizer", "bert", |dir| {
        std::fs::copy(&roberta, dir.join("tokenizer.json")).unwrap();
    });
    let message = refusal("encoder-bad-tokenizer-run", &dir);
    assert!(message.contains("tokenizer.json"), "{message}");
    assert!(message.contains("vocab_size"), "{message}");

    let dir = broken_checkpoint("encoder-truncated", "bert", |dir| {
        let weights = dir.join("model.safetensors");
        let bytes = std::fs::read(&weights).unwrap();
        std::fs::write(&weights, &bytes[..bytes.len() / 3]).unwrap();
    });
    let message = refusal("encoder-truncated-run", &dir);
    assert!(message.contains("model.safetensors"), "{message}");

    let dir = broken_checkpoint("encoder-shape", "bert", |dir| {
        let config = dir.join("config.json");
        let text = std::fs::read_to_string(&config).unwrap();
        std::fs::write(
            &config,
            text.replace("\"intermediate_size\": 37", "\"intermediate_size\": 40"),
        )
        .unwrap();
    });
    let message = refusal("encoder-shape-run", &dir);
    assert!(message.contains("model.safetensors"), "{message}");
    assert!(message.contains("linear_inner"), "{message}");

    let message = refusal(
        "encoder-missing-run",
        &scratch_at("encoder-nowhere", "none"),
    );
    assert!(message.contains("config.json"), "{message}");
}

#[test]
fn a_frozen_encoders_last_layers_side_by_side_make_a_model_as_its_mix_does() {
    let concat = ["--set", "model.pretrained_layers=concat-last-2"];
    let run = fit_with("encoder-concat", "bert", "frozen", 2, &concat);
    let described = std::fs::read_to_string(run.join("model.json")).unwrap();
    assert!(
        described.contains(r#""pretrained_layers": "concat-last-2""#),
        "{described}"
    );
    assert_eq!(eval_f1(&run), recorded_test_f1(&run));
    let mixed = fit_with("encoder-concat-mix", "bert", "frozen", 2, &[]);
    assert_ne!(learning_curve(&run), learning_curve(&mixed));

    // Served, the entities `tag` finds.
    let server = Server::start(&run, &[], None);
    let (status, body) = server.tag(&serde_json::json!({ "text": TEXTS[0] }));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["entities"], tag_json(&run, &TEXTS[..1])[0]["entities"]);

    let card = card_of(&run, "encoder-concat-card");
    assert!(card.contains("its last 2 layers side by side"), "{card}");

    // The tiny BERT has 3 layers, its embeddings' among them: a fourth is refused, by `fit`
    // before anything is written and in a model's description.
    let refused = scratch_at("encoder-concat-refused", "run");
    let out = fit_small(
        &refused,
        1,
        &[
            "--set",
            "model.pretrained=data/encoders/bert",
            "--set",
            "model.pretrained_layers=concat-last-4",
        ],
    );
    assert!(!out.status.success());
    let message = stderr(&out);
    assert!(message.contains("config.json"), "{message}");
    assert!(message.contains("model.pretrained_layers"), "{message}");
    assert!(!refused.exists());
    std::fs::write(
        run.join("model.json"),
        described.replace("concat-last-2", "concat-last-4"),
    )
    .unwrap();
    let out = nertrain(&["tag", "--model", run.to_str().unwrap(), TEXTS[0]]);
    assert!(!out.status.success());
    let message = stderr(&out);
    assert!(message.contains("model.json"), "{message}");
    assert!(message.contains("concat-last-4"), "{message}");
}

/// Labels of `entities` (a JSON array of tag's or /predict's entities) with their offsets.
fn spans(entities: &serde_json::Value) -> Vec<(u64, u64, String)> {
    entities
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let e = e.get("value").unwrap_or(e);
            let label = e.get("label").unwrap_or(&e["labels"][0]);
            (
                e["start"].as_u64().unwrap(),
                e["end"].as_u64().unwrap(),
                label.as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_fine_tuned_encoder_model_decodes_selects_serves_and_is_continued_on_partial_labels() {
    let dir = scratch("encoder-downstream");
    let run = fit_with("encoder-downstream-fit", "roberta", "fine-tune", 2, &[]);
    let model = run.to_str().unwrap();

    // Marginals, confidences and the n best paths, the first of them the decoded one.
    let out = nertrain(&[
        "tag", "--model", model, "--format", "json", "--probs", "--nbest", "3", TEXTS[0],
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let tagged: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    for token in tagged["tokens"].as_array().unwrap() {
        let probs = token["probs"].as_object().unwrap();
        let total: f64 = probs.values().map(|p| p.as_f64().unwrap()).sum();
        assert!((total - 1.0).abs() < 1e-5, "{token}");
    }
    for entity in tagged["entities"].as_array().unwrap() {
        let confidence = entity["confidence"].as_f64().unwrap();
        assert!(confidence > 0.0 && confidence <= 1.0 + 1e-9, "{entity}");
    }
    let nbest = tagged["nbest"].as_array().unwrap();
    assert_eq!(nbest.len(), 3);
    assert_eq!(spans(&nbest[0]["entities"]), spans(&tagged["entities"]));

    // A confidence threshold keeps a subset of the entities.
    let entities = |extra: &[&str]| eval_json(&run, extra)["overall"]["found"].as_u64().unwrap();
    let kept = entities(&["--threshold", "PER=0.9", "--threshold", "LOC=0.9"]);
    assert!(kept <= entities(&["--all-entities"]));

    // The doubtful regions of a pool, from the exact marginals, read back as partial labels.
    let tasks = dir.join("tasks.json");
    let out = nertrain(&[
        "select",
        "--model",
        model,
        "--input",
        "data/sample/pool.txt",
        "--budget",
        "40",
        "--budget-unit",
        "tokens",
        "--strategy",
        "entropy",
        "--regions",
        "0.95",
        "--output",
        tasks.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut written: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&tasks).unwrap()).unwrap();
    assert!(!written.is_empty());
    for task in &mut written {
        assert!(
            !task["data"]["known"].as_array().unwrap().is_empty(),
            "{task}"
        );
        let result = task["predictions"][0]["result"].clone();
        task["annotations"] = serde_json::json!([{"id": 1, "result": result}]);
    }
    let export = dir.join("export.json");
    std::fs::write(&export, serde_json::to_string(&written).unwrap()).unwrap();

    // Continued on them by an experiment that names no checkpoint: the encoder is the model's.
    let continued = dir.join("continued");
    let out = fit_small(
        &continued,
        1,
        &[
            "--set",
            &format!("data.train={}", serde_json::to_string(&export).unwrap()),
            "--set",
            &format!("train.start_from={:?}", model),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(continued.join("subwords.json").is_file());
    assert_eq!(tag_json(&continued, &TEXTS).len(), TEXTS.len());

    // Label Studio's backend predicts what `tag` finds.
    let server = Server::start(&run, &[], None);
    let config = r#"<View><Labels name="ents" toName="doc"><Label value="PER"/><Label value="ORG"/><Label value="LOC"/><Label value="MISC"/></Labels><Text name="doc" value="$body"/></View>"#;
    for text in TEXTS {
        let request = serde_json::json!({
            "tasks": [{"id": 1, "data": {"body": text}}], "label_config": config});
        let (status, body) = server.request("POST", "/predict", request.to_string().as_bytes());
        assert_eq!(status, 200, "{body}");
        let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            spans(&answer["results"][0]["result"]),
            spans(&tag_json(&run, &[text])[0]["entities"]),
            "{body}"
        );
    }
}

/// `dir` made a checkpoint of links, as a Hugging Face snapshot is: each of `files` (from the
/// workspace) a symbolic link to it.
fn linked_checkpoint(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, source) in files {
        std::os::unix::fs::symlink(workspace().join(source), dir.join(name)).unwrap();
    }
}

/// Checkpoints as users download them: a snapshot's links followed, and PyTorch weights in half
/// precision read as f32, so that the model trained from them tags; a FIFO or a device in a
/// file's place refused at once, naming it.
#[test]
fn checkpoints_as_downloaded_train_models_that_tag_and_odd_files_are_refused() {
    let checkpoint = scratch_at("encoder-half", "checkpoint");
    linked_checkpoint(
        &checkpoint,
        &[
            ("config.json", "data/encoders/bert-bin-f16/config.json"),
            (
                "pytorch_model.bin",
                "data/encoders/bert-bin-f16/pytorch_model.bin",
            ),
            ("tokenizer.json", "data/encoders/bert/tokenizer.json"),
        ],
    );
    let run = scratch_at("encoder-half", "run");
    let pretrained = format!("model.pretrained={}", checkpoint.display());
    let out = fit_small(&run, 1, &["--set", &pretrained]);
    assert!(out.status.success(), "{}", stderr(&out));
    nertrain_ok(&["tag", "--model", run.to_str().unwrap(), TEXTS[0]]);
    assert!(eval_f1(&run).is_finite());

    let fifo = broken_checkpoint("encoder-fifo", "bert", |dir| {
        std::fs::remove_file(dir.join("config.json")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(dir.join("config.json"))
            .status();
        assert!(made.unwrap().success());
    });
    let message = refusal("encoder-fifo-run", &fifo);
    assert!(message.contains("config.json: cannot read"), "{message}");
    assert!(message.contains("found a FIFO"), "{message}");
    let device = broken_checkpoint("encoder-device", "bert", |dir| {
        std::fs::remove_file(dir.join("tokenizer.json")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.join("tokenizer.json")).unwrap();
    });
    let message = refusal("encoder-device-run", &device);
    assert!(message.contains("tokenizer.json"), "{message}");
    assert!(message.contains("found a device"), "{message}");
}

/// A model's `subwords.json` is bound to it by the SHA-256 `model.json` records, as its
/// dictionary is; and a layer store named for a fine-tuned encoder is said to keep nothing.
#[test]
fn a_fine_tuned_models_tokenizer_is_its_own_and_keeps_no_layers() {
    let cache = scratch_at("encoder-fine-tuned-cache", "layers");
    let cache_arg = cache.to_str().unwrap();
    let run = scratch_at("encoder-fine-tuned-own", "run");
    let fine_tuned = [
        "--set",
        "model.pretrained=data/encoders/bert",
        "--set",
        "model.pretrained_tuning=fine-tune",
        "--encoder-cache",
        cache_arg,
    ];
    let out = fit_small(&run, 1, &fine_tuned);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the encoder is fine-tuned"),
        "{}",
        stderr(&out)
    );
    let model = run.to_str().unwrap();
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("model.json")).unwrap()).unwrap();
    assert_eq!(meta["subwords_sha256"].as_str().unwrap().len(), 64);
    let out = nertrain(&[
        "eval",
        "--model",
        model,
        "--data",
        "data/sample/dev.txt",
        "--encoder-cache",
        cache_arg,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the encoder is fine-tuned"),
        "{}",
        stderr(&out)
    );
    assert!(!cache.exists() || snapshot(&cache).0.is_empty());

    // The same tokenizer, lowercasing: another cut of every word, refused.
    let subwords = run.join("subwords.json");
    let mut tokenizer: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&subwords).unwrap()).unwrap();
    tokenizer["normalizer"] = serde_json::json!({"type": "Lowercase"});
    std::fs::write(&subwords, tokenizer.to_string()).unwrap();
    let out = nertrain(&["eval", "--model", model, "--data", "data/sample/dev.txt"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("subwords.json"), "{}", stderr(&out));
    assert!(stderr(&out).contains("SHA-256"), "{}", stderr(&out));
}
