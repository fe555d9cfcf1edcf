//! What can stop training or tagging, by kind. Every message names the file (and line, where
//! there is one) and what was expected.

use std::path::PathBuf;

use nertrain_data::DataError;

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
    /// Anything else: a model directory or checkpoint that cannot be read, a file that cannot be
    /// written, a backend that is not available.
    #[error("{0}")]
    Failed(String),
}

impl Error {
    pub(crate) fn refused(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self::Refused {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl From<String> for Error {
    fn from(message: String) -> Self {
        Self::Failed(message)
    }
}

impl From<&str> for Error {
    fn from(message: &str) -> Self {
        Self::Failed(message.to_string())
    }
}

impl From<serde_json::Error> for Error {
    fn from(error: serde_json::Error) -> Self {
        Self::Failed(error.to_string())
    }
}
