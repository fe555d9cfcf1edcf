//! What `fit` takes and what it reports: its options, the events it emits for the caller to
//! show (it prints nothing), each epoch's metrics and the outcome of a run.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use nertrain_data::Report;
use serde::{Deserialize, Serialize, Serializer};

/// How `fit` runs: a new run, a resumed one or a replaced one, and what stops it early.
#[derive(Debug, Clone, Default)]
pub struct FitOptions {
    /// Continue the run in `train.output` from its last checkpoint.
    pub resume: bool,
    /// Replace a run in `train.output`, once the new run's data have been read and checked.
    pub overwrite: bool,
    /// When this becomes true, training stops after the current batch and saves a checkpoint
    /// that `resume` continues from (set by Ctrl-C in the CLI).
    pub interrupt: Option<Arc<AtomicBool>>,
    /// A directory that keeps a frozen encoder's layers between runs
    /// ([`LayerStore`](nertrain_model::encoder::LayerStore)): those computed before are read
    /// from it, the others computed and written to it.
    pub encoder_cache: Option<PathBuf>,
}

/// What a run reports as it goes, for the caller to show; `fit` itself prints nothing. Its serde
/// form is one object per event, `event` naming it (`info`, `epoch_ended`, ...) beside its
/// fields: what the Python module hands its callback.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum FitEvent {
    /// A line describing the data, vocabulary, vectors or the run.
    Info {
        /// The line.
        message: String,
    },
    /// Something the user should know that does not stop training.
    Warning {
        /// What.
        message: String,
    },
    /// An epoch's training begins; `done` sentences of it were trained before a resume.
    EpochStarted {
        /// The epoch, from 1.
        epoch: usize,
        /// How many the run trains at most.
        epochs: usize,
        /// Training sentences in an epoch.
        sentences: usize,
        /// Of them, trained before a resume.
        done: usize,
        /// Their summed loss.
        loss_sum: f64,
    },
    /// A batch was trained: its sentences and summed loss.
    Batch {
        /// Sentences in the batch.
        sentences: usize,
        /// Their summed loss.
        loss: f64,
    },
    /// The epoch's training is over; evaluation follows.
    EpochTrained,
    /// An epoch was evaluated and committed; `metrics.best` says whether it is the best so far.
    EpochEnded {
        /// Its line of `metrics.jsonl`.
        metrics: EpochMetrics,
    },
    /// Stopped between batches by `FitOptions::interrupt`, after saving.
    Interrupted {
        /// The epoch, from 1.
        epoch: usize,
        /// The last batch trained, from 1.
        batch: usize,
    },
    /// No better dev F1 in `patience` epochs: the run stops before its last epoch.
    EarlyStop {
        /// `train.patience`.
        patience: usize,
    },
    /// Training is over; the best model is in `weights`.
    Finished {
        /// The best epoch, from 1.
        best_epoch: usize,
        /// Its dev F1.
        best_dev_f1: f64,
        /// Where its weights are.
        weights: std::path::PathBuf,
    },
    /// A document-level model's consistency weight was chosen: dev F1 at each weight tried.
    ConsistencyChosen {
        /// `(weight, dev F1)` for each weight tried.
        scores: Vec<(f64, f64)>,
        /// The weight chosen.
        weight: f64,
        /// Its dev F1.
        dev_f1: f64,
    },
    /// The run chose `epochs`; a model is now trained on train and dev for as many, into
    /// `output`. Its dev scores are not held out.
    TrainingWithDev {
        /// Epochs it trains.
        epochs: usize,
        /// Its run directory.
        output: std::path::PathBuf,
    },
    /// The best model's scores on the test set.
    TestScored {
        /// The test file.
        path: std::path::PathBuf,
        /// conlleval's counts; serialised as their scores.
        #[serde(rename = "scores", serialize_with = "as_scores")]
        report: Report,
    },
}

impl FitEvent {
    /// An [`Info`](Self::Info) line.
    pub(crate) fn info(message: impl Into<String>) -> Self {
        Self::Info {
            message: message.into(),
        }
    }

    /// A [`Warning`](Self::Warning).
    pub(crate) fn warning(message: impl Into<String>) -> Self {
        Self::Warning {
            message: message.into(),
        }
    }
}

/// A report as its scores (precision, recall, F1 overall and per type), as `eval --json` has it.
fn as_scores<S: Serializer>(report: &Report, serializer: S) -> Result<S::Ok, S::Error> {
    report.scores().serialize(serializer)
}

/// One line of `metrics.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochMetrics {
    /// The epoch, from 1.
    pub epoch: usize,
    /// Its learning rate.
    pub lr: f64,
    /// Mean negative log-likelihood per sentence.
    pub loss: f64,
    /// Seconds its training took.
    pub train_seconds: f64,
    /// Training sentences a second.
    pub sentences_per_second: f64,
    /// Training tokens a second.
    pub tokens_per_second: f64,
    /// Dev precision, in percent.
    pub dev_precision: f64,
    /// Dev recall, in percent.
    pub dev_recall: f64,
    /// Dev span F1, in percent.
    pub dev_f1: f64,
    /// Seconds its evaluation took.
    pub eval_seconds: f64,
    /// Test span F1 of this epoch's model, when the experiment names a test set. Only reported:
    /// the best epoch is chosen on dev.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_f1: Option<f64>,
    /// Whether it is the best epoch so far.
    pub best: bool,
}

/// The outcome of a training run.
#[derive(Debug, Clone)]
pub struct FitOutcome {
    /// The best epoch, from 1 (0: none finished).
    pub best_epoch: usize,
    /// Its dev F1.
    pub best_dev_f1: f64,
    /// Every epoch's metrics.
    pub history: Vec<EpochMetrics>,
    /// The best model's test scores, when the experiment names a test set.
    pub test: Option<Report>,
    /// Stopped by `FitOptions::interrupt`; the checkpoint holds the position.
    pub interrupted: bool,
    /// With `train.with_dev`: the model trained on train and dev afterwards.
    pub with_dev: Option<Box<FitOutcome>>,
}
