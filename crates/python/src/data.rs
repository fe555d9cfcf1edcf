//! What scripts read and score without a model, from the crates that own it: CoNLL files as
//! `fit` and `eval` read them, conlleval's entities of a tag sequence and the tags of entities, a
//! sentence's words as the
//! text it is tagged as, and entity sets scored as `eval` scores span-annotated text.

use std::path::PathBuf;

use nertrain_annotate::label_studio;
use nertrain_data::{CharSpan, ColumnSpec, Span, SpanScorer, TagScheme};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde::Serialize;

use crate::{python_error, to_python};

/// An entity as `(start, end, label)`: token indices, or code points of a text.
type EntitySpan = (usize, usize, String);

/// A sentence of a CoNLL file.
#[derive(Serialize)]
struct SentenceRecord<'a> {
    words: &'a [String],
    tags: &'a [String],
}

/// Reads a CoNLL file as `fit` and `eval` read it: a list of documents (its `-DOCSTART-`
/// blocks; one for a file without them), each a list of sentences, each a dict of `words` and
/// `tags` (from `tag_column`; negative counts from the end). An error names the file and line:
/// `FileNotFoundError` for a file that is not there, `ValueError` for one that is not CoNLL.
#[pyfunction]
#[pyo3(signature = (path, *, word_column = 0, tag_column = -1))]
pub(crate) fn read_conll<'py>(
    py: Python<'py>,
    path: PathBuf,
    word_column: isize,
    tag_column: isize,
) -> PyResult<Bound<'py, PyAny>> {
    let columns = ColumnSpec {
        word_column,
        tag_column,
        ..ColumnSpec::default()
    };
    let corpus = py
        .detach(|| nertrain_data::read_conll(&path, &columns))
        .map_err(|e| python_error(e.into()))?;
    let mut documents: Vec<Vec<SentenceRecord>> = Vec::new();
    let mut last = None;
    for sentence in &corpus.sentences {
        if last != Some(sentence.document) {
            documents.push(Vec::new());
            last = Some(sentence.document);
        }
        let record = SentenceRecord {
            words: &sentence.words,
            tags: &sentence.tags,
        };
        documents.last_mut().expect("pushed above").push(record);
    }
    to_python(py, &documents)
}

/// The entities of a sentence's tags as conlleval reads them (any of IOB1, IOB2 and IOBES,
/// leniently): `(start, end, label)` over token indices, `end` exclusive.
#[pyfunction]
pub(crate) fn entities(tags: Vec<String>) -> Vec<EntitySpan> {
    nertrain_data::spans(&tags)
        .into_iter()
        .map(|span| (span.start, span.end, span.label))
        .collect()
}

/// The tags of a sentence of `length` tokens whose entities are `entities` (`(start, end,
/// label)` over token indices, `end` exclusive, in order and not overlapping), in `scheme`
/// (`"iob2"`, `"iob1"` or `"iobes"`), as nertrain writes them; the inverse of [`entities`]. A
/// `ValueError` names an entity outside the sentence, or one that overlaps the one before it.
#[pyfunction]
#[pyo3(signature = (length, entities, scheme = "iob2"))]
pub(crate) fn tags(
    length: usize,
    entities: Vec<EntitySpan>,
    scheme: &str,
) -> PyResult<Vec<String>> {
    let scheme: TagScheme = scheme.parse().map_err(PyValueError::new_err)?;
    let mut end_before = 0;
    let mut spans = Vec::with_capacity(entities.len());
    for (i, (start, end, label)) in entities.into_iter().enumerate() {
        if start >= end || end > length {
            return Err(PyValueError::new_err(format!(
                "entities[{i}]: ({start}, {end}) is not a range of the sentence's {length} tokens"
            )));
        }
        if start < end_before {
            return Err(PyValueError::new_err(format!(
                "entities[{i}]: ({start}, {end}) starts before the entity before it ends ({end_before})"
            )));
        }
        end_before = end;
        spans.push(Span { start, end, label });
    }
    Ok(nertrain_data::render_spans(&spans, length, scheme))
}

/// A sentence made text: its words joined by single spaces, as it is tagged and annotated.
#[derive(Serialize)]
struct SentenceText {
    text: String,
    /// Each word's `(start, end)` in code points of the text.
    tokens: Vec<(usize, usize)>,
    /// The entities of its tags, in code points of the text.
    entities: Vec<EntitySpan>,
}

/// A sentence's words as the text it is tagged and annotated as (joined by single spaces): a
/// dict of the `text`, each word's `tokens` offsets `(start, end)` and its `entities` from
/// `tags` as `(start, end, label)`, all in code points of that text.
#[pyfunction]
#[pyo3(signature = (words, tags = Vec::new()))]
pub(crate) fn sentence_text<'py>(
    py: Python<'py>,
    words: Vec<String>,
    tags: Vec<String>,
) -> PyResult<Bound<'py, PyAny>> {
    if !tags.is_empty() && tags.len() != words.len() {
        return Err(PyValueError::new_err(format!(
            "tags: {} for {} words; expected one a word",
            tags.len(),
            words.len()
        )));
    }
    let (text, tokens) = nertrain_data::words_as_text(&words);
    let entities = nertrain_data::char_spans(&tokens, &tags)
        .into_iter()
        .map(|s| (s.start, s.end, s.label))
        .collect();
    let tokens = tokens.iter().map(|t| (t.start, t.end)).collect();
    to_python(
        py,
        &SentenceText {
            text,
            tokens,
            entities,
        },
    )
}

/// Scores found entities against gold ones as `eval` scores span-annotated text: each an
/// exact `(start, end, label)`, a list of them per text. The numbers `eval --json` prints
/// (overall and per label; no token accuracy, which needs tokens).
#[pyfunction]
pub(crate) fn score_entities<'py>(
    py: Python<'py>,
    gold: Vec<Vec<EntitySpan>>,
    found: Vec<Vec<EntitySpan>>,
) -> PyResult<Bound<'py, PyAny>> {
    if gold.len() != found.len() {
        return Err(PyValueError::new_err(format!(
            "{} gold texts and {} found: expected the same texts",
            gold.len(),
            found.len()
        )));
    }
    let mut scorer = SpanScorer::new();
    let keyed = |entities: &[EntitySpan]| -> Vec<(EntitySpan, String)> {
        entities.iter().map(|e| (e.clone(), e.2.clone())).collect()
    };
    for (gold, found) in gold.iter().zip(&found) {
        scorer.add_entities(&keyed(gold), &keyed(found));
    }
    to_python(py, &scorer.report().scores())
}

/// A file's lines as documents, as `tag --input` (and `Tagger.tag(lines=True)`) reads them for a
/// model that reads documents: each run of non-blank lines is one, each blank line one alone;
/// as `(start, end)` line indices, `end` exclusive.
#[pyfunction]
pub(crate) fn line_documents(lines: Vec<String>) -> Vec<(usize, usize)> {
    nertrain_tagger::line_documents(&lines)
        .into_iter()
        .map(|range| (range.start, range.end))
        .collect()
}

/// A region of `text[start:end]` (code points) labelled `label`, as an annotator submits it in
/// Label Studio under the control `from_name` on the object `to_name` (Label Studio's default
/// named-entity config by default): the dict `fit` reads in an export's results.
#[pyfunction]
#[pyo3(signature = (text, start, end, label, *, from_name = "label", to_name = "text"))]
pub(crate) fn label_studio_region<'py>(
    py: Python<'py>,
    text: &str,
    start: usize,
    end: usize,
    label: String,
    from_name: &str,
    to_name: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let length = text.chars().count();
    if start >= end || end > length {
        return Err(PyValueError::new_err(format!(
            "start {start}, end {end}: expected 0 <= start < end <= {length}, the text's length"
        )));
    }
    let span = CharSpan { start, end, label };
    to_python(
        py,
        &label_studio::Region::annotated(text, &span, from_name, to_name),
    )
}
