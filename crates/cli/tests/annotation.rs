//! The annotation loop through the binary: annotation tools' exports read (convert, eval), and
//! `select` choosing texts of a pool and writing them as tasks the tools import, pre-annotated
//! with the entities `tag` finds.

mod common;

use std::path::Path;

use common::{nertrain, sample_model, scratch, stderr, stdout};

fn select(args: &[&str]) -> std::process::Output {
    let model = sample_model("sentence");
    let mut all = vec!["select", "--model", model.to_str().unwrap()];
    all.extend(args);
    nertrain(&all)
}

#[test]
fn every_tools_export_converts_to_the_same_conll() {
    let expected = stdout(&nertrain(&[
        "convert",
        "--to",
        "iob2",
        "data/annotations/prodigy.jsonl",
    ]));
    assert!(
        expected.contains("Anna B-PER\nKovacs I-PER\n"),
        "{expected}"
    );
    assert!(expected.contains("Katowice B-LOC\n"), "{expected}");
    for export in [
        "data/annotations/doccano.jsonl",
        "data/annotations/doccano-entities.jsonl",
        "data/annotations/label-studio.json",
        "data/annotations/label-studio-min.json",
    ] {
        let out = nertrain(&["convert", "--to", "iob2", export]);
        assert!(out.status.success(), "{export}: {}", stderr(&out));
        assert_eq!(stdout(&out), expected, "{export}");
    }
    // brat: one document a file, so the third (entity-free) text is not there.
    let out = nertrain(&["convert", "--to", "iob2", "data/annotations/brat"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("discontinuous"), "{}", stderr(&out));
    let brat = stdout(&out);
    let first_two: String = expected
        .split("-DOCSTART- O\n\n")
        .take(3)
        .collect::<Vec<_>>()
        .join("-DOCSTART- O\n\n");
    assert_eq!(brat, first_two);
}

#[test]
fn a_line_without_spans_is_an_error_not_a_text_without_entities() {
    let dir = scratch("no-spans");
    let file = dir.join("export.jsonl");
    std::fs::write(&file, "{\"text\": \"Anna flew.\", \"spans\": []}\n{\"id\": 2, \"text\": \"Kovacs\", \"entity\": []}\n").unwrap();
    for command in [
        vec!["convert", "--to", "iob2", file.to_str().unwrap()],
        vec![
            "eval",
            "--model",
            sample_model("sentence").to_str().unwrap(),
            "--data",
            file.to_str().unwrap(),
        ],
    ] {
        let out = nertrain(&command);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("{}:2: no spans", file.display())),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn selected_tasks_carry_the_entities_tag_finds_and_read_back_as_gold() {
    let dir = scratch("select-doccano");
    let tasks = dir.join("tasks.jsonl");
    let out = select(&[
        "--input",
        "data/sample/pool.txt",
        "--budget",
        "5",
        "--format",
        "doccano",
        "--output",
        tasks.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("chose 5 of 60 texts by margin"),
        "{}",
        stderr(&out)
    );
    let pool: Vec<String> =
        std::fs::read_to_string(common::workspace().join("data/sample/pool.txt"))
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&tasks)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5);
    let scores: Vec<f64> = lines.iter().map(|l| l["score"].as_f64().unwrap()).collect();
    // The most doubtful first: the tasks' scores are certainties, lowest first.
    assert!(scores.windows(2).all(|w| w[0] <= w[1]), "{scores:?}");
    // Each task is its pool line, with the entities `tag` finds in it.
    let model = sample_model("sentence");
    for line in &lines {
        let text = line["text"].as_str().unwrap();
        assert_eq!(text, pool[line["line"].as_u64().unwrap() as usize - 1]);
        let tagged: serde_json::Value = serde_json::from_str(&stdout(&nertrain(&[
            "tag",
            "--model",
            model.to_str().unwrap(),
            "--format",
            "json",
            text,
        ])))
        .unwrap();
        let entities: Vec<serde_json::Value> = tagged["entities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| serde_json::json!([e["start"], e["end"], e["label"]]))
            .collect();
        assert_eq!(line["label"].as_array().unwrap(), &entities, "{text}");
    }
    // The doccano file reads back as gold: what an annotator who accepts everything exports.
    let corpus = nertrain_annotate::read_annotated(&tasks).unwrap();
    assert_eq!(corpus.texts.len(), 5);
}

#[test]
fn label_studio_tasks_have_the_models_predictions_and_scores() {
    let out = select(&[
        "--input",
        "data/sample/pool.txt",
        "--budget",
        "3",
        "--strategy",
        "expected-errors",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let tasks: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let tasks = tasks.as_array().unwrap();
    assert_eq!(tasks.len(), 3);
    for task in tasks {
        let text = task["data"]["text"].as_str().unwrap();
        let prediction = &task["predictions"][0];
        // The weights' id, as `serve` answers for the same model.
        let weights = nertrain_model::ModelFiles::new(sample_model("sentence")).weights_id();
        assert_eq!(prediction["model_version"], weights.unwrap().as_str());
        assert!(prediction["score"].as_f64().unwrap() >= 0.0);
        for region in prediction["result"].as_array().unwrap() {
            assert_eq!(region["type"], "labels");
            assert_eq!(
                (region["from_name"].as_str(), region["to_name"].as_str()),
                (Some("label"), Some("text"))
            );
            let value = &region["value"];
            let (start, end) = (
                value["start"].as_u64().unwrap() as usize,
                value["end"].as_u64().unwrap() as usize,
            );
            let covered: String = text.chars().skip(start).take(end - start).collect();
            assert_eq!(value["text"], covered.as_str());
            let score = region["score"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&score), "{score}");
        }
    }
}

#[test]
fn near_duplicates_and_blank_lines_are_not_chosen_and_random_is_seeded() {
    let dir = scratch("select-pool");
    let pool = dir.join("pool.txt");
    let text = "Anna Schmidt flew from Berlin to Lisbon on Monday.";
    std::fs::write(
        &pool,
        format!(
            "{text}\n\n{text}\n{}\nPeter lives in Oslo.\n{text}\n",
            text.to_uppercase()
        ),
    )
    .unwrap();
    let chosen = |args: &[&str]| -> Vec<u64> {
        let mut all = vec!["--input", pool.to_str().unwrap(), "--format", "doccano"];
        all.extend(args);
        let out = select(&all);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["line"]
                    .as_u64()
                    .unwrap()
            })
            .collect()
    };
    for strategy in [
        "margin",
        "least-confidence",
        "entropy",
        "expected-errors",
        "random",
    ] {
        let lines = chosen(&["--budget", "6", "--strategy", strategy]);
        assert!(!lines.contains(&2), "{strategy}: the blank line was chosen");
        let copies = lines.iter().filter(|l| [1, 3, 4, 6].contains(*l)).count();
        assert_eq!(
            copies, 1,
            "{strategy}: near-duplicates were chosen: {lines:?}"
        );
        assert!(lines.contains(&5), "{strategy}: {lines:?}");
    }
    let all = chosen(&["--budget", "6", "--max-similarity", "1"]);
    assert_eq!(all.len(), 5, "{all:?}");
    let seeded = |seed: &str| {
        chosen(&[
            "--budget",
            "5",
            "--strategy",
            "random",
            "--max-similarity",
            "1",
            "--seed",
            seed,
        ])
    };
    assert_eq!(seeded("3"), seeded("3"));
    assert_ne!(seeded("3"), seeded("4"));
    assert!(Path::new(&pool).exists());
}

/// The tokens and their probabilities `tag --probs` gives each of `texts`.
fn tokens_of(model: &Path, texts: &[&str]) -> Vec<Vec<serde_json::Value>> {
    texts
        .iter()
        .map(|text| {
            let out = nertrain(&[
                "tag",
                "--model",
                model.to_str().unwrap(),
                "--format",
                "json",
                "--probs",
                text,
            ]);
            let record: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
            record["tokens"].as_array().unwrap().clone()
        })
        .collect()
}

#[test]
fn token_budgets_count_the_tokens_of_the_texts_chosen() {
    let model = sample_model("sentence");
    for strategy in ["mnlp", "bald", "random", "margin"] {
        let out = select(&[
            "--input",
            "data/sample/pool.txt",
            "--budget",
            "50",
            "--budget-unit",
            "tokens",
            "--strategy",
            strategy,
            "--format",
            "doccano",
        ]);
        assert!(out.status.success(), "{strategy}: {}", stderr(&out));
        let lines: Vec<serde_json::Value> = stdout(&out)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let texts: Vec<&str> = lines.iter().map(|l| l["text"].as_str().unwrap()).collect();
        let tokens: usize = tokens_of(&model, &texts).iter().map(Vec::len).sum();
        assert!((40..=50).contains(&tokens), "{strategy}: {tokens} tokens");
        assert!(
            stderr(&out).contains(&format!("{tokens} tokens to decide in all")),
            "{}",
            stderr(&out)
        );
        assert!(lines.iter().all(|l| l.get("known").is_none()));
    }
}

#[test]
fn regions_to_decide_are_the_doubtful_tokens_and_read_back_as_partial_labels() {
    let dir = scratch("select-regions");
    let model = sample_model("sentence");
    // Tasks of 40 tokens to decide in regions, with `rest` after them; and what select said.
    let region_tasks = |rest: &str| -> (Vec<serde_json::Value>, String) {
        let tasks = dir.join(format!("tasks-{rest}.json"));
        let out = select(&[
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
            "--rest",
            rest,
            "--output",
            tasks.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let written = serde_json::from_str(&std::fs::read_to_string(&tasks).unwrap()).unwrap();
        (written, stderr(&out))
    };
    let (mut written, said) = region_tasks("unknown");
    assert!(said.contains("tokens to decide in their regions"), "{said}");
    assert!(!written.is_empty());
    let mut decided = 0;
    for task in &mut written {
        let text = task["data"]["text"].as_str().unwrap().to_string();
        let known: Vec<(usize, usize)> =
            serde_json::from_value(task["data"]["known"].clone()).unwrap();
        let result = task["predictions"][0]["result"].as_array().unwrap();
        let checks: Vec<(usize, usize)> = result
            .iter()
            .filter(|r| r["from_name"] == "check")
            .map(|r| {
                let v = &r["value"];
                assert_eq!(v["labels"], serde_json::json!(["check"]));
                (
                    v["start"].as_u64().unwrap() as usize,
                    v["end"].as_u64().unwrap() as usize,
                )
            })
            .collect();
        assert_eq!(checks, known, "{text}");
        // A region is the doubtful tokens, widened to whole entities: every token whose best
        // tag is below the threshold is in one, and every region holds one.
        let tokens = &tokens_of(&model, &[&text])[0];
        let best = |t: &serde_json::Value| {
            t["probs"]
                .as_object()
                .unwrap()
                .values()
                .map(|p| p.as_f64().unwrap())
                .fold(0.0, f64::max)
        };
        let inside = |t: &serde_json::Value| {
            let (s, e) = (
                t["start"].as_u64().unwrap() as usize,
                t["end"].as_u64().unwrap() as usize,
            );
            known.iter().any(|&(a, b)| a <= s && e <= b)
        };
        for token in tokens {
            if best(token) < 0.95 {
                assert!(inside(token), "{text}: {token}");
            }
            decided += usize::from(inside(token));
        }
        for &(a, b) in &known {
            assert!(
                tokens.iter().any(|t| best(t) < 0.95
                    && t["start"].as_u64().unwrap() as usize >= a
                    && t["end"].as_u64().unwrap() as usize <= b),
                "{text}: {a}..{b}"
            );
        }
        // What Label Studio exports once the annotator submits the prediction as it is.
        task["annotations"] = serde_json::json!([{"id": 1, "result": result.clone()}]);
    }
    assert!((1..=40).contains(&decided), "{decided}");
    let export = dir.join("export.json");
    std::fs::write(&export, serde_json::to_string(&written).unwrap()).unwrap();
    let out = nertrain(&["convert", "--to", "iob2", export.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let conll = stdout(&out);
    let tags: Vec<&str> = conll
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("-DOCSTART-"))
        .map(|l| l.rsplit(' ').next().unwrap())
        .collect();
    // The check regions are no entities; what lies outside them and the entities is unknown.
    assert!(!conll.contains("check"), "{conll}");
    assert!(tags.contains(&"-"), "{conll}");
    assert!(
        tags.iter().filter(|&&t| t != "-").count() >= decided,
        "{conll}"
    );
    // And it trains, as partial labels.
    let run = dir.join("run");
    let out = common::fit_small(
        &run,
        1,
        &[
            "--set",
            &format!("data.train={}", serde_json::to_string(&export).unwrap()),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // With the rest left to the model, the same tasks read back as annotated in full.
    let whole = dir.join("whole.json");
    let (mut tasks, _) = region_tasks("model");
    assert_eq!(tasks.len(), written.len());
    for (task, partial) in tasks.iter_mut().zip(&written) {
        assert!(task["data"].get("known").is_none(), "{task}");
        assert_eq!(task["predictions"], partial["predictions"]);
        let result = task["predictions"][0]["result"].clone();
        task["annotations"] = serde_json::json!([{"id": 1, "result": result}]);
    }
    std::fs::write(&whole, serde_json::to_string(&tasks).unwrap()).unwrap();
    let out = nertrain(&["convert", "--to", "iob2", whole.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stdout(&out).contains(" -\n"), "{}", stdout(&out));
    assert!(!stdout(&out).contains("check"), "{}", stdout(&out));
    let out = select(&[
        "--input",
        "data/sample/pool.txt",
        "--budget",
        "3",
        "--rest",
        "model",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--regions"), "{}", stderr(&out));
}

#[test]
fn selection_settings_out_of_range_are_refused() {
    for (args, message) in [
        (vec!["--regions", "0"], "--regions"),
        (vec!["--regions", "1.5"], "--regions"),
        (vec!["--regions", "budget:2"], "budget:0.9"),
        (vec!["--regions", "lowest"], "budget:0.9"),
        (vec!["--diversity=-1"], "--diversity"),
        (vec!["--diversity", "101"], "--diversity"),
        (vec!["--budget-unit", "pages"], "expected texts or tokens"),
        (vec!["--strategy", "bold"], "mnlp, bald"),
    ] {
        let mut all = vec!["--input", "data/sample/pool.txt", "--budget", "3"];
        all.extend(&args);
        let out = select(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
    }
    // A cut by a budget of tokens needs the budget counted in tokens.
    let out = select(&[
        "--input",
        "data/sample/pool.txt",
        "--budget",
        "3",
        "--regions",
        "budget",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("count the budget in tokens"),
        "{}",
        stderr(&out)
    );
    // BALD reads the spread of passes with dropout on: a model without dropout has none.
    let dir = scratch("select-no-dropout");
    let run = dir.join("run");
    let out = common::fit_small(&run, 1, &["--set", "model.dropout=0"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = nertrain(&[
        "select",
        "--model",
        run.to_str().unwrap(),
        "--input",
        "data/sample/pool.txt",
        "--budget",
        "3",
        "--strategy",
        "bald",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("trained without dropout"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn tasks_carry_the_projects_own_names_from_its_labeling_config() {
    let dir = scratch("select-label-config");
    let config = dir.join("config.xml");
    let labels =
        r#"<Labels name="ner" toName="doc"><Label value="PER"/><Label value="LOC"/></Labels>"#;
    let check = r#"<Labels name="check" toName="doc"><Label value="check"/></Labels>"#;
    let write_config = |parts: &[&str], text: &str| {
        let xml = format!(
            "<View>{}<Text name=\"doc\" value=\"${text}\"/></View>",
            parts.concat()
        );
        std::fs::write(&config, xml).unwrap();
    };
    write_config(&[labels, check], "body");
    let args = [
        "--input",
        "data/sample/pool.txt",
        "--budget",
        "200",
        "--budget-unit",
        "tokens",
        "--strategy",
        "mnlp",
        "--regions",
        "0.99",
    ];
    let read = |out: &std::process::Output| -> Vec<serde_json::Value> {
        assert!(out.status.success(), "{}", stderr(out));
        serde_json::from_str(&stdout(out)).unwrap()
    };
    let default = read(&select(&args));
    let with_config = [&args[..], &["--label-config", config.to_str().unwrap()]].concat();
    let out = select(&with_config);
    let projects = read(&out);
    // The default config's tasks, renamed by hand: the same tasks under the project's names,
    // less the entities of labels the project lacks.
    let mut left_out = 0;
    let mut expected = default.clone();
    for task in &mut expected {
        let data = task["data"].as_object_mut().unwrap();
        let text = data.remove("text").unwrap();
        let rest = std::mem::take(data);
        data.insert("body".into(), text);
        data.extend(rest);
        let line = task["data"]["line"].clone();
        let result = task["predictions"][0]["result"].as_array_mut().unwrap();
        let before = result.len();
        result.retain(|r| {
            let label = &r["value"]["labels"][0];
            ["PER", "LOC", "check"].iter().any(|l| label == l)
        });
        left_out += before - result.len();
        // Regions are named by the task, the text's name and their place.
        let (mut entities, mut checks) = (0, 0);
        for region in result.iter_mut() {
            if region["from_name"] == "label" {
                region["from_name"] = "ner".into();
                region["id"] = format!("n{line}-doc-{entities}").into();
                entities += 1;
            } else {
                region["id"] = format!("n{line}-doc-check-{checks}").into();
                checks += 1;
            }
            region["to_name"] = "doc".into();
        }
    }
    assert!(
        left_out > 0,
        "the sample's model finds ORG or MISC in the pool"
    );
    assert!(
        default
            .iter()
            .any(|t| t["predictions"][0]["result"].as_array().unwrap().len() > 1),
        "entities and regions to compare"
    );
    for (task, expected) in projects.iter().zip(&expected) {
        assert_eq!(task, expected);
    }
    assert_eq!(projects.len(), expected.len());
    assert!(
        stderr(&out).contains(&format!("left out {left_out} entities")),
        "{}",
        stderr(&out)
    );
    // Submitted as predicted, the tasks read back with the project's text.
    let mut submitted = projects.clone();
    for task in &mut submitted {
        let result = task["predictions"][0]["result"].clone();
        task["annotations"] = serde_json::json!([{"id": 1, "result": result}]);
    }
    let export = dir.join("export.json");
    std::fs::write(&export, serde_json::to_string(&submitted).unwrap()).unwrap();
    let corpus = nertrain_annotate::read_annotated(&export).unwrap();
    assert_eq!(corpus.texts.len(), projects.len());
    assert_eq!(corpus.texts[0].text, projects[0]["data"]["body"]);

    // What the config cannot carry is refused before anything is written.
    let refused = |parts: &[&str], text: &str, extra: &[&str], expected: &str| {
        write_config(parts, text);
        let out = select(&[&with_config[..], extra].concat());
        assert!(!out.status.success());
        assert!(stdout(&out).is_empty());
        assert!(stderr(&out).contains(expected), "{}", stderr(&out));
    };
    refused(
        &[labels],
        "body",
        &[],
        "add <Labels name=\"check\" toName=\"doc\">",
    );
    refused(
        &[labels, check],
        "line",
        &[],
        "data.line, which the tasks use",
    );
    refused(&[check], "body", &[], "only <Labels> control is `check`");
    refused(
        &[
            r#"<Labels name="ner" toName="doc"><Label value="DATE"/></Labels>"#,
            check,
        ],
        "body",
        &[],
        "none of the labeling config's labels (DATE)",
    );
    refused(
        &[labels, check],
        "body",
        &["--format", "doccano"],
        "only Label Studio tasks",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
