//! A cache of each word's share of the BiLSTM's input projection, for inference.
//!
//! Without character features the input projection, `[word embedding, features] · W + b`, is
//! half the arithmetic of tagging, and its word part depends on nothing but the word: computed
//! once per word, it is a row copy ever after. The vocabulary is ordered most frequent first, so
//! keeping the first [`WordGates::CACHED_WORDS`] ids covers nearly every token in little memory
//! (a row is `8 × hidden` floats); rarer words are computed with their batch.

use std::sync::{PoisonError, RwLock};

use burn::tensor::{Int, Tensor, TensorData};

use crate::{BatchTensors, Tagger};

/// Valid for the weights of one model: build a new one when they change. Shared by the threads
/// that decode batches in parallel: the lock is held to copy rows, never while computing them.
#[derive(Debug, Default)]
pub struct WordGates {
    table: RwLock<Table>,
}

#[derive(Debug, Default)]
struct Table {
    width: usize,
    /// `[known ids, width]`: row `id` once `known[id]`.
    rows: Vec<f32>,
    known: Vec<bool>,
}

impl WordGates {
    pub const CACHED_WORDS: usize = 50_000;

    /// The batch's word gates, `[batch, max_len, 8 * hidden]`.
    pub fn gates(&self, model: &Tagger, inputs: &BatchTensors) -> Tensor<3> {
        let [batch, time] = inputs.words.dims();
        let device = inputs.words.device();
        let ids: Vec<usize> = inputs.word_ids.iter().map(|&id| id as usize).collect();
        let width = 8 * model.encoder.d_hidden();
        let cached = model.words.weight.dims()[0].min(Self::CACHED_WORDS);
        let mut missing: Vec<usize> = {
            let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
            ids.iter()
                .copied()
                .filter(|&id| !table.known.get(id).copied().unwrap_or(false))
                .collect()
        };
        missing.sort_unstable();
        missing.dedup();
        let mut computed: Vec<f32> = Vec::new();
        if !missing.is_empty() {
            let index: Vec<i64> = missing.iter().map(|&id| id as i64).collect();
            let index =
                Tensor::<1, Int>::from_data(TensorData::new(index, [missing.len()]), &device);
            computed = model.word_gates(index).into_data().iter::<f32>().collect();
            let mut table = self.table.write().unwrap_or_else(PoisonError::into_inner);
            if table.known.is_empty() {
                table.width = width;
                table.known = vec![false; cached];
                table.rows = vec![0.0; cached * width];
            }
            for (row, &id) in missing.iter().enumerate().filter(|&(_, &id)| id < cached) {
                table.rows[id * width..(id + 1) * width]
                    .copy_from_slice(&computed[row * width..(row + 1) * width]);
                table.known[id] = true;
            }
        }
        let mut gates = Vec::with_capacity(ids.len() * width);
        let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
        for &id in &ids {
            let row = if id < cached {
                &table.rows[id * width..(id + 1) * width]
            } else {
                let at = missing.binary_search(&id).expect("computed with the batch");
                &computed[at * width..(at + 1) * width]
            };
            gates.extend_from_slice(row);
        }
        drop(table);
        Tensor::from_data(TensorData::new(gates, [batch, time, width]), &device)
    }
}
