//! A run's progress on disk, as the training loop sees it: the loop state a checkpoint holds,
//! reopening a run to resume it (refusing an experiment that changed), and committing and
//! publishing an epoch. The files themselves are `ModelDir`'s.

use nertrain_data::Vocabularies;
use nertrain_model::{ModelMeta, Network, RecordedScores};
use serde::{Deserialize, Serialize};

use super::events::{EpochMetrics, FitEvent};
use crate::model_dir::{ModelDir, TrainerFiles};
use crate::step::Trainer;
use crate::{Error, Experiment, Result};

/// What `checkpoint/state.json` holds besides the weights and optimiser state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct LoopState {
    pub(super) epochs_done: usize,
    pub(super) best_f1: f64,
    pub(super) best_epoch: usize,
    pub(super) history: Vec<EpochMetrics>,
    /// Progress inside the current epoch when the run was interrupted between batches.
    pub(super) batches_done: usize,
    pub(super) epoch_loss: f64,
    pub(super) epoch_seconds: f64,
}

impl LoopState {
    /// A run before its first epoch.
    pub(super) fn new() -> Self {
        Self {
            epochs_done: 0,
            best_f1: -1.0,
            best_epoch: 0,
            history: Vec::new(),
            batches_done: 0,
            epoch_loss: 0.0,
            epoch_seconds: 0.0,
        }
    }

    /// Whether another epoch trains: fewer than `epochs` are done, and the best is one of the
    /// last `patience` (or none has trained yet).
    pub(super) fn trains_on(&self, epochs: usize, patience: usize) -> bool {
        self.epochs_done < epochs
            && (self.epochs_done == 0 || self.epochs_done - self.best_epoch < patience)
    }
}

/// Where a run resumes from: a checkpoint's training weights, trainer state and loop state.
#[derive(Debug, Clone)]
pub(super) struct Checkpoint {
    pub(super) weights: std::path::PathBuf,
    pub(super) trainer: TrainerFiles,
    pub(super) state: LoopState,
}

/// Reads back a run to resume: its description, vocabularies and loop state (none when it
/// stopped before its first epoch ended, and starts over). The last committed epoch is published
/// again, which completes one that a crash interrupted.
pub(super) fn reopen_run(
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
            events(FitEvent::info(format!(
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

/// Commits the loop's state as a checkpoint, with the best model and its dev scores when this
/// epoch is the best, and publishes it.
pub(super) fn save_checkpoint(
    run: &ModelDir,
    model: &Network,
    trainer: &Trainer,
    state: &LoopState,
    best: Option<(&Network, &RecordedScores)>,
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
pub(super) fn publish(run: &ModelDir, state: &LoopState) -> Result<()> {
    let lines: String = state
        .history
        .iter()
        .map(|m| serde_json::to_string(m).map(|l| l + "\n"))
        .collect::<std::result::Result<_, _>>()?;
    run.publish(&lines, &crate::curves::render(&state.history))
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

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
