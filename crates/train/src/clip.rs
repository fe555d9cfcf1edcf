//! Global gradient-norm clipping, as PyTorch's `clip_grad_norm_`: Burn's own clipping works per
//! parameter tensor, which changes the direction of the update.

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

struct SquaredNorm<'a> {
    grads: &'a GradientsParams,
    total: f64,
}

impl ModuleVisitor for SquaredNorm<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(grad) = self.grads.get::<D>(param.id) {
            self.total += grad.square().sum().into_scalar::<f64>();
        }
    }
}

struct Scale<'a> {
    grads: &'a mut GradientsParams,
    factor: f64,
}

impl ModuleVisitor for Scale<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(grad) = self.grads.remove::<D>(param.id) {
            self.grads.register(param.id, grad * self.factor);
        }
    }
}

/// Scales all gradients so their joint L2 norm is at most `max_norm`; returns the norm before.
pub fn clip_global_norm<M: Module>(module: &M, grads: &mut GradientsParams, max_norm: f64) -> f64 {
    let mut norm = SquaredNorm { grads, total: 0.0 };
    module.visit(&mut norm);
    let norm = norm.total.sqrt();
    if max_norm > 0.0 && norm > max_norm {
        module.visit(&mut Scale {
            grads,
            factor: max_norm / (norm + 1e-6),
        });
    }
    norm
}
