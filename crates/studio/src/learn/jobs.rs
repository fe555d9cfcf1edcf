//! The child processes: a training (`nertrain fit --job`) and a scoring (`nertrain eval --job`)
//! of their own, run, watched and read back.

use std::path::Path;

use nertrain_data::Scores;
use nertrain_data::job::{FitJob, JobEvent, ScoreJob};
use nertrain_model::ModelFiles;
use serde::Serialize;

use crate::error::{LearnError, file_error};

use super::Shared;
use super::stage::Staged;

/// Train: the served model continued on the staged tasks into `output` (`nertrain fit --job`,
/// in a process of its own), each epoch read from the job's events as it is written. The labels
/// the project lacks stay open where its annotations say `O`, and the version keeps no
/// checkpoint.
pub(super) fn train(
    shared: &Shared,
    name: &str,
    staged: &Staged,
    from: &Path,
    output: &Path,
    set_progress: impl Fn(usize),
) -> Result<(), LearnError> {
    let epochs = shared.settings.epochs;
    let job = FitJob {
        start_from: from.to_path_buf(),
        train: staged.train.clone(),
        // The held-out tasks (or the dev file) choose the epoch and judge the version; they are
        // never trained on.
        heldout: staged.heldout.clone(),
        output: output.to_path_buf(),
        epochs,
        overrides: Vec::new(),
        open_labels: staged.open_labels.clone(),
        events: staged.dir.join("events.jsonl"),
        keep_checkpoint: false,
        // A version was trained on tasks this export holds again; only the model the server
        // started from has a training file of its own to rehearse.
        rehearse_own: from == shared.settings.base_model,
    };
    let job_file = staged.dir.join("job.json");
    write_job(&job_file, &job)?;
    let log_file = staged.dir.join("fit.log");
    let mut fit = shared.trainer(&log_file)?;
    fit.arg("fit").arg("--job").arg(&job_file);
    let epoch_done = || {
        JobEvent::read_all(&job.events)
            .unwrap_or_default()
            .iter()
            .filter_map(|event| match event {
                JobEvent::Epoch { epoch, .. } => Some(*epoch),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    };
    shared.run_child(fit, name, &log_file, || {
        set_progress((epoch_done() + 1).min(epochs));
    })?;
    let events = JobEvent::read_all(&job.events).map_err(|message| LearnError::File {
        path: job.events.clone(),
        message,
    })?;
    match events.last() {
        Some(JobEvent::Done { .. }) => Ok(()),
        Some(JobEvent::Error { message }) => Err(LearnError::Child {
            version: name.to_string(),
            message: format!("failed: {message}"),
        }),
        _ => Err(LearnError::Child {
            version: name.to_string(),
            message: format!("ended without saying how ({})", job.events.display()),
        }),
    }
}

/// A model's scores on the held-out texts, read and scored as `fit` chose the new version's
/// epoch, open labels left out: a [`ScoreJob`] that `nertrain eval --job` runs in a process of
/// its own (so that scoring takes no turn from the served model's requests), its scores written
/// to `DIR/data/vN/{scores}.json`.
pub(super) fn score(
    shared: &Shared,
    name: &str,
    staged: &Staged,
    model: &Path,
    scores: &str,
) -> Result<Scores, LearnError> {
    let job = ScoreJob {
        model: model.to_path_buf(),
        data: staged.heldout.clone(),
        dictionaries: shared.settings.dictionaries.clone(),
        replace_dictionary: shared.settings.replace_dictionary,
        open_labels: staged.open_labels.clone(),
        scores: staged.dir.join(format!("{scores}.json")),
    };
    let job_file = staged.dir.join(format!("{scores}.job.json"));
    write_job(&job_file, &job)?;
    let log_file = staged.dir.join("fit.log");
    let mut eval = shared.trainer(&log_file)?;
    eval.arg("eval").arg("--job").arg(&job_file);
    shared.run_child(eval, name, &log_file, || {})?;
    read_scores(&job.scores, &staged.heldout)
}

/// The new version's scores on the held-out texts: those its training recorded for the model
/// it kept (the held-out texts are its test file), so that it is scored once, as its epoch was
/// chosen; scored again only to tag with the server's dictionaries, which training did not.
pub(super) fn new_version_scores(
    shared: &Shared,
    name: &str,
    staged: &Staged,
    output: &Path,
) -> Result<Scores, LearnError> {
    if !shared.settings.dictionaries.is_empty() {
        return score(shared, name, staged, output, "heldout-new");
    }
    let files = ModelFiles::new(output);
    files
        .read_test_scores()
        .map(|recorded| recorded.scores)
        .map_err(|e| LearnError::File {
            path: files.test_scores_file(),
            message: e.to_string(),
        })
}

/// A job written whole for a child to read.
pub(super) fn write_job(path: &Path, job: &impl Serialize) -> Result<(), LearnError> {
    let bytes = serde_json::to_vec_pretty(job).expect("a job serialises");
    nertrain_data::io::write_atomic(path, &bytes).map_err(file_error(path))
}

/// Scores a [`ScoreJob`] wrote, of `heldout`.
pub(super) fn read_scores(path: &Path, heldout: &Path) -> Result<Scores, LearnError> {
    std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
        .map_err(|message| LearnError::File {
            path: path.to_path_buf(),
            message: format!("scoring {}: {message}", heldout.display()),
        })
}
