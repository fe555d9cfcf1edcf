//! Global gradient-norm clipping, as PyTorch's `clip_grad_norm_`: Burn's own clipping works per
//! parameter tensor, which changes the direction of the update. The norm is over the module's
//! gradients and the word embedding's row-sparse one together.

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;
use nertrain_model::sum_of_squares;

struct SquaredNorm<'a> {
    grads: &'a GradientsParams,
    total: f64,
}

impl ModuleVisitor for SquaredNorm<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(grad) = self.grads.get::<D>(param.id) {
            self.total += sum_of_squares(grad);
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

/// The sum of squares of all of `module`'s gradients.
pub fn squared_norm<M: Module>(module: &M, grads: &GradientsParams) -> f64 {
    let mut norm = SquaredNorm { grads, total: 0.0 };
    module.visit(&mut norm);
    norm.total
}

/// What to multiply gradients of joint L2 norm `norm` by so that it is at most `max_norm`
/// (0: no limit).
pub fn clip_factor(norm: f64, max_norm: f64) -> f64 {
    if max_norm > 0.0 && norm > max_norm {
        max_norm / (norm + 1e-6)
    } else {
        1.0
    }
}

/// Multiplies every gradient of `module` in `grads` by `factor`.
pub fn scale<M: Module>(module: &M, grads: &mut GradientsParams, factor: f64) {
    module.visit(&mut Scale { grads, factor });
}
