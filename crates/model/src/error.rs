//! The error of reading or writing a model's files, and of the files a model reads (a
//! pretrained checkpoint, the encoder's layer store): its own module, so that the model file
//! format and the encoder that the format describes both use it without depending on each other.

use std::path::PathBuf;

/// A model file that cannot be read, or is not what nertrain writes.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// A file that cannot be read.
    #[error("{}: cannot {action}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done: "read", ...
        action: &'static str,
        /// Why it failed.
        source: std::io::Error,
    },
    /// A file or directory that is not a model nertrain can read: `message` says what is wrong.
    #[error("{}: {message}", path.display())]
    Invalid {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong, and what was expected.
        message: String,
    },
}

impl FileError {
    /// `path` is not a readable model file: `message` says why.
    pub fn invalid(path: impl Into<PathBuf>, message: impl std::fmt::Display) -> Self {
        Self::Invalid {
            path: path.into(),
            message: message.to_string(),
        }
    }
}

impl From<nertrain_data::WriteError> for FileError {
    fn from(error: nertrain_data::WriteError) -> Self {
        Self::Io {
            path: error.path,
            action: error.action,
            source: error.source,
        }
    }
}
