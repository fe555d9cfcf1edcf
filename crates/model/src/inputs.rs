use burn::tensor::{Device, Int, Tensor, TensorData};
use nertrain_data::Batch;

use crate::Marginals;
use crate::encoder::SubwordTensors;

/// A [`Batch`] on a device: ids, the float token mask (1 for real tokens), and lengths.
#[derive(Debug, Clone)]
pub struct BatchTensors {
    /// `[batch, max_len]`
    pub words: Tensor<2, Int>,
    /// Each word's [`nertrain_data::Casing`] id, `[batch, max_len]`.
    pub casing: Tensor<2, Int>,
    /// Each word's [`nertrain_data::MentionCasing`] id, `[batch, max_len]`.
    pub mentions: Tensor<2, Int>,
    /// `[batch * max_len, max_word_len]`
    pub chars: Tensor<2, Int>,
    /// `[batch, max_len]`; `None` for untagged sentences.
    pub tags: Option<Tensor<2, Int>>,
    /// `[batch, max_len, tags]`, 1.0 where a token may carry a tag (see [`Batch::allowed`]);
    /// `None` when every token is labelled.
    pub allowed: Option<Tensor<3>>,
    /// `[batch, max_len]`, 1.0 at real tokens and 0.0 at padding.
    pub mask: Tensor<2>,
    /// Each sentence's tokens.
    pub lengths: Vec<usize>,
    /// Characters in each word slot, `[batch * max_len]`.
    pub char_lengths: Vec<usize>,
    /// Each sentence's characters as one sequence, `[batch, max_chars]` (see
    /// [`nertrain_data::SentenceChars`]).
    pub sentence_chars: Tensor<2, Int>,
    /// Each sentence's characters, separators included.
    pub sentence_char_lengths: Vec<usize>,
    /// `[batch, max_len]`: where in `sentence_chars` the separator after each word is.
    pub word_ends: Tensor<2, Int>,
    /// `[batch, max_len]`: where in `sentence_chars` the separator before each word is.
    pub word_starts: Tensor<2, Int>,
    /// Each word's dictionary place ids, `[batch, max_len * labels]` (see [`Batch::dictionary`]);
    /// `None` without a dictionary.
    pub dictionary: Option<Tensor<2, Int>>,
    /// Each feature column's value ids, `[batch, max_len]` each (see [`Batch::features`]);
    /// empty without feature columns.
    pub features: Vec<Tensor<2, Int>>,
    /// The pretrained encoder's inputs; `None` without an encoder.
    pub subwords: Option<SubwordTensors>,
    /// The frozen encoder's layers at each word, when they were computed once
    /// (`[batch, max_len, (layers + 1) * hidden]`, see [`Batch::encoder_states`]).
    pub encoder_states: Option<Tensor<3>>,
    /// The teachers' marginals (see [`Batch::teacher`]); `None` without teachers.
    pub teacher: Option<Marginals>,
}

impl BatchTensors {
    /// A batch's ids as tensors on `device`.
    pub fn new(batch: &Batch, device: &Device) -> Self {
        let shape = [batch.size(), batch.max_len];
        let ints = |ids: &[i64], shape: [usize; 2]| {
            Tensor::<2, Int>::from_data(TensorData::new(ids.to_vec(), shape), device)
        };
        let mask: Vec<f32> = batch
            .lengths
            .iter()
            .flat_map(|&len| (0..batch.max_len).map(move |t| if t < len { 1.0 } else { 0.0 }))
            .collect();
        Self {
            words: ints(&batch.words, shape),
            casing: ints(&batch.casing, shape),
            mentions: ints(&batch.mentions, shape),
            chars: ints(
                &batch.chars.ids,
                [batch.size() * batch.max_len, batch.chars.max_word_len],
            ),
            tags: (!batch.tags.is_empty()).then(|| ints(&batch.tags, shape)),
            allowed: (!batch.allowed.is_empty()).then(|| {
                let ones: Vec<f32> = batch
                    .allowed
                    .iter()
                    .map(|&a| f32::from(u8::from(a)))
                    .collect();
                let shape = [batch.size(), batch.max_len, batch.num_tags];
                Tensor::from_data(TensorData::new(ones, shape), device)
            }),
            mask: Tensor::from_data(TensorData::new(mask, shape), device),
            lengths: batch.lengths.clone(),
            char_lengths: batch.chars.lengths.clone(),
            sentence_chars: ints(
                &batch.sentence_chars.ids,
                [batch.size(), batch.sentence_chars.max_chars],
            ),
            sentence_char_lengths: batch.sentence_chars.lengths.clone(),
            word_ends: ints(&batch.sentence_chars.word_ends, shape),
            word_starts: ints(&batch.sentence_chars.word_starts, shape),
            dictionary: (batch.dictionary_labels > 0).then(|| {
                ints(
                    &batch.dictionary,
                    [batch.size(), batch.max_len * batch.dictionary_labels],
                )
            }),
            features: batch.features.iter().map(|ids| ints(ids, shape)).collect(),
            subwords: batch
                .subwords
                .as_ref()
                .map(|ids| SubwordTensors::new(ids, device)),
            encoder_states: (!batch.encoder_states.is_empty()).then(|| {
                let width = batch.encoder_states.len() / (batch.size() * batch.max_len).max(1);
                let shape = [batch.size(), batch.max_len, width];
                Tensor::from_data(TensorData::new(batch.encoder_states.clone(), shape), device)
            }),
            teacher: batch.teacher.as_ref().map(|teacher| {
                let (rows, time, k) = (teacher.rows, teacher.time, teacher.tags);
                Marginals {
                    unary: Tensor::from_data(
                        TensorData::new(teacher.unary.clone(), [rows, time, k]),
                        device,
                    ),
                    pairwise: Tensor::from_data(
                        TensorData::new(
                            teacher.pairwise.clone(),
                            [rows, time.saturating_sub(1), k, k],
                        ),
                        device,
                    ),
                }
            }),
        }
    }
}
