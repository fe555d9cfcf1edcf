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

use crate::{Corpus, DataError, Label, Sentence, Span, TagScheme, Tokenizer};

mod formats;
mod units;

use formats::Tally;
pub use formats::{
    AnnotationFormat, CHECK, PreAnnotated, StudioPrediction, StudioRegion, StudioTarget,
    doccano_lines, label_studio_tasks, narrow_label_studio_tasks,
};

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

/// Reads annotated text in the format its name and content say ([`AnnotationFormat::of`]), in
/// the units its tool counts offsets in; every text is checked (offsets within the text, spans
/// that do not overlap, labels without spaces), and an error names the file, line and field.
/// What is left out (answers that are not gold, tasks nobody annotated, ...) is counted in the
/// corpus's warnings; a file of which nothing is left is an error saying why.
pub fn read_annotated(path: &Path) -> Result<AnnotatedCorpus, DataError> {
    let mut tally = Tally::default();
    let exported = match AnnotationFormat::of(path) {
        Some(AnnotationFormat::Brat) => formats::read_brat(path, &mut tally)?,
        Some(AnnotationFormat::LabelStudio) => {
            let text = crate::conll::read_text(path)?;
            let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
            formats::parse_label_studio(text, path, &mut tally)?
        }
        Some(AnnotationFormat::Lines) | None => {
            return parse_annotated(&crate::conll::read_text(path)?, path);
        }
    };
    corpus_of(path, exported, tally)
}

/// Parses JSON lines of annotated text (any of the flat shapes); `path` is used only to locate
/// errors.
pub fn parse_annotated(text: &str, path: &Path) -> Result<AnnotatedCorpus, DataError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut tally = Tally::default();
    let exported = formats::parse_lines(text, path, &mut tally)?;
    corpus_of(path, exported, tally)
}

/// The texts checked, numbered into documents and put in document order.
fn corpus_of(
    path: &Path,
    exported: Vec<Exported>,
    tally: Tally,
) -> Result<AnnotatedCorpus, DataError> {
    let left_out = tally.texts_left_out();
    let warnings = tally.into_warnings(path);
    if exported.is_empty() && left_out > 0 {
        return Err(DataError::file(
            path,
            format!(
                "no annotated text is left to read ({})",
                warnings.join("; ")
            ),
        ));
    }
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
        // Known regions and spans that leave no word out annotate all of the text.
        let known = record
            .known
            .filter(|known| !covers_every_word(&record.text, known, &spans));
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
            known,
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

/// Whether every character of `text` but white space lies in a `known` region or a span.
fn covers_every_word(text: &str, known: &[(usize, usize)], spans: &[CharSpan]) -> bool {
    let mut covered: Vec<(usize, usize)> = known
        .iter()
        .copied()
        .chain(spans.iter().map(|s| (s.start, s.end)))
        .collect();
    covered.sort_unstable();
    let mut regions = covered.into_iter().peekable();
    text.chars().enumerate().all(|(i, c)| {
        while regions.next_if(|&(_, end)| end <= i).is_some() {}
        c.is_whitespace() || regions.peek().is_some_and(|&(start, _)| start <= i)
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
    /// ends is kept next to unlabelled tokens ([`Label::UNKNOWN`]).
    pub fn tokenize(&self, tokenizer: &Tokenizer) -> (Corpus<Label>, Vec<Misaligned>) {
        let mut sentences = Vec::new();
        let mut misaligned = Vec::new();
        let scheme = if self.texts.iter().any(AnnotatedText::is_partial) {
            TagScheme::Iobes
        } else {
            TagScheme::Iob2
        };
        for text in &self.texts {
            let tokens = tokenizer.tokens(&text.text);
            let (tags, bad) = self.labels_in(text, &tokens, scheme);
            misaligned.extend(bad);
            for range in tokenizer.sentences(&text.text, &tokens) {
                sentences.push(Sentence {
                    words: tokens[range.clone()]
                        .iter()
                        .map(|t| t.text.clone())
                        .collect(),
                    tags: tags[range].to_vec(),
                    features: Vec::new(),
                    first_line: text.line,
                    document: text.document,
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
        let (spans, misaligned) = self.token_spans(text, tokens);
        (
            crate::render_spans(&spans, tokens.len(), TagScheme::Iob2),
            misaligned,
        )
    }

    /// The labels of `tokens` in `scheme` for the text's spans that fall on their boundaries,
    /// [`Label::UNKNOWN`] on the tokens of a partly annotated text that no span or known region
    /// covers; and the spans that do not.
    fn labels_in(
        &self,
        text: &AnnotatedText,
        tokens: &[crate::Token],
        scheme: TagScheme,
    ) -> (Vec<Label>, Vec<Misaligned>) {
        let (spans, misaligned) = self.token_spans(text, tokens);
        let tags = crate::render_spans(&spans, tokens.len(), scheme);
        let covered = |(i, token): (usize, &crate::Token)| {
            let known = text.known.as_ref().is_none_or(|known| {
                known
                    .iter()
                    .any(|&(start, end)| start <= token.start && token.end <= end)
            });
            known || spans.iter().any(|s| (s.start..s.end).contains(&i))
        };
        let labels = tags
            .into_iter()
            .zip(tokens.iter().enumerate())
            .map(|(tag, token)| {
                if covered(token) {
                    Label::Tag(tag)
                } else {
                    Label::UNKNOWN
                }
            })
            .collect();
        (labels, misaligned)
    }

    /// The text's spans as token ranges of `tokens`, where they fall on their boundaries, and
    /// the spans that do not.
    fn token_spans(
        &self,
        text: &AnnotatedText,
        tokens: &[crate::Token],
    ) -> (Vec<Span>, Vec<Misaligned>) {
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
        (spans, misaligned)
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
                    s.tags
                        .iter()
                        .map(|t| crate::TagColumn::tag(t).unwrap_or("?"))
                        .collect(),
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

    /// Writes `content` as `name` in a directory of the test's own and reads it.
    fn read_written(test: &str, name: &str, content: &str) -> Result<AnnotatedCorpus, DataError> {
        let dir = std::env::temp_dir().join(format!("nertrain-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), content).unwrap();
        let read = read_annotated(&dir.join(name));
        std::fs::remove_dir_all(&dir).unwrap();
        read
    }

    #[test]
    fn prodigy_answers_other_than_accept_are_left_out_and_counted() {
        let lines = concat!(
            r#"{"text": "Anna flew.", "spans": [{"start": 0, "end": 4, "label": "PER"}], "answer": "accept"}"#,
            "\n",
            r#"{"text": "Paris flew.", "spans": [{"start": 0, "end": 5, "label": "PER"}], "answer": "reject"}"#,
            "\n",
            r#"{"text": "Kim flew.", "spans": [{"start": 0, "end": 3, "label": "ORG"}], "answer": "ignore"}"#,
            "\n",
            r#"{"text": "Lee flew.", "spans": [{"start": 0, "end": 3, "label": "ORG"}], "answer": "reject"}"#,
            "\n",
        );
        let corpus = parse_annotated(lines, Path::new("teach.jsonl")).unwrap();
        assert_eq!(spans_of(&corpus), [vec![(0, 4, "PER")]]);
        assert_eq!(
            corpus.warnings,
            [
                "teach.jsonl: lines whose answer is not `accept` are not gold and were left out \
              (1 ignore, 2 reject)"
            ]
        );
        let error = parse_annotated(
            r#"{"text": "a", "spans": [], "answer": "maybe"}"#,
            Path::new("t.jsonl"),
        )
        .unwrap_err();
        assert!(
            error.to_string().contains("t.jsonl:1: answer \"maybe\""),
            "{error}"
        );
        let error = parse_annotated(
            r#"{"text": "a", "spans": [], "answer": "reject"}"#,
            Path::new("t.jsonl"),
        )
        .unwrap_err();
        assert!(error.to_string().contains("no annotated text"), "{error}");
    }

    #[test]
    fn doccano_offsets_are_utf16_units() {
        // "😀 " is three UTF-16 units and two code points; "中" one of each.
        let text = "😀 Anna in 中国 met 👩‍👩‍👧 Bob";
        let units = |s: &str| -> usize { text[..text.find(s).unwrap()].encode_utf16().count() };
        let chars = |s: &str| -> usize { text[..text.find(s).unwrap()].chars().count() };
        let line = format!(
            r#"{{"text": "{text}", "label": [[{}, {}, "PER"], [{}, {}, "LOC"], [{}, {}, "PER"]]}}"#,
            units("Anna"),
            units("Anna") + 4,
            units("中国"),
            units("中国") + 2,
            units("Bob"),
            units("Bob") + 3
        );
        let expected = vec![vec![
            (chars("Anna"), chars("Anna") + 4, "PER"),
            (chars("中国"), chars("中国") + 2, "LOC"),
            (chars("Bob"), chars("Bob") + 3, "PER"),
        ]];
        let corpus = parse_annotated(&line, Path::new("d.jsonl")).unwrap();
        assert_eq!(spans_of(&corpus), expected);
        let entities = format!(
            r#"{{"text": "{text}", "entities": [{{"id": 1, "start_offset": {}, "end_offset": {}, "label": "PER"}}]}}"#,
            units("Bob"),
            units("Bob") + 3
        );
        let corpus = parse_annotated(&entities, Path::new("d.jsonl")).unwrap();
        assert_eq!(
            spans_of(&corpus),
            [vec![(chars("Bob"), chars("Bob") + 3, "PER")]]
        );
        // Inside an emoji's surrogate pair: an error, not a guess.
        let error = parse_annotated(
            &format!(r#"{{"text": "{text}", "label": [[1, 5, "PER"]]}}"#),
            Path::new("d.jsonl"),
        )
        .unwrap_err();
        assert!(error.to_string().contains("UTF-16"), "{error}");
        // And written as doccano reads them.
        let written = doccano_lines(&[PreAnnotated {
            text: text.to_string(),
            spans: vec![(
                CharSpan {
                    start: chars("Bob"),
                    end: chars("Bob") + 3,
                    label: "PER".into(),
                },
                0.9,
            )],
            score: 1.0,
            line: 1,
            regions: Vec::new(),
            partial: false,
        }]);
        assert!(
            written.contains(&format!(
                "[[{},{},\"PER\"]]",
                units("Bob"),
                units("Bob") + 3
            )),
            "{written}"
        );
        let back = parse_annotated(&written, Path::new("d.jsonl")).unwrap();
        assert_eq!(
            spans_of(&back),
            [vec![(chars("Bob"), chars("Bob") + 3, "PER")]]
        );
    }

    /// A Label Studio task of one text and the given results.
    fn task(text: &str, results: &str) -> String {
        format!(
            r#"[{{"id": 1, "data": {{"text": "{text}", "title": "Kovacs Ltd"}}, "annotations": [{{"id": 5, "result": [{results}]}}]}}]"#
        )
    }

    fn region(start: usize, end: usize, text: &str, to_name: &str) -> String {
        format!(
            r#"{{"from_name": "label", "to_name": "{to_name}", "type": "labels", "value": {{"start": {start}, "end": {end}, "text": "{text}", "labels": ["PER"]}}}}"#
        )
    }

    #[test]
    fn narrowed_label_studio_tasks_read_the_projects_text_whatever_else_their_data_holds() {
        let export = r#"[{"id": 3, "data": {"body": "Anna met Bob", "source": "mail 7", "n": 2},
            "annotations": [{"id": 9, "result": [
                {"from_name": "ents", "to_name": "doc", "type": "labels", "value": {"start": 0, "end": 4, "text": "Anna", "labels": ["PER"]}},
                {"from_name": "other", "to_name": "src", "type": "labels", "value": {"start": 0, "end": 4, "text": "mail", "labels": ["ORG"]}}]},
              {"id": 10, "was_cancelled": true, "result": []}],
            "predictions": [{"result": []}]}]"#;
        // As exported, two strings and no `text`: which one is labelled is unknown.
        let error = read_written("ls-narrow-raw", "e.json", export)
            .unwrap_err()
            .to_string();
        assert!(error.contains("nor one string"), "{error}");
        let tasks: Vec<&serde_json::value::RawValue> = serde_json::from_str(export).unwrap();
        let narrowed = narrow_label_studio_tasks(&tasks, "body", "doc").unwrap();
        let narrowed = std::str::from_utf8(&narrowed).unwrap();
        let corpus = read_written("ls-narrowed", "e.json", narrowed).unwrap();
        assert_eq!(corpus.texts[0].text, "Anna met Bob");
        assert_eq!(spans_of(&corpus), [vec![(0, 4, "PER")]]);
        // The importer's rules still apply: the cancelled annotation is not the one read.
        assert!(corpus.warnings.is_empty(), "{:?}", corpus.warnings);
        for (key, message) in [
            ("title", "task 3: data.title: missing"),
            ("n", "data.n: expected a string"),
        ] {
            let error = narrow_label_studio_tasks(&tasks, key, "doc").unwrap_err();
            assert!(error.contains(message), "{error}");
        }
    }

    #[test]
    fn label_studio_regions_are_checked_against_their_text() {
        let text = "🎉 Anna met Bob";
        // Code points, as Label Studio counts them.
        let corpus = read_written(
            "ls-cp",
            "t.json",
            &task(text, &region(2, 6, "Anna", "text")),
        )
        .unwrap();
        assert_eq!(spans_of(&corpus), [vec![(2, 6, "PER")]]);
        assert!(corpus.warnings.is_empty(), "{:?}", corpus.warnings);
        // UTF-16 units, as older versions counted: realigned, and said.
        let corpus = read_written(
            "ls-16",
            "t.json",
            &task(text, &region(3, 7, "Anna", "text")),
        )
        .unwrap();
        assert_eq!(spans_of(&corpus), [vec![(2, 6, "PER")]]);
        assert!(corpus.warnings[0].contains("1 region's offsets were counted in UTF-16"));
        // At neither: an error naming the task, never other words labelled.
        let error = read_written(
            "ls-bad",
            "t.json",
            &task(text, &region(7, 10, "Anna", "text")),
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("t.json:1: task 1 (number 1): region 7..10 (PER) says \"Anna\", but the text there is \"met\""),
            "{error}"
        );
        // A region on the task's other text is not this text's.
        let results = [
            region(2, 6, "Anna", "text"),
            region(0, 6, "Kovacs", "title"),
        ]
        .join(",");
        let corpus = read_written("ls-to", "t.json", &task(text, &results)).unwrap();
        assert_eq!(spans_of(&corpus), [vec![(2, 6, "PER")]]);
        assert!(
            corpus.warnings[0].contains("another <Text> of their task left out (to_name: 1 title)"),
            "{:?}",
            corpus.warnings
        );
        // JSON-MIN regions are checked the same way.
        let min = format!(
            r#"[{{"id": 1, "text": "{text}", "label": [{{"start": 3, "end": 7, "text": "Anna", "labels": ["PER"]}}], "annotation_id": 5}}]"#
        );
        let corpus = read_written("ls-min16", "m.json", &min).unwrap();
        assert_eq!(spans_of(&corpus), [vec![(2, 6, "PER")]]);
    }

    #[test]
    fn label_studio_json_min_reads_as_label_studio_writes_it() {
        // As label-studio-converter writes JSON-MIN: a row per annotation, no control key for an
        // annotation without regions, `annotation_id` null for a task nobody annotated, every
        // control under its own name.
        let min = r#"[
  {"text": "Anna met Bob", "id": 1, "label": [{"start": 0, "end": 4, "text": "Anna", "labels": ["PER"]}], "place": [{"start": 9, "end": 12, "text": "Bob", "labels": ["LOC"]}], "annotator": 1, "annotation_id": 11, "created_at": "2024-05-01T10:00:00.000000Z", "updated_at": "2024-05-01T10:00:00.500000Z", "lead_time": 2.0},
  {"text": "Anna met Bob", "id": 1, "label": [{"start": 0, "end": 4, "text": "Anna", "labels": ["ORG"]}], "annotator": 2, "annotation_id": 12, "created_at": "2024-05-01T10:00:00Z", "updated_at": "2024-05-01T10:00:00Z", "lead_time": 2.0},
  {"text": "Nothing here", "id": 2, "annotator": 1, "annotation_id": 13, "created_at": "2024-05-01T10:00:00Z", "updated_at": "2024-05-01T10:00:00Z", "lead_time": 1.0},
  {"text": "Not yet seen", "id": 3, "annotator": null, "annotation_id": null, "created_at": null, "updated_at": null, "lead_time": null}
]"#;
        let corpus = read_written("ls-min", "m.json", min).unwrap();
        assert_eq!(
            spans_of(&corpus),
            [vec![(0, 4, "PER"), (9, 12, "LOC")], vec![]],
            "the later annotation of task 1 (by time, not as strings), both controls"
        );
        let warnings = corpus.warnings.join("\n");
        assert!(
            warnings.contains("1 task without an annotation"),
            "{warnings}"
        );
        assert!(
            warnings.contains("1 row of a task that has a later annotation"),
            "{warnings}"
        );
    }

    #[test]
    fn the_latest_annotation_is_the_latest_in_time() {
        let annotation = |id: u32, label: &str, updated: &str, extra: &str| {
            format!(
                r#"{{"id": {id}, "updated_at": "{updated}"{extra}, "result": [{{"from_name": "label", "to_name": "text", "type": "labels", "value": {{"start": 0, "end": 4, "text": "Anna", "labels": ["{label}"]}}}}]}}"#
            )
        };
        let export = format!(
            r#"[{{"id": 1, "data": {{"text": "Anna flew"}}, "annotations": [{}, {}, {}]}}]"#,
            annotation(1, "LATER", "2024-05-01T10:00:00.500000Z", ""),
            annotation(2, "EARLIER", "2024-05-01T10:00:00Z", ""),
            annotation(3, "SKIPPED", "2024-06-01T10:00:00Z", r#", "skipped": true"#),
        );
        let corpus = read_written("ls-time", "t.json", &export).unwrap();
        assert_eq!(spans_of(&corpus), [vec![(0, 4, "LATER")]]);
        let bad = export.replace("2024-05-01T10:00:00Z", "last tuesday");
        let error = read_written("ls-badtime", "t.json", &bad)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("updated_at \"last tuesday\" is not a time"),
            "{error}"
        );
    }

    #[test]
    fn results_of_kinds_not_read_are_counted() {
        let results = [
            region(0, 4, "Anna", "text"),
            r#"{"from_name": "h", "to_name": "text", "type": "hypertextlabels", "value": {"start": "/p[1]", "end": "/p[1]", "startOffset": 0, "endOffset": 4, "hypertextlabels": ["PER"]}}"#.to_string(),
            r#"{"from_name": "p", "to_name": "text", "type": "paragraphlabels", "value": {"start": "0", "end": "0", "startOffset": 0, "endOffset": 4, "paragraphlabels": ["PER"]}}"#.to_string(),
        ]
        .join(",");
        let corpus = read_written("ls-kinds", "t.json", &task("Anna flew", &results)).unwrap();
        assert_eq!(spans_of(&corpus), [vec![(0, 4, "PER")]]);
        assert!(
            corpus.warnings[0].contains("(1 hypertextlabels, 1 paragraphlabels)"),
            "{:?}",
            corpus.warnings
        );
    }

    #[test]
    fn an_export_of_tasks_nobody_annotated_says_so() {
        let export = r#"[{"id": 1, "data": {"text": "a"}, "annotations": []},
                         {"id": 2, "data": {"text": "b"}, "annotations": [{"id": 3, "was_cancelled": true, "result": []}]}]"#;
        let error = read_written("ls-none", "t.json", export)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("no annotated text is left to read")
                && error.contains("2 tasks without an annotation"),
            "{error}"
        );
    }

    #[test]
    fn label_studio_lines_are_counted_in_linear_time() {
        let tasks = |n: usize| {
            let task = r#"{"id": 1, "data": {"text": "Anna flew"}, "annotations": [{"id": 1, "result": []}]}"#;
            format!("[\n{}\n]", vec![task; n].join(",\n"))
        };
        let time = |text: &str| {
            (0..3)
                .map(|_| {
                    let started = std::time::Instant::now();
                    let mut tally = Tally::default();
                    formats::parse_label_studio(text, Path::new("t.json"), &mut tally).unwrap();
                    started.elapsed().as_secs_f64()
                })
                .fold(f64::INFINITY, f64::min)
        };
        let (small, large) = (tasks(4_000), tasks(32_000));
        let ratio = time(&large) / time(&small);
        assert!(
            ratio < 24.0,
            "8 times the tasks took {ratio:.1} times as long"
        );
        let mut tally = Tally::default();
        let read = formats::parse_label_studio(&large, Path::new("t.json"), &mut tally).unwrap();
        assert_eq!(read.last().unwrap().line, 32_001);
    }

    #[test]
    fn messages_name_what_is_wrong() {
        let error = |line: &str| {
            parse_annotated(line, Path::new("x.jsonl"))
                .unwrap_err()
                .to_string()
        };
        let negative = error(r#"{"text": "Anna", "label": [[-1, 4, "PER"]]}"#);
        assert!(
            negative.contains("`label`: expected doccano's") && negative.contains("-1"),
            "{negative}"
        );
        let twice = error(r#"{"text": "Anna", "label": [[0, 4, "PER"]], "label": []}"#);
        assert!(twice.contains("the key `label` is given twice"), "{twice}");
    }

    #[test]
    fn a_known_region_over_the_whole_text_is_a_text_annotated_in_full() {
        let corpus = parse_annotated(
            concat!(
                r#"{"text": "Anna flew home", "spans": [{"start": 0, "end": 4, "label": "PER"}], "known": [[4, 14]]}"#,
                "\n",
                r#"{"text": "Anna flew home", "spans": [], "known": [[0, 9]]}"#
            ),
            Path::new("k.jsonl"),
        )
        .unwrap();
        assert!(!corpus.texts[0].is_partial());
        assert!(corpus.texts[1].is_partial());
    }

    /// Tasks `select --regions` writes, annotated as Label Studio exports them when the
    /// annotator submits the prediction with `results` (its regions, as JSON) in its place.
    fn region_tasks(
        partial: bool,
        results: impl Fn(&serde_json::Value) -> serde_json::Value,
    ) -> String {
        let span = |start, end, label: &str| CharSpan {
            start,
            end,
            label: label.into(),
        };
        let written = label_studio_tasks(
            &[PreAnnotated {
                text: "Anna Kovacs met Bob Lee in Oslo.".into(),
                spans: vec![(span(0, 11, "PER"), 0.99), (span(16, 23, "ORG"), 0.4)],
                score: 0.5,
                line: 3,
                regions: vec![(16, 23)],
                partial,
            }],
            "nertrain test",
        );
        let mut tasks: Vec<serde_json::Value> = serde_json::from_str(&written).unwrap();
        for task in &mut tasks {
            let result = results(&task["predictions"][0]["result"]);
            task["annotations"] = serde_json::json!([{"id": 1, "result": result}]);
        }
        serde_json::to_string(&tasks).unwrap()
    }

    #[test]
    fn tasks_to_decide_in_regions_read_back_as_partly_annotated() {
        // The annotator corrects the doubtful entity and keeps the region to check.
        let corrected = region_tasks(true, |result| {
            let mut result = result.clone();
            result[1]["value"]["labels"] = serde_json::json!(["PER"]);
            result
        });
        let written: Vec<serde_json::Value> = serde_json::from_str(&corrected).unwrap();
        let checks: Vec<&serde_json::Value> = written[0]["predictions"][0]["result"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["from_name"] == CHECK)
            .collect();
        assert_eq!(checks.len(), 1);
        assert_eq!(checks[0]["value"]["text"], "Bob Lee");
        assert_eq!(written[0]["data"]["known"], serde_json::json!([[16, 23]]));
        let corpus = read_written("ls-regions", "e.json", &corrected).unwrap();
        // The check region is what was decided, not an entity.
        assert_eq!(spans_of(&corpus), [vec![(0, 11, "PER"), (16, 23, "PER")]]);
        assert_eq!(corpus.texts[0].known, Some(vec![(16, 23), (16, 23)]));
        // A region the annotator added is decided too; data.known stands when they delete one.
        let widened = region_tasks(true, |result| {
            let mut result = result.as_array().unwrap().clone();
            let mut added = result[2].clone();
            added["value"] =
                serde_json::json!({"start": 27, "end": 31, "text": "Oslo", "labels": [CHECK]});
            result.pop();
            result.push(added);
            serde_json::Value::Array(result)
        });
        let corpus = read_written("ls-regions-widened", "e.json", &widened).unwrap();
        assert_eq!(corpus.texts[0].known, Some(vec![(16, 23), (27, 31)]));
        // What the learner narrows to keeps them.
        let tasks: Vec<&serde_json::value::RawValue> = serde_json::from_str(&widened).unwrap();
        let narrowed = narrow_label_studio_tasks(&tasks, "text", "text").unwrap();
        let narrowed = read_written(
            "ls-regions-narrowed",
            "e.json",
            std::str::from_utf8(&narrowed).unwrap(),
        )
        .unwrap();
        assert_eq!(
            narrowed.texts,
            corpus
                .texts
                .iter()
                .map(|t| AnnotatedText {
                    source: narrowed.texts[0].source.clone(),
                    ..t.clone()
                })
                .collect::<Vec<_>>()
        );
        // JSON-MIN: the control's key and the data's, flattened.
        let min = r#"[{"id": 1, "text": "Anna met Bob today", "known": [[9, 12]], "annotation_id": 2,
            "label": [{"start": 0, "end": 4, "text": "Anna", "labels": ["PER"]}],
            "check": [{"start": 5, "end": 8, "text": "met", "labels": ["check"]}]}]"#;
        let corpus = read_written("ls-regions-min", "e.json", min).unwrap();
        assert_eq!(spans_of(&corpus), [vec![(0, 4, "PER")]]);
        assert_eq!(corpus.texts[0].known, Some(vec![(9, 12), (5, 8)]));
        // Read back in full, the pre-annotation taken where it was not checked: the regions
        // are neither entities nor what alone was decided.
        let whole = region_tasks(false, |result| result.clone());
        assert!(!whole.contains("known"), "{whole}");
        let corpus = read_written("ls-regions-whole", "e.json", &whole).unwrap();
        assert_eq!(spans_of(&corpus), [vec![(0, 11, "PER"), (16, 23, "ORG")]]);
        assert_eq!(corpus.texts[0].known, None);
        let min_whole = min.replace(r#""known": [[9, 12]], "#, "");
        let corpus = read_written("ls-regions-min-whole", "e.json", &min_whole).unwrap();
        assert_eq!(corpus.texts[0].known, None);
        let bad = region_tasks(true, |result| result.clone())
            .replace(r#""known":[[16,23]]"#, r#""known":"all""#);
        let error = read_written("ls-regions-bad", "e.json", &bad)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("data.known: expected the regions decided"),
            "{error}"
        );
    }

    #[test]
    fn brat_files_left_out_are_warned_of() {
        let dir = std::env::temp_dir().join(format!("nertrain-brat-left-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("more")).unwrap();
        std::fs::write(dir.join("a.txt"), "Anna").unwrap();
        std::fs::write(dir.join("a.ann"), "T1\tPER 0 4\tAnna\n").unwrap();
        std::fs::write(dir.join("b.txt"), "Bob").unwrap();
        let corpus = read_annotated(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let warnings = corpus.warnings.join("\n");
        assert!(
            warnings.contains("1 .txt file without a .ann"),
            "{warnings}"
        );
        assert!(warnings.contains("1 subdirectory not read"), "{warnings}");
    }
}
