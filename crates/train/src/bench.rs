//! `nertrain bench`: the speed of the pieces users wait for, measured the way the PyTorch
//! reference (`shared/ref/bilstm_crf_torch.py --bench`) measures itself, with the same model
//! sizes (word embeddings 100, BiLSTM 2×100, no character features, no dropout).

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::module::Module;
use burn::tensor::Device;
use nertrain_data::{
    Batch, BatchPlan, CaseRule, ColumnSpec, Corpus, Dictionary, Encoded, TagScheme,
    TextNormalization, Tokenizer, TokenizerSpec, Vocabularies, read_conll, read_dictionary,
    set_dictionary_places,
};
use nertrain_model::crf::host_emissions;
use nertrain_model::{BatchTensors, CharFeatures, NetworkConfig, Reduction, VocabSizes, WordGates};

use nertrain_model::Network;
use nertrain_tagger::{DecodeSpec, Decoder, TagOptions};
use serde::Serialize;

use crate::Result;
use crate::config::UpdateRule;
use crate::step::Trainer;

/// What `bench` measures on.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The tagged CoNLL file whose sentences the training steps use.
    pub train: PathBuf,
    /// The tagged CoNLL file that is tagged, whole, to measure tagging.
    pub dev: PathBuf,
    /// Sentences per training step.
    pub batch_size: usize,
    /// Training steps measured.
    pub steps: usize,
    /// Training steps run first and not measured.
    pub warmup: usize,
    /// Sentences per tagging batch.
    pub eval_batch_size: usize,
    /// The seed of the model's weights and the batches.
    pub seed: u64,
    /// A dictionary whose phrases are features (5 values per label): what it costs to compile,
    /// and what it costs tagging.
    pub dictionary: Option<PathBuf>,
}

/// What `bench` measured: `nertrain bench`'s JSON, whose keys the benchmark scripts read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchResult {
    /// `RAYON_NUM_THREADS`, when set.
    pub threads: Option<String>,
    /// Sentences per training step.
    pub batch_size: usize,
    /// Training steps measured.
    pub train_steps: usize,
    /// Seconds they took.
    pub train_s: f64,
    /// Milliseconds a step took, on average.
    pub ms_per_step: f64,
    /// The median step of the first quarter of the steps, in milliseconds.
    pub step_ms_first_quarter: f64,
    /// The median step of the last quarter, in milliseconds.
    pub step_ms_last_quarter: f64,
    /// The last quarter's median step over the first's: above 1, steps grow slower.
    pub step_time_growth: f64,
    /// Training sentences a second.
    pub train_sents_per_s: f64,
    /// Training tokens a second.
    pub train_tokens_per_s: f64,
    /// Tokens of the dev file.
    pub decode_tokens: usize,
    /// Sentences per tagging batch.
    pub decode_batch: usize,
    /// The median pass over dev, in seconds.
    pub decode_s: f64,
    /// Tagging tokens a second, at the median pass.
    pub decode_tokens_per_s: f64,
    /// Each measured pass over dev, in seconds.
    pub decode_s_each: Vec<f64>,
    /// Tagging tokens a second in the first pass, reported apart.
    pub first_decode_tokens_per_s: f64,
    /// The CRF's log-partition (tensor version) on dev's emissions, tokens a second.
    pub crf_forward_tokens_per_s: f64,
    /// Best paths on the host, tokens a second.
    pub viterbi_tokens_per_s: f64,
    /// Best paths as tensor ops, tokens a second.
    pub tensor_viterbi_tokens_per_s: f64,
    /// This process's peak resident set size, in MiB (Linux).
    pub peak_rss_mb: Option<f64>,
    /// With a dictionary: its entries, and the seconds reading and compiling it took.
    pub dictionary_entries: Option<usize>,
    /// Seconds reading the dictionary file took (cutting its phrases into words).
    pub dictionary_read_s: Option<f64>,
    /// Seconds compiling it took.
    pub dictionary_compile_s: Option<f64>,
    /// Finding its phrases in dev alone, tokens a second (tagging's figure includes it).
    pub dictionary_match_tokens_per_s: Option<f64>,
}

/// A dictionary read and compiled, and what that took.
struct BenchDictionary {
    dictionary: Dictionary,
    entries: usize,
    read_s: f64,
    compile_s: f64,
}

/// Reads and compiles `path` with the tokenizer a model of `train` would have.
fn read_bench_dictionary(path: &Path, train: &Corpus) -> Result<BenchDictionary> {
    let tokenizer = Tokenizer::new(&TokenizerSpec::learn(&train.sentences))
        .map_err(|e| crate::Error::model(path, e.to_string()))?;
    let started = Instant::now();
    let (entries, _) = read_dictionary(path, CaseRule::MatchCase, &tokenizer)?;
    let read_s = started.elapsed().as_secs_f64();
    let mut labels: Vec<String> = entries.iter().map(|e| e.label.clone()).collect();
    labels.sort();
    labels.dedup();
    let count = entries.len();
    let started = Instant::now();
    let dictionary = Dictionary::new(labels, entries).map_err(|e| crate::Error::model(path, e))?;
    Ok(BenchDictionary {
        dictionary,
        entries: count,
        read_s,
        compile_s: started.elapsed().as_secs_f64(),
    })
}

/// Training's share of the measurements.
struct TrainTimes {
    seconds: f64,
    step_seconds: Vec<f64>,
    sentences: usize,
    tokens: usize,
}

/// The CRF's share: seconds for each of its passes over dev's emissions.
struct CrfTimes {
    forward: f64,
    viterbi: f64,
    tensor_viterbi: f64,
}

/// How many times dev is decoded for the tagging figure (the median is reported), after one
/// pass reported apart: the first passes after training run slower than the rest, so that a
/// median of a few measured the shift between the phases as much as tagging.
const DECODE_REPEATS: usize = 9;

/// Runs the benchmark and returns its measurements.
pub fn bench(options: &BenchOptions, device: &Device) -> Result<BenchResult> {
    let train = read_conll(&options.train, &ColumnSpec::default())?;
    let dev = read_conll(&options.dev, &ColumnSpec::default())?;
    let vocab = Vocabularies::build(&train.sentences, TextNormalization::default(), 1);
    let mut encoded = vocab.encode_corpus(&train)?;
    let dev_encoded = vocab.encode_corpus_words(&dev)?;
    let dictionary = options
        .dictionary
        .as_deref()
        .map(|path| read_bench_dictionary(path, &train))
        .transpose()?;
    let dev_words = sentence_words(&dev);
    let mut match_seconds = None;
    if let Some(d) = &dictionary {
        set_dictionary_places(&mut encoded, &sentence_words(&train), &d.dictionary, None);
        let started = Instant::now();
        for sentence in &dev_words {
            std::hint::black_box(d.dictionary.mentions(sentence));
        }
        match_seconds = Some(started.elapsed().as_secs_f64());
    }
    let labels = dictionary
        .as_ref()
        .map_or(0, |d| d.dictionary.labels().len());
    let (model, train) = measure_training(options, &vocab, labels, &encoded, device)?;
    let model = model.valid();
    let tagged = Tagged {
        encoded: &dev_encoded,
        words: &dev_words,
        dictionary: dictionary.as_ref().map(|d| &d.dictionary),
    };
    let mut decode_times = measure_tagging(options, &model, &vocab, &tagged, device)?;
    let crf = measure_crf(options, &model, &dev_encoded, device)?;

    // A step must cost the same at the end as at the start; one that grows leaks (Burn keeps
    // autodiff nodes that no loss reaches, and every backward pass walks them).
    let quarter = options.steps.div_ceil(4);
    let first_quarter = median(&train.step_seconds[..quarter]);
    let last_quarter = median(&train.step_seconds[options.steps - quarter..]);
    let dev_tokens: usize = dev_encoded.iter().map(Encoded::len).sum();
    let first_decode_seconds = decode_times.remove(0);
    let decode_seconds = median(&decode_times);
    let per_second = |seconds: f64| dev_tokens as f64 / seconds;
    Ok(BenchResult {
        threads: std::env::var("RAYON_NUM_THREADS").ok(),
        batch_size: options.batch_size,
        train_steps: options.steps,
        train_s: train.seconds,
        ms_per_step: 1000.0 * train.seconds / options.steps as f64,
        step_ms_first_quarter: 1000.0 * first_quarter,
        step_ms_last_quarter: 1000.0 * last_quarter,
        step_time_growth: last_quarter / first_quarter,
        train_sents_per_s: train.sentences as f64 / train.seconds,
        train_tokens_per_s: train.tokens as f64 / train.seconds,
        decode_tokens: dev_tokens,
        decode_batch: options.eval_batch_size,
        decode_s: decode_seconds,
        decode_tokens_per_s: per_second(decode_seconds),
        decode_s_each: decode_times,
        first_decode_tokens_per_s: per_second(first_decode_seconds),
        crf_forward_tokens_per_s: per_second(crf.forward),
        viterbi_tokens_per_s: per_second(crf.viterbi),
        tensor_viterbi_tokens_per_s: per_second(crf.tensor_viterbi),
        peak_rss_mb: peak_rss_mb(),
        dictionary_entries: dictionary.as_ref().map(|d| d.entries),
        dictionary_read_s: dictionary.as_ref().map(|d| d.read_s),
        dictionary_compile_s: dictionary.as_ref().map(|d| d.compile_s),
        dictionary_match_tokens_per_s: match_seconds.map(per_second),
    })
}

/// Each sentence's words.
fn sentence_words(corpus: &Corpus) -> Vec<&[String]> {
    corpus
        .sentences
        .iter()
        .map(|s| s.words.as_slice())
        .collect()
}

/// What is tagged: dev's sentences, and their words when a dictionary finds phrases in them.
struct Tagged<'a> {
    encoded: &'a [Encoded],
    words: &'a [&'a [String]],
    dictionary: Option<&'a Dictionary>,
}

/// How long a word's characters are read: as an experiment reads them by default.
fn max_word_len() -> usize {
    crate::DataConfig::new(Default::default(), Default::default()).max_word_len
}

/// Training: whole steps (forward, backward, clipping, optimiser) at steady state. Returns the
/// trained model and the times.
fn measure_training(
    options: &BenchOptions,
    vocab: &Vocabularies,
    dictionary_labels: usize,
    encoded: &[Encoded],
    device: &Device,
) -> Result<(Network, TrainTimes)> {
    let config = NetworkConfig::new()
        .with_char_features(CharFeatures::None)
        .with_dropout(0.0)
        .with_dictionary_dim(if dictionary_labels > 0 { 5 } else { 0 });
    let train_device = device.clone().autodiff();
    train_device.seed(options.seed);
    let sizes = VocabSizes {
        dictionary_labels,
        ..VocabSizes::from(vocab)
    };
    let model = config.init(&sizes, &train_device);
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
        let batch = Batch::new(
            encoded,
            batches.next().expect("endless batches"),
            max_word_len(),
        );
        if step >= options.warmup {
            sentences += batch.size();
            tokens += batch.token_count();
        }
        model = trainer.step(model, &batch, 0.015, &train_device)?.0;
        if step >= options.warmup {
            step_seconds.push(step_started.elapsed().as_secs_f64());
        }
    }
    let model = trainer.with_trained_words(&model);
    let times = TrainTimes {
        seconds: started.elapsed().as_secs_f64(),
        step_seconds,
        sentences,
        tokens,
    };
    Ok((model, times))
}

/// Decoding the dev set as `eval` does (length-sorted batches), without constraints as the
/// reference decodes; each time with a new decoder, so that its word cache starts empty as in
/// a `tag` or `eval` run; with a dictionary, finding its phrases is part of each pass. Seconds
/// of a first pass, then of [`DECODE_REPEATS`] more.
fn measure_tagging(
    options: &BenchOptions,
    model: &Network,
    vocab: &Vocabularies,
    dev: &Tagged,
    device: &Device,
) -> Result<Vec<f64>> {
    let decode_options = TagOptions::best_path(false, options.eval_batch_size);
    (0..1 + DECODE_REPEATS)
        .map(|_| {
            let word_gates = WordGates::default();
            let spec = DecodeSpec {
                train_scheme: TagScheme::Iob2,
                output_scheme: TagScheme::Iob2,
                max_word_len: max_word_len(),
            };
            let decoder = Decoder::with_spec(model, vocab, spec, device, &word_gates);
            let mut encoded = dev.encoded.to_vec();
            let started = Instant::now();
            if let Some(dictionary) = dev.dictionary {
                set_dictionary_places(&mut encoded, dev.words, dictionary, None);
            }
            decoder.decode(&encoded, &[], decode_options)?;
            Ok(started.elapsed().as_secs_f64())
        })
        .collect()
}

/// The CRF alone, on the emissions of dev batches in file order (as the reference does): the
/// log-partition, best paths as tagging finds them (emissions to the host, Viterbi in plain
/// Rust), and the tensor Viterbi that n-best decoding builds on.
fn measure_crf(
    options: &BenchOptions,
    model: &Network,
    dev: &[Encoded],
    device: &Device,
) -> Result<CrfTimes> {
    let order: Vec<usize> = (0..dev.len()).collect();
    let prepared: Vec<(BatchTensors, _)> = order
        .chunks(options.eval_batch_size)
        .map(|chunk| {
            let inputs =
                BatchTensors::new(&Batch::new(dev, chunk.to_vec(), max_word_len()), device);
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
    let forward = started.elapsed().as_secs_f64();
    let started = Instant::now();
    for (inputs, emissions) in &prepared {
        for sentence in host_emissions(emissions.clone(), &inputs.lengths) {
            potentials.row_viterbi(&sentence)?;
        }
    }
    let viterbi = started.elapsed().as_secs_f64();
    let started = Instant::now();
    for (inputs, emissions) in &prepared {
        potentials.viterbi(emissions.clone(), inputs.mask.clone(), &inputs.lengths)?;
    }
    Ok(CrfTimes {
        forward,
        viterbi,
        tensor_viterbi: started.elapsed().as_secs_f64(),
    })
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// This process's peak resident set size (Linux), in MiB.
fn peak_rss_mb() -> Option<f64> {
    let kib = procfs::process::Process::myself()
        .ok()?
        .status()
        .ok()?
        .vmhwm?;
    Some(kib as f64 / 1024.0)
}
