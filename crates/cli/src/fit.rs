//! `nertrain fit`: trains as an experiment file describes, showing the run's events.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Args;
use nertrain_train::{Backend, Experiment, FitEvent, FitOptions, ModelDir};

use crate::Result;
use crate::alloc::release_freed_memory;
use crate::progress::FitReporter;
use crate::signals::stop_on_signals;

#[derive(Args)]
pub struct FitArgs {
    /// The experiment (TOML): [data], [model] and [train] sections. Without it, --start-from's
    /// own experiment is continued, its training file rehearsed when `--set data.train=...`
    /// names another and it is at hand.
    #[arg(long, required_unless_present = "start_from")]
    config: Option<PathBuf>,
    /// Override a setting: `--set train.lr=0.01 --set model.hidden=200`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// Continue the run in train.output from its last completed epoch.
    #[arg(long, conflicts_with = "overwrite")]
    resume: bool,
    /// Replace a previous run in train.output, once the new run's data have been read and
    /// checked. Only a run's own files are deleted.
    #[arg(long)]
    overwrite: bool,
    /// Start from this trained model's weights (a run directory) instead of fresh ones, as
    /// `train.start_from`: its words and tags are kept, the training data's new ones added.
    #[arg(long, value_name = "MODEL")]
    start_from: Option<PathBuf>,
}

/// Whether `error` is a mistake in the experiment's settings that the command line made (a
/// `--set` override): a usage error.
pub fn is_usage(error: &(dyn std::error::Error + 'static)) -> bool {
    let config = match error.downcast_ref::<nertrain_train::Error>() {
        Some(nertrain_train::Error::Config(config)) => Some(config),
        _ => error.downcast_ref::<nertrain_train::ConfigError>(),
    };
    config.is_some_and(|c| c.is_usage())
}

/// `model`'s own experiment with `overrides`, its training file rehearsed when the overrides
/// train on another and it is still there.
fn continued(model: &std::path::Path, overrides: &[String]) -> Result<Experiment> {
    let config = ModelDir::new(model).config_file();
    let original = Experiment::load(&config, &[])?;
    let mut experiment = Experiment::load(&config, overrides)?;
    let other_data = experiment.data.train != original.data.train;
    if other_data && experiment.data.rehearse.is_none() && original.data.train.exists() {
        experiment.data.rehearse = Some(original.data.train);
    }
    Ok(experiment)
}

/// Trains; exits with 128 + the signal's number when a signal stopped the run.
pub fn run(args: FitArgs, backend: Option<Backend>) -> Result<()> {
    let mut experiment = match (&args.config, &args.start_from) {
        (Some(config), _) => Experiment::load(config, &args.overrides)?,
        (None, Some(model)) => continued(model, &args.overrides)?,
        (None, None) => unreachable!("clap requires --config without --start-from"),
    };
    if let Some(backend) = backend {
        experiment.train.backend = backend;
    }
    if let Some(model) = args.start_from {
        experiment.train.start_from = Some(model);
    }
    let device = experiment.train.backend.device()?;
    eprintln!("{}", experiment.to_toml());
    let interrupt = Arc::new(AtomicBool::new(false));
    let stopped_by = stop_on_signals(interrupt.clone())?;
    let mut reporter = FitReporter::new(interrupt.clone());
    let options = FitOptions {
        resume: args.resume,
        overwrite: args.overwrite,
        interrupt: Some(interrupt),
    };
    let outcome = nertrain_train::fit(&experiment, options, &device, &mut |event| {
        if matches!(event, FitEvent::EpochTrained | FitEvent::EpochEnded { .. }) {
            release_freed_memory();
        }
        reporter.show(event)
    })?;
    if let Some(error) = reporter.stdout_error {
        // A closed pipe (`fit | head`) ends quietly, as it does `tag`; the run is saved.
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            return Ok(());
        }
        return Err(format!(
            "cannot write to stdout: {error}; the run stopped and was saved (continue it with \
             --resume)"
        )
        .into());
    }
    if outcome.interrupted {
        // 128 + the signal, as a shell reports a process the signal ended.
        std::process::exit(128 + stopped_by.load(Ordering::SeqCst));
    }
    Ok(())
}
