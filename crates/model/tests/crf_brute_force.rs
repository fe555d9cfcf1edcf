//! The CRF against brute force: on tiny random problems every tag path is enumerated, and log Z,
//! path scores, the Viterbi path, the loss against a teacher and the gradients are checked
//! against the enumeration.

use burn::module::Param;
use burn::tensor::{Device, Int, Tensor, TensorData};
use nertrain_data::{TagScheme, transition_allowed};
use nertrain_model::crf::FORBIDDEN;
use nertrain_model::{Constraints, Crf, CrfConfig, CrfError, Potentials, Reduction};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A batch of sequences with CRF parameters, all in f64 on the host.
struct Problem {
    k: usize,
    lengths: Vec<usize>,
    time: usize,
    emissions: Vec<f64>, // [batch, time, k]
    transitions: Vec<f64>,
    start: Vec<f64>,
    end: Vec<f64>,
    tags: Vec<i64>, // [batch, time], random at padding too
}

impl Problem {
    fn random(rng: &mut StdRng) -> Self {
        let k = rng.random_range(1..=4);
        Self::with_tags(rng, k)
    }

    fn with_tags(rng: &mut StdRng, k: usize) -> Self {
        let batch = rng.random_range(1..=4);
        let lengths: Vec<usize> = (0..batch).map(|_| rng.random_range(1..=5)).collect();
        let time = *lengths.iter().max().unwrap();
        let mut normal = |n: usize| {
            (0..n)
                .map(|_| rng.random_range(-2.0..2.0))
                .collect::<Vec<f64>>()
        };
        let emissions = normal(batch * time * k);
        let transitions = normal(k * k);
        let start = normal(k);
        let end = normal(k);
        let tags = (0..batch * time)
            .map(|_| rng.random_range(0..k) as i64)
            .collect();
        Self {
            k,
            lengths,
            time,
            emissions,
            transitions,
            start,
            end,
            tags,
        }
    }

    fn batch(&self) -> usize {
        self.lengths.len()
    }

    fn score(&self, b: usize, path: &[usize]) -> f64 {
        let e = |t: usize, y: usize| self.emissions[(b * self.time + t) * self.k + y];
        let mut s = self.start[path[0]] + e(0, path[0]) + self.end[*path.last().unwrap()];
        for t in 1..path.len() {
            s += self.transitions[path[t - 1] * self.k + path[t]] + e(t, path[t]);
        }
        s
    }

    fn paths(&self, len: usize) -> Vec<Vec<usize>> {
        (0..self.k.pow(len as u32))
            .map(|mut n| {
                (0..len)
                    .map(|_| {
                        let y = n % self.k;
                        n /= self.k;
                        y
                    })
                    .collect()
            })
            .collect()
    }

    /// Every path of sequence `b` with its probability.
    fn distribution(&self, b: usize) -> Vec<(Vec<usize>, f64)> {
        let log_z = self.log_z(b);
        self.paths(self.lengths[b])
            .into_iter()
            .map(|path| {
                let probability = (self.score(b, &path) - log_z).exp();
                (path, probability)
            })
            .collect()
    }

    fn emissions_of(&self, b: usize) -> Vec<f64> {
        let start = b * self.time * self.k;
        self.emissions[start..start + self.lengths[b] * self.k].to_vec()
    }

    /// Potentials whose host routines use these f64 scores exactly.
    fn host(&self) -> Potentials {
        Potentials::from_values(
            self.start.clone(),
            self.transitions.clone(),
            self.end.clone(),
            &Device::default(),
        )
        .unwrap()
    }

    fn log_z(&self, b: usize) -> f64 {
        let scores: Vec<f64> = self
            .paths(self.lengths[b])
            .iter()
            .map(|p| self.score(b, p))
            .collect();
        let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        max + scores.iter().map(|s| (s - max).exp()).sum::<f64>().ln()
    }

    fn gold(&self, b: usize) -> Vec<usize> {
        (0..self.lengths[b])
            .map(|t| self.tags[b * self.time + t] as usize)
            .collect()
    }

    /// Summed NLL of the gold paths, the quantity whose gradient is checked.
    fn nll(&self) -> f64 {
        (0..self.batch())
            .map(|b| self.log_z(b) - self.score(b, &self.gold(b)))
            .sum()
    }

    fn crf(&self, device: &Device) -> Crf {
        let f = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
        let mut crf = CrfConfig::new(self.k).init(device);
        crf.transitions = Param::from_tensor(Tensor::from_data(
            TensorData::new(f(&self.transitions), [self.k, self.k]),
            device,
        ));
        crf.start = Param::from_tensor(Tensor::from_data(
            TensorData::new(f(&self.start), [self.k]),
            device,
        ));
        crf.end = Param::from_tensor(Tensor::from_data(
            TensorData::new(f(&self.end), [self.k]),
            device,
        ));
        crf
    }

    fn emissions_tensor(&self, device: &Device) -> Tensor<3> {
        let data: Vec<f32> = self.emissions.iter().map(|&x| x as f32).collect();
        Tensor::from_data(
            TensorData::new(data, [self.batch(), self.time, self.k]),
            device,
        )
    }

    fn mask(&self, device: &Device) -> Tensor<2> {
        let mask: Vec<f32> = self
            .lengths
            .iter()
            .flat_map(|&l| (0..self.time).map(move |t| if t < l { 1.0 } else { 0.0 }))
            .collect();
        Tensor::from_data(TensorData::new(mask, [self.batch(), self.time]), device)
    }

    fn tags_tensor(&self, device: &Device) -> Tensor<2, Int> {
        Tensor::from_data(
            TensorData::new(self.tags.clone(), [self.batch(), self.time]),
            device,
        )
    }
}

fn problems(seed: u64, count: usize) -> impl Iterator<Item = Problem> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..count).map(move |_| Problem::random(&mut rng))
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f64> {
    t.into_data().iter::<f32>().map(f64::from).collect()
}

#[test]
fn log_partition_equals_log_sum_exp_over_all_paths() {
    let device = Device::default();
    for p in problems(1, 60) {
        let got = values(
            p.crf(&device)
                .potentials(None)
                .log_partition(p.emissions_tensor(&device), p.mask(&device))
                .unwrap(),
        );
        for (b, &got) in got.iter().enumerate() {
            let want = p.log_z(b);
            assert!(
                (got - want).abs() < 1e-4 * want.abs().max(1.0),
                "k={} lengths={:?}: {got} vs {want}",
                p.k,
                p.lengths,
            );
        }
    }
}

#[test]
fn path_score_equals_the_sum_along_the_path() {
    let device = Device::default();
    for p in problems(2, 60) {
        let crf = p.crf(&device);
        let got = values(
            crf.potentials(None)
                .path_score(
                    p.emissions_tensor(&device),
                    p.tags_tensor(&device),
                    p.mask(&device),
                    &p.lengths,
                )
                .unwrap(),
        );
        for (b, &got) in got.iter().enumerate() {
            let want = p.score(b, &p.gold(b));
            assert!(
                (got - want).abs() < 1e-4 * want.abs().max(1.0),
                "{got} vs {want}"
            );
            // The host version, in f64 throughout, to rounding.
            let host = p.host().row_score(&p.emissions_of(b), &p.gold(b)).unwrap();
            assert!(
                (host - want).abs() < 1e-9 * want.abs().max(1.0),
                "{host} vs {want}"
            );
        }
    }
}

#[test]
fn viterbi_returns_the_enumerated_argmax() {
    let device = Device::default();
    for p in problems(3, 60) {
        let crf = p.crf(&device);
        let decoded = crf
            .potentials(None)
            .viterbi(p.emissions_tensor(&device), p.mask(&device), &p.lengths)
            .unwrap();
        let host_potentials = crf.potentials(None);
        for (b, (path, score)) in decoded.iter().enumerate() {
            let (host_path, host_score) = host_potentials.row_viterbi(&p.emissions_of(b)).unwrap();
            assert_eq!(&host_path, path, "host and tensor Viterbi agree");
            assert!((host_score - *score as f64).abs() < 1e-4 * host_score.abs().max(1.0));
            let (exact_path, exact_score) = p.host().row_viterbi(&p.emissions_of(b)).unwrap();
            assert!((p.score(b, &exact_path) - exact_score).abs() < 1e-9);
            let paths = p.paths(p.lengths[b]);
            let best = paths
                .iter()
                .map(|q| p.score(b, q))
                .fold(f64::NEG_INFINITY, f64::max);
            assert_eq!(path.len(), p.lengths[b]);
            assert!(
                (p.score(b, path) - best).abs() < 1e-4,
                "path {path:?} scores {} < best {best}",
                p.score(b, path)
            );
            assert!((*score as f64 - best).abs() < 1e-4 * best.abs().max(1.0));
            assert!(
                (exact_score - best).abs() < 1e-9,
                "host Viterbi finds the argmax"
            );
        }
    }
}

#[test]
fn autodiff_gradients_match_finite_differences() {
    let device = Device::default().autodiff();
    for mut p in problems(4, 12) {
        let crf = p.crf(&device);
        let emissions = p.emissions_tensor(&device).require_grad();
        let loss = crf
            .potentials(None)
            .nll(
                emissions.clone(),
                p.tags_tensor(&device),
                p.mask(&device),
                &p.lengths,
                Reduction::Sum,
            )
            .unwrap();
        let grads = loss.backward();
        let emission_grad = values(emissions.grad(&grads).expect("emission gradient"));
        let transition_grad = values(
            crf.transitions
                .val()
                .grad(&grads)
                .expect("transition gradient"),
        );

        let h = 1e-5;
        let mut central = |get: fn(&mut Problem) -> &mut Vec<f64>, i: usize| {
            get(&mut p)[i] += h;
            let up = p.nll();
            get(&mut p)[i] -= 2.0 * h;
            let down = p.nll();
            get(&mut p)[i] += h;
            (up - down) / (2.0 * h)
        };
        for (i, &g) in emission_grad.iter().enumerate() {
            let want = central(|p| &mut p.emissions, i);
            assert!((g - want).abs() < 1e-3, "d/d emission[{i}]: {g} vs {want}");
        }
        for (i, &g) in transition_grad.iter().enumerate() {
            let want = central(|p| &mut p.transitions, i);
            assert!(
                (g - want).abs() < 1e-3,
                "d/d transition[{i}]: {g} vs {want}"
            );
        }
    }
}

#[test]
fn reductions() {
    let device = Device::default();
    let p = problems(5, 1).next().unwrap();
    let crf = p.crf(&device);
    let nll = |r| {
        values(
            crf.potentials(None)
                .nll(
                    p.emissions_tensor(&device),
                    p.tags_tensor(&device),
                    p.mask(&device),
                    &p.lengths,
                    r,
                )
                .unwrap(),
        )[0]
    };
    let sum = p.nll();
    let tokens: usize = p.lengths.iter().sum();
    assert!((nll(Reduction::Sum) - sum).abs() < 1e-3);
    assert!((nll(Reduction::Mean) - sum / p.batch() as f64).abs() < 1e-3);
    assert!((nll(Reduction::TokenMean) - sum / tokens as f64).abs() < 1e-3);
}

/// Tag sets of five tags in each scheme, small enough to enumerate.
fn scheme_tags(scheme: TagScheme) -> Vec<String> {
    let tags = match scheme {
        TagScheme::Iob2 => "O B-A I-A B-B I-B",
        TagScheme::Iob1 => "O I-A B-A I-B B-B",
        TagScheme::Iobes => "O B-A I-A E-A S-A",
    };
    tags.split(' ').map(String::from).collect()
}

fn well_formed(scheme: TagScheme, tags: &[String], path: &[usize]) -> bool {
    let named: Vec<Option<&str>> = path.iter().map(|&i| Some(tags[i].as_str())).collect();
    let previous = std::iter::once(None).chain(named.iter().copied());
    let next = named.iter().copied().chain(std::iter::once(None));
    previous
        .zip(next)
        .all(|(p, n)| transition_allowed(scheme, p, n))
}

#[test]
fn constrained_viterbi_returns_the_best_well_formed_path() {
    let device = Device::default();
    let mut rng = StdRng::seed_from_u64(6);
    for round in 0..90 {
        let scheme = TagScheme::ALL[round % 3];
        let tags = scheme_tags(scheme);
        let mut p = Problem::with_tags(&mut rng, tags.len());
        // Trained-looking: strong transitions, many of them into forbidden moves.
        for t in &mut p.transitions {
            *t *= 3.0;
        }
        let constraints = Constraints::for_scheme(&tags, scheme);
        let crf = p.crf(&device);
        let decoded = crf
            .potentials(Some(&constraints))
            .viterbi(p.emissions_tensor(&device), p.mask(&device), &p.lengths)
            .unwrap();
        let host_potentials = crf.potentials(Some(&constraints));
        for (b, (path, _)) in decoded.iter().enumerate() {
            assert!(well_formed(scheme, &tags, path), "{scheme}: {path:?}");
            let (host_path, _) = host_potentials.row_viterbi(&p.emissions_of(b)).unwrap();
            assert_eq!(&host_path, path, "{scheme}: host and tensor Viterbi agree");
            let best = p
                .paths(p.lengths[b])
                .into_iter()
                .filter(|q| well_formed(scheme, &tags, q))
                .map(|q| p.score(b, &q))
                .fold(f64::NEG_INFINITY, f64::max);
            assert!(
                (p.score(b, path) - best).abs() < 1e-4,
                "{scheme}: not the best valid path"
            );
        }
    }
}

#[test]
fn constraints_forbid_exactly_what_the_scheme_forbids() {
    let tags = scheme_tags(TagScheme::Iob2);
    let c = Constraints::for_scheme(&tags, TagScheme::Iob2);
    assert_eq!(c.start, vec![0.0, 0.0, FORBIDDEN, 0.0, FORBIDDEN]);
    // From O (row 0): I-A and I-B forbidden; from B-A (row 1): I-B forbidden.
    assert_eq!(&c.transitions[0..5], &[0.0, 0.0, FORBIDDEN, 0.0, FORBIDDEN]);
    assert_eq!(&c.transitions[5..10], &[0.0, 0.0, 0.0, 0.0, FORBIDDEN]);
    assert!(c.end.iter().all(|&e| e == 0.0));
}

#[test]
fn marginals_match_enumeration_and_sum_to_one() {
    let device = Device::default();
    for p in problems(7, 40) {
        let m = p
            .crf(&device)
            .potentials(None)
            .marginals(p.emissions_tensor(&device), p.mask(&device))
            .unwrap();
        let unary = values(m.unary);
        let pairwise = values(m.pairwise);
        let (k, time) = (p.k, p.time);
        for b in 0..p.batch() {
            let distribution = p.distribution(b);
            for t in 0..time {
                let row = &unary[(b * time + t) * k..(b * time + t + 1) * k];
                if t >= p.lengths[b] {
                    assert!(row.iter().all(|&x| x == 0.0), "padding has no mass");
                    continue;
                }
                assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-4);
                for (tag, &got) in row.iter().enumerate() {
                    let want: f64 = distribution
                        .iter()
                        .filter(|(q, _)| q[t] == tag)
                        .map(|(_, pr)| pr)
                        .sum();
                    assert!(
                        (got - want).abs() < 1e-4,
                        "unary b={b} t={t} tag={tag}: {got} vs {want}"
                    );
                }
            }
            for t in 1..p.lengths[b] {
                for i in 0..k {
                    for j in 0..k {
                        let got = pairwise[(((b * (time - 1)) + t - 1) * k + i) * k + j];
                        let want: f64 = distribution
                            .iter()
                            .filter(|(q, _)| q[t - 1] == i && q[t] == j)
                            .map(|(_, pr)| pr)
                            .sum();
                        assert!((got - want).abs() < 1e-4, "pairwise {got} vs {want}");
                    }
                }
            }
        }
    }
}

#[test]
fn marginals_are_the_gradient_of_log_z() {
    let device = Device::default().autodiff();
    for p in problems(8, 10) {
        let potentials = p.crf(&device).potentials(None);
        let emissions = p.emissions_tensor(&device).require_grad();
        let grads = potentials
            .log_partition(emissions.clone(), p.mask(&device))
            .unwrap()
            .sum()
            .backward();
        let gradient = values(emissions.grad(&grads).expect("emission gradient"));
        let marginals = values(
            potentials
                .marginals(p.emissions_tensor(&device), p.mask(&device))
                .unwrap()
                .unary,
        );
        for (g, m) in gradient.iter().zip(&marginals) {
            assert!((g - m).abs() < 1e-4, "{g} vs {m}");
        }
    }
}

#[test]
fn nbest_returns_the_enumerated_top_paths() {
    let device = Device::default();
    let mut rng = StdRng::seed_from_u64(9);
    for p in problems(9, 40) {
        let n = rng.random_range(1..=6);
        let decoded = p
            .crf(&device)
            .potentials(None)
            .nbest(p.emissions_tensor(&device), p.mask(&device), &p.lengths, n)
            .unwrap();
        for (b, paths) in decoded.iter().enumerate() {
            let mut all: Vec<f64> = p
                .paths(p.lengths[b])
                .iter()
                .map(|q| p.score(b, q))
                .collect();
            all.sort_by(|x, y| y.total_cmp(x));
            assert_eq!(
                paths.len(),
                n.min(all.len()),
                "k={} len={}",
                p.k,
                p.lengths[b]
            );
            for (rank, (path, score)) in paths.iter().enumerate() {
                assert!(
                    (p.score(b, path) - *score as f64).abs() < 1e-3,
                    "reported score is the path's"
                );
                assert!(
                    (all[rank] - *score as f64).abs() < 1e-3,
                    "rank {rank}: {score} vs {}",
                    all[rank]
                );
            }
            let mut distinct: Vec<&Vec<usize>> = paths.iter().map(|(q, _)| q).collect();
            distinct.sort();
            distinct.dedup();
            assert_eq!(distinct.len(), paths.len(), "no path twice");
        }
    }
}

#[test]
fn nbest_of_host_rows_is_nbest_of_the_padded_batch() {
    let device = Device::default();
    let mut rng = StdRng::seed_from_u64(10);
    for p in problems(10, 20) {
        let n = rng.random_range(1..=4);
        let potentials = p.crf(&device).potentials(None);
        let rows: Vec<Vec<f64>> = (0..p.batch()).map(|b| p.emissions_of(b)).collect();
        let from_rows = potentials
            .nbest_of_rows(&rows, &p.lengths, n, &device)
            .unwrap();
        let padded = potentials
            .nbest(p.emissions_tensor(&device), p.mask(&device), &p.lengths, n)
            .unwrap();
        assert_eq!(from_rows, padded);
    }
    // A row that is not its length's worth of scores is an error, not a misread batch.
    let p = problems(11, 1).next().unwrap();
    let potentials = p.crf(&device).potentials(None);
    let mut rows: Vec<Vec<f64>> = (0..p.batch()).map(|b| p.emissions_of(b)).collect();
    rows[0].pop();
    let error = potentials.nbest_of_rows(&rows, &p.lengths, 2, &device);
    assert!(matches!(error, Err(CrfError::Ragged { .. })), "{error:?}");
    let error = potentials.nbest_of_rows(&rows[1..], &p.lengths, 2, &device);
    assert!(matches!(error, Err(CrfError::Shape { .. })), "{error:?}");
}

#[test]
fn host_forward_backward_matches_the_tensor_version_and_enumeration_its_pairs_too() {
    let device = Device::default();
    for p in problems(10, 40) {
        let crf = p.crf(&device);
        let potentials = crf.potentials(None);
        let log_z = values(
            potentials
                .log_partition(p.emissions_tensor(&device), p.mask(&device))
                .unwrap(),
        );
        let unary = values(
            potentials
                .marginals(p.emissions_tensor(&device), p.mask(&device))
                .unwrap()
                .unary,
        );
        let host_potentials = crf.potentials(None);
        for b in 0..p.batch() {
            let emissions = p.emissions_of(b);
            let fb = host_potentials.forward_backward(&emissions).unwrap();
            assert!((fb.log_z - log_z[b]).abs() < 1e-3 * log_z[b].abs().max(1.0));
            for t in 0..p.lengths[b] {
                for tag in 0..p.k {
                    let tensor = unary[(b * p.time + t) * p.k + tag];
                    assert!((fb.marginal(t, tag) - tensor).abs() < 1e-4);
                }
            }
            let exact_potentials = p.host();
            let exact = exact_potentials.forward_backward(&emissions).unwrap();
            let distribution = p.distribution(b);
            for t in 1..p.lengths[b] {
                for (from, to) in (0..p.k).flat_map(|i| (0..p.k).map(move |j| (i, j))) {
                    let want: f64 = (distribution.iter())
                        .filter(|(q, _)| q[t - 1] == from && q[t] == to)
                        .map(|(_, pr)| pr)
                        .sum();
                    let got = exact.pair_marginal(t, from, to);
                    assert!((got - want).abs() < 1e-9, "pair at {t}: {got} vs {want}");
                }
            }
            // A segment's probability, with "the next tag is not 0" as the end condition.
            let len = p.lengths[b];
            let start = len / 2;
            let segment: Vec<usize> = p.gold(b)[start..].iter().copied().take(2).collect();
            let after = start + segment.len();
            let want: f64 = distribution
                .iter()
                .filter(|(q, _)| q[start..after] == segment[..] && (after == len || q[after] != 0))
                .map(|(_, pr)| pr)
                .sum();
            let got = exact
                .segment_probability(start, &segment, |j| j != 0)
                .unwrap();
            assert!((got - want).abs() < 1e-9, "segment {got} vs {want}");
        }
    }
}

#[test]
fn empty_or_mismatched_input_is_an_error_in_both_versions() {
    let device = Device::default();
    let crf = CrfConfig::new(3).init(&device);
    let potentials = crf.potentials(None);
    let emissions = |b: usize, t: usize, k: usize| Tensor::<3>::zeros([b, t, k], &device);
    let mask = |b: usize, t: usize| Tensor::<2>::ones([b, t], &device);
    let tags = |b: usize, t: usize| Tensor::<2, Int>::zeros([b, t], &device);

    for (b, t) in [(0, 4), (2, 0)] {
        assert_eq!(
            potentials
                .log_partition(emissions(b, t, 3), mask(b, t))
                .err(),
            Some(CrfError::Empty)
        );
        assert_eq!(
            potentials.marginals(emissions(b, t, 3), mask(b, t)).err(),
            Some(CrfError::Empty)
        );
        assert_eq!(
            potentials
                .viterbi(emissions(b, t, 3), mask(b, t), &vec![1; b])
                .err(),
            Some(CrfError::Empty)
        );
    }
    assert_eq!(
        potentials
            .log_partition(emissions(2, 4, 5), mask(2, 4))
            .err(),
        Some(CrfError::Tags {
            expected: 3,
            found: 5
        })
    );
    assert!(matches!(
        potentials.marginals(emissions(2, 4, 3), mask(2, 3)),
        Err(CrfError::Shape { what: "a mask", .. })
    ));
    assert!(matches!(
        potentials.path_score(emissions(2, 4, 3), tags(2, 5), mask(2, 4), &[4, 2]),
        Err(CrfError::Shape { what: "tags", .. })
    ));
    assert!(matches!(
        potentials.nll(
            emissions(2, 4, 3),
            tags(2, 4),
            mask(2, 4),
            &[4],
            Reduction::Sum
        ),
        Err(CrfError::Shape {
            what: "lengths",
            ..
        })
    ));
    for bad in [0, 5] {
        assert_eq!(
            potentials
                .nbest(emissions(2, 4, 3), mask(2, 4), &[4, bad], 2)
                .err(),
            Some(CrfError::Length {
                sequence: 1,
                length: bad,
                time: 4
            })
        );
    }
    assert_eq!(
        potentials
            .nbest(emissions(1, 4, 3), mask(1, 4), &[4], 0)
            .err(),
        Some(CrfError::NoPaths)
    );

    let host_potentials = potentials;
    assert_eq!(
        host_potentials.row_viterbi(&[]).err(),
        Some(CrfError::Empty)
    );
    assert_eq!(
        host_potentials.forward_backward(&[0.0; 7]).err(),
        Some(CrfError::Ragged { values: 7, tags: 3 })
    );
    let fb = host_potentials.forward_backward(&[0.0; 6]).unwrap();
    assert_eq!(
        fb.segment_probability(0, &[], |_| true).err(),
        Some(CrfError::Empty)
    );
}

/// Random partial labels for `p`, `[batch, time, k]`: each token is labelled (its gold tag
/// alone), unlabelled (every tag) or narrowed to a random non-empty set of tags, as boundary
/// tokens next to unlabelled ones are; padding allows every tag.
fn partial_labels(p: &Problem, rng: &mut StdRng) -> Vec<bool> {
    let mut allowed = vec![true; p.batch() * p.time * p.k];
    for b in 0..p.batch() {
        for t in 0..p.lengths[b] {
            let row = &mut allowed[(b * p.time + t) * p.k..][..p.k];
            match rng.random_range(0..3) {
                0 => {
                    let gold = p.tags[b * p.time + t] as usize;
                    row.iter_mut().enumerate().for_each(|(y, a)| *a = y == gold);
                }
                1 => {}
                _ => {
                    row.iter_mut().for_each(|a| *a = rng.random_bool(0.5));
                    row[rng.random_range(0..p.k)] = true;
                }
            }
        }
    }
    allowed
}

/// The partial-label NLL of `p` summed over its sequences, by enumeration: log Z minus the
/// log-sum-exp of the paths through allowed tags.
fn enumerated_partial_nll(p: &Problem, allowed: &[bool]) -> f64 {
    (0..p.batch())
        .map(|b| {
            let consistent: Vec<f64> = p
                .paths(p.lengths[b])
                .iter()
                .filter(|path| {
                    path.iter()
                        .enumerate()
                        .all(|(t, &y)| allowed[(b * p.time + t) * p.k + y])
                })
                .map(|path| p.score(b, path))
                .collect();
            let max = consistent.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let log_allowed = max + consistent.iter().map(|s| (s - max).exp()).sum::<f64>().ln();
            p.log_z(b) - log_allowed
        })
        .sum()
}

fn allowed_tensor(p: &Problem, allowed: &[bool], device: &Device) -> Tensor<3> {
    let data: Vec<f32> = allowed.iter().map(|&a| f32::from(u8::from(a))).collect();
    Tensor::from_data(TensorData::new(data, [p.batch(), p.time, p.k]), device)
}

#[test]
fn partial_nll_equals_enumeration_over_the_consistent_paths() {
    let device = Device::default();
    let mut rng = StdRng::seed_from_u64(11);
    for p in problems(12, 60) {
        let allowed = partial_labels(&p, &mut rng);
        let want = enumerated_partial_nll(&p, &allowed);
        let potentials = p.crf(&device).potentials(None);
        let got = values(
            potentials
                .partial_nll(
                    p.emissions_tensor(&device),
                    allowed_tensor(&p, &allowed, &device),
                    p.mask(&device),
                    &p.lengths,
                    Reduction::Sum,
                )
                .unwrap(),
        )[0];
        assert!(
            (got - want).abs() < 1e-3 * want.abs().max(1.0),
            "tensor: k={} lengths={:?}: {got} vs {want}",
            p.k,
            p.lengths
        );
        let host_potentials = p.host();
        let host_total: f64 = (0..p.batch())
            .map(|b| {
                let start = b * p.time * p.k;
                let row = &allowed[start..start + p.lengths[b] * p.k];
                host_potentials
                    .row_partial_nll(&p.emissions_of(b), row)
                    .unwrap()
            })
            .sum();
        assert!(
            (host_total - want).abs() < 1e-9 * want.abs().max(1.0),
            "host: {host_total} vs {want}"
        );
    }
}

#[test]
fn partial_nll_with_every_token_labelled_is_the_nll() {
    let device = Device::default();
    for p in problems(13, 30) {
        let allowed: Vec<bool> = (0..p.batch() * p.time)
            .flat_map(|slot| (0..p.k).map(move |y| (slot, y)))
            .map(|(slot, y)| p.tags[slot] as usize == y)
            .collect();
        let potentials = p.crf(&device).potentials(None);
        let partial = values(
            potentials
                .partial_nll(
                    p.emissions_tensor(&device),
                    allowed_tensor(&p, &allowed, &device),
                    p.mask(&device),
                    &p.lengths,
                    Reduction::Mean,
                )
                .unwrap(),
        )[0];
        let full = values(
            potentials
                .nll(
                    p.emissions_tensor(&device),
                    p.tags_tensor(&device),
                    p.mask(&device),
                    &p.lengths,
                    Reduction::Mean,
                )
                .unwrap(),
        )[0];
        assert!((partial - full).abs() < 1e-3, "{partial} vs {full}");
    }
}

#[test]
fn partial_nll_gradients_match_finite_differences() {
    let device = Device::default().autodiff();
    let mut rng = StdRng::seed_from_u64(14);
    for mut p in problems(15, 12) {
        let allowed = partial_labels(&p, &mut rng);
        let crf = p.crf(&device);
        let emissions = p.emissions_tensor(&device).require_grad();
        let loss = crf
            .potentials(None)
            .partial_nll(
                emissions.clone(),
                allowed_tensor(&p, &allowed, &device),
                p.mask(&device),
                &p.lengths,
                Reduction::Sum,
            )
            .unwrap();
        let grads = loss.backward();
        let emission_grad = values(emissions.grad(&grads).expect("emission gradient"));
        let parameter_grads = [
            // One-token batches have no transitions, so no gradient reaches them.
            crf.transitions
                .val()
                .grad(&grads)
                .map_or(vec![0.0; p.k * p.k], values),
            values(crf.start.val().grad(&grads).expect("start")),
            values(crf.end.val().grad(&grads).expect("end")),
        ];

        let h = 1e-5;
        let mut central = |get: fn(&mut Problem) -> &mut Vec<f64>, i: usize| {
            get(&mut p)[i] += h;
            let up = enumerated_partial_nll(&p, &allowed);
            get(&mut p)[i] -= 2.0 * h;
            let down = enumerated_partial_nll(&p, &allowed);
            get(&mut p)[i] += h;
            (up - down) / (2.0 * h)
        };
        for (i, &g) in emission_grad.iter().enumerate() {
            let want = central(|p| &mut p.emissions, i);
            assert!((g - want).abs() < 1e-3, "d/d emission[{i}]: {g} vs {want}");
        }
        let getters: [fn(&mut Problem) -> &mut Vec<f64>; 3] =
            [|p| &mut p.transitions, |p| &mut p.start, |p| &mut p.end];
        for (grad, get) in parameter_grads.iter().zip(getters) {
            for (i, &g) in grad.iter().enumerate() {
                let want = central(get, i);
                assert!((g - want).abs() < 1e-3, "d/d parameter[{i}]: {g} vs {want}");
            }
        }
    }
}

#[test]
fn partial_labels_of_the_wrong_shape_are_an_error_in_both_versions() {
    let device = Device::default();
    let potentials = CrfConfig::new(3).init(&device).potentials(None);
    assert!(matches!(
        potentials.partial_nll(
            Tensor::zeros([2, 4, 3], &device),
            Tensor::ones([2, 4, 2], &device),
            Tensor::ones([2, 4], &device),
            &[4, 2],
            Reduction::Sum
        ),
        Err(CrfError::Shape {
            what: "allowed tags",
            ..
        })
    ));
    assert!(matches!(
        potentials.row_partial_nll(&[0.0; 6], &[true; 5]),
        Err(CrfError::Shape {
            what: "allowed tags",
            ..
        })
    ));
}

/// Host input is checked where it enters, as tensor input is: a path of the wrong length or
/// with tag ids past the CRF's, a segment past the sentence, and scores that are not a CRF's
/// are errors, never a panic.
#[test]
fn host_entries_refuse_what_they_cannot_score() {
    let device = Device::default();
    let potentials = Potentials::from_values(vec![0.0; 3], vec![0.0; 9], vec![0.0; 3], &device)
        .expect("three tags");
    let emissions = [0.0; 6];
    assert!(potentials.row_score(&emissions, &[0, 1]).is_ok());
    assert!(matches!(
        potentials.row_score(&emissions, &[0]),
        Err(CrfError::Shape { what: "a path", .. })
    ));
    assert_eq!(
        potentials.row_score(&emissions, &[0, 3]).err(),
        Some(CrfError::Tags {
            expected: 3,
            found: 4
        })
    );
    let fb = potentials.forward_backward(&emissions).unwrap();
    assert!(matches!(
        fb.segment_probability(1, &[0, 0], |_| true),
        Err(CrfError::Shape {
            what: "a segment",
            ..
        })
    ));
    assert!(matches!(
        fb.segment_probability(0, &[5], |_| true),
        Err(CrfError::Shape { .. })
    ));
    // Uniform scores: each of the 9 paths is equally likely.
    let probability = fb.segment_probability(0, &[1, 2], |_| true).unwrap();
    assert!((probability - 1.0 / 9.0).abs() < 1e-12, "{probability}");
    assert!(matches!(
        Potentials::from_values(vec![0.0; 3], vec![0.0; 8], vec![0.0; 3], &device),
        Err(CrfError::Shape { .. })
    ));
}

/// Whether `path` of sequence `b` goes through allowed tags alone.
fn through_allowed(p: &Problem, allowed: &[bool], b: usize, path: &[usize]) -> bool {
    path.iter()
        .enumerate()
        .all(|(t, &y)| allowed[(b * p.time + t) * p.k + y])
}

#[test]
fn forced_decoding_equals_enumeration_over_the_allowed_paths() {
    let mut rng = StdRng::seed_from_u64(21);
    for p in problems(22, 60) {
        let allowed = partial_labels(&p, &mut rng);
        let potentials = p.host();
        for b in 0..p.batch() {
            let start = b * p.time * p.k;
            let row = &allowed[start..start + p.lengths[b] * p.k];
            let restricted = potentials.restrict(&p.emissions_of(b), row).unwrap();
            let paths: Vec<(Vec<usize>, f64)> = p
                .paths(p.lengths[b])
                .into_iter()
                .filter(|path| through_allowed(&p, &allowed, b, path))
                .map(|path| {
                    let score = p.score(b, &path);
                    (path, score)
                })
                .collect();
            // The best allowed path, ties to the lowest tags as the Viterbi breaks them.
            let best = paths
                .iter()
                .max_by(|x, y| x.1.total_cmp(&y.1).then(y.0.cmp(&x.0)))
                .unwrap();
            let (path, score) = potentials.row_viterbi(&restricted).unwrap();
            assert_eq!(path, best.0, "k={} length={}", p.k, p.lengths[b]);
            assert!((score - best.1).abs() < 1e-9, "{score} vs {}", best.1);
            // Marginals conditioned on the allowed tags.
            let log_total = {
                let max = paths.iter().map(|x| x.1).fold(f64::NEG_INFINITY, f64::max);
                max + paths.iter().map(|x| (x.1 - max).exp()).sum::<f64>().ln()
            };
            let fb = potentials.forward_backward(&restricted).unwrap();
            assert!((fb.log_z - log_total).abs() < 1e-9);
            for t in 0..p.lengths[b] {
                for tag in 0..p.k {
                    let want: f64 = paths
                        .iter()
                        .filter(|(q, _)| q[t] == tag)
                        .map(|(_, s)| (s - log_total).exp())
                        .sum();
                    let got = fb.marginal(t, tag);
                    assert!(
                        (got - want).abs() < 1e-9,
                        "t={t} tag={tag}: {got} vs {want}"
                    );
                    if !allowed[(b * p.time + t) * p.k + tag] {
                        assert_eq!(got, 0.0);
                    }
                }
            }
        }
    }
}

#[test]
fn forcing_a_token_to_no_tag_is_an_error() {
    for p in problems(23, 10) {
        let len = p.lengths[0];
        let potentials = p.host();
        let mut allowed = vec![true; len * p.k];
        let token = len - 1;
        allowed[token * p.k..(token + 1) * p.k].fill(false);
        assert_eq!(
            potentials.restrict(&p.emissions_of(0), &allowed),
            Err(CrfError::NoAllowedPath { token })
        );
        let short = vec![true; len * p.k - 1];
        assert!(matches!(
            potentials.restrict(&p.emissions_of(0), &short),
            Err(CrfError::Shape { .. })
        ));
    }
}

impl Problem {
    /// Other scores over the same tags and lengths: a teacher for this problem.
    fn rescored(&self, rng: &mut StdRng) -> Self {
        let mut normal = |n: usize| {
            (0..n)
                .map(|_| rng.random_range(-2.0..2.0))
                .collect::<Vec<f64>>()
        };
        Self {
            k: self.k,
            lengths: self.lengths.clone(),
            time: self.time,
            emissions: normal(self.emissions.len()),
            transitions: normal(self.k * self.k),
            start: normal(self.k),
            end: normal(self.k),
            tags: self.tags.clone(),
        }
    }

    /// The constraints' penalties added to the scores, so that enumeration scores what the
    /// constrained potentials score.
    fn constrained_copy(&self, c: &Constraints) -> Self {
        let mut copy = Self {
            emissions: self.emissions.clone(),
            transitions: self.transitions.clone(),
            start: self.start.clone(),
            end: self.end.clone(),
            lengths: self.lengths.clone(),
            tags: self.tags.clone(),
            ..*self
        };
        let add = |scores: &mut [f64], penalties: &[f32]| {
            scores
                .iter_mut()
                .zip(penalties)
                .for_each(|(s, &p)| *s += f64::from(p));
        };
        add(&mut copy.start, &c.start);
        add(&mut copy.transitions, &c.transitions);
        add(&mut copy.end, &c.end);
        copy
    }

    /// Σ over sequences of the cross-entropy −Σ_y q(y) log p(y) of this problem's distribution
    /// p against `teacher`'s q, by enumeration.
    fn cross_entropy(&self, teacher: &Problem) -> f64 {
        (0..self.batch())
            .map(|b| {
                let log_z = self.log_z(b);
                (teacher.distribution(b).iter())
                    .map(|(path, q)| q * (log_z - self.score(b, path)))
                    .sum::<f64>()
            })
            .sum()
    }
}

/// Every problem with a random teacher, unconstrained, then with a scheme's constraints applied
/// to both (the enumeration scoring the penalties as the potentials do).
fn distillation_cases(seed: u64) -> Vec<(Problem, Problem, Option<Constraints>)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut cases = Vec::new();
    for round in 0..30 {
        let k = rng.random_range(1..=4);
        let p = Problem::with_tags(&mut rng, k);
        let teacher = p.rescored(&mut rng);
        cases.push((p, teacher, None));
        let scheme = TagScheme::ALL[round % 3];
        let c = Constraints::for_scheme(&scheme_tags(scheme), scheme);
        let p = Problem::with_tags(&mut rng, 5);
        let teacher = p.rescored(&mut rng);
        cases.push((p, teacher, Some(c)));
    }
    cases
}

/// The teacher's marginals under `constraints`, from the tensor CRF (itself checked against
/// enumeration above).
fn teacher_marginals(
    teacher: &Problem,
    constraints: Option<&Constraints>,
    device: &Device,
) -> nertrain_model::Marginals {
    teacher
        .crf(device)
        .potentials(constraints)
        .marginals(teacher.emissions_tensor(device), teacher.mask(device))
        .unwrap()
}

#[test]
fn distillation_loss_is_the_cross_entropy_over_enumerated_paths() {
    let device = Device::default();
    for (p, teacher, constraints) in distillation_cases(21) {
        let q = teacher_marginals(&teacher, constraints.as_ref(), &device);
        let (want, tokens) = match &constraints {
            None => (p.cross_entropy(&teacher), p.lengths.iter().sum::<usize>()),
            Some(c) => {
                let (student, teacher) = (p.constrained_copy(c), teacher.constrained_copy(c));
                (
                    student.cross_entropy(&teacher),
                    student.lengths.iter().sum(),
                )
            }
        };
        let loss = |reduction| {
            values(
                p.crf(&device)
                    .potentials(constraints.as_ref())
                    .distillation_loss(
                        p.emissions_tensor(&device),
                        &q,
                        p.mask(&device),
                        &p.lengths,
                        reduction,
                    )
                    .unwrap(),
            )[0]
        };
        let tolerance = 1e-3 * want.abs().max(1.0);
        let sum = loss(Reduction::Sum);
        assert!((sum - want).abs() < tolerance, "{sum} vs {want}");
        let per_token = loss(Reduction::TokenMean);
        assert!(
            (per_token - want / tokens as f64).abs() < tolerance,
            "{per_token}"
        );
    }
}

#[test]
fn distillation_gradients_are_the_students_marginals_minus_the_teachers() {
    let device = Device::default().autodiff();
    for (mut p, teacher, constraints) in distillation_cases(22).into_iter().step_by(3) {
        let q = teacher_marginals(&teacher, constraints.as_ref(), &device);
        let crf = p.crf(&device);
        let potentials = crf.potentials(constraints.as_ref());
        let emissions = p.emissions_tensor(&device).require_grad();
        let grads = potentials
            .distillation_loss(
                emissions.clone(),
                &q,
                p.mask(&device),
                &p.lengths,
                Reduction::Sum,
            )
            .unwrap()
            .backward();
        let gradient = values(emissions.grad(&grads).expect("emission gradient"));
        let own = potentials
            .marginals(p.emissions_tensor(&device), p.mask(&device))
            .unwrap();
        let want: Vec<f64> = (values(own.unary).iter().zip(values(q.unary.clone())))
            .map(|(p, q)| p - q)
            .collect();
        for (g, w) in gradient.iter().zip(&want) {
            assert!((g - w).abs() < 1e-4, "d/d emission: {g} vs {w}");
        }
        if constraints.is_some() {
            continue;
        }
        // The transitions' gradient against central differences of the enumerated loss.
        // One-token sequences alone have no transitions for a gradient to reach.
        let transition_grad = match crf.transitions.val().grad(&grads) {
            Some(grad) => values(grad),
            None if p.time == 1 => Vec::new(),
            None => panic!("no transition gradient"),
        };
        let h = 1e-5;
        for (i, &g) in transition_grad.iter().enumerate() {
            p.transitions[i] += h;
            let up = p.cross_entropy(&teacher);
            p.transitions[i] -= 2.0 * h;
            let down = p.cross_entropy(&teacher);
            p.transitions[i] += h;
            let want = (up - down) / (2.0 * h);
            assert!(
                (g - want).abs() < 1e-3,
                "d/d transition[{i}]: {g} vs {want}"
            );
        }
    }
}

#[test]
fn a_crf_distilled_from_itself_is_at_a_fixed_point() {
    let device = Device::default().autodiff();
    for p in problems(23, 20) {
        let crf = p.crf(&device);
        let potentials = crf.potentials(None);
        let own = potentials
            .marginals(p.emissions_tensor(&device), p.mask(&device))
            .unwrap();
        let emissions = p.emissions_tensor(&device).require_grad();
        let loss = potentials
            .distillation_loss(
                emissions.clone(),
                &own,
                p.mask(&device),
                &p.lengths,
                Reduction::Sum,
            )
            .unwrap();
        // The loss is then the distribution's entropy, and no parameter moves it.
        let entropy: f64 = (0..p.batch())
            .flat_map(|b| p.distribution(b))
            .map(|(_, pr)| if pr > 0.0 { -pr * pr.ln() } else { 0.0 })
            .sum();
        let got = values(loss.clone())[0];
        assert!(
            (got - entropy).abs() < 1e-3 * entropy.max(1.0),
            "{got} vs {entropy}"
        );
        let grads = loss.backward();
        let emission_grad = values(emissions.grad(&grads).expect("emission gradient"));
        let start_grad = values(crf.start.val().grad(&grads).expect("start gradient"));
        // One-token sequences alone have no transitions for a gradient to reach.
        let transition_grad = match crf.transitions.val().grad(&grads) {
            Some(grad) => values(grad),
            None if p.time == 1 => Vec::new(),
            None => panic!("no transition gradient"),
        };
        for g in [emission_grad, start_grad, transition_grad].concat() {
            assert!(g.abs() < 1e-5, "gradient {g} at the fixed point");
        }
    }
}

#[test]
fn a_teachers_marginals_of_another_shape_are_an_error() {
    let device = Device::default();
    let p = problems(24, 1).next().unwrap();
    let potentials = p.crf(&device).potentials(None);
    let q = potentials
        .marginals(p.emissions_tensor(&device), p.mask(&device))
        .unwrap();
    let loss = |q: &nertrain_model::Marginals| {
        potentials.distillation_loss(
            p.emissions_tensor(&device),
            q,
            p.mask(&device),
            &p.lengths,
            Reduction::Sum,
        )
    };
    assert!(loss(&q).is_ok());
    let [batch, time, k] = q.unary.dims();
    let zeros = |shape: [usize; 4]| Tensor::<4>::zeros(shape, &device);
    // A token more than the emissions have, then a pair more.
    let too_long = nertrain_model::Marginals {
        unary: Tensor::zeros([batch, time + 1, k], &device),
        pairwise: q.pairwise.clone(),
    };
    let one_pair_more = nertrain_model::Marginals {
        unary: q.unary.clone(),
        pairwise: zeros([batch, time, k, k]),
    };
    for bad in [too_long, one_pair_more] {
        let error = loss(&bad).unwrap_err();
        assert!(matches!(error, CrfError::Shape { .. }), "{error}");
        assert!(error.to_string().contains("teacher's"), "{error}");
    }
}
