//! `nertrain fit`: trains as an experiment file describes, showing the run's events.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nertrain_train::{Backend, Experiment, FitEvent, FitOptions};

use crate::Result;
use crate::alloc::release_freed_memory;
use crate::progress::FitReporter;
use crate::signals::stop_on_signals;

/// How `fit` was asked to run.
pub struct FitArgs<'a> {
    /// The experiment file.
    pub config: &'a Path,
    /// `--set` overrides.
    pub overrides: &'a [String],
    /// Continue the run from its last checkpoint.
    pub resume: bool,
    /// Replace a previous run.
    pub overwrite: bool,
    /// `--backend`, over `train.backend`.
    pub backend: Option<Backend>,
    /// `--start-from`, over `train.start_from`.
    pub start_from: Option<std::path::PathBuf>,
}

/// Trains; exits with 128 + the signal's number when a signal stopped the run.
pub fn run(args: FitArgs<'_>) -> Result<()> {
    let mut experiment = Experiment::load(args.config, args.overrides)?;
    if let Some(backend) = args.backend {
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
