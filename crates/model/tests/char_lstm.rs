//! The char-LSTM reads each word within its own length: a word's features are the same however
//! far its batch pads it, empty slots get zeros, and the features are the forward state after the
//! last character beside the backward state after the first.

use burn::tensor::{Device, Int, Tensor, TensorData};
use nertrain_model::{CharLstm, CharLstmConfig};

fn ids(rows: &[&[i64]], width: usize) -> Tensor<2, Int> {
    let mut flat = Vec::new();
    for row in rows {
        flat.extend_from_slice(row);
        flat.extend(std::iter::repeat_n(0, width - row.len()));
    }
    Tensor::from_data(
        TensorData::new(flat, [rows.len(), width]),
        &Device::default(),
    )
}

fn rows(t: Tensor<2>) -> Vec<Vec<f32>> {
    let [n, d] = t.dims();
    let flat: Vec<f32> = t.into_data().iter::<f32>().collect();
    (0..n).map(|i| flat[i * d..(i + 1) * d].to_vec()).collect()
}

/// 12 characters, 4-dimensional embeddings, 3 hidden units per direction.
fn small_char_lstm() -> CharLstm {
    CharLstmConfig::new(12)
        .with_char_dim(4)
        .with_hidden(3)
        .init(&Device::default())
}

#[test]
fn features_do_not_depend_on_padding_or_batch() {
    let lstm = small_char_lstm();
    let word: &[i64] = &[3, 7, 5];
    let alone = rows(lstm.forward(ids(&[word], 3), &[3]));
    let batch = rows(lstm.forward(ids(&[&[9, 9, 9, 9, 9, 9], word, &[]], 6), &[6, 3, 0]));
    assert_eq!(alone[0].len(), 6);
    for (a, b) in alone[0].iter().zip(&batch[1]) {
        assert!((a - b).abs() < 1e-5, "{alone:?} vs {batch:?}");
    }
    assert!(
        batch[2].iter().all(|&v| v == 0.0),
        "an empty slot gets zeros"
    );
}

#[test]
fn features_are_the_forward_state_at_the_last_character_and_the_backward_state_at_the_first() {
    let lstm = small_char_lstm();
    let word = ids(&[&[3, 7, 5, 2]], 4);
    let features = rows(lstm.forward(word.clone(), &[4]))[0].clone();
    let states = rows(
        lstm.lstm
            .forward(lstm.embedding.forward(word), &[4])
            .reshape([4, 6]),
    );
    let mut want = states[3][..3].to_vec();
    want.extend_from_slice(&states[0][3..]);
    assert_eq!(features, want);
}
