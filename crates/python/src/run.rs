//! A run directory read as `fit` wrote it, so that scripts name none of its files.

use std::path::PathBuf;

use nertrain_model::RecordedScores;
use nertrain_train::{EpochMetrics, Error, Experiment, ModelDir};
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
