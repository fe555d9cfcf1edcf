//! The optional backends (`--features wgpu`, `--features ndarray`) against flex: the same saved
//! weights give the same log Z, partial-label loss and Viterbi paths, and `fit` (continuing a
//! model on partial labels), `eval` and `tag` run on
//! them end to end. wgpu needs a Vulkan driver; on machines without a GPU, Mesa's lavapipe
//! (Debian `mesa-vulkan-drivers`) is one, and `.ci/run` installs it.
#![cfg(any(feature = "wgpu", feature = "ndarray"))]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use burn::tensor::Tensor;

use common::{scratch_at, shared, workspace};

use nertrain_data::read_tagged;
use nertrain_data::{Batch, BatchPlan, ColumnSpec};
use nertrain_model::{BatchTensors, CrfError, Reduction};
use nertrain_tagger::Tagger;
use nertrain_train::Backend;

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
        let dir = shared("model").join("run");
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

/// Per dev batch: log Z of every sentence and its Viterbi path, from the tensor CRF; then the
/// partial-label loss of each batch with every third token unlabelled, and its loss against a
/// teacher that is the model at half its emission scores.
fn log_z_and_paths(backend: Backend) -> (Vec<f32>, Vec<Vec<usize>>) {
    let device = backend.device().unwrap();
    let tagger = Tagger::load(model(), &device).unwrap();
    let dev = read_tagged(
        &workspace().join("data/sample/dev.txt"),
        &ColumnSpec::default(),
    )
    .unwrap();
    let encoded = tagger.vocab().encode_corpus(&dev).unwrap();
    let lengths: Vec<usize> = encoded.iter().map(|e| e.len()).collect();
    let potentials = tagger.network().crf.potentials(None);
    let (mut log_z, mut paths) = (Vec::new(), Vec::new());
    let k = tagger.vocab().tags.len();
    let partial: Vec<_> = encoded
        .iter()
        .map(|sentence| {
            let allowed = sentence
                .tags
                .iter()
                .enumerate()
                .map(|(t, &tag)| (0..k).map(|y| t % 3 == 1 || y == tag).collect())
                .collect();
            nertrain_data::Encoded {
                allowed,
                ..sentence.clone()
            }
        })
        .collect();
    for indices in BatchPlan::sorted(&lengths, 32, usize::MAX).batches {
        let batch = Batch::new(&partial, indices, tagger.meta().max_word_len);
        let inputs = BatchTensors::new(&batch, &device);
        let emissions = tagger.network().emissions(&inputs);
        let losses = |loss: Result<Tensor<1>, CrfError>| -> Vec<f32> {
            let loss = loss.expect("a batch of sentences");
            loss.into_data().iter::<f32>().collect()
        };
        let (mask, lengths, sum) = (&inputs.mask, &inputs.lengths, Reduction::Sum);
        let allowed = inputs.allowed.clone().expect("unlabelled tokens");
        log_z.extend(losses(potentials.partial_nll(
            emissions.clone(),
            allowed,
            mask.clone(),
            lengths,
            sum,
        )));
        let teacher = potentials
            .marginals(emissions.clone() * 0.5, mask.clone())
            .expect("a batch of sentences");
        log_z.extend(losses(potentials.distillation_loss(
            emissions.clone(),
            &teacher,
            mask.clone(),
            lengths,
            sum,
        )));
        log_z.extend(losses(
            potentials.log_partition(emissions.clone(), mask.clone()),
        ));
        paths.extend(
            potentials
                .viterbi(emissions, inputs.mask, &inputs.lengths)
                .expect("a batch of sentences")
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

        // Continuing the flex model on partial labels: the grown weights, and the loss of
        // batches with and without unlabelled tokens, on this backend.
        let run = scratch_at(name, "run");
        let out = format!("train.output={}", run.display());
        let partial = run.parent().unwrap().join("partial.txt");
        let train = std::fs::read_to_string(workspace().join("data/sample/train.txt")).unwrap();
        let mut sentence = 0;
        let lines: Vec<String> = train
            .lines()
            .map(|line| match line.split_once(' ') {
                None => {
                    sentence += 1;
                    line.to_string()
                }
                Some((word, _)) if sentence % 7 == 3 => format!("{word} -"),
                Some(_) => line.to_string(),
            })
            .collect();
        std::fs::write(&partial, lines.join("\n") + "\n").unwrap();
        let train = format!("data.train={:?}", partial.to_str().unwrap());
        let mut args = vec![
            "--backend",
            name,
            "fit",
            "--config",
            "configs/sample.toml",
            "--set",
            &out,
            "--set",
            &train,
            "--start-from",
            model,
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

/// A model with a pretrained encoder (the tiny random BERT of `data/encoders`) trained on flex
/// scores the same on every backend, and fine-tunes on each.
#[test]
fn a_pretrained_encoder_runs_on_each_backend() {
    let flex_run = scratch_at("encoder-flex", "run");
    let fit = |backend: Backend, run: &Path, tuning: &str| {
        let out = format!("train.output={}", run.display());
        let tuning = format!("model.pretrained_tuning={tuning}");
        let mut args = vec![
            "--backend",
            backend.name(),
            "fit",
            "--config",
            "configs/sample-encoder.toml",
            "--set",
            &out,
            "--set",
            &tuning,
        ];
        args.extend(TINY);
        check(nertrain(&args));
    };
    fit(Backend::Flex, &flex_run, "frozen");
    let model = flex_run.to_str().unwrap();
    let eval = |backend: Backend| {
        check(nertrain(&[
            "--backend",
            backend.name(),
            "eval",
            "--model",
            model,
            "--data",
            "data/sample/test.txt",
        ]))
    };
    let flex_eval = eval(Backend::Flex);
    for backend in backends() {
        let name = backend.name();
        assert_eq!(eval(backend), flex_eval, "{name}: the same report as flex");
        let run = scratch_at(&format!("encoder-{name}"), "run");
        fit(backend, &run, "fine-tune");
        let metrics = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
        assert_eq!(metrics.lines().count(), 2, "two epochs on {name}");
    }
}

/// The fused recurrence's cubecl kernels against the tensor-op recurrence, both on wgpu: the
/// same hidden states and the same gradients of the gates and the recurrent weights, on batches
/// of sentences of different lengths (including hidden sizes that leave units of a cube idle or
/// give a unit more than one hidden unit).
#[cfg(feature = "wgpu")]
#[test]
fn fused_recurrence_on_wgpu_matches_tensor_ops_in_value_and_gradient() {
    use burn::tensor::Distribution;
    use nertrain_model::recurrence;

    fn values(t: Tensor<3>) -> Vec<f32> {
        t.into_data().iter::<f32>().collect()
    }
    fn assert_close(a: Tensor<3>, b: Tensor<3>, what: &str) {
        assert_eq!(a.dims(), b.dims(), "{what}");
        let (a, b) = (values(a), values(b));
        let worst = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs() / y.abs().max(1.0))
            .fold(0.0, f32::max);
        assert!(worst < 1e-4, "{what}: differs by {worst}");
    }

    let device = Backend::Wgpu.device().unwrap();
    assert!(recurrence::has_fused(&device, 16));
    let device = device.autodiff();
    let cases: [(&[usize], usize); 5] = [
        (&[1], 1),
        (&[5, 3], 3),
        (&[7, 1, 4, 7], 5),
        (&[12, 9, 2], 33),
        (&[4, 6], 300),
    ];
    for (lengths, h) in cases {
        let (batch, time) = (lengths.len(), *lengths.iter().max().unwrap());
        let normal = |sd| Distribution::Normal(0.0, sd);
        let gates = Tensor::<3>::random([batch, time, 8 * h], normal(1.5), &device);
        let recurrent =
            Tensor::<3>::random([2, h, 4 * h], normal(0.7 / (h as f64).sqrt()), &device);
        // A loss that weighs every hidden state differently.
        let weights = Tensor::<3>::random([batch, time, 2 * h], normal(1.0), &device);
        // Padded positions are unspecified: compare real tokens only.
        let mask: Vec<f32> = lengths
            .iter()
            .flat_map(|&l| (0..time).flat_map(move |t| vec![f32::from(t < l); 2 * h]))
            .collect();
        let mask = Tensor::<3>::from_data(
            burn::tensor::TensorData::new(mask, [batch, time, 2 * h]),
            &device,
        );
        let weights = weights * mask.clone();

        let run = |fused: bool| {
            let gates = gates.clone().require_grad();
            let recurrent = recurrent.clone().require_grad();
            let hidden = if fused {
                recurrence::fused(gates.clone(), recurrent.clone(), lengths)
            } else {
                recurrence::tensor_ops(gates.clone(), recurrent.clone(), lengths)
            };
            let grads = (hidden.clone() * weights.clone()).sum().backward();
            (
                hidden * mask.clone(),
                Tensor::from_inner(gates.grad(&grads).unwrap()),
                Tensor::from_inner(recurrent.grad(&grads).unwrap()),
            )
        };
        let (hidden, d_gates, d_recurrent) = run(true);
        let (want_hidden, want_d_gates, want_d_recurrent) = run(false);
        let case = format!("lengths {lengths:?}, hidden {h}");
        assert_close(hidden, want_hidden, &format!("{case}: hidden states"));
        assert_close(d_gates, want_d_gates, &format!("{case}: gates' gradient"));
        assert_close(
            d_recurrent,
            want_d_recurrent,
            &format!("{case}: recurrent gradient"),
        );
        // Inference (no autodiff) takes the kernel without the saved state.
        let plain = |t: &Tensor<3>| t.clone().inner();
        assert_close(
            recurrence::fused(plain(&gates), plain(&recurrent), lengths) * plain(&mask),
            recurrence::tensor_ops(plain(&gates), plain(&recurrent), lengths) * plain(&mask),
            &format!("{case}: inference"),
        );
    }
}

/// An adapter the machine lacks (a sweep's trial told a GPU number wgpu does not have) is an
/// error that says which one was asked for, not a panic in cubecl's thread.
#[cfg(feature = "wgpu")]
#[test]
fn an_adapter_that_is_not_there_is_an_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_nertrain"))
        .args(["--backend", "wgpu", "tag", "--model"])
        .arg(model())
        .arg("Peter lives in Berlin.")
        .env("CUBECL_WGPU_DEFAULT_DEVICE", "DiscreteGpu(99)")
        .current_dir(workspace())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "wgpu found no device to run on (CUBECL_WGPU_DEFAULT_DEVICE=DiscreteGpu(99))"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}
