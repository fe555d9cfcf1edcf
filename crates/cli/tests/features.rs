//! Feature columns end to end: a CoNLL column named in `data.features` is learned as an embedded
//! feature with its vocabulary stored in the model, read back by `eval` and `tag --columns`
//! alike, and refused where there are no columns to read (text, `serve`); bad settings and
//! files are errors naming the key or the line.

mod common;

use std::path::{Path, PathBuf};

use common::{fit_small, nertrain, scratch, stderr, stdout};

/// The sample's `split` with a column between word and tag that gives each token's entity type
/// (`XLOC`, `XO`, ...): a feature the model can lean on, so that whether it is read shows in
/// the scores. With `blind`, the column says `XO` everywhere.
fn with_type_column(split: &str, dir: &Path, blind: bool) -> PathBuf {
    let text =
        std::fs::read_to_string(common::workspace().join(format!("data/sample/{split}.txt")))
            .unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [word, tag] if *word != "-DOCSTART-" => {
                let kind = tag.split_once('-').map_or("O", |(_, kind)| kind);
                let kind = if blind { "O" } else { kind };
                out.push_str(&format!("{word} X{kind} {tag}\n"));
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    let path = dir.join(format!("{split}{}.txt", if blind { "-blind" } else { "" }));
    std::fs::write(&path, out).unwrap();
    path
}

fn span_f1(report: &str) -> f64 {
    let line = report.lines().find(|l| l.starts_with("accuracy:")).unwrap();
    line.rsplit("FB1:").next().unwrap().trim().parse().unwrap()
}

#[test]
fn a_feature_column_is_learned_stored_and_read_from_columns_only() {
    let dir = scratch("features");
    let (train, dev) = (
        with_type_column("train", &dir, false),
        with_type_column("dev", &dir, false),
    );
    let test = with_type_column("test", &dir, false);
    let blind = with_type_column("dev", &dir, true);
    let run = dir.join("run");
    let set = |key: &str, path: &Path| format!("{key}={:?}", path.to_str().unwrap());
    let fit = fit_small(
        &run,
        3,
        &[
            "--set",
            &set("data.train", &train),
            "--set",
            &set("data.dev", &dev),
            "--set",
            &set("data.test", &test),
            "--set",
            "data.features=[{ column = 1, dim = 5 }]",
        ],
    );
    assert!(fit.status.success(), "{}", stderr(&fit));
    assert!(
        stdout(&fit).contains("feature column 1: 5 values"),
        "{}",
        stdout(&fit)
    );
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("model.json")).unwrap()).unwrap();
    assert_eq!(meta["columns"]["feature_columns"], serde_json::json!([1]));
    assert_eq!(meta["model"]["feature_dims"], serde_json::json!([5]));
    assert_eq!(meta["sizes"]["features"], serde_json::json!([7]));

    // The column is read: hiding what it says costs the model most of its entities.
    let run_arg = run.to_str().unwrap();
    let eval = |data: &Path| {
        let out = nertrain(&["eval", "--model", run_arg, "--data", data.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    let (seen, hidden) = (span_f1(&eval(&dev)), span_f1(&eval(&blind)));
    assert!(
        seen > hidden + 20.0,
        "dev F1 {seen} with the column, {hidden} without"
    );

    // `tag --columns` gives the tags `eval` scored.
    let output = dir.join("predicted.txt");
    let out = nertrain(&[
        "eval",
        "--model",
        run_arg,
        "--data",
        dev.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let scored: Vec<String> = std::fs::read_to_string(&output)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("-DOCSTART-"))
        .map(|l| l.rsplit(' ').next().unwrap().to_string())
        .collect();
    let tagged = nertrain(&[
        "tag",
        "--model",
        run_arg,
        "--input",
        dev.to_str().unwrap(),
        "--columns",
        "--format",
        "conll",
    ]);
    assert!(tagged.status.success(), "{}", stderr(&tagged));
    let tags: Vec<String> = stdout(&tagged)
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.rsplit(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(tags, scored);

    // Text has no columns: tag and serve say so, rather than tag without them.
    let text = nertrain(&["tag", "--model", run_arg, "Anna flew to Oslo ."]);
    assert!(!text.status.success());
    assert!(
        stderr(&text).contains("feature columns [1]"),
        "{}",
        stderr(&text)
    );
    assert!(stderr(&text).contains("--columns"), "{}", stderr(&text));
    let serve = nertrain(&["serve", "--model", run_arg, "--addr", "127.0.0.1:0"]);
    assert!(!serve.status.success());
    assert!(
        stderr(&serve).contains("feature columns [1]"),
        "{}",
        stderr(&serve)
    );
    // A file without the column is an error at its first line.
    let plain = nertrain(&["eval", "--model", run_arg, "--data", "data/sample/dev.txt"]);
    assert!(!plain.status.success());
    assert!(
        stderr(&plain).contains("dev.txt:3: feature column 1 is also the tag column"),
        "{}",
        stderr(&plain)
    );

    // Another tag set for the column (another POS tagger, say) is refused, not read as
    // unknown throughout; a few values never seen are a warning with their share.
    let text = std::fs::read_to_string(&dev).unwrap();
    let other = dir.join("dev-other-tagset.txt");
    std::fs::write(&other, text.replace(" X", " Y")).unwrap();
    let refused = nertrain(&[
        "eval",
        "--model",
        run_arg,
        "--data",
        other.to_str().unwrap(),
    ]);
    assert!(!refused.status.success());
    let message = stderr(&refused);
    assert!(
        message.contains("feature column 1: 100.0% of its values") && message.contains("YO"),
        "{message}"
    );
    let tagged = nertrain(&[
        "tag",
        "--model",
        run_arg,
        "--input",
        other.to_str().unwrap(),
        "--columns",
    ]);
    assert!(!tagged.status.success() && stderr(&tagged).contains("never seen in training"));
    let some = dir.join("dev-some-unseen.txt");
    std::fs::write(&some, text.replacen(" XO ", " XNEW ", 3)).unwrap();
    let warned = nertrain(&["eval", "--model", run_arg, "--data", some.to_str().unwrap()]);
    assert!(warned.status.success(), "{}", stderr(&warned));
    let message = stderr(&warned);
    assert!(
        message.contains("warning:")
            && message.contains("feature column 1:")
            && message.contains("(3 of ")
            && message.contains("XNEW"),
        "{message}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_feature_settings_are_errors_naming_the_key_or_line() {
    let dir = scratch("features-errors");
    let train = with_type_column("train", &dir, false);
    let test = with_type_column("test", &dir, false);
    let train_set = format!("data.train={:?}", train.to_str().unwrap());
    let test_set = format!("data.test={:?}", test.to_str().unwrap());
    let dev = with_type_column("dev", &dir, false);
    let dev_set = format!("data.dev={:?}", dev.to_str().unwrap());
    let refused = |extra: &[&str]| {
        let fit = fit_small(&dir.join("run"), 1, extra);
        assert!(!fit.status.success());
        stderr(&fit)
    };
    let error = refused(&["--set", "data.features=[{ column = -1, dim = 5 }]"]);
    assert!(
        error.contains("data.features: expected columns other than"),
        "{error}"
    );
    let error = refused(&["--set", "data.features=[{ column = 1, dim = 0 }]"]);
    assert!(
        error.contains("data.features: expected at most 64 columns"),
        "{error}"
    );
    let error = refused(&[
        "--set",
        "data.features=[{ column = 1, dim = 5 }]",
        "--set",
        "model.feature_dims=[4]",
    ]);
    assert!(
        error.contains("model.feature_dims: expected the dims of data.features"),
        "{error}"
    );
    // The sample's own files have no such column: the first token line says so.
    let error = refused(&["--set", "data.features=[{ column = 2, dim = 5 }]"]);
    assert!(
        error.contains("train.txt:3: feature column 2 does not exist in a line of 2 columns"),
        "{error}"
    );
    // Text from an annotation tool has no columns either.
    let error = refused(&[
        "--set",
        &train_set,
        "--set",
        &test_set,
        "--set",
        "data.dev=\"data/sample/rawtext.jsonl\"",
        "--set",
        "data.features=[{ column = 1, dim = 5 }]",
    ]);
    assert!(error.contains("rawtext.jsonl"), "{error}");
    assert!(
        error.contains("reads 1 feature column beside the words"),
        "{error}"
    );
    // A continued model keeps its network: one trained without the column cannot read it.
    let plain = common::sample_model("sentence");
    let error = refused(&[
        "--set",
        &train_set,
        "--set",
        &dev_set,
        "--set",
        &test_set,
        "--set",
        "model.char_filters=30",
        "--set",
        &format!("train.start_from={:?}", plain.to_str().unwrap()),
        "--set",
        "data.features=[{ column = 1, dim = 5 }]",
    ]);
    assert!(
        error.contains("model.feature_dims is [5] in the experiment but []"),
        "{error}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
