//! `nertrain bench`: the speed of the pieces users wait for, measured the way the PyTorch
//! reference (`shared/ref/bilstm_crf_torch.py --bench`) measures itself, with the same model
//! sizes (word embeddings 100, BiLSTM 2×100, no character features, no dropout).

use std::path::PathBuf;
use std::time::Instant;

use burn::module::Module;
use burn::tensor::Device;
use nertrain_data::{
    Batch, BatchPlan, ColumnSpec, Encoded, TagScheme, TextNormalization, Vocabularies, read_conll,
};
use nertrain_model::crf::{host, host_emissions};
use nertrain_model::{BatchTensors, CharFeatures, Reduction, TaggerConfig, VocabSizes, WordGates};

use crate::Result;
use crate::config::UpdateRule;
use crate::predict::{Decoder, PredictOptions};
use crate::step::Trainer;

#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub train: PathBuf,
    pub dev: PathBuf,
    pub batch_size: usize,
    pub steps: usize,
    pub warmup: usize,
    pub eval_batch_size: usize,
    pub seed: u64,
}

/// How many times dev is decoded for the tagging figure (the median is reported), after one
/// pass reported apart: the first passes after training run slower than the rest, at two threads
/// up to twice as slow (e.g. 102, 68, 54, then 51 ms and on), so that a median of a few measured
/// the shift between the phases as much as tagging.
const DECODE_REPEATS: usize = 9;

/// Runs the benchmark and returns its measurements as JSON.
pub fn bench(options: &BenchOptions, device: &Device) -> Result<serde_json::Value> {
    let train = read_conll(&options.train, ColumnSpec::default())?;
    let dev = read_conll(&options.dev, ColumnSpec::default())?;
    let vocab = Vocabularies::build(&train.sentences, TextNormalization::default(), 1);
    let encoded = vocab.encode_corpus(&train)?;
    let dev_encoded = vocab.encode_corpus_words(&dev);
    let sizes = VocabSizes::from(&vocab);
    let config = TaggerConfig::new()
        .with_char_features(CharFeatures::None)
        .with_dropout(0.0);

    // Training: whole steps (forward, backward, clipping, optimiser) at steady state.
    let train_device = device.clone().autodiff();
    train_device.seed(options.seed);
    let model = config.init(sizes, &train_device);
    let (mut trainer, mut model) =
        Trainer::new(model, UpdateRule::sgd(0.9), 5.0, Reduction::Sum, None);
    let lengths: Vec<usize> = encoded.iter().map(Encoded::len).collect();
    let mut batches = std::iter::successors(Some(0u64), |e| Some(e + 1)).flat_map(|epoch| {
        BatchPlan::shuffled(&lengths, options.batch_size, options.seed + epoch).batches
    });
    let (mut sentences, mut tokens) = (0, 0);
    let mut started = Instant::now();
    let mut step_seconds = Vec::with_capacity(options.steps);
    for step in 0..options.warmup + options.steps {
        if step == options.warmup {
            started = Instant::now();
        }
        let step_started = Instant::now();
        let batch = Batch::new(&encoded, batches.next().expect("endless batches"), 25);
        if step >= options.warmup {
            sentences += batch.size();
            tokens += batch.token_count();
        }
        model = trainer.step(model, &batch, 0.015, &train_device)?.0;
        if step >= options.warmup {
            step_seconds.push(step_started.elapsed().as_secs_f64());
        }
    }
    // A step must cost the same at the end as at the start; one that grows leaks (Burn keeps
    // autodiff nodes that no loss reaches, and every backward pass walks them).
    let quarter = options.steps.div_ceil(4);
    let first_quarter = median(&step_seconds[..quarter]);
    let last_quarter = median(&step_seconds[options.steps - quarter..]);
    let model = trainer.with_trained_words(&model);
    let train_seconds = started.elapsed().as_secs_f64();

    // Decoding the dev set as `eval` does (length-sorted batches), without constraints as the
    // reference decodes; each time with a new decoder, so that its word cache starts empty as in
    // a `tag` or `eval` run. The median of several: one pass over dev is a tenth of a second.
    let model = model.valid();
    let dev_tokens: usize = dev_encoded.iter().map(Encoded::len).sum();
    let decode_options = PredictOptions {
        constrained: false,
        batch_size: options.eval_batch_size,
        ..PredictOptions::default()
    };
    let mut decode_times: Vec<f64> = (0..1 + DECODE_REPEATS)
        .map(|_| {
            let word_gates = WordGates::default();
            let decoder = Decoder {
                model: &model,
                vocab: &vocab,
                train_scheme: TagScheme::Iob2,
                output_scheme: TagScheme::Iob2,
                max_word_len: 25,
                device,
                word_gates: &word_gates,
            };
            let started = Instant::now();
            decoder.decode(&dev_encoded, &[], decode_options)?;
            Ok(started.elapsed().as_secs_f64())
        })
        .collect::<Result<_>>()?;
    let first_decode_seconds = decode_times.remove(0);
    let decode_seconds = median(&decode_times);

    // The CRF alone, on the emissions of dev batches in file order (as the reference does).
    let order: Vec<usize> = (0..dev_encoded.len()).collect();
    let prepared: Vec<(BatchTensors, _)> = order
        .chunks(options.eval_batch_size)
        .map(|chunk| {
            let inputs = BatchTensors::new(&Batch::new(&dev_encoded, chunk.to_vec(), 25), device);
            let emissions = model.emissions(&inputs);
            (inputs, emissions)
        })
        .collect();
    let potentials = model.crf.potentials(None);
    let started = Instant::now();
    for (inputs, emissions) in &prepared {
        potentials
            .log_partition(emissions.clone(), inputs.mask.clone())?
            .into_data();
    }
    let forward_seconds = started.elapsed().as_secs_f64();
    // Best paths as tagging finds them: emissions to the host, Viterbi in plain Rust.
    let host_potentials = potentials.to_host();
    let started = Instant::now();
    for (inputs, emissions) in &prepared {
        for sentence in host_emissions(emissions.clone(), &inputs.lengths) {
            host::viterbi(&host_potentials, &sentence)?;
        }
    }
    let viterbi_seconds = started.elapsed().as_secs_f64();
    // The tensor Viterbi, what n-best decoding builds on.
    let started = Instant::now();
    for (inputs, emissions) in &prepared {
        potentials.viterbi(emissions.clone(), inputs.mask.clone(), &inputs.lengths)?;
    }
    let tensor_viterbi_seconds = started.elapsed().as_secs_f64();

    Ok(serde_json::json!({
        "threads": std::env::var("RAYON_NUM_THREADS").ok(),
        "batch_size": options.batch_size,
        "train_steps": options.steps,
        "train_s": train_seconds,
        "ms_per_step": 1000.0 * train_seconds / options.steps as f64,
        "step_ms_first_quarter": 1000.0 * first_quarter,
        "step_ms_last_quarter": 1000.0 * last_quarter,
        "step_time_growth": last_quarter / first_quarter,
        "train_sents_per_s": sentences as f64 / train_seconds,
        "train_tokens_per_s": tokens as f64 / train_seconds,
        "decode_tokens": dev_tokens,
        "decode_batch": options.eval_batch_size,
        "decode_s": decode_seconds,
        "decode_tokens_per_s": dev_tokens as f64 / decode_seconds,
        "decode_s_each": decode_times,
        "first_decode_tokens_per_s": dev_tokens as f64 / first_decode_seconds,
        "crf_forward_tokens_per_s": dev_tokens as f64 / forward_seconds,
        "viterbi_tokens_per_s": dev_tokens as f64 / viterbi_seconds,
        "tensor_viterbi_tokens_per_s": dev_tokens as f64 / tensor_viterbi_seconds,
        "peak_rss_mb": peak_rss_mb(),
    }))
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// This process's peak resident set size (Linux), in MiB.
fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}
