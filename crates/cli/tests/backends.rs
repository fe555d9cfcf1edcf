//! The optional backends (`--features wgpu`, `--features ndarray`) against flex: the same saved
//! weights give the same log Z and the same Viterbi paths, and `fit`, `eval` and `tag` run on
//! them end to end. wgpu needs a Vulkan driver; on machines without a GPU, Mesa's lavapipe
//! (Debian `mesa-vulkan-drivers`) is one, and `.ci/run` installs it.
#![cfg(any(feature = "wgpu", feature = "ndarray"))]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{scratch, workspace};

use nertrain_data::{Batch, BatchPlan, ColumnSpec};
use nertrain_model::BatchTensors;
use nertrain_train::{Backend, Predictor, read_tagged};

/// Shader compilation on a software driver is slow, but a run that takes longer than this has
/// hung (a fused kernel once hung for minutes inside lavapipe's LLVM).
const TIMEOUT: Duration = Duration::from_secs(600);

/// Runs the binary, killing it if it outlives [`TIMEOUT`].
fn nertrain(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nertrain"))
        .args(args)
        .current_dir(workspace())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > TIMEOUT {
            child.kill().unwrap();
            panic!("nertrain {args:?} ran longer than {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn check(output: Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// A deliberately tiny model: lavapipe compiles one shader per operation shape.
const TINY: [&str; 12] = [
    "--set",
    "model.word_dim=16",
    "--set",
    "model.hidden=16",
    "--set",
    "model.char_filters=8",
    "--set",
    "model.char_dim=8",
    "--set",
    "train.epochs=2",
    "--set",
    "train.patience=2",
];

/// Trained on flex, then read by every backend.
fn model() -> &'static Path {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    MODEL.get_or_init(|| {
        let dir = scratch("model").join("run");
        let out = format!("train.output={}", dir.display());
        let mut args = vec!["fit", "--config", "configs/sample.toml", "--set", &out];
        args.extend(TINY);
        check(nertrain(&args));
        dir
    })
}

fn backends() -> Vec<Backend> {
    let mut backends = Vec::new();
    if cfg!(feature = "ndarray") {
        backends.push(Backend::Ndarray);
    }
    if cfg!(feature = "wgpu") {
        backends.push(Backend::Wgpu);
    }
    backends
}

/// Per dev batch: log Z of every sentence and its Viterbi path, from the tensor CRF.
fn log_z_and_paths(backend: Backend) -> (Vec<f32>, Vec<Vec<usize>>) {
    let device = backend.device().unwrap();
    let predictor = Predictor::load(model(), &device).unwrap();
    let dev = read_tagged(
        &workspace().join("data/sample/dev.txt"),
        ColumnSpec::default(),
    )
    .unwrap();
    let encoded = predictor.vocab.encode_corpus(&dev).unwrap();
    let lengths: Vec<usize> = encoded.iter().map(|e| e.len()).collect();
    let potentials = predictor.model.crf.potentials(None);
    let (mut log_z, mut paths) = (Vec::new(), Vec::new());
    for indices in BatchPlan::sorted(&lengths, 32, usize::MAX).batches {
        let batch = Batch::new(&encoded, indices, predictor.meta.max_word_len);
        let inputs = BatchTensors::new(&batch, &device);
        let emissions = predictor.model.emissions(&inputs);
        log_z.extend(
            potentials
                .log_partition(emissions.clone(), inputs.mask.clone())
                .into_data()
                .iter::<f32>(),
        );
        paths.extend(
            potentials
                .viterbi(emissions, inputs.mask, &inputs.lengths)
                .into_iter()
                .map(|(path, _)| path),
        );
    }
    (log_z, paths)
}

#[test]
fn same_weights_give_the_same_log_z_and_viterbi_paths() {
    let (flex_log_z, flex_paths) = log_z_and_paths(Backend::Flex);
    for backend in backends() {
        let (log_z, paths) = log_z_and_paths(backend);
        assert_eq!(log_z.len(), flex_log_z.len());
        let worst = log_z
            .iter()
            .zip(&flex_log_z)
            .map(|(a, b)| (a - b).abs() / b.abs().max(1.0))
            .fold(0.0, f32::max);
        eprintln!("{backend}: largest relative log Z difference from flex {worst:e}");
        assert!(worst < 1e-4, "{backend}: log Z differs by {worst}");
        assert_eq!(paths, flex_paths, "{backend}: Viterbi paths differ");
    }
}

#[test]
fn fit_eval_and_tag_run_on_each_backend() {
    let model = model().to_str().unwrap();
    let on = |backend: Backend, command: &[&str]| {
        let mut args = vec!["--backend", backend.name()];
        args.extend(command);
        check(nertrain(&args))
    };
    let eval = ["eval", "--model", model, "--data", "data/sample/test.txt"];
    let sentence = "Maria Keller flew from Oslo to Lima .";
    let tag = ["tag", "--model", model, "--format", "json", sentence];
    let entities = |json: &str| -> Vec<serde_json::Value> {
        let value: serde_json::Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
        value["entities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| serde_json::json!([e["text"], e["label"], e["start"], e["end"]]))
            .collect()
    };
    let flex_eval = on(Backend::Flex, &eval);
    let flex_entities = entities(&on(Backend::Flex, &tag));
    for backend in backends() {
        let name = backend.name();
        assert_eq!(
            on(backend, &eval),
            flex_eval,
            "{name}: the same report as flex"
        );
        assert_eq!(
            entities(&on(backend, &tag)),
            flex_entities,
            "{name}: same entities"
        );

        let run = scratch(name).join("run");
        let out = format!("train.output={}", run.display());
        let mut args = vec![
            "--backend",
            name,
            "fit",
            "--config",
            "configs/sample.toml",
            "--set",
            &out,
        ];
        args.extend(TINY);
        check(nertrain(&args));
        let config = std::fs::read_to_string(run.join("config.toml")).unwrap();
        assert!(
            config.contains(&format!("backend = \"{name}\"")),
            "{config}"
        );
        let metrics = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
        assert_eq!(metrics.lines().count(), 2, "two epochs on {name}");
    }
}
