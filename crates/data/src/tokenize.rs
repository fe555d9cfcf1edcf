//! Raw text → words with character offsets → sentences, cut the way a model's training data was
//! cut.
//!
//! A model saves how it cuts text ([`TokenizerSpec`], in its `model.json`):
//!
//! - [`TokenizerSpec::Treebank`]: the Penn Treebank / Reuters conventions of CoNLL-style corpora.
//!   Abbreviations and initials (`U.S.`, `a.m.`, `J.`), numbers with `.,:/-` inside (`3.5`,
//!   `1,000`, `10:30`, `1/2`, `1996-08-28`, `6-4`), hyphenated words, URLs, e-mail addresses and
//!   @handles stay whole; the clitics `n't 's 're 've 'll 'd 'm` and all other punctuation are
//!   split off. On top of the rules, the training corpus's own tokens that hold punctuation and
//!   that the rules would split (`vs.`, `Inc.`, `C$`, `S&P`, the `1.` of a ranking) are kept whole
//!   wherever they occur more often in training whole than cut. Sentences end at Unicode sentence
//!   boundaries (UAX #29) that follow a token of sentence-final punctuation, so an abbreviation,
//!   an initial or a decimal point never ends one; a blank line always does.
//! - [`TokenizerSpec::Bert`]: models trained before tokenizers were saved; BERT's pre-tokenizer
//!   (whitespace, then each punctuation character alone), kept so that they tag as they did.
//!
//! Offsets are in Unicode code points (what Python and spaCy slice with), end exclusive.

use std::collections::HashMap;
use std::ops::Range;

use fancy_regex::Regex;
use serde::{Deserialize, Serialize};
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::{OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};
use unicode_segmentation::UnicodeSegmentation;

use crate::Sentence;

/// The version of the treebank rules that [`Tokenizer`] implements; a model names the version
/// it was trained with, and a version this build does not know is refused rather than guessed.
pub const TREEBANK_RULES: u32 = 1;

/// How a model cuts raw text into words, saved with the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum TokenizerSpec {
    /// BERT's pre-tokenizer: whitespace, then every punctuation character on its own. Models
    /// written before the tokenizer was saved with them read text this way.
    Bert,
    /// The treebank rules of [`TREEBANK_RULES`], plus tokens of the training corpus kept whole.
    Treebank {
        /// Which version of the rules.
        rules: u32,
        /// Training tokens holding punctuation that the rules alone would split.
        keep: Vec<String>,
    },
}

impl TokenizerSpec {
    /// The treebank rules alone, for text that has no corpus to learn from yet (span-annotated
    /// training data is cut by them).
    pub fn treebank() -> Self {
        TokenizerSpec::Treebank {
            rules: TREEBANK_RULES,
            keep: Vec::new(),
        }
    }

    /// The treebank rules refined by a training corpus: every token that holds punctuation, that
    /// the rules would cut, and that the corpus holds whole more often than as the rules' pieces
    /// in a row, is kept whole.
    pub fn learn<L>(sentences: &[Sentence<L>]) -> Self {
        let rules = Tokenizer::treebank(&[]).expect("the treebank rules compile");
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for word in sentences.iter().flat_map(|s| &s.words) {
            *counts.entry(word.as_str()).or_default() += 1;
        }
        // A candidate's pieces, indexed by their first piece to find them in the corpus.
        let mut candidates: HashMap<&str, Vec<String>> = HashMap::new();
        for &word in counts.keys() {
            if word.chars().count() < 2 || word.chars().all(char::is_alphanumeric) {
                continue;
            }
            let pieces: Vec<String> = rules.tokens(word).into_iter().map(|t| t.text).collect();
            if pieces.len() > 1 {
                candidates.insert(word, pieces);
            }
        }
        let mut by_first: HashMap<&str, Vec<(&str, &[String])>> = HashMap::new();
        for (word, pieces) in &candidates {
            by_first
                .entry(pieces[0].as_str())
                .or_default()
                .push((word, pieces));
        }
        let mut cut: HashMap<&str, usize> = HashMap::new();
        for sentence in sentences {
            for (i, word) in sentence.words.iter().enumerate() {
                for (candidate, pieces) in by_first.get(word.as_str()).into_iter().flatten() {
                    if sentence.words[i..].starts_with(pieces) {
                        *cut.entry(candidate).or_default() += 1;
                    }
                }
            }
        }
        let mut keep: Vec<String> = candidates
            .keys()
            .filter(|w| counts[*w] > cut.get(*w).copied().unwrap_or(0))
            .map(|w| w.to_string())
            .collect();
        keep.sort();
        TokenizerSpec::Treebank {
            rules: TREEBANK_RULES,
            keep,
        }
    }
}

/// A word of a text and where it is: `start..end` in code points.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Token {
    /// The word as written.
    pub text: String,
    /// Its first character's index in the text, counted in code points.
    pub start: usize,
    /// One past its last character's index, in code points.
    pub end: usize,
}

/// A problem with a saved tokenizer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenizerError(pub String);

impl std::fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TokenizerError {}

/// A [`TokenizerSpec`] ready to cut text: the pattern is compiled once, when a model loads.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    /// `sentences`: cut a text into sentences as document-level models did before the treebank
    /// rules; sentence-level models read a text whole.
    Bert {
        sentences: bool,
    },
    Treebank {
        pattern: Regex,
    },
}

/// The clitics split off a word, as the treebank writes them.
const CLITICS: &str = r"n't|N'T|'(?:s|S|m|M|re|RE|ve|VE|ll|LL|d|D)";
/// A run of non-space characters longer than this is cut into pieces of it, which bounds the
/// matcher's work per piece whatever the input.
const MAX_CHUNK_BYTES: usize = 1024;
/// The most tokens a saved tokenizer may keep whole, and the longest: far more than a corpus
/// teaches (CoNLL-2003's training set has a few thousand candidates, none of 64 bytes), and
/// short of where the pattern takes gigabytes or the matcher gives up.
pub const MAX_KEEP_WORDS: usize = 50_000;
/// See [`MAX_KEEP_WORDS`]; a token past a run's chunk could never match whole anyway.
pub const MAX_KEEP_BYTES: usize = 256;
/// Closing punctuation that may follow a sentence's final stop inside its sentence.
const CLOSERS: &[&str] = &["\"", "'", "''", ")", "]", "}", "»", "”", "’", "`"];

impl Tokenizer {
    /// Compiles a saved tokenizer.
    pub fn new(spec: &TokenizerSpec) -> Result<Self, TokenizerError> {
        match spec {
            TokenizerSpec::Bert => Ok(Self::bert(false)),
            TokenizerSpec::Treebank { rules, keep } if *rules == TREEBANK_RULES => {
                Self::treebank(keep)
            }
            TokenizerSpec::Treebank { rules, .. } => Err(TokenizerError(format!(
                "the model's tokenizer uses treebank rules version {rules}, but this nertrain \
                 knows version {TREEBANK_RULES} only"
            ))),
        }
    }

    /// BERT's pre-tokenizer, as models before the treebank rules read text; `sentences`: cut
    /// texts into sentences as document-level models of then did (sentence-level ones did not).
    pub fn bert(sentences: bool) -> Self {
        Self {
            kind: Kind::Bert { sentences },
        }
    }

    fn treebank(keep: &[String]) -> Result<Self, TokenizerError> {
        check_keep(keep)?;
        let mut alternatives: Vec<String> = vec![
            // URLs, without the punctuation that follows them in a sentence.
            r#"(?:https?://|www\.)\S+?(?=[.,;:!?)\]'"]*(?:\s|$))"#.into(),
            r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+".into(),
            r"[@#]\w+".into(),
        ];
        if !keep.is_empty() {
            let mut keep: Vec<&String> = keep.iter().collect();
            keep.sort_by_key(|w| std::cmp::Reverse(w.len()));
            let words: Vec<String> = keep.iter().map(|w| fancy_regex::escape(w).into()).collect();
            // Whole, and one that ends in a stop not at the very end of the text, where the
            // corpus writes a sentence's final stop apart (`rose 3 .` but `3. Smith`).
            alternatives.push(format!(
                r"(?<!\w)(?:{})(?!\w)(?!(?<=\.)\s*$)",
                words.join("|")
            ));
        }
        alternatives.extend([
            // Abbreviations with inner stops: U.S. a.m. F.C.
            r"\p{L}(?:\.\p{L})+\.?".into(),
            // Initials, unless at the end of the text.
            r"\p{Lu}\.(?!\s*$)".into(),
            // The number of a ranking: `1. Jan Ullrich`.
            r"\d{1,3}\.(?=\s+\p{Lu})".into(),
            // A word before its clitic, and the clitic: did n't, John 's.
            r"\w+(?=(?:n't|N'T)\b)".into(),
            format!(r"(?:{CLITICS})\b"),
            // Signed numbers, at the start of a word.
            r"(?<![^\s(])[+-](?=\d)\w+(?:[.,:/-](?=\d)\w+)*".into(),
            r"(?<![\w.])\.\d+".into(),
            // A score or a tie cut by a space: `6- 3`, `10= Smith`.
            r"\d+[-=](?=\s)".into(),
            // Words: hyphenated, with apostrophes inside (O'Brien), and numbers with `.,:/`
            // between digits (3.5, 1,000, 10:30, 1/2, 1996-08-28).
            format!(r"\w+(?:(?:-|[.,:/](?=\d)|(?!(?:{CLITICS})\b)')\w+)*"),
            r"-{2,}|\.{2,}|\*{2,}".into(),
            r"\S".into(),
        ]);
        let alternatives: Vec<String> = alternatives.iter().map(|a| format!("(?:{a})")).collect();
        let pattern = Regex::new(&alternatives.join("|"))
            .map_err(|e| TokenizerError(format!("the tokenizer's pattern: {e}")))?;
        // A pattern that cannot match a plain sentence would cut every text into characters.
        let probe = "Anna's co-op, U.S. 3.5 (x).";
        if pattern.find_from_pos(probe, 0).is_err() {
            return Err(TokenizerError(
                "the tokenizer's pattern does not match text (its keep list is too large)".into(),
            ));
        }
        Ok(Self {
            kind: Kind::Treebank { pattern },
        })
    }

    /// The words of `text` with their code-point offsets.
    pub fn tokens(&self, text: &str) -> Vec<Token> {
        self.tokens_at_most(text, usize::MAX)
            .expect("no text has more than usize::MAX words")
    }

    /// The words of `text`, or `None` as soon as there are more than `max` of them, before their
    /// memory is spent.
    pub fn tokens_at_most(&self, text: &str, max: usize) -> Option<Vec<Token>> {
        let tokens = match &self.kind {
            Kind::Bert { .. } => bert_tokens(text),
            Kind::Treebank { pattern } => treebank_tokens(pattern, text, max)?,
        };
        (tokens.len() <= max).then_some(tokens)
    }

    /// The sentences of a text as ranges of its `tokens` (from [`Self::tokens`]), in order and
    /// covering them all; one range, possibly empty, when nothing ends a sentence.
    pub fn sentences(&self, text: &str, tokens: &[Token]) -> Vec<Range<usize>> {
        match self.kind {
            #[allow(clippy::single_range_in_vec_init)] // One sentence: all the tokens.
            Kind::Bert { sentences: false } => vec![0..tokens.len()],
            Kind::Bert { sentences: true } => bert_sentences(tokens),
            Kind::Treebank { .. } => treebank_sentences(text, tokens),
        }
    }
}

/// The pre-tokenizer keeps per-byte alignments for what it splits, several times the text's
/// size: long texts go to it in parts of about this many bytes, cut at whitespace (where it
/// splits anyway, so the words are the same).
const BERT_SPLIT_BYTES: usize = 1 << 14;

fn bert_tokens(text: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars_before = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let cut = if rest.len() <= BERT_SPLIT_BYTES {
            rest.len()
        } else {
            let from = rest.floor_char_boundary(BERT_SPLIT_BYTES);
            rest[from..]
                .find(char::is_whitespace)
                .map_or(rest.len(), |i| from + i)
        };
        let (part, after) = rest.split_at(cut);
        let mut pre = PreTokenizedString::from(part);
        BertPreTokenizer
            .pre_tokenize(&mut pre)
            .expect("BERT's pre-tokenizer does not fail");
        tokens.extend(
            pre.get_splits(OffsetReferential::Original, OffsetType::Char)
                .into_iter()
                .map(|(word, (start, end), _)| Token {
                    text: word.to_string(),
                    start: chars_before + start,
                    end: chars_before + end,
                }),
        );
        chars_before += part.chars().count();
        rest = after;
    }
    tokens
}

/// Document-level models before the treebank rules read a sentence of more tokens than this in
/// pieces of this many.
const BERT_MAX_SENTENCE: usize = 250;

/// As document-level models read text before the treebank rules: a stop (`.`, `!`, `?`) then a
/// space and a word that does not start in lower case, or [`BERT_MAX_SENTENCE`] tokens.
fn bert_sentences(tokens: &[Token]) -> Vec<Range<usize>> {
    let mut sentences = Vec::new();
    let mut start = 0;
    for (i, token) in tokens.iter().enumerate() {
        let ends = matches!(token.text.as_str(), "." | "!" | "?");
        let spaced = tokens.get(i + 1).is_none_or(|next| {
            next.start > token.end && !next.text.starts_with(char::is_lowercase)
        });
        if (ends && spaced) || i + 1 - start == BERT_MAX_SENTENCE {
            sentences.push(start..i + 1);
            start = i + 1;
        }
    }
    if start < tokens.len() || sentences.is_empty() {
        sentences.push(start..tokens.len());
    }
    sentences
}

/// Matches the pattern within each run of non-space characters, with the text up to the next
/// one's first character in view, so that the rules that look ahead across a space (the end of
/// the text, an upper-case word after a ranking's number) see what follows.
fn treebank_tokens(pattern: &Regex, text: &str, max: usize) -> Option<Vec<Token>> {
    let mut tokens = Vec::new();
    // Code points before byte `at`, advanced as matches come in order.
    let (mut byte, mut chars) = (0, 0);
    let mut to_chars = |at: usize| {
        chars += text[byte..at].chars().count();
        byte = at;
        chars
    };
    let mut rest = text.trim_start_matches(separates);
    while !rest.is_empty() {
        if tokens.len() > max {
            return None;
        }
        let chunk_start = text.len() - rest.len();
        // The space that ends the run is looked for within the chunk's reach only: searched to
        // the end of a run of megabytes for every chunk of it, tokenizing was quadratic.
        let head = &rest[..rest.floor_char_boundary(MAX_CHUNK_BYTES + 8)];
        let mut chunk_len = match head.find(separates) {
            Some(space) => space,
            None if head.len() == rest.len() => rest.len(),
            None => usize::MAX,
        };
        if chunk_len > MAX_CHUNK_BYTES {
            chunk_len = rest.floor_char_boundary(MAX_CHUNK_BYTES);
        }
        let after = &rest[chunk_len..];
        let next_word = after.trim_start_matches(separates);
        let view_end = match next_word.chars().next() {
            Some(c) => text.len() - next_word.len() + c.len_utf8(),
            None => text.len(),
        };
        let chunk = &rest[..chunk_len];
        // Most runs are plain words, which every rule leaves whole: no pattern for them.
        if chunk
            .chars()
            .all(|c| c.is_alphabetic() || c.is_ascii_digit())
        {
            tokens.push(Token {
                text: chunk.to_string(),
                start: to_chars(chunk_start),
                end: to_chars(chunk_start + chunk_len),
            });
            rest = next_word;
            continue;
        }
        let view = &text[chunk_start..view_end];
        let mut at = 0;
        while at < chunk_len {
            let found = pattern.find_from_pos(view, at).ok().flatten();
            let (start, end) = match found {
                Some(m) if m.start() < chunk_len && m.end() > m.start() => {
                    (m.start(), m.end().min(chunk_len))
                }
                // Only on a pathological input that exhausts the matcher's backtracking: the
                // next character alone.
                _ => {
                    let width = view[at..].chars().next().map_or(1, char::len_utf8);
                    (at, at + width)
                }
            };
            if start > at {
                // Whitespace skipped inside the chunk cannot happen; text the pattern did not
                // match is its own token, so nothing is lost.
                let (s, e) = (chunk_start + at, chunk_start + start);
                tokens.push(Token {
                    text: text[s..e].to_string(),
                    start: to_chars(s),
                    end: to_chars(e),
                });
            }
            let (s, e) = (chunk_start + start, chunk_start + end);
            tokens.push(Token {
                text: text[s..e].to_string(),
                start: to_chars(s),
                end: to_chars(e),
            });
            at = end;
        }
        rest = next_word;
    }
    Some(tokens)
}

/// A saved keep list that nertrain could have learned: bounded in size, no entry empty (an
/// empty alternative matches everywhere and changes how `--`, `...` or `.500` are cut) or too
/// long.
fn check_keep(keep: &[String]) -> Result<(), TokenizerError> {
    if keep.len() > MAX_KEEP_WORDS {
        return Err(TokenizerError(format!(
            "tokenizer.keep: {} entries; expected at most {MAX_KEEP_WORDS}",
            keep.len()
        )));
    }
    for (i, word) in keep.iter().enumerate() {
        if word.is_empty() || word.len() > MAX_KEEP_BYTES || word.chars().any(separates) {
            return Err(TokenizerError(format!(
                "tokenizer.keep[{i}]: expected a token of 1 to {MAX_KEEP_BYTES} bytes without \
                 spaces, found {} bytes",
                word.len()
            )));
        }
    }
    Ok(())
}

/// What separates words: white space, and control characters (NUL and the like), which are no
/// part of any word; a run of them is read as a space is.
fn separates(c: char) -> bool {
    c.is_whitespace() || c.is_control()
}

/// Unicode's sentence boundaries (UAX #29), kept where the token before is sentence-final
/// punctuation (with closing quotes or brackets after it) or where a blank line separates.
fn treebank_sentences(text: &str, tokens: &[Token]) -> Vec<Range<usize>> {
    if tokens.len() < 2 {
        #[allow(clippy::single_range_in_vec_init)] // One sentence: all the tokens.
        return vec![0..tokens.len()];
    }
    // The boundaries as code points, ascending; the text is walked once, in step with the
    // tokens (which are in order), so that memory stays in proportion to the words rather than
    // to the text.
    let mut cuts: Vec<usize> = Vec::new();
    let (mut byte, mut chars) = (0, 0);
    for (at, _) in text.split_sentence_bound_indices() {
        chars += text[byte..at].chars().count();
        byte = at;
        cuts.push(chars);
    }
    let (mut byte, mut chars) = (0, 0);
    let mut byte_of = |at: usize| {
        byte += text[byte..]
            .char_indices()
            .nth(at - chars)
            .map_or(text.len() - byte, |(b, _)| b);
        chars = at;
        byte
    };
    let mut next_cut = 0;
    let mut sentences = Vec::new();
    let mut start = 0;
    // The last token before `j` that is no closer: a run of closers is walked once, not once
    // per token of it.
    let mut last_word = None;
    for j in 1..tokens.len() {
        let (previous, next) = (&tokens[j - 1], &tokens[j]);
        if !CLOSERS.contains(&previous.text.as_str()) {
            last_word = Some(j - 1);
        }
        let gap = &text[byte_of(previous.end)..byte_of(next.start)];
        let blank_line = gap.bytes().filter(|&b| b == b'\n').count() >= 2;
        while cuts.get(next_cut).is_some_and(|&c| c < previous.end) {
            next_cut += 1;
        }
        let boundary = cuts.get(next_cut).is_some_and(|&c| c <= next.start);
        let final_stop = {
            // The sentence's last word before its closers (its first token when all are).
            let k = last_word.filter(|&k| k >= start).unwrap_or(start);
            let word = tokens[k].text.as_str();
            !word.is_empty() && word.chars().all(|c| matches!(c, '.' | '!' | '?' | '…'))
        };
        if blank_line || (boundary && final_stop && !gap.is_empty()) {
            sentences.push(start..j);
            start = j;
        }
    }
    sentences.push(start..tokens.len());
    sentences
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(tokenizer: &Tokenizer, text: &str) -> Vec<String> {
        tokenizer.tokens(text).into_iter().map(|t| t.text).collect()
    }

    fn treebank(keep: &[&str]) -> Tokenizer {
        Tokenizer::new(&TokenizerSpec::Treebank {
            rules: TREEBANK_RULES,
            keep: keep.iter().map(|w| w.to_string()).collect(),
        })
        .unwrap()
    }

    #[test]
    fn control_characters_separate_words_as_spaces_do() {
        let t = treebank(&[]);
        let tokens = t.tokens("\0Peter\u{1}lives\0\0in Berlin.\u{7f}");
        let words: Vec<(&str, usize, usize)> = tokens
            .iter()
            .map(|t| (t.text.as_str(), t.start, t.end))
            .collect();
        assert_eq!(
            words,
            [
                ("Peter", 1, 6),
                ("lives", 7, 12),
                ("in", 14, 16),
                ("Berlin", 17, 23),
                (".", 23, 24)
            ]
        );
        assert!(t.tokens(&"\0".repeat(10_000)).is_empty());
    }

    #[test]
    fn a_text_of_more_words_than_the_bound_is_refused_and_long_runs_are_cut() {
        let t = treebank(&[]);
        assert_eq!(t.tokens_at_most("a b c", 3).map(|w| w.len()), Some(3));
        assert_eq!(t.tokens_at_most("a b c d", 3), None);
        assert_eq!(t.tokens_at_most(&"#".repeat(100), 10), None);
        // A run without a space is read in pieces of at most MAX_CHUNK_BYTES, which cover it.
        let run = "a".repeat(10 * MAX_CHUNK_BYTES + 7);
        let tokens = t.tokens(&run);
        assert_eq!(tokens.len(), 11);
        assert!(tokens.iter().all(|w| w.text.len() <= MAX_CHUNK_BYTES));
        assert_eq!(
            tokens.iter().map(|w| w.text.as_str()).collect::<String>(),
            run
        );
        let sentences = t.sentences(&run, &tokens);
        assert_eq!((sentences.len(), sentences[0].clone()), (1, 0..11));
    }

    #[test]
    fn the_rules_keep_what_the_treebank_keeps_whole() {
        let t = treebank(&[]);
        let cases: &[(&str, &[&str])] = &[
            (
                "The U.S. didn't pay $3.5 million.",
                &[
                    "The", "U.S.", "did", "n't", "pay", "$", "3.5", "million", ".",
                ],
            ),
            (
                "Dr. J. Smith's 1996-08-28 score was 6-4, at 10:30 a.m. (1/2)",
                &[
                    "Dr",
                    ".",
                    "J.",
                    "Smith",
                    "'s",
                    "1996-08-28",
                    "score",
                    "was",
                    "6-4",
                    ",",
                    "at",
                    "10:30",
                    "a.m.",
                    "(",
                    "1/2",
                    ")",
                ],
            ),
            (
                "Mail jo.doe@example.com, see https://x.org/a?b=1. @nertrain O'Brien's co-op",
                &[
                    "Mail",
                    "jo.doe@example.com",
                    ",",
                    "see",
                    "https://x.org/a?b=1",
                    ".",
                    "@nertrain",
                    "O'Brien",
                    "'s",
                    "co-op",
                ],
            ),
            (
                "He went to the U.S.. 1. Jan Ullrich rose 3.",
                &[
                    "He", "went", "to", "the", "U.S.", ".", "1.", "Jan", "Ullrich", "rose", "3",
                    ".",
                ],
            ),
            ("did n't -- +44 .500", &["did", "n't", "--", "+44", ".500"]),
        ];
        for (text, expected) in cases {
            assert_eq!(words(&t, text), *expected, "{text}");
        }
    }

    #[test]
    fn offsets_are_code_points_and_slice_the_text() {
        let t = treebank(&[]);
        let text = "  Zoë  visited Zürich 🙂 and São Paulo.\n";
        let chars: Vec<char> = text.chars().collect();
        let tokens = t.tokens(text);
        assert_eq!(tokens.len(), 8);
        for token in &tokens {
            let slice: String = chars[token.start..token.end].iter().collect();
            assert_eq!(slice, token.text);
        }
        assert_eq!((tokens[0].start, tokens[0].end), (2, 5));
    }

    #[test]
    fn corpus_tokens_are_kept_whole_where_the_corpus_keeps_them() {
        let t = treebank(&["vs.", "C$", "Inc."]);
        assert_eq!(
            words(&t, "Spurs vs. Ajax for C$ 5 at Acme Inc. Today"),
            [
                "Spurs", "vs.", "Ajax", "for", "C$", "5", "at", "Acme", "Inc.", "Today"
            ]
        );
        // At the end of a text the stop is the sentence's own, as the corpus writes it.
        assert_eq!(
            words(&t, "He works at Acme Inc."),
            ["He", "works", "at", "Acme", "Inc", "."]
        );
        assert_eq!(words(&t, "Acme Inc.."), ["Acme", "Inc.", "."]);
    }

    #[test]
    fn learning_keeps_the_tokens_a_corpus_holds_whole() {
        let sentence = |words: &[&str]| Sentence::<String> {
            words: words.iter().map(|w| w.to_string()).collect(),
            tags: vec!["O".into(); words.len()],
            features: Vec::new(),
            first_line: 1,
            document: 0,
        };
        let corpus = [
            sentence(&["Spurs", "vs.", "Ajax", "U.S.", "S&P"]),
            sentence(&["Ajax", "vs.", "Spurs", "S", "&", "P"]),
            sentence(&["S", "&", "P", "rose", "."]),
        ];
        let TokenizerSpec::Treebank { keep, .. } = TokenizerSpec::learn(&corpus) else {
            panic!("treebank rules")
        };
        // `U.S.` is the rules' own; `S&P` is cut more often than not.
        assert_eq!(keep, ["vs."]);
    }

    #[test]
    fn sentences_do_not_end_at_abbreviations_initials_or_decimals() {
        let t = treebank(&["Mr."]);
        let text = "Mr. J. Smith moved to the U.S. in 2001 and paid $3.5 million. \
                    \"He left.\" Why? Then... he stayed\n\nHEADLINE WITHOUT STOP\n\nNext one.";
        let tokens = t.tokens(text);
        let sentences: Vec<String> = t
            .sentences(text, &tokens)
            .into_iter()
            .map(|r| {
                tokens[r]
                    .iter()
                    .map(|t| t.text.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        assert_eq!(
            sentences,
            [
                "Mr. J. Smith moved to the U.S. in 2001 and paid $ 3.5 million .",
                "\" He left . \"",
                "Why ?",
                "Then ... he stayed",
                "HEADLINE WITHOUT STOP",
                "Next one ."
            ]
        );
        assert_eq!(t.sentences("", &[]), vec![0..0; 1]);
    }

    #[test]
    fn a_long_run_without_spaces_is_cut_and_nothing_is_lost() {
        let t = treebank(&["vs."]);
        for text in [
            "a".repeat(5000),
            ".".repeat(3000),
            "🙂".repeat(700),
            "U.S.".repeat(600),
        ] {
            let tokens = t.tokens(&text);
            let joined: String = tokens.iter().map(|t| t.text.as_str()).collect();
            assert_eq!(joined, text);
            assert!(tokens.iter().all(|t| t.text.len() <= MAX_CHUNK_BYTES));
        }
    }

    /// Cutting text into words and sentences takes time in proportion to the text, whatever it
    /// holds: a run of closing punctuation was quadratic (each token looked back over the whole
    /// run). Timed by the ratio of two sizes, each the best of three, so a slow machine does not
    /// fail it: eight times the text may take at most about eight times as long, where a
    /// quadratic cut takes sixty-four.
    #[test]
    fn cutting_takes_time_in_proportion_to_the_text() {
        let tokenizer = treebank(&["U.S."]);
        let time = |text: &str| {
            (0..3)
                .map(|_| {
                    let started = std::time::Instant::now();
                    let tokens = tokenizer.tokens(text);
                    let sentences = tokenizer.sentences(text, &tokens);
                    assert!(!sentences.is_empty());
                    started.elapsed().as_secs_f64()
                })
                .fold(f64::INFINITY, f64::min)
        };
        for unit in [")", "\"", "’", "]", "!)", ". ", "1. ", ",", "U.S. ", "a "] {
            let small = unit.repeat(4000 / unit.len());
            let large = unit.repeat(32000 / unit.len());
            let ratio = time(&large) / time(&small);
            assert!(
                ratio < 24.0,
                "{unit:?}: 8 times the text took {ratio:.1} times as long"
            );
        }
    }

    #[test]
    fn a_keep_list_nertrain_could_not_have_learned_is_refused() {
        let spec = |keep: Vec<String>| TokenizerSpec::Treebank {
            rules: TREEBANK_RULES,
            keep,
        };
        let refused = |keep: Vec<String>| Tokenizer::new(&spec(keep)).unwrap_err().0;
        assert!(refused(vec!["U.S.".into(), String::new()]).starts_with("tokenizer.keep[1]:"));
        assert!(refused(vec!["a".repeat(MAX_KEEP_BYTES + 1)]).starts_with("tokenizer.keep[0]:"));
        assert!(refused(vec!["a b".into()]).starts_with("tokenizer.keep[0]:"));
        let many: Vec<String> = (0..=MAX_KEEP_WORDS).map(|i| format!("w{i}-x.y")).collect();
        assert!(refused(many).contains("at most"));
        // At the bound, words are still cut as the rules cut them.
        let most: Vec<String> = (0..MAX_KEEP_WORDS).map(|i| format!("w{i}-x.y")).collect();
        let tokenizer = Tokenizer::new(&spec(most)).unwrap();
        assert_eq!(
            words(&tokenizer, "Anna flew to Sao Paulo, w17-x.y and co-op."),
            [
                "Anna", "flew", "to", "Sao", "Paulo", ",", "w17-x.y", "and", "co-op", "."
            ]
        );
    }

    #[test]
    fn old_models_read_text_as_before() {
        let t = Tokenizer::new(&TokenizerSpec::Bert).unwrap();
        assert_eq!(
            words(&t, "U.S. didn't"),
            ["U", ".", "S", ".", "didn", "'", "t"]
        );
        let documents = Tokenizer::bert(true);
        let text = "Kovacs moved to the U.S. in 2001. Kovacs said so! Why?";
        let tokens = documents.tokens(text);
        assert_eq!(documents.sentences(text, &tokens).len(), 3);
        assert_eq!(t.sentences(text, &tokens), vec![0..tokens.len(); 1]);
    }
}
