//! Any file of labelled text, read in one place: what `fit` trains and scores on, `eval` scores
//! and `convert` turns into CoNLL columns. Whether a file is CoNLL columns or an annotation
//! tool's export is decided here, and an export's spans that miss word boundaries follow one
//! rule: left out, and counted in one warning; more than half of them an error, since the offsets
//! cannot then be what the tool writes.

use std::path::Path;

use nertrain_data::{ColumnSpec, Corpus, DataError, Label, Tokenizer, TokenizerSpec};

use crate::{AnnotatedCorpus, is_annotated};

/// A labelled file as read.
#[derive(Debug, Clone)]
pub enum LabelledFile {
    /// CoNLL columns, `-` where a label is unknown.
    Columns(Corpus<Label>),
    /// Text with its entities as character spans ([`crate::read_annotated`]).
    Spans(AnnotatedCorpus),
}

/// Reads `path`: an annotation tool's export when its name says so ([`is_annotated`]), else
/// CoNLL columns. Either may leave labels unknown; [`Corpus::complete`] refuses them where
/// every token must be labelled.
pub fn read_labelled(path: &Path, columns: &ColumnSpec) -> Result<LabelledFile, DataError> {
    if is_annotated(path) {
        return Ok(LabelledFile::Spans(crate::read_annotated(path)?));
    }
    Ok(LabelledFile::Columns(nertrain_data::read_partially_tagged(
        path, columns,
    )?))
}

/// Reads `path` into sentences as `fit` reads its training, dev and test files: CoNLL columns as
/// they are, an export cut into words and sentences by the treebank rules
/// ([`LabelledFile::into_sentences`]); with what reading left out, for the caller to show.
/// Whatever scores a model the way `fit` chooses its epoch reads its file here.
pub fn read_sentences(
    path: &Path,
    columns: &ColumnSpec,
) -> Result<(Corpus<Label>, Vec<String>), DataError> {
    let tokenizer = Tokenizer::new(&TokenizerSpec::treebank()).expect("the treebank rules");
    read_labelled(path, columns)?.into_sentences(&tokenizer)
}

impl LabelledFile {
    /// Its sentences of words and tags, and what reading left out, for the caller to show. An
    /// export's texts are cut into words and sentences by `tokenizer`.
    pub fn into_sentences(
        self,
        tokenizer: &Tokenizer,
    ) -> Result<(Corpus<Label>, Vec<String>), DataError> {
        let annotated = match self {
            LabelledFile::Columns(corpus) => return Ok((corpus, Vec::new())),
            LabelledFile::Spans(annotated) => annotated,
        };
        let (corpus, misaligned) = annotated.tokenize(tokenizer);
        let spans = annotated.span_count();
        // Left out, most entities would be learned as `O`: the offsets are not what they say.
        if 2 * misaligned.len() > spans {
            let first = misaligned
                .first()
                .map_or(String::new(), |m| format!("; the first: {m}"));
            return Err(DataError::file(
                &annotated.path,
                format!(
                    "{} of its {spans} spans do not start and end at word boundaries, so most \
                     entities would be learned as O; offsets must be what the tool writes \
                     (code points, or UTF-16 units for doccano; not bytes), end exclusive{first}",
                    misaligned.len()
                ),
            ));
        }
        let mut warnings = annotated.warnings;
        if let Some(first) = misaligned.first() {
            warnings.push(format!(
                "{first} ({} span{} in all)",
                misaligned.len(),
                if misaligned.len() == 1 { "" } else { "s" }
            ));
        }
        Ok((corpus, warnings))
    }
}
