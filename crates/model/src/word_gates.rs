//! A cache of each word's share of the BiLSTM's input projection, for inference.
//!
//! The input projection, `[word embedding, features] · W + b`, is half the arithmetic of tagging.
//! Most of it depends on nothing but the word as written: its embedding, its casing class and
//! its character features ([`Network::form_gates`]). Computed once per word, that share is a row
//! copy ever after, and the character network runs once per distinct word of a corpus instead of
//! once per token. Only what depends on the sentence or the document (the character language
//! model, mention casing) is computed with each batch.
//!
//! The rows are computed before decoding ([`WordGates::fill`]), in chunks fixed by the order in
//! which the sentences first use each word, and only read while batches are decoded in parallel.
//! A row's last bits depend on which words it was computed with; filled by whichever thread met
//! a word first, tagging the same text twice could differ in them.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

use burn::tensor::{Device, Int, Tensor, TensorData};
use nertrain_data::{Batch, Encoded, Vocab};
use rayon::prelude::*;

use crate::{ContextShares, Network, host_values};

/// Valid for the weights of one model: build a new one when they change.
#[derive(Debug)]
pub struct WordGates {
    table: RwLock<Table>,
    /// Rows kept at most; words beyond them are computed with each batch that has them.
    capacity_bytes: usize,
    /// The dictionary places' and feature values' shares of the input projection, computed
    /// once.
    context: std::sync::OnceLock<Option<ContextShares>>,
}

#[derive(Debug, Default)]
struct Table {
    /// The rows, `[8 * hidden]` each, one block per chunk of words computed together: a table
    /// that grows is never copied.
    blocks: Vec<Vec<f32>>,
    /// A word's row, by its [`form`]: (block, row in the block).
    index: Forms<(usize, usize)>,
}

impl Table {
    fn row(&self, (block, row): (usize, usize), width: usize) -> &[f32] {
        &self.blocks[block][row * width..(row + 1) * width]
    }
}

/// What a word's row depends on ([`form`]).
type Form = Box<[i64]>;

/// Where a word is used: (sentence, position).
type Place = (usize, usize);

/// Maps keyed by a word's [`Form`], looked up once per token: hashed with foldhash, as SipHash
/// (the standard maps' default) guards against keys chosen to collide, which a tagger's own
/// vocabulary ids are not, and its cost showed in tagging time.
type Forms<V> = HashMap<Form, V, foldhash::fast::FixedState>;

/// What a word's row depends on, into `key`: its word id, and its casing class and characters
/// (those the model reads, the first `max_word_len`) where the model reads them.
fn form(
    model: &Network,
    word: i64,
    casing: i64,
    chars: impl Iterator<Item = i64>,
    key: &mut Vec<i64>,
) {
    key.clear();
    key.push(word);
    if model.casing.is_some() {
        key.push(casing);
    }
    if model.chars.is_some() || model.char_lstm.is_some() {
        key.extend(chars);
    }
}

impl Default for WordGates {
    fn default() -> Self {
        Self::with_capacity(Self::CAPACITY_BYTES)
    }
}

/// Where a word slot's row comes from.
#[derive(Clone, Copy)]
enum Row {
    /// (block, row in the block) of the table.
    Kept((usize, usize)),
    /// Computed with this batch: the row in [`WordGates::gates`]'s `computed`.
    New(usize),
    /// A padding slot.
    Padding,
}

impl WordGates {
    /// Room for the rows of more distinct words than a CoNLL-2003 split has, at hidden size 100.
    pub const CAPACITY_BYTES: usize = 64 << 20;

    /// Words whose rows are computed together by [`fill`](Self::fill).
    const CHUNK_WORDS: usize = 512;

    /// An empty cache that keeps at most about `capacity_bytes` of rows.
    pub fn with_capacity(capacity_bytes: usize) -> Self {
        Self {
            table: RwLock::default(),
            capacity_bytes,
            context: std::sync::OnceLock::new(),
        }
    }

    /// Each dictionary place id's and feature value id's share of the model's input
    /// projection ([`Network::context_shares`]), computed on first use; `None` without
    /// dictionary or feature columns.
    pub fn context_shares(&self, model: &Network) -> Option<&ContextShares> {
        self.context.get_or_init(|| model.context_shares()).as_ref()
    }

    /// Computes and keeps the rows of the words of `sentences` not kept yet, as far as the
    /// capacity allows. The result depends on the sentences alone, not on the threads.
    pub fn fill(&self, model: &Network, sentences: &[Encoded], max_word_len: usize) {
        let width = 8 * model.encoder.d_hidden();
        let mut table = self.table.write().unwrap_or_else(PoisonError::into_inner);
        let room = (self.capacity_bytes / (4 * width)).saturating_sub(table.index.len());
        // The new words in the order the sentences first use them, found in parts on all threads
        // and merged in order: the same list however many threads there are.
        let part = sentences
            .len()
            .div_ceil(rayon::current_num_threads())
            .max(1);
        let parts: Vec<Vec<(Form, Place)>> = sentences
            .par_chunks(part)
            .enumerate()
            .map(|(p, chunk)| {
                let mut key = Vec::new();
                let mut met: Forms<()> = Forms::default();
                let mut new = Vec::new();
                for (i, sentence) in chunk.iter().enumerate() {
                    for t in 0..sentence.len() {
                        let chars = sentence.chars[t].iter().take(max_word_len);
                        let (word, casing) = (sentence.words[t] as i64, sentence.casing[t] as i64);
                        form(model, word, casing, chars.map(|&c| c as i64), &mut key);
                        if !table.index.contains_key(key.as_slice())
                            && met.insert(key.as_slice().into(), ()).is_none()
                        {
                            new.push((key.as_slice().into(), (p * part + i, t)));
                        }
                    }
                }
                new
            })
            .collect();
        let first_block = table.blocks.len();
        let mut words: Vec<Place> = Vec::new();
        let mut index: Forms<(usize, usize)> = Forms::default();
        for (form, place) in parts.into_iter().flatten() {
            if words.len() == room {
                break;
            }
            if !table.index.contains_key(&form) && !index.contains_key(&form) {
                let chunk = words.len() / Self::CHUNK_WORDS;
                index.insert(form, (first_block + chunk, words.len() % Self::CHUNK_WORDS));
                words.push(place);
            }
        }
        let device = model.words.weight.device();
        let blocks: Vec<Vec<f32>> = words
            .par_chunks(Self::CHUNK_WORDS)
            .map(|chunk| {
                self.form_rows(
                    model,
                    &FormInputs::of_words(sentences, chunk, max_word_len, &device),
                )
            })
            .collect();
        table.blocks.extend(blocks);
        table.index.extend(index);
    }

    /// The rows of `forms`, `[words, 8 * hidden]`: their [`Network::form_gates`], with what a
    /// word in no dictionary phrase brings ([`ContextShares::in_no_phrase`]) where the model
    /// reads rows with their context shares ([`Network::reads_rows`]), so that only words in
    /// phrases add to them there.
    fn form_rows(&self, model: &Network, forms: &FormInputs) -> Vec<f32> {
        let mut rows = host_values(model.form_gates(forms));
        let in_no_phrase = model
            .reads_rows(&model.words.weight.device())
            .then(|| self.context_shares(model))
            .flatten()
            .map(|shares| shares.in_no_phrase.as_slice())
            .filter(|shares| !shares.is_empty());
        if let Some(in_no_phrase) = in_no_phrase {
            crate::vectorize::vectorized(
                #[inline(always)]
                || {
                    for row in rows.chunks_exact_mut(in_no_phrase.len()) {
                        row.iter_mut().zip(in_no_phrase).for_each(|(r, s)| *r += s);
                    }
                },
            );
        }
        rows
    }

    /// The batch's word gates, `[batch, max_len, 8 * hidden]`: kept rows where there are, the
    /// others computed with the batch.
    pub fn gates(&self, model: &Network, batch: &Batch) -> Tensor<3> {
        let width = 8 * model.encoder.d_hidden();
        let gates = self.with_rows(model, batch, |row| {
            let mut gates = Vec::with_capacity(batch.words.len() * width);
            for slot in 0..batch.words.len() {
                gates.extend_from_slice(row(slot));
            }
            gates
        });
        Tensor::from_data(
            TensorData::new(gates, [batch.size(), batch.max_len, width]),
            &model.words.weight.device(),
        )
    }

    /// Calls `gather` with each word slot's row of the batch, `[8 * hidden]` (zeros at padding:
    /// what the LSTM computes there never reaches a real token): kept rows where there are, the
    /// others computed with the batch.
    pub fn with_rows<R>(
        &self,
        model: &Network,
        batch: &Batch,
        gather: impl for<'a> FnOnce(&'a (dyn Fn(usize) -> &'a [f32] + Sync)) -> R,
    ) -> R {
        let device = model.words.weight.device();
        let width = 8 * model.encoder.d_hidden();
        let slots = batch.words.len();
        let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
        let mut key = Vec::new();
        let mut rows = Vec::with_capacity(slots);
        // The batch's words not kept, each once: its first slot, by form.
        let mut new: Forms<usize> = Forms::default();
        let mut new_slots = Vec::new();
        let char_width = batch.chars.max_word_len;
        for slot in 0..slots {
            if slot % batch.max_len >= batch.lengths[slot / batch.max_len] {
                rows.push(Row::Padding);
                continue;
            }
            let chars = &batch.chars.ids[slot * char_width..][..batch.chars.lengths[slot]];
            let (word, casing) = (batch.words[slot], batch.casing[slot]);
            form(model, word, casing, chars.iter().copied(), &mut key);
            rows.push(match table.index.get(key.as_slice()) {
                Some(&at) => Row::Kept(at),
                None => Row::New(*new.entry(key.as_slice().into()).or_insert_with(|| {
                    new_slots.push(slot);
                    new_slots.len() - 1
                })),
            });
        }
        let computed = if new_slots.is_empty() {
            Vec::new()
        } else {
            self.form_rows(model, &FormInputs::of_slots(batch, &new_slots, &device))
        };
        let zeros = vec![0.0; width];
        gather(&|slot| match rows[slot] {
            Row::Kept(at) => table.row(at, width),
            Row::New(row) => &computed[row * width..(row + 1) * width],
            Row::Padding => &zeros,
        })
    }
}

/// Words as [`Network::form_gates`] reads them, one row each.
#[derive(Debug, Clone)]
pub struct FormInputs {
    /// `[words, 1]`
    pub words: Tensor<2, Int>,
    /// Each word's casing class, `[words, 1]`.
    pub casing: Tensor<2, Int>,
    /// `[words, max_word_len]`, padded with `<pad>`.
    pub chars: Tensor<2, Int>,
    /// Each word's characters.
    pub char_lengths: Vec<usize>,
}

impl FormInputs {
    fn new(
        words: Vec<i64>,
        casing: Vec<i64>,
        chars: Vec<i64>,
        char_lengths: Vec<usize>,
        device: &Device,
    ) -> Self {
        let n = words.len();
        let column = |values: Vec<i64>| Tensor::from_data(TensorData::new(values, [n, 1]), device);
        let char_width = chars.len() / n.max(1);
        Self {
            words: column(words),
            casing: column(casing),
            chars: Tensor::from_data(TensorData::new(chars, [n, char_width]), device),
            char_lengths,
        }
    }

    /// The words at `slots` of `batch`.
    fn of_slots(batch: &Batch, slots: &[usize], device: &Device) -> Self {
        let width = batch.chars.max_word_len;
        Self::new(
            slots.iter().map(|&slot| batch.words[slot]).collect(),
            slots.iter().map(|&slot| batch.casing[slot]).collect(),
            slots
                .iter()
                .flat_map(|&slot| &batch.chars.ids[slot * width..(slot + 1) * width])
                .copied()
                .collect(),
            slots
                .iter()
                .map(|&slot| batch.chars.lengths[slot])
                .collect(),
            device,
        )
    }

    /// The words at `(sentence, position)` of `sentences`, their first `max_word_len`
    /// characters.
    fn of_words(
        sentences: &[Encoded],
        words: &[Place],
        max_word_len: usize,
        device: &Device,
    ) -> Self {
        let chars_of = |&(i, t): &Place| &sentences[i].chars[t][..];
        let char_lengths: Vec<usize> = words
            .iter()
            .map(|w| chars_of(w).len().min(max_word_len))
            .collect();
        let width = char_lengths.iter().copied().max().unwrap_or(0).max(1);
        let mut chars = vec![Vocab::PAD_ID as i64; words.len() * width];
        for (row, (word, &length)) in words.iter().zip(&char_lengths).enumerate() {
            for (slot, &c) in chars[row * width..]
                .iter_mut()
                .zip(&chars_of(word)[..length])
            {
                *slot = c as i64;
            }
        }
        Self::new(
            words
                .iter()
                .map(|&(i, t)| sentences[i].words[t] as i64)
                .collect(),
            words
                .iter()
                .map(|&(i, t)| sentences[i].casing[t] as i64)
                .collect(),
            chars,
            char_lengths,
            device,
        )
    }
}
