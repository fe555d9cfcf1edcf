//! The fused recurrence on cubecl devices (wgpu): one kernel launch runs every step of both
//! directions, and one more runs backpropagation through time.
//!
//! The tensor-op recurrence launches about fifteen small kernels per step, each waiting for the
//! last; at the batch sizes sequence labelling trains with, that launch latency, not arithmetic,
//! is the GPU's time. Here a cube (workgroup) owns one sentence in one direction and loops over
//! its steps, keeping the hidden and cell states in shared memory and synchronising its units
//! between steps: a unit computes the four gates of some hidden units `j`, reading the
//! recurrent weights (a few hundred KiB, cached) for its columns.
//!
//! Layouts are those of [`super`]: gates `[batch, time, 8h]` (forward direction's i, f, g, o,
//! then the backward direction's), recurrent weights `[direction, h, 4h]`, hidden states
//! `[batch, time, 2h]`, zero at padded positions.

use burn::backend::Cube;
use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::ops::{FloatTensorOps, IntTensorOps};
use burn::backend::tensor::FloatTensor;
use burn::tensor::{DType, FloatDType, Shape, TensorData};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use super::FusedLstm;

/// The largest hidden size the kernels take: their shared memory (`6 × hidden` floats) must fit
/// in WebGPU's guaranteed 16 KiB. Larger models use the tensor-op recurrence.
pub const MAX_HIDDEN: usize = 640;

/// Units per cube: enough for one per hidden unit at common sizes, within every GPU's limit.
const MAX_UNITS: usize = 256;

#[cube]
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// `tanh` from `exp`, exact at both ends: `exp` overflowing to infinity gives 1, not NaN.
#[cube]
fn tanh(x: f32) -> f32 {
    1.0 - 2.0 / ((2.0 * x).exp() + 1.0)
}

/// Cube `(b, d)` runs sentence `b` in direction `d`. With `save`, also writes what the backward
/// kernel needs: each step's gate activations and cell state, and the hidden state each step
/// started from (`previous`, `[direction, batch * time, h]`, for the recurrent weights'
/// gradient).
#[allow(clippy::too_many_arguments)]
#[cube(launch)]
fn forward_kernel(
    gates: &[f32],
    recurrent: &[f32],
    lengths: &[u32],
    hidden: &mut [f32],
    cells: &mut [f32],
    activations: &mut [f32],
    previous: &mut [f32],
    time: u32,
    #[comptime] h: usize,
    #[comptime] save: bool,
) {
    let batch = CUBE_COUNT_X as usize;
    let b = CUBE_POS_X as usize;
    let d = CUBE_POS_Y as usize;
    let time = time as usize;
    let length = lengths[b] as usize;
    let units = CUBE_DIM_X as usize;
    // Two halves: step t reads the state from one and writes the other, so one barrier a step.
    let mut state = Shared::<[f32]>::new_slice(2 * h);
    let mut cell = Shared::<[f32]>::new_slice(h);
    let mut j = UNIT_POS_X as usize;
    while j < h {
        state[j] = 0.0;
        cell[j] = 0.0;
        j += units;
    }
    sync_cube();
    for t in 0..length {
        let p = if d == 0 { t } else { length - 1 - t };
        let read = (t % 2) * h;
        let write = h - read;
        let g = (b * time + p) * 8 * h + d * 4 * h;
        let s = (b * time + p) * 2 * h + d * h;
        let w = d * h * 4 * h;
        let mut j = UNIT_POS_X as usize;
        while j < h {
            let mut zi = gates[g + j];
            let mut zf = gates[g + h + j];
            let mut zg = gates[g + 2 * h + j];
            let mut zo = gates[g + 3 * h + j];
            for k in 0..h {
                let hk = state[read + k];
                let row = w + k * 4 * h;
                zi += hk * recurrent[row + j];
                zf += hk * recurrent[row + h + j];
                zg += hk * recurrent[row + 2 * h + j];
                zo += hk * recurrent[row + 3 * h + j];
            }
            let i = sigmoid(zi);
            let f = sigmoid(zf);
            let cand = tanh(zg);
            let o = sigmoid(zo);
            let c = f * cell[j] + i * cand;
            let out = o * tanh(c);
            if save {
                activations[g + j] = i;
                activations[g + h + j] = f;
                activations[g + 2 * h + j] = cand;
                activations[g + 3 * h + j] = o;
                cells[s + j] = c;
                previous[(d * batch * time + b * time + p) * h + j] = state[read + j];
            }
            cell[j] = c;
            state[write + j] = out;
            hidden[s + j] = out;
            j += units;
        }
        sync_cube();
    }
}

/// Backpropagation through time for cube `(b, d)`: the gradient of each step's gate
/// pre-activations, `d_gates` `[batch, time, 8h]`, from that of the hidden states. The
/// recurrent weights are read transposed, `[direction, 4h, h]`, so that units read adjacent
/// columns.
#[allow(clippy::too_many_arguments)]
#[cube(launch)]
fn backward_kernel(
    d_hidden: &[f32],
    activations: &[f32],
    cells: &[f32],
    recurrent_t: &[f32],
    lengths: &[u32],
    d_gates: &mut [f32],
    time: u32,
    #[comptime] h: usize,
) {
    let b = CUBE_POS_X as usize;
    let d = CUBE_POS_Y as usize;
    let time = time as usize;
    let length = lengths[b] as usize;
    let units = CUBE_DIM_X as usize;
    // The hidden state's gradient through the recurrent weights from the step after, the cell
    // state's, and this step's gate gradients for every unit to read.
    let mut d_recurrent = Shared::<[f32]>::new_slice(h);
    let mut d_cell = Shared::<[f32]>::new_slice(h);
    let mut d_step = Shared::<[f32]>::new_slice(4 * h);
    let mut j = UNIT_POS_X as usize;
    while j < h {
        d_recurrent[j] = 0.0;
        d_cell[j] = 0.0;
        j += units;
    }
    sync_cube();
    for r in 0..length {
        let t = length - 1 - r;
        let p = if d == 0 { t } else { length - 1 - t };
        let g = (b * time + p) * 8 * h + d * 4 * h;
        let s = (b * time + p) * 2 * h + d * h;
        let mut j = UNIT_POS_X as usize;
        while j < h {
            let i = activations[g + j];
            let f = activations[g + h + j];
            let cand = activations[g + 2 * h + j];
            let o = activations[g + 3 * h + j];
            let c = cells[s + j];
            let mut c_previous = 0.0f32;
            if t > 0 {
                let earlier = if d == 0 { p - 1 } else { p + 1 };
                c_previous = cells[(b * time + earlier) * 2 * h + d * h + j];
            }
            let dh = d_hidden[s + j] + d_recurrent[j];
            let tc = tanh(c);
            let dc = d_cell[j] + dh * o * (1.0 - tc * tc);
            let di = dc * cand * i * (1.0 - i);
            let df = dc * c_previous * f * (1.0 - f);
            let dg = dc * i * (1.0 - cand * cand);
            let d_o = dh * tc * o * (1.0 - o);
            d_cell[j] = dc * f;
            d_gates[g + j] = di;
            d_gates[g + h + j] = df;
            d_gates[g + 2 * h + j] = dg;
            d_gates[g + 3 * h + j] = d_o;
            d_step[j] = di;
            d_step[h + j] = df;
            d_step[2 * h + j] = dg;
            d_step[3 * h + j] = d_o;
            j += units;
        }
        sync_cube();
        let w = d * 4 * h * h;
        let mut j = UNIT_POS_X as usize;
        while j < h {
            let mut sum = 0.0f32;
            for m in 0..4 * h {
                sum += d_step[m] * recurrent_t[w + m * h + j];
            }
            d_recurrent[j] = sum;
            j += units;
        }
        sync_cube();
    }
}

/// The forward pass's results; with `save`, everything the backward pass needs.
#[derive(Debug, Clone)]
pub struct Forward {
    hidden: CubeTensor,
    saved: Option<Saved>,
}

/// What the forward pass keeps for the backward one.
#[derive(Debug, Clone)]
pub struct Saved {
    activations: CubeTensor,
    cells: CubeTensor,
    previous: CubeTensor,
    recurrent: CubeTensor,
    lengths: CubeTensor,
}

fn zeros(shape: impl Into<Shape>, like: &CubeTensor) -> CubeTensor {
    Cube::float_zeros(shape.into(), &like.device, FloatDType::F32)
}

fn cube_dim(h: usize) -> CubeDim {
    CubeDim::new_1d(h.next_multiple_of(32).min(MAX_UNITS) as u32)
}

fn forward(gates: CubeTensor, recurrent: CubeTensor, lengths: &[usize], save: bool) -> Forward {
    assert_eq!(gates.dtype, DType::F32, "the fused recurrence is f32");
    let gates = into_contiguous(gates);
    let recurrent = into_contiguous(recurrent);
    let [batch, time, width] = gates.meta.shape().dims::<3>();
    let h = width / 8;
    let lengths = Cube::int_from_data(
        TensorData::new(
            lengths.iter().map(|&l| l as u32).collect::<Vec<u32>>(),
            [batch],
        ),
        &gates.device,
    );
    let hidden = zeros([batch, time, 2 * h], &gates);
    let scratch = |shape: [usize; 3]| {
        if save {
            zeros(shape, &gates)
        } else {
            zeros([1, 1, 1], &gates)
        }
    };
    let activations = scratch([batch, time, 8 * h]);
    let cells = scratch([batch, time, 2 * h]);
    let previous = scratch([2, batch * time, h]);
    forward_kernel::launch(
        &gates.client.clone(),
        CubeCount::Static(batch as u32, 2, 1),
        cube_dim(h),
        gates.into_buffer_arg(),
        recurrent.clone().into_buffer_arg(),
        lengths.clone().into_buffer_arg(),
        hidden.clone().into_buffer_arg(),
        cells.clone().into_buffer_arg(),
        activations.clone().into_buffer_arg(),
        previous.clone().into_buffer_arg(),
        time as u32,
        h,
        save,
    );
    Forward {
        hidden,
        saved: save.then_some(Saved {
            activations,
            cells,
            previous,
            recurrent,
            lengths,
        }),
    }
}

/// The gradients of the gates and of the recurrent weights given that of the hidden states.
fn backward(saved: &Saved, d_hidden: CubeTensor) -> (CubeTensor, CubeTensor) {
    let d_hidden = into_contiguous(d_hidden);
    let [batch, time, width] = saved.activations.meta.shape().dims::<3>();
    let h = width / 8;
    let recurrent_t = into_contiguous(Cube::float_swap_dims(saved.recurrent.clone(), 1, 2));
    let d_gates = zeros([batch, time, 8 * h], &d_hidden);
    backward_kernel::launch(
        &d_hidden.client.clone(),
        CubeCount::Static(batch as u32, 2, 1),
        cube_dim(h),
        d_hidden.into_buffer_arg(),
        saved.activations.clone().into_buffer_arg(),
        saved.cells.clone().into_buffer_arg(),
        recurrent_t.into_buffer_arg(),
        saved.lengths.clone().into_buffer_arg(),
        d_gates.clone().into_buffer_arg(),
        time as u32,
        h,
    );
    // dW[d] = Σ over (sentence, step) of h_previous[d]ᵀ · d_gates[d]: one batched matmul,
    // padded positions contributing zeros.
    let by_direction = Cube::float_swap_dims(
        Cube::float_reshape(d_gates.clone(), Shape::new([batch * time, 2, 4 * h])),
        0,
        1,
    );
    let d_recurrent = Cube::float_matmul(
        Cube::float_swap_dims(saved.previous.clone(), 1, 2),
        by_direction,
    );
    (d_gates, d_recurrent)
}

impl FusedLstm for Cube {
    fn lstm_recurrence(
        gates: CubeTensor,
        recurrent: CubeTensor,
        lengths: Vec<usize>,
    ) -> CubeTensor {
        forward(gates, recurrent, &lengths, false).hidden
    }
}

impl<C: CheckpointStrategy> FusedLstm for Autodiff<Cube, C> {
    fn lstm_recurrence(
        gates: FloatTensor<Self>,
        recurrent: FloatTensor<Self>,
        lengths: Vec<usize>,
    ) -> FloatTensor<Self> {
        match RecurrenceBackward
            .prepare::<C>([gates.node(), recurrent.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let Forward { hidden, saved } = forward(
                    gates.primitive().clone(),
                    recurrent.primitive().clone(),
                    &lengths,
                    true,
                );
                prep.finish(saved.expect("saved when asked"), hidden)
            }
            OpsKind::UnTracked(prep) => prep.finish(
                forward(
                    gates.primitive().clone(),
                    recurrent.primitive().clone(),
                    &lengths,
                    false,
                )
                .hidden,
            ),
        }
    }
}

#[derive(Debug)]
struct RecurrenceBackward;

impl Backward<Cube, 2> for RecurrenceBackward {
    type State = Saved;

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [gates_node, recurrent_node] = ops.parents;
        let grad = grads.consume::<Cube>(&ops.node);
        let (d_gates, d_recurrent) = backward(&ops.state, grad);
        if let Some(node) = gates_node {
            grads.register::<Cube>(node.id, d_gates);
        }
        if let Some(node) = recurrent_node {
            grads.register::<Cube>(node.id, d_recurrent);
        }
    }
}
