//! Texts with character spans, as every tool's reader gives them, checked alike (spans within
//! their text, labels without spaces, no overlaps, each error naming the file and line),
//! numbered into documents, and cut into sentences of words and tags. In JSON lines, lines
//! sharing a `"doc"` key (a string or a number) are one document; without it, each line is one
//! (a brat file is one).
//!
//! [`AnnotatedCorpus::tokenize`] turns such a file into sentences of words and IOB2 tags with the
//! same [`Tokenizer`] that tags raw text; a span that does not fall on token boundaries is
//! reported, never moved.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use nertrain_data::{Corpus, DataError, Label, Sentence, Span, TagScheme, Token, Tokenizer};

use crate::CharSpan;
use crate::exported::{DocumentKey, Exported};
use crate::format::Format;
use crate::tally::Tally;

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

    /// The text as texts annotated in full: itself when it is, else each stretch that its
    /// known regions and entities cover (overlapping or touching ones joined), with the
    /// entities inside it, so that what was decided can be scored as gold is.
    pub fn known_parts(&self) -> Vec<AnnotatedText> {
        let Some(known) = &self.known else {
            return vec![self.clone()];
        };
        let mut covered: Vec<(usize, usize)> = known
            .iter()
            .copied()
            .chain(self.spans.iter().map(|s| (s.start, s.end)))
            .filter(|(start, end)| start < end)
            .collect();
        covered.sort_unstable();
        let mut stretches: Vec<(usize, usize)> = Vec::new();
        for (start, end) in covered {
            match stretches.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => stretches.push((start, end)),
            }
        }
        let chars: Vec<(usize, char)> = self.text.char_indices().collect();
        let byte = |point: usize| chars.get(point).map_or(self.text.len(), |(b, _)| *b);
        stretches
            .into_iter()
            .map(|(start, end)| AnnotatedText {
                text: self.text[byte(start)..byte(end)].to_string(),
                spans: self
                    .spans
                    .iter()
                    .filter(|s| start <= s.start && s.end <= end)
                    .map(|s| CharSpan {
                        start: s.start - start,
                        end: s.end - start,
                        label: s.label.clone(),
                    })
                    .collect(),
                known: None,
                ..self.clone()
            })
            .collect()
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
    Format::of(path).is_some()
}

/// Reads annotated text in the format its name and content say ([`Format::of`]), in the units
/// its tool counts offsets in; every text is checked (offsets within the text, spans that do
/// not overlap, labels without spaces), and an error names the file, line and field. What is
/// left out (answers that are not gold, tasks nobody annotated, ...) is counted in the corpus's
/// warnings; a file of which nothing is left is an error saying why.
pub fn read_annotated(path: &Path) -> Result<AnnotatedCorpus, DataError> {
    let mut tally = Tally::default();
    let exported = Format::of(path)
        .unwrap_or(Format::Lines)
        .read(path, &mut tally)?;
    corpus_of(path, exported, tally)
}

/// Parses `text` as [`read_annotated`] reads a file named `path` that holds it: a JSON array
/// when the name ends `.json`, JSON lines otherwise; `path` names it in errors.
pub fn parse_annotated(text: &str, path: &Path) -> Result<AnnotatedCorpus, DataError> {
    let mut tally = Tally::default();
    let exported = Format::of(path)
        .unwrap_or(Format::Lines)
        .parse(text, path, &mut tally)?;
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
        check_regions(&spans, record.known.as_deref(), length)
            .map_err(|message| DataError::at(&source, number, message))?;
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

/// Whether a text of `length` characters can have these `spans` (sorted) and `known` regions:
/// within it, labelled, flat; the message says what is wrong.
fn check_regions(
    spans: &[CharSpan],
    known: Option<&[(usize, usize)]>,
    length: usize,
) -> Result<(), String> {
    for (k, span) in spans.iter().enumerate() {
        if span.start >= span.end || span.end > length {
            return Err(format!(
                "span {}..{} ({}) is not within the text's {length} characters (offsets are \
                 code points, end exclusive)",
                span.start, span.end, span.label
            ));
        }
        if span.label.is_empty() || span.label.contains(char::is_whitespace) {
            return Err(format!(
                "span {}..{}: label {:?} must be non-empty, without spaces",
                span.start, span.end, span.label
            ));
        }
        if let Some(previous) = k.checked_sub(1).map(|p| &spans[p])
            && previous.end > span.start
        {
            return Err(format!(
                "spans {}..{} ({}) and {}..{} ({}) overlap; entities here are flat",
                previous.start, previous.end, previous.label, span.start, span.end, span.label
            ));
        }
    }
    if let Some(&(start, end)) = known
        .into_iter()
        .flatten()
        .find(|(start, end)| start >= end || *end > length)
    {
        return Err(format!(
            "known region {start}..{end} is not within the text's {length} characters (offsets \
             are code points, end exclusive)"
        ));
    }
    Ok(())
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
    pub fn tags(&self, text: &AnnotatedText, tokens: &[Token]) -> (Vec<String>, Vec<Misaligned>) {
        let (spans, misaligned) = self.token_spans(text, tokens);
        (
            nertrain_data::render_spans(&spans, tokens.len(), TagScheme::Iob2),
            misaligned,
        )
    }

    /// The labels of `tokens` in `scheme` for the text's spans that fall on their boundaries,
    /// [`Label::UNKNOWN`] on the tokens of a partly annotated text that no span or known region
    /// covers; and the spans that do not.
    fn labels_in(
        &self,
        text: &AnnotatedText,
        tokens: &[Token],
        scheme: TagScheme,
    ) -> (Vec<Label>, Vec<Misaligned>) {
        let (spans, misaligned) = self.token_spans(text, tokens);
        let tags = nertrain_data::render_spans(&spans, tokens.len(), scheme);
        let covered = |(i, token): (usize, &Token)| {
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
    fn token_spans(&self, text: &AnnotatedText, tokens: &[Token]) -> (Vec<Span>, Vec<Misaligned>) {
        let mut spans = Vec::new();
        let mut misaligned = Vec::new();
        // Tokens are in order and do not overlap: their starts and ends both ascend.
        let at =
            |offset: usize, of: fn(&Token) -> usize| tokens.binary_search_by_key(&offset, of).ok();
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

    #[test]
    fn a_partial_text_is_scored_on_its_known_parts() {
        let span = |start, end, label: &str| CharSpan {
            start,
            end,
            label: label.into(),
        };
        let text = AnnotatedText {
            text: "Ünal met Bob in Oslo and Rome".into(),
            spans: vec![span(0, 4, "PER"), span(16, 20, "LOC")],
            line: 3,
            source: PathBuf::from("t.json"),
            document: 0,
            known: Some(vec![(2, 8), (13, 21)]),
        };
        let parts = text.known_parts();
        let texts: Vec<&str> = parts.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(texts, ["Ünal met", "in Oslo "]);
        assert_eq!(parts[0].spans, [span(0, 4, "PER")]);
        assert_eq!(parts[1].spans, [span(3, 7, "LOC")]);
        assert!(parts.iter().all(|p| !p.is_partial() && p.line == 3));
        let whole = AnnotatedText {
            known: None,
            ..text.clone()
        };
        assert_eq!(whole.known_parts(), std::slice::from_ref(&whole));
    }
    use nertrain_data::{TREEBANK_RULES, TagColumn, TokenizerSpec};

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
                        .map(|t| TagColumn::tag(t).unwrap_or("?"))
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
    /// every span): 32 times the spans take about 32 times as long, not 1,024. The bound leaves
    /// room for a machine busy with other work (a timing, however taken, is noisy there).
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
            (0..5)
                .map(|_| {
                    let started = std::time::Instant::now();
                    let (_, misaligned) = corpus.tokenize(&tokenizer);
                    assert!(misaligned.is_empty());
                    started.elapsed().as_secs_f64()
                })
                .fold(f64::INFINITY, f64::min)
        };
        let ratio = time(&line(64_000)) / time(&line(2_000));
        assert!(
            ratio < 256.0,
            "32 times the spans took {ratio:.1} times as long"
        );
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
}
