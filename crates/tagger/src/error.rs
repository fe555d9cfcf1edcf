//! What tagging can fail at, by kind; each message names the file, field or text and what was
//! expected.

use nertrain_data::DataError;
use nertrain_model::{CrfError, FileError};

/// Why a model could not be loaded, or texts or a gold file could not be tagged.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A gold file that cannot be read or is not what it should be.
    #[error(transparent)]
    Data(#[from] DataError),
    /// A model directory that cannot be read or is not a model nertrain wrote.
    #[error(transparent)]
    Model(#[from] FileError),
    /// A batch the CRF cannot decode (a bug, reported rather than a panic).
    #[error("the CRF: {0}")]
    Crf(#[from] CrfError),
    /// A text with more words than one text may have (text `text` of those given, from 0).
    #[error("text {}: more than {max} words; split it into smaller texts", text + 1)]
    TooManyWords {
        /// Which text, from 0.
        text: usize,
        /// The most words a text may have.
        max: usize,
    },
    /// Words without the feature columns (POS, chunk, ...) that the model reads beside them:
    /// text, which has none.
    #[error(
        "the model reads feature columns {columns:?} of its training data beside the words, \
         which text does not have: give it CoNLL lines with those columns"
    )]
    NeedsColumns {
        /// The model's feature columns, as its training data's columns.
        columns: Vec<isize>,
    },
    /// A feature column almost none of whose values the model saw in training.
    #[error("{0}")]
    UnseenFeatures(String),
    /// A decoding setting out of its range, or one the model cannot use.
    #[error("{option}: {message}")]
    InvalidOption {
        /// The setting, as callers name it (`nbest`, `consistency`, ...).
        option: &'static str,
        /// What was given and what was expected.
        message: String,
    },
    /// An entity forced on a text (an annotator's correction) that decoding cannot take: text
    /// `text` of those given, from 0, characters `start..end`.
    #[error("text {}: the entity forced at {start}..{end}: {message}", text + 1)]
    Forced {
        /// Which text, from 0.
        text: usize,
        /// Its first character, in code points.
        start: usize,
        /// One past its last.
        end: usize,
        /// What is wrong with it.
        message: String,
    },
    /// A backend this build does not have, asked for to load a model on.
    #[error(transparent)]
    Backend(#[from] nertrain_model::BackendError),
    /// The worker threads could not be started.
    #[error("cannot start the worker threads: {0}")]
    Threads(#[from] rayon::ThreadPoolBuildError),
}
