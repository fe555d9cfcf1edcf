//! The CRF's forward-backward and Viterbi in plain Rust (f64), one sentence at a time: what
//! tagging uses for best paths, entity confidences and marginals, tested against the tensor
//! version in `tensor.rs` and against brute force.

use super::CrfError;

/// Start, transition (`[from * k + to]`) and end scores.
#[derive(Debug, Clone)]
pub struct Potentials {
    /// Tags.
    pub k: usize,
    /// Start scores, `[k]`.
    pub start: Vec<f64>,
    /// Transition scores, `[from * k + to]`.
    pub transitions: Vec<f64>,
    /// End scores, `[k]`.
    pub end: Vec<f64>,
}

/// The number of tokens in `emissions` (`[len * k]`), checked: at least one, whole rows.
fn tokens(p: &Potentials, emissions: &[f64]) -> Result<usize, CrfError> {
    if emissions.is_empty() {
        return Err(CrfError::Empty);
    }
    if p.k == 0 || !emissions.len().is_multiple_of(p.k) {
        return Err(CrfError::Ragged {
            values: emissions.len(),
            tags: p.k,
        });
    }
    Ok(emissions.len() / p.k)
}

fn log_sum_exp(values: impl Iterator<Item = f64> + Clone) -> f64 {
    let max = values.clone().fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return max;
    }
    max + values.map(|v| (v - max).exp()).sum::<f64>().ln()
}

/// The best path of one sentence (`emissions`: `[len * k]`, at least one token) and its
/// score. Ties go to the lowest tag id, as in the tensor Viterbi.
pub fn viterbi(p: &Potentials, emissions: &[f64]) -> Result<(Vec<usize>, f64), CrfError> {
    let k = p.k;
    let len = tokens(p, emissions)?;
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
    Ok((path, best))
}

/// The score of `path` (start, emissions, transitions and end), in f64: with
/// [`ForwardBackward::log_z`] of the same emissions, its probability.
pub fn path_score(p: &Potentials, emissions: &[f64], path: &[usize]) -> f64 {
    let k = p.k;
    let (Some(&first), Some(&last)) = (path.first(), path.last()) else {
        return 0.0;
    };
    let mut score = p.start[first] + p.end[last];
    for (t, &tag) in path.iter().enumerate() {
        score += emissions[t * k + tag];
        if t > 0 {
            score += p.transitions[path[t - 1] * k + tag];
        }
    }
    score
}

/// Negative log-likelihood of one sentence's partial labels (`allowed`: `[len * k]`, whether
/// each token may carry each tag): log Z − log Z over the paths through allowed tags alone.
/// Infinite when no allowed path exists.
pub fn partial_nll(p: &Potentials, emissions: &[f64], allowed: &[bool]) -> Result<f64, CrfError> {
    tokens(p, emissions)?;
    if allowed.len() != emissions.len() {
        return Err(CrfError::Shape {
            what: "allowed tags",
            expected: vec![emissions.len()],
            found: vec![allowed.len()],
        });
    }
    let restricted: Vec<f64> = emissions
        .iter()
        .zip(allowed)
        .map(|(&e, &ok)| if ok { e } else { f64::NEG_INFINITY })
        .collect();
    let all = ForwardBackward::new(p, emissions)?.log_z;
    Ok(all - ForwardBackward::new(p, &restricted)?.log_z)
}

/// Forward and backward log-scores of one sentence, `[t * k + tag]`.
#[derive(Debug, Clone)]
pub struct ForwardBackward {
    /// Tags.
    pub k: usize,
    /// Forward log-scores.
    pub alpha: Vec<f64>,
    /// Backward log-scores.
    pub beta: Vec<f64>,
    /// The log-partition.
    pub log_z: f64,
}

impl ForwardBackward {
    /// `emissions`: `[len * k]` for one sentence of at least one token.
    pub fn new(p: &Potentials, emissions: &[f64]) -> Result<Self, CrfError> {
        let k = p.k;
        let len = tokens(p, emissions)?;
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
        Ok(Self {
            k,
            alpha,
            beta,
            log_z,
        })
    }

    /// Tokens in the sentence.
    pub fn len(&self) -> usize {
        self.alpha.len() / self.k
    }

    /// Whether the sentence is empty.
    pub fn is_empty(&self) -> bool {
        self.alpha.is_empty()
    }

    /// p(y_t = tag | x).
    pub fn marginal(&self, t: usize, tag: usize) -> f64 {
        (self.alpha[t * self.k + tag] + self.beta[t * self.k + tag] - self.log_z).exp()
    }

    /// The probability that tokens `start..start + segment.len()` carry exactly `segment`'s
    /// tags and that the token after them (if any) takes a tag `may_follow` accepts.
    pub fn segment_probability(
        &self,
        p: &Potentials,
        emissions: &[f64],
        start: usize,
        segment: &[usize],
        may_follow: impl Fn(usize) -> bool,
    ) -> Result<f64, CrfError> {
        let k = self.k;
        let (Some(&first), Some(&last)) = (segment.first(), segment.last()) else {
            return Err(CrfError::Empty);
        };
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
