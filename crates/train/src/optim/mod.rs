//! The word embedding's optimisers, row-sparse on the host, the fine-tuned encoder's AdamW,
//! and global-norm clipping.
//!
//! A batch touches a few hundred rows of the word table, so its update runs on the host over
//! those rows only ([`RowSparse`]), for the same rule as the rest of the model's (Burn's
//! optimiser): SGD with momentum ([`SparseMomentum`]) or Adam ([`SparseAdam`]). The optimiser
//! owns the table while training; the model's copy is refreshed from it to evaluate or save.

mod adam;
mod adamw;
pub mod clip;
mod sgd;

use std::path::Path;

pub use adam::SparseAdam;
pub use adamw::EncoderAdamW;
pub use sgd::SparseMomentum;

use crate::{Error, Result};

/// A row-sparse update of the word table.
pub trait RowSparse {
    /// The learning rate of the steps that follow.
    fn set_learning_rate(&mut self, lr: f64);
    /// The current vectors of `ids`, `[ids, dim]` row-major.
    fn lookup(&mut self, ids: &[i64]) -> Vec<f32>;
    /// One step on the rows of `gradient`, times `scale` (the clipping factor).
    fn step(&mut self, gradient: &RowGradient, scale: f64);
    /// The whole table as trained so far, `[words, dim]`.
    fn table(&self) -> Vec<f32>;
    /// Writes the whole state (table, moments, step counts) to `path`.
    fn save(&self, path: &Path) -> Result<()>;
    /// Reads a state written by `save` for a table of this shape.
    fn load(&mut self, path: &Path) -> Result<()>;
}

/// A batch's gradient for the word table: one summed row per distinct word.
#[derive(Debug, Clone, PartialEq)]
pub struct RowGradient {
    dim: usize,
    rows: Vec<usize>,
    values: Vec<f32>,
}

impl RowGradient {
    /// Sums the gradients of a batch's word slots (`slot_gradients`: `[slots, dim]`) by word id.
    pub fn new(ids: &[i64], slot_gradients: &[f32], dim: usize) -> Self {
        assert_eq!(
            ids.len() * dim,
            slot_gradients.len(),
            "a gradient row per slot"
        );
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&slot| ids[slot]);
        let mut rows: Vec<usize> = Vec::new();
        let mut values: Vec<f32> = Vec::new();
        for slot in order {
            let row = ids[slot] as usize;
            if rows.last() != Some(&row) {
                rows.push(row);
                values.extend(std::iter::repeat_n(0.0, dim));
            }
            let last = values.len() - dim;
            let sum = &mut values[last..];
            for (s, g) in sum
                .iter_mut()
                .zip(&slot_gradients[slot * dim..(slot + 1) * dim])
            {
                *s += g;
            }
        }
        Self { dim, rows, values }
    }

    /// Each touched row, with its summed gradient.
    pub fn rows(&self) -> impl Iterator<Item = (usize, &[f32])> {
        self.rows.iter().copied().zip(self.values.chunks(self.dim))
    }

    /// The sum of the squared gradient values.
    pub fn squared_norm(&self) -> f64 {
        self.values
            .iter()
            .map(|&v| f64::from(v) * f64::from(v))
            .sum()
    }
}

/// The bytes of a word-table state file (`what` names it in errors): its length must be `size`
/// and its header, little-endian `u64`s, must start with `rows` and `dim`.
pub(crate) fn read_state(
    path: &Path,
    rows: usize,
    dim: usize,
    size: usize,
    what: &str,
) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, "read", e))?;
    if bytes.len() != size || (u64_at(&bytes, 0), u64_at(&bytes, 1)) != (rows as u64, dim as u64) {
        return Err(Error::model(
            path,
            format!(
                "expected the word embedding's {what} for {rows} rows of {dim} ({size} bytes), \
                 found {} bytes",
                bytes.len()
            ),
        ));
    }
    Ok(bytes)
}

/// The `i`-th little-endian `u64` of `bytes`.
pub(crate) fn u64_at(bytes: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(bytes[8 * i..8 * (i + 1)].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_slot_gradients_per_word() {
        let g = RowGradient::new(&[3, 0, 3, 1], &[1., 2., 10., 20., 3., 4., 5., 6.], 2);
        assert_eq!(g.rows, vec![0, 1, 3]);
        assert_eq!(g.values, vec![10., 20., 5., 6., 4., 6.]);
        assert_eq!(g.squared_norm(), 100. + 400. + 25. + 36. + 16. + 36.);
    }
}
