//! Text as people write it scores as the tokenized file does: the sample's treebank-tokenized
//! sentences (`data/sample/rawtext.txt`) against the same sentences detokenized with Moses, with
//! their entities as character spans (`data/sample/rawtext.jsonl`, scripts/data/make_rawtext_sample.py).
//! Also span-annotated JSON lines as training data, `convert` and `tokenize`.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{Scratch, nertrain, same_output, sample_model, scratch, scratch_at, workspace};
use serde::Deserialize;

fn ok(args: &[&str]) -> String {
    let output = nertrain(args);
    assert!(
        output.status.success(),
        "nertrain {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn f1(model: &Path, data: &str) -> f64 {
    let report: serde_json::Value = serde_json::from_str(&ok(&[
        "eval",
        "--model",
        model.to_str().unwrap(),
        "--data",
        data,
        "--json",
    ]))
    .unwrap();
    report["overall"]["f1"].as_f64().unwrap()
}

#[derive(Deserialize)]
struct Span {
    start: usize,
    end: usize,
    label: String,
}

#[derive(Deserialize)]
struct Line {
    text: String,
    #[serde(default)]
    spans: Vec<Span>,
    doc: Option<usize>,
}

fn rawtext() -> Vec<Line> {
    std::fs::read_to_string(workspace().join("data/sample/rawtext.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn text_scores_as_the_tokenized_file_for_both_kinds_of_model() {
    for context in ["sentence", "document", "dictionary"] {
        let model = sample_model(context);
        let tokenized = f1(&model, "data/sample/rawtext.txt");
        let text = f1(&model, "data/sample/rawtext.jsonl");
        assert!(
            (tokenized - text).abs() <= 0.3,
            "{context}: eval {tokenized} on tokens, {text} on text"
        );
    }
}

#[test]
fn tag_finds_in_text_what_eval_scores() {
    let model = sample_model("document");
    let lines = rawtext();
    // One sentence a line, a blank line after each document, as `tag --input` reads documents.
    let mut input = String::new();
    for (i, line) in lines.iter().enumerate() {
        input.push_str(&line.text);
        input.push('\n');
        if lines.get(i + 1).is_some_and(|next| next.doc != line.doc) {
            input.push('\n');
        }
    }
    let dir = scratch("rawtext-tag");
    let file = dir.join("input.txt");
    std::fs::write(&file, input).unwrap();
    let output = ok(&[
        "tag",
        "--model",
        model.to_str().unwrap(),
        "--input",
        file.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let records: Vec<serde_json::Value> = output
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &serde_json::Value| !r["text"].as_str().unwrap().trim().is_empty())
        .collect();
    assert_eq!(records.len(), lines.len());
    let (mut gold, mut found, mut correct) = (0, 0, 0);
    for (line, record) in lines.iter().zip(&records) {
        let expected: BTreeSet<(usize, usize, &str)> = line
            .spans
            .iter()
            .map(|s| (s.start, s.end, s.label.as_str()))
            .collect();
        let entities: BTreeSet<(usize, usize, &str)> = record["entities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["start"].as_u64().unwrap() as usize,
                    e["end"].as_u64().unwrap() as usize,
                    e["label"].as_str().unwrap(),
                )
            })
            .collect();
        gold += expected.len();
        found += entities.len();
        correct += expected.intersection(&entities).count();
    }
    let (p, r) = (
        100.0 * correct as f64 / found as f64,
        100.0 * correct as f64 / gold as f64,
    );
    let tag_f1 = 2.0 * p * r / (p + r);
    let eval_f1 = f1(&model, "data/sample/rawtext.jsonl");
    assert!(
        (tag_f1 - eval_f1).abs() < 0.005,
        "tag {tag_f1} and eval {eval_f1} score the same text"
    );
}

#[test]
fn the_tokenizer_cuts_text_back_into_the_corpus_tokens() {
    let model = sample_model("sentence");
    let lines = rawtext();
    let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
    let mut args = vec!["tokenize", "--model", model.to_str().unwrap()];
    args.extend(&texts);
    let output = ok(&args);
    let cut: Vec<String> = output
        .split("\n\n")
        .map(|block| block.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|s| !s.is_empty())
        .collect();
    let corpus = std::fs::read_to_string(workspace().join("data/sample/rawtext.txt")).unwrap();
    let sentences: Vec<String> = corpus
        .split("\n\n")
        .map(|block| {
            block
                .lines()
                .filter(|l| !l.starts_with("-DOCSTART-"))
                .map(|l| l.split(' ').next().unwrap())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|s| !s.is_empty())
        .collect();
    assert_eq!(cut, sentences);
}

/// A model from before tokenizers were saved: `model.json` without one.
fn without_tokenizer(model: &Path, name: &str) -> Scratch {
    let dir = scratch_at(name, "run");
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["vocab.json", "model.bpk", "config.toml"] {
        std::fs::copy(model.join(file), dir.join(file)).unwrap();
    }
    let mut meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(model.join("model.json")).unwrap()).unwrap();
    assert_eq!(meta["tokenizer"]["kind"], "treebank");
    meta.as_object_mut().unwrap().remove("tokenizer");
    std::fs::write(dir.join("model.json"), meta.to_string()).unwrap();
    dir
}

#[test]
fn models_without_a_saved_tokenizer_read_text_as_before() {
    let old = without_tokenizer(&sample_model("sentence"), "rawtext-old");
    let old = old.to_str().unwrap();
    assert_eq!(
        ok(&["tokenize", "--model", old, "The U.S. didn't pay."]),
        "The U . S . didn ' t pay .\n\n"
    );
    // Which is why the check above can fail: cut this way, the text scores otherwise.
    let tokenized = f1(Path::new(old), "data/sample/rawtext.txt");
    let text = f1(Path::new(old), "data/sample/rawtext.jsonl");
    assert!(
        (tokenized - text).abs() > 0.3,
        "{tokenized} vs {text}: the BERT pre-tokenizer cuts the treebank's tokens"
    );
}

#[test]
fn span_annotated_text_trains_converts_and_reports_misaligned_spans() {
    let dir = scratch("rawtext-jsonl");
    let converted = ok(&["convert", "--to", "iob2", "data/sample/rawtext.jsonl"]);
    let corpus = std::fs::read_to_string(workspace().join("data/sample/rawtext.txt")).unwrap();
    let tokens = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        tokens(&converted),
        tokens(&corpus),
        "text → tokens → the corpus"
    );

    // One span cut inside a word, one fine.
    let train = dir.join("train.jsonl");
    std::fs::write(
        &train,
        concat!(
            r#"{"text": "Anna Kovacs flew to Lisbon.", "spans": [{"start": 0, "end": 11, "label": "PER"}, {"start": 20, "end": 26, "label": "LOC"}]}"#,
            "\n",
            r#"{"text": "Kovacs left Oslo.", "spans": [{"start": 0, "end": 3, "label": "PER"}, {"start": 12, "end": 16, "label": "LOC"}]}"#,
            "\n"
        ),
    )
    .unwrap();
    let run = dir.join("run");
    let args = [
        format!("data.train={}", train.display()),
        format!("data.dev={}", train.display()),
        "data.test=data/sample/rawtext.jsonl".to_string(),
        format!("train.output={}", run.display()),
        "train.epochs=1".to_string(),
    ];
    let mut command = vec!["fit", "--config", "configs/sample.toml"];
    for arg in &args {
        command.extend(["--set", arg.as_str()]);
    }
    let output = nertrain(&command);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "{}:2: span 0..3 \"Kov\" (PER) does not start and end at token boundaries",
            train.display()
        )),
        "{stderr}"
    );
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("model.json")).unwrap()).unwrap();
    assert_eq!(meta["tokenizer"]["kind"], "treebank");

    let output = nertrain(&[
        "eval",
        "--model",
        run.to_str().unwrap(),
        "--data",
        train.to_str().unwrap(),
    ]);
    assert!(output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("1 span in all fall between"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("with 4 phrases"));
}

#[test]
fn bad_span_files_are_errors_naming_the_line() {
    let dir = scratch("rawtext-bad");
    let bad = dir.join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"text\": \"fine\", \"spans\": []}\n{\"text\": \"ab\", \"spans\": [{\"start\": 1, \"end\": 9, \"label\": \"X\"}]}\n",
    )
    .unwrap();
    let model = sample_model("sentence");
    let output = nertrain(&[
        "eval",
        "--model",
        model.to_str().unwrap(),
        "--data",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("{}:2: span 1..9 (X) is not within", bad.display())),
        "{stderr}"
    );
}

#[test]
fn models_from_before_tokenizers_were_saved_tag_and_score_as_they_did() {
    let fixtures = "crates/cli/tests/fixtures/before-tokenizers";
    let texts = format!("{fixtures}/texts.txt");
    for context in ["sentence", "document"] {
        let model = format!("{fixtures}/{context}");
        let cases: [(&str, Vec<&str>); 6] = [
            (
                "tag.jsonl",
                vec!["tag", "--input", &texts, "--format", "json", "--nbest", "3"],
            ),
            (
                "tag.conll",
                vec!["tag", "--input", &texts, "--format", "conll"],
            ),
            (
                "tag-probs.jsonl",
                vec![
                    "tag",
                    "--format",
                    "json",
                    "--probs",
                    "Toyota's office in São Paulo opened.",
                    "Dr. J. Smith met Anna Schmidt.",
                ],
            ),
            (
                "tag.txt",
                vec![
                    "tag",
                    "Anna Schmidt, who works for Siemens, arrived in Lisbon.",
                    "The U.S. didn't pay.",
                    "--nbest",
                    "2",
                ],
            ),
            ("eval.txt", vec!["eval", "--data", "data/sample/test.txt"]),
            (
                "eval.json",
                vec!["eval", "--data", "data/sample/test.txt", "--json"],
            ),
        ];
        for (expected, mut args) in cases {
            args.extend(["--model", model.as_str()]);
            let expected =
                std::fs::read_to_string(workspace().join(&model).join(expected)).unwrap();
            // The same weights: another CPU changes the last digits alone.
            let printed = ok(&args);
            assert!(
                same_output(&printed, &expected, 1e-6),
                "{context}: {args:?} prints what it printed:\n{printed}\nnot\n{expected}"
            );
        }
    }
}
