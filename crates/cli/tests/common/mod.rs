//! Helpers shared by the binary's end-to-end tests (each test file uses some of them).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The workspace root, where the tests run the binary (configs and data paths are relative).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// A fresh, empty directory for one test, unique to this test process.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nertrain-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the binary in the workspace root.
pub fn nertrain(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nertrain"))
        .args(args)
        .current_dir(workspace())
        .output()
        .unwrap()
}

/// A small model trained on the sample once per test binary, reading sentences alone
/// (`"sentence"`) or documents (`"document"`).
pub fn sample_model(context: &str) -> PathBuf {
    static SENTENCE: OnceLock<PathBuf> = OnceLock::new();
    static DOCUMENT: OnceLock<PathBuf> = OnceLock::new();
    let cell = if context == "document" {
        &DOCUMENT
    } else {
        &SENTENCE
    };
    cell.get_or_init(|| {
        let dir = scratch(&format!("sample-{context}")).join("run");
        let output = format!("train.output={}", dir.display());
        let context = format!("data.context={context}");
        let fit = nertrain(&[
            "fit",
            "--config",
            "configs/sample.toml",
            "--set",
            &output,
            "--set",
            &context,
            "--set",
            "model.hidden=30",
            "--set",
            "model.word_dim=30",
            "--set",
            "train.epochs=3",
        ]);
        assert!(
            fit.status.success(),
            "{}",
            String::from_utf8_lossy(&fit.stderr)
        );
        dir
    })
    .clone()
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Every file under `dir` with its bytes (a symbolic link with where it points, never followed):
/// equal snapshots mean nothing was touched. The writer's lock file is left out: each `fit`
/// writes its pid there, run or refused.
pub fn snapshot(dir: &Path) -> Snapshot {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                files.push((path, target.into_os_string().into_encoded_bytes()));
            } else if meta.is_dir() {
                pending.push(path);
            } else if !path.ends_with(".nertrain.lock") {
                let bytes = std::fs::read(&path).unwrap();
                files.push((path, bytes));
            }
        }
    }
    files.sort();
    Snapshot(files)
}

/// Files and their bytes; shown, only their names and sizes.
#[derive(PartialEq)]
pub struct Snapshot(pub Vec<(PathBuf, Vec<u8>)>);

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let files: Vec<String> = self
            .0
            .iter()
            .map(|(path, bytes)| format!("{} ({} bytes)", path.display(), bytes.len()))
            .collect();
        f.debug_list().entries(files).finish()
    }
}
