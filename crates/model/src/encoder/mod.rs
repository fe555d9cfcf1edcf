//! Pretrained BERT-family encoders (BERT, DistilBERT, RoBERTa / XLM-R) read from a checkpoint
//! directory as Hugging Face writes one: `config.json` says the family and the sizes, the weights
//! are `model.safetensors` (or `pytorch_model.bin`). The layers are Burn's post-LN transformer
//! blocks; the embeddings (words, positions, token types, then a layer norm) are written here, as
//! Burn has none of that shape.
//!
//! What the families differ in is read from `config.json` and nowhere guessed: the activation,
//! the layer norms' epsilon, whether positions start after the pad id (RoBERTa), whether there
//! are token types (not in DistilBERT), and how the weights are named ([`weights`]).

mod attention;
mod features;
pub mod fused;
mod store;
mod weights;

use std::path::Path;

use burn::module::Module;
use burn::nn::activation::ActivationConfig;
use burn::nn::attention::MultiHeadAttention;
use burn::nn::transformer::{
    TransformerEncoder, TransformerEncoderConfig, TransformerEncoderLayer,
};
use burn::nn::{
    Dropout, DropoutConfig, Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear,
};
use burn::tensor::activation::softmax;
use burn::tensor::{Device, Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use crate::FileError;

pub use features::{LayerUse, PretrainedFeatures, SubwordTensors, Tuning};
pub use store::{Filled, LayerStore, fine_tuned_note};
pub use weights::load_checkpoint;

/// A checkpoint's configuration file.
pub const CONFIG_FILE: &str = "config.json";

/// The largest encoder size accepted from a `config.json`, in any dimension, and the most
/// parameters in all (16 GiB of floats): a size with zeros too many would end the process on a
/// failed allocation rather than with a message.
const MAX_SIZE: usize = 1 << 20;
const MAX_PARAMETERS: usize = 1 << 32;

/// The largest `config.json` read (a published one is a few kilobytes).
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The encoder families nertrain reads; `config.json`'s `model_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// BERT, and the models that keep its layout (MiniLM, ELECTRA's discriminator body excepted).
    Bert,
    /// DistilBERT: BERT's blocks under other names, without token types.
    Distilbert,
    /// RoBERTa: BERT's layout, positions counted from after the pad id.
    Roberta,
    /// XLM-RoBERTa: RoBERTa's layout.
    XlmRoberta,
}

impl Family {
    /// The family `config.json` names, if nertrain reads it.
    fn from_model_type(model_type: &str) -> Option<Self> {
        match model_type {
            "bert" => Some(Self::Bert),
            "distilbert" => Some(Self::Distilbert),
            "roberta" => Some(Self::Roberta),
            "xlm-roberta" => Some(Self::XlmRoberta),
            _ => None,
        }
    }

    /// Whether positions start after the pad id (`pad_token_id + 1`), as in fairseq's models.
    fn positions_after_pad(self) -> bool {
        matches!(self, Self::Roberta | Self::XlmRoberta)
    }
}

/// The feed-forward activation, by `config.json`'s name for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// `gelu`: the exact (erf) form.
    Gelu,
    /// `gelu_new`, `gelu_pytorch_tanh`, `gelu_fast`: the tanh approximation.
    GeluTanh,
    /// `relu`.
    Relu,
}

impl Activation {
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "gelu" => Some(Self::Gelu),
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Some(Self::GeluTanh),
            "relu" => Some(Self::Relu),
            _ => None,
        }
    }

    fn config(self) -> ActivationConfig {
        match self {
            Self::Gelu => ActivationConfig::Gelu,
            Self::GeluTanh => ActivationConfig::GeluApproximate,
            Self::Relu => ActivationConfig::Relu,
        }
    }
}

/// What shapes an encoder, as read from a checkpoint's `config.json` (and kept in a model's
/// description, so that a model builds its encoder without the checkpoint).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EncoderConfig {
    /// The family, which decides the embeddings and the weights' names.
    pub family: Family,
    /// Sub-tokens in the vocabulary.
    pub vocab_size: usize,
    /// Width of every layer's output.
    pub hidden: usize,
    /// Transformer blocks.
    pub layers: usize,
    /// Attention heads per block.
    pub heads: usize,
    /// Width of each block's feed-forward layer.
    pub intermediate: usize,
    /// Position embeddings (the most sub-tokens one input may hold, less RoBERTa's offset).
    pub max_positions: usize,
    /// Token types (0: none, as in DistilBERT).
    pub type_vocab_size: usize,
    /// The layer norms' epsilon.
    pub layer_norm_eps: f64,
    /// The feed-forward activation.
    pub activation: Activation,
    /// The padding sub-token's id.
    pub pad_token_id: usize,
    /// Dropout inside the encoder while it is trained.
    pub dropout: f64,
}

// Its two floats are read as finite numbers (`parse`), never NaN: equality is an equivalence.
impl Eq for EncoderConfig {}

/// `config.json` as each family writes it: BERT's names, or DistilBERT's.
#[derive(Debug, Deserialize)]
struct HfConfig {
    model_type: Option<String>,
    vocab_size: Option<usize>,
    hidden_size: Option<usize>,
    num_hidden_layers: Option<usize>,
    num_attention_heads: Option<usize>,
    intermediate_size: Option<usize>,
    hidden_act: Option<String>,
    max_position_embeddings: Option<usize>,
    type_vocab_size: Option<usize>,
    layer_norm_eps: Option<f64>,
    pad_token_id: Option<usize>,
    hidden_dropout_prob: Option<f64>,
    // DistilBERT's names.
    dim: Option<usize>,
    n_layers: Option<usize>,
    n_heads: Option<usize>,
    hidden_dim: Option<usize>,
    activation: Option<String>,
    dropout: Option<f64>,
}

/// A size `config.json` gives in `field`, from 1 to [`MAX_SIZE`].
fn size(value: Option<usize>, field: &str) -> Result<usize, String> {
    match value {
        Some(0) | None => Err(format!("`{field}` is missing or 0: expected a size")),
        Some(v) if v > MAX_SIZE => Err(format!("`{field}` is {v}: at most {MAX_SIZE}")),
        Some(v) => Ok(v),
    }
}

impl HfConfig {
    fn family(&self) -> Result<Family, String> {
        let model_type = self
            .model_type
            .as_deref()
            .ok_or("no `model_type`: expected one of bert, distilbert, roberta, xlm-roberta")?;
        Family::from_model_type(model_type).ok_or_else(|| {
            format!(
                "`model_type` is {model_type:?}: nertrain reads bert, distilbert, roberta and \
                 xlm-roberta encoders"
            )
        })
    }

    /// The hidden size, layers, heads and feed-forward width, under the family's names.
    fn shape(&self, family: Family) -> Result<(usize, usize, usize, usize), String> {
        let (hidden, layers, heads, intermediate) = if family == Family::Distilbert {
            (
                size(self.dim, "dim")?,
                size(self.n_layers, "n_layers")?,
                size(self.n_heads, "n_heads")?,
                size(self.hidden_dim, "hidden_dim")?,
            )
        } else {
            (
                size(self.hidden_size, "hidden_size")?,
                size(self.num_hidden_layers, "num_hidden_layers")?,
                size(self.num_attention_heads, "num_attention_heads")?,
                size(self.intermediate_size, "intermediate_size")?,
            )
        };
        if !hidden.is_multiple_of(heads) {
            return Err(format!(
                "the hidden size {hidden} is not a multiple of the {heads} attention heads"
            ));
        }
        Ok((hidden, layers, heads, intermediate))
    }

    fn activation(&self, family: Family) -> Result<Activation, String> {
        let (field, name) = if family == Family::Distilbert {
            ("activation", self.activation.as_deref().unwrap_or("gelu"))
        } else {
            ("hidden_act", self.hidden_act.as_deref().unwrap_or("gelu"))
        };
        Activation::from_name(name).ok_or_else(|| {
            format!(
                "`{field}` is {name:?}: expected gelu, gelu_new, gelu_pytorch_tanh, gelu_fast \
                 or relu"
            )
        })
    }

    fn layer_norm_eps(&self, family: Family) -> Result<f64, String> {
        match (family, self.layer_norm_eps) {
            // DistilBERT's layer norms are built with 1e-12 whatever the file says.
            (Family::Distilbert, _) | (_, None) => Ok(1e-12),
            (_, Some(eps)) if eps > 0.0 && eps < 1.0 => Ok(eps),
            (_, Some(eps)) => Err(format!(
                "`layer_norm_eps` is {eps}: expected a small positive number"
            )),
        }
    }

    /// The positions an input may have, less RoBERTa's offset past the pad id.
    fn max_positions(&self, family: Family, pad_token_id: usize) -> Result<usize, String> {
        let positions = size(self.max_position_embeddings, "max_position_embeddings")?;
        let offset = if family.positions_after_pad() {
            pad_token_id + 1
        } else {
            0
        };
        positions
            .checked_sub(offset)
            .filter(|&p| p > 0)
            .ok_or_else(|| {
                format!(
                    "`max_position_embeddings` {positions} leaves no position after the pad id \
                     {pad_token_id}"
                )
            })
    }
}

impl EncoderConfig {
    /// Reads `dir/config.json`; a family nertrain does not read, a missing or absurd size, an
    /// unknown activation, or sizes the checkpoint's weights file does not have, is an error
    /// naming the file and the field.
    pub fn read(dir: &Path) -> Result<Self, FileError> {
        let path = dir.join(CONFIG_FILE);
        let bytes = nertrain_data::io::read_regular(&path, MAX_CONFIG_BYTES).map_err(|source| {
            FileError::Io {
                path: path.clone(),
                action: "read the encoder's configuration",
                source,
            }
        })?;
        let text = String::from_utf8(bytes)
            .map_err(|_| FileError::invalid(&path, "not UTF-8 text: expected JSON"))?;
        let config = Self::parse(&text).map_err(|message| FileError::invalid(&path, message))?;
        weights::check_sizes(&config, dir)?;
        Ok(config)
    }

    /// A `config.json`'s text read; the error says which field is wrong and what was expected.
    pub fn parse(text: &str) -> Result<Self, String> {
        let raw: HfConfig =
            serde_json::from_str(text).map_err(|e| format!("not a model configuration: {e}"))?;
        let family = raw.family()?;
        let (hidden, layers, heads, intermediate) = raw.shape(family)?;
        let vocab_size = size(raw.vocab_size, "vocab_size")?;
        let pad_token_id =
            raw.pad_token_id
                .unwrap_or(if family.positions_after_pad() { 1 } else { 0 });
        if pad_token_id >= vocab_size {
            return Err(format!(
                "`pad_token_id` {pad_token_id} is outside the {vocab_size} sub-tokens"
            ));
        }
        let distil = family == Family::Distilbert;
        let config = Self {
            family,
            vocab_size,
            hidden,
            layers,
            heads,
            intermediate,
            max_positions: raw.max_positions(family, pad_token_id)?,
            type_vocab_size: if distil {
                0
            } else {
                raw.type_vocab_size.unwrap_or(2).min(MAX_SIZE)
            },
            layer_norm_eps: raw.layer_norm_eps(family)?,
            activation: raw.activation(family)?,
            pad_token_id,
            dropout: if distil {
                raw.dropout
            } else {
                raw.hidden_dropout_prob
            }
            .unwrap_or(0.1)
            .clamp(0.0, 0.9),
        };
        config.check()?;
        Ok(config)
    }

    /// Whether sizes that did not come through [`parse`](Self::parse) (a model's description)
    /// are within what nertrain builds.
    pub fn check(&self) -> Result<(), String> {
        let sizes = [
            self.vocab_size,
            self.hidden,
            self.layers,
            self.heads,
            self.intermediate,
            self.max_positions,
        ];
        if sizes.iter().any(|&s| s == 0 || s > MAX_SIZE) || self.type_vocab_size > MAX_SIZE {
            return Err(format!("every size must be from 1 to {MAX_SIZE}"));
        }
        if !self.hidden.is_multiple_of(self.heads) || self.pad_token_id >= self.vocab_size {
            return Err(
                "the hidden size must be a multiple of the heads, and the pad id a \
                        sub-token"
                    .into(),
            );
        }
        match self.parameters() {
            Some(n) if n <= MAX_PARAMETERS => Ok(()),
            _ => Err(format!(
                "the sizes describe an encoder of more than {MAX_PARAMETERS} parameters"
            )),
        }
    }

    /// How many parameters an encoder of this shape has (`None` past `usize`).
    pub fn parameters(&self) -> Option<usize> {
        let h = self.hidden;
        let tables = (self.vocab_size + self.max_positions + self.position_offset())
            .checked_add(self.type_vocab_size)?
            .checked_mul(h)?;
        // Four attention projections, two feed-forward layers, their biases, two layer norms.
        let block = (4 * h).checked_mul(h + 1)?.checked_add(
            (2 * h)
                .checked_mul(self.intermediate)?
                .checked_add(self.intermediate + 5 * h)?,
        )?;
        tables.checked_add(block.checked_mul(self.layers)?)
    }

    /// The first position's id: RoBERTa counts from after the pad id.
    fn position_offset(&self) -> usize {
        if self.family.positions_after_pad() {
            self.pad_token_id + 1
        } else {
            0
        }
    }

    /// An encoder of this shape, with fresh weights (to be loaded).
    pub fn init(&self, device: &Device) -> PretrainedEncoder {
        let offset = self.position_offset();
        let embeddings = Embeddings {
            word_embeddings: EmbeddingConfig::new(self.vocab_size, self.hidden).init(device),
            position_embeddings: EmbeddingConfig::new(self.max_positions + offset, self.hidden)
                .init(device),
            token_type_embeddings: (self.type_vocab_size > 0)
                .then(|| EmbeddingConfig::new(self.type_vocab_size, self.hidden).init(device)),
            layer_norm: LayerNormConfig::new(self.hidden)
                .with_epsilon(self.layer_norm_eps)
                .init(device),
            dropout: DropoutConfig::new(self.dropout).init(),
        };
        let encoder =
            TransformerEncoderConfig::new(self.hidden, self.intermediate, self.heads, self.layers)
                .with_dropout(self.dropout)
                .with_norm_first(false)
                .with_activation(self.activation.config())
                .with_layer_norm_eps(self.layer_norm_eps)
                .init(device);
        PretrainedEncoder {
            embeddings,
            encoder,
            position_offset: offset,
        }
    }
}

/// Whether `tokenizer` gives only sub-tokens the encoder of `config` has embeddings for, the
/// special ones included, and leaves room for a word beside its special sub-tokens in the
/// positions the encoder has.
pub fn check_tokenizer(
    config: &EncoderConfig,
    tokenizer: &nertrain_data::SubwordTokenizer,
) -> Result<(), String> {
    match tokenizer.largest_id() {
        Some((id, _)) if (id as usize) < config.vocab_size => {}
        Some((id, token)) => {
            return Err(format!(
                "the tokenizer gives the sub-token {token:?} id {id}, but the encoder has \
                 embeddings for ids 0–{} (config.json's vocab_size {}): a tokenizer of another \
                 checkpoint?",
                config.vocab_size - 1,
                config.vocab_size
            ));
        }
        None => return Err("the tokenizer has no vocabulary".into()),
    }
    let specials = tokenizer.specials();
    if specials >= config.max_positions {
        return Err(format!(
            "the tokenizer puts {specials} special sub-tokens around each input, and the encoder \
             reads {} positions (config.json's max_position_embeddings{}): no room for a word, \
             which needs at least {}",
            config.max_positions,
            match config.position_offset() {
                0 => String::new(),
                offset => format!(" less {offset} before the first"),
            },
            specials + 1
        ));
    }
    Ok(())
}

/// Sub-token, position and token-type embeddings, summed and normalised.
#[derive(Module, Debug)]
pub struct Embeddings {
    /// `[vocab_size, hidden]`
    pub word_embeddings: Embedding,
    /// `[max_positions + offset, hidden]`
    pub position_embeddings: Embedding,
    /// `[type_vocab_size, hidden]`; none in DistilBERT.
    pub token_type_embeddings: Option<Embedding>,
    /// Over the sum.
    pub layer_norm: LayerNorm,
    /// After the layer norm, while training.
    pub dropout: Dropout,
}

impl Embeddings {
    /// The sub-token embeddings of windows packed row after row, `[rows, hidden]` (`lengths`
    /// each window's rows) → their sums with the positions' (and token types') embeddings,
    /// normalised.
    fn forward(&self, words: Tensor<2>, lengths: &[usize], position_offset: usize) -> Tensor<2> {
        let [rows, hidden] = words.dims();
        let device = words.device();
        let ids = |values: Vec<i64>| {
            Tensor::<2, Int>::from_data(TensorData::new(values, [1, rows]), &device)
        };
        let lookup = |table: &Embedding, ids| {
            fused::embedding(table.weight.val(), ids).reshape([rows, hidden])
        };
        let positions = (lengths.iter())
            .flat_map(|&len| (0..len).map(|p| (position_offset + p) as i64))
            .collect();
        let mut sum = words + lookup(&self.position_embeddings, ids(positions));
        if let Some(types) = &self.token_type_embeddings {
            sum = sum + lookup(types, ids(vec![0; rows]));
        }
        fused::dropout(&self.dropout, self.layer_norm.forward(sum))
    }
}

/// A pretrained encoder: embeddings, then post-LN transformer blocks.
#[derive(Module, Debug)]
pub struct PretrainedEncoder {
    /// The input embeddings.
    pub embeddings: Embeddings,
    /// The blocks (Burn's names: `layers.N.mha`, `pwff`, `norm_1`, `norm_2`).
    pub encoder: TransformerEncoder,
    /// The first position's id.
    pub position_offset: usize,
}

impl PretrainedEncoder {
    /// Every layer's output for `[batch, len]` sub-token ids, the embeddings' first (so
    /// `layers + 1` of them, each `[batch, len, hidden]`); each row is a window of its own.
    pub fn hidden_states(&self, ids: Tensor<2, Int>) -> Vec<Tensor<3>> {
        let [batch, len] = ids.dims();
        let words = self.word_embeddings(&[ids.flatten::<1>(0, 1)]).remove(0);
        let hidden = words.dims()[1];
        (self
            .packed_hidden_states(words, &vec![len; batch])
            .into_iter())
        .map(|state| state.reshape([batch, len, hidden]))
        .collect()
    }

    /// The sub-token embeddings `[ids, hidden]` of each of `packs` of ids, looked up in one
    /// operation: under autodiff the table then gets one gradient for them all, not one the
    /// size of the table for each.
    pub fn word_embeddings(&self, packs: &[Tensor<1, Int>]) -> Vec<Tensor<2>> {
        let table = self.embeddings.word_embeddings.weight.val();
        let hidden = table.dims()[1];
        let sizes: Vec<usize> = packs.iter().map(|ids| ids.dims()[0]).collect();
        let ids = Tensor::cat(packs.to_vec(), 0);
        let total = ids.dims()[0];
        let rows = fused::embedding(table, ids.reshape([1, total])).reshape([total, hidden]);
        let mut start = 0;
        (sizes.into_iter())
            .map(|size| {
                let words = rows.clone().slice([start..start + size, 0..hidden]);
                start += size;
                words
            })
            .collect()
    }

    /// Every layer's output, the embeddings' first, for windows packed row after row: `words`
    /// `[rows, hidden]` their sub-token embeddings ([`word_embeddings`](Self::word_embeddings)),
    /// `lengths` each window's rows. Each window attends to itself alone. Where the fused
    /// attention does not run (off flex) the windows must be of one length.
    pub fn packed_hidden_states(&self, words: Tensor<2>, lengths: &[usize]) -> Vec<Tensor<2>> {
        let mut states = Vec::with_capacity(self.encoder.layers.len() + 1);
        let mut x = self
            .embeddings
            .forward(words, lengths, self.position_offset);
        for layer in &self.encoder.layers {
            states.push(x.clone());
            x = block(layer, x, lengths);
        }
        states.push(x);
        states
    }
}

/// One post-LN block over packed windows' rows `[rows, hidden]`, as Burn's
/// `TransformerEncoderLayer::forward` computes it for each window alone (dropout in the same
/// places), its dense layers through [`fused::dense`] and its attention [`attention::packed`]
/// where that runs.
fn block(layer: &TransformerEncoderLayer, x: Tensor<2>, lengths: &[usize]) -> Tensor<2> {
    let mha = &layer.mha;
    let project = |linear: &Linear| fused::dense(linear, x.clone(), None);
    let (query, key, value) = (project(&mha.query), project(&mha.key), project(&mha.value));
    let context = if fused::has_fused(&x.device()) {
        let windows = attention::Windows {
            lengths: lengths.to_vec(),
            heads: mha.n_heads,
        };
        attention::packed(query, key, value, windows, &mha.dropout)
    } else {
        tensor_attention(mha, [query, key, value], lengths)
    };
    let attended = fused::dense(&mha.output, context, None);
    let x = layer
        .norm_1
        .forward(x + fused::dropout(&layer.dropout, attended));

    let pwff = &layer.pwff;
    let inner = fused::dense(
        &pwff.linear_inner,
        x.clone(),
        Some(feed_forward_activation(layer)),
    );
    let out = fused::dense(
        &pwff.linear_outer,
        fused::dropout(&pwff.dropout, inner),
        None,
    );
    layer
        .norm_2
        .forward(x + fused::dropout(&layer.dropout, out))
}

/// `mha`'s attention in Burn's tensor operations, for packed windows all of one length.
fn tensor_attention(
    mha: &MultiHeadAttention,
    [query, key, value]: [Tensor<2>; 3],
    lengths: &[usize],
) -> Tensor<2> {
    let len = lengths.first().copied().unwrap_or(0);
    assert!(
        lengths.iter().all(|&l| l == len),
        "off flex, packed windows must be of one length"
    );
    let [rows, d_model] = query.dims();
    let by_head = |t: Tensor<2>| {
        t.reshape([lengths.len(), len, mha.n_heads, mha.d_k])
            .swap_dims(1, 2)
    };
    let scores = by_head(query)
        .matmul(by_head(key).transpose())
        .div_scalar((mha.d_k as f32).sqrt());
    let weights = fused::dropout(&mha.dropout, softmax(scores, 3));
    weights
        .matmul(by_head(value))
        .swap_dims(1, 2)
        .reshape([rows, d_model])
}

/// The feed-forward activation of a block built by [`EncoderConfig::init`]: post-LN, plain
/// softmax, and one of the activations an [`EncoderConfig`] names.
fn feed_forward_activation(layer: &TransformerEncoderLayer) -> Activation {
    assert!(
        !layer.norm_first && !layer.mha.quiet_softmax,
        "a block built by EncoderConfig::init"
    );
    match &layer.pwff.activation {
        burn::nn::activation::Activation::Gelu(gelu) if gelu.approximate => Activation::GeluTanh,
        burn::nn::activation::Activation::Gelu(_) => Activation::Gelu,
        burn::nn::activation::Activation::Relu(_) => Activation::Relu,
        other => panic!("a block built by EncoderConfig::init, not one of {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::{Distribution, Tolerance};

    use super::*;

    #[test]
    fn a_block_through_the_fused_ops_computes_burns_layer() {
        let device = Device::flex().autodiff();
        for activation in [Activation::Gelu, Activation::GeluTanh, Activation::Relu] {
            device.seed(5);
            let encoder = TransformerEncoderConfig::new(8, 12, 2, 1)
                .with_dropout(0.0)
                .with_norm_first(false)
                .with_activation(activation.config())
                .init(&device);
            let layer = &encoder.layers[0];
            assert_eq!(feed_forward_activation(layer), activation);
            let x = Tensor::<3>::random([2, 5, 8], Distribution::Default, &device).require_grad();
            let upstream = Tensor::<3>::random([2, 5, 8], Distribution::Default, &device);
            let fused = block(layer, x.clone().reshape([10, 8]), &[5, 5]).reshape([2, 5, 8]);
            let reference = layer.forward(x.clone(), None, None);
            let close = |a: Tensor<3>, b: Tensor<3>| {
                a.into_data()
                    .assert_approx_eq::<f32>(&b.into_data(), Tolerance::absolute(1e-5))
            };
            close(fused.clone(), reference.clone());
            let grads = (fused * upstream.clone()).sum().backward();
            let (d_x, d_inner) = (
                x.grad(&grads).unwrap(),
                layer.pwff.linear_inner.weight.val().grad(&grads).unwrap(),
            );
            let grads = (reference * upstream).sum().backward();
            close(d_x, x.grad(&grads).unwrap());
            let reference_inner = layer.pwff.linear_inner.weight.val().grad(&grads).unwrap();
            close(d_inner.unsqueeze(), reference_inner.unsqueeze());
        }
    }
}
