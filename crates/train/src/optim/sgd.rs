//! The word embedding's SGD-with-momentum update, row-sparse on the host ([`RowSparse`]).
//!
//! A batch touches a few hundred of the table's rows, but a dense update (Burn's optimiser, as
//! PyTorch's) builds a gradient the size of the whole table, clips it and moves every row by its
//! momentum at every step, a large share of a small batch's step under perf. Here a
//! row catches up on the steps it missed only when a batch touches it or the learning rate
//! changes. With no gradient, `k` momentum steps move a row by `lr · v · (μ + μ² + … + μᵏ)` and
//! leave it velocity `v · μᵏ`: the dense update's result, so both train the same model.
//!
//! Reading the whole table (to evaluate or save the model) computes the caught-up values without
//! storing them, and a checkpoint holds the lazy state as it is, so a resumed run rounds exactly
//! as an uninterrupted one.

use std::path::Path;

use super::{RowGradient, RowSparse, read_state, u64_at};
use crate::Result;

/// The word table's lazy SGD update with momentum: the rows a step touched move, and untouched rows catch up on their momentum when next touched.
#[derive(Debug, Clone)]
pub struct SparseMomentum {
    dim: usize,
    table: Vec<f32>,
    velocity: Vec<f32>,
    momentum: f64,
    /// Steps taken since every row was last current, all at the learning rate `lr`.
    steps: u64,
    lr: f64,
    /// The step through which each row (its vector and velocity) is current.
    current_through: Vec<u64>,
}

impl SparseMomentum {
    /// `table`: `[words, dim]` row-major; velocities start at zero, as the dense optimiser's.
    pub fn new(table: Vec<f32>, dim: usize, momentum: f64) -> Self {
        assert!(
            dim > 0 && table.len().is_multiple_of(dim),
            "a whole number of rows"
        );
        assert!((0.0..1.0).contains(&momentum), "momentum in [0, 1)");
        let rows = table.len() / dim;
        Self {
            dim,
            velocity: vec![0.0; table.len()],
            table,
            momentum,
            steps: 0,
            lr: 0.0,
            current_through: vec![0; rows],
        }
    }

    /// One momentum step with the gradient times `scale`: `v ← μ v + scale · g`, `w ← w − lr v`.
    fn momentum_step(&mut self, gradient: &RowGradient, scale: f64) {
        self.steps += 1;
        let (momentum, scale, lr) = (self.momentum as f32, scale as f32, self.lr as f32);
        for (row, grad) in gradient.rows() {
            self.bring_up_to_date_through(row, self.steps - 1);
            let span = row * self.dim..(row + 1) * self.dim;
            for ((w, v), g) in self.table[span.clone()]
                .iter_mut()
                .zip(&mut self.velocity[span])
                .zip(grad)
            {
                *v = momentum * *v + scale * g;
                *w -= lr * *v;
            }
            self.current_through[row] = self.steps;
        }
    }

    /// The whole table and the velocities, `[words, dim]` each, every row up to date; the state
    /// itself is left as it is.
    fn current(&self) -> (Vec<f32>, Vec<f32>) {
        let (mut table, mut velocity) = (self.table.clone(), self.velocity.clone());
        for (row, &through) in self.current_through.iter().enumerate() {
            let span = row * self.dim..(row + 1) * self.dim;
            catch_up(
                &mut table[span.clone()],
                &mut velocity[span],
                self.steps - through,
                self.lr,
                self.momentum,
            );
        }
        (table, velocity)
    }

    fn bring_all_up_to_date(&mut self) {
        for row in 0..self.current_through.len() {
            self.bring_up_to_date(row);
        }
        self.steps = 0;
        self.current_through.fill(0);
    }

    fn bring_up_to_date(&mut self, row: usize) {
        self.bring_up_to_date_through(row, self.steps);
    }

    /// Applies the gradient-free steps a row missed, up to step `through`.
    fn bring_up_to_date_through(&mut self, row: usize, through: u64) {
        let missed = through - self.current_through[row];
        self.current_through[row] = through;
        let span = row * self.dim..(row + 1) * self.dim;
        catch_up(
            &mut self.table[span.clone()],
            &mut self.velocity[span],
            missed,
            self.lr,
            self.momentum,
        );
    }

    /// Writes the whole state to `path`, rows not caught up included: little-endian `u64` rows,
    /// dimension and steps, the `f64` learning rate, the table's and the velocities' `f32`s, and
    /// each row's `u64` step.
    fn save_state(&self, path: &Path) -> Result<()> {
        let header = [
            self.current_through.len() as u64,
            self.dim as u64,
            self.steps,
        ];
        let mut bytes = Vec::with_capacity(Self::file_size(self.current_through.len(), self.dim));
        bytes.extend(header.iter().flat_map(|v| v.to_le_bytes()));
        bytes.extend_from_slice(&self.lr.to_le_bytes());
        bytes.extend(self.table.iter().flat_map(|v| v.to_le_bytes()));
        bytes.extend(self.velocity.iter().flat_map(|v| v.to_le_bytes()));
        bytes.extend(self.current_through.iter().flat_map(|v| v.to_le_bytes()));
        crate::io::write_atomic(path, &bytes)
    }

    fn file_size(rows: usize, dim: usize) -> usize {
        32 + 8 * rows * dim + 8 * rows
    }

    /// Reads a state written by [`save_state`](Self::save_state) for a table of this shape.
    fn load_state(&mut self, path: &Path) -> Result<()> {
        let (rows, dim) = (self.current_through.len(), self.dim);
        let bytes = read_state(
            path,
            rows,
            dim,
            Self::file_size(rows, dim),
            "training state",
        )?;
        self.steps = u64_at(&bytes, 2);
        self.lr = f64::from_le_bytes(bytes[24..32].try_into().expect("8 bytes"));
        let floats = |from: usize| {
            bytes[from..from + 4 * rows * dim]
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
                .collect::<Vec<f32>>()
        };
        self.table = floats(32);
        self.velocity = floats(32 + 4 * rows * dim);
        self.current_through = bytes[32 + 8 * rows * dim..]
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect();
        Ok(())
    }
}

impl RowSparse for SparseMomentum {
    /// A new rate brings every row up to date at the old one first.
    fn set_learning_rate(&mut self, lr: f64) {
        if lr != self.lr {
            self.bring_all_up_to_date();
            self.lr = lr;
        }
    }

    /// Each row is brought up to date first.
    fn lookup(&mut self, ids: &[i64]) -> Vec<f32> {
        let mut vectors = Vec::with_capacity(ids.len() * self.dim);
        for &id in ids {
            let row = id as usize;
            self.bring_up_to_date(row);
            vectors.extend_from_slice(&self.table[row * self.dim..(row + 1) * self.dim]);
        }
        vectors
    }

    fn step(&mut self, gradient: &RowGradient, scale: f64) {
        self.momentum_step(gradient, scale);
    }

    fn table(&self) -> Vec<f32> {
        self.current().0
    }

    fn save(&self, path: &Path) -> Result<()> {
        self.save_state(path)
    }

    fn load(&mut self, path: &Path) -> Result<()> {
        self.load_state(path)
    }
}

/// `missed` momentum steps without gradient, at rate `lr`, on one row's vector and velocity.
fn catch_up(vector: &mut [f32], velocity: &mut [f32], missed: u64, lr: f64, momentum: f64) {
    if missed == 0 || momentum == 0.0 {
        return;
    }
    let decay = momentum.powi(missed.min(i32::MAX as u64) as i32);
    let moved = (lr * momentum * (1.0 - decay) / (1.0 - momentum)) as f32;
    for (w, v) in vector.iter_mut().zip(velocity) {
        *w -= moved * *v;
        *v *= decay as f32;
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    /// The dense update every optimiser does: each row moves at every step.
    struct Dense {
        table: Vec<f32>,
        velocity: Vec<f32>,
    }

    impl Dense {
        fn step(&mut self, gradient: &RowGradient, dim: usize, scale: f64, lr: f64, mu: f64) {
            let mut full = vec![0.0f32; self.table.len()];
            for (row, g) in gradient.rows() {
                full[row * dim..(row + 1) * dim].copy_from_slice(g);
            }
            for ((w, v), g) in self.table.iter_mut().zip(&mut self.velocity).zip(&full) {
                *v = mu as f32 * *v + scale as f32 * g;
                *w -= lr as f32 * *v;
            }
        }
    }

    #[test]
    fn lazy_momentum_equals_the_dense_update() {
        let (rows, dim, mu) = (12, 3, 0.9);
        let mut rng = StdRng::seed_from_u64(5);
        let table: Vec<f32> = (0..rows * dim)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        let mut sparse = SparseMomentum::new(table.clone(), dim, mu);
        let mut dense = Dense {
            velocity: vec![0.0; table.len()],
            table,
        };
        for step in 0..60 {
            // The rate changes twice, as between epochs; some rows go unseen for long stretches.
            let lr = [0.1, 0.05, 0.02][step / 20];
            let ids: Vec<i64> = (0..4)
                .map(|_| rng.random_range(0..rows as i64 / 2) * 2)
                .collect();
            sparse.set_learning_rate(lr);
            let looked_up = sparse.lookup(&ids);
            for (slot, &id) in ids.iter().enumerate() {
                let want = &dense.table[id as usize * dim..(id as usize + 1) * dim];
                let got = &looked_up[slot * dim..(slot + 1) * dim];
                for (a, b) in want.iter().zip(got) {
                    assert!(
                        (a - b).abs() < 1e-5,
                        "step {step}, word {id}: {want:?} vs {got:?}"
                    );
                }
            }
            let grads: Vec<f32> = (0..ids.len() * dim)
                .map(|_| rng.random_range(-1.0..1.0))
                .collect();
            let gradient = RowGradient::new(&ids, &grads, dim);
            let scale = if step % 3 == 0 { 0.5 } else { 1.0 };
            sparse.step(&gradient, scale);
            dense.step(&gradient, dim, scale, lr, mu);
        }
        let (table, velocity) = sparse.current();
        for (name, got, want) in [
            ("table", table, &dense.table),
            ("velocity", velocity, &dense.velocity),
        ] {
            for (a, b) in got.iter().zip(want) {
                assert!((a - b).abs() < 1e-5, "{name}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn the_state_round_trips_as_it_is_and_a_wrong_shape_is_an_error() {
        let dir = std::env::temp_dir().join(format!("nertrain-words-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("words.bin");
        let mut words = SparseMomentum::new(vec![0.5; 8], 2, 0.9);
        for (id, g) in [(1, [1.0, -2.0]), (2, [0.5, 0.25]), (1, [3.0, 1.0])] {
            words.set_learning_rate(0.1);
            words.lookup(&[id]);
            words.step(&RowGradient::new(&[id], &g, 2), 1.0);
        }
        words.save_state(&path).unwrap();
        let mut loaded = SparseMomentum::new(vec![0.0; 8], 2, 0.9);
        loaded.load_state(&path).unwrap();
        assert_eq!(loaded.current(), words.current());
        assert_eq!(
            loaded.current_through, words.current_through,
            "rows left behind stay behind"
        );
        assert_eq!(loaded.lookup(&[2, 0]), words.lookup(&[2, 0]));
        let err = SparseMomentum::new(vec![0.0; 6], 2, 0.9)
            .load_state(&path)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("expected the word embedding's training state for 3 rows of 2"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
