//! Linear-chain conditional random field over a batch of padded sequences.
//!
//! Scores: `start[y_0] + Σ_t emit[t, y_t] + Σ_{t≥1} trans[y_{t-1}, y_t] + end[y_{L-1}]`.
//! Every operation runs on the whole batch as tensors; a sequence of length `L` in a batch
//! padded to `T` stops changing after step `L-1` (the mask blends the old state through), so
//! padding never enters its scores. Every sequence must have at least one token.

use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{Device, Distribution, Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};

#[derive(Config, Debug)]
pub struct CrfConfig {
    pub num_tags: usize,
}

impl CrfConfig {
    /// Parameters start uniform in ±0.1, as pytorch-crf's do.
    pub fn init(&self, device: &Device) -> Crf {
        let k = self.num_tags;
        let uniform = Distribution::Uniform(-0.1, 0.1);
        Crf {
            transitions: Param::from_tensor(Tensor::random([k, k], uniform, device)),
            start: Param::from_tensor(Tensor::random([k], uniform, device)),
            end: Param::from_tensor(Tensor::random([k], uniform, device)),
        }
    }
}

#[derive(Module, Debug)]
pub struct Crf {
    /// `[from, to]` transition scores.
    pub transitions: Param<Tensor<2>>,
    pub start: Param<Tensor<1>>,
    pub end: Param<Tensor<1>>,
}

/// How per-sentence negative log-likelihoods become one loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reduction {
    /// Summed over sentences (Lample et al., NCRF++, the reference's default).
    Sum,
    /// Averaged over sentences.
    Mean,
    /// Summed, then divided by the number of real tokens.
    TokenMean,
}

/// `log Σ exp(x)` along `dim`, kept as a size-1 dimension. The max is detached: it cancels out of
/// the value and the gradient alike, and detaching saves its backward.
pub fn log_sum_exp<const D: usize>(x: Tensor<D>, dim: usize) -> Tensor<D> {
    let max = x.clone().max_dim(dim).detach();
    (x - max.clone()).exp().sum_dim(dim).log() + max
}

/// Per-step views of a `[batch, time, ...]` tensor as `[batch, ...]` tensors.
fn time_steps(x: Tensor<3>) -> Vec<Tensor<2>> {
    let [batch, _, k] = x.dims();
    x.swap_dims(0, 1)
        .iter_dim(0)
        .map(|step| step.reshape([batch, k]))
        .collect()
}

/// Blends `next` where `mask` is 1 and keeps `previous` where it is 0.
fn advance(previous: Tensor<2>, next: Tensor<2>, mask: Tensor<2>) -> Tensor<2> {
    next * mask.clone() + previous * (mask.neg() + 1.0)
}

impl Crf {
    pub fn num_tags(&self) -> usize {
        self.start.dims()[0]
    }

    /// `log Z(x)` for each sequence by the forward algorithm in log space.
    ///
    /// `emissions`: `[batch, time, tags]`; `mask`: `[batch, time]` with 1.0 at real tokens.
    pub fn log_partition(&self, emissions: Tensor<3>, mask: Tensor<2>) -> Tensor<1> {
        let [batch, _, k] = emissions.dims();
        let transitions = self.transitions.val().unsqueeze_dim::<3>(0);
        let mut steps = time_steps(emissions).into_iter();
        let masks = time_steps(mask.unsqueeze_dim(2));
        let first = steps.next().expect("a sequence has at least one token");
        let mut alpha = self.start.val().unsqueeze_dim(0) + first;
        for (emission, mask) in steps.zip(masks.into_iter().skip(1)) {
            let scores = alpha.clone().unsqueeze_dim::<3>(2)
                + transitions.clone()
                + emission.unsqueeze_dim(1);
            let next = log_sum_exp(scores, 1).reshape([batch, k]);
            alpha = advance(alpha, next, mask);
        }
        log_sum_exp(alpha + self.end.val().unsqueeze_dim(0), 1).reshape([batch])
    }

    /// The score of the given tag paths. `tags`: `[batch, time]`, any value at padding.
    pub fn path_score(
        &self,
        emissions: Tensor<3>,
        tags: Tensor<2, Int>,
        mask: Tensor<2>,
        lengths: &[usize],
    ) -> Tensor<1> {
        let [batch, time, k] = emissions.dims();
        let device = emissions.device();
        let emitted = emissions
            .gather(2, tags.clone().unsqueeze_dim(2))
            .reshape([batch, time]);
        let mut score = (emitted * mask.clone()).sum_dim(1).reshape([batch]);

        let first = tags.clone().slice([0..batch, 0..1]).reshape([batch]);
        score = score + self.start.val().select(0, first);
        if time > 1 {
            let from = tags.clone().slice([0..batch, 0..time - 1]);
            let to = tags.clone().slice([0..batch, 1..time]);
            let pair = (from * k as i64 + to).reshape([batch * (time - 1)]);
            let moved = self
                .transitions
                .val()
                .reshape([k * k])
                .select(0, pair)
                .reshape([batch, time - 1]);
            score = score
                + (moved * mask.slice([0..batch, 1..time]))
                    .sum_dim(1)
                    .reshape([batch]);
        }
        let last_index: Vec<i64> = lengths.iter().map(|&len| len as i64 - 1).collect();
        let last_index =
            Tensor::<2, Int>::from_data(TensorData::new(last_index, [batch, 1]), &device);
        let last = tags.gather(1, last_index).reshape([batch]);
        score + self.end.val().select(0, last)
    }

    /// Negative log-likelihood of the gold tags.
    pub fn nll(
        &self,
        emissions: Tensor<3>,
        tags: Tensor<2, Int>,
        mask: Tensor<2>,
        lengths: &[usize],
        reduction: Reduction,
    ) -> Tensor<1> {
        let log_z = self.log_partition(emissions.clone(), mask.clone());
        let nll = log_z - self.path_score(emissions, tags, mask, lengths);
        match reduction {
            Reduction::Sum => nll.sum(),
            Reduction::Mean => nll.mean(),
            Reduction::TokenMean => nll.sum() / lengths.iter().sum::<usize>() as f64,
        }
    }

    /// The best path of every sequence and its score, by batched max-product; the backpointers
    /// come to the host once and each path is read back from them.
    pub fn viterbi(
        &self,
        emissions: Tensor<3>,
        mask: Tensor<2>,
        lengths: &[usize],
    ) -> Vec<(Vec<usize>, f32)> {
        let [batch, time, k] = emissions.dims();
        let transitions = self.transitions.val().unsqueeze_dim::<3>(0);
        let mut steps = time_steps(emissions).into_iter();
        let masks = time_steps(mask.unsqueeze_dim(2));
        let first = steps.next().expect("a sequence has at least one token");
        let mut score = self.start.val().unsqueeze_dim(0) + first;
        let mut backpointers = Vec::with_capacity(time.saturating_sub(1));
        for (emission, mask) in steps.zip(masks.into_iter().skip(1)) {
            let scores = score.clone().unsqueeze_dim::<3>(2) + transitions.clone();
            let (best, from) = scores.max_dim_with_indices(1);
            score = advance(score, best.reshape([batch, k]) + emission, mask);
            backpointers.push(from.reshape([batch, k]));
        }
        let final_scores: Vec<f32> = (score + self.end.val().unsqueeze_dim(0))
            .into_data()
            .iter::<f32>()
            .collect();
        let backpointers: Vec<i64> = if backpointers.is_empty() {
            Vec::new()
        } else {
            Tensor::stack::<3>(backpointers, 0)
                .into_data()
                .iter::<i64>()
                .collect()
        };

        (0..batch)
            .map(|b| {
                let row = &final_scores[b * k..(b + 1) * k];
                let (mut tag, &best) = row
                    .iter()
                    .enumerate()
                    .max_by(|x, y| x.1.total_cmp(y.1))
                    .expect("at least one tag");
                let len = lengths[b];
                let mut path = vec![0; len];
                path[len - 1] = tag;
                // backpointers[t - 1] leads from step t back to step t - 1.
                for t in (1..len).rev() {
                    tag = backpointers[((t - 1) * batch + b) * k + tag] as usize;
                    path[t - 1] = tag;
                }
                (path, best)
            })
            .collect()
    }
}
