//! Why a training made no version: each step's own failures.

use std::path::{Path, PathBuf};

use crate::client::ClientError;

/// Why a training made no version: each step's own failures.
#[derive(Debug)]
pub(crate) enum LearnError {
    /// No Label Studio address and key, from the environment or `/setup`.
    NoConnection,
    /// Label Studio could not be asked, or answered with an error.
    Fetch(ClientError),
    /// The project's labeling config has no entity control on a text.
    Config {
        /// The project.
        project: u64,
        /// What the config lacks.
        message: String,
    },
    /// The export is not what Label Studio writes.
    Export(String),
    /// Too few annotated tasks to train on and to judge on.
    TooFew {
        /// Annotated tasks.
        tasks: usize,
        /// Of them, held out.
        heldout: usize,
        /// The share held out, in percent.
        percent: u64,
    },
    /// A file of the version could not be written or read.
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// `nertrain` (`fit` or `eval`) could not run, or failed.
    Child {
        /// The version.
        version: String,
        /// What failed, and the end of its log.
        message: String,
    },
    /// The server stopped it.
    Stopped {
        /// The version.
        version: String,
    },
    /// The version trained cannot be loaded to be served.
    Load(String),
}

impl std::fmt::Display for LearnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoConnection => write!(
                f,
                "no Label Studio to fetch annotations from: set LABEL_STUDIO_URL and \
                 LABEL_STUDIO_API_KEY, or connect the model in Label Studio (its setup gives them)"
            ),
            Self::Fetch(error) => error.fmt(f),
            Self::Load(message) => f.write_str(message),
            Self::Config { project, message } => {
                write!(f, "project {project}'s labeling config: {message}")
            }
            Self::Export(message) => write!(f, "Label Studio's export: {message}"),
            Self::TooFew {
                tasks,
                heldout,
                percent,
            } if *percent == 0 => write!(
                f,
                "{tasks} annotated tasks: a version needs tasks to train on; annotate some"
            ),
            Self::TooFew {
                tasks,
                heldout,
                percent,
            } => write!(
                f,
                "{tasks} annotated tasks, {heldout} of them held out: a version needs tasks to \
                 train on and held-out tasks to be judged on (about {percent}% of tasks, chosen \
                 by id, are held out); annotate more"
            ),
            Self::File { path, message } => write!(f, "{}: {message}", path.display()),
            Self::Child { version, message } => write!(f, "training {version} {message}"),
            Self::Stopped { version } => {
                write!(f, "training {version} was stopped; it is not served")
            }
        }
    }
}

/// A [`LearnError::File`] of `path`.
pub(crate) fn file_error<E: std::fmt::Display>(path: &Path) -> impl Fn(E) -> LearnError + '_ {
    move |e| LearnError::File {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}
