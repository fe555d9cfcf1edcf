//! The recurrence of a bidirectional LSTM: input projections `[batch, time, 8 * hidden]` (the
//! forward direction's four gates, then the backward direction's, each in the order input,
//! forget, cell, output) and recurrent weights `[direction, hidden, 4 * hidden]` → hidden states
//! `[batch, time, 2 * hidden]`, forward direction first. The backward direction reads each
//! sentence reversed within its own length, so padding (which follows the real tokens in both
//! directions) never reaches a real token's state. States at padded positions are unspecified.
//!
//! Two implementations compute the same function. [`tensor_ops`] is a loop of ordinary tensor
//! operations and runs on every backend. [`fused`] is one operation with a hand-written backward
//! (backpropagation through time): plain Rust on the flex CPU backend (below), and two cubecl
//! kernels on wgpu (`recurrence/cube.rs`, with `--features wgpu`). A step of the tensor version
//! is about fifteen operations plus the reordering around the loop, each allocating and each
//! recorded by autodiff; on a CPU that overhead, and on a GPU the launch latency of those small
//! kernels, not arithmetic, was most of the time. [`run`] picks `fused` where [`has_fused`]
//! says it exists. For inference on the CPU, [`infer_from_rows`] runs the same forward pass
//! reading each token's input projections (the word cache's rows) straight into each step.

use std::sync::Arc;

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::ops::FloatTensorOps;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Dispatch, Flex, backend_extension};
use burn::tensor::activation::{sigmoid, tanh};
use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::host::{f32s, flex, matmul_into, sigmoid_f32, tanh_f32};
use crate::vectorize::vectorized;

#[cfg(feature = "wgpu")]
mod cube;

/// The recurrence with whichever implementation suits the tensors' device.
pub fn run(gates: Tensor<3>, recurrent: Tensor<3>, lengths: &[usize]) -> Tensor<3> {
    if has_fused(&gates.device(), recurrent.dims()[1]) {
        fused(gates, recurrent, lengths)
    } else {
        tensor_ops(gates, recurrent, lengths)
    }
}

/// Set (to anything) to run the tensor-op recurrence everywhere: for measuring the fused one.
pub const TENSOR_RECURRENCE_VARIABLE: &str = "NERTRAIN_TENSOR_RECURRENCE";

/// Whether [`fused`] runs on `device` (with or without autodiff) for this hidden size: on flex
/// always, on a cubecl device (wgpu) when its kernels' shared memory fits.
pub fn has_fused(device: &Device, hidden: usize) -> bool {
    if std::env::var_os(TENSOR_RECURRENCE_VARIABLE).is_some() {
        return false;
    }
    // Device equality compares hardware and ignores autodiff, so this holds for training too.
    if *device == Device::flex() {
        return true;
    }
    #[cfg(feature = "wgpu")]
    if matches!(
        device.as_dispatch().clone().inner(),
        burn::backend::DispatchDevice::Cube(_)
    ) {
        return hidden <= cube::MAX_HIDDEN;
    }
    let _ = hidden;
    false
}

/// One step at a time in tensor operations; any backend.
pub fn tensor_ops(gates: Tensor<3>, recurrent: Tensor<3>, lengths: &[usize]) -> Tensor<3> {
    let [batch, time, _] = gates.dims();
    let h = recurrent.dims()[1];
    let device = gates.device();
    let reverse = reversal_index(lengths, time, &device);

    let gates = gates.reshape([batch * time, 8 * h]);
    let forward_gates = gates.clone().slice([0..batch * time, 0..4 * h]);
    let backward_gates = gates
        .slice([0..batch * time, 4 * h..8 * h])
        .select(0, reverse.clone());
    let time_major = |g: Tensor<2>| g.reshape([batch, time, 4 * h]).swap_dims(0, 1);
    // [time, direction, batch, 4h]
    let gates = Tensor::stack::<4>(
        vec![time_major(forward_gates), time_major(backward_gates)],
        1,
    );

    let mut hidden = Tensor::<3>::zeros([2, batch, h], &device);
    let mut cell = Tensor::<3>::zeros([2, batch, h], &device);
    let mut outputs = Vec::with_capacity(time);
    for step in gates.iter_dim(0) {
        let step = step.reshape([2, batch, 4 * h]) + hidden.matmul(recurrent.clone());
        let [i, f, g, o]: [Tensor<3>; 4] = step.chunk(4, 2).try_into().expect("four gates");
        cell = sigmoid(f) * cell + sigmoid(i) * tanh(g);
        hidden = sigmoid(o) * tanh(cell.clone());
        outputs.push(hidden.clone());
    }

    // [time, direction, batch, h] → one [batch, time, h] per direction.
    let outputs = Tensor::stack::<4>(outputs, 0);
    let direction = |d: usize| {
        outputs
            .clone()
            .slice([0..time, d..d + 1, 0..batch, 0..h])
            .reshape([time, batch, h])
            .swap_dims(0, 1)
    };
    let forward = direction(0);
    let backward = direction(1)
        .reshape([batch * time, h])
        .select(0, reverse)
        .reshape([batch, time, h]);
    Tensor::cat(vec![forward, backward], 2)
}

/// Where the backward direction's step `t` is in a sentence of `length` tokens: reversed within
/// the length, padding in place. Reversal is its own inverse.
fn reversed_position(length: usize, t: usize) -> usize {
    if t < length { length - 1 - t } else { t }
}

/// [`reversed_position`] as row indices into a flattened `[batch * time]` layout.
fn reversal_index(lengths: &[usize], time: usize, device: &Device) -> Tensor<1, Int> {
    let index: Vec<i64> = lengths
        .iter()
        .enumerate()
        .flat_map(|(b, &len)| (0..time).map(move |t| (b * time + reversed_position(len, t)) as i64))
        .collect();
    Tensor::from_data(TensorData::new(index, [lengths.len() * time]), device)
}

/// The fused operation; the tensors must be on a device where [`has_fused`] holds.
pub fn fused(gates: Tensor<3>, recurrent: Tensor<3>, lengths: &[usize]) -> Tensor<3> {
    Tensor::from_dispatch(<Dispatch as FusedLstm>::lstm_recurrence(
        gates.into_dispatch(),
        recurrent.into_dispatch(),
        lengths.to_vec(),
    ))
}

/// The LSTM recurrence as one backend operation: fused on flex and cubecl devices, differentiated by hand under autodiff.
#[backend_extension(Flex, Cube: cfg(feature = "wgpu"), Autodiff)]
pub trait FusedLstm: Backend {
    /// Both directions' hidden states `[batch, time, 2h]` from the input gates `[batch, time,
    /// 2 * 4h]` and the recurrent weights `[direction, h, 4h]`, each sentence read to its length.
    fn lstm_recurrence(
        gates: FloatTensor<Self>,
        recurrent: FloatTensor<Self>,
        lengths: Vec<usize>,
    ) -> FloatTensor<Self>;
}

impl FusedLstm for Flex {
    fn lstm_recurrence(
        gates: FlexTensor,
        recurrent: FlexTensor,
        lengths: Vec<usize>,
    ) -> FlexTensor {
        Forward::run(
            Gates::Natural(gates.to_contiguous()),
            &recurrent,
            lengths,
            Keep::Output,
        )
        .hidden_tensor()
    }
}

impl<C: CheckpointStrategy> FusedLstm for Autodiff<Flex, C> {
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
                let forward = Forward::run(
                    Gates::Natural(gates.primitive().to_contiguous()),
                    recurrent.primitive(),
                    lengths,
                    Keep::AllSteps,
                );
                let output = forward.hidden_tensor();
                let state = Saved {
                    forward: Arc::new(forward),
                    recurrent: recurrent.primitive().clone(),
                };
                prep.finish(state, output)
            }
            OpsKind::UnTracked(prep) => prep.finish(
                Forward::run(
                    Gates::Natural(gates.primitive().to_contiguous()),
                    recurrent.primitive(),
                    lengths,
                    Keep::Output,
                )
                .hidden_tensor(),
            ),
        }
    }
}

#[derive(Debug)]
struct RecurrenceBackward;

#[derive(Debug, Clone)]
struct Saved {
    forward: Arc<Forward>,
    recurrent: FlexTensor,
}

impl Backward<Flex, 2> for RecurrenceBackward {
    type State = Saved;

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [gates_node, recurrent_node] = ops.parents;
        let grad = grads.consume::<Flex>(&ops.node);
        let (d_gates, d_recurrent) = ops.state.forward.backward(&grad, &ops.state.recurrent);
        if let Some(node) = gates_node {
            grads.register::<Flex>(node.id, d_gates);
        }
        if let Some(node) = recurrent_node {
            grads.register::<Flex>(node.id, d_recurrent);
        }
    }
}

/// `[batch, time, 2 * width]` (both directions side by side, in sentence order) → `[time,
/// direction, batch, width]` with the backward direction's steps reversed within each sentence.
fn time_major(natural: &[f32], lengths: &[usize], time: usize, width: usize) -> Vec<f32> {
    let mut out = vec![0.0; natural.len()];
    for_each_step(lengths, time, width, |sentence_order, step_order| {
        out[step_order].copy_from_slice(&natural[sentence_order]);
    });
    out
}

/// The inverse of [`time_major`].
fn natural(time_major: &[f32], lengths: &[usize], time: usize, width: usize) -> Vec<f32> {
    let mut out = vec![0.0; time_major.len()];
    for_each_step(lengths, time, width, |sentence_order, step_order| {
        out[sentence_order].copy_from_slice(&time_major[step_order]);
    });
    out
}

/// Calls `f` with the ranges one (sentence, direction, step) occupies in the two layouts.
fn for_each_step(
    lengths: &[usize],
    time: usize,
    width: usize,
    mut f: impl FnMut(std::ops::Range<usize>, std::ops::Range<usize>),
) {
    for t in 0..time {
        for_each_at_step(lengths, time, width, t, |sentence_order, step_order| {
            let offset = t * DIRECTIONS * lengths.len() * width;
            f(
                sentence_order,
                offset + step_order.start..offset + step_order.end,
            )
        });
    }
}

/// [`for_each_step`] for step `t` alone, with ranges into that step's `[direction, batch, width]`.
fn for_each_at_step(
    lengths: &[usize],
    time: usize,
    width: usize,
    t: usize,
    mut f: impl FnMut(std::ops::Range<usize>, std::ops::Range<usize>),
) {
    let batch = lengths.len();
    for (b, &length) in lengths.iter().enumerate() {
        for d in 0..DIRECTIONS {
            let position = if d == 0 {
                t
            } else {
                reversed_position(length, t)
            };
            let sentence_order = ((b * time + position) * DIRECTIONS + d) * width;
            let step_order = (d * batch + b) * width;
            f(
                sentence_order..sentence_order + width,
                step_order..step_order + width,
            );
        }
    }
}

/// `[direction, h, 4h]` recurrent weights as one row-major `[h, 4h]` matrix per direction
/// (`[4h, h]` when `transposed`).
fn by_direction(recurrent: &FlexTensor, transposed: bool) -> [Vec<f32>; 2] {
    let [_, h, width] = recurrent.layout().shape().dims::<3>();
    let recurrent = recurrent.to_contiguous();
    let all = f32s(&recurrent);
    std::array::from_fn(|d| {
        let matrix = &all[d * h * width..(d + 1) * h * width];
        if transposed {
            let mut t = vec![0.0; h * width];
            for (k, row) in matrix.chunks(width).enumerate() {
                for (j, &v) in row.iter().enumerate() {
                    t[j * h + k] = v;
                }
            }
            t
        } else {
            matrix.to_vec()
        }
    })
}

/// One direction's step forward. `step` holds the gates' input projections `[batch, 4h]` and
/// receives their activations; `previous_hidden` (none at the first step) and `previous_cells`
/// are the state before the step; `cell` and `hidden` receive the new state; `recurrent` is
/// `[h, 4h]`.
fn forward_step(
    h: usize,
    step: &mut [f32],
    previous_hidden: Option<&[f32]>,
    previous_cells: &[f32],
    recurrent: &[f32],
    cell: &mut [f32],
    hidden: &mut [f32],
) {
    let (batch, width) = (cell.len() / h, 4 * h);
    if let Some(previous_hidden) = previous_hidden {
        matmul_into(step, true, previous_hidden, recurrent, h);
    }
    vectorized(
        #[inline(always)]
        || {
            for row in 0..batch {
                activate_row(
                    h,
                    &mut step[row * width..(row + 1) * width],
                    &previous_cells[row * h..(row + 1) * h],
                    &mut cell[row * h..(row + 1) * h],
                    &mut hidden[row * h..(row + 1) * h],
                );
            }
        },
    );
}

/// One row of [`forward_step`] after the product: the gates' activations, the new cell and
/// hidden state.
#[inline(always)]
fn activate_row(
    h: usize,
    step: &mut [f32],
    previous_cell: &[f32],
    cell: &mut [f32],
    hidden: &mut [f32],
) {
    // Simple passes over contiguous slices, so that each one vectorises.
    let (input_forget, rest) = step.split_at_mut(2 * h);
    let (g, o) = rest.split_at_mut(h);
    input_forget.iter_mut().for_each(|x| *x = sigmoid_f32(*x));
    g.iter_mut().for_each(|x| *x = tanh_f32(*x));
    o.iter_mut().for_each(|x| *x = sigmoid_f32(*x));
    let (i, f) = input_forget.split_at(h);
    for ((((c, &p), &i), &f), &g) in cell.iter_mut().zip(previous_cell).zip(i).zip(f).zip(&*g) {
        *c = f * p + i * g;
    }
    for ((out, &c), &o) in hidden.iter_mut().zip(&*cell).zip(&*o) {
        *out = o * tanh_f32(c);
    }
}

/// What one direction's step backward reads, `[batch, ...]` each.
struct BackwardStep<'a> {
    hidden_size: usize,
    activations: &'a [f32],
    cells: &'a [f32],
    /// Zeros at the first step.
    previous_cells: &'a [f32],
    /// The loss's gradient of this step's hidden states.
    d_out: &'a [f32],
    /// The gradient reaching this step's hidden states from the next step.
    d_h_next: &'a [f32],
}

/// One direction's step backward: writes the gates' gradient into `d_step` and replaces
/// `d_c_next` with the gradient of the previous cell state.
fn backward_step(step: BackwardStep, d_step: &mut [f32], d_c_next: &mut [f32]) {
    let h = step.hidden_size;
    let batch = d_c_next.len() / h;
    vectorized(
        #[inline(always)]
        || backward_rows(h, batch, &step, d_step, d_c_next),
    );
}

/// The loop of [`backward_step`], in a function of its own so that [`vectorized`] can compile it
/// for the CPU.
#[inline(always)]
fn backward_rows(
    h: usize,
    batch: usize,
    step: &BackwardStep,
    d_step: &mut [f32],
    d_c_next: &mut [f32],
) {
    for row in 0..batch {
        let states = row * h..(row + 1) * h;
        let activations = &step.activations[row * 4 * h..(row + 1) * 4 * h];
        let (i, rest) = activations.split_at(h);
        let (f, rest) = rest.split_at(h);
        let (g, o) = rest.split_at(h);
        let o = &o[..h];
        let (di, rest) = d_step[row * 4 * h..(row + 1) * 4 * h].split_at_mut(h);
        let (df, rest) = rest.split_at_mut(h);
        let (dg, d_o) = rest.split_at_mut(h);
        let d_o = &mut d_o[..h];
        let cell = &step.cells[states.clone()];
        let previous_cell = &step.previous_cells[states.clone()];
        let d_out = &step.d_out[states.clone()];
        let d_h_next = &step.d_h_next[states.clone()];
        let d_c_next = &mut d_c_next[states];
        for j in 0..h {
            let cell_tanh = tanh_f32(cell[j]);
            let dh = d_out[j] + d_h_next[j];
            let dc = d_c_next[j] + dh * o[j] * (1.0 - cell_tanh * cell_tanh);
            di[j] = dc * g[j] * i[j] * (1.0 - i[j]);
            df[j] = dc * previous_cell[j] * f[j] * (1.0 - f[j]);
            dg[j] = dc * i[j] * (1.0 - g[j] * g[j]);
            d_o[j] = dh * cell_tanh * o[j] * (1.0 - o[j]);
            d_c_next[j] = dc * f[j];
        }
    }
}

const DIRECTIONS: usize = 2;

/// The input projections a forward pass reads.
enum Gates<'a> {
    /// `[batch, time, 2 * 4h]`, as [`fused`] takes them, contiguous.
    Natural(FlexTensor),
    /// Sentence `b`'s row at position `p`, `[2 * 4h]`, from `row(b, p)`, read straight into each
    /// step, with `addend`'s share added there: a batch's gates are never laid out whole.
    Rows(RowSource<'a>, Option<RowAddend<'a>>),
}

/// Sentence `b`'s input projections at position `p`, `[2 * 4h]` (both directions).
pub type RowSource<'a> = &'a (dyn Fn(usize, usize) -> &'a [f32] + Sync);

/// Adds what sentence `b`'s token at position `p` brings besides its row to direction `d`'s
/// input projections, `[4h]`, `out`: its context features' shares, added in the step as it is
/// read rather than into a copy of the batch's rows.
pub type RowAddend<'a> = &'a (dyn Fn(usize, usize, usize, &mut [f32]) + Sync);

/// Whether [`infer_from_rows`] serves inference on `device`: the flex CPU backend, unless
/// [`TENSOR_RECURRENCE_VARIABLE`] asks for the tensor-op recurrence.
pub fn infers_from_rows(device: &Device) -> bool {
    *device == Device::flex() && std::env::var_os(TENSOR_RECURRENCE_VARIABLE).is_none()
}

/// The fused recurrence for inference on the host, reading each real token's input
/// projections from `row` as each step needs them: the same arithmetic as [`fused`] without
/// laying the batch's gates out first. Hidden states `[batch, time, 2h]` (`time` the longest
/// of `lengths`), as [`fused`] returns them.
pub fn infer_from_rows<'a>(
    row: RowSource<'a>,
    addend: Option<RowAddend<'a>>,
    recurrent: Tensor<3>,
    lengths: &[usize],
) -> Tensor<3> {
    let device = recurrent.device();
    // Its values as they are, with no copy besides the one each direction takes (`by_direction`).
    let recurrent = FlexTensor::from_data(recurrent.into_data());
    let gates = Gates::Rows(row, addend);
    let forward = Forward::run(gates, &recurrent, lengths.to_vec(), Keep::Output);
    let (batch, time, h) = (forward.batch, forward.time, forward.hidden_size);
    let hidden = natural(&forward.hidden, &forward.lengths, time, h);
    Tensor::from_data(TensorData::new(hidden, [batch, time, 2 * h]), &device)
}

/// What a forward pass keeps: every step's activations and cells for a backward pass, or only
/// what the next step reads when none follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    AllSteps,
    Output,
}

/// What the forward pass keeps for the backward one, all row-major.
#[derive(Debug)]
struct Forward {
    lengths: Vec<usize>,
    time: usize,
    batch: usize,
    hidden_size: usize,
    /// Gate activations `[time, direction, batch, 4h]`: σ(i), σ(f), tanh(g), σ(o). With
    /// [`Keep::Output`], the last step's only.
    activations: Vec<f32>,
    /// Cell states `[time, direction, batch, h]`. With [`Keep::Output`], the last two steps',
    /// step `t` in slot `t % 2`.
    cells: Vec<f32>,
    /// Hidden states `[time, direction, batch, h]`, the output.
    hidden: Vec<f32>,
}

/// Step `t`'s input gates of every sentence and direction, `[direction, batch, width]`, into
/// `step`, from `gates` laid out as the caller has them.
fn gather_step_gates(
    gates: &Gates,
    lengths: &[usize],
    time: usize,
    width: usize,
    t: usize,
    step: &mut [f32],
) {
    let batch = lengths.len();
    match gates {
        Gates::Natural(natural_gates) => {
            let natural_gates = f32s(natural_gates);
            for_each_at_step(lengths, time, width, t, |natural, step_order| {
                step[step_order].copy_from_slice(&natural_gates[natural]);
            });
        }
        Gates::Rows(row, addend) => {
            // Real tokens only: a padding slot keeps what the step held before, which never
            // reaches a real token.
            for (b, &length) in lengths.iter().enumerate() {
                if t >= length {
                    continue;
                }
                for d in 0..DIRECTIONS {
                    let position = if d == 0 {
                        t
                    } else {
                        reversed_position(length, t)
                    };
                    let at = (d * batch + b) * width;
                    let out = &mut step[at..at + width];
                    out.copy_from_slice(&row(b, position)[d * width..(d + 1) * width]);
                    if let Some(addend) = addend {
                        addend(b, position, d, out);
                    }
                }
            }
        }
    }
}

/// Step `t`'s previous cell states (none at the first step) and where its own go, in `cells`:
/// every step's when `keep` is [`Keep::AllSteps`], else two slots used in turn.
fn cell_slots(
    cells: &mut [f32],
    keep: Keep,
    t: usize,
    step_states: usize,
) -> (Option<&[f32]>, &mut [f32]) {
    match keep {
        Keep::AllSteps => {
            let (earlier, cells) = cells.split_at_mut(t * step_states);
            (t.checked_sub(1).map(|p| &earlier[p * step_states..]), cells)
        }
        Keep::Output => {
            let (slot0, slot1) = cells.split_at_mut(step_states);
            let (previous, cells) = if t.is_multiple_of(2) {
                (slot1, slot0)
            } else {
                (slot0, slot1)
            };
            ((t > 0).then_some(&*previous), cells)
        }
    }
}

impl Forward {
    fn run(gates: Gates, recurrent: &FlexTensor, lengths: Vec<usize>, keep: Keep) -> Self {
        let [_, h, width] = recurrent.layout().shape().dims::<3>();
        let batch = lengths.len();
        let step_gates = DIRECTIONS * batch * width;
        let step_states = DIRECTIONS * batch * h;
        let time = match &gates {
            Gates::Natural(gates) => gates.layout().shape().dims::<3>()[1],
            Gates::Rows(..) => lengths.iter().copied().max().unwrap_or(0),
        };
        let (kept_activations, kept_cells) = match keep {
            Keep::AllSteps => (time, time),
            Keep::Output => (1, 2),
        };
        let mut forward = Forward {
            lengths,
            time,
            batch,
            hidden_size: h,
            activations: vec![0.0; kept_activations * step_gates],
            cells: vec![0.0; kept_cells * step_states],
            hidden: vec![0.0; time * step_states],
        };
        let recurrent = by_direction(recurrent, false);
        let (half_gates, half_states) = (batch * width, batch * h);
        let zeros = vec![0.0; step_states];
        for t in 0..time {
            let (previous_cells, cells) = cell_slots(&mut forward.cells, keep, t, step_states);
            let previous_cells = previous_cells.unwrap_or(&zeros[..]);
            let (earlier_hidden, hidden) = forward.hidden.split_at_mut(t * step_states);
            let previous_hidden = (t > 0).then(|| &earlier_hidden[(t - 1) * step_states..]);
            let slot = if keep == Keep::AllSteps { t } else { 0 };
            let step = &mut forward.activations[slot * step_gates..(slot + 1) * step_gates];
            gather_step_gates(&gates, &forward.lengths, time, width, t, step);
            // The two directions are independent: one thread each when rayon has two.
            let (step_forward, step_backward) = step.split_at_mut(half_gates);
            let (cells_forward, cells_backward) = cells[..step_states].split_at_mut(half_states);
            let (hidden_forward, hidden_backward) = hidden[..step_states].split_at_mut(half_states);
            let half = |d: usize| {
                let range = d * half_states..(d + 1) * half_states;
                (
                    previous_hidden.map(|hidden| &hidden[range.clone()]),
                    &previous_cells[range],
                )
            };
            rayon::join(
                || {
                    let (previous_hidden, previous_cells) = half(0);
                    forward_step(
                        h,
                        step_forward,
                        previous_hidden,
                        previous_cells,
                        &recurrent[0],
                        cells_forward,
                        hidden_forward,
                    )
                },
                || {
                    let (previous_hidden, previous_cells) = half(1);
                    forward_step(
                        h,
                        step_backward,
                        previous_hidden,
                        previous_cells,
                        &recurrent[1],
                        cells_backward,
                        hidden_backward,
                    )
                },
            );
        }
        forward
    }

    /// The hidden states in the caller's layout, `[batch, time, 2h]`.
    fn hidden_tensor(&self) -> FlexTensor {
        let (time, h) = (self.time, self.hidden_size);
        let hidden = natural(&self.hidden, &self.lengths, time, h);
        flex(hidden, [self.batch, time, 2 * h])
    }

    /// Backpropagation through time: the gradients of the gates and the recurrent weights given
    /// that of the hidden states.
    fn backward(&self, d_hidden: &FlexTensor, recurrent: &FlexTensor) -> (FlexTensor, FlexTensor) {
        let (time, batch, h) = (self.time, self.batch, self.hidden_size);
        let width = 4 * h;
        let step_gates = DIRECTIONS * batch * width;
        let step_states = DIRECTIONS * batch * h;
        let d_hidden = time_major(f32s(&d_hidden.to_contiguous()), &self.lengths, time, h);
        let recurrent_t = by_direction(recurrent, true);
        let (half_gates, half_states) = (batch * width, batch * h);
        let mut d_gates = vec![0.0; time * step_gates];
        let mut d_h_next = vec![0.0; step_states];
        let mut d_c_next = vec![0.0; step_states];
        let zeros = vec![0.0; step_states];
        for t in (0..time).rev() {
            let states = t * step_states..(t + 1) * step_states;
            let previous_cells = if t > 0 {
                &self.cells[(t - 1) * step_states..t * step_states]
            } else {
                &zeros[..]
            };
            let activations = &self.activations[t * step_gates..(t + 1) * step_gates];
            let (d_step_forward, d_step_backward) =
                d_gates[t * step_gates..(t + 1) * step_gates].split_at_mut(half_gates);
            let (d_c_forward, d_c_backward) = d_c_next.split_at_mut(half_states);
            let direction =
                |d: usize, d_step: &mut [f32], d_c_next: &mut [f32], d_h_next: &mut [f32]| {
                    let gates = d * half_gates..(d + 1) * half_gates;
                    let states =
                        states.start + d * half_states..states.start + (d + 1) * half_states;
                    let local = d * half_states..(d + 1) * half_states;
                    backward_step(
                        BackwardStep {
                            hidden_size: h,
                            activations: &activations[gates],
                            cells: &self.cells[states.clone()],
                            previous_cells: &previous_cells[local],
                            d_out: &d_hidden[states],
                            d_h_next,
                        },
                        d_step,
                        d_c_next,
                    );
                    if t > 0 {
                        matmul_into(d_h_next, false, d_step, &recurrent_t[d], width);
                    }
                };
            let (d_h_forward, d_h_backward) = d_h_next.split_at_mut(half_states);
            rayon::join(
                || direction(0, d_step_forward, d_c_forward, d_h_forward),
                || direction(1, d_step_backward, d_c_backward, d_h_backward),
            );
        }

        // dW[d] = Σ_t h_{t-1}[d]ᵀ · d_gates_t[d], as one matmul over all steps: the previous
        // states `[direction, (time - 1) * batch, h]`, transposed as a view, times the gates'
        // gradients `[direction, (time - 1) * batch, 4h]`.
        let steps = time - 1;
        let mut previous = vec![0.0; steps * step_states];
        let mut later_gates = vec![0.0; DIRECTIONS * steps * batch * width];
        for t in 1..time {
            for d in 0..DIRECTIONS {
                let to = (d * steps + t - 1) * batch;
                let from = (t * DIRECTIONS + d) * batch;
                previous[to * h..(to + batch) * h]
                    .copy_from_slice(&self.hidden[(from - DIRECTIONS * batch) * h..][..batch * h]);
                later_gates[to * width..(to + batch) * width]
                    .copy_from_slice(&d_gates[from * width..(from + batch) * width]);
            }
        }
        let d_recurrent = Flex::float_matmul(
            Flex::float_swap_dims(flex(previous, [DIRECTIONS, steps * batch, h]), 1, 2),
            flex(later_gates, [DIRECTIONS, steps * batch, width]),
        );
        let d_natural = natural(&d_gates, &self.lengths, time, width);
        (
            flex(d_natural, [batch, time, DIRECTIONS * width]),
            d_recurrent,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectorize::at_every_level;

    /// Values over the whole range the activations see, saturated ones included.
    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n as u32)
            .map(|i| {
                let x = (i.wrapping_mul(2_654_435_761) ^ seed) % 20_000;
                (x as f32 - 10_000.0) / 800.0
            })
            .collect()
    }

    #[test]
    fn the_gate_arithmetic_gives_the_same_bits_on_every_instruction_set() {
        let (h, batch) = (37, 3);
        let forward = at_every_level(|| {
            let mut step = values(batch * 4 * h, 1);
            let previous = values(batch * h, 2);
            let (mut cell, mut hidden) = (vec![0.0; batch * h], vec![0.0; batch * h]);
            for row in 0..batch {
                activate_row(
                    h,
                    &mut step[row * 4 * h..(row + 1) * 4 * h],
                    &previous[row * h..(row + 1) * h],
                    &mut cell[row * h..(row + 1) * h],
                    &mut hidden[row * h..(row + 1) * h],
                );
            }
            [step, cell, hidden].map(|v| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
        });
        let backward = at_every_level(|| {
            let activations: Vec<f32> = values(batch * 4 * h, 3).iter().map(|x| x / 13.0).collect();
            let (cells, previous_cells) = (values(batch * h, 4), values(batch * h, 5));
            let (d_out, d_h_next) = (values(batch * h, 6), values(batch * h, 7));
            let step = BackwardStep {
                hidden_size: h,
                activations: &activations,
                cells: &cells,
                previous_cells: &previous_cells,
                d_out: &d_out,
                d_h_next: &d_h_next,
            };
            let (mut d_step, mut d_c_next) = (vec![0.0; batch * 4 * h], values(batch * h, 8));
            backward_rows(h, batch, &step, &mut d_step, &mut d_c_next);
            [d_step, d_c_next].map(|v| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
        });
        assert!(forward.iter().all(|bits| *bits == forward[0]));
        assert!(backward.iter().all(|bits| *bits == backward[0]));
        assert_eq!(forward.len(), backward.len());
    }
}
