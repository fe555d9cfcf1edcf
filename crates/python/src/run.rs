//! A run directory read as `fit` wrote it, so that scripts name none of its files; and the job
//! (`FitJob`) that has `fit --job` write one, typed rather than built by hand.

use std::path::PathBuf;

use nertrain_data::job::FitJob;
use nertrain_model::RecordedScores;
use nertrain_train::{EpochMetrics, Error, Experiment, ModelDir};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde::Serialize;

use crate::{python_error, to_python};

/// What a run recorded.
#[derive(Serialize)]
struct RunRecord {
    /// The resolved experiment.
    config: Experiment,
    /// One record per epoch.
    metrics: Vec<EpochMetrics>,
    /// The best epoch's dev scores, with its number.
    dev: RecordedScores,
    /// The best model's test scores, when the experiment names a test set.
    test: Option<RecordedScores>,
}

/// A run directory's record, as `fit` wrote it: `config` (the resolved experiment, as a dict of
/// its sections), `metrics` (one dict per epoch, as `metrics.jsonl` has them), `dev` (the best
/// epoch's dev scores and its `epoch`) and `test` (the best model's test scores, or `None`).
#[pyfunction]
pub(crate) fn read_run<'py>(py: Python<'py>, run_dir: PathBuf) -> PyResult<Bound<'py, PyAny>> {
    let record = py
        .detach(|| {
            let run = ModelDir::new(&run_dir);
            let config = Experiment::load(&run.config_file(), &[]).map_err(Error::from)?;
            let files = run.files();
            let test = if files.test_scores_file().exists() {
                Some(files.read_test_scores().map_err(Error::from)?)
            } else {
                None
            };
            Ok::<_, Error>(RunRecord {
                config,
                metrics: run.read_metrics()?,
                dev: run.read_dev_scores()?,
                test,
            })
        })
        .map_err(python_error)?;
    to_python(py, &record)
}

/// Writes the job `nertrain fit --job PATH` runs (`nertrain_data::job::FitJob`): `start_from`'s
/// model continued on `train`, its epoch chosen and scored on `heldout`, into `output`, each
/// epoch appended to `events`. Its fields are checked as `fit --job` reads them; the file is
/// written whole or not at all.
#[pyfunction]
#[pyo3(signature = (path, *, start_from, train, heldout, output, epochs, events, open_labels = Vec::new(), overrides = Vec::new(), keep_checkpoint = true, rehearse_own = true))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_fit_job(
    path: PathBuf,
    start_from: PathBuf,
    train: PathBuf,
    heldout: PathBuf,
    output: PathBuf,
    epochs: usize,
    events: PathBuf,
    open_labels: Vec<String>,
    overrides: Vec<String>,
    keep_checkpoint: bool,
    rehearse_own: bool,
) -> PyResult<()> {
    if epochs == 0 {
        return Err(PyValueError::new_err("epochs: expected at least 1"));
    }
    let job = FitJob {
        start_from,
        train,
        heldout,
        output,
        epochs,
        overrides,
        open_labels,
        events,
        keep_checkpoint,
        rehearse_own,
    };
    let bytes = serde_json::to_vec_pretty(&job).expect("a job serialises");
    nertrain_data::io::write_atomic(&path, &bytes)
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(format!("{}: {e}", path.display())))
}
