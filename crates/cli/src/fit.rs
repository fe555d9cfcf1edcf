//! `nertrain fit`: trains as an experiment file describes, showing the run's events.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Args;
use nertrain_data::job::FitJob;
use nertrain_train::{Backend, Experiment, FitEvent, FitOptions, JobEnd, record_job_event};

use crate::Result;
use crate::alloc::release_freed_memory;
use crate::progress::FitReporter;
use crate::signals::stop_on_signals;

#[derive(Args)]
pub struct FitArgs {
    /// The experiment (TOML): [data], [model] and [train] sections. Without it, --start-from's
    /// own experiment is continued, its training file rehearsed when `--set data.train=...`
    /// names another and it is at hand.
    #[arg(long, required_unless_present_any = ["start_from", "job"])]
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
    /// Run a job (JSON) another program wrote: a model continued on its files into its output,
    /// each epoch and the outcome appended to its events file. The job says everything, so no
    /// other setting is taken with it.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["config", "overrides", "start_from", "resume", "overwrite"])]
    job: Option<PathBuf>,
    /// Check the settings (the file and every --set, and that this binary has the backend) and
    /// print the resolved experiment as TOML on stdout, then stop: no data is read, nothing is
    /// written. A sweep checks its keys so.
    #[arg(long, conflicts_with_all = ["job", "resume", "overwrite"])]
    check: bool,
    /// Keep a frozen encoder's layers in this directory between runs: what an earlier run of
    /// the same encoder computed over the same sentences is read, not computed again (an
    /// experiment's seeds, train.with_dev's second model, the annotation loop's rounds).
    #[arg(long, value_name = "DIR", conflicts_with = "check")]
    encoder_cache: Option<PathBuf>,
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

/// Trains; exits with 128 + the signal's number when a signal stopped the run.
pub fn run(args: FitArgs, backend: Option<Backend>) -> Result<()> {
    if args.check {
        let experiment = experiment(&args, None, backend)?;
        // A backend this binary lacks is a mistake in the settings too (no device is brought up:
        // a sweep's trials may run on other machines).
        experiment.train.backend.check_built()?;
        print!("{}", experiment.to_toml());
        return Ok(());
    }
    let job = args.job.as_deref().map(FitJob::read).transpose()?;
    let result = train(&args, job.as_ref(), backend);
    if let Some(job) = &job {
        let end = match &result {
            Ok(Some(outcome)) if !outcome.interrupted => JobEnd::Finished {
                best_epoch: outcome.best_epoch,
                best_heldout_f1: outcome.best_dev_f1,
            },
            Ok(_) => JobEnd::Stopped,
            Err(error) => JobEnd::Failed(error.to_string()),
        };
        nertrain_train::end_job(job, end)?;
    }
    let Some(outcome) = result? else {
        return Ok(());
    };
    if outcome.interrupted {
        // 128 + the signal, as a shell reports a process the signal ended.
        std::process::exit(128 + outcome.signal);
    }
    Ok(())
}

/// How a run ended: its best epoch, and whether (and by which signal) it was stopped.
struct Ended {
    best_epoch: usize,
    best_dev_f1: f64,
    interrupted: bool,
    signal: i32,
}

/// The experiment `args` or `job` describe.
fn experiment(
    args: &FitArgs,
    job: Option<&FitJob>,
    backend: Option<Backend>,
) -> Result<Experiment> {
    let mut experiment = match (job, &args.config, &args.start_from) {
        (Some(job), _, _) => Experiment::for_job(job)?,
        (None, Some(config), _) => Experiment::load(config, &args.overrides)?,
        (None, None, Some(model)) => Experiment::continuing(model, &args.overrides)?,
        (None, None, None) => unreachable!("clap requires --config without --start-from or --job"),
    };
    if let Some(backend) = backend {
        experiment.train.backend = backend;
    }
    if let Some(model) = &args.start_from {
        experiment.train.start_from = Some(model.clone());
    }
    Ok(experiment)
}

/// Trains as `args` or `job` say; `None` when stdout closed under it (the run is saved).
fn train(args: &FitArgs, job: Option<&FitJob>, backend: Option<Backend>) -> Result<Option<Ended>> {
    let experiment = experiment(args, job, backend)?;
    let device = experiment.train.backend.device()?;
    eprintln!("{}", experiment.to_toml());
    let interrupt = Arc::new(AtomicBool::new(false));
    let stopped_by = stop_on_signals(interrupt.clone())?;
    let mut reporter = FitReporter::new(interrupt.clone());
    let options = FitOptions {
        resume: args.resume,
        overwrite: args.overwrite,
        interrupt: Some(interrupt),
        encoder_cache: args.encoder_cache.clone(),
    };
    let outcome = nertrain_train::fit(&experiment, options, &device, &mut |event| {
        if matches!(event, FitEvent::EpochTrained | FitEvent::EpochEnded { .. }) {
            release_freed_memory();
        }
        if let Some(job) = job
            && let Err(message) = record_job_event(job, &event)
        {
            reporter.show(FitEvent::Warning { message });
        }
        reporter.show(event)
    })?;
    if let Some(error) = reporter.stdout_error {
        // A closed pipe (`fit | head`) ends quietly, as it does `tag`; the run is saved.
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            return Ok(None);
        }
        return Err(format!(
            "cannot write to stdout: {error}; the run stopped and was saved (continue it with \
             --resume)"
        )
        .into());
    }
    Ok(Some(Ended {
        best_epoch: outcome.best_epoch,
        best_dev_f1: outcome.best_dev_f1,
        interrupted: outcome.interrupted,
        signal: stopped_by.load(Ordering::SeqCst),
    }))
}
