//! A cache of each word's share of the BiLSTM's input projection, for inference.
//!
//! The input projection, `[word embedding, features] · W + b`, is half the arithmetic of tagging.
//! Most of it depends on nothing but the word as written: its embedding, its casing class and
//! its character features ([`Tagger::form_gates`]). Computed once per word, that share is a row
//! copy ever after, and the character network runs once per distinct word of a corpus instead of
//! once per token, which also bounds its memory to a batch's new words. Only what depends on the
//! sentence or the document (the character language model, mention casing) is computed with
//! each batch.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{PoisonError, RwLock};

use burn::tensor::{Int, Tensor, TensorData};
use nertrain_data::Batch;

use crate::Tagger;

/// Valid for the weights of one model: build a new one when they change. Shared by the threads
/// that decode batches in parallel: the lock is held to look rows up and copy them, never while
/// computing them.
#[derive(Debug)]
pub struct WordGates {
    table: RwLock<Table>,
    /// Rows kept at most; a batch's words beyond them are computed with it and not kept.
    capacity_bytes: usize,
}

#[derive(Debug, Default)]
struct Table {
    /// The rows, `[8 * hidden]` each, in the order their words were met, [`BLOCK_ROWS`] to a
    /// block: a table that grows is never copied, and holds no more than a block unused.
    blocks: Vec<Vec<f32>>,
    rows: usize,
    /// A word's row, by its [`form`](WordGates::form).
    index: Forms<usize>,
}

const BLOCK_ROWS: usize = 1024;

/// Maps keyed by a word's form.
type Forms<V> = HashMap<Box<[i64]>, V, BuildHasherDefault<FormHasher>>;

/// rustc's FxHash. Forms are a few small ids, looked up once per token: SipHash, the standard
/// maps' default, guards against keys chosen to collide, which a tagger's own vocabulary ids are
/// not, and cost 2% of tagging time.
#[derive(Debug, Default, Clone, Copy)]
struct FormHasher(u64);

impl FormHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FormHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_usize(&mut self, value: usize) {
        self.add(value as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl Table {
    fn row(&self, row: usize, width: usize) -> &[f32] {
        let at = (row % BLOCK_ROWS) * width;
        &self.blocks[row / BLOCK_ROWS][at..at + width]
    }

    fn push(&mut self, values: &[f32]) -> usize {
        if self.rows.is_multiple_of(BLOCK_ROWS) {
            self.blocks
                .push(Vec::with_capacity(BLOCK_ROWS * values.len()));
        }
        let block = self.blocks.last_mut().expect("a block with room");
        block.extend_from_slice(values);
        self.rows += 1;
        self.rows - 1
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
    Kept(usize),
    /// Computed with this batch: the row in [`WordGates::gates`]'s `computed`.
    New(usize),
}

impl WordGates {
    /// 64 MiB: 20,000 words at hidden size 100, more than a CoNLL-2003 split has.
    pub const CAPACITY_BYTES: usize = 64 << 20;

    pub fn with_capacity(capacity_bytes: usize) -> Self {
        Self {
            table: RwLock::default(),
            capacity_bytes,
        }
    }

    /// What a word slot's row depends on: its word id, and its casing class and characters
    /// where the model reads them.
    fn form(model: &Tagger, batch: &Batch, slot: usize, key: &mut Vec<i64>) {
        key.clear();
        key.push(batch.words[slot]);
        if model.casing.is_some() {
            key.push(batch.casing[slot]);
        }
        if model.chars.is_some() || model.char_lstm.is_some() {
            let width = batch.chars.max_word_len;
            let length = batch.chars.lengths[slot];
            key.extend_from_slice(&batch.chars.ids[slot * width..slot * width + length]);
        }
    }

    /// The batch's word gates, `[batch, max_len, 8 * hidden]`.
    pub fn gates(&self, model: &Tagger, batch: &Batch) -> Tensor<3> {
        let device = model.words.weight.device();
        let width = 8 * model.encoder.d_hidden();
        let slots = batch.words.len();
        let mut key = Vec::new();
        let mut rows = Vec::with_capacity(slots);
        // The batch's words not kept yet, each once: its first slot, by form.
        let mut new: Forms<usize> = Forms::default();
        let mut new_slots = Vec::new();
        {
            let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
            for slot in 0..slots {
                Self::form(model, batch, slot, &mut key);
                let row = match table.index.get(key.as_slice()) {
                    Some(&row) => Row::Kept(row),
                    None => Row::New(*new.entry(key.as_slice().into()).or_insert_with(|| {
                        new_slots.push(slot);
                        new_slots.len() - 1
                    })),
                };
                rows.push(row);
            }
        }
        let computed: Vec<f32> = if new_slots.is_empty() {
            Vec::new()
        } else {
            model
                .form_gates(&FormInputs::of_slots(batch, &new_slots, &device))
                .into_data()
                .iter::<f32>()
                .collect()
        };
        if !new.is_empty() {
            let mut table = self.table.write().unwrap_or_else(PoisonError::into_inner);
            let room = (self.capacity_bytes / (4 * width)).saturating_sub(table.index.len());
            // Another thread may have kept some of them meanwhile; its rows are the same.
            let mut keep: Vec<(Box<[i64]>, usize)> = new
                .into_iter()
                .filter(|(form, _)| !table.index.contains_key(form))
                .collect();
            keep.sort_unstable_by_key(|&(_, row)| row);
            for (form, row) in keep.into_iter().take(room) {
                let at = table.push(&computed[row * width..(row + 1) * width]);
                table.index.insert(form, at);
            }
        }
        let mut gates = Vec::with_capacity(slots * width);
        let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
        for row in rows {
            gates.extend_from_slice(match row {
                Row::Kept(row) => table.row(row, width),
                Row::New(row) => &computed[row * width..(row + 1) * width],
            });
        }
        drop(table);
        Tensor::from_data(
            TensorData::new(gates, [batch.size(), batch.max_len, width]),
            &device,
        )
    }
}

/// Words as [`Tagger::form_gates`] reads them, one row each.
#[derive(Debug, Clone)]
pub struct FormInputs {
    /// `[words, 1]`
    pub words: Tensor<2, Int>,
    /// Each word's casing class, `[words, 1]`.
    pub casing: Tensor<2, Int>,
    /// `[words, max_word_len]`
    pub chars: Tensor<2, Int>,
    pub char_lengths: Vec<usize>,
}

impl FormInputs {
    /// The words at `slots` of `batch`.
    fn of_slots(batch: &Batch, slots: &[usize], device: &burn::tensor::Device) -> Self {
        let n = slots.len();
        let column = |values: &[i64]| {
            let picked: Vec<i64> = slots.iter().map(|&slot| values[slot]).collect();
            Tensor::<2, Int>::from_data(TensorData::new(picked, [n, 1]), device)
        };
        let width = batch.chars.max_word_len;
        let chars: Vec<i64> = slots
            .iter()
            .flat_map(|&slot| &batch.chars.ids[slot * width..(slot + 1) * width])
            .copied()
            .collect();
        Self {
            words: column(&batch.words),
            casing: column(&batch.casing),
            chars: Tensor::from_data(TensorData::new(chars, [n, width]), device),
            char_lengths: slots
                .iter()
                .map(|&slot| batch.chars.lengths[slot])
                .collect(),
        }
    }
}
