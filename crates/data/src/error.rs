use std::fmt;
use std::path::{Path, PathBuf};

/// A problem with an input file, located as precisely as we can: file, and line when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

impl DataError {
    pub fn at(path: &Path, line: usize, message: impl Into<String>) -> Self {
        Self {
            path: path.to_path_buf(),
            line: Some(line),
            message: message.into(),
        }
    }

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
