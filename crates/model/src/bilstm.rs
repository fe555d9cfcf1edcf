//! A bidirectional LSTM that respects sequence lengths.
//!
//! burn-nn's `BiLstm` runs its backward direction from the padded end, so padding leaks into
//! real tokens' states. Here each sequence is reversed within its own length before the backward
//! direction reads it, so in both directions padding comes after every real token and can never
//! reach one. The input projections of all steps and both directions are one matmul; each step
//! is one batched matmul of both directions' hidden states.

use burn::config::Config;
use burn::module::{Module, Param};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Distribution, Tensor, TensorData};

use crate::recurrence;

/// A bidirectional LSTM's sizes.
#[derive(Config, Debug)]
pub struct BiLstmConfig {
    /// Size of each input vector.
    pub d_input: usize,
    /// Hidden size of each direction; the output has twice this.
    pub d_hidden: usize,
}

impl BiLstmConfig {
    /// Weights uniform in ±1/√hidden as in PyTorch, and forget-gate biases at 1 so early training
    /// keeps its memory.
    pub fn init(&self, device: &Device) -> BiLstm {
        let h = self.d_hidden;
        let bound = 1.0 / (h as f64).sqrt();
        let uniform = Distribution::Uniform(-bound, bound);
        let mut input = LinearConfig::new(self.d_input, 8 * h).init(device);
        input.weight = Param::from_tensor(Tensor::random([self.d_input, 8 * h], uniform, device));
        let bias: Vec<f32> = (0..8 * h)
            .map(|i| if (i % (4 * h)) / h == 1 { 1.0 } else { 0.0 })
            .collect();
        input.bias = Some(Param::from_tensor(Tensor::from_data(
            TensorData::new(bias, [8 * h]),
            device,
        )));
        BiLstm {
            input,
            recurrent: Param::from_tensor(Tensor::random([2, h, 4 * h], uniform, device)),
        }
    }
}

/// A bidirectional LSTM that reads each sentence to its length only (padding never reaches a real token).
#[derive(Module, Debug)]
pub struct BiLstm {
    /// Input to gates for both directions: `[d_input, 8 * hidden]`, forward's gates first, each
    /// direction's in the order input, forget, cell, output.
    pub input: Linear,
    /// Hidden to gates: `[direction, hidden, 4 * hidden]`.
    pub recurrent: Param<Tensor<3>>,
}

impl BiLstm {
    /// Hidden size of each direction.
    pub fn d_hidden(&self) -> usize {
        self.recurrent.dims()[1]
    }

    /// `x`: `[batch, time, d_input]` → `[batch, time, 2 * hidden]`, forward state first. Outputs at
    /// padded positions are unspecified.
    pub fn forward(&self, x: Tensor<3>, lengths: &[usize]) -> Tensor<3> {
        self.forward_gates(self.input.forward(x), lengths)
    }

    /// [`forward`](Self::forward) from the input projections, `[batch, time, 8 * hidden]`.
    pub fn forward_gates(&self, gates: Tensor<3>, lengths: &[usize]) -> Tensor<3> {
        recurrence::run(gates, self.recurrent.val(), lengths)
    }
}
