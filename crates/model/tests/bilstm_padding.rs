//! Padding must never reach a real token's state in either direction: a sentence's outputs are
//! the same alone and in a batch padded to a longer length.

use burn::tensor::{Device, Distribution, Tensor};
use nertrain_model::BiLstmConfig;

#[test]
fn outputs_do_not_depend_on_padding() {
    let device = Device::default();
    let lstm = BiLstmConfig::new(6, 5).init(&device);
    let short = Tensor::<3>::random([1, 3, 6], Distribution::Normal(0.0, 1.0), &device);
    let long = Tensor::<3>::random([1, 7, 6], Distribution::Normal(0.0, 1.0), &device);
    // The short sentence padded with garbage to the long one's length.
    let garbage = Tensor::<3>::random([1, 4, 6], Distribution::Normal(0.0, 9.0), &device);
    let padded = Tensor::cat(vec![short.clone(), garbage], 1);
    let batch = Tensor::cat(vec![padded, long.clone()], 0);

    let alone = lstm.forward(short, &[3]);
    let together = lstm.forward(batch, &[3, 7]);
    let in_batch = together.clone().slice([0..1, 0..3, 0..10]);
    alone
        .into_data()
        .assert_approx_eq::<f32>(&in_batch.into_data(), Default::default());
    let long_alone = lstm.forward(long, &[7]);
    long_alone.into_data().assert_approx_eq::<f32>(
        &together.slice([1..2, 0..7, 0..10]).into_data(),
        Default::default(),
    );
}

#[test]
fn each_direction_sees_only_its_side_of_the_sentence() {
    let device = Device::default();
    let lstm = BiLstmConfig::new(4, 3).init(&device);
    let x = Tensor::<3>::random([1, 5, 4], Distribution::Normal(0.0, 1.0), &device);
    let changed_last = Tensor::cat(
        vec![
            x.clone().slice([0..1, 0..4, 0..4]),
            Tensor::ones([1, 1, 4], &device) * 3.0,
        ],
        1,
    );
    let a = lstm.forward(x, &[5]);
    let b = lstm.forward(changed_last, &[5]);
    let first_token = |t: Tensor<3>, dirs: std::ops::Range<usize>| {
        t.slice([0..1, 0..1, dirs])
            .into_data()
            .iter::<f32>()
            .collect::<Vec<_>>()
    };
    // The forward state of the first token has not seen the last one...
    assert_eq!(first_token(a.clone(), 0..3), first_token(b.clone(), 0..3));
    // ...while the backward state of the first token has.
    assert_ne!(first_token(a, 3..6), first_token(b, 3..6));
}
