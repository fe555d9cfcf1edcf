//! The sentence-level character language model (LM-LSTM-CRF): a word's features come from the
//! character LSTM's states at the separators around it, whatever else is in the batch, and the
//! language-model loss is the log-softmax of the next and the previous word, with rare words as
//! `<unk>` and `<pad>` for the sentence boundary, averaged over each sentence's words.

use burn::tensor::{Device, Tensor};
use nertrain_data::{Batch, Casing, Encoded};
use nertrain_model::{BatchTensors, CharLm, CharLmConfig};

/// 12 characters, 4-dimensional embeddings, 3 hidden units per direction; the heads predict the
/// word ids below 5.
fn small_char_lm() -> CharLm {
    CharLmConfig::new(12, 5)
        .with_char_dim(4)
        .with_hidden(3)
        .init(&Device::default())
}

fn sentence(words: &[usize], chars: &[&[usize]]) -> Encoded {
    Encoded {
        words: words.to_vec(),
        chars: chars.iter().map(|c| c.to_vec()).collect(),
        casing: vec![Casing::AllLower.id(); words.len()],
        mentions: vec![1; words.len()],
        tags: Vec::new(),
        allowed: Vec::new(),
        dictionary: Vec::new(),
        features: Vec::new(),
        windows: Vec::new(),
        encoder_states: Vec::new(),
        teacher: None,
    }
}

fn inputs(sentences: &[Encoded]) -> BatchTensors {
    let batch = Batch::new(sentences, (0..sentences.len()).collect(), 20);
    BatchTensors::new(&batch, &Device::default())
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

#[test]
fn features_do_not_depend_on_padding_or_batch() {
    let lm = small_char_lm();
    let short = sentence(&[2, 3], &[&[3, 4], &[5]]);
    let long = sentence(&[4, 2, 3, 7], &[&[6, 6, 6, 6], &[3, 4], &[5], &[8, 9, 10]]);
    let alone = values(lm.features(&lm.word_states(&inputs(std::slice::from_ref(&short)))));
    let batched = values(lm.features(&lm.word_states(&inputs(&[long, short]))));
    // The batch is [2, 4, 6]: the short sentence's two words start at row 1's first slot.
    let in_batch = &batched[4 * 6..4 * 6 + 2 * 6];
    for (a, b) in alone.iter().zip(in_batch) {
        assert!((a - b).abs() < 1e-5, "{alone:?} vs {in_batch:?}");
    }
}

#[test]
fn states_are_read_at_the_separators_around_each_word() {
    let lm = small_char_lm();
    // Characters: | 3 4 | 5 |, separators at 0, 3 and 5.
    let one = [sentence(&[2, 3], &[&[3, 4], &[5]])];
    let inputs = inputs(&one);
    let states = lm.word_states(&inputs);
    let lstm = values(lm.lstm.forward(
        lm.embedding.forward(inputs.sentence_chars.clone()),
        &inputs.sentence_char_lengths,
    ));
    let at = |position: usize, direction: usize| {
        lstm[position * 6 + 3 * direction..position * 6 + 3 * direction + 3].to_vec()
    };
    let forward = values(states.forward);
    let backward = values(states.backward);
    assert_eq!(
        forward[..3],
        at(3, 0)[..],
        "word 1 forward: after its separator"
    );
    assert_eq!(forward[3..], at(5, 0)[..]);
    assert_eq!(
        backward[..3],
        at(0, 1)[..],
        "word 1 backward: its separator before"
    );
    assert_eq!(backward[3..], at(3, 1)[..]);
}

/// log p(target) under `logits` (one row), in f64.
fn log_prob(logits: &[f32], target: usize) -> f64 {
    let max = logits.iter().fold(f32::MIN, |m, &v| m.max(v)) as f64;
    let log_z = max
        + logits
            .iter()
            .map(|&v| (v as f64 - max).exp())
            .sum::<f64>()
            .ln();
    logits[target] as f64 - log_z
}

#[test]
fn nll_predicts_next_and_previous_words_with_rare_words_as_unk() {
    let lm = small_char_lm();
    // Word 9 is beyond the heads' 5 words, so it is predicted as <unk> (1).
    let sentences = [
        sentence(&[2, 9, 4], &[&[3], &[4, 5], &[6]]),
        sentence(&[3], &[&[7, 8]]),
    ];
    let inputs = inputs(&sentences);
    let states = lm.word_states(&inputs);
    let logits = |heads: (&nertrain_model::Highway, &burn::nn::Linear), states: Tensor<3>| {
        values(heads.1.forward(heads.0.forward(states)))
    };
    let next = logits((&lm.to_next_word, &lm.next_word), states.forward.clone());
    let previous = logits(
        (&lm.to_previous_word, &lm.previous_word),
        states.backward.clone(),
    );
    let row = |all: &[f32], slot: usize| all[slot * 5..(slot + 1) * 5].to_vec();
    // Slots of the [2, 3] batch; <pad> (0) is the boundary.
    let expected_first = -(log_prob(&row(&next, 0), 1)
        + log_prob(&row(&next, 1), 4)
        + log_prob(&row(&next, 2), 0)
        + log_prob(&row(&previous, 0), 0)
        + log_prob(&row(&previous, 1), 2)
        + log_prob(&row(&previous, 2), 1))
        / 3.0;
    let expected_second = -(log_prob(&row(&next, 3), 0) + log_prob(&row(&previous, 3), 0));
    let nll = values(lm.nll(states, inputs.words.clone(), inputs.mask.clone()));
    assert_eq!(nll.len(), 2);
    assert!(
        (nll[0] as f64 - expected_first).abs() < 1e-4,
        "{nll:?} vs {expected_first}"
    );
    assert!(
        (nll[1] as f64 - expected_second).abs() < 1e-4,
        "{nll:?} vs {expected_second}"
    );
}
