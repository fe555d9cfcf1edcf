//! Distillation (`[distill]`): a student learns from a trained teacher's distribution over tag
//! paths, on labelled and unlabelled text, and is an ordinary model afterwards.

mod common;

use std::path::Path;

use common::{
    copy_files, fit_small, fit_small_with_env, learning_curve, nertrain, nertrain_ok, sample_model,
    scratch, stderr, tag_json, workspace,
};

/// `--set` arguments distilling from `teacher` with `data/sample/pool.txt` unlabelled.
fn distilled_from(teacher: &Path) -> [String; 4] {
    [
        "--set".into(),
        format!("distill.teachers=[{:?}]", teacher.display().to_string()),
        "--set".into(),
        r#"distill.unlabelled=["data/sample/pool.txt"]"#.into(),
    ]
}

/// The span F1 of `model` scored against what the teacher tagged in `gold` (CoNLL).
fn agreement(model: &Path, gold: &Path) -> f64 {
    let out = nertrain_ok(&[
        "eval",
        "--model",
        model.to_str().unwrap(),
        "--data",
        gold.to_str().unwrap(),
        "--json",
    ]);
    let scores: serde_json::Value = serde_json::from_str(&out).unwrap();
    scores["overall"]["f1"].as_f64().unwrap()
}

#[test]
fn a_distilled_student_agrees_with_its_teacher_more_and_tags_without_it() {
    let dir = scratch("distill");
    let teacher = dir.join("teacher");
    copy_files(&sample_model("sentence"), &teacher);
    // The pool as the teacher tags it: what agreement is scored against.
    let pool = workspace().join("data/sample/pool.txt");
    let taught = nertrain_ok(&[
        "tag",
        "--model",
        teacher.to_str().unwrap(),
        "--input",
        pool.to_str().unwrap(),
        "--format",
        "conll",
    ]);
    let gold = dir.join("pool-teacher.txt");
    std::fs::write(&gold, taught).unwrap();

    let alone = dir.join("gold-only");
    let out = fit_small(&alone, 2, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let student = dir.join("student");
    let args = distilled_from(&teacher);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = fit_small(&student, 2, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let (taught, untaught) = (agreement(&student, &gold), agreement(&alone, &gold));
    assert!(
        taught > untaught + 3.0,
        "with the teacher {taught}, without {untaught}"
    );

    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(student.join("model.json")).unwrap())
            .unwrap();
    let distilled = &meta["distilled"];
    assert_eq!(distilled["weight"], 0.5);
    assert_eq!(distilled["temperature"], 1.0);
    assert_eq!(
        distilled["teachers"][0]["weights_id"]
            .as_str()
            .unwrap()
            .len(),
        12
    );
    assert_eq!(distilled["unlabelled"][0]["sentences"], 60);
    // Train as labelled: the unlabelled text is counted apart.
    assert_eq!(meta["data"]["train"]["sentences"], 600);

    // The student needs no teacher.
    std::fs::remove_dir_all(&teacher).unwrap();
    let records = tag_json(&student, &["Peter Weber flew to Berlin."]);
    assert_eq!(records.len(), 1);
    assert!(records[0]["entities"].is_array());
}

#[test]
fn a_distillation_killed_mid_run_resumes_to_the_same_student() {
    let dir = scratch("distill-resume");
    let args = distilled_from(&sample_model("sentence"));
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.extend(["--set", "train.patience=3"]);
    let whole = dir.join("whole");
    let out = fit_small(&whole, 3, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    // The process ends as it writes epoch 2's checkpoint, then resumes: the teachers'
    // marginals are taken again, and every step is the uninterrupted run's.
    let killed = dir.join("killed");
    let failpoint = [("NERTRAIN_FAILPOINT", "checkpoint:2:abort")];
    let out = fit_small_with_env(&killed, 3, &args, &failpoint);
    assert!(!out.status.success(), "the failpoint did not end the run");
    let resume = [&args[..], &["--resume"]].concat();
    let out = fit_small(&killed, 3, &resume);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(learning_curve(&killed).len(), 3);
    assert_eq!(learning_curve(&whole), learning_curve(&killed));
    let text = ["Peter Weber flew to Berlin with Anna Schmidt."];
    assert_eq!(tag_json(&whole, &text), tag_json(&killed, &text));
}

#[test]
fn teachers_and_settings_that_cannot_teach_are_refused_before_anything_is_written() {
    let dir = scratch("distill-refusals");
    let output = dir.join("student");
    let refused = |extra: &[&str], expected: &str| {
        let out = fit_small(&output, 1, extra);
        let message = stderr(&out);
        assert!(!out.status.success(), "{extra:?} was accepted");
        assert!(message.contains(expected), "{extra:?}: {message}");
        assert!(!output.exists(), "{extra:?} wrote {}", output.display());
    };
    let missing = dir.join("no-such-teacher");
    let missing = format!("distill.teachers=[{:?}]", missing.display().to_string());
    refused(&["--set", &missing], "no-such-teacher");
    refused(&["--set", &missing], "teacher");
    refused(&["--set", "distill.weight=1.5"], "distill.weight");
    refused(&["--set", "distill.temperature=0"], "distill.temperature");
    refused(
        &["--set", r#"distill.unlabelled=["data/sample/pool.txt"]"#],
        "distill.unlabelled",
    );

    let teacher = sample_model("sentence");
    let teacher_set = format!("distill.teachers=[{:?}]", teacher.display().to_string());
    // A labelled file is not unlabelled text.
    refused(
        &[
            "--set",
            &teacher_set,
            "--set",
            r#"distill.unlabelled=["data/sample/dev.txt"]"#,
        ],
        "data/sample/dev.txt:3: a labelled CoNLL line",
    );
    // A teacher of other tags: trained where LOC is written PLACE.
    let train = std::fs::read_to_string(workspace().join("data/sample/train.txt")).unwrap();
    let renamed = dir.join("renamed.txt");
    std::fs::write(&renamed, train.replace("-LOC", "-PLACE")).unwrap();
    let other = dir.join("other-teacher");
    let renamed_train = format!("data.train={}", renamed.display());
    let out = nertrain(&[
        "fit",
        "--config",
        "configs/sample.toml",
        "--set",
        &format!("train.output={}", other.display()),
        "--set",
        &renamed_train,
        "--set",
        "train.epochs=1",
        "--set",
        "model.hidden=10",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let other_set = format!("distill.teachers=[{:?}]", other.display().to_string());
    refused(&["--set", &other_set], "B-PLACE");
}
