//! What can stop training or tagging, by kind. Every message names the file (and line, where
//! there is one) and what was expected.

use std::path::PathBuf;

use nertrain_data::DataError;
use nertrain_model::CrfError;

use crate::config::ConfigError;

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
    Refused { path: PathBuf, message: String },
    /// The loss stopped being finite; the best model so far stays.
    #[error("the loss became {value} in epoch {epoch} at batch {batch}; {kept}")]
    Diverged {
        value: f64,
        epoch: usize,
        batch: usize,
        kept: String,
    },
    /// A file or directory that cannot be read, written, created or deleted.
    #[error("{}: cannot {action}: {source}", path.display())]
    Io {
        path: PathBuf,
        action: &'static str,
        source: std::io::Error,
    },
    /// A model directory, checkpoint or state file that is not what nertrain wrote, or not for
    /// this experiment.
    #[error("{}: {message}", path.display())]
    Model { path: PathBuf, message: String },
    /// A batch the CRF cannot score (a bug, reported rather than a panic).
    #[error("the CRF: {0}")]
    Crf(#[from] CrfError),
    /// A value that would not serialise to JSON.
    #[error("cannot write JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A backend this build or machine does not have.
    #[error("{0}")]
    Backend(String),
    /// A text with more words than one text may have (text `text` of those given, from 0).
    #[error("text {}: more than {max} words; split it into smaller texts", text + 1)]
    TooManyWords { text: usize, max: usize },
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
