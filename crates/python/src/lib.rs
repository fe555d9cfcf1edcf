//! nertrain from Python: the `nertrain` extension module, built by maturin into an abi3 wheel.
//!
//! A thin edge over the libraries, as the `nertrain` binary is:
//!
//! - [`Tagger`] wraps `nertrain_tagger::Tagger`: `tag` returns the objects `nertrain tag --format
//!   json` prints, `info` what `nertrain serve` answers at `GET /model`.
//! - [`evaluate`] is `nertrain eval --json` (`nertrain_tagger::Tagger::evaluate_file`).
//! - [`fit`] is `nertrain fit`; its events go to an optional Python callable as dicts.
//! - [`select`] is `nertrain select`: the texts of a pool most worth labelling next.
//!
//! Records cross into Python through their serde form ([`pythonize`]), so a dict here is the JSON
//! object the CLI prints. Work runs with the GIL released, on the tagger's threads (of the caller's
//! number);
//! errors become `FileNotFoundError`, `OSError`, `ValueError` or `RuntimeError` with nertrain's
//! message.

#![warn(missing_docs)]

mod data;
mod run;

use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nertrain_model::FileError;
use nertrain_tagger::{Error as TaggingError, Layout, TagOptions};
use nertrain_train::{ConfigError, ConfigOrigin, Error, Experiment, FitOptions};
use pyo3::exceptions::{
    PyFileNotFoundError, PyOSError, PyRuntimeError, PyUserWarning, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use pythonize::pythonize;

/// A trained model loaded for tagging text. Its calls release the GIL and run one at a time, on
/// the tagger's own threads (started again in a forked process); one tagger may be shared by
/// Python threads.
#[pyclass(frozen, module = "nertrain")]
struct Tagger {
    inner: nertrain_tagger::Tagger,
    dir: PathBuf,
    /// What the weights in use hashed to when they were loaded: `copy_to` saves those or none.
    weights_sha256: String,
}

#[pymethods]
impl Tagger {
    #[new]
    #[pyo3(signature = (model_dir, threads = None, *, dictionaries = Vec::new(), replace_dictionary = false, thresholds = None, biases = None))]
    fn new(
        py: Python<'_>,
        model_dir: PathBuf,
        threads: Option<usize>,
        dictionaries: Vec<PathBuf>,
        replace_dictionary: bool,
        thresholds: Option<BTreeMap<String, f64>>,
        biases: Option<BTreeMap<String, f64>>,
    ) -> PyResult<Self> {
        let (inner, weights_sha256) = py
            .detach(|| {
                // Hashed before loading: a directory written meanwhile then fails the check on
                // saving rather than passing it. A directory that does not load says so first.
                let hashed = nertrain_model::ModelFiles::new(&model_dir).weights_sha256();
                let tagger = load(&model_dir, threads)?
                    .with_dictionaries(&dictionaries, replace_dictionary)?;
                let weights_sha256 = hashed.map_err(nertrain_tagger::Error::from)?;
                // Either given replaces what the model stores, as `tag --threshold` does.
                if thresholds.is_none() && biases.is_none() {
                    return Ok((tagger, weights_sha256));
                }
                let tagger = tagger
                    .with_thresholds(thresholds.unwrap_or_default())?
                    .with_biases(biases.unwrap_or_default())?;
                Ok((tagger, weights_sha256))
            })
            .map_err(tagging_error)?;
        Ok(Self {
            inner,
            dir: model_dir,
            weights_sha256,
        })
    }

    /// Tags each text (a document, for a model that reads documents) and returns one dict per
    /// text, as `nertrain tag --format json` prints it. With `lines`, the texts are a file's
    /// lines, read as `tag --input` reads them: for a model that reads documents, lines up to a
    /// blank one are one document. Texts are tagged a chunk at a time, as `tag --input` tags
    /// them; Ctrl-C stops the call between two.
    #[pyo3(signature = (texts, probs = false, nbest = 1, lines = false, *, all_entities = false))]
    fn tag<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<String>,
        probs: bool,
        nbest: usize,
        lines: bool,
        all_entities: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let options = TagOptions {
            marginals: probs,
            nbest,
            thresholds: !all_entities,
            ..self.inner.options()
        };
        let options = self.inner.checked(options).map_err(tagging_error)?;
        let layout = if lines { Layout::Lines } else { Layout::Texts };
        let records = py.detach(|| {
            let mut records = Vec::with_capacity(texts.len());
            let texts = texts.iter().map(|text| Ok(text.as_str()));
            for tagged in self.inner.tag_stream(texts, layout, options) {
                let tagged = tagged.map_err(tagging_error)?;
                let labels = self.inner.tags();
                records.extend(tagged.into_iter().map(|t| t.into_record(labels)));
                // On the caller's thread: Python runs signal handlers on its main thread only.
                Python::attach(|py| py.check_signals())?;
            }
            Ok::<_, PyErr>(records)
        })?;
        let list = PyList::empty(py);
        for record in &records {
            list.append(to_python(py, record)?)?;
        }
        Ok(list)
    }

    /// Each text cut into words as `tag` cuts it (the unit of `select`'s token budget): a list
    /// of `(start, end)` code points per text. A text of more words than a text may have is a
    /// `ValueError` naming it.
    fn tokenize(&self, py: Python<'_>, texts: Vec<String>) -> PyResult<Vec<Vec<(usize, usize)>>> {
        py.detach(|| {
            texts
                .iter()
                .enumerate()
                .map(|(i, text)| {
                    let tokens = self.inner.tokenize(text).ok_or_else(|| {
                        PyValueError::new_err(format!(
                            "texts[{i}]: more than {} words",
                            nertrain_tagger::MAX_TEXT_WORDS
                        ))
                    })?;
                    Ok(tokens.iter().map(|t| (t.start, t.end)).collect())
                })
                .collect()
        })
    }

    /// The entity types the model finds.
    #[getter]
    fn labels(&self) -> Vec<String> {
        nertrain_tagger::entity_types(self.inner.tags())
    }

    /// What the model is, as `nertrain serve` answers `GET /model`.
    #[getter]
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.info())
    }

    /// Whether the model reads documents rather than sentences alone.
    #[getter]
    fn reads_documents(&self) -> bool {
        self.inner.reads_documents()
    }

    /// The columns of its training data whose values the model reads beside the words: empty
    /// for a model that reads words alone, and so tags text; one that reads columns scores and
    /// tags CoNLL files only.
    #[getter]
    fn feature_columns(&self) -> Vec<isize> {
        self.inner.feature_columns().to_vec()
    }

    /// Copies the model's files (not its run's checkpoint or metrics) into `dir`, created when
    /// missing, so that `Tagger(dir)` loads the same model: what the spaCy component saves with
    /// a pipeline. A model directory written again since this tagger loaded it (other weights)
    /// is an error, and nothing is copied: the model saved is the one in use.
    fn copy_to(&self, py: Python<'_>, dir: PathBuf) -> PyResult<()> {
        let files = nertrain_model::ModelFiles::new(&self.dir);
        py.detach(|| files.copy_to(&dir, Some(&self.weights_sha256)))
            .map(drop)
            .map_err(|e| tagging_error(e.into()))
    }

    fn __repr__(&self) -> String {
        format!("nertrain.Tagger({:?})", self.dir.display().to_string())
    }
}

/// A text `select` chose: its place in the pool, its worth, its task's score (the certainty
/// of its worth, as `select`'s tasks are scored), and the model's record of it.
#[derive(serde::Serialize)]
struct SelectedRecord {
    index: usize,
    worth: f64,
    score: f64,
    /// With `regions`: the regions to decide, `(start, end)` in code points.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    regions: Vec<(usize, usize)>,
    #[serde(flatten)]
    record: nertrain_tagger::Record,
}

/// Chooses the texts of `texts` (an unlabelled pool) most worth labelling next, as
/// `nertrain select` does: a list of dicts, the best first, each the record `tag` makes of the
/// text (entities with confidences: its pre-annotation) with its `index` in the pool, its
/// `worth` by the strategy (higher first), its task's `score` (the model's certainty of it, from
/// 0 to 1, lowest first, as the task files have it) and, with `regions`, the `regions` to
/// decide.
#[pyfunction]
#[pyo3(signature = (model_dir, texts, budget, *, strategy = "margin", budget_unit = "texts", max_similarity = 0.7, diversity = 0.0, regions = None, seed = 1, threads = None, encoder_cache = None))]
#[allow(clippy::too_many_arguments)]
fn select<'py>(
    py: Python<'py>,
    model_dir: PathBuf,
    texts: Vec<String>,
    budget: usize,
    strategy: &str,
    budget_unit: &str,
    max_similarity: f64,
    diversity: f64,
    regions: Option<Bound<'py, PyAny>>,
    seed: u64,
    threads: Option<usize>,
    encoder_cache: Option<PathBuf>,
) -> PyResult<Bound<'py, PyList>> {
    // A threshold (0.99) or a rule ("budget", "budget:0.999"), as `select --regions` reads it.
    let regions: Option<nertrain_select::Regions> = regions
        .map(|r| {
            r.str()?
                .to_string()
                .parse()
                .map_err(|e| PyValueError::new_err(format!("regions: {e}")))
        })
        .transpose()?;
    let strategy: nertrain_select::Strategy = strategy
        .parse()
        .map_err(|e| PyValueError::new_err(format!("strategy: {e}")))?;
    let unit: nertrain_select::BudgetUnit = budget_unit
        .parse()
        .map_err(|e| PyValueError::new_err(format!("budget_unit: {e}")))?;
    let selection = nertrain_select::Selection {
        strategy,
        budget,
        unit,
        max_similarity,
        diversity,
        regions,
        seed,
    };
    let (chosen, problems) = py
        .detach(|| {
            let tagger = with_encoder_cache(load(&model_dir, threads)?, encoder_cache.as_deref())?;
            let chosen = nertrain_select::Selector::new(&tagger).select(&texts, &selection)?;
            let labels = tagger.tags();
            Ok::<_, TaggingError>((
                chosen
                    .into_iter()
                    .map(|s| SelectedRecord {
                        index: s.index,
                        worth: s.worth,
                        score: s.task_score(strategy),
                        regions: s.region_offsets(),
                        record: s.tagged.into_record(labels),
                    })
                    .collect::<Vec<_>>(),
                encoder_cache_problems(&tagger),
            ))
        })
        .map_err(tagging_error)?;
    for problem in &problems {
        warn(py, problem)?;
    }
    let list = PyList::empty(py);
    for record in &chosen {
        list.append(to_python(py, record)?)?;
    }
    Ok(list)
}

/// Scores a model on a gold file (CoNLL, or span-annotated `.jsonl`): the numbers
/// `nertrain eval --json` prints. Warnings about the gold data, and about the files of
/// `encoder_cache` (`eval --encoder-cache`) that could not be used, go to Python's `warnings`.
#[pyfunction]
#[pyo3(signature = (model_dir, path, *, threads = None, dictionaries = Vec::new(), replace_dictionary = false, encoder_cache = None))]
fn evaluate<'py>(
    py: Python<'py>,
    model_dir: PathBuf,
    path: PathBuf,
    threads: Option<usize>,
    dictionaries: Vec<PathBuf>,
    replace_dictionary: bool,
    encoder_cache: Option<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    let (evaluation, problems) = py
        .detach(|| {
            let tagger =
                load(&model_dir, threads)?.with_dictionaries(&dictionaries, replace_dictionary)?;
            let tagger = with_encoder_cache(tagger, encoder_cache.as_deref())?;
            // As `eval --json`: with the calibration table.
            let options = tagger.options();
            let evaluation = tagger.evaluate_file(&path, options)?;
            Ok::<_, TaggingError>((evaluation, encoder_cache_problems(&tagger)))
        })
        .map_err(tagging_error)?;
    for warning in evaluation.warnings.iter().chain(&problems) {
        warn(py, warning)?;
    }
    to_python(py, &evaluation.scores())
}

/// Trains a model as the experiment file describes (`nertrain fit`) and returns its run
/// directory. `overrides` maps `section.key` to a value, as `--set`; `progress`, when given, is
/// called with a dict for each event. Ctrl-C, or an exception raised by `progress`, stops
/// training after the current batch with a checkpoint saved (`resume=True` continues it), and is
/// raised. `start_from`, a trained model's directory, continues that model (`train.start_from`).
/// `encoder_cache`, a directory, keeps a frozen encoder's layers between runs (`fit
/// --encoder-cache`).
#[pyfunction]
#[pyo3(signature = (config, overrides = None, *, resume = false, overwrite = false, progress = None, threads = None, start_from = None, encoder_cache = None))]
#[allow(clippy::too_many_arguments)]
fn fit(
    py: Python<'_>,
    config: PathBuf,
    overrides: Option<Bound<'_, PyDict>>,
    resume: bool,
    overwrite: bool,
    progress: Option<Py<PyAny>>,
    threads: Option<usize>,
    start_from: Option<PathBuf>,
    encoder_cache: Option<PathBuf>,
) -> PyResult<PathBuf> {
    let overrides = match overrides {
        Some(dict) => override_items(&dict)?,
        None => Vec::new(),
    };
    let mut experiment =
        Experiment::load(&config, &overrides).map_err(|e| python_error(e.into()))?;
    if let Some(model) = start_from {
        experiment.train.start_from = Some(model);
    }
    let device = (experiment.train.backend.device()).map_err(|e| python_error(e.into()))?;
    let pool = thread_pool(threads)?;
    let interrupt = Arc::new(AtomicBool::new(false));
    let mut raised: Option<PyErr> = None;
    let options = FitOptions {
        resume,
        overwrite,
        interrupt: Some(interrupt.clone()),
        encoder_cache,
    };
    let outcome = py.detach(|| {
        pool.install(|| {
            nertrain_train::fit(&experiment, options, &device, &mut |event| {
                if raised.is_some() {
                    return;
                }
                let delivered = Python::attach(|py| {
                    py.check_signals()?;
                    match &progress {
                        Some(callback) => callback.call1(py, (to_python(py, &event)?,)).map(drop),
                        None => Ok(()),
                    }
                });
                if let Err(error) = delivered {
                    raised = Some(error);
                    interrupt.store(true, Ordering::SeqCst);
                }
            })
        })
    });
    if let Some(error) = raised {
        return Err(error);
    }
    outcome.map_err(python_error)?;
    Ok(experiment.train.output.clone())
}

/// `section.key=value` items from a dict, each value written as TOML.
fn override_items(dict: &Bound<'_, PyDict>) -> PyResult<Vec<String>> {
    dict.iter()
        .map(|(key, value)| {
            let key: String = key.extract()?;
            let value: toml::Value = pythonize::depythonize(&value).map_err(|e| {
                PyValueError::new_err(format!("overrides[{key:?}]: not a TOML value: {e}"))
            })?;
            Ok(format!("{key}={value}"))
        })
        .collect()
}

/// Training's pool of `threads` (by default, `RAYON_NUM_THREADS` or one per core).
fn thread_pool(threads: Option<usize>) -> PyResult<rayon::ThreadPool> {
    nertrain_tagger::thread_pool(threads).map_err(tagging_error)
}

/// The model in `model_dir`, to tag on `threads` threads.
fn load(model_dir: &Path, threads: Option<usize>) -> Result<nertrain_tagger::Tagger, TaggingError> {
    nertrain_tagger::Tagger::load_with_threads(model_dir, &device()?, threads)
}

/// `tagger` keeping its frozen encoder's layers under `root`, when given (on the CPU backend
/// every call runs on).
fn with_encoder_cache(
    tagger: nertrain_tagger::Tagger,
    root: Option<&Path>,
) -> Result<nertrain_tagger::Tagger, TaggingError> {
    match root {
        Some(root) => Ok(tagger.with_encoder_cache(root, nertrain_model::Backend::default())?),
        None => Ok(tagger),
    }
}

/// The store files `tagger` could not read or write, and why a store it was given is not used,
/// for Python's `warnings`.
fn encoder_cache_problems(tagger: &nertrain_tagger::Tagger) -> Vec<String> {
    let note = tagger.encoder_cache_note().map(str::to_string);
    let tally = tagger.encoder_cache_tally();
    note.into_iter()
        .chain(tally.into_iter().flat_map(|(_, tally)| tally.problems))
        .collect()
}

/// The CPU device every call runs on.
fn device() -> Result<burn::tensor::Device, TaggingError> {
    Ok(nertrain_model::Backend::default().device()?)
}

fn to_python<'py, T: serde::Serialize>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyAny>> {
    pythonize(py, value).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

fn warn(py: Python<'_>, message: &str) -> PyResult<()> {
    let message = CString::new(message.replace('\0', " "))
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    PyErr::warn(py, &py.get_type::<PyUserWarning>(), &message, 1)
}

/// A tagging call's error as the Python exception that fits it, as [`python_error`] classifies
/// training's: a file that is not there is `FileNotFoundError`, other I/O `OSError`, bad input or
/// settings `ValueError`, the rest `RuntimeError`.
fn tagging_error(error: TaggingError) -> PyErr {
    let message = error.to_string();
    match error {
        TaggingError::Model(FileError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            PyFileNotFoundError::new_err(message)
        }
        TaggingError::Model(FileError::Io { .. }) => PyOSError::new_err(message),
        TaggingError::Model(FileError::Invalid { path, .. }) if !path.exists() => {
            PyFileNotFoundError::new_err(message)
        }
        TaggingError::Data(e) if !e.path.exists() => PyFileNotFoundError::new_err(message),
        TaggingError::Data(_)
        | TaggingError::Model(_)
        | TaggingError::TooManyWords { .. }
        | TaggingError::NeedsColumns { .. }
        | TaggingError::UnseenFeatures(_)
        | TaggingError::Forced { .. }
        | TaggingError::InvalidOption { .. } => PyValueError::new_err(message),
        TaggingError::Crf(_) | TaggingError::Backend(_) | TaggingError::Threads(_) => {
            PyRuntimeError::new_err(message)
        }
    }
}

/// nertrain's error as the Python exception that fits it, with nertrain's message: a file that
/// is not there is `FileNotFoundError`, other I/O `OSError`, bad input or settings `ValueError`,
/// a failed run `RuntimeError`.
fn python_error(error: Error) -> PyErr {
    let message = error.to_string();
    let missing = |path: &Path| !path.exists();
    let not_found = match &error {
        Error::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
        Error::Data(e) => missing(&e.path),
        Error::Config(ConfigError {
            origin: ConfigOrigin::File {
                path: Some(path), ..
            },
            ..
        }) => missing(path),
        Error::Refused { path, .. } | Error::Model { path, .. } => missing(path),
        _ => false,
    };
    if not_found {
        return PyFileNotFoundError::new_err(message);
    }
    match error {
        Error::Io { .. } => PyOSError::new_err(message),
        Error::Data(_)
        | Error::Config(_)
        | Error::Refused { .. }
        | Error::Model { .. }
        | Error::Tagging(
            nertrain_tagger::Error::TooManyWords { .. }
            | nertrain_tagger::Error::InvalidOption { .. },
        ) => PyValueError::new_err(message),
        Error::Diverged { .. }
        | Error::Crf(_)
        | Error::Json(_)
        | Error::Backend(_)
        | Error::Tagging(_) => PyRuntimeError::new_err(message),
    }
}

/// The `nertrain` module.
#[pymodule]
fn nertrain(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    module.add_class::<Tagger>()?;
    module.add_function(wrap_pyfunction!(evaluate, module)?)?;
    module.add_function(wrap_pyfunction!(fit, module)?)?;
    module.add_function(wrap_pyfunction!(select, module)?)?;
    module.add_function(wrap_pyfunction!(data::read_conll, module)?)?;
    module.add_function(wrap_pyfunction!(data::entities, module)?)?;
    module.add_function(wrap_pyfunction!(data::tags, module)?)?;
    module.add_function(wrap_pyfunction!(data::sentence_text, module)?)?;
    module.add_function(wrap_pyfunction!(data::score_entities, module)?)?;
    module.add_function(wrap_pyfunction!(data::line_documents, module)?)?;
    module.add_function(wrap_pyfunction!(data::label_studio_region, module)?)?;
    module.add_function(wrap_pyfunction!(run::read_run, module)?)?;
    module.add_function(wrap_pyfunction!(run::write_fit_job, module)?)?;
    Ok(())
}
