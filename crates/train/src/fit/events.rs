//! What `fit` takes and what it reports: its options, the events it emits for the caller to
//! show (it prints nothing), each epoch's metrics and the outcome of a run.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use nertrain_data::Report;
use serde::{Deserialize, Serialize};

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
