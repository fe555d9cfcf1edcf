//! CoNLL column files: one token per line, columns separated by spaces or TABs, sentences separated
//! by blank lines, `-DOCSTART-` lines marking documents.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::label::{Allowed, Label, TagColumn, known_tags};
use crate::{CharSpan, DataError, Token, spans};

pub(crate) const DOCSTART: &str = "-DOCSTART-";

/// Which columns hold the word, the tag and the feature values (POS, chunk, any categorical
/// column). Negative indices count from the end, so the default (`0`, `-1`, no features) reads
/// the first and the last column whatever the file's width.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnSpec {
    /// The words' column; negative counts from the end.
    pub word_column: isize,
    /// The tags' column; negative counts from the end (-1: the last).
    pub tag_column: isize,
    /// The feature columns, in the order of [`Sentence::features`]; negative counts from the end.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feature_columns: Vec<isize>,
}

impl Default for ColumnSpec {
    fn default() -> Self {
        Self {
            word_column: 0,
            tag_column: -1,
            feature_columns: Vec::new(),
        }
    }
}

impl ColumnSpec {
    pub(crate) fn resolve(index: isize, width: usize) -> Option<usize> {
        let resolved = if index < 0 {
            width as isize + index
        } else {
            index
        };
        (0..width as isize)
            .contains(&resolved)
            .then_some(resolved as usize)
    }
}

/// One sentence as read: parallel words and tags, and where it starts in its file. Its tags are
/// [`String`]s where every token must be labelled (gold), [`Label`]s in training data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sentence<L = String> {
    /// The tokens.
    pub words: Vec<String>,
    /// Their tags, one per token (empty when the file is untagged).
    pub tags: Vec<L>,
    /// Each token's values of the feature columns ([`ColumnSpec::feature_columns`]), `[tokens,
    /// features]`; empty when none are read (text has none).
    pub features: Vec<Vec<String>>,
    /// 1-based line number of the first token; token `i` is on line `first_line + i`.
    pub first_line: usize,
    /// Which document of its file the sentence is in, counting from 0: each `-DOCSTART-` line
    /// after a sentence begins the next. A file without markers is one document.
    pub document: usize,
}

impl<L: TagColumn> Sentence<L> {
    /// Whether some of its tokens have no one tag.
    pub fn is_partial(&self) -> bool {
        self.tags.iter().any(|t| t.tag().is_none())
    }

    /// Tokens in the sentence.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether it has no tokens.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }
}

impl Sentence<Label> {
    /// Its labels (read in `source`) written in `target`: each token's one tag, or what it may
    /// be where the unknown labels beside it leave that open. A token the labels on either side
    /// leave no tag at all is open to none ([`Allowed::is_empty`]).
    pub fn labels_in(&self, source: crate::TagScheme, target: crate::TagScheme) -> Vec<Label> {
        match known_tags(&self.tags) {
            Some(tags) => crate::convert_tags(&tags, target)
                .into_iter()
                .map(Label::Tag)
                .collect(),
            None => crate::partial::labels_in(&self.tags, source, target),
        }
    }
}

/// The sentences of one file, with the file's path kept for error messages: gold
/// (`Corpus<String>`, every token labelled) or training data (`Corpus<Label>`).
#[derive(Debug, Clone)]
pub struct Corpus<L = String> {
    /// The file read, for error messages.
    pub path: PathBuf,
    /// Its sentences, in file order.
    pub sentences: Vec<Sentence<L>>,
}

impl Corpus {
    /// The corpus, once every tag is checked to be well formed.
    fn with_checked_tags(self) -> Result<Self, DataError> {
        for sentence in &self.sentences {
            for (i, tag) in sentence.tags.iter().enumerate() {
                crate::check_tag(tag).map_err(|message| self.error_at(sentence, i, message))?;
            }
        }
        Ok(self)
    }

    /// The corpus as training data, its labels read: `-` is unknown, any other tag must be well
    /// formed.
    fn into_labels(self) -> Result<Corpus<Label>, DataError> {
        let corpus = self.map_tags(|tag| Label::parse(&tag));
        for sentence in &corpus.sentences {
            for (i, label) in sentence.tags.iter().enumerate() {
                if let Some(tag) = label.tag() {
                    crate::check_tag(tag)
                        .map_err(|message| corpus.error_at(sentence, i, message))?;
                }
            }
        }
        Ok(corpus)
    }
}

impl<L> Corpus<L> {
    /// The corpus with each tag mapped by `f`.
    pub(crate) fn map_tags<M>(self, f: impl Fn(L) -> M) -> Corpus<M> {
        let sentences = self
            .sentences
            .into_iter()
            .map(|s| Sentence {
                words: s.words,
                tags: s.tags.into_iter().map(&f).collect(),
                features: s.features,
                first_line: s.first_line,
                document: s.document,
            })
            .collect();
        Corpus {
            path: self.path,
            sentences,
        }
    }
}

impl From<Corpus> for Corpus<Label> {
    /// Gold as training data: every label a tag.
    fn from(corpus: Corpus) -> Self {
        corpus.map_tags(Label::Tag)
    }
}

impl Corpus<Label> {
    /// Leaves `labels` open where the corpus (labels in `scheme`) says `O`: data that does not
    /// decide those labels (a project that labels only some of a model's) says only that a token
    /// is none of the others, so it may be `O` or any tag of `labels`. Tokens already open and
    /// tagged ones stay as they are.
    pub fn open_labels(&mut self, labels: &[String], scheme: crate::TagScheme) {
        if labels.is_empty() {
            return;
        }
        let prefixes: &[&str] = match scheme {
            crate::TagScheme::Iob1 | crate::TagScheme::Iob2 => &["B", "I"],
            crate::TagScheme::Iobes => &["B", "I", "E", "S"],
        };
        let mut allowed = vec!["O".to_string()];
        for label in labels {
            allowed.extend(prefixes.iter().map(|p| format!("{p}-{label}")));
        }
        for sentence in &mut self.sentences {
            for tag in &mut sentence.tags {
                if tag.tag() == Some("O") {
                    *tag = Label::Open(Allowed::OneOf(allowed.clone()));
                }
            }
        }
    }

    /// The corpus as gold, every token labelled; the first token that is not is an error at its
    /// line saying that `what` needs every token labelled.
    pub fn complete(self, what: &str) -> Result<Corpus, DataError> {
        for sentence in &self.sentences {
            if let Some(i) = sentence.tags.iter().position(|t| t.tag().is_none()) {
                return Err(self.error_at(
                    sentence,
                    i,
                    format!(
                        "an unknown label ({:?}): {what} needs every token labelled; partial \
                         labels are for training data",
                        Label::UNKNOWN.to_string()
                    ),
                ));
            }
        }
        // Every label is a tag: an open one was refused above.
        Ok(self.map_tags(|label| match label {
            Label::Tag(tag) => tag,
            open => open.to_string(),
        }))
    }

    /// The corpus with its labels (read in `source`) written in `target`
    /// ([`Sentence::labels_in`]); labels that leave some token no tag at all are an error at its
    /// line.
    pub fn into_scheme(
        mut self,
        source: crate::TagScheme,
        target: crate::TagScheme,
    ) -> Result<Self, DataError> {
        for index in 0..self.sentences.len() {
            let labels = self.labels_or_contradiction(index, source, target)?;
            self.sentences[index].tags = labels;
        }
        Ok(self)
    }

    /// [`Sentence::labels_in`] of sentence `index`, or an error at a token the labels on either
    /// side leave no tag at all.
    fn labels_or_contradiction(
        &self,
        index: usize,
        source: crate::TagScheme,
        target: crate::TagScheme,
    ) -> Result<Vec<Label>, DataError> {
        let sentence = &self.sentences[index];
        let labels = sentence.labels_in(source, target);
        let empty = |label: &Label| label.open().is_some_and(Allowed::is_empty);
        match labels.iter().position(empty) {
            Some(i) => Err(self.error_at(
                sentence,
                i,
                "no tag can go here: the labels on either side contradict each other",
            )),
            None => Ok(labels),
        }
    }

    /// The corpus as a CoNLL file of `word tag` lines with its tags in `scheme`, a
    /// `-DOCSTART-` line before each document. Open labels are written `-` ([`Label`]), as
    /// does a labelled token next to them whose tag in `scheme` its labels leave open.
    pub fn to_conll(&self, scheme: crate::TagScheme) -> String {
        let source = crate::TagScheme::detect(self.sentences.iter().map(|s| s.tags.as_slice()));
        let mut text = String::new();
        let mut document = None;
        for sentence in &self.sentences {
            if document != Some(sentence.document) {
                text.push_str("-DOCSTART- O\n\n");
                document = Some(sentence.document);
            }
            for (word, label) in sentence
                .words
                .iter()
                .zip(sentence.labels_in(source, scheme))
            {
                text.push_str(word);
                text.push(' ');
                text.push_str(&label.to_string());
                text.push('\n');
            }
            text.push('\n');
        }
        text
    }
}

impl<L: TagColumn> Corpus<L> {
    /// Tokens in all sentences.
    pub fn token_count(&self) -> usize {
        self.sentences.iter().map(Sentence::len).sum()
    }

    /// Where the tags are first not well formed in `scheme` (an error naming the file, line and
    /// tag), and in how many sentences they are not. Sentences with unknown labels are not
    /// judged here: what their labels allow is checked as they are converted.
    pub fn malformed(&self, scheme: crate::TagScheme) -> Option<(DataError, usize)> {
        let mut bad = self.sentences.iter().filter_map(|sentence| {
            let tags = known_tags(&sentence.tags)?;
            let at = crate::first_malformed(&tags, scheme)?;
            Some((sentence, at, tags[at]))
        });
        let (sentence, at, tag) = bad.next()?;
        let error = self.error_at(
            sentence,
            at,
            format!("{tag:?} is not well formed {scheme} here"),
        );
        Some((error, 1 + bad.count()))
    }

    /// IOBES tags that break the scheme's rules are read as everywhere in nertrain (an `S-` or
    /// `E-` closes its entity, so `S-PER I-PER` is two), but other tools may read them otherwise:
    /// a warning saying where, when the corpus is IOBES and has such tags.
    pub fn iobes_warning(&self) -> Option<String> {
        let tags = self.sentences.iter().map(|s| s.tags.as_slice());
        if crate::TagScheme::detect(tags) != crate::TagScheme::Iobes {
            return None;
        }
        let (first, sentences) = self.malformed(crate::TagScheme::Iobes)?;
        Some(format!(
            "{first} ({sentences} sentence{} in all); read with conlleval's rules, where an S- or \
             E- tag ends its entity",
            if sentences == 1 { "" } else { "s" }
        ))
    }

    /// An error about token `index` of `sentence`, located at its line.
    pub fn error_at(
        &self,
        sentence: &Sentence<L>,
        index: usize,
        message: impl Into<String>,
    ) -> DataError {
        DataError::at(&self.path, sentence.first_line + index, message)
    }
}

/// Reads a tagged CoNLL file (training, dev, test or gold data) whose tags must each be well
/// formed (`O`, or a prefix and a type: `B-PER`); the first that is not is an error at its line.
pub fn read_tagged(path: &Path, columns: &ColumnSpec) -> Result<Corpus, DataError> {
    read_conll(path, columns)?.with_checked_tags()
}

/// Reads training data: a tagged CoNLL file whose labels are each a well-formed tag or `-`, a
/// token whose label nobody gave ([`Label`]).
pub fn read_partially_tagged(
    path: &Path,
    columns: &ColumnSpec,
) -> Result<Corpus<Label>, DataError> {
    read_conll(path, columns)?.into_labels()
}

/// [`read_partially_tagged`] of text read elsewhere; `path` names it in errors.
pub fn parse_partially_tagged(
    text: &str,
    path: &Path,
    columns: &ColumnSpec,
) -> Result<Corpus<Label>, DataError> {
    parse_conll(text, path, columns)?.into_labels()
}

/// [`read_tagged`] of text read elsewhere (stdin); `path` names it in errors.
pub fn parse_tagged(text: &str, path: &Path, columns: &ColumnSpec) -> Result<Corpus, DataError> {
    parse_conll(text, path, columns)?.with_checked_tags()
}

/// Words as the text a sentence read from columns is tagged and annotated as: joined by single
/// spaces, each word's token with its offsets (code points).
pub fn words_as_text<S: AsRef<str>>(words: &[S]) -> (String, Vec<Token>) {
    let mut text = String::new();
    let mut tokens = Vec::with_capacity(words.len());
    let mut start = 0;
    for word in words {
        let word = word.as_ref();
        if !tokens.is_empty() {
            text.push(' ');
        }
        text.push_str(word);
        let end = start + word.chars().count();
        tokens.push(Token {
            text: word.to_string(),
            start,
            end,
        });
        start = end + 1;
    }
    (text, tokens)
}

/// A sentence's entities (conlleval's chunks of its tags, [`spans`]) as character spans of
/// its text ([`words_as_text`]).
pub fn char_spans<S: AsRef<str>>(tokens: &[Token], tags: &[S]) -> Vec<CharSpan> {
    spans(tags)
        .into_iter()
        .map(|span| CharSpan {
            start: tokens[span.start].start,
            end: tokens[span.end - 1].end,
            label: span.label,
        })
        .collect()
}

/// Reads a CoNLL file. Tolerates a UTF-8 BOM, CRLF line ends, whitespace-only separator lines,
/// `-DOCSTART-` lines with or without a blank line after them, and a missing final blank line.
pub fn read_conll(path: &Path, columns: &ColumnSpec) -> Result<Corpus, DataError> {
    parse_conll(&read_text(path)?, path, columns)
}

/// A text file's contents; invalid UTF-8 is an error naming its line.
pub fn read_text(path: &Path) -> Result<String, DataError> {
    let bytes =
        std::fs::read(path).map_err(|e| DataError::file(path, format!("cannot read: {e}")))?;
    text_from_bytes(bytes, path)
}

/// Bytes read from `path` (a file, or stdin under a name) as text; invalid UTF-8 is an error
/// naming its line.
pub fn text_from_bytes(bytes: Vec<u8>, path: &Path) -> Result<String, DataError> {
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
        DataError::at(path, line, "invalid UTF-8: expected a UTF-8 text file")
    })
}

/// Parses CoNLL text; `path` is used only to locate errors.
pub fn parse_conll(text: &str, path: &Path, columns: &ColumnSpec) -> Result<Corpus, DataError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut sentences = Vec::new();
    let mut current: Option<Sentence> = None;
    // The first token line fixes the width; (width, line it was seen on).
    let mut width: Option<(usize, usize)> = None;
    let mut document = 0;

    for (index, line) in text.lines().enumerate() {
        let line_number = index + 1;
        let fields: Vec<&str> = field_ranges(line)
            .into_iter()
            .map(|range| &line[range])
            .collect();
        if fields.is_empty() || fields[0] == DOCSTART {
            sentences.extend(current.take());
            if !fields.is_empty() && sentences.last().is_some_and(|s| s.document == document) {
                document += 1;
            }
            continue;
        }
        let (expected, seen_on) = *width.get_or_insert((fields.len(), line_number));
        if fields.len() != expected {
            return Err(DataError::at(
                path,
                line_number,
                format!(
                    "expected {expected} columns (as on line {seen_on}), found {}: {line:?}",
                    fields.len()
                ),
            ));
        }
        let (word, tag, features) = token_columns(&fields, line, line_number, path, columns)?;
        let sentence = current.get_or_insert_with(|| Sentence {
            words: Vec::new(),
            tags: Vec::new(),
            features: Vec::new(),
            first_line: line_number,
            document,
        });
        sentence.words.push(fields[word].to_string());
        sentence.tags.push(fields[tag].to_string());
        if !features.is_empty() {
            sentence.features.push(features);
        }
    }
    sentences.extend(current.take());

    if sentences.is_empty() {
        return Err(DataError::file(
            path,
            "no sentences: expected CoNLL token lines (word ... tag)",
        ));
    }
    Ok(Corpus {
        path: path.to_path_buf(),
        sentences,
    })
}

/// A token line's word and tag columns and its feature values, by `columns`; an error at
/// `line_number` names a column the line does not have, or one used twice.
fn token_columns(
    fields: &[&str],
    line: &str,
    line_number: usize,
    path: &Path,
    columns: &ColumnSpec,
) -> Result<(usize, usize, Vec<String>), DataError> {
    let column = |index: isize, what: &str| {
        ColumnSpec::resolve(index, fields.len()).ok_or_else(|| {
            DataError::at(
                path,
                line_number,
                format!(
                    "{what} column {index} does not exist in a line of {} columns",
                    fields.len()
                ),
            )
        })
    };
    let word = column(columns.word_column, "word")?;
    let tag = column(columns.tag_column, "tag")?;
    if word == tag {
        let message = if fields.len() == 1 {
            format!("expected a word and a tag column, found a single column: {line:?}")
        } else {
            format!(
                "the word column ({}) and the tag column ({}) are both column {} of this \
                 line of {} columns; expected two different columns (set data.word_column \
                 and data.tag_column): {line:?}",
                columns.word_column,
                columns.tag_column,
                word + 1,
                fields.len()
            )
        };
        return Err(DataError::at(path, line_number, message));
    }
    let features = columns
        .feature_columns
        .iter()
        .map(|&index| match column(index, "feature")? {
            at if at == tag => Err(DataError::at(
                path,
                line_number,
                format!(
                    "feature column {index} is also the tag column ({}) of this line of \
                     {} columns: expected feature columns apart from the word and tag \
                     columns: {line:?}",
                    columns.tag_column,
                    fields.len()
                ),
            )),
            at => Ok(fields[at].to_string()),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((word, tag, features))
}

/// Rewrites the tag column of CoNLL text into `to`, keeping every other byte of every line.
/// With `from`, the tags must first be well formed in that scheme; the first malformed tag is an
/// error at its line.
pub fn convert_tag_column(
    text: &str,
    path: &Path,
    columns: &ColumnSpec,
    from: Option<crate::TagScheme>,
    to: crate::TagScheme,
) -> Result<String, DataError> {
    // Unknown labels (`-`, as `convert` writes for partial annotation) stay unknown, or become
    // the one tag the labels beside them allow.
    let corpus = parse_conll(text, path, columns)?.into_labels()?;
    let mut replacements = std::collections::HashMap::new();
    if let Some((error, _)) = from.and_then(|from| corpus.malformed(from)) {
        return Err(error);
    }
    let source = from.unwrap_or_else(|| {
        crate::TagScheme::detect(corpus.sentences.iter().map(|s| s.tags.as_slice()))
    });
    for (index, sentence) in corpus.sentences.iter().enumerate() {
        let labels = corpus.labels_or_contradiction(index, source, to)?;
        for (i, label) in labels.into_iter().enumerate() {
            replacements.insert(sentence.first_line + i, label.to_string());
        }
    }
    let mut out = String::with_capacity(text.len());
    for (index, line) in text.split_inclusive('\n').enumerate() {
        match replacements.get(&(index + 1)) {
            Some(tag) => {
                let fields = field_ranges(line);
                let column =
                    ColumnSpec::resolve(columns.tag_column, fields.len()).ok_or_else(|| {
                        DataError::at(
                            path,
                            index + 1,
                            "the tag column moved between reading and writing",
                        )
                    })?;
                let range = fields[column].clone();
                out.push_str(&line[..range.start]);
                out.push_str(tag);
                out.push_str(&line[range.end..]);
            }
            None => out.push_str(line),
        }
    }
    Ok(out)
}

/// Byte ranges of a line's fields: runs of anything but spaces and TABs. A line end (`\n`, with a
/// `\r` before it, or a `\r` ending the text) belongs to no field. Reading and rewriting both split
/// lines here, so they always agree on the columns.
fn field_ranges(line: &str) -> Vec<std::ops::Range<usize>> {
    let content = line.strip_suffix('\n').unwrap_or(line);
    let content = content.strip_suffix('\r').unwrap_or(content);
    let mut ranges = Vec::new();
    let mut start = None;
    for (i, c) in content.char_indices() {
        match (c == ' ' || c == '\t', start) {
            (false, None) => start = Some(i),
            (true, Some(s)) => {
                ranges.push(s..i);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        ranges.push(s..content.len());
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_labels_widen_only_o() {
        let corpus = parse("Anna B-PER\nin O\nOslo O\n\n").unwrap();
        let mut labels = Corpus::<Label>::from(corpus);
        labels.sentences[0].tags[2] = Label::UNKNOWN;
        labels.open_labels(&["LOC".to_string()], crate::TagScheme::Iobes);
        let tags = &labels.sentences[0].tags;
        assert_eq!(tags[0], Label::Tag("B-PER".into()));
        let expected: Vec<String> = ["O", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]
            .map(String::from)
            .to_vec();
        assert_eq!(tags[1], Label::Open(Allowed::OneOf(expected)));
        assert_eq!(tags[2], Label::UNKNOWN);
    }

    fn parse(text: &str) -> Result<Corpus, DataError> {
        parse_conll(text, Path::new("t.txt"), &ColumnSpec::default())
    }

    fn words(corpus: &Corpus) -> Vec<Vec<&str>> {
        corpus
            .sentences
            .iter()
            .map(|s| s.words.iter().map(String::as_str).collect())
            .collect()
    }

    #[test]
    fn reads_four_columns_with_docstart_and_no_final_blank_line() {
        let corpus = parse(
            "-DOCSTART- -X- -X- O\n\nAcme NNP B-NP B-ORG\nzorbs VBZ B-VP O\n\nMira NNP B-NP B-PER",
        )
        .unwrap();
        assert_eq!(words(&corpus), vec![vec!["Acme", "zorbs"], vec!["Mira"]]);
        assert_eq!(corpus.sentences[0].tags, vec!["B-ORG", "O"]);
        assert_eq!(corpus.sentences[0].first_line, 3);
        assert_eq!(corpus.sentences[1].first_line, 6);
    }

    #[test]
    fn each_docstart_after_a_sentence_begins_a_document() {
        let corpus = parse(
            "-DOCSTART- O\n\na O\n\nb O\n-DOCSTART- O\n\n-DOCSTART- O\nc O\n\nd O\n-DOCSTART- O\n",
        )
        .unwrap();
        let documents: Vec<usize> = corpus.sentences.iter().map(|s| s.document).collect();
        assert_eq!(documents, vec![0, 0, 1, 1]);
        let unmarked = parse("a O\n\nb O\n").unwrap();
        assert!(unmarked.sentences.iter().all(|s| s.document == 0));
    }

    #[test]
    fn docstart_without_blank_line_breaks_the_sentence() {
        let corpus = parse("a O\n-DOCSTART- O\nb O\n").unwrap();
        assert_eq!(words(&corpus), vec![vec!["a"], vec!["b"]]);
    }

    #[test]
    fn tabs_crlf_bom_and_whitespace_only_lines() {
        let corpus = parse("\u{feff}a\tX\tB-LOC\r\nb  X\tO\r\n \t \r\nc\tX\tO\r\n").unwrap();
        assert_eq!(words(&corpus), vec![vec!["a", "b"], vec!["c"]]);
        assert_eq!(corpus.sentences[0].tags, vec!["B-LOC", "O"]);
    }

    #[test]
    fn configurable_columns() {
        let spec = ColumnSpec {
            word_column: 1,
            tag_column: 0,
            ..ColumnSpec::default()
        };
        let corpus = parse_conll("B-PER Peter x\n", Path::new("t"), &spec).unwrap();
        assert_eq!(corpus.sentences[0].words, vec!["Peter"]);
        assert_eq!(corpus.sentences[0].tags, vec!["B-PER"]);
    }

    #[test]
    fn ragged_columns_name_the_line() {
        let err = parse("a NN O\nb O\n").unwrap_err();
        assert_eq!(err.line, Some(2));
        assert!(
            err.to_string()
                .starts_with("t.txt:2: expected 3 columns (as on line 1), found 2"),
            "{err}"
        );
    }

    #[test]
    fn single_column_is_an_error() {
        let err = parse("word\n").unwrap_err();
        assert!(
            err.to_string().contains("expected a word and a tag column"),
            "{err}"
        );
    }

    #[test]
    fn feature_columns_are_read_per_token_and_may_not_be_the_tags() {
        let spec = ColumnSpec {
            feature_columns: vec![1, -2],
            ..ColumnSpec::default()
        };
        let text = "-DOCSTART- -X- -X- O\n\nOrion NNP B-NP B-ORG\nsells VBZ B-VP O\n";
        let corpus = parse_conll(text, Path::new("t"), &spec).unwrap();
        assert_eq!(
            corpus.sentences[0].features,
            vec![vec!["NNP", "B-NP"], vec!["VBZ", "B-VP"]]
        );
        // Without feature columns nothing is kept beside words and tags.
        let plain = parse_conll(text, Path::new("t"), &ColumnSpec::default()).unwrap();
        assert!(plain.sentences[0].features.is_empty());

        let missing = ColumnSpec {
            feature_columns: vec![5],
            ..ColumnSpec::default()
        };
        let err = parse_conll(text, Path::new("t"), &missing).unwrap_err();
        assert_eq!(err.line, Some(3));
        assert!(
            err.message
                .contains("feature column 5 does not exist in a line of 4")
        );
        let answer = ColumnSpec {
            feature_columns: vec![3],
            ..ColumnSpec::default()
        };
        let err = parse_conll(text, Path::new("t"), &answer).unwrap_err();
        assert!(
            err.message
                .contains("feature column 3 is also the tag column (-1)")
        );
    }

    #[test]
    fn coinciding_word_and_tag_columns_say_which_columns() {
        let columns = ColumnSpec {
            word_column: 0,
            tag_column: -2,
            ..ColumnSpec::default()
        };
        let err = parse_conll("Peter B-PER\n", Path::new("two.txt"), &columns).unwrap_err();
        assert_eq!(
            err.to_string(),
            "two.txt:1: the word column (0) and the tag column (-2) are both column 1 of this line \
             of 2 columns; expected two different columns (set data.word_column and \
             data.tag_column): \"Peter B-PER\""
        );
    }

    #[test]
    fn empty_input_is_an_error() {
        for text in ["", "\n\n", "-DOCSTART- -X- O\n\n"] {
            let err = parse(text).unwrap_err();
            assert!(err.to_string().contains("no sentences"), "{err}");
        }
    }

    #[test]
    fn invalid_utf8_names_the_line() {
        let dir = std::env::temp_dir().join(format!("nertrain-utf8-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.txt");
        std::fs::write(&path, b"a O\nb\xff O\n").unwrap();
        let err = read_conll(&path, &ColumnSpec::default()).unwrap_err();
        assert_eq!(err.line, Some(2));
        assert!(err.message.contains("invalid UTF-8"));
        let missing = read_conll(&dir.join("missing.txt"), &ColumnSpec::default()).unwrap_err();
        assert!(missing.message.starts_with("cannot read"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn converts_the_tag_column_and_keeps_everything_else() {
        let text = "\u{feff}-DOCSTART- -X- O\r\n\r\nAcme NNP I-ORG\r\nzorbs\tVBZ O\r\nDutch JJ I-MISC\r\nMerkel NNP I-PER\r\nSchmidt NNP B-PER";
        let converted = convert_tag_column(
            text,
            Path::new("t"),
            &ColumnSpec::default(),
            Some(crate::TagScheme::Iob1),
            crate::TagScheme::Iobes,
        )
        .unwrap();
        assert_eq!(
            converted,
            "\u{feff}-DOCSTART- -X- O\r\n\r\nAcme NNP S-ORG\r\nzorbs\tVBZ O\r\nDutch JJ S-MISC\r\nMerkel NNP S-PER\r\nSchmidt NNP S-PER"
        );
    }

    /// Found by fuzzing: a `\r` ending the text (no `\n` after it) once counted as a field when
    /// reading but as a separator when rewriting.
    #[test]
    fn a_final_carriage_return_is_a_line_end_everywhere() {
        let spec = ColumnSpec {
            word_column: 1,
            tag_column: -2,
            ..ColumnSpec::default()
        };
        let text = "\tE-B9O\t\r";
        assert!(
            parse_conll(text, Path::new("t"), &spec).is_err(),
            "one field: no word and tag"
        );
        let corpus = parse_conll("a B-X\r", Path::new("t"), &ColumnSpec::default()).unwrap();
        assert_eq!(corpus.sentences[0].tags, vec!["B-X"]);
        assert_eq!(
            convert_tag_column(
                "a B-X\r",
                Path::new("t"),
                &ColumnSpec::default(),
                None,
                crate::TagScheme::Iobes
            )
            .unwrap(),
            "a S-X\r"
        );
        for scheme in crate::TagScheme::ALL {
            let _ = convert_tag_column(
                text,
                Path::new("t"),
                &spec,
                Some(scheme),
                crate::TagScheme::Iobes,
            );
        }
    }

    #[test]
    fn conversion_checks_the_source_scheme() {
        let err = convert_tag_column(
            "a B-PER\n",
            Path::new("t"),
            &ColumnSpec::default(),
            Some(crate::TagScheme::Iob1),
            crate::TagScheme::Iob2,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("t:1: \"B-PER\" is not well formed iob1"),
            "{err}"
        );
    }

    #[test]
    fn long_sentence_is_read_whole() {
        let text: String = (0..5000).map(|i| format!("w{i} O\n")).collect();
        let corpus = parse(&text).unwrap();
        assert_eq!(corpus.sentences.len(), 1);
        assert_eq!(corpus.sentences[0].len(), 5000);
    }
}
