//! Self-attention over windows packed end to end, as one operation on flex: queries, keys and
//! values `[rows, hidden]` (each window's rows one after another), and per window and head the
//! scores, softmax, dropout and weighted sum in one pass over a `[len, len]` buffer, written
//! into the output's columns of that head. No padding is computed and no `[batch, heads, len,
//! len]` tensor is built; the backward pass keeps only the softmax's probabilities.

use std::sync::Arc;

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Dispatch, Flex, backend_extension};
use burn::nn::Dropout;
use burn::tensor::Tensor;

use super::fused::DropMask;
use crate::host::{Matrix, f32s, flex, gemm_block_into, gemm_into};

/// Where the windows lie in the packed rows, and how the hidden size splits into heads.
#[derive(Debug, Clone)]
pub struct Windows {
    /// Each window's rows, in order.
    pub lengths: Vec<usize>,
    /// Attention heads.
    pub heads: usize,
}

/// Each window's self-attention, `[rows, hidden]`, from its rows of `query`, `key` and
/// `value` (`[rows, hidden]`), `dropout` on the attention weights. Only where
/// [`has_fused`](super::fused::has_fused) holds.
pub fn packed(
    query: Tensor<2>,
    key: Tensor<2>,
    value: Tensor<2>,
    windows: Windows,
    dropout: &Dropout,
) -> Tensor<2> {
    let mask = DropMask::draw(dropout, &query.device());
    Tensor::from_dispatch(<Dispatch as PackedAttention>::packed_attention(
        query.into_dispatch(),
        key.into_dispatch(),
        value.into_dispatch(),
        windows,
        mask,
    ))
}

/// Packed self-attention as one backend operation, differentiated by hand under autodiff.
#[backend_extension(Flex, Autodiff)]
pub trait PackedAttention: Backend {
    /// See [`packed`].
    fn packed_attention(
        query: FloatTensor<Self>,
        key: FloatTensor<Self>,
        value: FloatTensor<Self>,
        windows: Windows,
        mask: Option<DropMask>,
    ) -> FloatTensor<Self>;
}

impl PackedAttention for Flex {
    fn packed_attention(
        query: FlexTensor,
        key: FlexTensor,
        value: FlexTensor,
        windows: Windows,
        mask: Option<DropMask>,
    ) -> FlexTensor {
        let inputs = Inputs::new(&query, &key, &value, windows, mask);
        inputs.forward(false).0
    }
}

impl<C: CheckpointStrategy> PackedAttention for Autodiff<Flex, C> {
    fn packed_attention(
        query: FloatTensor<Self>,
        key: FloatTensor<Self>,
        value: FloatTensor<Self>,
        windows: Windows,
        mask: Option<DropMask>,
    ) -> FloatTensor<Self> {
        let inputs = Inputs::new(
            query.primitive(),
            key.primitive(),
            value.primitive(),
            windows,
            mask,
        );
        match AttentionBackward
            .prepare::<C>([query.node(), key.node(), value.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let (output, probabilities) = inputs.forward(true);
                let state = Saved {
                    inputs: Arc::new(inputs),
                    probabilities: Arc::new(probabilities),
                };
                prep.finish(state, output)
            }
            OpsKind::UnTracked(prep) => prep.finish(inputs.forward(false).0),
        }
    }
}

/// The operation's inputs, contiguous.
#[derive(Debug)]
struct Inputs {
    query: FlexTensor,
    key: FlexTensor,
    value: FlexTensor,
    windows: Windows,
    mask: Option<DropMask>,
    hidden: usize,
}

/// One window's block of one head: where it starts in the packed `[rows, hidden]` values, its
/// length, and where its `[len, len]` weights start among all blocks'.
#[derive(Debug, Clone, Copy)]
struct Block {
    offset: usize,
    len: usize,
    weights: usize,
}

impl Inputs {
    fn new(
        query: &FlexTensor,
        key: &FlexTensor,
        value: &FlexTensor,
        windows: Windows,
        mask: Option<DropMask>,
    ) -> Self {
        let [rows, hidden] = query.layout().shape().dims::<2>();
        assert_eq!(
            windows.lengths.iter().sum::<usize>(),
            rows,
            "windows cover the rows"
        );
        assert!(
            hidden.is_multiple_of(windows.heads),
            "heads divide the hidden size"
        );
        Self {
            query: query.to_contiguous(),
            key: key.to_contiguous(),
            value: value.to_contiguous(),
            windows,
            mask,
            hidden,
        }
    }

    fn head_size(&self) -> usize {
        self.hidden / self.windows.heads
    }

    /// Every (window, head) block, windows first.
    fn blocks(&self) -> impl Iterator<Item = Block> + '_ {
        let (hidden, heads, head_size) = (self.hidden, self.windows.heads, self.head_size());
        let mut start = 0;
        let mut weights = 0;
        self.windows.lengths.iter().flat_map(move |&len| {
            let (window_start, window_weights) = (start, weights);
            start += len;
            weights += heads * len * len;
            (0..heads).map(move |h| Block {
                offset: window_start * hidden + h * head_size,
                len,
                weights: window_weights + h * len * len,
            })
        })
    }

    /// `values`' rows of `block`'s head.
    fn rows<'a>(&self, values: &'a [f32], block: Block) -> Matrix<'a> {
        Matrix::block(
            &values[block.offset..],
            block.len,
            self.head_size(),
            self.hidden,
        )
    }

    /// The output `[rows, hidden]`, and when `keep` the softmax probabilities of every block.
    fn forward(&self, keep: bool) -> (FlexTensor, Vec<f32>) {
        let (q, k, v) = (f32s(&self.query), f32s(&self.key), f32s(&self.value));
        let mut out = vec![0.0; q.len()];
        let mut kept = Vec::new();
        let mut weights = Vec::new();
        let scale = (self.head_size() as f32).sqrt();
        for block in self.blocks() {
            weights.resize(block.len * block.len, 0.0);
            gemm_into(
                &mut weights,
                false,
                self.rows(q, block),
                self.rows(k, block).t(),
            );
            softmax_rows(&mut weights, block.len, scale);
            if keep {
                kept.extend_from_slice(&weights);
            }
            if let Some(mask) = &self.mask {
                mask.apply_in_place(&mut weights, block.weights);
            }
            let weights = Matrix::new(&weights, block.len);
            let into = &mut out[block.offset..];
            gemm_block_into(into, self.hidden, false, weights, self.rows(v, block));
        }
        (flex(out, [q.len() / self.hidden, self.hidden]), kept)
    }

    /// The gradients of the query, key and value from the output's, `d_out`.
    fn backward(&self, probabilities: &[f32], d_out: &[f32]) -> [Vec<f32>; 3] {
        let (q, k, v) = (f32s(&self.query), f32s(&self.key), f32s(&self.value));
        let [mut d_q, mut d_k, mut d_v] = std::array::from_fn(|_| vec![0.0; q.len()]);
        let scale = (self.head_size() as f32).sqrt();
        let (mut dropped, mut d_weights) = (Vec::new(), Vec::new());
        for block in self.blocks() {
            let n = block.len * block.len;
            let probabilities = &probabilities[block.weights..block.weights + n];
            let d_out = self.rows(d_out, block);
            // The weights as the forward pass applied them, and their gradient.
            dropped.clear();
            dropped.extend_from_slice(probabilities);
            d_weights.resize(n, 0.0);
            gemm_into(&mut d_weights, false, d_out, self.rows(v, block).t());
            if let Some(mask) = &self.mask {
                mask.apply_in_place(&mut dropped, block.weights);
                mask.apply_in_place(&mut d_weights, block.weights);
            }
            let dropped = Matrix::new(&dropped, block.len);
            gemm_block_into(
                &mut d_v[block.offset..],
                self.hidden,
                false,
                dropped.t(),
                d_out,
            );
            // Through the softmax and the scaling: the scores' gradient.
            softmax_backward_rows(&mut d_weights, probabilities, block.len, scale);
            let d_scores = Matrix::new(&d_weights, block.len);
            let (query, key) = (self.rows(q, block), self.rows(k, block));
            gemm_block_into(&mut d_q[block.offset..], self.hidden, false, d_scores, key);
            gemm_block_into(
                &mut d_k[block.offset..],
                self.hidden,
                false,
                d_scores.t(),
                query,
            );
        }
        [d_q, d_k, d_v]
    }
}

/// Each row of `scores` `[len, len]` divided by `scale`, then its softmax, as Burn's.
fn softmax_rows(scores: &mut [f32], len: usize, scale: f32) {
    for row in scores.chunks_exact_mut(len) {
        row.iter_mut().for_each(|x| *x /= scale);
        let max = row.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
        row.iter_mut().for_each(|x| *x = (*x - max).exp());
        let sum: f32 = row.iter().sum();
        row.iter_mut().for_each(|x| *x /= sum);
    }
}

/// `grad` `[len, len]` of the softmax's output `probabilities` → the gradient of the scores
/// before their division by `scale`.
fn softmax_backward_rows(grad: &mut [f32], probabilities: &[f32], len: usize, scale: f32) {
    for (g, p) in grad
        .chunks_exact_mut(len)
        .zip(probabilities.chunks_exact(len))
    {
        let dot: f32 = g.iter().zip(p).map(|(g, p)| g * p).sum();
        g.iter_mut()
            .zip(p)
            .for_each(|(g, &p)| *g = p * (*g - dot) / scale);
    }
}

#[derive(Debug)]
struct AttentionBackward;

#[derive(Debug, Clone)]
struct Saved {
    inputs: Arc<Inputs>,
    probabilities: Arc<Vec<f32>>,
}

impl Backward<Flex, 3> for AttentionBackward {
    type State = Saved;

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<Flex>(&ops.node).to_contiguous();
        let inputs = &ops.state.inputs;
        let gradients = inputs.backward(&ops.state.probabilities, f32s(&grad));
        let rows = f32s(&grad).len() / inputs.hidden;
        for (node, gradient) in ops.parents.into_iter().zip(gradients) {
            if let Some(node) = node {
                grads.register::<Flex>(node.id, flex(gradient, [rows, inputs.hidden]));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use burn::nn::DropoutConfig;
    use burn::tensor::activation::softmax;
    use burn::tensor::{Device, Distribution, TensorData, Tolerance};

    use super::*;

    /// Burn's ops on one window of `len` rows at a time, weights through `mask` as given.
    fn reference(
        q: Tensor<2>,
        k: Tensor<2>,
        v: Tensor<2>,
        lengths: &[usize],
        heads: usize,
    ) -> Tensor<2> {
        let hidden = q.dims()[1];
        let d = hidden / heads;
        let mut start = 0;
        let mut outs = Vec::new();
        for &len in lengths {
            let by_head = |t: &Tensor<2>| {
                t.clone()
                    .slice([start..start + len, 0..hidden])
                    .reshape([len, heads, d])
                    .swap_dims(0, 1)
            };
            let scores = by_head(&q)
                .matmul(by_head(&k).transpose())
                .div_scalar((d as f32).sqrt());
            let out = softmax(scores, 2).matmul(by_head(&v));
            outs.push(out.swap_dims(0, 1).reshape([len, hidden]));
            start += len;
        }
        Tensor::cat(outs, 0)
    }

    /// `fused` and `burns` agree to 1e-5, and so do the gradients of `inputs` through each
    /// (weighted by `upstream`).
    fn agree(fused: Tensor<2>, burns: Tensor<2>, upstream: Tensor<2>, inputs: [&Tensor<2>; 3]) {
        let close = |a: Tensor<2>, b: Tensor<2>| {
            a.into_data()
                .assert_approx_eq::<f32>(&b.into_data(), Tolerance::absolute(1e-5))
        };
        close(fused.clone(), burns.clone());
        let fused_grads = (fused * upstream.clone()).sum().backward();
        let burns_grads = (burns * upstream).sum().backward();
        for t in inputs {
            close(t.grad(&fused_grads).unwrap(), t.grad(&burns_grads).unwrap());
        }
    }

    #[test]
    fn packed_attention_has_the_values_and_gradients_of_burns_ops_window_by_window() {
        let device = Device::flex().autodiff();
        device.seed(2);
        let (lengths, heads, hidden) = (vec![3, 1, 5, 5], 2, 6);
        let rows: usize = lengths.iter().sum();
        let input = || {
            Tensor::<2>::random([rows, hidden], Distribution::Normal(0.0, 1.5), &device)
                .require_grad()
        };
        let (q, k, v) = (input(), input(), input());
        let upstream = Tensor::<2>::random([rows, hidden], Distribution::Default, &device);
        let no_dropout = DropoutConfig::new(0.0).init();
        let windows = Windows {
            lengths: lengths.clone(),
            heads,
        };
        let fused = packed(q.clone(), k.clone(), v.clone(), windows, &no_dropout);
        let burns = reference(q.clone(), k.clone(), v.clone(), &lengths, heads);
        agree(fused, burns, upstream, [&q, &k, &v]);
    }

    #[test]
    fn dropout_drops_the_weights_the_mask_says_in_the_output_and_the_gradients() {
        let device = Device::flex().autodiff();
        let (len, heads, hidden) = (5, 2, 4);
        let d = hidden / heads;
        let input = || {
            Tensor::<2>::random([len, hidden], Distribution::Normal(0.0, 1.5), &device)
                .require_grad()
        };
        let (q, k, v) = (input(), input(), input());
        let upstream = Tensor::<2>::random([len, hidden], Distribution::Default, &device);
        let dropout = DropoutConfig::new(0.4).init();
        // The mask the operation draws after this seed, as a tensor of 0 and 1 / keep.
        device.seed(8);
        let mask = DropMask::draw(&dropout, &device).unwrap();
        let mut scaled = vec![1.0; heads * len * len];
        mask.apply_in_place(&mut scaled, 0);
        assert!(scaled.contains(&0.0) && scaled.iter().any(|&x| x > 1.0));
        let mask = Tensor::<3>::from_data(TensorData::new(scaled, [heads, len, len]), &device);

        device.seed(8);
        let windows = Windows {
            lengths: vec![len],
            heads,
        };
        let fused = packed(q.clone(), k.clone(), v.clone(), windows, &dropout);
        let by_head = |t: &Tensor<2>| t.clone().reshape([len, heads, d]).swap_dims(0, 1);
        let scores = by_head(&q)
            .matmul(by_head(&k).transpose())
            .div_scalar((d as f32).sqrt());
        let burns = (softmax(scores, 2) * mask)
            .matmul(by_head(&v))
            .swap_dims(0, 1)
            .reshape([len, hidden]);
        agree(fused, burns, upstream, [&q, &k, &v]);
    }
}
