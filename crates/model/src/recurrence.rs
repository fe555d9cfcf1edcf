//! The recurrence of a bidirectional LSTM: input projections `[batch, time, 8 * hidden]` (the
//! forward direction's four gates, then the backward direction's, each in the order input,
//! forget, cell, output) and recurrent weights `[direction, hidden, 4 * hidden]` → hidden states
//! `[batch, time, 2 * hidden]`, forward direction first. The backward direction reads each
//! sentence reversed within its own length, so padding (which follows the real tokens in both
//! directions) never reaches a real token's state. States at padded positions are unspecified.
//!
//! Two implementations compute the same function. [`tensor_ops`] is a loop of ordinary tensor
//! operations and runs on every backend (it is what runs on a GPU). [`fused`] is one operation
//! with a hand-written backward (backpropagation through time) for the flex CPU backend: a step
//! of the tensor version is about fifteen operations plus the reordering around the loop, each
//! allocating and each recorded by autodiff, and on a CPU that overhead, not arithmetic, was most
//! of the time. [`run`] picks `fused` on flex.

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

/// The recurrence with whichever implementation suits the tensors' device.
pub fn run(gates: Tensor<3>, recurrent: Tensor<3>, lengths: &[usize]) -> Tensor<3> {
    // Device equality compares hardware and ignores autodiff, so this holds for training too.
    if gates.device() == Device::flex() {
        fused(gates, recurrent, lengths)
    } else {
        tensor_ops(gates, recurrent, lengths)
    }
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

/// The fused operation; the tensors must be on flex (with or without autodiff).
pub fn fused(gates: Tensor<3>, recurrent: Tensor<3>, lengths: &[usize]) -> Tensor<3> {
    Tensor::from_dispatch(<Dispatch as FusedLstm>::lstm_recurrence(
        gates.into_dispatch(),
        recurrent.into_dispatch(),
        lengths.to_vec(),
    ))
}

#[backend_extension(Flex, Autodiff)]
pub trait FusedLstm: Backend {
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
        Forward::run(&gates, &recurrent, lengths).hidden_tensor()
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
                let forward = Forward::run(gates.primitive(), recurrent.primitive(), lengths);
                let output = forward.hidden_tensor();
                let state = Saved {
                    forward: Arc::new(forward),
                    recurrent: recurrent.primitive().clone(),
                };
                prep.finish(state, output)
            }
            OpsKind::UnTracked(prep) => prep.finish(
                Forward::run(gates.primitive(), recurrent.primitive(), lengths).hidden_tensor(),
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

fn values(t: &FlexTensor) -> Vec<f32> {
    match t.as_slice::<f32>() {
        Some(slice) => slice.to_vec(),
        None => t
            .to_contiguous()
            .as_slice::<f32>()
            .expect("contiguous")
            .to_vec(),
    }
}

fn flex(values: Vec<f32>, shape: [usize; 3]) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, shape))
}

/// Batched `[d, m, k] × [d, k, n]` on flex's matrix multiply.
fn matmul(lhs: Vec<f32>, lhs_shape: [usize; 3], rhs: &FlexTensor) -> FlexTensor {
    Flex::float_matmul(flex(lhs, lhs_shape), rhs.clone()).to_contiguous()
}

/// tanh as Eigen computes it for f32: a 13/6 rational approximation on [-7.9, 7.9] (beyond
/// which tanh is ±1 in f32), within a few ulp. Unlike libm's `tanhf` it has no branches, so the
/// loops below vectorise; libm's `tanhf` and `expf` were a quarter of a training step.
#[inline(always)]
fn tanh_f32(x: f32) -> f32 {
    let x = x.clamp(-7.905_311, 7.905_311);
    let x2 = x * x;
    let mut p = x2 * -2.760_768_5e-16 + 2.000_188e-13;
    p = x2 * p + -8.604_672e-11;
    p = x2 * p + 5.122_297e-8;
    p = x2 * p + 1.485_722_4e-5;
    p = x2 * p + 6.372_619_3e-4;
    p = x2 * p + 4.893_524_6e-3;
    let mut q = x2 * 1.198_258_4e-6 + 1.185_347_1e-4;
    q = x2 * q + 2.268_434_6e-3;
    q = x2 * q + 4.893_525e-3;
    x * p / q
}

#[inline(always)]
fn sigmoid_f32(x: f32) -> f32 {
    0.5 + 0.5 * tanh_f32(0.5 * x)
}

/// What the forward pass keeps for the backward one, all row-major.
#[derive(Debug)]
struct Forward {
    lengths: Vec<usize>,
    time: usize,
    directions: usize,
    batch: usize,
    hidden_size: usize,
    /// Gate activations `[time, direction, batch, 4h]`: σ(i), σ(f), tanh(g), σ(o).
    activations: Vec<f32>,
    /// Cell states `[time, direction, batch, h]`.
    cells: Vec<f32>,
    /// Hidden states `[time, direction, batch, h]`, the output.
    hidden: Vec<f32>,
}

impl Forward {
    fn run(gates: &FlexTensor, recurrent: &FlexTensor, lengths: Vec<usize>) -> Self {
        let [batch, time, both_widths] = gates.layout().shape().dims::<3>();
        let (directions, width) = (2, both_widths / 2);
        let h = width / 4;
        let step_gates = directions * batch * width;
        let step_states = directions * batch * h;
        // Time-major, the backward direction reversed: `[time, direction, batch, 4h]`.
        let natural = values(gates);
        let mut gates = vec![0.0; time * step_gates];
        for (b, &length) in lengths.iter().enumerate() {
            for t in 0..time {
                for d in 0..directions {
                    let position = if d == 0 {
                        t
                    } else {
                        reversed_position(length, t)
                    };
                    let from = (b * time + position) * both_widths + d * width;
                    let to = ((t * directions + d) * batch + b) * width;
                    gates[to..to + width].copy_from_slice(&natural[from..from + width]);
                }
            }
        }
        let mut forward = Forward {
            lengths,
            time,
            directions,
            batch,
            hidden_size: h,
            activations: vec![0.0; time * step_gates],
            cells: vec![0.0; time * step_states],
            hidden: vec![0.0; time * step_states],
        };
        let zeros = vec![0.0; h];
        for t in 0..time {
            // Pre-activations go straight into the activations buffer and are replaced there.
            let (earlier_cells, cells) = forward.cells.split_at_mut(t * step_states);
            let previous_cells = &earlier_cells[earlier_cells.len().saturating_sub(step_states)..];
            let step = &mut forward.activations[t * step_gates..(t + 1) * step_gates];
            step.copy_from_slice(&gates[t * step_gates..(t + 1) * step_gates]);
            if t > 0 {
                let previous = forward.hidden[(t - 1) * step_states..t * step_states].to_vec();
                let recurrent_part = matmul(previous, [directions, batch, h], recurrent);
                let recurrent_part = recurrent_part.as_slice::<f32>().expect("contiguous");
                for (p, r) in step.iter_mut().zip(recurrent_part) {
                    *p += r;
                }
            }
            let hidden = &mut forward.hidden[t * step_states..(t + 1) * step_states];
            for row in 0..directions * batch {
                // Simple passes over contiguous slices, so that each one vectorises.
                let (input_forget, rest) = step[row * width..(row + 1) * width].split_at_mut(2 * h);
                let (g, o) = rest.split_at_mut(h);
                input_forget.iter_mut().for_each(|x| *x = sigmoid_f32(*x));
                g.iter_mut().for_each(|x| *x = tanh_f32(*x));
                o.iter_mut().for_each(|x| *x = sigmoid_f32(*x));
                let (i, f) = input_forget.split_at(h);
                let cell = &mut cells[row * h..(row + 1) * h];
                let previous_cell = if t > 0 {
                    &previous_cells[row * h..(row + 1) * h]
                } else {
                    &zeros[..]
                };
                for ((((c, &p), &i), &f), &g) in
                    cell.iter_mut().zip(previous_cell).zip(i).zip(f).zip(&*g)
                {
                    *c = f * p + i * g;
                }
                let hidden = &mut hidden[row * h..(row + 1) * h];
                for ((out, &c), &o) in hidden.iter_mut().zip(&*cell).zip(&*o) {
                    *out = o * tanh_f32(c);
                }
            }
        }
        forward
    }

    /// Where direction `d`'s step `t` of sentence `b` is in the sentence.
    fn position(&self, b: usize, d: usize, t: usize) -> usize {
        if d == 0 {
            t
        } else {
            reversed_position(self.lengths[b], t)
        }
    }

    /// The hidden states in the caller's layout, `[batch, time, 2h]`.
    fn hidden_tensor(&self) -> FlexTensor {
        let (time, directions, batch, h) =
            (self.time, self.directions, self.batch, self.hidden_size);
        let mut natural = vec![0.0; batch * time * directions * h];
        for t in 0..time {
            for d in 0..directions {
                for b in 0..batch {
                    let from = ((t * directions + d) * batch + b) * h;
                    let to = ((b * time + self.position(b, d, t)) * directions + d) * h;
                    natural[to..to + h].copy_from_slice(&self.hidden[from..from + h]);
                }
            }
        }
        flex(natural, [batch, time, directions * h])
    }

    /// Backpropagation through time: the gradients of the gates and the recurrent weights given
    /// that of the hidden states.
    fn backward(&self, d_hidden: &FlexTensor, recurrent: &FlexTensor) -> (FlexTensor, FlexTensor) {
        let (time, directions, batch, h) =
            (self.time, self.directions, self.batch, self.hidden_size);
        let width = 4 * h;
        let step_gates = directions * batch * width;
        let step_states = directions * batch * h;
        let d_natural = values(d_hidden);
        let mut d_hidden = vec![0.0; time * step_states];
        for t in 0..time {
            for d in 0..directions {
                for b in 0..batch {
                    let from = ((b * time + self.position(b, d, t)) * directions + d) * h;
                    let to = ((t * directions + d) * batch + b) * h;
                    d_hidden[to..to + h].copy_from_slice(&d_natural[from..from + h]);
                }
            }
        }
        let recurrent_t = Flex::float_swap_dims(recurrent.clone(), 1, 2);
        let mut d_gates = vec![0.0; time * step_gates];
        let mut d_h_next = vec![0.0; step_states];
        let mut d_c_next = vec![0.0; step_states];
        let zeros = vec![0.0; h];
        for t in (0..time).rev() {
            for row in 0..directions * batch {
                let state = t * step_states + row * h;
                let a = t * step_gates + row * width;
                let activations = &self.activations[a..a + width];
                let (i, rest) = activations.split_at(h);
                let (f, rest) = rest.split_at(h);
                let (g, o) = rest.split_at(h);
                let o = &o[..h];
                let (di, rest) = d_gates[a..a + width].split_at_mut(h);
                let (df, rest) = rest.split_at_mut(h);
                let (dg, d_o) = rest.split_at_mut(h);
                let d_o = &mut d_o[..h];
                let cell = &self.cells[state..state + h];
                let previous_cell = if t > 0 {
                    &self.cells[state - step_states..state - step_states + h]
                } else {
                    &zeros[..h]
                };
                let d_out = &d_hidden[state..state + h];
                let d_h_next = &d_h_next[row * h..(row + 1) * h];
                let d_c_next = &mut d_c_next[row * h..(row + 1) * h];
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
            if t > 0 {
                let step = d_gates[t * step_gates..(t + 1) * step_gates].to_vec();
                d_h_next = values(&matmul(step, [directions, batch, width], &recurrent_t));
            }
        }

        // dW[d] = Σ_t h_{t-1}[d]ᵀ · d_gates_t[d], as one matmul over all steps: the previous
        // states `[direction, h, (time - 1) * batch]` times the gates' gradients
        // `[direction, (time - 1) * batch, 4h]`.
        let steps = time - 1;
        let mut previous_t = vec![0.0; directions * h * steps * batch];
        let mut later_gates = vec![0.0; directions * steps * batch * width];
        for t in 1..time {
            for d in 0..directions {
                for b in 0..batch {
                    let column = (t - 1) * batch + b;
                    let state = (t - 1) * step_states + (d * batch + b) * h;
                    for j in 0..h {
                        previous_t[(d * h + j) * steps * batch + column] = self.hidden[state + j];
                    }
                    let from = t * step_gates + (d * batch + b) * width;
                    let to = (d * steps * batch + column) * width;
                    later_gates[to..to + width].copy_from_slice(&d_gates[from..from + width]);
                }
            }
        }
        let d_recurrent = if steps == 0 {
            vec![0.0; directions * h * width]
        } else {
            values(&matmul(
                previous_t,
                [directions, h, steps * batch],
                &flex(later_gates, [directions, steps * batch, width]),
            ))
        };
        let mut d_natural = vec![0.0; batch * time * directions * width];
        for t in 0..time {
            for d in 0..directions {
                for b in 0..batch {
                    let from = ((t * directions + d) * batch + b) * width;
                    let to = ((b * time + self.position(b, d, t)) * directions + d) * width;
                    d_natural[to..to + width].copy_from_slice(&d_gates[from..from + width]);
                }
            }
        }
        (
            flex(d_natural, [batch, time, directions * width]),
            flex(d_recurrent, [directions, h, width]),
        )
    }
}
