//! The fused LSTM recurrence (flex, hand-written backward) against the tensor-op one (autodiff):
//! the same hidden states and the same gradients for the gates and the recurrent weights.

use burn::tensor::{Device, Distribution, Tensor};
use nertrain_model::recurrence;

fn close(a: Tensor<4>, b: Tensor<4>, what: &str) {
    let (a, b): (Vec<f32>, Vec<f32>) = (
        a.into_data().iter::<f32>().collect(),
        b.into_data().iter::<f32>().collect(),
    );
    assert_eq!(a.len(), b.len());
    let worst = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max);
    assert!(worst < 1e-5, "{what}: differs by {worst}");
}

fn close3(a: Tensor<3>, b: Tensor<3>, what: &str) {
    let shape = a.dims();
    close(
        a.reshape([1, shape[0], shape[1], shape[2]]),
        b.reshape([1, shape[0], shape[1], shape[2]]),
        what,
    );
}

#[test]
fn fused_matches_tensor_ops_in_value_and_gradient() {
    let device = Device::flex().autodiff();
    for (time, batch, h) in [(1, 1, 1), (1, 3, 2), (5, 2, 3), (7, 4, 5), (12, 3, 8)] {
        let gates = Tensor::<4>::random(
            [time, 2, batch, 4 * h],
            Distribution::Normal(0.0, 1.5),
            &device,
        );
        let recurrent = Tensor::<3>::random([2, h, 4 * h], Distribution::Normal(0.0, 0.7), &device);
        // A loss that weighs every hidden state differently.
        let weights =
            Tensor::<4>::random([time, 2, batch, h], Distribution::Normal(0.0, 1.0), &device);

        let run = |fused: bool| {
            let gates = gates.clone().require_grad();
            let recurrent = recurrent.clone().require_grad();
            let hidden = if fused {
                recurrence::fused(gates.clone(), recurrent.clone())
            } else {
                recurrence::tensor_ops(gates.clone(), recurrent.clone())
            };
            let grads = (hidden.clone() * weights.clone()).sum().backward();
            (
                hidden,
                gates.grad(&grads).unwrap(),
                recurrent.grad(&grads).unwrap(),
            )
        };
        let (hidden, d_gates, d_recurrent) = run(true);
        let (want_hidden, want_d_gates, want_d_recurrent) = run(false);
        let case = format!("time {time}, batch {batch}, hidden {h}");
        close(hidden, want_hidden, &format!("{case}: hidden states"));
        close(
            Tensor::from_inner(d_gates),
            Tensor::from_inner(want_d_gates),
            &format!("{case}: gates' gradient"),
        );
        close3(
            Tensor::from_inner(d_recurrent),
            Tensor::from_inner(want_d_recurrent),
            &format!("{case}: recurrent gradient"),
        );
    }
}

#[test]
fn fused_runs_without_autodiff() {
    let device = Device::flex();
    let gates = Tensor::<4>::random([6, 2, 3, 16], Distribution::Normal(0.0, 1.0), &device);
    let recurrent = Tensor::<3>::random([2, 4, 16], Distribution::Normal(0.0, 1.0), &device);
    close(
        recurrence::fused(gates.clone(), recurrent.clone()),
        recurrence::tensor_ops(gates, recurrent),
        "inference",
    );
}
