//! Text annotated with character spans, as annotation tools export it ([`AnnotationFormat`]:
//! JSON lines of Prodigy, spaCy, doccano or Label Studio JSON-MIN, Label Studio's JSON export,
//! brat standoff). Offsets are code points, end exclusive. In JSON lines, lines sharing a
//! `"doc"` key (a string or a number) are one document; without it, each line is one (a brat
//! file is one). Other keys are ignored. Every format's texts go through the same checks: spans
//! within their text, labels without spaces, no overlaps, each error naming the file and line.
//!
//! [`AnnotatedCorpus::tokenize`] turns such a file into sentences of words and IOB2 tags with the
//! same [`Tokenizer`] that tags raw text; a span that does not fall on token boundaries is
//! reported, never moved.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{Corpus, DataError, Sentence, Span, TagScheme, Tokenizer};

mod formats;

pub use formats::{AnnotationFormat, PreAnnotated, doccano_lines, label_studio_tasks};

/// An entity as character offsets into its text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CharSpan {
    /// Its first character, in code points.
    pub start: usize,
    /// One past its last character, in code points.
    pub end: usize,
    /// Its type.
    pub label: String,
}

/// One text as its file gave it, before it is checked.
struct Exported {
    text: String,
    spans: Vec<CharSpan>,
    /// Where in `source` it is, from 1.
    line: usize,
    source: PathBuf,
    doc: Option<DocumentKey>,
    /// The regions annotated in full, where the line says only part of it is (`None`: all).
    known: Option<Vec<(usize, usize)>>,
}

#[derive(Clone, Deserialize, PartialEq, Eq, Hash)]
#[serde(untagged)]
enum DocumentKey {
    Text(String),
    Number(i64),
}

/// Which document a text belongs to: the one its `doc` key names, or its own (keyed by its place
/// in the file, apart from every key a file can give, `-1` included).
#[derive(PartialEq, Eq, Hash)]
enum Document {
    Given(DocumentKey),
    Alone(usize),
}

/// One annotated text and where it was read.
#[derive(Debug, Clone, PartialEq)]
pub struct AnnotatedText {
    /// The text.
    pub text: String,
    /// Its entities, sorted by start.
    pub spans: Vec<CharSpan>,
    /// Its line in its file, from 1 (where its object starts, in a JSON array).
    pub line: usize,
    /// The file it was read from (for brat, its `.ann`).
    pub source: PathBuf,
    /// Its document, counting from 0 in order of first appearance.
    pub document: usize,
    /// Where only part of the text is annotated: the regions that are, in full (code points,
    /// end exclusive), besides its spans. Tokens outside both are unlabelled, not `O`. `None`
    /// when all of the text is annotated.
    pub known: Option<Vec<(usize, usize)>>,
}

impl AnnotatedText {
    /// Whether only part of the text is annotated.
    pub fn is_partial(&self) -> bool {
        self.known.is_some()
    }
}

/// The texts of one file, a document's texts together, in the order their documents first
/// appear.
#[derive(Debug, Clone)]
pub struct AnnotatedCorpus {
    /// The file, for messages.
    pub path: PathBuf,
    /// Its texts.
    pub texts: Vec<AnnotatedText>,
    /// What was left out while reading, for the caller to show (tasks without an annotation,
    /// discontinuous spans).
    pub warnings: Vec<String>,
}

/// A span that does not start and end where tokens do.
#[derive(Debug, Clone, PartialEq)]
pub struct Misaligned {
    /// The file.
    pub path: PathBuf,
    /// The line of its text.
    pub line: usize,
    /// The span.
    pub span: CharSpan,
    /// The characters it covers.
    pub text: String,
}

impl fmt::Display for Misaligned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: span {}..{} {:?} ({}) does not start and end at token boundaries; left out",
            self.path.display(),
            self.line,
            self.span.start,
            self.span.end,
            self.text,
            self.span.label
        )
    }
}

/// Whether a file is read as annotated text rather than CoNLL columns: `.jsonl`, `.json`, `.ann`,
/// or a directory (of brat files).
pub fn is_annotated(path: &Path) -> bool {
    AnnotationFormat::of(path).is_some()
}

/// Reads annotated text in the format its name and content say ([`AnnotationFormat::of`]); every
/// text is checked (offsets within the text, spans that do not overlap, labels without spaces),
/// and an error names the file, line and field.
pub fn read_annotated(path: &Path) -> Result<AnnotatedCorpus, DataError> {
    let mut warnings = Vec::new();
    let exported = match AnnotationFormat::of(path) {
        Some(AnnotationFormat::Brat) => formats::read_brat(path, &mut warnings)?,
        Some(AnnotationFormat::LabelStudio) => {
            let text = crate::conll::read_text(path)?;
            let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
            formats::parse_label_studio(text, path, &mut warnings)?
        }
        Some(AnnotationFormat::Lines) | None => {
            return parse_annotated(&crate::conll::read_text(path)?, path);
        }
    };
    corpus_of(path, exported, warnings)
}

/// Parses JSON lines of annotated text (any of the flat shapes); `path` is used only to locate
/// errors.
pub fn parse_annotated(text: &str, path: &Path) -> Result<AnnotatedCorpus, DataError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    corpus_of(path, formats::parse_lines(text, path)?, Vec::new())
}

/// The texts checked, numbered into documents and put in document order.
fn corpus_of(
    path: &Path,
    exported: Vec<Exported>,
    warnings: Vec<String>,
) -> Result<AnnotatedCorpus, DataError> {
    let mut documents: HashMap<Document, usize> = HashMap::new();
    let mut texts = Vec::new();
    for (i, record) in exported.into_iter().enumerate() {
        let (number, source) = (record.line, record.source);
        let length = record.text.chars().count();
        let mut spans = record.spans;
        spans.sort();
        for (k, span) in spans.iter().enumerate() {
            let bad = |message: String| Err(DataError::at(&source, number, message));
            if span.start >= span.end || span.end > length {
                return bad(format!(
                    "span {}..{} ({}) is not within the text's {length} characters (offsets are \
                     code points, end exclusive)",
                    span.start, span.end, span.label
                ));
            }
            if span.label.is_empty() || span.label.contains(char::is_whitespace) {
                return bad(format!(
                    "span {}..{}: label {:?} must be non-empty, without spaces",
                    span.start, span.end, span.label
                ));
            }
            if let Some(previous) = k.checked_sub(1).map(|p| &spans[p])
                && previous.end > span.start
            {
                return bad(format!(
                    "spans {}..{} ({}) and {}..{} ({}) overlap; entities here are flat",
                    previous.start, previous.end, previous.label, span.start, span.end, span.label
                ));
            }
        }
        if let Some(&(start, end)) = record
            .known
            .iter()
            .flatten()
            .find(|(start, end)| start >= end || *end > length)
        {
            return Err(DataError::at(
                &source,
                number,
                format!(
                    "known region {start}..{end} is not within the text's {length} characters \
                     (offsets are code points, end exclusive)"
                ),
            ));
        }
        let next = documents.len();
        let key = match record.doc {
            Some(key) => Document::Given(key),
            None => Document::Alone(i),
        };
        let document = *documents.entry(key).or_insert(next);
        texts.push(AnnotatedText {
            text: record.text,
            spans,
            line: number,
            source,
            document,
            known: record.known,
        });
    }
    // A document's lines together, documents in order of first appearance.
    texts.sort_by_key(|t| t.document);
    Ok(AnnotatedCorpus {
        path: path.to_path_buf(),
        texts,
        warnings,
    })
}

impl AnnotatedCorpus {
    /// Spans in all texts.
    pub fn span_count(&self) -> usize {
        self.texts.iter().map(|t| t.spans.len()).sum()
    }

    /// Words and IOB2 tags, cut into sentences by `tokenizer`; spans that do not fall on token
    /// boundaries are left out and returned. Each sentence's `first_line` is its text's line.
    /// Where some text is only partly annotated, the tags are IOBES, so that where an entity
    /// ends is kept next to unlabelled tokens ([`crate::UNKNOWN_TAG`]).
    pub fn tokenize(&self, tokenizer: &Tokenizer) -> (Corpus, Vec<Misaligned>) {
        let mut sentences = Vec::new();
        let mut misaligned = Vec::new();
        let scheme = if self.texts.iter().any(AnnotatedText::is_partial) {
            TagScheme::Iobes
        } else {
            TagScheme::Iob2
        };
        for text in &self.texts {
            let tokens = tokenizer.tokens(&text.text);
            let (tags, bad) = self.tags_in(text, &tokens, scheme);
            misaligned.extend(bad);
            for range in tokenizer.sentences(&text.text, &tokens) {
                sentences.push(Sentence {
                    words: tokens[range.clone()]
                        .iter()
                        .map(|t| t.text.clone())
                        .collect(),
                    tags: tags[range].to_vec(),
                    first_line: text.line,
                    document: text.document,
                    allowed: Vec::new(),
                });
            }
        }
        let corpus = Corpus {
            path: self.path.clone(),
            sentences,
        };
        (corpus, misaligned)
    }

    /// IOB2 tags of `tokens` for the text's spans that fall on their boundaries, and the spans
    /// that do not.
    pub fn tags(
        &self,
        text: &AnnotatedText,
        tokens: &[crate::Token],
    ) -> (Vec<String>, Vec<Misaligned>) {
        self.tags_in(text, tokens, TagScheme::Iob2)
    }

    /// [`Self::tags`] in `scheme`, with [`crate::UNKNOWN_TAG`] on the tokens of a partly
    /// annotated text that no span or known region covers.
    fn tags_in(
        &self,
        text: &AnnotatedText,
        tokens: &[crate::Token],
        scheme: TagScheme,
    ) -> (Vec<String>, Vec<Misaligned>) {
        let mut spans = Vec::new();
        let mut misaligned = Vec::new();
        // Tokens are in order and do not overlap: their starts and ends both ascend.
        let at = |offset: usize, of: fn(&crate::Token) -> usize| {
            tokens.binary_search_by_key(&offset, of).ok()
        };
        for span in &text.spans {
            let first = at(span.start, |t| t.start);
            let last = at(span.end, |t| t.end);
            match (first, last) {
                (Some(first), Some(last)) if first <= last => spans.push(Span {
                    start: first,
                    end: last + 1,
                    label: span.label.clone(),
                }),
                _ => misaligned.push(Misaligned {
                    path: text.source.clone(),
                    line: text.line,
                    span: span.clone(),
                    text: text
                        .text
                        .chars()
                        .skip(span.start)
                        .take(span.end - span.start)
                        .collect(),
                }),
            }
        }
        let mut tags = crate::render_spans(&spans, tokens.len(), scheme);
        if let Some(known) = &text.known {
            let covered = |token: &crate::Token| {
                known
                    .iter()
                    .any(|&(start, end)| start <= token.start && token.end <= end)
            };
            let in_span = |i: usize| spans.iter().any(|s| (s.start..s.end).contains(&i));
            for (i, token) in tokens.iter().enumerate() {
                if !covered(token) && !in_span(i) {
                    tags[i] = crate::UNKNOWN_TAG.to_string();
                }
            }
        }
        (tags, misaligned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{TREEBANK_RULES, TokenizerSpec};

    fn tokenizer() -> Tokenizer {
        Tokenizer::new(&TokenizerSpec::Treebank {
            rules: TREEBANK_RULES,
            keep: Vec::new(),
        })
        .unwrap()
    }

    #[test]
    fn spans_become_tags_of_the_tokenizers_words() {
        let text = concat!(
            r#"{"id": 7, "text": "Anna Kovacs flew to São Paulo. She left.", "spans": [{"start": 20, "end": 29, "label": "LOC"}, {"start": 0, "end": 11, "label": "PER"}], "doc": "a"}"#,
            "\n\n",
            r#"{"text": "No entities here", "spans": []}"#,
            "\n",
            r#"{"text": "Kovacs again", "spans": [{"start": 0, "end": 3, "label": "PER"}], "doc": "a"}"#,
            "\n"
        );
        let corpus = parse_annotated(text, Path::new("t.jsonl")).unwrap();
        assert_eq!(
            corpus
                .texts
                .iter()
                .map(|t| (t.line, t.document))
                .collect::<Vec<_>>(),
            [(1, 0), (4, 0), (3, 1)],
            "a document's lines together"
        );
        let (tokens, misaligned) = corpus.tokenize(&tokenizer());
        let sentences: Vec<(Vec<&str>, Vec<&str>)> = tokens
            .sentences
            .iter()
            .map(|s| {
                (
                    s.words.iter().map(String::as_str).collect(),
                    s.tags.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            sentences[0].0,
            ["Anna", "Kovacs", "flew", "to", "São", "Paulo", "."]
        );
        assert_eq!(
            sentences[0].1,
            ["B-PER", "I-PER", "O", "O", "B-LOC", "I-LOC", "O"]
        );
        assert_eq!(sentences[1].0, ["She", "left", "."]);
        assert_eq!(sentences.len(), 4);
        assert_eq!(misaligned.len(), 1);
        assert_eq!(
            misaligned[0].to_string(),
            "t.jsonl:4: span 0..3 \"Kov\" (PER) does not start and end at token boundaries; left out"
        );
        assert_eq!(
            sentences[2].1,
            ["O", "O"],
            "the misaligned span is left out"
        );
    }

    #[test]
    fn bad_lines_are_errors_naming_the_line() {
        let cases = [
            (r#"{"text": 5}"#, "invalid type"),
            (r#"{"spans": []}"#, "no `text`"),
            (r#"{"text": "ab"}"#, "no spans: expected `spans`"),
            (r#"{"text": "ab", "tags": ["O"]}"#, "no spans"),
            (r#"{"text": "ab", "Comments": []}"#, "no spans"),
            (
                r#"{"text": "ab", "label": [{"start": 0, "end": 1, "labels": ["A", "B"]}]}"#,
                "2 labels",
            ),
            (
                r#"{"text": "ab", "spans": [{"start": 1, "end": 3, "label": "X"}]}"#,
                "not within",
            ),
            (
                r#"{"text": "ab", "spans": [{"start": 1, "end": 1, "label": "X"}]}"#,
                "not within",
            ),
            (
                r#"{"text": "ab", "spans": [{"start": 0, "end": 1, "label": "A B"}]}"#,
                "label",
            ),
            (
                r#"{"text": "abc", "spans": [{"start": 0, "end": 2, "label": "X"}, {"start": 1, "end": 3, "label": "Y"}]}"#,
                "overlap",
            ),
            ("not json", "expected"),
        ];
        for (line, expected) in cases {
            let text = format!("{{\"text\": \"fine\", \"spans\": []}}\n{line}\n");
            let error = parse_annotated(&text, Path::new("x.jsonl")).unwrap_err();
            assert_eq!(error.line, Some(2), "{line}");
            assert!(
                error.message.contains(expected),
                "{line}: {}",
                error.message
            );
        }
    }

    #[test]
    fn a_line_without_doc_is_a_document_alone_whatever_keys_others_give() {
        let text = concat!(
            r#"{"text": "One", "spans": []}"#,
            "\n",
            r#"{"text": "Two", "doc": -1, "spans": []}"#,
            "\n",
            r#"{"text": "Three", "doc": -2, "spans": []}"#,
            "\n",
            r#"{"text": "Four", "doc": -1, "spans": []}"#,
        );
        let corpus = parse_annotated(text, Path::new("t.jsonl")).unwrap();
        let documents: Vec<(usize, usize)> =
            corpus.texts.iter().map(|t| (t.line, t.document)).collect();
        assert_eq!(documents, [(1, 0), (2, 1), (4, 1), (3, 2)]);
    }

    /// Matching spans to words takes time in proportion to them (it searched every token for
    /// every span): eight times the spans may take about eight times as long, not sixty-four.
    #[test]
    fn spans_are_matched_to_words_in_time_in_proportion_to_them() {
        let line = |spans: usize| {
            let text = "ab ".repeat(spans);
            let spans: Vec<String> = (0..spans)
                .map(|i| {
                    format!(
                        r#"{{"start": {}, "end": {}, "label": "X"}}"#,
                        3 * i,
                        3 * i + 2
                    )
                })
                .collect();
            format!(r#"{{"text": "{text}", "spans": [{}]}}"#, spans.join(", "))
        };
        let tokenizer = tokenizer();
        let time = |text: &str| {
            let corpus = parse_annotated(text, Path::new("t.jsonl")).unwrap();
            (0..3)
                .map(|_| {
                    let started = std::time::Instant::now();
                    let (_, misaligned) = corpus.tokenize(&tokenizer);
                    assert!(misaligned.is_empty());
                    started.elapsed().as_secs_f64()
                })
                .fold(f64::INFINITY, f64::min)
        };
        let ratio = time(&line(32_000)) / time(&line(4_000));
        assert!(
            ratio < 24.0,
            "8 times the spans took {ratio:.1} times as long"
        );
    }

    /// The spans of every text, as `(start, end, label)`, in file order.
    fn spans_of(corpus: &AnnotatedCorpus) -> Vec<Vec<(usize, usize, &str)>> {
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

    fn example(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../data/annotations")
            .join(name)
    }

    #[test]
    fn the_tools_exports_are_read_as_they_write_them() {
        let expected = vec![
            vec![(0, 11, "PER"), (20, 29, "LOC")],
            vec![(0, 7, "ORG"), (17, 25, "LOC")],
            vec![],
        ];
        for name in [
            "doccano.jsonl",
            "doccano-entities.jsonl",
            "label-studio-min.json",
            "prodigy.jsonl",
        ] {
            let corpus = read_annotated(&example(name)).unwrap();
            assert_eq!(spans_of(&corpus), expected, "{name}");
            assert!(corpus.warnings.is_empty(), "{name}");
        }
        // The full export: the latest annotation not cancelled, predictions ignored, a task
        // without annotations left out and warned of.
        let corpus = read_annotated(&example("label-studio.json")).unwrap();
        assert_eq!(spans_of(&corpus), expected, "label-studio.json");
        assert_eq!(corpus.texts[1].line, 94, "a task's line is where it starts");
        assert!(
            corpus.warnings[0].contains("1 task without an annotation"),
            "{:?}",
            corpus.warnings
        );
        // brat: a text a file, each its own document; the discontinuous span left out.
        let corpus = read_annotated(&example("brat")).unwrap();
        assert_eq!(
            spans_of(&corpus),
            [
                vec![(0, 11, "PER"), (20, 29, "LOC")],
                vec![(0, 7, "ORG"), (17, 25, "LOC")]
            ]
        );
        assert_eq!(corpus.texts[1].document, 1);
        assert!(
            corpus.warnings[0].contains("discontinuous"),
            "{:?}",
            corpus.warnings
        );
        assert_eq!(
            spans_of(&read_annotated(&example("brat/1.ann")).unwrap()),
            [vec![(0, 11, "PER"), (20, 29, "LOC")]]
        );
    }

    #[test]
    fn shapes_the_tools_do_not_write_are_errors_naming_the_place() {
        let dir = std::env::temp_dir().join(format!("nertrain-formats-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cases = [
            (
                "tasks.json",
                r#"{"text": "not an array"}"#,
                "expected a JSON array",
            ),
            (
                "tasks.json",
                "[\n{\"data\": {\"a\": \"x\", \"b\": \"y\"}, \"annotations\": [{\"result\": []}]}]",
                "tasks.json:2: task number 1: its data has no `text`",
            ),
            ("min.json", "[{\"text\": \"ab\", \"id\": 3}]", "no spans"),
            ("a.ann", "T1\tPER 0 3\tAnn\n", "cannot read"),
        ];
        for (name, content, expected) in cases {
            let path = dir.join(name);
            std::fs::write(&path, content).unwrap();
            let error = read_annotated(&path).unwrap_err().to_string();
            assert!(error.contains(expected), "{name}: {error}");
        }
        std::fs::write(dir.join("b.txt"), "Anna Kovacs").unwrap();
        for (ann, expected) in [
            (
                "T1\tPER 0 4\tAnne\n",
                "b.ann:1: offsets 0..4 cover \"Anna\"",
            ),
            ("X1\tfoo\n", "b.ann:1: expected a brat annotation"),
            ("T1\tPER 0\tAnna\n", "b.ann:1: expected `TYPE START END`"),
        ] {
            std::fs::write(dir.join("b.ann"), ann).unwrap();
            let error = read_annotated(&dir.join("b.ann")).unwrap_err().to_string();
            assert!(error.contains(expected), "{ann:?}: {error}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
