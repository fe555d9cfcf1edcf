use std::fmt;
use std::path::{Path, PathBuf};

/// A problem with an input file, located as precisely as we can: file, and line when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataError {
    /// The file.
    pub path: PathBuf,
    /// The line, from 1, when the problem is at one.
    pub line: Option<usize>,
    /// What is wrong, and what was expected.
    pub message: String,
}

impl DataError {
    /// A problem at `line` of `path`.
    pub fn at(path: &Path, line: usize, message: impl Into<String>) -> Self {
        Self {
            path: path.to_path_buf(),
            line: Some(line),
            message: message.into(),
        }
    }

    /// A problem with `path` as a whole.
    pub fn file(path: &Path, message: impl Into<String>) -> Self {
        Self {
            path: path.to_path_buf(),
            line: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for DataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.path.display(), line, self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

impl std::error::Error for DataError {}
