//! Document context: which sentences are read together as one document, and what a word's other
//! mentions in its document say about its case.
//!
//! Names recur within a document, and one mention is often unambiguous where another is not: a
//! headline's `JAPAN`, or `Kovacs` at the start of a sentence, is capitalised by position, while
//! the same word in the middle of a sentence of the body shows how it is really written.

use std::collections::HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::{Corpus, Encoded};

/// What a sentence is read with (`data.context`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Context {
    /// The sentence alone.
    #[default]
    Sentence,
    /// The other sentences of its document.
    Document,
}

/// A document of more tokens than this is read in consecutive pieces of at most this many (whole
/// sentences), so that context costs bounded memory however long a document is.
pub const DEFAULT_DOCUMENT_TOKENS: usize = 2000;

/// Consecutive sentences of the same document (`document_of`), cut into pieces of at most
/// `max_tokens` tokens; a sentence longer than that is a piece alone.
pub fn document_pieces(
    document_of: &[usize],
    lengths: &[usize],
    max_tokens: usize,
) -> Vec<Range<usize>> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut tokens = 0;
    for (i, (&document, &length)) in document_of.iter().zip(lengths).enumerate() {
        let new_document = i > start && document != document_of[start];
        if new_document || (i > start && tokens + length > max_tokens) {
            pieces.push(start..i);
            start = i;
            tokens = 0;
        }
        tokens += length;
    }
    if start < document_of.len() {
        pieces.push(start..document_of.len());
    }
    pieces
}

impl<L> Corpus<L> {
    /// The corpus's documents, in pieces of at most `max_tokens` tokens ([`document_pieces`]).
    pub fn documents(&self, max_tokens: usize) -> Vec<Range<usize>> {
        let document_of: Vec<usize> = self.sentences.iter().map(|s| s.document).collect();
        let lengths: Vec<usize> = self.sentences.iter().map(|s| s.words.len()).collect();
        document_pieces(&document_of, &lengths, max_tokens)
    }
}

/// How a word is written where its position does not force a capital (after the first word of
/// a sentence that has lower-case words), over its other mentions in the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MentionCasing {
    /// A padding slot.
    Padding,
    /// No other mention in such a position (the class of every word read without context).
    Unseen,
    /// Only with an upper-case first letter: a name.
    Capitalized,
    /// Only without: a common word.
    Lowercase,
    /// Both, in different mentions.
    Both,
}

impl MentionCasing {
    /// How many classes there are, `Padding` included.
    pub const COUNT: usize = 5;

    /// The class's id, in the mention-casing embedding.
    pub fn id(self) -> usize {
        self as usize
    }
}

/// Sets each word's [`MentionCasing`] in `encoded` from the words as written (`words`,
/// parallel to `encoded`), each of `documents` (ranges of sentences) on its own.
pub fn set_mention_casing<S: AsRef<str>>(
    encoded: &mut [Encoded],
    words: &[&[S]],
    documents: &[Range<usize>],
) {
    for document in documents {
        set_document_mention_casing(&mut encoded[document.clone()], &words[document.clone()]);
    }
}

fn set_document_mention_casing<S: AsRef<str>>(encoded: &mut [Encoded], words: &[&[S]]) {
    // Per lower-cased word: mentions capitalised and not, in free positions.
    let mut seen: HashMap<String, (usize, usize)> = HashMap::new();
    let mut keys: Vec<Vec<(String, Option<bool>)>> = Vec::with_capacity(words.len());
    for sentence in words {
        let has_lowercase_word = sentence
            .iter()
            .any(|w| w.as_ref().chars().any(char::is_lowercase));
        let sentence_keys: Vec<(String, Option<bool>)> = sentence
            .iter()
            .enumerate()
            .map(|(i, word)| {
                let word = word.as_ref();
                let first = word.chars().next();
                let free = i > 0 && has_lowercase_word && first.is_some_and(char::is_alphabetic);
                let capitalized = free.then(|| first.is_some_and(char::is_uppercase));
                (word.to_lowercase(), capitalized)
            })
            .collect();
        for (key, capitalized) in &sentence_keys {
            if let Some(capitalized) = capitalized {
                let counts = seen.entry(key.clone()).or_default();
                if *capitalized {
                    counts.0 += 1;
                } else {
                    counts.1 += 1;
                }
            }
        }
        keys.push(sentence_keys);
    }
    for (sentence, sentence_keys) in encoded.iter_mut().zip(keys) {
        sentence.mentions = sentence_keys
            .into_iter()
            .map(|(key, capitalized)| {
                // The word's own mention does not count: the feature is what the others say.
                let (mut upper, mut lower) = seen.get(&key).copied().unwrap_or_default();
                match capitalized {
                    Some(true) => upper -= 1,
                    Some(false) => lower -= 1,
                    None => {}
                }
                match (upper > 0, lower > 0) {
                    (false, false) => MentionCasing::Unseen,
                    (true, false) => MentionCasing::Capitalized,
                    (false, true) => MentionCasing::Lowercase,
                    (true, true) => MentionCasing::Both,
                }
                .id()
            })
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{TextNormalization, Vocabularies};

    #[test]
    fn pieces_follow_documents_and_the_token_budget() {
        let documents = [0, 0, 0, 1, 1, 2];
        let lengths = [3, 4, 2, 10, 1, 5];
        assert_eq!(
            document_pieces(&documents, &lengths, 100),
            vec![0..3, 3..5, 5..6]
        );
        assert_eq!(
            document_pieces(&documents, &lengths, 7),
            vec![0..2, 2..3, 3..4, 4..5, 5..6],
            "a sentence over the budget is a piece alone"
        );
        assert!(document_pieces(&[], &[], 7).is_empty());
    }

    #[test]
    fn other_mentions_in_free_positions_decide_the_class() {
        let text = [
            "JAPAN GET LUCKY WIN",
            "Kovacs said Japan won",
            "Anna Kovacs of the team said it was lucky",
            "Japan",
        ];
        let words: Vec<Vec<&str>> = text.iter().map(|s| s.split(' ').collect()).collect();
        let refs: Vec<&[&str]> = words.iter().map(Vec::as_slice).collect();
        let vocab = Vocabularies::build::<String>(&[], TextNormalization::default(), 1);
        let mut encoded: Vec<Encoded> = words.iter().map(|w| vocab.encode_words(w)).collect();
        set_mention_casing(&mut encoded, &refs, &[0..2, 2..4]);
        assert_eq!(
            encoded[0].mentions[2],
            MentionCasing::Unseen.id(),
            "LUCKY: lucky is in another document"
        );
        set_mention_casing(&mut encoded, &refs, &[Range { start: 0, end: 4 }]);
        use MentionCasing::*;
        let class = |s: usize, w: usize| encoded[s].mentions[w];
        // The headline has no lower-case word: its capitals say nothing, but the body does.
        assert_eq!(class(0, 0), Capitalized.id(), "JAPAN");
        assert_eq!(class(0, 2), Lowercase.id(), "LUCKY");
        assert_eq!(class(0, 1), Unseen.id(), "GET");
        assert_eq!(class(1, 0), Capitalized.id(), "Kovacs, first word");
        assert_eq!(
            class(2, 1),
            Unseen.id(),
            "Kovacs: its other mention is sentence-initial"
        );
        assert_eq!(
            class(1, 2),
            Unseen.id(),
            "Japan's only free mention is itself"
        );
        assert_eq!(class(3, 0), Capitalized.id(), "a one-word sentence");
        let alone = vocab.encode_words(&["Kovacs"]);
        assert_eq!(alone.mentions, vec![Unseen.id()], "read without context");
    }
}
