//! Words to a pretrained encoder's sub-tokens, with the checkpoint's own `tokenizer.json`, and
//! sentences longer than the encoder reads cut into overlapping windows.
//!
//! nertrain labels words; an encoder reads sub-tokens. Each word is given to the tokenizer as a
//! pre-tokenized word (byte-level BPE reads it after a space, as it would read it in running
//! text), and its emission is read from its first sub-token. A word the tokenizer turns into
//! nothing (a zero-width space alone) is given the unknown sub-token, so that it still has a
//! position to be labelled at. Padding and truncation baked into the file are cleared: batches
//! are padded by the caller, and nothing is cut without a window taking it up.

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use tokenizers::{Encoding, ModelWrapper, Tokenizer};

use crate::{DataError, Encoded};

/// A checkpoint's tokenizer file.
pub const TOKENIZER_FILE: &str = "tokenizer.json";

/// The largest tokenizer file read: many times the largest published (tens of megabytes), and
/// a bound on what a link to a device or an endless file costs.
pub const MAX_TOKENIZER_BYTES: u64 = 256 << 20;

/// Sub-tokens of the neighbouring sentences of its document a sentence is read with, on each
/// side, when documents are read (as FLERT reads them, Schweter & Akbik 2020).
pub const DOCUMENT_CONTEXT: usize = 64;

/// What nertrain reads of a `tokenizer.json` besides what `tokenizers` builds from it.
#[derive(Debug, Deserialize)]
struct TokenizerFile {
    pre_tokenizer: Option<PreTokenizerEntry>,
    model: ModelEntry,
}

#[derive(Debug, Deserialize)]
struct PreTokenizerEntry {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    pretokenizers: Vec<PreTokenizerEntry>,
}

impl PreTokenizerEntry {
    fn is_byte_level(&self) -> bool {
        self.kind == "ByteLevel" || self.pretokenizers.iter().any(Self::is_byte_level)
    }
}

#[derive(Debug, Deserialize)]
struct ModelEntry {
    unk_token: Option<String>,
}

/// A pretrained encoder's tokenizer, read from its `tokenizer.json`.
#[derive(Debug, Clone)]
pub struct SubwordTokenizer {
    tokenizer: Tokenizer,
    path: PathBuf,
    /// Byte-level BPE: each word is read as if after a space.
    prefix_space: bool,
    /// The sub-token a word that comes out as nothing is given.
    unknown: Option<u32>,
    /// The special sub-tokens before and after one input (`[CLS]` and `[SEP]`, `<s>` and `</s>`).
    before: Vec<u32>,
    after: Vec<u32>,
    /// Those special sub-tokens' ids and strings.
    special_tokens: Vec<(u32, String)>,
}

/// A sentence's sub-tokens, without the special ones around an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pieces {
    /// The sub-token ids, word after word.
    pub ids: Vec<u32>,
    /// Where each word's sub-tokens begin in `ids`, and one past the last (`words + 1`
    /// entries); every word has at least one.
    pub word_starts: Vec<usize>,
}

impl Pieces {
    /// How many words these are the pieces of.
    pub fn words(&self) -> usize {
        self.word_starts.len() - 1
    }

    /// Word `w`'s sub-tokens.
    fn of_word(&self, w: usize) -> Range<usize> {
        self.word_starts[w]..self.word_starts[w + 1]
    }
}

/// One input of the encoder: the special sub-tokens around a run of words' sub-tokens, of which
/// those of `scored` are the ones whose emissions it gives; the others are context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// The input's sub-token ids, the special ones included.
    pub ids: Vec<u32>,
    /// The words this window gives emissions for.
    pub scored: Range<usize>,
    /// Where in `ids` each scored word's first sub-token is.
    pub first_pieces: Vec<usize>,
}

impl SubwordTokenizer {
    /// Reads `path`, a regular file of at most [`MAX_TOKENIZER_BYTES`]; a file `tokenizers`
    /// cannot read is an error naming it.
    pub fn from_file(path: &Path) -> Result<Self, DataError> {
        let bytes = crate::io::read_regular(path, MAX_TOKENIZER_BYTES)
            .map_err(|e| DataError::file(path, format!("cannot read the tokenizer: {e}")))?;
        Self::from_bytes(&bytes, path)
    }

    /// Reads the `tokenizer.json` whose bytes are `bytes`, read from `path`.
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<Self, DataError> {
        let mut tokenizer = Tokenizer::from_bytes(bytes).map_err(|e| {
            DataError::file(
                path,
                format!("not a tokenizer.json `tokenizers` reads: {e}"),
            )
        })?;
        let file: TokenizerFile = serde_json::from_slice(bytes).map_err(|e| {
            DataError::file(
                path,
                format!("not a tokenizer.json `tokenizers` reads: {e}"),
            )
        })?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(None)
            .map_err(|e| DataError::file(path, format!("cannot clear its truncation: {e}")))?;
        // BPE dropout, a training-time regulariser, would cut the same word differently on
        // every call: a model must see the text as it was trained on it, and the same text
        // must always be tagged the same way.
        if let ModelWrapper::BPE(bpe) = tokenizer.get_model()
            && bpe.dropout.is_some()
        {
            let mut bpe = bpe.clone();
            bpe.dropout = None;
            tokenizer.with_model(bpe);
        }
        let unknown = file
            .model
            .unk_token
            .as_deref()
            .and_then(|token| tokenizer.token_to_id(token));
        let mut this = Self {
            tokenizer,
            path: path.to_path_buf(),
            prefix_space: file.pre_tokenizer.is_some_and(|p| p.is_byte_level()),
            unknown,
            before: Vec::new(),
            after: Vec::new(),
            special_tokens: Vec::new(),
        };
        let encoding = this.encode(&["a"])?;
        let (ids, word_ids) = (encoding.get_ids(), encoding.get_word_ids());
        let first = word_ids.iter().position(Option::is_some);
        let last = word_ids.iter().rposition(Option::is_some);
        let (Some(first), Some(last)) = (first, last) else {
            return Err(DataError::file(
                path,
                "the tokenizer gives no sub-token for the word \"a\"",
            ));
        };
        this.before = ids[..first].to_vec();
        this.after = ids[last + 1..].to_vec();
        let tokens = encoding.get_tokens();
        this.special_tokens = (0..first)
            .chain(last + 1..ids.len())
            .map(|i| (ids[i], tokens[i].clone()))
            .collect();
        Ok(this)
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sub-tokens it can give, the added ones included.
    pub fn vocab_size(&self) -> usize {
        self.tokenizer.get_vocab_size(true)
    }

    /// The largest sub-token id it can give, and that sub-token, if any: of its vocabulary, its
    /// added tokens and the special sub-tokens its post-processor puts around each input (whose
    /// ids the post-processor names for itself).
    pub fn largest_id(&self) -> Option<(u32, String)> {
        let vocab = self.tokenizer.get_vocab(true);
        vocab
            .into_iter()
            .map(|(token, id)| (id, token))
            .chain(self.special_tokens.iter().cloned())
            .max()
    }

    /// Special sub-tokens around each input.
    pub fn specials(&self) -> usize {
        self.before.len() + self.after.len()
    }

    /// `words` as the checkpoint's tokenizer cuts them, the special sub-tokens included: each
    /// sub-token's id and the word it comes from (`None` for the special ones). This is what
    /// Python's `tokenizer(words, is_split_into_words=True)` gives.
    pub fn encode_words(&self, words: &[&str]) -> Result<(Vec<u32>, Vec<Option<u32>>), DataError> {
        let encoding = self.encode(words)?;
        Ok((
            encoding.get_ids().to_vec(),
            encoding.get_word_ids().to_vec(),
        ))
    }

    /// [`encode_words`](Self::encode_words)'s encoding, its sub-tokens' strings included.
    fn encode(&self, words: &[&str]) -> Result<Encoding, DataError> {
        let spaced: Vec<String>;
        let input: Vec<&str> = if self.prefix_space {
            spaced = words
                .iter()
                .map(|w| {
                    if w.starts_with(char::is_whitespace) {
                        w.to_string()
                    } else {
                        format!(" {w}")
                    }
                })
                .collect();
            spaced.iter().map(String::as_str).collect()
        } else {
            words.to_vec()
        };
        self.tokenizer.encode(&input[..], true).map_err(|e| {
            DataError::file(
                &self.path,
                format!("cannot cut {words:?} into sub-tokens: {e}"),
            )
        })
    }

    /// A sentence's sub-tokens, each word with at least one.
    pub fn pieces(&self, words: &[&str]) -> Result<Pieces, DataError> {
        let (ids, word_ids) = self.encode_words(words)?;
        let mut pieces = Pieces {
            ids: Vec::with_capacity(ids.len()),
            word_starts: Vec::with_capacity(words.len() + 1),
        };
        let mut next = 0;
        for (id, word) in ids.into_iter().zip(word_ids) {
            let Some(word) = word.map(|w| w as usize) else {
                continue;
            };
            while next <= word {
                if next < word {
                    // Word `next` came out as nothing.
                    let unknown = self.unknown_for(words[next])?;
                    pieces.word_starts.push(pieces.ids.len());
                    pieces.ids.push(unknown);
                } else {
                    pieces.word_starts.push(pieces.ids.len());
                }
                next += 1;
            }
            pieces.ids.push(id);
        }
        while next < words.len() {
            let unknown = self.unknown_for(words[next])?;
            pieces.word_starts.push(pieces.ids.len());
            pieces.ids.push(unknown);
            next += 1;
        }
        pieces.word_starts.push(pieces.ids.len());
        Ok(pieces)
    }

    /// Sets each sentence's [`Encoded::windows`] for an encoder that reads at most `max_len`
    /// sub-tokens at once; `words[i]` are sentence `i`'s words as written. `documents`,
    /// consecutive ranges of the sentences read together (none when sentences are read alone),
    /// give each sentence that fits [`DOCUMENT_CONTEXT`] sub-tokens of its neighbours on each
    /// side, as context whose words are not scored.
    pub fn set_windows<S: AsRef<str>>(
        &self,
        encoded: &mut [Encoded],
        words: &[&[S]],
        documents: &[Range<usize>],
        max_len: usize,
    ) -> Result<(), DataError> {
        let pieces: Vec<Pieces> = words
            .iter()
            .map(|words| {
                let words: Vec<&str> = words.iter().map(AsRef::as_ref).collect();
                self.pieces(&words)
            })
            .collect::<Result<_, _>>()?;
        let mut document_of: Vec<Option<Range<usize>>> = vec![None; pieces.len()];
        for range in documents {
            for slot in &mut document_of[range.clone()] {
                *slot = Some(range.clone());
            }
        }
        for (i, (encoded, document)) in encoded.iter_mut().zip(document_of).enumerate() {
            encoded.windows = match document {
                Some(document) => self.windows_in_document(&pieces, i, document, max_len),
                None => self.windows(&pieces[i], max_len),
            };
        }
        Ok(())
    }

    /// The windows of sentence `i` of `pieces`, in `document`: one window with as much of
    /// [`DOCUMENT_CONTEXT`] on each side as fits, when the sentence fits; its own windows
    /// otherwise.
    fn windows_in_document(
        &self,
        pieces: &[Pieces],
        i: usize,
        document: Range<usize>,
        max_len: usize,
    ) -> Vec<Window> {
        let own = &pieces[i];
        let room = max_len.saturating_sub(self.specials() + own.ids.len());
        if room == 0 || own.words() == 0 {
            return self.windows(own, max_len);
        }
        let side = DOCUMENT_CONTEXT.min(room / 2);
        let mut left: Vec<u32> = pieces[document.start..i]
            .iter()
            .rev()
            .flat_map(|p| p.ids.iter().rev())
            .take(side)
            .copied()
            .collect();
        left.reverse();
        let right: Vec<u32> = pieces[i + 1..document.end]
            .iter()
            .flat_map(|p| &p.ids)
            .take(side)
            .copied()
            .collect();
        let mut window = self.window(own, 0..own.words(), 0..own.words(), own.ids.len());
        let at = self.before.len();
        window.ids.splice(at..at, left.iter().copied());
        let end = window.ids.len() - self.after.len();
        window.ids.splice(end..end, right);
        window
            .first_pieces
            .iter_mut()
            .for_each(|p| *p += left.len());
        vec![window]
    }

    fn unknown_for(&self, word: &str) -> Result<u32, DataError> {
        self.unknown.ok_or_else(|| {
            DataError::file(
                &self.path,
                format!(
                    "the word {word:?} gives no sub-token, and the tokenizer has no unknown \
                     token to give it instead"
                ),
            )
        })
    }

    /// The encoder's inputs for one sentence, each at most `max_len` sub-tokens with the special
    /// ones: the sentence whole if it fits, or else overlapping windows in which every word is
    /// scored exactly once, each with as much context on either side as fits. A word longer
    /// than a window keeps its first sub-tokens.
    pub fn windows(&self, pieces: &Pieces, max_len: usize) -> Vec<Window> {
        let budget = max_len.saturating_sub(self.specials()).max(1);
        if pieces.ids.len() <= budget {
            return vec![self.window(pieces, 0..pieces.words(), 0..pieces.words(), budget)];
        }
        // The scored words of each window take at most half of it, the rest is context.
        let core = (budget / 2).max(1);
        let mut windows = Vec::new();
        let mut start = 0;
        while start < pieces.words() {
            let mut end = start + 1;
            let mut used = pieces.of_word(start).len();
            while end < pieces.words() && used + pieces.of_word(end).len() <= core {
                used += pieces.of_word(end).len();
                end += 1;
            }
            let context = with_context(pieces, start..end, budget);
            windows.push(self.window(pieces, start..end, context, budget));
            start = end;
        }
        windows
    }

    /// The window over words `context` whose emissions for `scored` are used.
    fn window(
        &self,
        pieces: &Pieces,
        scored: Range<usize>,
        context: Range<usize>,
        budget: usize,
    ) -> Window {
        let mut ids = self.before.clone();
        let mut first_pieces = Vec::with_capacity(scored.len());
        for w in context {
            let word = pieces.of_word(w);
            let room = budget - (ids.len() - self.before.len());
            if room == 0 {
                break;
            }
            if scored.contains(&w) {
                first_pieces.push(ids.len());
            }
            ids.extend_from_slice(&pieces.ids[word.start..word.end.min(word.start + room)]);
        }
        ids.extend_from_slice(&self.after);
        Window {
            ids,
            scored,
            first_pieces,
        }
    }
}

/// The words around `scored` whose sub-tokens fit in `budget` with it, taken one at a time from
/// either side in turn.
fn with_context(pieces: &Pieces, scored: Range<usize>, budget: usize) -> Range<usize> {
    let mut used = pieces.word_starts[scored.end] - pieces.word_starts[scored.start];
    let (mut start, mut end) = (scored.start, scored.end);
    loop {
        let mut grew = false;
        if start > 0 && used + pieces.of_word(start - 1).len() <= budget {
            start -= 1;
            used += pieces.of_word(start).len();
            grew = true;
        }
        if end < pieces.words() && used + pieces.of_word(end).len() <= budget {
            used += pieces.of_word(end).len();
            end += 1;
            grew = true;
        }
        if !grew {
            return start..end;
        }
    }
}
