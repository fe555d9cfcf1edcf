//! The linear-chain conditional random field: its parameters, the scheme's constraints, and every
//! algorithm over it, in two implementations side by side.
//!
//! Scores: `start[y_0] + Σ_t emit[t, y_t] + Σ_{t≥1} trans[y_{t-1}, y_t] + end[y_{L-1}]`.
//! [`Potentials`] are the scores an algorithm runs on: the learned parameters plus, when the tag
//! scheme is enforced, a large negative penalty on forbidden moves ([`Constraints`]). The penalty
//! is finite, never −∞, so log-sum-exp and its gradient stay free of NaN.
//!
//! | question | tensors, whole batch (`tensor.rs`, any backend, autodiff) | host, one sentence (`host`, f64) |
//! |---|---|---|
//! | log Z | [`Potentials::log_partition`] `[batch]` | [`host::ForwardBackward`]`.log_z` |
//! | gold-path score, loss | [`Potentials::path_score`], [`Potentials::nll`] `[batch]` | — |
//! | loss of partial labels | [`Potentials::partial_nll`] `[batch]` | [`host::partial_nll`] |
//! | marginals | [`Potentials::marginals`] `[batch, time, tags]` | [`host::ForwardBackward::marginal`] |
//! | best path | [`Potentials::viterbi`] | [`host::viterbi`] |
//! | n best paths | [`Potentials::nbest`] | — |
//! | an entity's probability | — | [`host::ForwardBackward::segment_probability`] |
//!
//! Training runs the tensor version (it is what runs on a GPU); tagging runs the host version
//! for best paths, marginals and confidences, where per-sentence work over a tagger's few tags is
//! cheaper than any kernel launch. Both are tested against brute-force enumeration of every tag sequence
//! (`tests/crf_brute_force.rs`) and against each other. In the tensor version a sequence of length
//! `L` in a batch padded to `T` stops changing after step `L-1` (the mask blends the old state
//! through), so padding never enters its scores. Every sequence needs at least one token: input
//! that is empty or of mismatched shapes is a [`CrfError`], in both versions.

use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{Device, Distribution, Tensor, TensorData};
use nertrain_data::{TagScheme, transition_allowed};
use serde::{Deserialize, Serialize};

pub mod host;
mod tensor;

pub use tensor::{ScoredPath, host_emissions, log_sum_exp};

/// The score added to a forbidden move: far below any real path, yet finite.
pub const FORBIDDEN: f32 = -10_000.0;

/// Input the CRF's algorithms cannot score.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CrfError {
    /// A batch without sequences, or a sequence without tokens.
    #[error("nothing to score: every sequence needs at least one token")]
    Empty,
    /// Emissions over another number of tags than the CRF's.
    #[error("emissions over {found} tags for a CRF over {expected}")]
    Tags {
        /// The CRF's tags.
        expected: usize,
        /// The emissions'.
        found: usize,
    },
    /// A mask, tag or length input whose shape is not the emissions' `[batch, time]`.
    #[error("{what} of shape {found:?}; the emissions need {expected:?}")]
    Shape {
        /// Which input.
        what: &'static str,
        /// The shape it needs.
        expected: Vec<usize>,
        /// Its shape.
        found: Vec<usize>,
    },
    /// A sequence length outside `1..=time`.
    #[error("sequence {sequence} has length {length}, outside 1..={time}")]
    Length {
        /// Which sequence of the batch, from 0.
        sequence: usize,
        /// Its length.
        length: usize,
        /// The batch's time steps.
        time: usize,
    },
    /// Host emissions that are not whole rows of `tags` scores.
    #[error("{values} emission scores are not whole rows of {tags} tags")]
    Ragged {
        /// Scores given.
        values: usize,
        /// Tags a row holds.
        tags: usize,
    },
    /// An n-best list of no paths.
    #[error("an n-best list needs n >= 1")]
    NoPaths,
}

/// The CRF's size.
#[derive(Config, Debug)]
pub struct CrfConfig {
    /// Tags.
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

/// A linear-chain CRF: start, transition and end scores over the tags.
#[derive(Module, Debug)]
pub struct Crf {
    /// `[from, to]` transition scores.
    pub transitions: Param<Tensor<2>>,
    /// Scores of starting in each tag.
    pub start: Param<Tensor<1>>,
    /// Scores of ending in each tag.
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

impl Reduction {
    /// Reduces per-sentence losses `[batch]` of sentences of `lengths` tokens to one.
    pub fn apply(self, per_sentence: Tensor<1>, lengths: &[usize]) -> Tensor<1> {
        match self {
            Reduction::Sum => per_sentence.sum(),
            Reduction::Mean => per_sentence.mean(),
            Reduction::TokenMean => per_sentence.sum() / lengths.iter().sum::<usize>() as f64,
        }
    }
}

impl Crf {
    /// Tags.
    pub fn num_tags(&self) -> usize {
        self.start.dims()[0]
    }

    /// The parameters as tensors, with the constraints' penalties added when given.
    pub fn potentials(&self, constraints: Option<&Constraints>) -> Potentials {
        let (start, transitions, end) = (self.start.val(), self.transitions.val(), self.end.val());
        match constraints {
            None => Potentials {
                start,
                transitions,
                end,
            },
            Some(c) => {
                let device = start.device();
                let k = self.num_tags();
                let tensor1 =
                    |v: &[f32]| Tensor::<1>::from_data(TensorData::new(v.to_vec(), [k]), &device);
                let penalty =
                    Tensor::<2>::from_data(TensorData::new(c.transitions.clone(), [k, k]), &device);
                Potentials {
                    start: start + tensor1(&c.start),
                    transitions: transitions + penalty,
                    end: end + tensor1(&c.end),
                }
            }
        }
    }
}

/// Penalties that keep decoding (and, optionally, training) to well-formed tag sequences: 0 where a
/// move is allowed, [`FORBIDDEN`] where it is not.
#[derive(Debug, Clone, PartialEq)]
pub struct Constraints {
    /// `[k]`
    pub start: Vec<f32>,
    /// `[from * k + to]`
    pub transitions: Vec<f32>,
    /// `[k]`
    pub end: Vec<f32>,
}

impl Constraints {
    /// The moves `scheme` forbids among `tags` (the tag vocabulary, in id order).
    pub fn for_scheme(tags: &[String], scheme: TagScheme) -> Self {
        let penalty = |allowed: bool| if allowed { 0.0 } else { FORBIDDEN };
        Self {
            start: tags
                .iter()
                .map(|t| penalty(transition_allowed(scheme, None, Some(t))))
                .collect(),
            transitions: tags
                .iter()
                .flat_map(|from| {
                    tags.iter()
                        .map(move |to| penalty(transition_allowed(scheme, Some(from), Some(to))))
                })
                .collect(),
            end: tags
                .iter()
                .map(|t| penalty(transition_allowed(scheme, Some(t), None)))
                .collect(),
        }
    }
}

/// Start, transition and end scores as tensors: what every algorithm below runs on.
#[derive(Debug, Clone)]
pub struct Potentials {
    /// `[k]`
    pub start: Tensor<1>,
    /// `[from, to]`
    pub transitions: Tensor<2>,
    /// `[k]`
    pub end: Tensor<1>,
}

/// Per-token and pairwise tag marginals.
#[derive(Debug, Clone)]
pub struct Marginals {
    /// `[batch, time, tags]`: p(y_t = k | x); zero at padding.
    pub unary: Tensor<3>,
    /// `[batch, time - 1, tags, tags]`: p(y_t = i, y_{t+1} = j | x); zero where t + 1 is padding.
    pub pairwise: Tensor<4>,
}
