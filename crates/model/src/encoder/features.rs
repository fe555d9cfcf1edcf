//! What a pretrained encoder gives each word: a learned weighted mix of its layers (as ELMo's
//! are used, Peters et al. 2018) at the word's first sub-token, among the BiLSTM's inputs.

use burn::module::{Module, Param};
use burn::tensor::activation::softmax;
use burn::tensor::{Device, Int, Tensor, TensorData};
use nertrain_data::SubwordIds;
use serde::{Deserialize, Serialize};

use super::{EncoderConfig, PretrainedEncoder};

/// How a pretrained encoder is trained with the rest of the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tuning {
    /// Its weights are trained with the network's, at their own learning rate.
    #[default]
    FineTune,
    /// Its weights stay as the checkpoint has them; its layers' mix is learned.
    Frozen,
}

/// A batch's [`SubwordIds`] on a device, its windows grouped by length: each group is read
/// without padding, so that what a window gives does not depend on the windows it is batched
/// with (`tag`, `eval`, `serve` and `fit`'s own scoring batch sentences differently, and must
/// agree to the last digit).
#[derive(Debug, Clone)]
pub struct SubwordTensors {
    /// `[windows, length]` each: the windows of one length.
    pub groups: Vec<Tensor<2, Int>>,
    /// `[batch * max_len]`: each word slot's first sub-token in the groups' outputs, laid end
    /// to end (`[windows * length]` each).
    pub first: Tensor<1, Int>,
}

impl SubwordTensors {
    /// `ids` on `device`.
    pub fn new(ids: &SubwordIds, device: &Device) -> Self {
        let mut order: Vec<usize> = (0..ids.windows).collect();
        order.sort_by_key(|&w| (ids.lengths[w], w));
        // Where row `w`'s sub-tokens begin in the groups' outputs.
        let mut starts = vec![0; ids.windows];
        let mut groups = Vec::new();
        let mut at = 0;
        for group in order.chunk_by(|&a, &b| ids.lengths[a] == ids.lengths[b]) {
            let length = ids.lengths[group[0]];
            let mut values = Vec::with_capacity(group.len() * length);
            for &w in group {
                starts[w] = at;
                at += length;
                values.extend_from_slice(&ids.ids[w * ids.width..][..length]);
            }
            groups.push(Tensor::from_data(
                TensorData::new(values, [group.len(), length]),
                device,
            ));
        }
        let first: Vec<i64> = ids
            .first
            .iter()
            .map(|&flat| {
                let flat = flat as usize;
                (starts[flat / ids.width] + flat % ids.width) as i64
            })
            .collect();
        Self {
            groups,
            first: Tensor::from_data(TensorData::new(first.clone(), [first.len()]), device),
        }
    }
}

/// A pretrained encoder and the mix of its layers that each word is given.
#[derive(Module, Debug)]
pub struct PretrainedFeatures {
    /// The encoder, loaded from a checkpoint.
    pub encoder: PretrainedEncoder,
    /// Each layer's weight in the mix before a softmax, the embeddings' first: `[layers + 1]`.
    pub mix: Param<Tensor<1>>,
    /// The mix's scale: `[1]`.
    pub scale: Param<Tensor<1>>,
    /// Whether the encoder's own weights stay as they are.
    pub frozen: bool,
}

impl PretrainedFeatures {
    /// An encoder of `config`'s shape (weights to be loaded), with an even mix.
    pub fn new(config: &EncoderConfig, tuning: Tuning, device: &Device) -> Self {
        Self {
            encoder: config.init(device),
            mix: Param::from_tensor(Tensor::zeros([config.layers + 1], device)),
            scale: Param::from_tensor(Tensor::ones([1], device)),
            frozen: tuning == Tuning::Frozen,
        }
    }

    /// Width of what each word is given.
    pub fn d_output(&self) -> usize {
        self.encoder.embeddings.word_embeddings.weight.dims()[1]
    }

    /// Each word slot's features, `[batch, max_len, hidden]`. A frozen encoder runs off the
    /// autodiff graph: its layers are constants to the mix.
    pub fn forward(&self, subwords: &SubwordTensors, batch: usize, max_len: usize) -> Tensor<3> {
        let weights = softmax(self.mix.val(), 0);
        let hidden = self.d_output();
        let mixed: Vec<Tensor<2>> = subwords
            .groups
            .iter()
            .map(|ids| {
                let [windows, length] = ids.dims();
                let mixed = self.mixed(ids.clone(), weights.clone());
                mixed.reshape([windows * length, hidden])
            })
            .collect();
        let mixed = Tensor::cat(mixed, 0) * self.scale.val().reshape([1, 1]);
        mixed
            .select(0, subwords.first.clone())
            .reshape([batch, max_len, hidden])
    }

    /// The layers of windows `ids` (all of one length) mixed by `weights`.
    fn mixed(&self, ids: Tensor<2, Int>, weights: Tensor<1>) -> Tensor<3> {
        let states = if self.frozen {
            let tracked = weights.is_autodiff();
            self.encoder
                .valid()
                .hidden_states(ids.without_autodiff(), None)
                .into_iter()
                .map(|state| if tracked { state.autodiff() } else { state })
                .collect()
        } else {
            self.encoder.hidden_states(ids, None)
        };
        states
            .into_iter()
            .enumerate()
            .map(|(l, state)| state * weights.clone().narrow(0, l, 1).reshape([1, 1, 1]))
            .reduce(|a, b| a + b)
            .expect("an encoder has its embeddings' layer at least")
    }
}
