//! The CRF's algorithms as batched tensor operations, on any backend: log Z by the forward
//! algorithm in log space, gold-path scores, the NLL loss, marginals by forward-backward,
//! Viterbi and n-best paths. Shapes: emissions `[batch, time, tags]`, mask `[batch, time]` with 1.0
//! at real tokens; per-sentence results `[batch]`.

use burn::tensor::{Device, Int, Tensor, TensorData};

use super::{CrfError, FORBIDDEN, Given, Marginals, Potentials, Reduction, Scores};

/// A tag path (tag ids, one per token) and its score.
pub type ScoredPath = (Vec<usize>, f32);

impl Potentials {
    /// [`Potentials::validate`] of padded emissions, a mask and sequence lengths (when given).
    fn check(
        &self,
        emissions: [usize; 3],
        mask: [usize; 2],
        lengths: Option<&[usize]>,
        other: Option<(&'static str, Vec<usize>, Vec<usize>)>,
    ) -> Result<(), CrfError> {
        self.validate(Given {
            mask: Some(mask),
            lengths,
            other,
            ..Given::scores(Scores::Batch(emissions))
        })
    }

    /// Forward log-scores α_t (`[batch, k]` per step), blended through padding, and log Z, for
    /// checked input.
    fn forward(&self, emissions: Tensor<3>, mask: Tensor<2>) -> (Vec<Tensor<2>>, Tensor<1>) {
        let [batch, time, k] = emissions.dims();
        // Made only when used: an autodiff node that no loss reaches is never freed by Burn, and
        // every later backward pass walks the pile (batches of one-token sentences have no
        // transitions).
        let transitions = (time > 1).then(|| self.transitions.clone().unsqueeze_dim::<3>(0));
        let mut steps = time_steps(emissions).into_iter();
        let masks = time_steps(mask.unsqueeze_dim(2));
        let first = steps.next().expect("checked: at least one token");
        let mut alphas = vec![self.start.clone().unsqueeze_dim(0) + first];
        for (emission, mask) in steps.zip(masks.into_iter().skip(1)) {
            let alpha = alphas.last().expect("the first step").clone();
            let transitions = transitions.clone().expect("made when time > 1");
            let scores =
                alpha.clone().unsqueeze_dim::<3>(2) + transitions + emission.unsqueeze_dim(1);
            let next = log_sum_exp(scores, 1).reshape([batch, k]);
            alphas.push(advance(alpha, next, mask));
        }
        let last = alphas.last().expect("the first step").clone();
        let log_z = log_sum_exp(last + self.end.clone().unsqueeze_dim(0), 1).reshape([batch]);
        (alphas, log_z)
    }

    /// `log Z(x)` for each sequence by the forward algorithm in log space.
    ///
    /// `emissions`: `[batch, time, tags]`; `mask`: `[batch, time]` with 1.0 at real tokens.
    pub fn log_partition(
        &self,
        emissions: Tensor<3>,
        mask: Tensor<2>,
    ) -> Result<Tensor<1>, CrfError> {
        self.check(emissions.dims(), mask.dims(), None, None)?;
        Ok(self.forward(emissions, mask).1)
    }

    /// The score of the given tag paths. `tags`: `[batch, time]`, any value at padding.
    pub fn path_score(
        &self,
        emissions: Tensor<3>,
        tags: Tensor<2, Int>,
        mask: Tensor<2>,
        lengths: &[usize],
    ) -> Result<Tensor<1>, CrfError> {
        let other = ("tags", tags.dims().to_vec(), mask.dims().to_vec());
        self.check(emissions.dims(), mask.dims(), Some(lengths), Some(other))?;
        let [batch, time, k] = emissions.dims();
        let device = emissions.device();
        let emitted = emissions
            .gather(2, tags.clone().unsqueeze_dim(2))
            .reshape([batch, time]);
        let mut score = (emitted * mask.clone()).sum_dim(1).reshape([batch]);

        let first = tags.clone().slice([0..batch, 0..1]).reshape([batch]);
        score = score + self.start.clone().select(0, first);
        if time > 1 {
            let from = tags.clone().slice([0..batch, 0..time - 1]);
            let to = tags.clone().slice([0..batch, 1..time]);
            let pair = (from * k as i64 + to).reshape([batch * (time - 1)]);
            let moved = self
                .transitions
                .clone()
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
        Ok(score + self.end.clone().select(0, last))
    }

    /// Negative log-likelihood of the gold tags.
    pub fn nll(
        &self,
        emissions: Tensor<3>,
        tags: Tensor<2, Int>,
        mask: Tensor<2>,
        lengths: &[usize],
        reduction: Reduction,
    ) -> Result<Tensor<1>, CrfError> {
        let gold = self.path_score(emissions.clone(), tags, mask.clone(), lengths)?;
        let log_z = self.forward(emissions, mask).1;
        Ok(reduction.apply(log_z - gold, lengths))
    }

    /// Negative log-likelihood of partial labels: every path through the tags `allowed` at each
    /// token (`[batch, time, tags]`, 1.0 where a tag is allowed, 0.0 where not; a fully labelled
    /// token allows its tag alone, an unlabelled one every tag) counts as gold, so the loss is
    /// log Z − log Z over the allowed paths. With one allowed tag per token it is [`Self::nll`].
    pub fn partial_nll(
        &self,
        emissions: Tensor<3>,
        allowed: Tensor<3>,
        mask: Tensor<2>,
        lengths: &[usize],
        reduction: Reduction,
    ) -> Result<Tensor<1>, CrfError> {
        let other = (
            "allowed tags",
            allowed.dims().to_vec(),
            emissions.dims().to_vec(),
        );
        self.check(emissions.dims(), mask.dims(), Some(lengths), Some(other))?;
        // The penalty is finite, as the scheme's is: a tag ruled out scores FORBIDDEN lower.
        let penalty = (allowed.neg() + 1.0) * FORBIDDEN;
        let log_z = self.forward(emissions.clone(), mask.clone()).1;
        let allowed_log_z = self.forward(emissions + penalty, mask).1;
        Ok(reduction.apply(log_z - allowed_log_z, lengths))
    }

    /// Cross-entropy of this CRF's distribution over tag paths against a teacher's, given by
    /// the teacher's [`Marginals`] over the same tokens and tags: `log Z − E_q[score(y)]`, where
    /// the expected score of a path needs only the teacher's unary marginals (for emissions,
    /// start and end) and pairwise ones (for transitions). Exact when the teacher is itself a
    /// linear-chain model, or an average of several (a mixture's marginals are the average of
    /// theirs). Its gradient with respect to the emissions is this CRF's marginals minus the
    /// teacher's. The teacher's marginals are constants here: no gradient reaches them. Under
    /// constraints a teacher must put no mass on a forbidden move, which scores
    /// [`FORBIDDEN`] here.
    pub fn distillation_loss(
        &self,
        emissions: Tensor<3>,
        teacher: &Marginals,
        mask: Tensor<2>,
        lengths: &[usize],
        reduction: Reduction,
    ) -> Result<Tensor<1>, CrfError> {
        let [batch, time, k] = emissions.dims();
        let unary = (
            "teacher's marginals",
            teacher.unary.dims().to_vec(),
            vec![batch, time, k],
        );
        self.check(emissions.dims(), mask.dims(), Some(lengths), Some(unary))?;
        let pairs = vec![batch, time.saturating_sub(1), k, k];
        if teacher.pairwise.dims().to_vec() != pairs {
            return Err(CrfError::Shape {
                what: "teacher's pairwise marginals",
                expected: pairs,
                found: teacher.pairwise.dims().to_vec(),
            });
        }
        let device = emissions.device();
        let unary = teacher.unary.clone().detach() * mask.clone().unsqueeze_dim(2);
        let per_sentence = |x: Tensor<3>| x.sum_dim(2).sum_dim(1).reshape([batch]);
        let weighted = |q: Tensor<2>, scores: &Tensor<1>| {
            (q * scores.clone().unsqueeze_dim(0))
                .sum_dim(1)
                .reshape([batch])
        };
        let mut expected = per_sentence(unary.clone() * emissions.clone());
        let first = unary
            .clone()
            .slice([0..batch, 0..1, 0..k])
            .reshape([batch, k]);
        expected = expected + weighted(first, &self.start);
        let last: Vec<i64> = (lengths.iter())
            .flat_map(|&len| std::iter::repeat_n(len as i64 - 1, k))
            .collect();
        let last = Tensor::<3, Int>::from_data(TensorData::new(last, [batch, 1, k]), &device);
        expected = expected + weighted(unary.gather(1, last).reshape([batch, k]), &self.end);
        if time > 1 {
            let moved = mask.clone().slice([0..batch, 1..time]);
            let pairwise = teacher.pairwise.clone().detach()
                * moved.unsqueeze_dim::<3>(2).unsqueeze_dim::<4>(3);
            let transitions = self.transitions.clone().unsqueeze_dim::<3>(0);
            let scored = (pairwise * transitions.unsqueeze_dim::<4>(0)).sum_dim(3);
            expected = expected + per_sentence(scored.reshape([batch, time - 1, k]));
        }
        let log_z = self.forward(emissions, mask).1;
        Ok(reduction.apply(log_z - expected, lengths))
    }

    /// Token and pairwise marginals by forward-backward in log space, for the whole batch.
    pub fn marginals(&self, emissions: Tensor<3>, mask: Tensor<2>) -> Result<Marginals, CrfError> {
        self.check(emissions.dims(), mask.dims(), None, None)?;
        let [batch, time, k] = emissions.dims();
        let (alphas, log_z) = self.forward(emissions.clone(), mask.clone());
        let transitions = self.transitions.clone().unsqueeze_dim::<3>(0);
        let emissions = time_steps(emissions);
        let masks = time_steps(mask.clone().unsqueeze_dim(2));
        // β_t[i]: log-score of every continuation after step t from tag i. Past a sequence's end
        // β stays at the end scores, so β at its last token is exactly `end`.
        let end = self.end.clone().unsqueeze_dim::<2>(0).expand([batch, k]);
        let mut betas = vec![end.clone(); time];
        for t in (0..time.saturating_sub(1)).rev() {
            let after = (emissions[t + 1].clone() + betas[t + 1].clone()).unsqueeze_dim::<3>(1);
            let next = log_sum_exp(transitions.clone() + after, 2).reshape([batch, k]);
            betas[t] = advance(end.clone(), next, masks[t + 1].clone());
        }
        let log_z2 = log_z.reshape([batch, 1]);
        let unary: Vec<Tensor<2>> = (0..time)
            .map(|t| {
                (alphas[t].clone() + betas[t].clone() - log_z2.clone()).exp() * masks[t].clone()
            })
            .collect();
        let log_z3 = log_z2.clone().unsqueeze_dim::<3>(2);
        let pairwise: Vec<Tensor<3>> = (1..time)
            .map(|t| {
                let scores = alphas[t - 1].clone().unsqueeze_dim::<3>(2)
                    + transitions.clone()
                    + (emissions[t].clone() + betas[t].clone()).unsqueeze_dim(1)
                    - log_z3.clone();
                scores.exp() * masks[t].clone().unsqueeze_dim(2)
            })
            .collect();
        let pairwise = if pairwise.is_empty() {
            Tensor::zeros([batch, 0, k, k], &mask.device())
        } else {
            Tensor::stack(pairwise, 1)
        };
        Ok(Marginals {
            unary: Tensor::stack(unary, 1),
            pairwise,
        })
    }

    /// The best path of every sequence and its score, by batched max-product; the backpointers
    /// come to the host once and each path is read back from them.
    pub fn viterbi(
        &self,
        emissions: Tensor<3>,
        mask: Tensor<2>,
        lengths: &[usize],
    ) -> Result<Vec<ScoredPath>, CrfError> {
        let best = self.nbest(emissions, mask, lengths, 1)?;
        Ok(best.into_iter().map(|mut paths| paths.remove(0)).collect())
    }

    /// [`Self::nbest`] of sequences whose emissions are on the host, a row of `length * tags`
    /// scores each (as [`super::host_emissions`] gives them): padded into one batch on `device`
    /// here, each row checked against its length.
    pub fn nbest_of_rows(
        &self,
        rows: &[Vec<f64>],
        lengths: &[usize],
        n: usize,
        device: &Device,
    ) -> Result<Vec<Vec<ScoredPath>>, CrfError> {
        self.validate(Given {
            lengths: Some(lengths),
            ..Given::scores(Scores::Rows(rows))
        })?;
        let k = self.num_tags();
        let time = lengths.iter().copied().max().unwrap_or(0);
        let mut padded = vec![0.0f32; rows.len() * time * k];
        let mut mask = vec![0.0f32; rows.len() * time];
        for (b, (row, &length)) in rows.iter().zip(lengths).enumerate() {
            for (slot, &v) in padded[b * time * k..].iter_mut().zip(row) {
                *slot = v as f32;
            }
            mask[b * time..b * time + length].fill(1.0);
        }
        let emissions = Tensor::from_data(TensorData::new(padded, [rows.len(), time, k]), device);
        let mask = Tensor::from_data(TensorData::new(mask, [rows.len(), time]), device);
        self.nbest(emissions, mask, lengths, n)
    }

    /// The `n` best paths of every sequence with their scores, best first (fewer when a sequence
    /// has fewer than `n` paths). Each step keeps, for every tag, the `n` best partial paths that
    /// end in it: `[batch, n, k]` scores, chosen among `n * k` candidates by `topk`.
    pub fn nbest(
        &self,
        emissions: Tensor<3>,
        mask: Tensor<2>,
        lengths: &[usize],
        n: usize,
    ) -> Result<Vec<Vec<ScoredPath>>, CrfError> {
        self.check(emissions.dims(), mask.dims(), Some(lengths), None)?;
        if n == 0 {
            return Err(CrfError::NoPaths);
        }
        let [batch, time, k] = emissions.dims();
        let device = emissions.device();
        let transitions = self.transitions.clone().unsqueeze_dim::<3>(0); // [1, from, to]
        let mut steps = time_steps(emissions).into_iter();
        let masks = time_steps(mask.unsqueeze_dim(2));
        let first = steps.next().expect("checked: at least one token");
        // Rank 0 holds the one real path into each tag; the other ranks start out of reach.
        let first = (self.start.clone().unsqueeze_dim(0) + first).unsqueeze_dim::<3>(1);
        let unreachable =
            Tensor::<3>::full([batch, n - 1, k], 2.0 * FORBIDDEN * time as f32, &device);
        let mut score = if n > 1 {
            Tensor::cat(vec![first, unreachable], 1)
        } else {
            first
        }; // [b, n, k]
        let mut backpointers = Vec::with_capacity(time.saturating_sub(1));
        for (emission, mask) in steps.zip(masks.into_iter().skip(1)) {
            // candidates[b, from * n + rank, to]
            let candidates = (score.clone().swap_dims(1, 2).unsqueeze_dim::<4>(3)
                + transitions.clone().unsqueeze_dim(2))
            .reshape([batch, k * n, k]);
            let (best, from) = candidates.topk_with_indices(n, 1); // [b, n, k]
            let next = best + emission.unsqueeze_dim(1);
            score =
                next * mask.clone().unsqueeze_dim(2) + score * (mask.neg() + 1.0).unsqueeze_dim(2);
            backpointers.push(from);
        }
        let finals = (score + self.end.clone().unsqueeze_dim::<2>(0).unsqueeze_dim(0))
            .swap_dims(1, 2)
            .reshape([batch, k * n]);
        let (final_scores, final_index) = finals.topk_with_indices(n, 1);
        let final_scores: Vec<f32> = final_scores.into_data().iter::<f32>().collect();
        let final_index: Vec<i64> = final_index.into_data().iter::<i64>().collect();
        let backpointers: Vec<i64> = if backpointers.is_empty() {
            Vec::new()
        } else {
            Tensor::stack::<4>(backpointers, 0)
                .into_data()
                .iter::<i64>()
                .collect()
        };
        // A path through an unreachable start scores below this.
        let reachable = FORBIDDEN * time as f32;

        Ok((0..batch)
            .map(|b| {
                let len = lengths[b];
                (0..n)
                    .filter(|&r| final_scores[b * n + r] > reachable)
                    .map(|r| {
                        // Candidate index c = tag * n + rank, at every step.
                        let mut c = final_index[b * n + r] as usize;
                        let mut path = vec![0; len];
                        for t in (0..len).rev() {
                            let (tag, rank) = (c / n, c % n);
                            path[t] = tag;
                            if t > 0 {
                                c = backpointers[(((t - 1) * batch + b) * n + rank) * k + tag]
                                    as usize;
                            }
                        }
                        (path, final_scores[b * n + r])
                    })
                    .collect()
            })
            .collect())
    }
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

/// Each sentence's emissions on the host in f64, `[length * k]`, for the host routines
/// ([`Potentials::row_viterbi`] and the others).
pub fn host_emissions(emissions: Tensor<3>, lengths: &[usize]) -> Vec<Vec<f64>> {
    let [_, time, k] = emissions.dims();
    let values = crate::host_values(emissions);
    lengths
        .iter()
        .enumerate()
        .map(|(b, &length)| {
            values[b * time * k..(b * time + length) * k]
                .iter()
                .map(|&v| f64::from(v))
                .collect()
        })
        .collect()
}
