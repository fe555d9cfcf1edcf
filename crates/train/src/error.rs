//! What can stop training, by kind. Every message names the file (and line, where there is one)
//! and what was expected.

use std::path::PathBuf;

use nertrain_data::DataError;
use nertrain_model::{CrfError, FileError};

use crate::config::ConfigError;

/// Why a run could not start, continue or finish.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An input file that cannot be read or is not what it should be.
    #[error(transparent)]
    Data(#[from] DataError),
    /// The experiment file, or a `--set` override of it.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The run directory refuses what was asked: not a run, a run already there, nothing to
    /// resume. Nothing in it was changed.
    #[error("{}: {message}", path.display())]
    Refused {
        /// The run directory, or the file in it.
        path: PathBuf,
        /// Why, and what to do instead.
        message: String,
    },
    /// The loss stopped being finite; the best model so far stays.
    #[error("the loss became {value} in epoch {epoch} at batch {batch}; {kept}")]
    Diverged {
        /// The loss's value.
        value: f64,
        /// The epoch, from 1.
        epoch: usize,
        /// The batch of the epoch, from 1.
        batch: usize,
        /// What of the run is kept.
        kept: String,
    },
    /// A file or directory that cannot be read, written, created or deleted.
    #[error("{}: cannot {action}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done: "read", "write", ...
        action: &'static str,
        /// Why it failed.
        source: std::io::Error,
    },
    /// A model directory, checkpoint or state file that is not what nertrain wrote, or not for
    /// this experiment.
    #[error("{}: {message}", path.display())]
    Model {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong, and what was expected.
        message: String,
    },
    /// A batch the CRF cannot score (a bug, reported rather than a panic).
    #[error("the CRF: {0}")]
    Crf(#[from] CrfError),
    /// A value that would not serialise to JSON.
    #[error("cannot write JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A backend this build or machine does not have.
    #[error("{0}")]
    Backend(String),
    /// Scoring the dev or test set failed in the inference core.
    #[error(transparent)]
    Tagging(nertrain_tagger::Error),
}

impl From<nertrain_model::BackendError> for Error {
    fn from(error: nertrain_model::BackendError) -> Self {
        Self::Backend(error.0)
    }
}

impl From<nertrain_data::WriteError> for Error {
    fn from(error: nertrain_data::WriteError) -> Self {
        Self::Io {
            path: error.path,
            action: error.action,
            source: error.source,
        }
    }
}

impl From<FileError> for Error {
    fn from(error: FileError) -> Self {
        match error {
            FileError::Io {
                path,
                action,
                source,
            } => Self::Io {
                path,
                action,
                source,
            },
            FileError::Invalid { path, message } => Self::Model { path, message },
        }
    }
}

impl From<nertrain_tagger::Error> for Error {
    /// The kinds training has too are its own: a model file, a data file, the CRF.
    fn from(error: nertrain_tagger::Error) -> Self {
        match error {
            nertrain_tagger::Error::Model(e) => e.into(),
            nertrain_tagger::Error::Data(e) => Self::Data(e),
            nertrain_tagger::Error::Crf(e) => Self::Crf(e),
            nertrain_tagger::Error::Backend(e) => e.into(),
            other => Self::Tagging(other),
        }
    }
}

impl Error {
    pub(crate) fn refused(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self::Refused {
            path: path.into(),
            message: message.into(),
        }
    }

    /// `source` while trying to `action` ("read", "write", …) `path`.
    pub(crate) fn io(
        path: impl Into<PathBuf>,
        action: &'static str,
        source: std::io::Error,
    ) -> Self {
        Self::Io {
            path: path.into(),
            action,
            source,
        }
    }

    /// `path` is not a readable model, checkpoint or state: `message` says what is wrong.
    pub(crate) fn model(path: impl Into<PathBuf>, message: impl std::fmt::Display) -> Self {
        Self::Model {
            path: path.into(),
            message: message.to_string(),
        }
    }
}
