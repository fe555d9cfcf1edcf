//! Continuing a trained model: its own experiment with a caller's changes, as `fit --start-from`
//! runs it and as a [`FitJob`] asks, and what the job's events file is told as the run goes.

use std::path::Path;

use nertrain_model::job::{FitJob, JobEvent};

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
/// [`JobEvent::Error`]) its caller says, once `fit` has returned.
pub fn job_event(event: &FitEvent, epochs: usize) -> Option<JobEvent> {
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
