//! A text as a tool's file gave it, before it is checked: what every tool's reader makes and
//! [`crate::AnnotatedCorpus`] checks. A leaf: the readers and the corpus both use it.

use std::path::PathBuf;

use serde::Deserialize;

use crate::CharSpan;

/// One text as its file gave it, before it is checked.
pub(crate) struct Exported {
    pub(crate) text: String,
    pub(crate) spans: Vec<CharSpan>,
    /// Where in `source` it is, from 1.
    pub(crate) line: usize,
    pub(crate) source: PathBuf,
    pub(crate) doc: Option<DocumentKey>,
    /// The regions annotated in full, where the line says only part of it is (`None`: all).
    pub(crate) known: Option<Vec<(usize, usize)>>,
}

/// A line's `doc` key.
#[derive(Clone, Deserialize, PartialEq, Eq, Hash)]
#[serde(untagged)]
pub(crate) enum DocumentKey {
    Text(String),
    Number(i64),
}
