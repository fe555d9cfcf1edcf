//! What annotation tools export and import, and Label Studio's protocol. No tensors.
//!
//! Reading, a file at a time:
//!
//! 1. [`Format::of`] decides which kind of file it is by its name (`.jsonl`, a `.json` array,
//!    brat's `.ann` or a directory of them); within a file each record's shape says which
//!    tool wrote it (`format.rs`).
//! 2. That tool's module reads its spans in the unit the tool counts offsets in, as code
//!    points ([`label_studio`], [`doccano`], `prodigy`, `spacy_spans`, `brat`; `units.rs`
//!    converts UTF-16 units and reads Label Studio's times). What is left out is counted, for
//!    one warning a kind (`tally.rs`).
//! 3. [`AnnotatedCorpus`] holds the texts checked alike and numbered into documents, and
//!    [`AnnotatedCorpus::tokenize`] cuts them into sentences of words and tags with the
//!    tokenizer that tags raw text.
//! 4. [`read_labelled`] decides between CoNLL columns and an export, for `fit`, `eval` and
//!    `convert`.
//!
//! Writing: the tasks `select` chooses ([`PreAnnotated`]), as Label Studio imports them
//! ([`label_studio::tasks`], under a project's own names from its labeling config) or as
//! doccano does ([`doccano::lines`]). `serve`'s Label Studio backend reads the labeling config,
//! tasks and exports, and answers predictions, through [`label_studio`] too.

#![warn(missing_docs)]

mod brat;
mod corpus;
pub mod doccano;
mod exported;
mod format;
pub mod label_studio;
mod labelled;
mod prodigy;
mod spacy_spans;
mod tally;
mod units;

pub use corpus::{
    AnnotatedCorpus, AnnotatedText, Misaligned, is_annotated, parse_annotated, read_annotated,
};
pub use format::Format;
pub use labelled::{LabelledFile, read_labelled, read_sentences};

/// An entity as character offsets into its text (owned by `nertrain-data`, beside its tokens'
/// [`Span`](nertrain_data::Span)).
pub use nertrain_data::CharSpan;

/// A text with a model's entities, to be corrected by an annotator rather than labelled from
/// nothing: what `select` writes, in a shape the tools import.
#[derive(Debug, Clone, PartialEq)]
pub struct PreAnnotated {
    /// The text.
    pub text: String,
    /// The model's entities, each with its probability.
    pub spans: Vec<(CharSpan, f64)>,
    /// The task's score: the model's certainty of it by the strategy that chose it, from 0 to
    /// 1, lowest for the texts most worth labelling (as Label Studio's uncertainty sampling
    /// takes them).
    pub score: f64,
    /// Its line in the pool, from 1, so that answers can be matched to the pool.
    pub line: usize,
    /// When only parts of it are to be decided: those regions (code points, end exclusive),
    /// shown as regions to check; empty when the whole text is.
    pub regions: Vec<(usize, usize)>,
    /// Whether, read back, only the regions and the entities are annotated (written as
    /// `known`: the rest is unknown), rather than the whole text as submitted (the model's
    /// pre-annotation taken where it was not checked).
    pub partial: bool,
}

/// What the tools' tests share: reading what a test wrote, and the spans read.
#[cfg(test)]
mod testing {
    use std::path::{Path, PathBuf};

    use nertrain_data::DataError;

    use crate::{AnnotatedCorpus, read_annotated};

    /// The spans of every text, as `(start, end, label)`, in file order.
    pub(crate) fn spans_of(corpus: &AnnotatedCorpus) -> Vec<Vec<(usize, usize, &str)>> {
        corpus
            .texts
            .iter()
            .map(|t| {
                t.spans
                    .iter()
                    .map(|s| (s.start, s.end, s.label.as_str()))
                    .collect()
            })
            .collect()
    }

    pub(crate) fn example(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../data/annotations")
            .join(name)
    }

    /// Writes `content` as `name` in a directory of the test's own and reads it.
    pub(crate) fn read_written(
        test: &str,
        name: &str,
        content: &str,
    ) -> Result<AnnotatedCorpus, DataError> {
        let dir = std::env::temp_dir().join(format!("nertrain-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), content).unwrap();
        let read = read_annotated(&dir.join(name));
        std::fs::remove_dir_all(&dir).unwrap();
        read
    }

    /// The error reading what a test wrote gives, as the user reads it.
    pub(crate) fn read_error(test: &str, name: &str, content: &str) -> String {
        read_written(test, name, content)
            .expect_err("the file is refused")
            .to_string()
    }
}
