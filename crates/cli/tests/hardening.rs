//! Two processes on one run, symbolic links, sizes checked before anything is allocated or
//! deleted, numbers out of range, closed and full outputs, and SIGTERM: each case as a user or an
//! attacker would meet it, through the binary.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Scratch, nertrain, scratch, scratch_at, snapshot, stderr, workspace};

/// `fit` on the sample into `output`, with `extra` overrides, as a command not yet run.
fn fit_command(output: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nertrain"));
    command
        .args(["fit", "--config", "configs/sample.toml", "--set"])
        .arg(format!("train.output={}", output.display()))
        .args(["--set", "model.hidden=20", "--set", "model.word_dim=20"])
        .args(extra.iter().flat_map(|e| ["--set", e]))
        .current_dir(workspace());
    command
}

fn fit(output: &Path, extra: &[&str], flags: &[&str]) -> std::process::Output {
    fit_command(output, extra).args(flags).output().unwrap()
}

/// A small trained run in a fresh scratch directory.
fn trained(name: &str, extra: &[&str]) -> Scratch {
    let run = scratch_at(name, "run");
    let out = fit(&run, &[&["train.epochs=2"], extra].concat(), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    run
}

fn wait_for(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{} never came",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn two_writers_of_one_run_never_mix_and_the_second_is_told_who_writes() {
    let run = trained("two-writers", &[]);
    let mut refused = 0;
    for round in 0..10 {
        // Other sizes, so that weights of one beside the description of the other cannot load.
        let a = fit_command(&run, &["train.epochs=3", "model.hidden=16"])
            .arg("--overwrite")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let b = fit_command(&run, &["train.epochs=3", "model.hidden=24"])
            .arg("--overwrite")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (a_pid, b_pid) = (a.id(), b.id());
        let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
        assert!(
            a.status.success() || b.status.success(),
            "round {round}: both failed"
        );
        for (out, other) in [(&a, b_pid), (&b, a_pid)] {
            if !out.status.success() {
                refused += 1;
                let message = stderr(out);
                assert!(
                    message.contains(&format!("process {other} is writing this run")),
                    "round {round}: {message}"
                );
            }
        }
        let eval = nertrain(&[
            "eval",
            "--model",
            run.to_str().unwrap(),
            "--data",
            "data/sample/test.txt",
        ]);
        assert!(eval.status.success(), "round {round}: {}", stderr(&eval));
    }
    assert!(
        refused > 0,
        "the two runs never overlapped: the race was not tried"
    );
}

#[test]
fn resuming_a_run_that_is_still_training_is_refused() {
    let run = scratch_at("resume-while-running", "run");
    let mut first = fit_command(&run, &["train.epochs=60", "train.patience=60"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&run.join("model.json"));
    let resumed = fit(
        &run,
        &["train.epochs=60", "train.patience=60"],
        &["--resume"],
    );
    let _ = first.kill();
    let _ = first.wait();
    assert_eq!(resumed.status.code(), Some(1));
    let message = stderr(&resumed);
    assert!(
        message.contains(&format!("process {} is writing this run", first.id())),
        "{message}"
    );
}

#[test]
fn a_refused_new_run_leaves_no_directory_behind() {
    let run = scratch_at("refused-new", "nested/run");
    let out = fit(&run, &["data.train=data/sample/missing.txt"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(!run.exists(), "{} was left behind", run.display());
}

#[test]
fn a_reader_sees_the_old_model_or_the_new_one_while_it_is_replaced() {
    let old = trained("reader-old", &["train.seed=1"]);
    let new = trained("reader-new", &["train.seed=2"]);
    let live = scratch_at("reader-live", "run");
    std::fs::create_dir_all(&live).unwrap();
    for entry in std::fs::read_dir(&old).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, live.join(path.file_name().unwrap())).unwrap();
        }
    }
    let text = "Anna Schmidt of Siemens met Peter Brown in Lisbon and Berlin on Monday.";
    let tag = |model: &Path| {
        let out = nertrain(&[
            "tag",
            "--model",
            model.to_str().unwrap(),
            "--format",
            "json",
            text,
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        out.stdout
    };
    let (old_output, new_output) = (tag(&old), tag(&new));
    assert_ne!(
        old_output, new_output,
        "the two models must differ to tell them apart"
    );
    let weights = [
        std::fs::read(old.join("model.bpk")).unwrap(),
        std::fs::read(new.join("model.bpk")).unwrap(),
    ];
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let publisher = {
        let (live, stop) = (live.to_path_buf(), stop.clone());
        // As `fit` publishes a better model: written beside, then renamed over the old one.
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let partial = live.join("model.bpk.partial");
                std::fs::write(&partial, &weights[i % 2]).unwrap();
                std::fs::rename(&partial, live.join("model.bpk")).unwrap();
                i += 1;
            }
        })
    };
    for _ in 0..40 {
        let output = tag(&live);
        assert!(
            output == old_output || output == new_output,
            "a mix of both models"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    publisher.join().unwrap();
}

#[test]
fn overwriting_never_deletes_through_a_linked_with_dev() {
    let other = trained("with-dev-other", &[]);
    let run = trained("with-dev-run", &[]);
    std::os::unix::fs::symlink(&other, run.join("with-dev")).unwrap();
    let (other_before, run_before) = (snapshot(&other), snapshot(&run));
    let out = fit(&run, &["train.epochs=1"], &["--overwrite"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("symbolic link"), "{}", stderr(&out));
    assert_eq!(snapshot(&other), other_before);
    assert_eq!(snapshot(&run), run_before);
}

fn convert_to(output: &Path) -> std::process::Output {
    nertrain(&[
        "convert",
        "--to",
        "iobes",
        "data/sample/test.txt",
        "--output",
        output.to_str().unwrap(),
    ])
}

#[test]
fn a_link_planted_at_the_temporary_name_is_not_written_through() {
    let dir = scratch("planted-partial");
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    let output = dir.join("out.txt");
    std::os::unix::fs::symlink(&victim, dir.join("out.txt.partial")).unwrap();
    let out = convert_to(&output);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    assert!(std::fs::read_to_string(&output).unwrap().contains("S-"));
}

#[test]
fn an_output_that_is_a_link_is_written_through_as_cp_does() {
    let dir = scratch("output-link");
    let target = dir.join("target.txt");
    std::fs::write(&target, "old").unwrap();
    let link = dir.join("link.txt");
    std::os::unix::fs::symlink("target.txt", &link).unwrap();
    let dangling = dir.join("dangling.txt");
    std::os::unix::fs::symlink("created.txt", &dangling).unwrap();
    for output in [&link, &dangling] {
        let out = convert_to(output);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            std::fs::symlink_metadata(output)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }
    assert!(std::fs::read_to_string(&target).unwrap().contains("S-"));
    assert!(
        std::fs::read_to_string(dir.join("created.txt"))
            .unwrap()
            .contains("S-")
    );
    // `eval --output` writes through the same way.
    let predicted = dir.join("predicted.txt");
    std::fs::write(&predicted, "Peter B-PER B-PER\nlives O O\n").unwrap();
    let eval = nertrain(&[
        "eval",
        "--predicted",
        predicted.to_str().unwrap(),
        "--output",
        link.to_str().unwrap(),
    ]);
    assert!(eval.status.success(), "{}", stderr(&eval));
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "Peter B-PER B-PER\nlives O O\n\n"
    );
}

#[test]
fn absurd_sizes_are_refused_before_the_old_run_is_touched() {
    let run = trained("absurd-sizes", &[]);
    let before = snapshot(&run);
    for setting in [
        "model.hidden=100000000",
        "model.hidden=20000",
        "model.word_dim=1000000",
        "model.char_filters=10000000",
    ] {
        let out = fit(&run, &[setting], &["--overwrite"]);
        // A usage error (2) when the key is an override, a config error (1) naming the file.
        assert!(
            matches!(out.status.code(), Some(1 | 2)),
            "{setting}: {}",
            stderr(&out)
        );
        let key = setting.split('=').next().unwrap();
        assert!(stderr(&out).contains(key), "{setting}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("expected 1 to 4096"),
            "{}",
            stderr(&out)
        );
        assert_eq!(snapshot(&run), before, "{setting} changed the old run");
    }
}

#[test]
fn vectors_that_are_not_finite_are_a_reader_error_before_the_old_run_is_touched() {
    let run = trained("nan-vectors", &[]);
    let before = snapshot(&run);
    let vectors = scratch_at("nan-vectors-file", "vectors.txt");
    std::fs::write(&vectors, "the 0.1 0.2\nGermany nan 0.5\n").unwrap();
    let setting = format!("data.vectors={}", vectors.display());
    let out = fit(&run, &[&setting, "model.word_dim=2"], &["--overwrite"]);
    assert_eq!(out.status.code(), Some(1));
    let expected = format!(
        "{}:2: expected a finite number, found \"nan\"",
        vectors.display()
    );
    assert!(stderr(&out).contains(&expected), "{}", stderr(&out));
    assert_eq!(snapshot(&run), before);
}

#[test]
fn a_changed_model_description_is_an_error_before_anything_is_allocated() {
    let run = trained("tampered", &[]);
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("model.json")).unwrap()).unwrap();
    let cases: [(&str, &[&str], serde_json::Value, &str); 6] = [
        // Within bounds, but not what the weights hold: refused before the model is built.
        (
            "hidden in range",
            &["model", "hidden"],
            4000.into(),
            "but model.json describes at least",
        ),
        (
            "hidden",
            &["model", "hidden"],
            1_000_000_000.into(),
            "model.hidden",
        ),
        (
            "dropout",
            &["model", "dropout"],
            5.0.into(),
            "model.dropout",
        ),
        (
            "negative dropout",
            &["model", "dropout"],
            (-0.1).into(),
            "model.dropout",
        ),
        ("tags", &["sizes", "tags"], 100_000.into(), "sizes.tags"),
        (
            "words",
            &["sizes", "words"],
            1_000_000_000_000u64.into(),
            "sizes",
        ),
    ];
    for (name, path, value, key) in cases {
        let dir = scratch(&format!("tampered-{}", name.replace(' ', "-")));
        for entry in std::fs::read_dir(&run).unwrap() {
            let from = entry.unwrap().path();
            if from.is_file() {
                std::fs::copy(&from, dir.join(from.file_name().unwrap())).unwrap();
            }
        }
        let mut changed = meta.clone();
        *changed
            .pointer_mut(&format!("/{}", path.join("/")))
            .unwrap() = value;
        std::fs::write(dir.join("model.json"), changed.to_string()).unwrap();
        let out = nertrain(&[
            "tag",
            "--model",
            dir.to_str().unwrap(),
            "Peter lives in Berlin.",
        ]);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr(&out));
        assert!(stderr(&out).contains(key), "{name}: {}", stderr(&out));
    }
}

#[test]
fn numbers_out_of_range_are_usage_errors() {
    let model = common::sample_model("document");
    let model = model.to_str().unwrap();
    let cases: [&[&str]; 5] = [
        &[
            "bench",
            "--train",
            "x",
            "--dev",
            "y",
            "--steps",
            "1000000000000",
        ],
        &[
            "bench",
            "--train",
            "x",
            "--dev",
            "y",
            "--warmup",
            "18446744073709551615",
        ],
        &["tag", "--model", model, "--consistency", "1e308", "Peter"],
        &[
            "tag",
            "--model",
            model,
            "--batch-size",
            "10000000000",
            "Peter",
        ],
        &[
            "eval",
            "--model",
            model,
            "--data",
            "data/sample/test.txt",
            "--consistency",
            "-1",
        ],
    ];
    for args in cases {
        let out = nertrain(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
    let sentence_level = common::sample_model("sentence");
    let out = nertrain(&[
        "tag",
        "--model",
        sentence_level.to_str().unwrap(),
        "--consistency",
        "2",
        "Peter",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--consistency"));
}

#[test]
fn a_closed_pipe_ends_fit_quietly_and_a_full_disk_is_an_error() {
    let run = scratch_at("fit-pipe", "run");
    let mut child = fit_command(&run, &["train.epochs=30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read one line, then close the pipe, as `| head -1` does.
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));

    let run = scratch_at("fit-full", "run");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = fit_command(&run, &["train.epochs=2"])
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot write to stdout"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
}

#[test]
fn sigterm_stops_fit_like_ctrl_c_saving_first() {
    let run = scratch_at("sigterm", "run");
    let settings = ["train.epochs=60", "train.patience=60"];
    let child = fit_command(&run, &settings)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&run.join("checkpoint"));
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143), "{}", stderr(&out));
    let partial = snapshot(&run)
        .0
        .into_iter()
        .find(|(path, _)| path.to_string_lossy().contains(".partial"));
    assert!(partial.is_none(), "left {partial:?}");
    let resumed = fit(&run, &settings, &["--resume"]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
}

#[test]
fn a_line_of_more_words_than_a_text_may_have_is_an_error_naming_the_line() {
    let model = common::sample_model("sentence");
    let input = scratch_at("too-many-words", "input.txt");
    let line = "#".repeat(nertrain_tagger::MAX_TEXT_WORDS + 1);
    std::fs::write(&input, format!("Peter lives in Berlin.\n{line}\n")).unwrap();
    let out = nertrain(&[
        "tag",
        "--model",
        model.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let expected = format!(
        "{}:2: more than {} words in one line; split it",
        input.display(),
        nertrain_tagger::MAX_TEXT_WORDS
    );
    assert!(stderr(&out).contains(&expected), "{}", stderr(&out));
}

#[test]
fn a_changed_checkpoint_state_is_an_error_not_a_panic() {
    let run = scratch_at("state", "run");
    let settings = ["train.epochs=60", "train.patience=60"];
    let child = fit_command(&run, &settings)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&run.join("checkpoint"));
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    child.wait_with_output().unwrap();
    let state_file = run.join("checkpoint").join("state.json");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state_file).unwrap()).unwrap();
    for (key, value) in [
        ("batches_done", 1_000_000_000_000u64),
        ("best_epoch", 1_000),
    ] {
        let mut changed = state.clone();
        changed[key] = value.into();
        std::fs::write(&state_file, changed.to_string()).unwrap();
        let out = fit(&run, &settings, &["--resume"]);
        assert_eq!(out.status.code(), Some(1), "{key}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("changed or damaged"),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn config_values_and_files_that_are_not_right_say_so_briefly() {
    let out = fit(&scratch_at("nan-lr", "run"), &["train.lr=nan"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("train.lr: expected a finite number, found NaN"),
        "{}",
        stderr(&out)
    );
    let dir = scratch("long-config-line");
    let config = dir.join("bad.toml");
    let text = std::fs::read_to_string(workspace().join("configs/sample.toml")).unwrap();
    std::fs::write(&config, format!("{text}\nx = \"{}", "y".repeat(3 << 20))).unwrap();
    let out = nertrain(&["fit", "--config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stderr.len() < 1000,
        "{} bytes of error",
        out.stderr.len()
    );
    assert!(stderr(&out).contains("not valid TOML"), "{}", stderr(&out));
    let bad = dir.join("latin1.txt");
    std::fs::write(&bad, b"Peter B-PER\n\nM\xfcller B-PER\n").unwrap();
    let out = nertrain(&["convert", "--to", "iobes", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let expected = format!("{}:3: invalid UTF-8", bad.display());
    assert!(stderr(&out).contains(&expected), "{}", stderr(&out));
}

#[test]
fn convert_reads_stdin_for_a_dash() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_nertrain"))
        .args(["convert", "--to", "iobes", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"Peter B-PER\nSchmidt I-PER\nsaid O\n\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Peter B-PER\nSchmidt E-PER\nsaid O\n\n"
    );
}

#[test]
fn eval_warns_when_the_gold_file_is_in_another_scheme_than_the_model_writes() {
    let model = common::sample_model("sentence");
    let gold = scratch_at("other-scheme", "gold.txt");
    let converted = nertrain(&["convert", "--to", "iobes", "data/sample/test.txt"]);
    std::fs::write(&gold, &converted.stdout).unwrap();
    let out = nertrain(&[
        "eval",
        "--model",
        model.to_str().unwrap(),
        "--data",
        gold.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("its tags read as iobes but the model writes iob2"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn eval_reads_stdin_for_a_dash() {
    let model = common::sample_model("sentence");
    let model = model.to_str().unwrap();
    let from_file = nertrain(&[
        "eval",
        "--model",
        model,
        "--data",
        "data/sample/test.txt",
        "--json",
    ]);
    let from_stdin = Command::new(env!("CARGO_BIN_EXE_nertrain"))
        .args(["eval", "--model", model, "--data", "-", "--json"])
        .current_dir(workspace())
        .stdin(std::fs::File::open(workspace().join("data/sample/test.txt")).unwrap())
        .output()
        .unwrap();
    assert!(from_stdin.status.success(), "{}", stderr(&from_stdin));
    assert_eq!(from_stdin.stdout, from_file.stdout);
}

#[test]
fn an_output_that_is_a_pipe_is_written_into_not_replaced() {
    let fifo = scratch_at("output-fifo", "pipe");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let reader = {
        let fifo = fifo.to_path_buf();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let out = convert_to(&fifo);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(reader.join().unwrap().contains("S-"));
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
}
