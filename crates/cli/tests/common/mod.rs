//! Helpers shared by the binary's end-to-end tests (each test file uses some of them).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// The workspace root, where the tests run the binary (configs and data paths are relative).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// A path in a fresh, empty directory of one test's: the directory is removed when this is
/// dropped, unless the test is failing, so that what it wrote can be read.
pub struct Scratch {
    dir: tempfile::TempDir,
    path: PathBuf,
}

/// A fresh, empty directory for one test, named after `name`.
pub fn scratch(name: &str) -> Scratch {
    let dir = tempfile::Builder::new()
        .prefix(&format!("nertrain-{name}-"))
        .tempdir()
        .unwrap();
    let path = dir.path().to_path_buf();
    Scratch { dir, path }
}

/// `relative` in a fresh, empty directory for one test (which it does not create).
pub fn scratch_at(name: &str, relative: &str) -> Scratch {
    let mut scratch = scratch(name);
    scratch.path.push(relative);
    scratch
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.dir.disable_cleanup(true);
        }
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.path.as_os_str()
    }
}

/// A fresh directory for what a test binary builds once and its tests share (a `static` is never
/// dropped, so no test can remove it): in Cargo's directory for tests' files, named after the
/// binary, replaced by the binary's next run. The first call takes a lock there that the process
/// holds until it exits, so that two runs of one binary take turns rather than share it.
pub fn shared(name: &str) -> PathBuf {
    static LOCK: OnceLock<std::fs::File> = OnceLock::new();
    let parent = Path::new(env!("CARGO_TARGET_TMPDIR")).join(env!("CARGO_CRATE_NAME"));
    LOCK.get_or_init(|| {
        std::fs::create_dir_all(&parent).unwrap();
        let lock = std::fs::File::create(parent.join(".lock")).unwrap();
        lock.lock().unwrap();
        lock
    });
    let dir = parent.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `text` with each full-precision number in it (a float printed with 8 decimals or more, as
/// JSON prints an `f64`) replaced by `#`, and those numbers.
pub fn full_precision_apart(text: &str) -> (String, Vec<f64>) {
    let chars: Vec<char> = text.chars().collect();
    let digits_from = |mut i: usize| {
        while chars.get(i).is_some_and(char::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let (mut apart, mut numbers) = (String::new(), Vec::new());
    let mut i = 0;
    while i < chars.len() {
        let starts_number = chars[i].is_ascii_digit()
            && (i == 0 || !(chars[i - 1].is_ascii_alphanumeric() || chars[i - 1] == '.'));
        if !starts_number {
            apart.push(chars[i]);
            i += 1;
            continue;
        }
        let point = digits_from(i);
        let mut end = if chars.get(point) == Some(&'.') {
            digits_from(point + 1)
        } else {
            point
        };
        if end - point > 8 {
            if matches!(chars.get(end), Some('e' | 'E')) {
                let sign = usize::from(matches!(chars.get(end + 1), Some('-' | '+')));
                end = digits_from(end + 1 + sign);
            }
            let number: String = chars[i..end].iter().collect();
            numbers.push(number.parse().unwrap());
            apart.push('#');
        } else {
            apart.extend(&chars[i..end]);
        }
        i = end;
    }
    (apart, numbers)
}

/// Whether `printed` is `expected`: the same text, and its full-precision numbers (confidences,
/// probabilities) within `tolerance`. The CPU's vector instructions order a float sum, so the
/// same model gives another machine's numbers in their last digits, and a model trained there
/// drifts further.
pub fn same_output(printed: &str, expected: &str, tolerance: f64) -> bool {
    let (printed, printed_numbers) = full_precision_apart(printed);
    let (expected, expected_numbers) = full_precision_apart(expected);
    printed == expected
        && printed_numbers.len() == expected_numbers.len()
        && (printed_numbers.iter().zip(&expected_numbers)).all(|(a, b)| (a - b).abs() <= tolerance)
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
/// (`"sentence"`), documents (`"document"`), or sentences with the sample's dictionary as
/// features (`"dictionary"`).
pub fn sample_model(context: &str) -> PathBuf {
    static SENTENCE: OnceLock<PathBuf> = OnceLock::new();
    static DOCUMENT: OnceLock<PathBuf> = OnceLock::new();
    static DICTIONARY: OnceLock<PathBuf> = OnceLock::new();
    let cell = match context {
        "document" => &DOCUMENT,
        "dictionary" => &DICTIONARY,
        _ => &SENTENCE,
    };
    cell.get_or_init(|| {
        let dir = shared(&format!("sample-{context}")).join("run");
        let output = format!("train.output={}", dir.display());
        let (context, dictionaries, dictionary_dim) = match context {
            "dictionary" => (
                "data.context=sentence".to_string(),
                r#"data.dictionaries=["data/sample/lists.tsv"]"#,
                "model.dictionary_dim=4",
            ),
            other => (
                format!("data.context={other}"),
                "data.dictionaries=[]",
                "model.dictionary_dim=0",
            ),
        };
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
            "--set",
            dictionaries,
            "--set",
            dictionary_dim,
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

/// `fit` on the sample's config with small sizes for `epochs` epochs into `output`; `extra` are
/// more arguments.
pub fn fit_small(output: &Path, epochs: usize, extra: &[&str]) -> Output {
    fit_small_with_env(output, epochs, extra, &[])
}

/// [`fit_small`] with `env` set for the process (a failpoint, say).
pub fn fit_small_with_env(
    output: &Path,
    epochs: usize,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let out = format!("train.output={}", output.display());
    let epochs = format!("train.epochs={epochs}");
    let mut args = vec![
        "fit",
        "--config",
        "configs/sample.toml",
        "--set",
        &out,
        "--set",
        "model.word_dim=30",
        "--set",
        "model.hidden=30",
        "--set",
        "model.char_filters=20",
        "--set",
        &epochs,
    ];
    args.extend(extra);
    Command::new(env!("CARGO_BIN_EXE_nertrain"))
        .args(&args)
        .envs(env.iter().copied())
        .current_dir(workspace())
        .output()
        .unwrap()
}

/// Each epoch's training loss and dev F1: equal only if every step was the same.
pub fn learning_curve(dir: &Path) -> Vec<(f64, f64)> {
    std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|m| (m["loss"].as_f64().unwrap(), m["dev_f1"].as_f64().unwrap()))
        .collect()
}

/// What `nertrain ARGS` prints, once it has succeeded.
pub fn nertrain_ok(args: &[&str]) -> String {
    let out = nertrain(args);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

/// The records `tag --model MODEL --format json ARGS` prints: one per text, the texts and any
/// options in `args`.
pub fn tag_json(model: &Path, args: &[&str]) -> Vec<serde_json::Value> {
    let head = [
        "tag",
        "--model",
        model.to_str().unwrap(),
        "--format",
        "json",
    ];
    nertrain_ok(&[&head, args].concat())
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// What `eval --model MODEL --data data/sample/dev.txt --json EXTRA` prints.
pub fn eval_json(model: &Path, extra: &[&str]) -> serde_json::Value {
    let model = model.to_str().unwrap();
    let head = [
        "eval",
        "--model",
        model,
        "--data",
        "data/sample/dev.txt",
        "--json",
    ];
    let args = [&head[..], extra].concat();
    serde_json::from_str(&nertrain_ok(&args)).unwrap()
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

/// The variables that give a server Label Studio's address and key, or credentials: a test's
/// server has only those the test gives.
pub fn without_studio_env(command: &mut Command) {
    for key in [
        "LABEL_STUDIO_URL",
        "LABEL_STUDIO_API_KEY",
        "BASIC_AUTH_USER",
        "BASIC_AUTH_PASS",
    ] {
        command.env_remove(key);
    }
}

/// A running server; killed when dropped.
pub struct Server {
    pub child: Child,
    pub address: String,
    pub log: BufReader<std::process::ChildStderr>,
}

impl Server {
    pub fn start(model: &Path, extra: &[&str], env: Option<(&str, &str)>) -> Self {
        Self::start_with(model, extra, env.as_slice())
    }

    /// A server started with `env` set (and no Label Studio or credentials from ours).
    pub fn start_with(model: &Path, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_nertrain"));
        command
            .args([
                "serve",
                "--model",
                model.to_str().unwrap(),
                "--addr",
                "127.0.0.1:0",
            ])
            .args(extra)
            .current_dir(workspace())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        without_studio_env(&mut command);
        command.envs(env.iter().copied());
        let mut child = command.spawn().unwrap();
        let mut log = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        log.read_line(&mut first).unwrap();
        let address = first
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no address in {first:?}"))
            .to_string();
        Server {
            child,
            address,
            log,
        }
    }

    /// One request on its own connection: status and body.
    pub fn request(&self, method: &str, path: &str, body: &[u8]) -> (u16, String) {
        let (line, body) = self.exchange(method, path, body);
        (line[9..12].parse().unwrap(), body)
    }

    /// One request on its own connection: the status line (`HTTP/1.1 400 the reason`) and the
    /// body.
    pub fn exchange(&self, method: &str, path: &str, body: &[u8]) -> (String, String) {
        self.exchange_with(method, path, body, &[])
    }

    /// [`exchange`](Self::exchange) with more header lines (`Authorization: ...`).
    pub fn exchange_with(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
        headers: &[&str],
    ) -> (String, String) {
        let mut stream = TcpStream::connect(&self.address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n{}\r\n",
            self.address,
            body.len(),
            headers
                .iter()
                .map(|h| format!("{h}\r\n"))
                .collect::<String>()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body).unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).unwrap();
        let response = String::from_utf8(response).unwrap();
        let line = response.lines().next().unwrap_or_default().to_string();
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, body)| body.to_string())
            .unwrap_or_default();
        (line, body)
    }

    pub fn tag(&self, body: &serde_json::Value) -> (u16, serde_json::Value) {
        let (status, body) = self.request("POST", "/tag", body.to_string().as_bytes());
        (
            status,
            serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
        )
    }

    pub fn sigterm(&self) {
        let killed = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
    }

    /// Sends SIGTERM and waits: exit status and what the server logged after its first line.
    pub fn terminate(self) -> (std::process::ExitStatus, String) {
        self.sigterm();
        self.wait()
    }

    pub fn wait(mut self) -> (std::process::ExitStatus, String) {
        let status = self.child.wait().unwrap();
        let mut log = String::new();
        self.log.read_to_string(&mut log).unwrap();
        (status, log)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `eval --thresholds --recall RECALL --store` of `model` on the sample's dev file: the operating
/// point chosen and stored, and what the command printed (it must succeed).
pub fn store_recall(model: &Path, recall: &str) -> String {
    let out = nertrain(&[
        "eval",
        "--model",
        model.to_str().unwrap(),
        "--data",
        "data/sample/dev.txt",
        "--thresholds",
        "--recall",
        recall,
        "--store",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

/// The model's stored operating points (`thresholds.json`).
pub fn stored_thresholds(model: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(model.join("thresholds.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Copies the files (not the directories) of directory `from` into `to`, created when missing.
pub fn copy_files(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}
