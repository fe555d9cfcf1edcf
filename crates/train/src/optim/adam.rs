//! The word embedding's Adam update, row-sparse on the host, as PyTorch's `SparseAdam`: a step
//! moves only the rows the batch touched and decays only their moments, while the bias
//! corrections count every step. (Dense Adam, unlike dense SGD, cannot be caught up in closed
//! form, so this is the lazy variant, not the dense one computed late.)

use std::path::Path;

use super::{RowGradient, RowSparse, read_state, u64_at};
use crate::Result;

/// The word table's lazy Adam update (PyTorch's `SparseAdam`): only the rows a step touched, and their moments, move.
#[derive(Debug, Clone)]
pub struct SparseAdam {
    dim: usize,
    betas: (f64, f64),
    epsilon: f32,
    table: Vec<f32>,
    first_moment: Vec<f32>,
    second_moment: Vec<f32>,
    steps: u64,
    lr: f64,
}

impl SparseAdam {
    /// `table`: `[words, dim]` row-major; moments start at zero.
    pub fn new(table: Vec<f32>, dim: usize, betas: (f64, f64), epsilon: f64) -> Self {
        assert!(
            dim > 0 && table.len().is_multiple_of(dim),
            "a whole number of rows"
        );
        Self {
            dim,
            betas,
            epsilon: epsilon as f32,
            first_moment: vec![0.0; table.len()],
            second_moment: vec![0.0; table.len()],
            table,
            steps: 0,
            lr: 0.0,
        }
    }

    /// One Adam step on the touched rows, with the gradient times `scale`.
    fn adam_step(&mut self, gradient: &RowGradient, scale: f64) {
        self.steps += 1;
        let t = self.steps.min(i32::MAX as u64) as i32;
        let (beta_1, beta_2) = self.betas;
        let step_size = (self.lr * (1.0 - beta_2.powi(t)).sqrt() / (1.0 - beta_1.powi(t))) as f32;
        let (beta_1, beta_2, scale) = (beta_1 as f32, beta_2 as f32, scale as f32);
        let epsilon = self.epsilon;
        for (row, grad) in gradient.rows() {
            let span = row * self.dim..(row + 1) * self.dim;
            for (((w, m), v), &g) in self.table[span.clone()]
                .iter_mut()
                .zip(&mut self.first_moment[span.clone()])
                .zip(&mut self.second_moment[span])
                .zip(grad)
            {
                let g = scale * g;
                *m = beta_1 * *m + (1.0 - beta_1) * g;
                *v = beta_2 * *v + (1.0 - beta_2) * g * g;
                *w -= step_size * *m / (v.sqrt() + epsilon);
            }
        }
    }

    /// Writes the whole state to `path`: little-endian `u64` rows, dimension and steps, the
    /// `f64` learning rate, then the table's and the two moments' `f32`s.
    fn save_state(&self, path: &Path) -> Result<()> {
        let rows = self.table.len() / self.dim;
        let mut bytes = Vec::with_capacity(Self::file_size(rows, self.dim));
        for word in [rows as u64, self.dim as u64, self.steps] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        bytes.extend_from_slice(&self.lr.to_le_bytes());
        for values in [&self.table, &self.first_moment, &self.second_moment] {
            bytes.extend(values.iter().flat_map(|v| v.to_le_bytes()));
        }
        crate::io::write_atomic(path, &bytes)
    }

    /// Reads a state written by [`save_state`](Self::save_state) for a table of this shape.
    fn load_state(&mut self, path: &Path) -> Result<()> {
        let (rows, dim) = (self.table.len() / self.dim, self.dim);
        let bytes = read_state(path, rows, dim, Self::file_size(rows, dim), "Adam state")?;
        self.steps = u64_at(&bytes, 2);
        self.lr = f64::from_le_bytes(bytes[24..32].try_into().expect("8 bytes"));
        let mut floats = bytes[32..]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")));
        for values in [
            &mut self.table,
            &mut self.first_moment,
            &mut self.second_moment,
        ] {
            values
                .iter_mut()
                .for_each(|v| *v = floats.next().expect("checked length"));
        }
        Ok(())
    }

    fn file_size(rows: usize, dim: usize) -> usize {
        32 + 3 * 4 * rows * dim
    }
}

impl RowSparse for SparseAdam {
    fn set_learning_rate(&mut self, lr: f64) {
        self.lr = lr;
    }

    fn lookup(&mut self, ids: &[i64]) -> Vec<f32> {
        let dim = self.dim;
        ids.iter()
            .flat_map(|&id| &self.table[id as usize * dim..(id as usize + 1) * dim])
            .copied()
            .collect()
    }

    fn step(&mut self, gradient: &RowGradient, scale: f64) {
        self.adam_step(gradient, scale);
    }

    fn table(&self) -> Vec<f32> {
        self.table.clone()
    }

    fn save(&self, path: &Path) -> Result<()> {
        self.save_state(path)
    }

    fn load(&mut self, path: &Path) -> Result<()> {
        self.load_state(path)
    }
}

#[cfg(test)]
mod tests {
    use burn::module::Param;
    use burn::optim::{AdamConfig, GradientsParams};
    use burn::tensor::{Device, Tensor, TensorData};

    use super::*;

    const DEFAULTS: ((f64, f64), f64) = ((0.9, 0.999), 1e-8);

    /// Burn's dense Adam on a one-row table equals the sparse update when the row is touched at
    /// every step (where lazy and dense Adam agree), at other betas than the defaults too. (ε is
    /// added as PyTorch's `SparseAdam` adds it, before the bias correction, so a large ε would
    /// differ from dense Adam's; at these sizes that is below f32's resolution.)
    #[test]
    fn equals_dense_adam_on_rows_touched_every_step() {
        for (betas, epsilon) in [DEFAULTS, ((0.8, 0.99), 1e-7)] {
            equals_dense_adam(betas, epsilon);
        }
    }

    fn equals_dense_adam(betas: (f64, f64), epsilon: f64) {
        let device = Device::default().autodiff();
        let dim = 3;
        let start = vec![0.5f32, -0.25, 1.0];
        let mut sparse = SparseAdam::new(start.clone(), dim, betas, epsilon);
        let mut dense = AdamConfig::new()
            .with_beta_1(betas.0 as f32)
            .with_beta_2(betas.1 as f32)
            .with_epsilon(epsilon as f32)
            .init();
        let mut weight = Param::from_tensor(
            Tensor::<2>::from_data(TensorData::new(start, [1, dim]), &device).require_grad(),
        );
        for step in 0..5 {
            let lr = if step < 3 { 0.1 } else { 0.05 };
            let g = [1.0 + step as f32, -2.0, 0.5 * step as f32];
            sparse.set_learning_rate(lr);
            sparse.lookup(&[0]);
            sparse.step(&RowGradient::new(&[0], &g, dim), 0.5);
            let target = Tensor::<2>::from_data(TensorData::new(g.to_vec(), [1, dim]), &device);
            // d/dw of sum(w * g * 0.5) is 0.5 g.
            let loss = (weight.val() * target * 0.5).sum();
            let grads = GradientsParams::from_grads(loss.backward(), &weight);
            weight = dense.step(lr, weight, grads);
        }
        let want: Vec<f32> = weight.val().into_data().iter::<f32>().collect();
        for (a, b) in sparse.table().iter().zip(&want) {
            assert!((a - b).abs() < 1e-5, "{:?} vs {want:?}", sparse.table());
        }
    }

    #[test]
    fn untouched_rows_stand_still_and_the_state_round_trips() {
        let mut words = SparseAdam::new(vec![0.5; 6], 2, DEFAULTS.0, DEFAULTS.1);
        for (id, g) in [(1, [1.0, -2.0]), (1, [0.5, 0.25])] {
            words.set_learning_rate(0.1);
            words.lookup(&[id]);
            words.step(&RowGradient::new(&[id], &g, 2), 1.0);
        }
        assert_eq!(&words.table()[..2], &[0.5, 0.5]);
        assert_eq!(&words.table()[4..], &[0.5, 0.5]);
        assert_ne!(&words.table()[2..4], &[0.5, 0.5]);

        let dir = std::env::temp_dir().join(format!("nertrain-adam-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("words.bin");
        words.save(&path).unwrap();
        let mut loaded = SparseAdam::new(vec![0.0; 6], 2, DEFAULTS.0, DEFAULTS.1);
        loaded.load(&path).unwrap();
        for touched in [&mut words, &mut loaded] {
            touched.set_learning_rate(0.1);
            touched.lookup(&[2]);
            touched.step(&RowGradient::new(&[2], &[1.0, 1.0], 2), 1.0);
        }
        assert_eq!(loaded.table(), words.table(), "steps go on as before");
        let err = SparseAdam::new(vec![0.0; 4], 2, DEFAULTS.0, DEFAULTS.1)
            .load(&path)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("expected the word embedding's Adam state for 2 rows of 2"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
