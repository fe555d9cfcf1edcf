//! The linear-chain conditional random field: its parameters, the scheme's constraints, and every
//! algorithm over it, in two implementations side by side.
//!
//! Scores: `start[y_0] + Σ_t emit[t, y_t] + Σ_{t≥1} trans[y_{t-1}, y_t] + end[y_{L-1}]`.
//! [`Potentials`] are the scores an algorithm runs on: the learned parameters plus, when the tag
//! scheme is enforced, a large negative penalty on forbidden moves ([`Constraints`]). The penalty
//! is finite, never −∞, so log-sum-exp and its gradient stay free of NaN.
//!
//! | question | tensors, whole batch (`tensor.rs`, any backend, autodiff) | host, one sentence (`host.rs`, f64) |
//! |---|---|---|
//! | log Z | [`Potentials::log_partition`] `[batch]` | [`Potentials::forward_backward`]`.log_z` |
//! | gold-path score, loss | [`Potentials::path_score`], [`Potentials::nll`] `[batch]` | [`Potentials::row_score`] |
//! | loss of partial labels | [`Potentials::partial_nll`] `[batch]` | [`Potentials::row_partial_nll`] |
//! | marginals | [`Potentials::marginals`] `[batch, time, tags]` | [`ForwardBackward::marginal`], [`ForwardBackward::pair_marginal`] |
//! | loss against a teacher's marginals | [`Potentials::distillation_loss`] `[batch]` | — |
//! | best path | [`Potentials::viterbi`] | [`Potentials::row_viterbi`] |
//! | n best paths | [`Potentials::nbest`], [`Potentials::nbest_of_rows`] | — |
//! | an entity's probability | — | [`ForwardBackward::segment_probability`] |
//!
//! Both are one type, [`Potentials`]: the host tables are made from the tensors the first time a
//! host routine needs them. Every entry checks what it is given in one place
//! (`Potentials::validate`, as pytorch-crf's `_validate`), so the algorithms behind it run on
//! shapes they can trust.
//!
//! Training runs the tensor version (it is what runs on a GPU); tagging runs the host version
//! for best paths, marginals and confidences, where per-sentence work over a tagger's few tags is
//! cheaper than any kernel launch. Both are tested against brute-force enumeration of every tag sequence
//! (`tests/crf_brute_force.rs`) and against each other. In the tensor version a sequence of length
//! `L` in a batch padded to `T` stops changing after step `L-1` (the mask blends the old state
//! through), so padding never enters its scores. Every sequence needs at least one token: input
//! that is empty or of mismatched shapes is a [`CrfError`], in both versions.

use std::sync::OnceLock;

use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{Device, Distribution, Tensor, TensorData};
use nertrain_data::{TagScheme, transition_allowed};
use serde::{Deserialize, Serialize};

mod host;
mod tensor;

pub use host::ForwardBackward;
use host::Row;
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
    /// Tags allowed per token that no path goes through (a token allowed no tag).
    #[error("no path goes through the tags allowed (token {token} of the sentence at the latest)")]
    NoAllowedPath {
        /// The first token, from 0, that no allowed path reaches.
        token: usize,
    },
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
            None => Potentials::new(start, transitions, end),
            Some(c) => {
                let device = start.device();
                let k = self.num_tags();
                let tensor1 =
                    |v: &[f32]| Tensor::<1>::from_data(TensorData::new(v.to_vec(), [k]), &device);
                let penalty =
                    Tensor::<2>::from_data(TensorData::new(c.transitions.clone(), [k, k]), &device);
                Potentials::new(
                    start + tensor1(&c.start),
                    transitions + penalty,
                    end + tensor1(&c.end),
                )
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

/// Start, transition and end scores: what every algorithm runs on, as tensors and (made when a
/// host routine first needs them) as f64 tables.
#[derive(Debug, Clone)]
pub struct Potentials {
    /// `[k]`
    start: Tensor<1>,
    /// `[from, to]`
    transitions: Tensor<2>,
    /// `[k]`
    end: Tensor<1>,
    host: OnceLock<host::Tables>,
}

/// The shapes an algorithm is given, for [`Potentials::validate`].
struct Given<'a> {
    scores: Scores<'a>,
    /// The mask's `[batch, time]`, where one is given.
    mask: Option<[usize; 2]>,
    /// Each sequence's length, where given.
    lengths: Option<&'a [usize]>,
    /// Another input that must have the emissions' shape: what it is, its shape and the one
    /// it needs.
    other: Option<(&'static str, Vec<usize>, Vec<usize>)>,
    /// Tag ids that must be below the number of tags.
    ids: &'a [usize],
}

/// Emission scores, as given.
enum Scores<'a> {
    /// A padded batch, `[batch, time, tags]`.
    Batch([usize; 3]),
    /// One sentence on the host: this many scores, `[len * tags]`.
    Row(usize),
    /// Sentences on the host, a row of `length * tags` scores each.
    Rows(&'a [Vec<f64>]),
}

impl<'a> Given<'a> {
    fn scores(scores: Scores<'a>) -> Self {
        Self {
            scores,
            mask: None,
            lengths: None,
            other: None,
            ids: &[],
        }
    }
}

impl Potentials {
    /// Potentials of these tensors: `start` and `end` `[k]`, `transitions` `[k, k]`.
    fn new(start: Tensor<1>, transitions: Tensor<2>, end: Tensor<1>) -> Self {
        Self {
            start,
            transitions,
            end,
            host: OnceLock::new(),
        }
    }

    /// Potentials of `k` tags from f64 scores (`transitions` `[from * k + to]`); the host
    /// routines use these values as given, the tensors (on `device`) their f32 rounding.
    pub fn from_values(
        start: Vec<f64>,
        transitions: Vec<f64>,
        end: Vec<f64>,
        device: &Device,
    ) -> Result<Self, CrfError> {
        let k = start.len();
        if k == 0 || end.len() != k || transitions.len() != k * k {
            return Err(CrfError::Shape {
                what: "start, transition and end scores",
                expected: vec![k, k * k, k],
                found: vec![start.len(), transitions.len(), end.len()],
            });
        }
        let tensor = |v: &[f64]| -> Vec<f32> { v.iter().map(|&x| x as f32).collect() };
        let potentials = Self::new(
            Tensor::from_data(TensorData::new(tensor(&start), [k]), device),
            Tensor::from_data(TensorData::new(tensor(&transitions), [k, k]), device),
            Tensor::from_data(TensorData::new(tensor(&end), [k]), device),
        );
        potentials.host.get_or_init(|| host::Tables {
            k,
            start,
            transitions,
            end,
        });
        Ok(potentials)
    }

    /// Tags.
    pub fn num_tags(&self) -> usize {
        self.start.dims()[0]
    }

    /// These scores divided by `temperature` (of emissions too, by the caller): the same best
    /// path, under a flatter distribution over paths above 1 and a sharper one below.
    pub fn tempered(&self, temperature: f64) -> Self {
        let tempered = Self::new(
            self.start.clone().div_scalar(temperature),
            self.transitions.clone().div_scalar(temperature),
            self.end.clone().div_scalar(temperature),
        );
        let host = self.host();
        let scaled = |v: &[f64]| v.iter().map(|x| x / temperature).collect();
        tempered.host.get_or_init(|| host::Tables {
            k: host.k,
            start: scaled(&host.start),
            transitions: scaled(&host.transitions),
            end: scaled(&host.end),
        });
        tempered
    }

    /// The host tables, read from the tensors once.
    fn host(&self) -> &host::Tables {
        self.host.get_or_init(|| {
            let values = |t: Tensor<1>| t.into_data().iter::<f32>().map(f64::from).collect();
            let k = self.num_tags();
            host::Tables {
                k,
                start: values(self.start.clone()),
                transitions: values(self.transitions.clone().reshape([k * k])),
                end: values(self.end.clone()),
            }
        })
    }

    /// Whether `given` is something the algorithms can score: the one check every entry makes,
    /// host and tensor alike, before any algorithm runs.
    fn validate(&self, given: Given) -> Result<(), CrfError> {
        let k = self.num_tags();
        let [batch, time, tags] = match given.scores {
            Scores::Batch(dims) => dims,
            Scores::Row(0) => return Err(CrfError::Empty),
            Scores::Row(values) => {
                if !values.is_multiple_of(k) {
                    return Err(CrfError::Ragged { values, tags: k });
                }
                [1, values / k, k]
            }
            Scores::Rows(rows) => {
                let lengths = given.lengths.unwrap_or(&[]);
                if rows.len() != lengths.len() {
                    return Err(CrfError::Shape {
                        what: "sequence lengths",
                        expected: vec![rows.len()],
                        found: vec![lengths.len()],
                    });
                }
                if let Some((row, _)) = rows.iter().zip(lengths).find(|(r, l)| r.len() != **l * k) {
                    return Err(CrfError::Ragged {
                        values: row.len(),
                        tags: k,
                    });
                }
                [rows.len(), lengths.iter().copied().max().unwrap_or(0), k]
            }
        };
        if batch == 0 || time == 0 {
            return Err(CrfError::Empty);
        }
        if tags != k {
            return Err(CrfError::Tags {
                expected: k,
                found: tags,
            });
        }
        if let Some(mask) = given.mask
            && mask != [batch, time]
        {
            return Err(CrfError::Shape {
                what: "a mask",
                expected: vec![batch, time],
                found: mask.to_vec(),
            });
        }
        if let Some(lengths) = given.lengths {
            if lengths.len() != batch {
                return Err(CrfError::Shape {
                    what: "lengths",
                    expected: vec![batch],
                    found: vec![lengths.len()],
                });
            }
            if let Some(sequence) = lengths.iter().position(|&l| l == 0 || l > time) {
                return Err(CrfError::Length {
                    sequence,
                    length: lengths[sequence],
                    time,
                });
            }
        }
        if let Some((what, found, expected)) = given.other
            && found != expected
        {
            return Err(CrfError::Shape {
                what,
                expected,
                found,
            });
        }
        if let Some(&id) = given.ids.iter().find(|&&id| id >= k) {
            return Err(CrfError::Tags {
                expected: k,
                found: id + 1,
            });
        }
        Ok(())
    }

    /// One sentence's emission scores on the host (`[len * k]`, as [`host_emissions`] gives
    /// them), checked to be whole rows of at least one token, with `other` and `ids` besides.
    fn row<'a>(
        &self,
        emissions: &'a [f64],
        other: Option<(&'static str, Vec<usize>, Vec<usize>)>,
        ids: &[usize],
    ) -> Result<Row<'a>, CrfError> {
        self.validate(Given {
            other,
            ids,
            ..Given::scores(Scores::Row(emissions.len()))
        })?;
        Ok(Row {
            values: emissions,
            len: emissions.len() / self.num_tags(),
        })
    }

    /// The best path of one sentence (`emissions`: `[len * k]`) and its score, on the host.
    /// Ties go to the lowest tag id, as in the tensor Viterbi.
    pub fn row_viterbi(&self, emissions: &[f64]) -> Result<(Vec<usize>, f64), CrfError> {
        let row = self.row(emissions, None, &[])?;
        Ok(host::viterbi(self.host(), row))
    }

    /// Forward and backward scores of one sentence (`emissions`: `[len * k]`), on the host:
    /// its log Z, marginals and entity probabilities.
    pub fn forward_backward<'a>(
        &'a self,
        emissions: &'a [f64],
    ) -> Result<ForwardBackward<'a>, CrfError> {
        let row = self.row(emissions, None, &[])?;
        Ok(ForwardBackward::new(self.host(), row))
    }

    /// The score of `path` (a tag id per token) for one sentence, in f64: with its
    /// [`ForwardBackward::log_z`], its probability.
    pub fn row_score(&self, emissions: &[f64], path: &[usize]) -> Result<f64, CrfError> {
        let len = emissions.len() / self.num_tags().max(1);
        let row = self.row(
            emissions,
            Some(("a path", vec![path.len()], vec![len])),
            path,
        )?;
        Ok(host::path_score(self.host(), row, path))
    }

    /// One sentence's emissions (`[len * k]`) with the tags `allowed` (`[len * k]`, whether
    /// each token may carry each tag) alone possible: the others score −∞, so that
    /// [`Self::row_viterbi`] of them is the best path through allowed tags and their
    /// [`Self::forward_backward`] gives marginals and probabilities conditioned on the path
    /// going through them (an annotator's corrections, forced). An error when no path does.
    pub fn restrict(&self, emissions: &[f64], allowed: &[bool]) -> Result<Vec<f64>, CrfError> {
        let shape = ("allowed tags", vec![allowed.len()], vec![emissions.len()]);
        self.row(emissions, Some(shape), &[])?;
        let restricted: Vec<f64> = emissions
            .iter()
            .zip(allowed)
            .map(|(&e, &ok)| if ok { e } else { f64::NEG_INFINITY })
            .collect();
        let row = Row {
            values: &restricted,
            len: restricted.len() / self.num_tags(),
        };
        if let Some(token) = host::first_unreachable(self.host(), row) {
            return Err(CrfError::NoAllowedPath { token });
        }
        Ok(restricted)
    }

    /// Negative log-likelihood of one sentence's partial labels (`allowed`: `[len * k]`,
    /// whether each token may carry each tag): log Z − log Z over the paths through allowed
    /// tags alone. Infinite when no allowed path exists.
    pub fn row_partial_nll(&self, emissions: &[f64], allowed: &[bool]) -> Result<f64, CrfError> {
        let shape = ("allowed tags", vec![allowed.len()], vec![emissions.len()]);
        let row = self.row(emissions, Some(shape), &[])?;
        Ok(host::partial_nll(self.host(), row, allowed))
    }
}

/// Per-token and pairwise tag marginals.
#[derive(Debug, Clone)]
pub struct Marginals {
    /// `[batch, time, tags]`: p(y_t = k | x); zero at padding.
    pub unary: Tensor<3>,
    /// `[batch, time - 1, tags, tags]`: p(y_t = i, y_{t+1} = j | x); zero where t + 1 is padding.
    pub pairwise: Tensor<4>,
}
