//! The training loop: epochs of shuffled batches, evaluation on dev after each, early stopping,
//! a checkpoint committed every epoch, and at the end the document consistency weight and the
//! test score. Reading the data and describing the run are in `setup`, the run's progress on disk
//! in `checkpoint`, and what the loop reports in `events`.

mod checkpoint;
mod distill;
mod events;
mod setup;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

use burn::module::Module;
use burn::tensor::Device;
use nertrain_data::{Batch, BatchPlan, Encoded, Mention, Report, Vocab};
use nertrain_model::encoder::{LayerStore, PretrainedEncoder, PretrainedFeatures, fine_tuned_note};
use nertrain_model::files::load_weights;
use nertrain_model::{
    Backend, Constraints, ModelFiles, ModelMeta, Network, RecordedScores, Reduction, StartedFrom,
    WordGates, grown_from, with_weights_of,
};
use nertrain_tagger::{Decoder, TagOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub use events::{EpochMetrics, FitEvent, FitOptions, FitOutcome};

use crate::model_dir::ModelDir;
use crate::step::Trainer;
use crate::{Error, Experiment, Result, TrainConfig};
use checkpoint::{Checkpoint, LoopState, save_checkpoint};
use setup::{Prepared, prepare, singleton_words};

/// The document consistency weights tried on dev when a document-level run ends.
const CONSISTENCY_WEIGHTS: [f64; 7] = [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0];

/// Trains the experiment's model, choosing the epoch on dev; with `train.with_dev`, then trains
/// a second one on train and dev for that many epochs (see [`FitOutcome::with_dev`]).
pub fn fit(
    experiment: &Experiment,
    options: FitOptions,
    device: &Device,
    events: &mut dyn FnMut(FitEvent),
) -> Result<FitOutcome> {
    let run = ModelDir::new(&experiment.train.output);
    // One writer at a time, from the first check to the with-dev model's last file.
    let lock = run.lock()?;
    let outcome = fit_locked(experiment, options, device, events);
    if outcome.is_err() {
        run.remove_unused(lock);
    }
    outcome
}

fn fit_locked(
    experiment: &Experiment,
    options: FitOptions,
    device: &Device,
    events: &mut dyn FnMut(FitEvent),
) -> Result<FitOutcome> {
    let (interrupt, encoder_cache) = (options.interrupt.clone(), options.encoder_cache.clone());
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
        encoder_cache,
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

/// A run's training in progress besides the model: the trainer (which holds the model's word
/// table), the loop's state, and what every epoch reads of the training data.
struct Training {
    trainer: Trainer,
    state: LoopState,
    /// The autodiff device the model trains on.
    device: Device,
    lengths: Vec<usize>,
    /// Which word ids occur once in the training data (for `data.singleton_unk`).
    singletons: Vec<bool>,
}

/// How an epoch's training ended.
enum EpochEnd {
    /// Every batch trained: the learning rate, the summed sentence loss and the seconds.
    Trained {
        lr: f64,
        loss_sum: f64,
        seconds: f64,
    },
    /// Stopped between batches by `FitOptions::interrupt`, with a checkpoint saved.
    Interrupted,
}

fn fit_once(
    experiment: &Experiment,
    options: FitOptions,
    device: &Device,
    events: &mut dyn FnMut(FitEvent),
    stage: Stage,
) -> Result<FitOutcome> {
    let train_config = &experiment.train;
    let mut prepared = prepare(
        experiment,
        &options,
        stage != Stage::Selection,
        device,
        events,
    )?;
    let (mut training, mut model) = Training::start(experiment, &mut prepared, device, events)?;
    cache_frozen_encoder(
        &model,
        &mut prepared,
        training.epochs_left(train_config),
        options.encoder_cache.as_deref(),
        train_config.backend,
        events,
    )?;
    describe_data(&prepared, stage, &training.lengths, events);
    let decode_options = TagOptions::best_path(
        prepared.meta.crf.constrained_decoding,
        train_config.eval_batch_size,
    );
    while training.epochs_left(train_config) {
        let (trained, end) =
            training.train_epoch(model, experiment, &prepared, &options, events)?;
        model = trained;
        let (lr, loss_sum, train_seconds) = match end {
            EpochEnd::Trained {
                lr,
                loss_sum,
                seconds,
            } => (lr, loss_sum, seconds),
            EpochEnd::Interrupted => return Ok(training.outcome(None, true)),
        };
        let eval_started = Instant::now();
        let trained = training.trainer.with_trained_words(&model);
        let valid = trained.valid();
        let (report, eval_seconds, test_f1) =
            evaluate_epoch(&prepared, &valid, decode_options, device, eval_started)?;
        let (_, _, dev_f1) = report.overall.prf();
        let epoch = training.state.epochs_done + 1;
        // Trained on dev, the last epoch is the one kept.
        let best = dev_f1 > training.state.best_f1 || stage != Stage::Selection;
        let metrics = epoch_metrics(
            (epoch, best),
            (lr, loss_sum, train_seconds),
            (&prepared.encoded, &training.lengths),
            (&report, eval_seconds, test_f1),
        );
        let dev_scores = best.then(|| RecordedScores {
            epoch: Some(epoch),
            scores: report.scores(),
        });
        training.commit_epoch(
            &prepared.run,
            &trained,
            metrics.clone(),
            dev_scores.as_ref().map(|scores| (&valid, scores)),
        )?;
        events(FitEvent::EpochEnded { metrics });
    }
    say_finished(&training.state, train_config, &prepared.run, events);
    let test_report = finish(&prepared, decode_options, stage, device, events)?;
    Ok(training.outcome(test_report, false))
}

/// The figures of epoch `epoch` (the best so far, or kept, with `best`): its training at `lr`,
/// the loss summed over the `encoded` sentences (of `lengths` words) and its seconds, and its
/// dev scores.
fn epoch_metrics(
    (epoch, best): (usize, bool),
    (lr, loss_sum, train_seconds): (f64, f64, f64),
    (encoded, lengths): (&[Encoded], &[usize]),
    (report, eval_seconds, test_f1): (&Report, f64, Option<f64>),
) -> EpochMetrics {
    let (dev_precision, dev_recall, dev_f1) = report.overall.prf();
    EpochMetrics {
        epoch,
        lr,
        loss: loss_sum / encoded.len() as f64,
        train_seconds,
        sentences_per_second: encoded.len() as f64 / train_seconds,
        tokens_per_second: lengths.iter().sum::<usize>() as f64 / train_seconds,
        dev_precision,
        dev_recall,
        dev_f1,
        eval_seconds,
        best,
        test_f1,
    }
}

/// A batch's loss summed over its sentences, from the step's `value` under `reduction`.
fn summed_loss(reduction: Reduction, value: f64, batch: &Batch) -> f64 {
    match reduction {
        Reduction::Sum => value,
        Reduction::Mean => value * batch.size() as f64,
        Reduction::TokenMean => value * batch.token_count() as f64,
    }
}

/// Says that training ended (early, when it stopped before its epochs) and what it kept.
fn say_finished(
    state: &LoopState,
    train_config: &TrainConfig,
    run: &ModelDir,
    events: &mut dyn FnMut(FitEvent),
) {
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
}

/// Whether the epoch `state` names the best is one it has done.
fn check_best_epoch(state: &LoopState, run: &ModelDir) -> Result<()> {
    if state.best_epoch > state.epochs_done {
        return Err(Error::model(
            run.path.join("checkpoint"),
            format!(
                "its state names epoch {} the best of {} done: the state was changed or damaged",
                state.best_epoch, state.epochs_done
            ),
        ));
    }
    Ok(())
}

/// What is said when `run` resumes where `state` stopped.
fn resuming(run: &ModelDir, state: &LoopState) -> String {
    let within = if state.batches_done > 0 {
        format!(" and batch {} of the next", state.batches_done)
    } else {
        String::new()
    };
    format!(
        "resuming {} after epoch {}{within}",
        run.path.display(),
        state.epochs_done
    )
}

/// Whether `state`'s batches done of its epoch are within the epoch's `batches`.
fn check_batches_done(state: &LoopState, run: &ModelDir, batches: usize) -> Result<()> {
    if state.batches_done > batches {
        return Err(Error::model(
            run.path.join("checkpoint"),
            format!(
                "its state has {} batches of epoch {} done, but the epoch has {batches}: the \
                 state was changed or damaged",
                state.batches_done,
                state.epochs_done + 1,
            ),
        ));
    }
    Ok(())
}

/// Computes a frozen encoder's layers at each word of the training (when `training` is left),
/// dev and test sentences once, for every epoch's training and scoring to read: the same values
/// the encoder gives each time (its windows are read alone, whatever they are batched with).
/// With a `store`, the layers it has are read from it and the others written to it.
fn cache_frozen_encoder(
    model: &Network,
    prepared: &mut Prepared,
    training: bool,
    store: Option<&Path>,
    backend: Backend,
    events: &mut dyn FnMut(FitEvent),
) -> Result<()> {
    let Some(pretrained) = model.pretrained.as_ref().filter(|p| p.frozen) else {
        if let (Some(root), Some(_)) = (store, &model.pretrained) {
            events(FitEvent::warning(fine_tuned_note(root)));
        }
        return Ok(());
    };
    let started = Instant::now();
    let store = store
        .map(|root| LayerStore::open(root, pretrained, backend))
        .transpose()?;
    let max_word_len = prepared.meta.max_word_len;
    let train = training.then_some(&mut prepared.encoded);
    let test = prepared.test_set.as_mut().map(|(_, encoded, _)| encoded);
    let read: usize = (train.into_iter())
        .chain([&mut prepared.dev_encoded])
        .chain(test)
        .map(|sentences| set_layers(pretrained, sentences, store.as_ref(), max_word_len, events))
        .sum();
    let computed = prepared.encoded.len() * usize::from(training)
        + prepared.dev_encoded.len()
        + prepared
            .test_set
            .as_ref()
            .map_or(0, |(_, encoded, _)| encoded.len())
        - read;
    let stored = store.map_or(String::new(), |store| {
        format!(", {read} read from {}", store.dir().display())
    });
    let (training, reuse) = if training {
        (
            format!("{} training, ", prepared.encoded.len()),
            "for every epoch",
        )
    } else {
        (String::new(), "with no epoch left to train")
    };
    let test = prepared
        .test_set
        .as_ref()
        .map_or(0, |(_, encoded, _)| encoded.len());
    events(FitEvent::info(format!(
        "the frozen encoder's layers at each word of the {training}{} dev and {test} test \
         sentences, {reuse} ({computed} computed{stored}) in {:.1} s",
        prepared.dev_encoded.len(),
        started.elapsed().as_secs_f64()
    )));
    Ok(())
}

/// Sets the frozen encoder's layers at each word of `sentences`: read from `store` where it has
/// them, computed (and written to it) where not. Returns how many sentences were read.
fn set_layers(
    pretrained: &PretrainedFeatures,
    sentences: &mut [Encoded],
    store: Option<&LayerStore>,
    max_word_len: usize,
    events: &mut dyn FnMut(FitEvent),
) -> usize {
    let Some(store) = store else {
        let all: Vec<usize> = (0..sentences.len()).collect();
        pretrained.cache_states(sentences, &all, max_word_len);
        return 0;
    };
    let filled = store.fill(pretrained, sentences, max_word_len);
    let read = filled.read;
    for problem in filled.problems() {
        events(FitEvent::warning(problem));
    }
    read
}

/// `model`, fresh, with the weights of the pretrained encoder `loaded` from its checkpoint
/// directory, when the model has an encoder.
fn with_pretrained_encoder(
    mut model: Network,
    loaded: Option<(PretrainedEncoder, &Path)>,
) -> Result<Network> {
    let (Some(pretrained), Some((loaded, checkpoint))) = (model.pretrained.take(), loaded) else {
        return Ok(model);
    };
    // Read on the inference device; the fresh encoder's parameters are the training device's
    // leaves, which take its values.
    let encoder = with_weights_of(pretrained.encoder, &loaded)
        .map_err(|e| Error::model(checkpoint, e.to_string()))?;
    model.pretrained = Some(PretrainedFeatures {
        encoder,
        ..pretrained
    });
    Ok(model)
}

/// `model`, fresh for this run's vocabularies, with the weights of the model it continues.
fn continued(
    model: Network,
    meta: &ModelMeta,
    from: &StartedFrom,
    device: &Device,
) -> Result<Network> {
    let files = ModelFiles::new(&from.path);
    let (old_meta, _, old) = files.load(device)?;
    if old_meta.sizes != from.sizes {
        return Err(Error::model(
            files.meta_file(),
            format!(
                "the model this run continues has changed since the run began (its vocabularies \
                 were {:?}, now {:?})",
                from.sizes, old_meta.sizes
            ),
        ));
    }
    grown_from(model, &meta.sizes, &old, &old_meta.sizes)
        .map_err(|e| Error::model(files.weights_file(), e.to_string()))
}

impl Training {
    /// A new model (from pretrained vectors, when the experiment names them), or the one of the
    /// run's last checkpoint with its trainer and loop state.
    fn start(
        experiment: &Experiment,
        prepared: &mut Prepared,
        device: &Device,
        events: &mut dyn FnMut(FitEvent),
    ) -> Result<(Self, Network)> {
        let (checkpoint, vectors, start, pretrained) = (
            prepared.state.take(),
            prepared.vectors.take(),
            prepared.start.take(),
            prepared.pretrained.take(),
        );
        let Prepared {
            run, meta, vocab, ..
        } = &*prepared;
        let train_config = &experiment.train;
        let train_device = device.clone().autodiff();
        train_device.seed(train_config.seed);
        let mut model = meta.model.init(&meta.sizes, &train_device);
        if let Some(vectors) = &vectors {
            let (with_vectors, found) = model.with_word_vectors(&vocab.words, vectors);
            model = with_vectors;
            events(FitEvent::info(format!(
                "{found} of {} word embeddings start from pretrained vectors",
                vocab.words.len()
            )));
        }
        let (checkpoint, state) = match checkpoint {
            Some(Checkpoint {
                weights,
                trainer,
                state,
            }) => (Some((weights, trainer)), state),
            None => (None, LoopState::new()),
        };
        check_best_epoch(&state, run)?;
        let model = match (&checkpoint, &meta.started_from, start) {
            (Some((weights, _)), _, _) => load_weights(model, weights)?,
            (None, Some(from), Some(start)) => grown_from(model, &meta.sizes, &start, &from.sizes)
                .map_err(|e| {
                    Error::model(ModelFiles::new(&from.path).weights_file(), e.to_string())
                })?,
            // Resumed before its first checkpoint: the model continued is read again.
            (None, Some(from), None) => continued(model, meta, from, &train_device)?,
            (None, None, _) => {
                let loaded = pretrained.zip(experiment.model.pretrained.as_deref());
                with_pretrained_encoder(model, loaded)?
            }
        };
        let training_constraints = experiment
            .crf
            .constrained_training
            .then(|| Constraints::for_scheme(vocab.tags.items(), meta.train_scheme));
        let fine_tuned = model.pretrained.as_ref().is_some_and(|p| !p.frozen);
        let (trainer, model) = Trainer::new(
            model,
            train_config.update_rule(),
            train_config.clip_norm,
            train_config.reduction,
            training_constraints,
        );
        let mut trainer = trainer.with_teacher_weight(experiment.distill.weight);
        if fine_tuned {
            trainer = trainer.with_encoder_update(train_config.encoder_weight_decay);
        }
        if let Some((_, files)) = checkpoint {
            // The trainer's own state replaces the word table it took from the model.
            trainer.load(&files)?;
            events(FitEvent::info(resuming(run, &state)));
        }
        let training = Self {
            trainer,
            state,
            device: train_device,
            lengths: prepared.encoded.iter().map(Encoded::len).collect(),
            singletons: singleton_words(&prepared.encoded, vocab.words.len()),
        };
        Ok((training, model))
    }

    /// Whether another epoch trains.
    fn epochs_left(&self, train_config: &TrainConfig) -> bool {
        self.state
            .trains_on(train_config.epochs, train_config.patience)
    }

    /// Trains `model` on the next epoch's batches (from where a resumed run stopped), or stops
    /// between two with a checkpoint saved when `options.interrupt` is set.
    /// Saves where an interrupted epoch stopped: after batch `batch_number`, with `loss_sum`
    /// so far, having trained since `started`.
    fn save_interrupted(
        &mut self,
        model: &Network,
        run: &ModelDir,
        (batch_number, loss_sum): (usize, f64),
        started: Instant,
    ) -> Result<()> {
        let state = &mut self.state;
        state.batches_done = batch_number + 1;
        state.epoch_loss = loss_sum;
        state.epoch_seconds += started.elapsed().as_secs_f64();
        let trained = self.trainer.with_trained_words(model);
        save_checkpoint(run, &trained, &self.trainer, state, None)
    }

    fn train_epoch(
        &mut self,
        mut model: Network,
        experiment: &Experiment,
        prepared: &Prepared,
        options: &FitOptions,
        events: &mut dyn FnMut(FitEvent),
    ) -> Result<(Network, EpochEnd)> {
        let train_config = &experiment.train;
        let state = &mut self.state;
        let epoch = state.epochs_done;
        let lr = train_config.lr / (1.0 + train_config.lr_decay * epoch as f64);
        // Batches come from the epoch's seed and every random draw of a step from the batch's,
        // so a run resumed at any batch boundary continues exactly as it would have.
        let epoch_seed = train_config.seed.wrapping_add(epoch as u64 * 1_000_003);
        let plan = BatchPlan::shuffled(&self.lengths, train_config.batch_size, epoch_seed);
        let started = Instant::now();
        let mut loss_sum = state.epoch_loss;
        check_batches_done(state, &prepared.run, plan.batches.len())?;
        let done = plan.batches[..state.batches_done]
            .iter()
            .map(Vec::len)
            .sum();
        events(FitEvent::EpochStarted {
            epoch: epoch + 1,
            epochs: train_config.epochs,
            sentences: prepared.encoded.len(),
            done,
            loss_sum,
        });
        let skip = state.batches_done;
        let batches = plan.batches.len();
        for (batch_number, indices) in plan.batches.into_iter().enumerate().skip(skip) {
            let batch_seed =
                epoch_seed ^ (batch_number as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let batch = self.batch(experiment, prepared, indices, batch_seed);
            self.trainer
                .set_encoder_lr(train_config.encoder_lr_at(epoch, batch_number, batches));
            let (trained, value) = self.trainer.step(model, &batch, lr, &self.device)?;
            model = trained;
            if !value.is_finite() {
                events(FitEvent::EpochTrained);
                let from = prepared.meta.started_from.as_ref();
                return Err(self.diverged(&prepared.run, from, value, batch_number));
            }
            let sentence_loss = summed_loss(train_config.reduction, value, &batch);
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
                self.save_interrupted(&model, &prepared.run, (batch_number, loss_sum), started)?;
                events(FitEvent::Interrupted {
                    epoch: epoch + 1,
                    batch: batch_number + 1,
                });
                return Ok((model, EpochEnd::Interrupted));
            }
        }
        events(FitEvent::EpochTrained);
        let state = &mut self.state;
        let seconds = state.epoch_seconds + started.elapsed().as_secs_f64();
        state.batches_done = 0;
        state.epoch_loss = 0.0;
        state.epoch_seconds = 0.0;
        let end = EpochEnd::Trained {
            lr,
            loss_sum,
            seconds,
        };
        Ok((model, end))
    }

    /// The error of a loss that stopped being finite at batch `batch_number` (from 0) of the
    /// current epoch, saying what of the run is kept.
    fn diverged(
        &self,
        run: &ModelDir,
        started_from: Option<&StartedFrom>,
        value: f64,
        batch_number: usize,
    ) -> Error {
        let state = &self.state;
        let kept = if state.best_epoch > 0 {
            format!(
                "the best model so far (epoch {}) is kept in {}",
                state.best_epoch,
                run.path.display()
            )
        } else {
            "no epoch had completed, so no model was saved".to_string()
        };
        let kept = match (&started_from, state.epochs_done) {
            (Some(from), 0) => format!(
                "{kept}; the model continued ({}) gave it from the start: its weights may be \
                 damaged",
                from.path.display()
            ),
            _ => kept,
        };
        Error::Diverged {
            value,
            epoch: state.epochs_done + 1,
            batch: batch_number + 1,
            kept,
        }
    }

    /// The training sentences `indices` as a batch, with the words seen once in training
    /// replaced by `<unk>` at the experiment's rate, drawn from `batch_seed`. Seeds the device
    /// for the step's dropout too.
    fn batch(
        &self,
        experiment: &Experiment,
        prepared: &Prepared,
        indices: Vec<usize>,
        batch_seed: u64,
    ) -> Batch {
        self.device.seed(batch_seed);
        let mut word_dropout = StdRng::seed_from_u64(batch_seed);
        let mut batch = Batch::new(&prepared.encoded, indices, prepared.meta.max_word_len);
        let rate = experiment.data.singleton_unk;
        if rate > 0.0 {
            for word in &mut batch.words {
                if self.singletons[*word as usize] && word_dropout.random::<f64>() < rate {
                    *word = Vocab::UNK_ID as i64;
                }
            }
        }
        let share = experiment.train.dictionary_dropout;
        if let (Some(dictionary), true) = (&prepared.dictionary, share > 0.0) {
            // Its own draws, so that word dropout draws as it did before dictionaries.
            let mut hide = StdRng::seed_from_u64(batch_seed ^ 0xD1C7_1A2B_5EED_0001);
            for row in 0..batch.size() {
                let sentence = batch.indices[row];
                let kept: Vec<Mention> = prepared.train_mentions[sentence]
                    .iter()
                    .filter(|_| !hide.random_bool(share))
                    .copied()
                    .collect();
                let places = dictionary.places(&kept, batch.lengths[row]);
                batch.set_dictionary_places(row, &places);
            }
        }
        batch
    }

    /// Records an evaluated epoch and commits it as a checkpoint (with its model and dev scores,
    /// `best`, when it is the best so far), then publishes it.
    fn commit_epoch(
        &mut self,
        run: &ModelDir,
        trained: &Network,
        metrics: EpochMetrics,
        best: Option<(&Network, &RecordedScores)>,
    ) -> Result<()> {
        let state = &mut self.state;
        if metrics.best {
            state.best_f1 = metrics.dev_f1;
            state.best_epoch = metrics.epoch;
        }
        state.history.push(metrics);
        state.epochs_done += 1;
        save_checkpoint(run, trained, &self.trainer, state, best)
    }

    /// What the run did, with the best model's `test` scores.
    fn outcome(self, test: Option<Report>, interrupted: bool) -> FitOutcome {
        FitOutcome {
            best_epoch: self.state.best_epoch,
            best_dev_f1: self.state.best_f1,
            history: self.state.history,
            test,
            interrupted,
            with_dev: None,
        }
    }
}

/// The line that says what a run trains on.
fn describe_data(
    prepared: &Prepared,
    stage: Stage,
    lengths: &[usize],
    events: &mut dyn FnMut(FitEvent),
) {
    let Prepared {
        meta,
        vocab,
        train,
        dev,
        ..
    } = prepared;
    events(FitEvent::info(format!(
        "train {}{}: {} sentences, {} tokens; dev {}: {} sentences; {} words, {} chars, {} tags ({} scheme, trained as {})",
        train.path.display(),
        if stage == Stage::Selection {
            String::new()
        } else {
            format!(" + dev {}", dev.path.display())
        },
        train.sentences.len(),
        lengths.iter().sum::<usize>(),
        dev.path.display(),
        dev.sentences.len(),
        vocab.words.len(),
        vocab.chars.len(),
        vocab.tags.len(),
        meta.file_scheme,
        meta.train_scheme
    )));
}

/// An epoch's model scored on dev, the seconds since `started` that took, and its test F1 when
/// there is a test set (only reported: the best epoch is chosen on dev). A fresh word cache, as
/// `nertrain eval` starts with.
fn evaluate_epoch(
    prepared: &Prepared,
    model: &Network,
    options: TagOptions,
    device: &Device,
    started: Instant,
) -> Result<(Report, f64, Option<f64>)> {
    let word_gates = WordGates::default();
    let decoder = Decoder::new(model, &prepared.vocab, &prepared.meta, device, &word_gates);
    let report = decoder
        .score(
            &prepared.dev,
            &prepared.dev_encoded,
            &prepared.dev_documents,
            options,
        )?
        .without(&prepared.open_labels);
    let seconds = started.elapsed().as_secs_f64();
    let test_f1 = prepared
        .test_set
        .as_ref()
        .map(|(corpus, encoded, documents)| {
            decoder
                .score(corpus, encoded, documents, options)
                .map(|report| report.without(&prepared.open_labels).f1())
        })
        .transpose()?;
    Ok((report, seconds, test_f1))
}

/// The document consistency weight of [`CONSISTENCY_WEIGHTS`] that `best` scores highest on
/// dev with, the smallest among equals (ties go to decoding sentences on their own).
fn choose_consistency(
    prepared: &Prepared,
    best: &Network,
    meta: &ModelMeta,
    decode_options: TagOptions,
    device: &Device,
) -> Result<ConsistencyChoice> {
    let word_gates = WordGates::default();
    let decoder = Decoder::new(best, &prepared.vocab, meta, device, &word_gates);
    let (dev, encoded, documents) = (
        &prepared.dev,
        &prepared.dev_encoded,
        &prepared.dev_documents,
    );
    let scores: Vec<(f64, f64)> = CONSISTENCY_WEIGHTS
        .iter()
        .map(|&weight| {
            let options = TagOptions {
                consistency: weight,
                ..decode_options
            };
            let report = decoder.score(dev, encoded, documents, options)?;
            Ok((weight, report.f1()))
        })
        .collect::<Result<_>>()?;
    let (weight, dev_f1) = scores.iter().fold(
        scores[0],
        |best, &(w, f)| {
            if f > best.1 { (w, f) } else { best }
        },
    );
    Ok(ConsistencyChoice {
        scores,
        weight,
        dev_f1,
    })
}

/// A document consistency weight chosen on dev: each weight's dev F1, the weight and its F1.
struct ConsistencyChoice {
    scores: Vec<(f64, f64)>,
    weight: f64,
    dev_f1: f64,
}

/// After the last epoch: a document-level run's consistency weight (chosen on dev among
/// [`CONSISTENCY_WEIGHTS`], or kept from the selection run when training with dev), then the
/// best model's test score, when there is a test set.
fn finish(
    prepared: &Prepared,
    mut decode_options: TagOptions,
    stage: Stage,
    device: &Device,
    events: &mut dyn FnMut(FitEvent),
) -> Result<Option<Report>> {
    let Prepared {
        run,
        vocab,
        test_set,
        ..
    } = prepared;
    let mut meta = prepared.meta.clone();
    let best = if meta.document.is_some() || test_set.is_some() {
        Some(load_weights(
            meta.model.init(&meta.sizes, device),
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
        let ConsistencyChoice {
            scores,
            weight,
            dev_f1,
        } = choose_consistency(prepared, best, &meta, decode_options, device)?;
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
    Ok(match (&test_set, &best) {
        (Some((test, encoded, documents)), Some(best)) => {
            // A cache of its own, as `nertrain eval` of the test file would start with: the
            // last bits of a word's row depend on the words it was computed with.
            let word_gates = WordGates::default();
            let report = Decoder::new(best, vocab, &meta, device, &word_gates).score(
                test,
                encoded,
                documents,
                decode_options,
            )?;
            run.write_test_scores(&RecordedScores {
                epoch: None,
                scores: report.scores(),
            })?;
            events(FitEvent::TestScored {
                path: test.path.clone(),
                report: report.clone(),
            });
            Some(report)
        }
        _ => None,
    })
}
