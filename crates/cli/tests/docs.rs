//! The sessions in the documentation are real: every `$ $B …` command of the guide
//! (`docs/usage.md`) and then of the reference (`docs/reference.md`) is run in order, in one
//! scratch copy of the sample, and must print what the page shows. Only the speed
//! figures (sentences per second and seconds), which change from run to run, are not compared,
//! and full-precision numbers (confidences, scores) only within 0.01: the sample model trained on
//! another CPU differs from the third decimal ([`common::same_output`]).

mod common;

use std::path::Path;
use std::process::Command;

use common::{full_precision_apart, same_output, scratch, workspace};

/// A command of a documented session and the output the page shows for it.
struct Example {
    line: usize,
    command: String,
    output: Vec<String>,
}

/// The `$ $B …` commands of `markdown`'s fenced blocks, each with the lines up to the next
/// command or the end of its block.
fn examples_of(markdown: &str) -> Vec<Example> {
    let mut examples: Vec<Example> = Vec::new();
    let (mut in_block, mut in_example) = (false, false);
    for (number, line) in markdown.lines().enumerate() {
        if line.starts_with("```") {
            in_block = !in_block;
            in_example = false;
        } else if let Some(command) = line.strip_prefix("$ $B ").filter(|_| in_block) {
            examples.push(Example {
                line: number + 1,
                command: format!("\"$B\" {command}"),
                output: Vec::new(),
            });
            in_example = true;
        } else if in_example {
            examples.last_mut().unwrap().output.push(line.to_string());
        }
    }
    examples
}

/// `line` with its speed figures masked: a count before `sent/s`, seconds before `train` or
/// `dev`, and the last two columns (sentences/s, seconds) of a `report` epoch row.
fn without_speed(line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    let report_row = words.len() == 8 && words[0].parse::<usize>().is_ok();
    let masked: Vec<&str> = words
        .iter()
        .enumerate()
        .map(|(i, &word)| {
            let next = words.get(i + 1).copied().unwrap_or("");
            let seconds = word.ends_with('s') && word[..word.len() - 1].parse::<f64>().is_ok();
            if (report_row && i >= 6)
                || next == "sent/s"
                || (seconds && (next == "train," || next == "dev"))
            {
                "#"
            } else {
                word
            }
        })
        .collect();
    masked.join(" ")
}

/// How far apart a full-precision number printed and the page's may be: a model trained on
/// another CPU differs in the third decimal.
const TRAINED_ELSEWHERE: f64 = 0.01;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn the_usage_session_prints_what_the_page_shows() {
    let root = workspace();
    let mut examples = Vec::new();
    for page in ["docs/usage.md", "docs/reference.md"] {
        let markdown = std::fs::read_to_string(root.join(page)).unwrap();
        examples.extend(examples_of(&markdown).into_iter().map(|e| (page, e)));
    }
    assert!(
        examples.len() >= 5,
        "expected the session's commands in the guide, found {}",
        examples.len()
    );
    let dir = scratch("docs");
    copy_dir(&root.join("data/sample"), &dir.join("data/sample"));
    copy_dir(&root.join("configs"), &dir.join("configs"));
    for (page, example) in &examples {
        let output = Command::new("sh")
            .arg("-c")
            .arg(&example.command)
            .env("B", env!("CARGO_BIN_EXE_nertrain"))
            .env("RAYON_NUM_THREADS", "1")
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{page}:{}: `{}` failed: {}",
            example.line,
            example.command,
            String::from_utf8_lossy(&output.stderr)
        );
        let printed: Vec<String> = String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(without_speed)
            .collect();
        let shown: Vec<String> = example.output.iter().map(|l| without_speed(l)).collect();
        // A blank line that ends the output does not show on the page.
        let trimmed = |mut lines: Vec<String>| {
            while lines.last().is_some_and(String::is_empty) {
                lines.pop();
            }
            lines
        };
        let (printed, shown) = (trimmed(printed), trimmed(shown));
        assert!(
            same_output(&printed.join("\n"), &shown.join("\n"), TRAINED_ELSEWHERE),
            "{page}:{}: `{}` printed something else than the page shows:\n{}\nnot\n{}",
            example.line,
            example.command,
            printed.join("\n"),
            shown.join("\n")
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn full_precision_numbers_alone_are_compared_to_two_decimals() {
    let shown = r#"{"label":"PER","start":18,"confidence":0.8360108005915692,"score":2.5e-5}"#;
    let near = r#"{"label":"PER","start":18,"confidence":0.8388592125463333,"score":2.5e-5}"#;
    assert!(same_output(near, shown, TRAINED_ELSEWHERE));
    let far = r#"{"label":"PER","start":18,"confidence":0.8160108005915692,"score":2.5e-5}"#;
    assert!(!same_output(far, shown, TRAINED_ELSEWHERE));
    // Other numbers are compared as they are printed.
    let moved = r#"{"label":"PER","start":19,"confidence":0.8360108005915692,"score":2.5e-5}"#;
    assert!(!same_output(moved, shown, TRAINED_ELSEWHERE));
    assert!(!same_output(
        "FB1:  97.13",
        "FB1:  97.14",
        TRAINED_ELSEWHERE
    ));
    assert_eq!(
        full_precision_apart("p=0.123456789012 q=1.5e-07 r=-2.0000000001e-3"),
        (
            "p=# q=1.5e-07 r=-#".to_string(),
            vec![0.123456789012, 2.0000000001e-3]
        )
    );
}

#[test]
fn speed_figures_alone_are_masked() {
    assert_eq!(
        without_speed(
            "epoch   1: loss 11.4168  dev F1 13.90 *  1019 sent/s  0.6s train, 0.0s dev  lr 0.01500"
        ),
        "epoch 1: loss 11.4168 dev F1 13.90 * # sent/s # train, # dev lr 0.01500"
    );
    assert_eq!(
        without_speed("    1   11.4168   0.01500   30.69    8.99   13.90*    1019      0.6"),
        "1 11.4168 0.01500 30.69 8.99 13.90* # #"
    );
    assert_eq!(
        without_speed("best dev F1 98.11 at epoch 8 → runs/sample/model.bpk"),
        "best dev F1 98.11 at epoch 8 → runs/sample/model.bpk"
    );
}
