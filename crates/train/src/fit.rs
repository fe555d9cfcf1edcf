//! The training loop.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use burn::module::Module;
use burn::tensor::Device;
use nertrain_data::{
    Batch, BatchPlan, ColumnSpec, Corpus, DataError, Encoded, Report, TagScheme, Vectors, Vocab,
    Vocabularies, check_tag, convert_tags, read_conll, read_vectors, set_mention_casing,
};
use nertrain_model::{Constraints, Tagger, VocabSizes};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::config::{Context, DocumentContext};
use crate::io::load_module;
use crate::model_dir::{FORMAT_VERSION, ModelDir, ModelMeta, TrainerFiles};
use crate::predict::{Decoder, PredictOptions};
use crate::step::Trainer;
use crate::{Error, Experiment, Result};

#[derive(Debug, Clone, Default)]
pub struct FitOptions {
    /// Continue the run in `train.output` from its last checkpoint.
    pub resume: bool,
    /// Replace a run in `train.output`, once the new run's data have been read and checked.
    pub overwrite: bool,
    /// When this becomes true, training stops after the current batch and saves a checkpoint
    /// that `resume` continues from (set by Ctrl-C in the CLI).
    pub interrupt: Option<Arc<AtomicBool>>,
}

/// What a run reports as it goes, for the caller to show; `fit` itself prints nothing.
#[derive(Debug, Clone)]
pub enum FitEvent {
    /// A line describing the data, vocabulary, vectors or the run.
    Info(String),
    /// Something the user should know that does not stop training.
    Warning(String),
    /// An epoch's training begins; `done` sentences of it were trained before a resume.
    EpochStarted {
        epoch: usize,
        epochs: usize,
        sentences: usize,
        done: usize,
        loss_sum: f64,
    },
    /// A batch was trained: its sentences and summed loss.
    Batch {
        sentences: usize,
        loss: f64,
    },
    /// The epoch's training is over; evaluation follows.
    EpochTrained,
    /// An epoch was evaluated and committed; `best` says whether it is the best so far.
    EpochEnded(EpochMetrics),
    /// Stopped between batches by `FitOptions::interrupt`, after saving.
    Interrupted {
        epoch: usize,
        batch: usize,
    },
    EarlyStop {
        patience: usize,
    },
    /// Training is over; the best model is in `weights`.
    Finished {
        best_epoch: usize,
        best_dev_f1: f64,
        weights: std::path::PathBuf,
    },
    /// A document-level model's consistency weight was chosen: dev F1 at each weight tried.
    ConsistencyChosen {
        scores: Vec<(f64, f64)>,
        weight: f64,
        dev_f1: f64,
    },
    /// The run chose `epochs`; a model is now trained on train and dev for as many, into
    /// `output`. Its dev scores are not held out.
    TrainingWithDev {
        epochs: usize,
        output: std::path::PathBuf,
    },
    /// The best model's scores on the test set.
    TestScored {
        path: std::path::PathBuf,
        report: Report,
    },
}

/// One line of `metrics.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochMetrics {
    pub epoch: usize,
    pub lr: f64,
    /// Mean negative log-likelihood per sentence.
    pub loss: f64,
    pub train_seconds: f64,
    pub sentences_per_second: f64,
    pub tokens_per_second: f64,
    pub dev_precision: f64,
    pub dev_recall: f64,
    pub dev_f1: f64,
    pub eval_seconds: f64,
    /// Test span F1 of this epoch's model, when the experiment names a test set. Only reported:
    /// the best epoch is chosen on dev.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_f1: Option<f64>,
    pub best: bool,
}

/// What `checkpoint/state.json` holds besides the weights and optimiser state.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LoopState {
    epochs_done: usize,
    best_f1: f64,
    best_epoch: usize,
    history: Vec<EpochMetrics>,
    /// Progress inside the current epoch when the run was interrupted between batches.
    batches_done: usize,
    epoch_loss: f64,
    epoch_seconds: f64,
}

/// The outcome of a training run.
#[derive(Debug, Clone)]
pub struct FitOutcome {
    pub best_epoch: usize,
    pub best_dev_f1: f64,
    pub history: Vec<EpochMetrics>,
    pub test: Option<Report>,
    /// Stopped by `FitOptions::interrupt`; the checkpoint holds the position.
    pub interrupted: bool,
    /// With `train.with_dev`: the model trained on train and dev afterwards.
    pub with_dev: Option<Box<FitOutcome>>,
}

/// Reads a tagged corpus and checks every tag's shape, naming the line of a bad one.
pub fn read_tagged(path: &Path, columns: ColumnSpec) -> Result<Corpus> {
    let corpus = read_conll(path, columns)?;
    for sentence in &corpus.sentences {
        for (i, tag) in sentence.tags.iter().enumerate() {
            check_tag(tag).map_err(|message| corpus.error_at(sentence, i, message))?;
        }
    }
    Ok(corpus)
}

/// The document consistency weights tried on dev when a document-level run ends.
const CONSISTENCY_WEIGHTS: [f64; 7] = [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0];

/// Sets the mention casing of `encoded` (`corpus`'s sentences) from `documents`, when reading
/// documents.
fn with_mention_casing(encoded: &mut [Encoded], corpus: &Corpus, documents: &[Range<usize>]) {
    if !documents.is_empty() {
        let words: Vec<&[String]> = corpus
            .sentences
            .iter()
            .map(|s| s.words.as_slice())
            .collect();
        set_mention_casing(encoded, &words, documents);
    }
}

fn with_scheme(corpus: &Corpus, scheme: TagScheme) -> Corpus {
    let mut converted = corpus.clone();
    for sentence in &mut converted.sentences {
        sentence.tags = convert_tags(&sentence.tags, scheme);
    }
    converted
}

/// Trains the experiment's model, choosing the epoch on dev; with `train.with_dev`, then trains
/// a second one on train and dev for that many epochs (see [`FitOutcome::with_dev`]).
pub fn fit(
    experiment: &Experiment,
    options: FitOptions,
    device: &Device,
    events: &mut dyn FnMut(FitEvent),
) -> Result<FitOutcome> {
    let interrupt = options.interrupt.clone();
    let mut outcome = fit_once(experiment, options, device, events, Stage::Selection)?;
    if !experiment.train.with_dev || outcome.interrupted || outcome.best_epoch == 0 {
        return Ok(outcome);
    }
    let run = ModelDir::new(&experiment.train.output);
    let consistency = run.read_meta()?.document.map(|d| d.consistency);
    let mut second = experiment.clone();
    second.train.with_dev = false;
    second.train.epochs = outcome.best_epoch;
    second.train.patience = outcome.best_epoch;
    second.train.output = run.with_dev_dir();
    events(FitEvent::TrainingWithDev {
        epochs: outcome.best_epoch,
        output: second.train.output.clone(),
    });
    let options = FitOptions {
        resume: false,
        overwrite: true,
        interrupt,
    };
    let with_dev = fit_once(
        &second,
        options,
        device,
        events,
        Stage::WithDev { consistency },
    )?;
    outcome.interrupted = with_dev.interrupted;
    outcome.with_dev = Some(Box::new(with_dev));
    Ok(outcome)
}

/// Which of `fit`'s trainings a run is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stage {
    /// On train, the epoch chosen on dev.
    Selection,
    /// On train and dev, for a chosen number of epochs, keeping the last; a document-level
    /// model keeps the consistency weight the selection run chose.
    WithDev { consistency: Option<f64> },
}

fn fit_once(
    experiment: &Experiment,
    options: FitOptions,
    device: &Device,
    events: &mut dyn FnMut(FitEvent),
    stage: Stage,
) -> Result<FitOutcome> {
    let data = &experiment.data;
    let train_config = &experiment.train;
    let run = ModelDir::new(&train_config.output);
    let config_toml = experiment.to_toml();
    if !options.resume {
        // Checked again before anything is written; here so that a refusal comes at once.
        run.check_new(options.overwrite)?;
    }

    let train = read_tagged(&data.train, data.columns())?;
    let dev = read_tagged(&data.dev, data.columns())?;
    let test = data
        .test
        .as_deref()
        .map(|path| read_tagged(path, data.columns()))
        .transpose()?;
    let file_scheme = data
        .scheme
        .unwrap_or_else(|| TagScheme::detect(train.sentences.iter().map(|s| s.tags.as_slice())));
    let mut train = with_scheme(&train, data.train_scheme);
    if stage != Stage::Selection {
        let after = train.sentences.last().map_or(0, |s| s.document + 1);
        train.sentences.extend(
            with_scheme(&dev, data.train_scheme)
                .sentences
                .into_iter()
                .map(|mut sentence| {
                    sentence.document += after;
                    sentence
                }),
        );
    }

    let (meta, vocab, state, vectors) = if options.resume {
        let (meta, vocab, state) = reopen_run(&run, experiment, &config_toml, events)?;
        (meta, vocab, state, None)
    } else {
        let corpora = Corpora {
            train: &train,
            dev: &dev,
            test: test.as_ref(),
        };
        let (mut meta, vocab, vectors) = describe_run(experiment, &corpora, file_scheme, events)?;
        meta.trained_on_dev = stage != Stage::Selection;
        (meta, vocab, None, vectors)
    };

    let context = data.context;
    let documents = |corpus: &Corpus| match context {
        Context::Sentence => Vec::new(),
        Context::Document => corpus.documents(data.document_tokens),
    };
    let train_documents = documents(&train);
    let mut encoded = vocab.encode_corpus(&train)?;
    with_mention_casing(&mut encoded, &train, &train_documents);
    if !options.resume {
        // Every input has been read and checked: only now is a previous run replaced.
        run.check_new(options.overwrite)?;
        if run.is_run() {
            run.clear()?;
        }
        run.write_description(&meta, &vocab, &config_toml)?;
    }
    let dev_documents = documents(&dev);
    let mut dev_encoded = vocab.encode_corpus_words(&dev);
    with_mention_casing(&mut dev_encoded, &dev, &dev_documents);
    let test_set: Option<(Corpus, Vec<Encoded>, Vec<Range<usize>>)> = test.map(|corpus| {
        let documents = documents(&corpus);
        let mut encoded = vocab.encode_corpus_words(&corpus);
        with_mention_casing(&mut encoded, &corpus, &documents);
        (corpus, encoded, documents)
    });
    let lengths: Vec<usize> = encoded.iter().map(Encoded::len).collect();
    let train_tokens: usize = lengths.iter().sum();
    let singletons = singleton_words(&encoded, vocab.words.len());
    let dev_unknown_tags = unknown_tags(&dev, &vocab, data.train_scheme);
    if !dev_unknown_tags.is_empty() {
        events(FitEvent::Warning(format!(
            "{}: tags never seen in training, which the model cannot predict: {}",
            dev.path.display(),
            dev_unknown_tags.join(", ")
        )));
    }

    let training_constraints = experiment
        .crf
        .constrained_training
        .then(|| Constraints::for_scheme(vocab.tags.items(), meta.train_scheme));
    let decode_options = PredictOptions {
        constrained: meta.crf.constrained_decoding,
        batch_size: train_config.eval_batch_size,
        ..PredictOptions::default()
    };
    let train_device = device.clone().autodiff();
    train_device.seed(train_config.seed);
    let mut model = meta.model.init(meta.sizes, &train_device);
    if let Some(vectors) = &vectors {
        let (with_vectors, found) = model.with_word_vectors(&vocab.words, vectors);
        model = with_vectors;
        events(FitEvent::Info(format!(
            "{found} of {} word embeddings start from pretrained vectors",
            vocab.words.len()
        )));
    }
    let (checkpoint, state) = match state {
        Some(Checkpoint {
            weights,
            trainer,
            state,
        }) => (Some((weights, trainer)), Some(state)),
        None => (None, None),
    };
    let mut state = state.unwrap_or(LoopState {
        epochs_done: 0,
        best_f1: -1.0,
        best_epoch: 0,
        history: Vec::new(),
        batches_done: 0,
        epoch_loss: 0.0,
        epoch_seconds: 0.0,
    });
    if let Some((weights, _)) = &checkpoint {
        model = load_module(model, weights)?;
    }
    let (mut trainer, mut model) = Trainer::new(
        model,
        train_config.update_rule(),
        train_config.clip_norm,
        train_config.reduction,
        training_constraints,
    );
    if let Some((_, files)) = checkpoint {
        // The trainer's own state replaces the word table it took from the model.
        trainer.load(&files)?;
        let within = if state.batches_done > 0 {
            format!(" and batch {} of the next", state.batches_done)
        } else {
            String::new()
        };
        events(FitEvent::Info(format!(
            "resuming {} after epoch {}{within}",
            run.path.display(),
            state.epochs_done
        )));
    }

    events(FitEvent::Info(format!(
        "train {}{}: {} sentences, {} tokens; dev {}: {} sentences; {} words, {} chars, {} tags ({} scheme, trained as {})",
        train.path.display(),
        if stage == Stage::Selection {
            String::new()
        } else {
            format!(" + dev {}", dev.path.display())
        },
        train.sentences.len(),
        train_tokens,
        dev.path.display(),
        dev.sentences.len(),
        vocab.words.len(),
        vocab.chars.len(),
        vocab.tags.len(),
        meta.file_scheme,
        meta.train_scheme
    )));

    let epochs_since_best = |state: &LoopState| state.epochs_done - state.best_epoch;
    while state.epochs_done < train_config.epochs
        && (state.epochs_done == 0 || epochs_since_best(&state) < train_config.patience)
    {
        let epoch = state.epochs_done;
        let lr = train_config.lr / (1.0 + train_config.lr_decay * epoch as f64);
        // Batches come from the epoch's seed and every random draw of a step from the batch's,
        // so a run resumed at any batch boundary continues exactly as it would have.
        let epoch_seed = train_config.seed.wrapping_add(epoch as u64 * 1_000_003);
        let plan = BatchPlan::shuffled(&lengths, train_config.batch_size, epoch_seed);

        let started = Instant::now();
        let mut loss_sum = state.epoch_loss;
        let done = plan.batches[..state.batches_done]
            .iter()
            .map(Vec::len)
            .sum();
        events(FitEvent::EpochStarted {
            epoch: epoch + 1,
            epochs: train_config.epochs,
            sentences: encoded.len(),
            done,
            loss_sum,
        });
        let skip = state.batches_done;
        for (batch_number, indices) in plan.batches.into_iter().enumerate().skip(skip) {
            let batch_seed =
                epoch_seed ^ (batch_number as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            train_device.seed(batch_seed);
            let mut word_dropout = StdRng::seed_from_u64(batch_seed);
            let mut batch = Batch::new(&encoded, indices, meta.max_word_len);
            if data.singleton_unk > 0.0 {
                for word in &mut batch.words {
                    if singletons[*word as usize]
                        && word_dropout.random::<f64>() < data.singleton_unk
                    {
                        *word = Vocab::UNK_ID as i64;
                    }
                }
            }
            let (trained, value) = trainer.step(model, &batch, lr, &train_device)?;
            model = trained;
            if !value.is_finite() {
                events(FitEvent::EpochTrained);
                let kept = if state.best_epoch > 0 {
                    format!(
                        "the best model so far (epoch {}) is kept in {}",
                        state.best_epoch,
                        run.path.display()
                    )
                } else {
                    "no epoch had completed, so no model was saved".to_string()
                };
                return Err(Error::Diverged {
                    value,
                    epoch: epoch + 1,
                    batch: batch_number + 1,
                    kept,
                });
            }
            let sentence_loss = match train_config.reduction {
                nertrain_model::Reduction::Sum => value,
                nertrain_model::Reduction::Mean => value * batch.size() as f64,
                nertrain_model::Reduction::TokenMean => value * batch.token_count() as f64,
            };
            loss_sum += sentence_loss;
            events(FitEvent::Batch {
                sentences: batch.size(),
                loss: sentence_loss,
            });
            if options
                .interrupt
                .as_ref()
                .is_some_and(|flag| flag.load(Ordering::SeqCst))
            {
                events(FitEvent::EpochTrained);
                state.batches_done = batch_number + 1;
                state.epoch_loss = loss_sum;
                state.epoch_seconds += started.elapsed().as_secs_f64();
                let trained = trainer.with_trained_words(&model);
                save_checkpoint(&run, &trained, &trainer, &state, None)?;
                events(FitEvent::Interrupted {
                    epoch: epoch + 1,
                    batch: batch_number + 1,
                });
                return Ok(FitOutcome {
                    best_epoch: state.best_epoch,
                    best_dev_f1: state.best_f1,
                    history: state.history,
                    test: None,
                    interrupted: true,
                    with_dev: None,
                });
            }
        }
        events(FitEvent::EpochTrained);
        let train_seconds = state.epoch_seconds + started.elapsed().as_secs_f64();
        state.batches_done = 0;
        state.epoch_loss = 0.0;
        state.epoch_seconds = 0.0;

        let eval_started = Instant::now();
        let trained = trainer.with_trained_words(&model);
        let valid = trained.valid();
        let decoder = Decoder::new(&valid, &vocab, &meta, device);
        let report = decoder.score(&dev, &dev_encoded, &dev_documents, decode_options)?;
        let (dev_precision, dev_recall, dev_f1) = report.overall.prf();
        let eval_seconds = eval_started.elapsed().as_secs_f64();
        let test_f1 = test_set
            .as_ref()
            .map(|(corpus, encoded, documents)| {
                decoder
                    .score(corpus, encoded, documents, decode_options)
                    .map(|report| report.f1())
            })
            .transpose()?;

        // Trained on dev, the last epoch is the one kept.
        let best = dev_f1 > state.best_f1 || stage != Stage::Selection;
        if best {
            state.best_f1 = dev_f1;
            state.best_epoch = epoch + 1;
        }
        let metrics = EpochMetrics {
            epoch: epoch + 1,
            lr,
            loss: loss_sum / encoded.len() as f64,
            train_seconds,
            sentences_per_second: encoded.len() as f64 / train_seconds,
            tokens_per_second: train_tokens as f64 / train_seconds,
            dev_precision,
            dev_recall,
            dev_f1,
            eval_seconds,
            best,
            test_f1,
        };
        state.history.push(metrics.clone());
        state.epochs_done += 1;
        let dev_scores = best.then(|| {
            let mut scores = report.to_json();
            scores["epoch"] = serde_json::json!(epoch + 1);
            (&valid, scores)
        });
        save_checkpoint(
            &run,
            &trained,
            &trainer,
            &state,
            dev_scores.as_ref().map(|(valid, scores)| (*valid, scores)),
        )?;
        events(FitEvent::EpochEnded(metrics));
    }
    if state.epochs_done < train_config.epochs {
        events(FitEvent::EarlyStop {
            patience: train_config.patience,
        });
    }
    events(FitEvent::Finished {
        best_epoch: state.best_epoch,
        best_dev_f1: state.best_f1,
        weights: run.weights_file(),
    });

    let mut meta = meta;
    let mut decode_options = decode_options;
    let best = if meta.document.is_some() || test_set.is_some() {
        Some(load_module(
            meta.model.init(meta.sizes, device),
            &run.weights_file(),
        )?)
    } else {
        None
    };
    if let (Stage::WithDev { consistency }, Some(document)) = (stage, meta.document.as_mut()) {
        document.consistency = consistency.unwrap_or(0.0);
        decode_options.consistency = document.consistency;
        run.update_meta(&meta)?;
    } else if let (Some(_), Some(best)) = (meta.document, &best) {
        let decoder = Decoder::new(best, &vocab, &meta, device);
        let scores: Vec<(f64, f64)> = CONSISTENCY_WEIGHTS
            .iter()
            .map(|&weight| {
                let options = PredictOptions {
                    consistency: weight,
                    ..decode_options
                };
                let report = decoder.score(&dev, &dev_encoded, &dev_documents, options)?;
                Ok((weight, report.f1()))
            })
            .collect::<Result<_>>()?;
        // The smallest weight among the best: ties go to decoding sentences on their own.
        let (weight, dev_f1) =
            scores.iter().fold(
                scores[0],
                |best, &(w, f)| {
                    if f > best.1 { (w, f) } else { best }
                },
            );
        if let Some(document) = meta.document.as_mut() {
            document.consistency = weight;
        }
        decode_options.consistency = weight;
        run.update_meta(&meta)?;
        events(FitEvent::ConsistencyChosen {
            scores,
            weight,
            dev_f1,
        });
    }
    let test_report = match (&test_set, &best) {
        (Some((test, encoded, documents)), Some(best)) => {
            let report = Decoder::new(best, &vocab, &meta, device).score(
                test,
                encoded,
                documents,
                decode_options,
            )?;
            run.write_test_report(&report.to_json())?;
            events(FitEvent::TestScored {
                path: test.path.clone(),
                report: report.clone(),
            });
            Some(report)
        }
        _ => None,
    };
    Ok(FitOutcome {
        best_epoch: state.best_epoch,
        best_dev_f1: state.best_f1,
        history: state.history,
        test: test_report,
        interrupted: false,
        with_dev: None,
    })
}

/// Where a run resumes from: a checkpoint's training weights, trainer state and loop state.
#[derive(Debug, Clone)]
struct Checkpoint {
    weights: std::path::PathBuf,
    trainer: TrainerFiles,
    state: LoopState,
}

/// Reads back a run to resume: its description, vocabularies and loop state (none when it
/// stopped before its first epoch ended, and starts over). The last committed epoch is published
/// again, which completes one that a crash interrupted.
fn reopen_run(
    run: &ModelDir,
    experiment: &Experiment,
    config_toml: &str,
    events: &mut dyn FnMut(FitEvent),
) -> Result<(ModelMeta, Vocabularies, Option<Checkpoint>)> {
    let meta = run.read_meta()?;
    let vocab = run.read_vocab(&meta)?;
    let recorded = Experiment::load(&run.config_file(), &[])?;
    let differing = differing_settings(&recorded, experiment);
    if !differing.is_empty() {
        return Err(Error::refused(
            &run.path,
            format!(
                "cannot resume: {} differ{} from the run's experiment ({}); only train.epochs, \
                 train.patience, train.output and train.with_dev may change",
                differing.join(", "),
                if differing.len() == 1 { "s" } else { "" },
                run.config_file().display()
            ),
        ));
    }
    let state = match run.read_checkpoint()? {
        Some(stored) => {
            let state: LoopState = serde_json::from_str(&stored.state).map_err(|e| {
                Error::model(&stored.state_file, format!("not a checkpoint state: {e}"))
            })?;
            Some(Checkpoint {
                weights: stored.weights,
                trainer: stored.trainer,
                state,
            })
        }
        None if run.has_trained() => {
            return Err(Error::refused(
                &run.path,
                "cannot resume: the run has a trained model but no checkpoint (checkpoint/ is \
                 missing), so it cannot continue exactly; it is left as it is. Start over with \
                 --overwrite, or choose another train.output",
            ));
        }
        None => {
            events(FitEvent::Info(format!(
                "{}: no epoch had ended; training from the beginning",
                run.path.display()
            )));
            None
        }
    };
    run.write_config(config_toml)?;
    if let Some(checkpoint) = &state {
        publish(run, &checkpoint.state)?;
    }
    Ok((meta, vocab, state))
}

/// The corpora of an experiment, as read.
struct Corpora<'a> {
    train: &'a Corpus,
    dev: &'a Corpus,
    test: Option<&'a Corpus>,
}

/// Describes a new run: vocabularies from the training set (extended by pretrained vectors when
/// given) and the model description. Nothing is written.
fn describe_run(
    experiment: &Experiment,
    corpora: &Corpora,
    file_scheme: TagScheme,
    events: &mut dyn FnMut(FitEvent),
) -> Result<(ModelMeta, Vocabularies, Option<Vectors>)> {
    let data = &experiment.data;
    let (train, dev) = (corpora.train, corpora.dev);
    let mut vocab =
        Vocabularies::build(&train.sentences, data.normalization(), data.min_word_count);
    let vectors = data.vectors.as_deref().map(read_vectors).transpose()?;
    if let Some(vectors) = &vectors {
        if vectors.dim != experiment.model.word_dim {
            let path = data.vectors.as_deref().unwrap_or(Path::new(""));
            let message = format!(
                "model.word_dim is {} but the vectors in {} have {} dimensions",
                experiment.model.word_dim,
                path.display(),
                vectors.dim
            );
            return Err(DataError::file(path, message).into());
        }
        let corpora: Vec<&Corpus> = [Some(train), Some(dev), corpora.test]
            .into_iter()
            .flatten()
            .collect();
        let added = vocab.extend_with_vectors(&corpora, vectors);
        let coverage = |corpus: &Corpus| {
            let words = corpus.sentences.iter().flat_map(|s| &s.words);
            let found = words.clone().filter(|w| vectors.get(w).is_some()).count();
            100.0 * found as f64 / words.count().max(1) as f64
        };
        events(FitEvent::Info(format!(
            "vectors: {} words of {} dimensions; {:.1}% of train and {:.1}% of dev tokens have one \
                 (OOV {:.1}% / {:.1}%); {added} words added to the vocabulary",
            vectors.len(),
            vectors.dim,
            coverage(train),
            coverage(dev),
            100.0 - coverage(train),
            100.0 - coverage(dev)
        )));
    }
    let mut sizes = VocabSizes::from(&vocab);
    if experiment.model.char_lm {
        sizes.lm_words = lm_vocabulary_size(&vocab, train, data.lm_min_count);
        let covered: usize = train
            .sentences
            .iter()
            .flat_map(|s| &s.words)
            .filter(|w| (2..sizes.lm_words).contains(&vocab.word_id(w)))
            .count();
        events(FitEvent::Info(format!(
            "language model: predicts the {} words seen at least {} times ({:.1}% of training tokens), the rest as <unk>",
            sizes.lm_words - 2,
            data.lm_min_count,
            100.0 * covered as f64
                / train
                    .sentences
                    .iter()
                    .map(|s| s.words.len())
                    .sum::<usize>()
                    .max(1) as f64
        )));
    }
    let meta = ModelMeta {
        format: FORMAT_VERSION,
        nertrain_version: env!("CARGO_PKG_VERSION").to_string(),
        model: experiment.model.clone(),
        crf: experiment.crf.clone(),
        sizes,
        file_scheme,
        train_scheme: data.train_scheme,
        columns: data.columns(),
        max_word_len: data.max_word_len,
        document: (data.context == Context::Document).then_some(DocumentContext {
            max_tokens: data.document_tokens,
            consistency: 0.0,
        }),
        trained_on_dev: false,
    };
    Ok((meta, vocab, vectors))
}

/// The settings (`section.key`) in which a resumed run's experiment differs from the one it was
/// started with, besides those that may change: it may be extended, cut short, or moved.
fn differing_settings(recorded: &Experiment, requested: &Experiment) -> Vec<String> {
    let mut recorded = recorded.clone();
    recorded.train.epochs = requested.train.epochs;
    recorded.train.patience = requested.train.patience;
    recorded.train.output = requested.train.output.clone();
    recorded.train.with_dev = requested.train.with_dev;
    let as_json = |e: &Experiment| serde_json::to_value(e).unwrap_or_default();
    let (recorded, requested) = (as_json(&recorded), as_json(requested));
    let mut differing = Vec::new();
    for (section, values) in requested.as_object().into_iter().flatten() {
        for (key, value) in values.as_object().into_iter().flatten() {
            if recorded.get(section).and_then(|s| s.get(key)) != Some(value) {
                differing.push(format!("{section}.{key}"));
            }
        }
    }
    differing
}

/// How many of the most frequent word ids the language model predicts (with `<pad>` and `<unk>`):
/// the vocabulary orders training words by count, so those seen `min_count` times are a prefix.
fn lm_vocabulary_size(vocab: &Vocabularies, train: &Corpus, min_count: usize) -> usize {
    let mut counts = vec![0usize; vocab.words.len()];
    for word in train.sentences.iter().flat_map(|s| &s.words) {
        counts[vocab.word_id(word)] += 1;
    }
    2 + counts[2..].iter().take_while(|&&n| n >= min_count).count()
}

/// Which word ids occur exactly once in the training sentences.
fn singleton_words(sentences: &[Encoded], vocab_size: usize) -> Vec<bool> {
    let mut counts = vec![0usize; vocab_size];
    for id in sentences.iter().flat_map(|s| &s.words) {
        counts[*id] += 1;
    }
    counts
        .into_iter()
        .enumerate()
        .map(|(id, n)| n == 1 && id != Vocab::UNK_ID)
        .collect()
}

/// Tags of `corpus` (converted to `scheme`) that the tag vocabulary lacks.
fn unknown_tags(corpus: &Corpus, vocab: &Vocabularies, scheme: TagScheme) -> Vec<String> {
    let mut unknown: Vec<String> = corpus
        .sentences
        .iter()
        .flat_map(|s| convert_tags(&s.tags, scheme))
        .filter(|tag| vocab.tags.id(tag).is_none())
        .collect();
    unknown.sort();
    unknown.dedup();
    unknown
}

/// Commits the loop's state as a checkpoint, with the best model and its dev scores when this
/// epoch is the best, and publishes it.
fn save_checkpoint(
    run: &ModelDir,
    model: &Tagger,
    trainer: &Trainer,
    state: &LoopState,
    best: Option<(&Tagger, &serde_json::Value)>,
) -> Result<()> {
    run.commit_checkpoint(
        model,
        |files| trainer.save(files),
        serde_json::to_string(state)?.as_bytes(),
        best,
    )?;
    publish(run, state)
}

/// Publishes the last committed checkpoint, whose state is `state`.
fn publish(run: &ModelDir, state: &LoopState) -> Result<()> {
    let lines: String = state
        .history
        .iter()
        .map(|m| serde_json::to_string(m).map(|l| l + "\n"))
        .collect::<std::result::Result<_, _>>()?;
    run.publish(&lines, &crate::curves::render(&state.history))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resumed run continues from the floats its checkpoint wrote; one that read back a last
    /// digit differently would drift, and an equal dev F1 would look like an improvement.
    #[test]
    fn checkpoint_state_reads_back_every_float_exactly() {
        let mut rng = StdRng::seed_from_u64(7);
        let history: Vec<EpochMetrics> = (0..2000)
            .map(|epoch| {
                let mut value = || rng.random::<f64>() * 10f64.powi(rng.random_range(-6..4));
                EpochMetrics {
                    epoch,
                    lr: 0.015 / (1.0 + 0.05 * epoch as f64),
                    loss: value(),
                    train_seconds: value(),
                    sentences_per_second: value(),
                    tokens_per_second: value(),
                    dev_precision: value(),
                    dev_recall: value(),
                    dev_f1: 100.0 * 2.0 * 1234.0 / (2.0 * 1234.0 + epoch as f64 + 17.0),
                    eval_seconds: value(),
                    test_f1: Some(value()),
                    best: epoch % 3 == 0,
                }
            })
            .collect();
        let state = LoopState {
            epochs_done: history.len(),
            best_f1: history[5].dev_f1,
            best_epoch: 5,
            history,
            batches_done: 3,
            epoch_loss: 1.0 / 3.0,
            epoch_seconds: 0.1,
        };
        let text = serde_json::to_string(&state).unwrap();
        let read: LoopState = serde_json::from_str(&text).unwrap();
        assert_eq!(read.best_f1.to_bits(), state.best_f1.to_bits());
        assert_eq!(read.epoch_loss.to_bits(), state.epoch_loss.to_bits());
        assert_eq!(read.history, state.history);
    }
}
