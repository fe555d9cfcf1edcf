//! Continuing a trained model: its own experiment with a caller's changes, as `fit --start-from`
//! runs it and as a [`FitJob`] asks, and what the job's events file is told as the run goes.

use std::path::Path;

use nertrain_data::job::{FitJob, JobEvent};

use crate::{ConfigError, Experiment, FitEvent, ModelDir};

impl Experiment {
    /// `model`'s own experiment (its run's `config.toml`) with `overrides`, continuing it; its
    /// training file rehearsed when the overrides train on another and it is still there.
    pub fn continuing(model: &Path, overrides: &[String]) -> Result<Self, ConfigError> {
        Self::continuing_with(model, overrides, true, |_| {})
    }

    /// The experiment `job` runs: its model's own, with the job's files, epochs and overrides.
    /// The held-out file chooses the epoch and is scored as the test set; nothing is trained on
    /// it, not even after the epoch is chosen. It rehearses what its model rehearsed, or (unless
    /// [`FitJob::rehearse_own`] says no) the model's own training file.
    pub fn for_job(job: &FitJob) -> Result<Self, ConfigError> {
        Self::continuing_with(
            &job.start_from,
            &job.overrides,
            job.rehearse_own,
            |experiment| {
                experiment.data.train = job.train.clone();
                experiment.data.dev = job.heldout.clone();
                experiment.data.test = Some(job.heldout.clone());
                experiment.train.output = job.output.clone();
                experiment.train.epochs = job.epochs;
                experiment.train.with_dev = false;
                if !job.open_labels.is_empty() {
                    experiment.data.open_labels = job.open_labels.clone();
                }
            },
        )
    }

    fn continuing_with(
        model: &Path,
        overrides: &[String],
        rehearse_own: bool,
        change: impl FnOnce(&mut Self),
    ) -> Result<Self, ConfigError> {
        let config = ModelDir::new(model).config_file();
        let original = Self::load(&config, &[])?;
        let mut experiment = Self::load(&config, overrides)?;
        change(&mut experiment);
        let other_data = experiment.data.train != original.data.train;
        if other_data
            && rehearse_own
            && experiment.data.rehearse.is_none()
            && original.data.train.exists()
        {
            experiment.data.rehearse = Some(original.data.train);
        }
        experiment.train.start_from = Some(model.to_path_buf());
        Ok(experiment)
    }
}

/// What a job's events file is told of `event` in a run of at most `epochs` epochs, if
/// anything: each epoch committed. How the run ends ([`JobEvent::Done`] or
/// [`JobEvent::Error`]) [`end_job`] says, once `fit` has returned.
fn job_event(event: &FitEvent, epochs: usize) -> Option<JobEvent> {
    match event {
        FitEvent::EpochEnded { metrics } => Some(JobEvent::Epoch {
            epoch: metrics.epoch,
            epochs,
            heldout_f1: metrics.dev_f1,
            best: metrics.best,
        }),
        _ => None,
    }
}

/// Tells `job`'s events file of `event`, when it is something the file is told
/// ([`job_event`]); the message says why it could not be written (the run goes on).
pub fn record_job_event(job: &FitJob, event: &FitEvent) -> Result<(), String> {
    match job_event(event, job.epochs) {
        Some(line) => line
            .append(&job.events)
            .map_err(|e| format!("{}: {e}", job.events.display())),
        None => Ok(()),
    }
}

/// How a job's run ended, as its runner saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum JobEnd {
    /// It trained to its end: the best epoch and its held-out F1.
    Finished {
        /// The epoch whose model was kept.
        best_epoch: usize,
        /// Its held-out span F1.
        best_heldout_f1: f64,
    },
    /// A signal (or its caller closing its output) stopped it; the run is saved.
    Stopped,
    /// It failed; the message says why.
    Failed(String),
}

/// Ends `job` after its run ended as `end`: a finished run's checkpoint is removed (unless the
/// job keeps it), then the events file is told how the run ended, whatever ended it, so that
/// the job's caller always reads an end. An error when the checkpoint could not be removed (the
/// events file says so too) or the events file could not be written.
pub fn end_job(job: &FitJob, mut end: JobEnd) -> Result<(), String> {
    let mut failed = None;
    if matches!(end, JobEnd::Finished { .. })
        && !job.keep_checkpoint
        && let Err(error) = ModelDir::new(&job.output).remove_checkpoint()
    {
        end = JobEnd::Failed(error.to_string());
        failed = Some(error.to_string());
    }
    let event = match end {
        JobEnd::Finished {
            best_epoch,
            best_heldout_f1,
        } => JobEvent::Done {
            best_epoch,
            best_heldout_f1,
        },
        JobEnd::Stopped => JobEvent::Error {
            message: "stopped by a signal; the run is saved".into(),
        },
        JobEnd::Failed(message) => JobEvent::Error { message },
    };
    event
        .append(&job.events)
        .map_err(|e| format!("{}: {e}", job.events.display()))?;
    failed.map_or(Ok(()), Err)
}
