//! The encoder's dense layers (product, bias and activation) and its embedding lookups as single
//! operations with hand-written backward passes, on flex. Through Burn's ops a dense layer is a
//! matmul, a broadcast add and an activation, each allocating its output and recorded by autodiff
//! apart, and an embedding's gradient is a zeroed table filled by a scatter; flex allocates each
//! fresh tensor zeroed and then copies it once more to align it. Here each output is one buffer
//! written once. Elsewhere (wgpu, ndarray) [`dense`] and [`embedding`] are Burn's ops.

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Dispatch, Flex, backend_extension};
use burn::nn::{Dropout, Linear};
use burn::tensor::activation::{gelu, gelu_approximate, relu};
use burn::tensor::{Device, Distribution, Int, Tensor, TensorData};

use super::Activation;
use crate::host::{Matrix, erf_f32, f32s, flex, gemm_into, tanh_f32};
use crate::vectorize::vectorized;

/// Set (to anything) to run the encoder on Burn's ops everywhere: for measuring the fused ones.
pub const TENSOR_ENCODER_VARIABLE: &str = "NERTRAIN_TENSOR_ENCODER";

/// Whether the fused operations run on `device` (with or without autodiff): on flex.
pub fn has_fused(device: &Device) -> bool {
    // Device equality compares hardware and ignores autodiff, so this holds for training too.
    *device == Device::flex() && std::env::var_os(TENSOR_ENCODER_VARIABLE).is_none()
}

/// `linear` applied to `x` `[.., d_input]`, then `activation`: fused where [`has_fused`] holds
/// and the layer has a bias, Burn's ops otherwise.
pub fn dense<const D: usize>(
    linear: &Linear,
    x: Tensor<D>,
    activation: Option<Activation>,
) -> Tensor<D> {
    let weight = linear.weight.val();
    let [d_input, d_output] = weight.dims();
    let dims = x.dims();
    match &linear.bias {
        Some(bias) if has_fused(&x.device()) => {
            let rows = dims[..D - 1].iter().product();
            let out = Tensor::<2>::from_dispatch(<Dispatch as FusedEncoder>::dense_layer(
                x.reshape([rows, d_input]).into_dispatch(),
                weight.into_dispatch(),
                bias.val().into_dispatch(),
                activation,
            ));
            let mut shape = dims;
            shape[D - 1] = d_output;
            out.reshape(shape)
        }
        _ => activated(linear.forward(x), activation),
    }
}

/// `y` through `activation`, in Burn's ops.
fn activated<const D: usize>(y: Tensor<D>, activation: Option<Activation>) -> Tensor<D> {
    match activation {
        None => y,
        Some(Activation::Gelu) => gelu(y),
        Some(Activation::GeluTanh) => gelu_approximate(y),
        Some(Activation::Relu) => relu(y),
    }
}

/// The rows of `table` `[entries, width]` at `ids` `[batch, len]`: `[batch, len, width]`, as
/// Burn's `embedding`, fused where [`has_fused`] holds.
pub fn embedding(table: Tensor<2>, ids: Tensor<2, Int>) -> Tensor<3> {
    if !has_fused(&table.device()) {
        return burn::tensor::module::embedding(table, ids);
    }
    let [batch, len] = ids.dims();
    let width = table.dims()[1];
    let ids: Vec<usize> = ids
        .into_data()
        .iter::<i64>()
        .map(|id| id as usize)
        .collect();
    Tensor::<2>::from_dispatch(<Dispatch as FusedEncoder>::embedding_rows(
        table.into_dispatch(),
        ids,
    ))
    .reshape([batch, len, width])
}

/// `dropout` applied to `x`, as Burn's `Dropout::forward` (nothing unless training on an
/// autodiff device), its mask drawn in the operation where [`has_fused`] holds: a seed from the
/// device's generator, then a hash of each element's position, in place of a random tensor.
pub fn dropout<const D: usize>(dropout: &Dropout, x: Tensor<D>) -> Tensor<D> {
    let device = x.device();
    if !has_fused(&device) {
        return dropout.forward(x);
    }
    let Some(mask) = DropMask::draw(dropout, &device) else {
        return x;
    };
    let dims = x.dims();
    Tensor::<D>::from_dispatch(<Dispatch as FusedEncoder>::dropout_mask(
        x.into_dispatch(),
        mask,
    ))
    .reshape(dims)
}

/// Which elements a dropout keeps: element `i` where the hash of `i` and `seed`, as a fraction
/// of 2³², is below `keep`.
#[derive(Debug, Clone, Copy)]
pub struct DropMask {
    seed: u64,
    keep: f32,
}

impl DropMask {
    /// The mask of one application of `dropout` on `device`, or none where it keeps everything
    /// (not training, off the autodiff device, or a probability of zero), as Burn's.
    pub(crate) fn draw(dropout: &Dropout, device: &Device) -> Option<Self> {
        if !dropout.training.is_enabled() || !device.is_autodiff() || dropout.prob == 0.0 {
            return None;
        }
        // Four 16-bit draws (ints may be 32-bit and signed).
        let draws = Tensor::<1, Int>::random([4], Distribution::Uniform(0.0, 65_536.0), device);
        let seed = (draws.into_data().iter::<i64>()).fold(0u64, |seed, d| (seed << 16) | d as u64);
        Some(Self {
            seed,
            keep: (1.0 - dropout.prob) as f32,
        })
    }

    /// `x` (made contiguous) with the dropped elements zero and the kept ones scaled.
    fn apply(&self, x: &FlexTensor) -> FlexTensor {
        let x = x.to_contiguous();
        let shape = x.layout().shape().clone();
        let mut values = f32s(&x).to_vec();
        self.apply_in_place(&mut values, 0);
        FlexTensor::from_data(TensorData::new(values, shape))
    }

    /// `values`, elements `first..` of what the mask covers, with the dropped ones zero and
    /// the kept ones scaled by `1 / keep`.
    pub(crate) fn apply_in_place(&self, values: &mut [f32], first: usize) {
        let (low, high) = (self.seed as u32, (self.seed >> 32) as u32);
        // Compared as integers: `keep` as a fraction of 2³².
        let threshold = (self.keep as f64 * 4_294_967_296.0).min(u32::MAX as f64) as u32;
        let scale = 1.0 / self.keep;
        let first = first as u32;
        vectorized(
            #[inline(always)]
            || {
                for (i, x) in values.iter_mut().enumerate() {
                    let bits = mix32(mix32(first.wrapping_add(i as u32) ^ low) ^ high);
                    *x = if bits < threshold { *x * scale } else { 0.0 };
                }
            },
        );
    }
}

/// A 32-bit integer hash of good avalanche (Chris Wellons' `lowbias32`), in a few
/// multiplications and shifts that vectorise.
#[inline(always)]
fn mix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^ (x >> 16)
}

#[derive(Debug)]
struct DropoutBackward;

impl Backward<Flex, 1> for DropoutBackward {
    type State = DropMask;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [x_node] = ops.parents;
        let grad = grads.consume::<Flex>(&ops.node);
        if let Some(node) = x_node {
            grads.register::<Flex>(node.id, ops.state.apply(&grad));
        }
    }
}

/// The encoder's fused operations: on flex, differentiated by hand under autodiff.
#[backend_extension(Flex, Autodiff)]
pub trait FusedEncoder: Backend {
    /// `x` `[rows, d_input]` · `weight` `[d_input, d_output]` + `bias` `[d_output]`, then
    /// `activation`: `[rows, d_output]`.
    fn dense_layer(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        activation: Option<Activation>,
    ) -> FloatTensor<Self>;

    /// The rows of `table` `[entries, width]` at `ids`: `[ids.len(), width]`.
    fn embedding_rows(table: FloatTensor<Self>, ids: Vec<usize>) -> FloatTensor<Self>;

    /// `x` with each element kept (and scaled by `1 / keep`) where [`DropMask`] of `seed` says.
    fn dropout_mask(x: FloatTensor<Self>, mask: DropMask) -> FloatTensor<Self>;
}

impl FusedEncoder for Flex {
    fn dense_layer(
        x: FlexTensor,
        weight: FlexTensor,
        bias: FlexTensor,
        activation: Option<Activation>,
    ) -> FlexTensor {
        Dense::new(&x, &weight, activation).forward(&bias, false).0
    }

    fn embedding_rows(table: FlexTensor, ids: Vec<usize>) -> FlexTensor {
        gather_rows(&table, &ids)
    }

    fn dropout_mask(x: FlexTensor, mask: DropMask) -> FlexTensor {
        mask.apply(&x)
    }
}

impl<C: CheckpointStrategy> FusedEncoder for Autodiff<Flex, C> {
    fn dense_layer(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        activation: Option<Activation>,
    ) -> FloatTensor<Self> {
        let dense = Dense::new(x.primitive(), weight.primitive(), activation);
        match DenseBackward
            .prepare::<C>([x.node(), weight.node(), bias.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let (output, before_activation) = dense.forward(bias.primitive(), true);
                let state = DenseSaved {
                    x: dense.x,
                    weight: dense.weight,
                    activation,
                    before_activation,
                };
                prep.finish(state, output)
            }
            OpsKind::UnTracked(prep) => prep.finish(dense.forward(bias.primitive(), false).0),
        }
    }

    fn embedding_rows(table: FloatTensor<Self>, ids: Vec<usize>) -> FloatTensor<Self> {
        match EmbeddingBackward
            .prepare::<C>([table.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let output = gather_rows(table.primitive(), &ids);
                let shape = table.primitive().layout().shape().dims::<2>();
                prep.finish(EmbeddingSaved { ids, shape }, output)
            }
            OpsKind::UnTracked(prep) => prep.finish(gather_rows(table.primitive(), &ids)),
        }
    }

    fn dropout_mask(x: FloatTensor<Self>, mask: DropMask) -> FloatTensor<Self> {
        match DropoutBackward
            .prepare::<C>([x.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let output = mask.apply(x.primitive());
                prep.finish(mask, output)
            }
            OpsKind::UnTracked(prep) => prep.finish(mask.apply(x.primitive())),
        }
    }
}

/// A dense layer's operands, contiguous.
struct Dense {
    x: FlexTensor,
    weight: FlexTensor,
    activation: Option<Activation>,
}

impl Dense {
    fn new(x: &FlexTensor, weight: &FlexTensor, activation: Option<Activation>) -> Self {
        Self {
            x: x.to_contiguous(),
            weight: weight.to_contiguous(),
            activation,
        }
    }

    /// The output `[rows, d_output]`, and when `keep` and there is an activation, what went
    /// into it (for the backward pass).
    fn forward(&self, bias: &FlexTensor, keep: bool) -> (FlexTensor, Option<FlexTensor>) {
        let [d_input, d_output] = self.weight.layout().shape().dims::<2>();
        let x = f32s(&self.x);
        let rows = x.len() / d_input;
        let bias = bias.to_contiguous();
        let mut out: Vec<f32> = f32s(&bias).repeat(rows);
        gemm_into(
            &mut out,
            true,
            Matrix::new(x, d_input),
            Matrix::new(f32s(&self.weight), d_output),
        );
        let Some(activation) = self.activation else {
            return (flex(out, [rows, d_output]), None);
        };
        let before = keep.then(|| flex(out.clone(), [rows, d_output]));
        activate(activation, &mut out);
        (flex(out, [rows, d_output]), before)
    }
}

#[derive(Debug)]
struct DenseBackward;

#[derive(Debug, Clone)]
struct DenseSaved {
    x: FlexTensor,
    weight: FlexTensor,
    activation: Option<Activation>,
    /// The product plus bias, when an activation followed.
    before_activation: Option<FlexTensor>,
}

impl Backward<Flex, 3> for DenseBackward {
    type State = DenseSaved;

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [x_node, weight_node, bias_node] = ops.parents;
        let state = ops.state;
        let [d_input, d_output] = state.weight.layout().shape().dims::<2>();
        let grad = grads.consume::<Flex>(&ops.node).to_contiguous();
        // The gradient with respect to the product plus bias.
        let d_pre: std::borrow::Cow<[f32]> = match (&state.activation, &state.before_activation) {
            (Some(activation), Some(before)) => {
                let mut d = f32s(&grad).to_vec();
                activation_backward(*activation, f32s(before), &mut d);
                d.into()
            }
            _ => f32s(&grad).into(),
        };
        let rows = d_pre.len() / d_output;
        let d_pre_matrix = Matrix::new(&d_pre, d_output);
        if let Some(node) = x_node {
            let mut d_x = vec![0.0; rows * d_input];
            let weight = Matrix::new(f32s(&state.weight), d_output);
            gemm_into(&mut d_x, false, d_pre_matrix, weight.t());
            grads.register::<Flex>(node.id, flex(d_x, [rows, d_input]));
        }
        if let Some(node) = weight_node {
            let mut d_weight = vec![0.0; d_input * d_output];
            let x = Matrix::new(f32s(&state.x), d_input);
            gemm_into(&mut d_weight, false, x.t(), d_pre_matrix);
            grads.register::<Flex>(node.id, flex(d_weight, [d_input, d_output]));
        }
        if let Some(node) = bias_node {
            let mut d_bias = vec![0.0; d_output];
            for row in d_pre.chunks_exact(d_output) {
                d_bias.iter_mut().zip(row).for_each(|(d, g)| *d += g);
            }
            grads.register::<Flex>(node.id, flex(d_bias, [d_output]));
        }
    }
}

/// `values ← activation(values)`.
fn activate(activation: Activation, values: &mut [f32]) {
    vectorized(
        #[inline(always)]
        || match activation {
            Activation::Gelu => values.iter_mut().for_each(|x| *x = gelu_f32(*x)),
            Activation::GeluTanh => values.iter_mut().for_each(|x| *x = gelu_tanh_f32(*x)),
            Activation::Relu => values.iter_mut().for_each(|x| *x = x.max(0.0)),
        },
    );
}

/// `grad ← grad · activation′(before)`.
fn activation_backward(activation: Activation, before: &[f32], grad: &mut [f32]) {
    vectorized(
        #[inline(always)]
        || {
            let pairs = grad.iter_mut().zip(before);
            match activation {
                Activation::Gelu => pairs.for_each(|(g, &x)| *g *= gelu_derivative(x)),
                Activation::GeluTanh => pairs.for_each(|(g, &x)| *g *= gelu_tanh_derivative(x)),
                Activation::Relu => pairs.for_each(|(g, &x)| *g = if x > 0.0 { *g } else { 0.0 }),
            }
        },
    );
}

const FRAC_1_SQRT_2: f32 = std::f32::consts::FRAC_1_SQRT_2;
/// √(2/π).
const SQRT_2_OVER_PI: f32 = 0.797_884_6;
const GELU_TANH_CUBIC: f32 = 0.044_715;

/// GELU, the exact form: x Φ(x).
#[inline(always)]
fn gelu_f32(x: f32) -> f32 {
    0.5 * x * (1.0 + erf_f32(x * FRAC_1_SQRT_2))
}

/// d/dx x Φ(x) = Φ(x) + x φ(x).
#[inline(always)]
fn gelu_derivative(x: f32) -> f32 {
    let density = (-0.5 * x * x).exp() * (0.5 * SQRT_2_OVER_PI);
    0.5 * (1.0 + erf_f32(x * FRAC_1_SQRT_2)) + x * density
}

/// GELU, the tanh approximation.
#[inline(always)]
fn gelu_tanh_f32(x: f32) -> f32 {
    0.5 * x * (1.0 + tanh_f32(SQRT_2_OVER_PI * (x + GELU_TANH_CUBIC * x * x * x)))
}

#[inline(always)]
fn gelu_tanh_derivative(x: f32) -> f32 {
    let t = tanh_f32(SQRT_2_OVER_PI * (x + GELU_TANH_CUBIC * x * x * x));
    let du = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_TANH_CUBIC * x * x);
    0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du
}

/// `table`'s rows at `ids`, `[ids.len(), width]`.
fn gather_rows(table: &FlexTensor, ids: &[usize]) -> FlexTensor {
    let [entries, width] = table.layout().shape().dims::<2>();
    let table = table.to_contiguous();
    let table = f32s(&table);
    let mut out = Vec::with_capacity(ids.len() * width);
    for &id in ids {
        assert!(id < entries, "embedding id {id} of a table of {entries}");
        out.extend_from_slice(&table[id * width..(id + 1) * width]);
    }
    flex(out, [ids.len(), width])
}

#[derive(Debug)]
struct EmbeddingBackward;

#[derive(Debug, Clone)]
struct EmbeddingSaved {
    ids: Vec<usize>,
    /// The table's.
    shape: [usize; 2],
}

impl Backward<Flex, 1> for EmbeddingBackward {
    type State = EmbeddingSaved;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [table_node] = ops.parents;
        let grad = grads.consume::<Flex>(&ops.node).to_contiguous();
        let Some(node) = table_node else { return };
        let [entries, width] = ops.state.shape;
        let mut d_table = vec![0.0; entries * width];
        for (&id, row) in ops.state.ids.iter().zip(f32s(&grad).chunks_exact(width)) {
            let into = &mut d_table[id * width..(id + 1) * width];
            into.iter_mut().zip(row).for_each(|(d, g)| *d += g);
        }
        grads.register::<Flex>(node.id, flex(d_table, [entries, width]));
    }
}

#[cfg(test)]
mod tests {
    use burn::nn::LinearConfig;
    use burn::tensor::Tolerance;

    use super::*;

    fn device() -> Device {
        Device::flex().autodiff()
    }

    /// The fused op and Burn's (with `NERTRAIN_TENSOR_ENCODER` unset, [`dense`] picks the
    /// fused one on flex; Burn's is called here directly).
    fn unfused<const D: usize>(
        linear: &Linear,
        x: Tensor<D>,
        activation: Option<Activation>,
    ) -> Tensor<D> {
        activated(linear.forward(x), activation)
    }

    fn close(a: Tensor<2>, b: Tensor<2>) {
        a.into_data()
            .assert_approx_eq::<f32>(&b.into_data(), Tolerance::absolute(1e-5));
    }

    #[test]
    fn a_fused_dense_layer_has_the_values_and_gradients_of_burns_ops() {
        let device = device();
        device.seed(7);
        let activations = [
            None,
            Some(Activation::Gelu),
            Some(Activation::GeluTanh),
            Some(Activation::Relu),
        ];
        for activation in activations {
            let linear = LinearConfig::new(5, 7).init(&device);
            let x = Tensor::<3>::random([2, 3, 5], Distribution::Normal(0.0, 2.0), &device)
                .require_grad();
            let upstream = Tensor::<3>::random([2, 3, 7], Distribution::Default, &device);
            let fused = dense(&linear, x.clone(), activation);
            let reference = unfused(&linear, x.clone(), activation);
            close(
                fused.clone().reshape([6, 7]),
                reference.clone().reshape([6, 7]),
            );

            // The input's, the weight's and the bias's gradients, as matrices.
            let gradients = |grads: &burn::tensor::Gradients| {
                let bias = linear.bias.as_ref().unwrap().val();
                [
                    x.grad(grads).unwrap().reshape([6, 5]),
                    linear.weight.val().grad(grads).unwrap(),
                    bias.grad(grads).unwrap().reshape([1, 7]),
                ]
            };
            let fused_grads = gradients(&(fused * upstream.clone()).sum().backward());
            let reference_grads = gradients(&(reference * upstream).sum().backward());
            for (fused, reference) in fused_grads.into_iter().zip(reference_grads) {
                close(fused, reference);
            }
        }
    }

    #[test]
    fn a_fused_embedding_has_the_values_and_gradient_of_burns() {
        let device = device();
        device.seed(3);
        let table = Tensor::<2>::random([6, 4], Distribution::Default, &device).require_grad();
        // Ids repeat, so that rows of the gradient add up.
        let ids = Tensor::<2, Int>::from_data(
            TensorData::new(vec![1i64, 5, 1, 0, 5, 5], [2, 3]),
            &device,
        );
        let upstream = Tensor::<3>::random([2, 3, 4], Distribution::Default, &device);
        let fused = embedding(table.clone(), ids.clone());
        let reference = burn::tensor::module::embedding(table.clone(), ids);
        close(
            fused.clone().reshape([6, 4]),
            reference.clone().reshape([6, 4]),
        );
        let fused_grad = table
            .grad(&(fused * upstream.clone()).sum().backward())
            .unwrap();
        let reference_grad = table
            .grad(&(reference * upstream).sum().backward())
            .unwrap();
        close(fused_grad, reference_grad);
    }

    #[test]
    fn without_autodiff_the_fused_ops_give_the_same_values() {
        let device = Device::flex();
        device.seed(11);
        let linear = LinearConfig::new(4, 3).init(&device);
        let x = Tensor::<2>::random([5, 4], Distribution::Normal(0.0, 2.0), &device);
        let activation = Some(Activation::Gelu);
        close(
            dense(&linear, x.clone(), activation),
            unfused(&linear, x, activation),
        );
    }

    #[test]
    fn a_fused_dropout_keeps_its_share_scaled_and_passes_the_gradient_where_it_kept() {
        let device = device();
        device.seed(1);
        let layer = burn::nn::DropoutConfig::new(0.25).init();
        let x =
            Tensor::<2>::random([200, 50], Distribution::Uniform(1.0, 2.0), &device).require_grad();
        let y = dropout(&layer, x.clone());
        let grad = x.grad(&(y.clone() * 3.0).sum().backward()).unwrap();
        let values = |t: Tensor<2>| t.into_data().iter::<f32>().collect::<Vec<_>>();
        let (x_values, y, grad) = (values(x.clone()), values(y), values(grad));
        let mut kept = 0;
        for ((x, y), g) in x_values.iter().zip(&y).zip(&grad) {
            if *y == 0.0 {
                assert_eq!(*g, 0.0);
            } else {
                kept += 1;
                assert!((y - x / 0.75).abs() < 1e-6 && (g - 3.0 / 0.75).abs() < 1e-6);
            }
        }
        // 10,000 draws at 0.75: within five standard deviations (about 217).
        assert!((kept - 7_500i32).abs() < 217, "{kept} kept");
        // The next call draws another mask.
        let again = values(dropout(&layer, x.clone()));
        let same = (again.iter().zip(&y)).filter(|(a, b)| (**a == 0.0) == (**b == 0.0));
        assert!(same.count() < 7_000);
        // Nothing is dropped off the autodiff device, or with the training flag cleared.
        let plain = Tensor::<2>::ones([3, 3], &Device::flex());
        assert_eq!(values(dropout(&layer, plain.clone())), values(plain));
        let frozen = burn::nn::Dropout {
            training: burn::module::Param::from_bool(false),
            ..layer
        };
        assert_eq!(values(dropout(&frozen, x.clone())), x_values);
    }
}
