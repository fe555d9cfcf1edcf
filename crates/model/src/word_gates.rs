//! A cache of each word's share of the BiLSTM's input projection, for inference.
//!
//! Without character features the input projection, `[word embedding, features] · W + b`, is
//! half the arithmetic of tagging, and its word part depends on nothing but the word: computed
//! once per word, it is a row copy ever after. The vocabulary is ordered most frequent first, so
//! keeping the first [`WordGates::CACHED_WORDS`] ids covers nearly every token in little memory
//! (a row is `8 × hidden` floats); rarer words are computed with their batch.

use burn::tensor::{Int, Tensor, TensorData};

use crate::{BatchTensors, Tagger};

/// Valid for the weights of one model: build a new one when they change.
#[derive(Debug, Default, Clone)]
pub struct WordGates {
    width: usize,
    /// `[known ids, width]`: row `id` once `known[id]`.
    rows: Vec<f32>,
    known: Vec<bool>,
}

impl WordGates {
    pub const CACHED_WORDS: usize = 50_000;

    /// The batch's word gates, `[batch, max_len, 8 * hidden]`.
    pub fn gates(&mut self, model: &Tagger, inputs: &BatchTensors) -> Tensor<3> {
        let [batch, time] = inputs.words.dims();
        let device = inputs.words.device();
        let ids: Vec<usize> = inputs.word_ids.iter().map(|&id| id as usize).collect();
        if self.known.is_empty() {
            self.width = 8 * model.encoder.d_hidden();
            let cached = model.words.weight.dims()[0].min(Self::CACHED_WORDS);
            self.known = vec![false; cached];
            self.rows = vec![0.0; cached * self.width];
        }
        let width = self.width;
        let mut missing: Vec<usize> = ids
            .iter()
            .copied()
            .filter(|&id| !self.known.get(id).copied().unwrap_or(false))
            .collect();
        missing.sort_unstable();
        missing.dedup();
        let mut uncached: Vec<(usize, usize)> = Vec::new();
        let mut computed: Vec<f32> = Vec::new();
        if !missing.is_empty() {
            let index: Vec<i64> = missing.iter().map(|&id| id as i64).collect();
            let index =
                Tensor::<1, Int>::from_data(TensorData::new(index, [missing.len()]), &device);
            computed = model.word_gates(index).into_data().iter::<f32>().collect();
            for (row, &id) in missing.iter().enumerate() {
                let values = &computed[row * width..(row + 1) * width];
                if id < self.known.len() {
                    self.rows[id * width..(id + 1) * width].copy_from_slice(values);
                    self.known[id] = true;
                } else {
                    uncached.push((id, row));
                }
            }
        }
        let mut gates = Vec::with_capacity(ids.len() * width);
        for &id in &ids {
            let row = if id < self.known.len() {
                &self.rows[id * width..(id + 1) * width]
            } else {
                let at = uncached
                    .binary_search_by_key(&id, |&(id, _)| id)
                    .map(|i| uncached[i].1)
                    .expect("computed with the batch");
                &computed[at * width..(at + 1) * width]
            };
            gates.extend_from_slice(row);
        }
        Tensor::from_data(TensorData::new(gates, [batch, time, width]), &device)
    }
}
