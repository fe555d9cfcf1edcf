//! The fused LSTM recurrence (flex, hand-written backward) against the tensor-op one (autodiff):
//! the same hidden states and the same gradients for the gates and the recurrent weights, on
//! batches of sentences of different lengths.

use burn::tensor::{Device, Distribution, Tensor};
use nertrain_model::recurrence;

fn assert_close(a: Tensor<3>, b: Tensor<3>, what: &str) {
    assert_eq!(a.dims(), b.dims(), "{what}");
    let a: Vec<f32> = a.into_data().iter::<f32>().collect();
    let b: Vec<f32> = b.into_data().iter::<f32>().collect();
    let worst = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max);
    assert!(worst < 1e-5, "{what}: differs by {worst}");
}

#[test]
fn fused_matches_tensor_ops_in_value_and_gradient() {
    let device = Device::flex().autodiff();
    let cases: [(&[usize], usize); 6] = [
        (&[1], 1),
        (&[2, 1, 2], 2),
        (&[5, 3], 3),
        (&[7, 1, 4, 7], 5),
        (&[12, 9, 2], 8),
        (&[3, 3], 1),
    ];
    for (lengths, h) in cases {
        let (batch, time) = (lengths.len(), *lengths.iter().max().unwrap());
        let normal = |sd| Distribution::Normal(0.0, sd);
        let gates = Tensor::<3>::random([batch, time, 8 * h], normal(1.5), &device);
        let recurrent = Tensor::<3>::random([2, h, 4 * h], normal(0.7), &device);
        // A loss that weighs every hidden state differently.
        let weights = Tensor::<3>::random([batch, time, 2 * h], normal(1.0), &device);

        let run = |fused: bool| {
            let gates = gates.clone().require_grad();
            let recurrent = recurrent.clone().require_grad();
            let hidden = if fused {
                recurrence::fused(gates.clone(), recurrent.clone(), lengths)
            } else {
                recurrence::tensor_ops(gates.clone(), recurrent.clone(), lengths)
            };
            let grads = (hidden.clone() * weights.clone()).sum().backward();
            (
                hidden,
                Tensor::from_inner(gates.grad(&grads).unwrap()),
                Tensor::from_inner(recurrent.grad(&grads).unwrap()),
            )
        };
        let (hidden, d_gates, d_recurrent) = run(true);
        let (want_hidden, want_d_gates, want_d_recurrent) = run(false);
        let case = format!("lengths {lengths:?}, hidden {h}");
        assert_close(hidden, want_hidden, &format!("{case}: hidden states"));
        assert_close(d_gates, want_d_gates, &format!("{case}: gates' gradient"));
        assert_close(
            d_recurrent,
            want_d_recurrent,
            &format!("{case}: recurrent gradient"),
        );
    }
}

#[test]
fn fused_runs_without_autodiff() {
    let device = Device::flex();
    let gates = Tensor::<3>::random([3, 6, 32], Distribution::Normal(0.0, 1.0), &device);
    let recurrent = Tensor::<3>::random([2, 4, 16], Distribution::Normal(0.0, 1.0), &device);
    assert_close(
        recurrence::fused(gates.clone(), recurrent.clone(), &[6, 2, 5]),
        recurrence::tensor_ops(gates, recurrent, &[6, 2, 5]),
        "inference",
    );
}
