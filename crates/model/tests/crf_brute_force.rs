//! The CRF against brute force: on tiny random problems every tag path is enumerated, and log Z,
//! path scores, the Viterbi path and the gradients are checked against the enumeration.

use burn::module::Param;
use burn::tensor::{Device, Int, Tensor, TensorData};
use nertrain_model::{Crf, CrfConfig, Reduction};
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
                .log_partition(p.emissions_tensor(&device), p.mask(&device)),
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
        let got = values(crf.path_score(
            p.emissions_tensor(&device),
            p.tags_tensor(&device),
            p.mask(&device),
            &p.lengths,
        ));
        for (b, &got) in got.iter().enumerate() {
            let want = p.score(b, &p.gold(b));
            assert!(
                (got - want).abs() < 1e-4 * want.abs().max(1.0),
                "{got} vs {want}"
            );
        }
    }
}

#[test]
fn viterbi_returns_the_enumerated_argmax() {
    let device = Device::default();
    for p in problems(3, 60) {
        let decoded =
            p.crf(&device)
                .viterbi(p.emissions_tensor(&device), p.mask(&device), &p.lengths);
        for (b, (path, score)) in decoded.iter().enumerate() {
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
        }
    }
}

#[test]
fn autodiff_gradients_match_finite_differences() {
    let device = Device::default().autodiff();
    for mut p in problems(4, 12) {
        let crf = p.crf(&device);
        let emissions = p.emissions_tensor(&device).require_grad();
        let loss = crf.nll(
            emissions.clone(),
            p.tags_tensor(&device),
            p.mask(&device),
            &p.lengths,
            Reduction::Sum,
        );
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
        values(crf.nll(
            p.emissions_tensor(&device),
            p.tags_tensor(&device),
            p.mask(&device),
            &p.lengths,
            r,
        ))[0]
    };
    let sum = p.nll();
    let tokens: usize = p.lengths.iter().sum();
    assert!((nll(Reduction::Sum) - sum).abs() < 1e-3);
    assert!((nll(Reduction::Mean) - sum / p.batch() as f64).abs() < 1e-3);
    assert!((nll(Reduction::TokenMean) - sum / tokens as f64).abs() < 1e-3);
}
