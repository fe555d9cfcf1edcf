//! The fine-tuned encoder's AdamW: Burn's rule and Burn's state (a checkpoint's optimiser file
//! reads and writes as Burn's `AdamW`'s), with the update on flex one pass over each parameter's
//! values on the host, where Burn's is a dozen tensor operations, each allocating a tensor of
//! the parameter's size (the word-piece table's among them, half of a small encoder).

use burn::optim::{AdamW, AdamWConfig, AdamWState, AdaptiveMomentumState, LearningRate, Optimizer};
use burn::tensor::{Device, Tensor, TensorData};

/// AdamW as Burn's, its update on the host on flex ([`Optimizer`] for Burn's `ModuleOptimizer`).
#[derive(Clone)]
pub struct EncoderAdamW {
    burn: AdamW,
    beta_1: f32,
    beta_2: f32,
    epsilon: f32,
    weight_decay: f32,
}

impl EncoderAdamW {
    /// Burn's `AdamWConfig` defaults but `weight_decay`.
    pub fn new(weight_decay: f32) -> Self {
        let (beta_1, beta_2, epsilon) = (0.9, 0.999, 1e-5);
        let burn = AdamWConfig::new()
            .with_beta_1(beta_1)
            .with_beta_2(beta_2)
            .with_epsilon(epsilon)
            .with_weight_decay(weight_decay)
            .build();
        Self {
            burn,
            beta_1,
            beta_2,
            epsilon,
            weight_decay,
        }
    }

    /// One step of `values` with `grad` from moments `first` and `second` at step `time`
    /// (from 1), element by element as Burn's tensor operations compute it.
    fn update(&self, lr: LearningRate, time: usize, values: Moments<'_>, grad: &[f32]) {
        let (beta_1, beta_2, epsilon) = (self.beta_1, self.beta_2, self.epsilon);
        let (factor_1, factor_2) = (1.0 - beta_1, 1.0 - beta_2);
        let t = time.min(i32::MAX as usize) as i32;
        let (correction_1, correction_2) = (1.0 - beta_1.powi(t), 1.0 - beta_2.powi(t));
        let keep = (1.0 - lr * self.weight_decay as f64) as f32;
        let lr = lr as f32;
        let Moments {
            weights,
            first,
            second,
        } = values;
        for (((w, m), v), &g) in weights.iter_mut().zip(first).zip(second).zip(grad) {
            *m = *m * beta_1 + g * factor_1;
            *v = *v * beta_2 + g * g * factor_2;
            let delta = (*m / correction_1) / ((*v / correction_2).sqrt() + epsilon);
            *w = *w * keep - delta * lr;
        }
    }
}

/// A parameter's values and its two moments, updated in place.
struct Moments<'a> {
    weights: &'a mut [f32],
    first: &'a mut [f32],
    second: &'a mut [f32],
}

/// A tensor's values, without a copy where it is the only owner of a contiguous buffer.
fn values<const D: usize>(tensor: Tensor<D>) -> Vec<f32> {
    tensor
        .into_data()
        .try_into_vec::<f32>()
        .expect("f32 parameters")
}

impl Optimizer for EncoderAdamW {
    type State<const D: usize> = AdamWState<D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<D>,
        grad: Tensor<D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<D>, Option<Self::State<D>>) {
        let device = tensor.device();
        if device != Device::flex() {
            return self.burn.step(lr, tensor, grad, state);
        }
        let shape = tensor.shape();
        let mut weights = values(tensor);
        let grad = values(grad);
        let (time, mut first, mut second) = match state {
            Some(state) => {
                let momentum = state.momentum;
                let (first, second) = (values(momentum.moment_1), values(momentum.moment_2));
                (momentum.time + 1, first, second)
            }
            None => (1, vec![0.0; weights.len()], vec![0.0; weights.len()]),
        };
        let moments = Moments {
            weights: &mut weights,
            first: &mut first,
            second: &mut second,
        };
        self.update(lr, time, moments, &grad);
        let tensor = |values: Vec<f32>| {
            Tensor::<D>::from_data(TensorData::new(values, shape.clone()), &device)
        };
        let momentum = AdaptiveMomentumState::new(time, tensor(first), tensor(second));
        (tensor(weights), Some(AdamWState::new(momentum)))
    }

    fn to_device<const D: usize>(state: Self::State<D>, device: &Device) -> Self::State<D> {
        <AdamW as Optimizer>::to_device(state, device)
    }
}

#[cfg(test)]
mod tests {
    use burn::nn::{Linear, LinearConfig};
    use burn::optim::{GradientsParams, ModuleOptimizer};
    use burn::tensor::{Distribution, Tolerance};

    use super::*;

    fn train(
        model: Linear,
        optimizer: &mut ModuleOptimizer,
        steps: std::ops::Range<u64>,
    ) -> Linear {
        let mut model = model;
        for step in steps {
            let device = model.weight.device();
            device.seed(step);
            let x = Tensor::<2>::random([6, 4], Distribution::Default, &device);
            let loss = model.forward(x).powf_scalar(2.0).sum();
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optimizer.step(1e-2 * (step + 1) as f64, model, grads);
        }
        model
    }

    fn assert_same(a: &Linear, b: &Linear) {
        let data = |m: &Linear| m.weight.val().into_data();
        data(a).assert_approx_eq::<f32>(&data(b), Tolerance::absolute(1e-6));
        let bias = |m: &Linear| m.bias.as_ref().unwrap().val().into_data();
        bias(a).assert_approx_eq::<f32>(&bias(b), Tolerance::absolute(1e-6));
    }

    #[test]
    fn trains_as_burns_adamw_and_resumes_from_its_state_file() {
        let device = Device::flex().autodiff();
        device.seed(1);
        let start = LinearConfig::new(4, 3).init(&device);
        let burns = || AdamWConfig::new().with_weight_decay(0.01).init();
        let ours = || ModuleOptimizer::from(EncoderAdamW::new(0.01));

        let (mut burn, mut fused) = (burns(), ours());
        let by_burn = train(start.clone(), &mut burn, 0..3);
        let by_fused = train(start.clone(), &mut fused, 0..3);
        assert_same(&by_burn, &by_fused);
        assert!(by_burn.weight.val().into_data() != start.weight.val().into_data());

        // Burn's state file, read by ours, continues as Burn's own would.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("optimizer");
        burn.save(&path).unwrap();
        let mut resumed = ours().load(&path).unwrap();
        let by_burn = train(by_burn, &mut burn, 3..6);
        let by_resumed = train(by_fused.clone(), &mut resumed, 3..6);
        let by_fused = train(by_fused, &mut fused, 3..6);
        assert_same(&by_burn, &by_resumed);
        assert_same(&by_burn, &by_fused);
    }
}
