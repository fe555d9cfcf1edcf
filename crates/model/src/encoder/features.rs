//! What a pretrained encoder gives each word among the BiLSTM's inputs, from its layers at the
//! word's first sub-token: a learned weighted mix of them all (as ELMo's are used, Peters et al.
//! 2018), or its last few side by side (BERT's best features, Devlin et al. 2019, section 5.3).

use burn::module::{Module, Param};
use burn::tensor::activation::softmax;
use burn::tensor::{Device, Int, Tensor, TensorData};
use nertrain_data::SubwordIds;
use serde::{Deserialize, Serialize};

use super::fused;
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

/// How the layers at a word's first sub-token become its features: `"mix"` or
/// `"concat-last-N"` in an experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum LayerUse {
    /// A learned softmax mix of every layer (the embeddings' first) times a learned scale.
    #[default]
    Mix,
    /// The last `n` layers, side by side: `n` times the encoder's width.
    ConcatLast(usize),
}

impl LayerUse {
    /// The setting's name in an experiment.
    pub const SETTING: &'static str = "model.pretrained_layers";

    /// Checked against `encoder`, whose embeddings' output counts as a layer.
    pub fn check(self, encoder: &EncoderConfig) -> Result<(), String> {
        let layers = encoder.layers + 1;
        match self {
            Self::ConcatLast(n) if n > layers => Err(format!(
                "{}: \"{self}\" asks for more layers than the encoder's {layers} layers (the \
                 embeddings' and each block's)",
                Self::SETTING
            )),
            _ => Ok(()),
        }
    }
}

impl std::fmt::Display for LayerUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Mix => f.write_str("mix"),
            Self::ConcatLast(n) => write!(f, "concat-last-{n}"),
        }
    }
}

impl std::str::FromStr for LayerUse {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text == "mix" {
            return Ok(Self::Mix);
        }
        match text.strip_prefix("concat-last-").map(str::parse::<usize>) {
            Some(Ok(n)) if n > 0 => Ok(Self::ConcatLast(n)),
            _ => Err(format!(
                "expected \"mix\" or \"concat-last-N\" (N from 1), found \"{text}\""
            )),
        }
    }
}

impl TryFrom<String> for LayerUse {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        text.parse()
    }
}

impl From<LayerUse> for String {
    fn from(use_: LayerUse) -> Self {
        use_.to_string()
    }
}

/// The most sub-tokens of windows that go through the encoder at once.
const WINDOW_TOKENS: usize = 8192;

/// Windows that go through the encoder together, packed row after row.
#[derive(Default)]
struct Pack {
    /// Their sub-token ids, a run of windows of one length at a time.
    pieces: Vec<Tensor<1, Int>>,
    /// Each window's length.
    lengths: Vec<usize>,
    /// The rows read, in the pack's rows.
    local: Vec<i64>,
}

/// The windows of `subwords` that hold a row of `needed` (sorted, in the groups' rows laid end
/// to end), in packs of at most [`WINDOW_TOKENS`] sub-tokens (or one window), so that what is
/// held (every layer's activations and attention weights) is bounded by the pack, and what is
/// kept by the words. With `mixed` a pack takes windows of any lengths (each window attends
/// to itself alone either way); without, windows of one length.
fn packs(subwords: &SubwordTensors, needed: &[usize], mixed: bool) -> Vec<Pack> {
    let mut packs: Vec<Pack> = Vec::new();
    let (mut row, mut next) = (0, 0);
    for ids in &subwords.groups {
        let [windows, length] = ids.dims();
        let at_once = (WINDOW_TOKENS / length).max(1);
        for start in (0..windows).step_by(at_once) {
            let end = (start + at_once).min(windows);
            let rows = (end - start) * length;
            let from = next;
            while next < needed.len() && needed[next] < row + rows {
                next += 1;
            }
            if next > from {
                let joins = packs.last().is_some_and(|pack| {
                    (mixed || pack.lengths.last() == Some(&length))
                        && pack.rows() + rows <= WINDOW_TOKENS
                });
                if !joins {
                    packs.push(Default::default());
                }
                let pack = packs.last_mut().expect("a pack");
                let base = pack.rows();
                (pack.local).extend(needed[from..next].iter().map(|&r| (base + r - row) as i64));
                (pack.lengths).extend(std::iter::repeat_n(length, end - start));
                let chunk = ids.clone().slice([start..end, 0..length]);
                pack.pieces.push(chunk.flatten::<1>(0, 1));
            }
            row += rows;
        }
    }
    packs
}

impl Pack {
    /// The sub-token ids, window after window.
    fn ids(&self) -> Tensor<1, Int> {
        Tensor::cat(self.pieces.clone(), 0)
    }

    /// The rows it holds.
    fn rows(&self) -> usize {
        self.lengths.iter().sum()
    }
}

/// A batch's [`SubwordIds`] on a device, its windows grouped by length: each group is read
/// without padding, so that what a window gives does not depend on the windows it is batched
/// with (`tag`, `eval`, `serve` and `fit`'s own scoring batch sentences differently, and must
/// agree to the last digit).
#[derive(Debug, Clone)]
pub struct SubwordTensors {
    /// `[windows, length]` each: the windows of one length.
    pub groups: Vec<Tensor<2, Int>>,
    /// Each word slot's first sub-token (`batch * max_len` of them) in the groups' outputs,
    /// laid end to end (`windows * length` rows each).
    pub first: Vec<usize>,
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
        let first = ids
            .first
            .iter()
            .map(|&flat| {
                let flat = flat as usize;
                starts[flat / ids.width] + flat % ids.width
            })
            .collect();
        Self { groups, first }
    }
}

/// A pretrained encoder and what each word is given of its layers.
#[derive(Module, Debug)]
pub struct PretrainedFeatures {
    /// The encoder, loaded from a checkpoint.
    pub encoder: PretrainedEncoder,
    /// Each layer's weight in the mix before a softmax, the embeddings' first: `[layers + 1]`.
    /// (Kept, untrained, when the layers are concatenated: the weights' layout is one.)
    pub mix: Param<Tensor<1>>,
    /// The mix's scale: `[1]`.
    pub scale: Param<Tensor<1>>,
    /// Whether the encoder's own weights stay as they are.
    pub frozen: bool,
    /// How many of the last layers are concatenated; 0: they are mixed.
    pub concat_last: usize,
}

impl PretrainedFeatures {
    /// An encoder of `config`'s shape (weights to be loaded), with an even mix; `layers` must
    /// have passed [`LayerUse::check`] against `config`.
    pub fn new(config: &EncoderConfig, tuning: Tuning, layers: LayerUse, device: &Device) -> Self {
        Self {
            encoder: config.init(device),
            mix: Param::from_tensor(Tensor::zeros([config.layers + 1], device)),
            scale: Param::from_tensor(Tensor::ones([1], device)),
            frozen: tuning == Tuning::Frozen,
            concat_last: match layers {
                LayerUse::Mix => 0,
                LayerUse::ConcatLast(n) => n,
            },
        }
    }

    /// Width of each of the encoder's layers.
    pub fn hidden(&self) -> usize {
        self.encoder.embeddings.word_embeddings.weight.dims()[1]
    }

    /// Width of what each word is given.
    pub fn d_output(&self) -> usize {
        self.hidden() * self.concat_last.max(1)
    }

    /// Layers in the mix: the embeddings' and each block's.
    pub fn layers(&self) -> usize {
        self.mix.dims()[0]
    }

    /// Each word slot's layers at its first sub-token, `[batch, max_len, layers + 1, hidden]`.
    /// A frozen encoder runs off the autodiff graph: its layers are constants to the mix.
    pub fn word_states(
        &self,
        subwords: &SubwordTensors,
        batch: usize,
        max_len: usize,
    ) -> Tensor<4> {
        let (layers, hidden) = (self.layers(), self.hidden());
        self.at_first_subtokens(subwords, |states| {
            let rows = states.dims()[0];
            states.reshape([rows, layers * hidden])
        })
        .reshape([batch, max_len, layers, hidden])
    }

    /// What each word slot is given, `[batch, max_len, d_output]`: [`combine`](Self::combine)
    /// of [`word_states`](Self::word_states), each chunk of windows combined as it comes, so
    /// that a long sentence keeps `d_output` values a word rather than every layer's. Row by
    /// row the same values; for inference, where no gradient sums across the chunks.
    pub fn word_features(
        &self,
        subwords: &SubwordTensors,
        batch: usize,
        max_len: usize,
    ) -> Tensor<3> {
        self.at_first_subtokens(subwords, |states| {
            let [rows, layers, hidden] = states.dims();
            self.combine(states.reshape([1, rows, layers, hidden]))
                .reshape([rows, self.d_output()])
        })
        .reshape([batch, max_len, self.d_output()])
    }

    /// `keep` of each word slot's layers at its first sub-token, `[batch * max_len, width]`, for
    /// `keep` mapping `[rows, layers + 1, hidden]` to `[rows, width]` row by row.
    fn at_first_subtokens(
        &self,
        subwords: &SubwordTensors,
        keep: impl Fn(Tensor<3>) -> Tensor<2>,
    ) -> Tensor<2> {
        let device = self.mix.device();
        // The rows read: the first sub-token of each word, in order.
        let mut needed = subwords.first.clone();
        needed.sort_unstable();
        needed.dedup();
        let packs = packs(subwords, &needed, fused::has_fused(&device));
        let local =
            |pack: &Pack| Tensor::from_data(TensorData::from(pack.local.as_slice()), &device);
        let stacked = |states: Vec<Tensor<2>>| Tensor::stack::<3>(states, 1);
        let kept: Vec<Tensor<2>> = if self.frozen {
            // Run off the autodiff graph.
            let encoder = self.encoder.valid();
            (packs.iter())
                .map(|pack| {
                    let ids = pack.ids().without_autodiff();
                    let words = encoder.word_embeddings(&[ids]).remove(0);
                    let states = stacked(encoder.packed_hidden_states(words, &pack.lengths));
                    let states = if self.mix.val().is_autodiff() {
                        states.autodiff()
                    } else {
                        states
                    };
                    keep(states.select(0, local(pack)))
                })
                .collect()
        } else {
            let ids: Vec<Tensor<1, Int>> = packs.iter().map(Pack::ids).collect();
            let words = self.encoder.word_embeddings(&ids);
            (packs.iter().zip(words))
                .map(|(pack, words)| {
                    let states = stacked(self.encoder.packed_hidden_states(words, &pack.lengths));
                    keep(states.select(0, local(pack)))
                })
                .collect()
        };
        let at: Vec<i64> = (subwords.first.iter())
            .map(|r| needed.binary_search(r).expect("every row read is kept") as i64)
            .collect();
        let at = Tensor::from_data(TensorData::from(at.as_slice()), &device);
        Tensor::cat(kept, 0).select(0, at)
    }

    /// What each word is given of `states` (`[batch, max_len, layers + 1, hidden]`):
    /// `[batch, max_len, d_output]`.
    pub fn combine(&self, states: Tensor<4>) -> Tensor<3> {
        let [batch, max_len, layers, hidden] = states.dims();
        if self.concat_last > 0 {
            let n = self.concat_last;
            return states
                .slice([0..batch, 0..max_len, layers - n..layers, 0..hidden])
                .reshape([batch, max_len, n * hidden]);
        }
        let weights = softmax(self.mix.val(), 0).reshape([1, 1, layers, 1]);
        let scale = self.scale.val().reshape([1, 1, 1, 1]);
        (states * weights * scale)
            .sum_dim(2)
            .reshape([batch, max_len, hidden])
    }

    /// Every layer at each word's first sub-token of each of `sentences` at `indices`, computed
    /// once ([`nertrain_data::Encoded::encoder_states`]), for a frozen encoder whose layers
    /// training reads every epoch.
    pub fn cache_states(
        &self,
        sentences: &mut [nertrain_data::Encoded],
        indices: &[usize],
        max_word_len: usize,
    ) {
        const BATCH: usize = 64;
        const BATCH_TOKENS: usize = 8192;
        // Frozen, the encoder runs off the autodiff graph whatever device it is on.
        debug_assert!(self.frozen);
        let device = self.mix.device();
        let lengths: Vec<usize> = indices.iter().map(|&i| sentences[i].len()).collect();
        let width = self.layers() * self.hidden();
        for batch in nertrain_data::BatchPlan::sorted(&lengths, BATCH, BATCH_TOKENS).batches {
            let indices: Vec<usize> = batch.into_iter().map(|b| indices[b]).collect();
            let batch = nertrain_data::Batch::new(sentences, indices.clone(), max_word_len);
            let Some(subwords) = &batch.subwords else {
                continue;
            };
            let subwords = SubwordTensors::new(subwords, &device);
            let states = self.word_states(&subwords, batch.size(), batch.max_len);
            let values = crate::host_values(states);
            for (row, &i) in indices.iter().enumerate() {
                let len = sentences[i].len();
                sentences[i].encoder_states =
                    values[row * batch.max_len * width..][..len * width].to_vec();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::{Activation, Family};

    #[test]
    fn layer_uses_read_as_written_and_others_are_named() {
        for text in ["mix", "concat-last-1", "concat-last-4"] {
            let layers: LayerUse = text.parse().unwrap();
            assert_eq!(layers.to_string(), text);
        }
        for text in [
            "",
            "concat",
            "concat-last-0",
            "concat-last-x",
            "Mix",
            "concat-4",
        ] {
            let message = text.parse::<LayerUse>().unwrap_err();
            assert!(message.contains(&format!("found \"{text}\"")), "{message}");
        }
        // Two blocks and the embeddings: 3 layers.
        assert!(LayerUse::ConcatLast(3).check(&tiny()).is_ok());
        let message = LayerUse::ConcatLast(4).check(&tiny()).unwrap_err();
        assert!(message.contains("model.pretrained_layers"), "{message}");
        assert!(message.contains("3 layers"), "{message}");
    }

    /// An encoder of 2 blocks of width 2.
    fn tiny() -> EncoderConfig {
        EncoderConfig {
            family: Family::Bert,
            vocab_size: 10,
            hidden: 2,
            layers: 2,
            heads: 1,
            intermediate: 4,
            max_positions: 8,
            type_vocab_size: 1,
            layer_norm_eps: 1e-12,
            activation: Activation::Gelu,
            pad_token_id: 0,
            dropout: 0.0,
        }
    }

    #[test]
    fn concatenated_layers_are_the_last_ones_in_order_and_the_mix_their_weighted_sum() {
        let device = Device::flex();
        let config = tiny();
        // One word of one sentence: layers 0, 1, 2 of width 2.
        let states = || {
            Tensor::<4>::from_data(
                TensorData::new(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [1, 1, 3, 2]),
                &device,
            )
        };
        let values = |t: Tensor<3>| t.into_data().iter::<f32>().collect::<Vec<_>>();
        let concat =
            PretrainedFeatures::new(&config, Tuning::Frozen, LayerUse::ConcatLast(2), &device);
        assert_eq!(concat.d_output(), 4);
        assert_eq!(values(concat.combine(states())), [3.0, 4.0, 5.0, 6.0]);
        // An even mix of the three layers, scaled by 1: their mean.
        let mix = PretrainedFeatures::new(&config, Tuning::Frozen, LayerUse::Mix, &device);
        assert_eq!(mix.d_output(), 2);
        let mixed = values(mix.combine(states()));
        assert!(
            (mixed[0] - 3.0).abs() < 1e-6 && (mixed[1] - 4.0).abs() < 1e-6,
            "{mixed:?}"
        );
    }

    #[test]
    fn each_chunks_words_combined_as_they_come_are_the_combined_layers_to_the_last_bit() {
        let device = Device::flex();
        let config = tiny();
        // Windows of two lengths, more of the longer than one pass of the encoder takes, each
        // word at a sub-token of its own, some windows with none: several chunks and groups.
        let (width, windows) = (8, 2 * WINDOW_TOKENS / 8 + 3);
        let lengths: Vec<usize> = (0..windows)
            .map(|w| if w % 5 == 0 { 5 } else { 8 })
            .collect();
        let ids: Vec<i64> = (0..windows * width)
            .map(|at| {
                if at % width < lengths[at / width] {
                    1 + (at % 7) as i64
                } else {
                    0
                }
            })
            .collect();
        let first: Vec<i64> = (0..windows)
            .filter(|w| w % 3 != 1)
            .flat_map(|w| [w * width + 1, w * width + lengths[w] - 1])
            .map(|at| at as i64)
            .collect();
        let (batch, max_len) = (2, first.len() / 2);
        let ids = SubwordIds {
            ids,
            windows,
            width,
            lengths,
            first,
        };
        let subwords = SubwordTensors::new(&ids, &device);
        for layers in [LayerUse::Mix, LayerUse::ConcatLast(2)] {
            let features = PretrainedFeatures::new(&config, Tuning::Frozen, layers, &device);
            // A mix of its own: the layers weighed unevenly.
            let features = PretrainedFeatures {
                mix: Param::from_tensor(Tensor::from_data([0.3f32, -1.2, 0.7], &device)),
                ..features
            };
            let whole = features.combine(features.word_states(&subwords, batch, max_len));
            let chunked = features.word_features(&subwords, batch, max_len);
            assert_eq!(whole.dims(), chunked.dims());
            let bits = |t: Tensor<3>| {
                t.into_data()
                    .iter::<f32>()
                    .map(f32::to_bits)
                    .collect::<Vec<_>>()
            };
            assert_eq!(bits(whole), bits(chunked), "{layers}");
        }
    }
}
