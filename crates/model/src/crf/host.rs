//! The CRF's forward-backward and Viterbi in plain Rust (f64), one sentence at a time: what
//! tagging uses for best paths, entity confidences and marginals, tested against the tensor
//! version in `tensor.rs` and against brute force. Reached through
//! [`Potentials`](super::Potentials), which checks their input.

use super::CrfError;

/// Start, transition (`[from * k + to]`) and end scores in f64.
#[derive(Debug, Clone)]
pub(super) struct Tables {
    /// Tags.
    pub(super) k: usize,
    /// Start scores, `[k]`.
    pub(super) start: Vec<f64>,
    /// Transition scores, `[from * k + to]`.
    pub(super) transitions: Vec<f64>,
    /// End scores, `[k]`.
    pub(super) end: Vec<f64>,
}

/// One sentence's emission scores, `[len * k]`, checked to be whole rows of at least one token.
#[derive(Debug, Clone, Copy)]
pub(super) struct Row<'a> {
    pub(super) values: &'a [f64],
    pub(super) len: usize,
}

fn log_sum_exp(values: impl Iterator<Item = f64> + Clone) -> f64 {
    let max = values.clone().fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return max;
    }
    max + values.map(|v| (v - max).exp()).sum::<f64>().ln()
}

/// The best path and its score. Ties go to the lowest tag id, as in the tensor Viterbi.
pub(super) fn viterbi(p: &Tables, row: Row) -> (Vec<usize>, f64) {
    let (k, len, emissions) = (p.k, row.len, row.values);
    let mut score: Vec<f64> = (0..k).map(|j| p.start[j] + emissions[j]).collect();
    let mut next = vec![0.0; k];
    let mut backpointers = vec![0usize; len * k];
    for t in 1..len {
        for j in 0..k {
            let (best, from) = (0..k)
                .map(|i| (score[i] + p.transitions[i * k + j], i))
                .fold((f64::NEG_INFINITY, 0), |a, b| if b.0 > a.0 { b } else { a });
            next[j] = best + emissions[t * k + j];
            backpointers[t * k + j] = from;
        }
        std::mem::swap(&mut score, &mut next);
    }
    let (best, mut tag) = (0..k)
        .map(|j| (score[j] + p.end[j], j))
        .fold((f64::NEG_INFINITY, 0), |a, b| if b.0 > a.0 { b } else { a });
    let mut path = vec![0; len];
    for t in (0..len).rev() {
        path[t] = tag;
        tag = backpointers[t * k + tag];
    }
    (path, best)
}

/// The score of `path` (one tag id below `k` per token): start, emissions, transitions and end.
pub(super) fn path_score(p: &Tables, row: Row, path: &[usize]) -> f64 {
    let (k, emissions) = (p.k, row.values);
    let mut score = p.start[path[0]] + p.end[path[path.len() - 1]];
    for (t, &tag) in path.iter().enumerate() {
        score += emissions[t * k + tag];
        if t > 0 {
            score += p.transitions[path[t - 1] * k + tag];
        }
    }
    score
}

/// log Z − log Z over the paths through allowed tags alone (`allowed`: `[len * k]`); infinite
/// when no allowed path exists.
pub(super) fn partial_nll(p: &Tables, row: Row, allowed: &[bool]) -> f64 {
    let restricted: Vec<f64> = row
        .values
        .iter()
        .zip(allowed)
        .map(|(&e, &ok)| if ok { e } else { f64::NEG_INFINITY })
        .collect();
    let restricted = Row {
        values: &restricted,
        len: row.len,
    };
    ForwardBackward::new(p, row).log_z - ForwardBackward::new(p, restricted).log_z
}

/// The first token no path of finite score reaches (a path's score counts the end scores at
/// the last token), if any: where restricted emissions leave no path.
pub(super) fn first_unreachable(p: &Tables, row: Row) -> Option<usize> {
    let (k, emissions) = (p.k, row.values);
    let mut alpha: Vec<f64> = (0..k).map(|j| p.start[j] + emissions[j]).collect();
    let finite = |alpha: &[f64]| alpha.iter().any(|a| a.is_finite());
    if !finite(&alpha) {
        return Some(0);
    }
    for t in 1..row.len {
        alpha = (0..k)
            .map(|j| {
                let incoming = (0..k).map(|i| alpha[i] + p.transitions[i * k + j]);
                log_sum_exp(incoming) + emissions[t * k + j]
            })
            .collect();
        if !finite(&alpha) {
            return Some(t);
        }
    }
    let ends = (0..k).map(|j| alpha[j] + p.end[j]);
    (!log_sum_exp(ends).is_finite()).then(|| row.len - 1)
}

/// Forward and backward log-scores of one sentence, `[t * k + tag]`.
#[derive(Debug, Clone)]
pub struct ForwardBackward<'a> {
    p: &'a Tables,
    row: Row<'a>,
    alpha: Vec<f64>,
    beta: Vec<f64>,
    /// The log-partition.
    pub log_z: f64,
}

impl<'a> ForwardBackward<'a> {
    pub(super) fn new(p: &'a Tables, row: Row<'a>) -> Self {
        let (k, len, emissions) = (p.k, row.len, row.values);
        let mut alpha = vec![0.0; len * k];
        let mut beta = vec![0.0; len * k];
        for j in 0..k {
            alpha[j] = p.start[j] + emissions[j];
            beta[(len - 1) * k + j] = p.end[j];
        }
        for t in 1..len {
            for j in 0..k {
                let incoming = (0..k).map(|i| alpha[(t - 1) * k + i] + p.transitions[i * k + j]);
                alpha[t * k + j] = log_sum_exp(incoming) + emissions[t * k + j];
            }
        }
        for t in (0..len - 1).rev() {
            for i in 0..k {
                let outgoing = (0..k).map(|j| {
                    p.transitions[i * k + j] + emissions[(t + 1) * k + j] + beta[(t + 1) * k + j]
                });
                beta[t * k + i] = log_sum_exp(outgoing);
            }
        }
        let log_z = log_sum_exp((0..k).map(|j| alpha[(len - 1) * k + j] + p.end[j]));
        Self {
            p,
            row,
            alpha,
            beta,
            log_z,
        }
    }

    /// Tokens in the sentence.
    pub fn len(&self) -> usize {
        self.row.len
    }

    /// Always false: a row has at least one token.
    pub fn is_empty(&self) -> bool {
        self.row.len == 0
    }

    /// p(y_t = tag | x); `t` and `tag` within the sentence and the tags.
    pub fn marginal(&self, t: usize, tag: usize) -> f64 {
        let k = self.p.k;
        (self.alpha[t * k + tag] + self.beta[t * k + tag] - self.log_z).exp()
    }

    /// p(y_{t-1} = from, y_t = to | x); `t` from 1 within the sentence, the tags within the
    /// tags.
    pub fn pair_marginal(&self, t: usize, from: usize, to: usize) -> f64 {
        let (p, k) = (self.p, self.p.k);
        let score = self.alpha[(t - 1) * k + from]
            + p.transitions[from * k + to]
            + self.row.values[t * k + to]
            + self.beta[t * k + to];
        (score - self.log_z).exp()
    }

    /// The probability that tokens `start..start + segment.len()` carry exactly `segment`'s
    /// tags and that the token after them (if any) takes a tag `may_follow` accepts.
    pub fn segment_probability(
        &self,
        start: usize,
        segment: &[usize],
        may_follow: impl Fn(usize) -> bool,
    ) -> Result<f64, CrfError> {
        let (p, k, emissions) = (self.p, self.p.k, self.row.values);
        let (Some(&first), Some(&last)) = (segment.first(), segment.last()) else {
            return Err(CrfError::Empty);
        };
        if start + segment.len() > self.len() || segment.iter().any(|&tag| tag >= k) {
            return Err(CrfError::Shape {
                what: "a segment",
                expected: vec![self.len(), k],
                found: vec![
                    start + segment.len(),
                    segment.iter().max().map_or(0, |m| m + 1),
                ],
            });
        }
        let mut score = self.alpha[start * k + first];
        for (offset, pair) in segment.windows(2).enumerate() {
            let t = start + offset + 1;
            score += p.transitions[pair[0] * k + pair[1]] + emissions[t * k + pair[1]];
        }
        let after = start + segment.len();
        let rest = if after == self.len() {
            p.end[last]
        } else {
            log_sum_exp((0..k).filter(|&j| may_follow(j)).map(|j| {
                p.transitions[last * k + j] + emissions[after * k + j] + self.beta[after * k + j]
            }))
        };
        Ok((score + rest - self.log_z).exp())
    }
}
