use burn::config::Config;
use burn::module::{Module, ModuleMapper, Param, ParamId};
use burn::nn::{Dropout, DropoutConfig, Embedding, Linear, LinearConfig};
use burn::tensor::{Device, Int, Tensor, TensorData};
use nertrain_data::{Batch, Casing, MentionCasing, Vectors, Vocab};
use serde::{Deserialize, Serialize};

use crate::encoder::{EncoderConfig, LayerUse, PretrainedFeatures, Tuning};
use crate::{
    BatchTensors, BiLstm, BiLstmConfig, CharCnn, CharCnnConfig, CharLm, CharLmConfig, CharLstm,
    CharLstmConfig, Constraints, Crf, CrfConfig, CrfError, FormInputs, Reduction, WordGates,
    WordStates, recurrence, uniform_embedding,
};

/// The most word slots whose context share inference adds to cached gates at once
/// ([`Network::with_context_share`]).
const SHARE_SLOTS: usize = 4096;

/// Which character features each word gets besides its embedding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CharFeatures {
    /// The embedding alone.
    None,
    /// A convolution over the word's characters, max-pooled (Ma & Hovy).
    Cnn,
    /// A bidirectional LSTM over the word's characters, its two final states (Lample et al.).
    Lstm,
}

/// The architecture's hyper-parameters; vocabulary sizes come from the data ([`VocabSizes`]).
#[derive(Config, Debug)]
pub struct NetworkConfig {
    /// Size of a word's embedding.
    #[config(default = 100)]
    pub word_dim: usize,
    /// Which character features each word gets.
    #[config(default = "CharFeatures::Cnn")]
    pub char_features: CharFeatures,
    /// Size of a character's embedding.
    #[config(default = 30)]
    pub char_dim: usize,
    /// Convolution filters of the char-CNN.
    #[config(default = 50)]
    pub char_filters: usize,
    /// Hidden size of each direction of the char-LSTM.
    #[config(default = 25)]
    pub char_hidden: usize,
    /// Size of the embedding of each word's [`Casing`] class beside its word embedding; 0 for none.
    #[config(default = 0)]
    pub casing_dim: usize,
    /// Size of the embedding of each word's [`MentionCasing`] class (how the word is written
    /// elsewhere in its document); 0 for none.
    #[config(default = 0)]
    pub mention_dim: usize,
    /// Hidden size of each LSTM direction.
    #[config(default = 100)]
    pub hidden: usize,
    /// Dropout on the LSTM's input and output.
    #[config(default = 0.5)]
    pub dropout: f64,
    /// LM-LSTM-CRF: a character LSTM over the whole sentence gives every word features, and is
    /// co-trained to predict the next and the previous word (Liu et al., 2018).
    #[config(default = false)]
    pub char_lm: bool,
    /// Hidden size of each direction of the sentence-level character LSTM.
    #[config(default = 100)]
    pub char_lm_hidden: usize,
    /// Weight of the language-model losses beside the CRF's.
    #[config(default = 1.0)]
    pub lm_weight: f64,
    /// Size of the embedding of each word's place (B, I, E, S or none) in the phrases of each
    /// dictionary label, joined per label; 0 for none (and none without a dictionary).
    #[config(default = 0)]
    pub dictionary_dim: usize,
    /// Size of the embedding of each feature column's values (`data.features`), in column
    /// order; empty for none.
    #[config(default = "Vec::new()")]
    pub feature_dims: Vec<usize>,
    /// A pretrained encoder's checkpoint directory (`config.json`, `model.safetensors` or
    /// `pytorch_model.bin`, `tokenizer.json`, as Hugging Face writes them), whose layers (as
    /// [`NetworkConfig::pretrained_layers`] says) each word is given among the BiLSTM's inputs.
    /// Read when training starts: a model keeps its own copy.
    pub pretrained: Option<std::path::PathBuf>,
    /// How the pretrained encoder is trained: `fine-tune` or `frozen`.
    #[config(default = "Tuning::FineTune")]
    pub pretrained_tuning: Tuning,
    /// What each word is given of the pretrained encoder's layers: `mix` (a learned mix of them
    /// all) or `concat-last-N` (the last N side by side).
    #[config(default = "LayerUse::Mix")]
    pub pretrained_layers: LayerUse,
}

/// The sizes of a model's vocabularies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VocabSizes {
    /// Words.
    pub words: usize,
    /// Characters.
    pub chars: usize,
    /// Tags.
    pub tags: usize,
    /// Words the language-model heads predict (`char_lm`): the most frequent ids, below this.
    #[serde(default)]
    pub lm_words: usize,
    /// Dictionary labels, each a feature of every word (0: no dictionary).
    #[serde(default)]
    pub dictionary_labels: usize,
    /// Values of each feature column, `<pad>` and `<unk>` included (empty: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<usize>,
    /// The pretrained encoder's shape (its sub-token vocabulary among it), as its checkpoint's
    /// `config.json` gave it; `None` without an encoder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoder: Option<EncoderConfig>,
}

/// What shapes a network's parameters: every setting of a [`NetworkConfig`] but its
/// regularisation (dropout, the language-model losses' weight), which may change between runs of
/// one model. Serialised under the settings' own names.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Architecture {
    /// [`NetworkConfig::word_dim`].
    pub word_dim: usize,
    /// [`NetworkConfig::char_features`].
    pub char_features: CharFeatures,
    /// [`NetworkConfig::char_dim`].
    pub char_dim: usize,
    /// [`NetworkConfig::char_filters`].
    pub char_filters: usize,
    /// [`NetworkConfig::char_hidden`].
    pub char_hidden: usize,
    /// [`NetworkConfig::casing_dim`].
    pub casing_dim: usize,
    /// [`NetworkConfig::mention_dim`].
    pub mention_dim: usize,
    /// [`NetworkConfig::hidden`].
    pub hidden: usize,
    /// [`NetworkConfig::char_lm`].
    pub char_lm: bool,
    /// [`NetworkConfig::char_lm_hidden`].
    pub char_lm_hidden: usize,
    /// [`NetworkConfig::dictionary_dim`].
    pub dictionary_dim: usize,
    /// [`NetworkConfig::feature_dims`].
    pub feature_dims: Vec<usize>,
    /// [`NetworkConfig::pretrained_tuning`], when there is an encoder.
    pub pretrained_tuning: Tuning,
    /// [`NetworkConfig::pretrained_layers`], when there is an encoder.
    pub pretrained_layers: LayerUse,
}

impl From<&nertrain_data::Vocabularies> for VocabSizes {
    fn from(vocab: &nertrain_data::Vocabularies) -> Self {
        Self {
            words: vocab.words.len(),
            chars: vocab.chars.len(),
            tags: vocab.tags.len(),
            lm_words: 0,
            dictionary_labels: 0,
            features: vocab.features.iter().map(|v| v.len()).collect(),
            encoder: None,
        }
    }
}

impl NetworkConfig {
    /// Its [`Architecture`]. Every setting is named here, so that a new one must be counted as
    /// architecture or as regularisation before this compiles.
    pub fn architecture(&self) -> Architecture {
        let Self {
            word_dim,
            char_features,
            char_dim,
            char_filters,
            char_hidden,
            casing_dim,
            mention_dim,
            hidden,
            dropout: _,
            char_lm,
            char_lm_hidden,
            lm_weight: _,
            dictionary_dim,
            feature_dims,
            // Where the checkpoint was read from; its shape is in `VocabSizes::encoder`.
            pretrained: _,
            pretrained_tuning,
            pretrained_layers,
        } = self.clone();
        Architecture {
            word_dim,
            char_features,
            char_dim,
            char_filters,
            char_hidden,
            casing_dim,
            mention_dim,
            hidden,
            char_lm,
            char_lm_hidden,
            dictionary_dim,
            feature_dims,
            pretrained_tuning,
            pretrained_layers,
        }
    }

    /// A model of this architecture for vocabularies of `sizes`, with fresh weights.
    pub fn init(&self, sizes: &VocabSizes, device: &Device) -> Network {
        let chars = (self.char_features == CharFeatures::Cnn).then(|| {
            CharCnnConfig::new(sizes.chars)
                .with_char_dim(self.char_dim)
                .with_filters(self.char_filters)
                .init(device)
        });
        let char_lstm = (self.char_features == CharFeatures::Lstm).then(|| {
            CharLstmConfig::new(sizes.chars)
                .with_char_dim(self.char_dim)
                .with_hidden(self.char_hidden)
                .init(device)
        });
        let char_lm = self.char_lm.then(|| {
            CharLmConfig::new(sizes.chars, sizes.lm_words)
                .with_char_dim(self.char_dim)
                .with_hidden(self.char_lm_hidden)
                .with_dropout(self.dropout)
                .init(device)
        });
        let casing = (self.casing_dim > 0)
            .then(|| uniform_embedding(Casing::COUNT, self.casing_dim, device));
        let mentions = (self.mention_dim > 0)
            .then(|| uniform_embedding(MentionCasing::COUNT, self.mention_dim, device));
        let dictionary = (self.dictionary_dim > 0 && sizes.dictionary_labels > 0).then(|| {
            uniform_embedding(
                sizes.dictionary_labels * nertrain_data::place::COUNT,
                self.dictionary_dim,
                device,
            )
        });
        let d_dictionary = sizes.dictionary_labels * self.dictionary_dim;
        let features = (!self.feature_dims.is_empty()).then(|| FeatureEmbeddings {
            columns: sizes
                .features
                .iter()
                .zip(&self.feature_dims)
                .map(|(&values, &dim)| uniform_embedding(values, dim, device))
                .collect(),
        });
        let d_features: usize = self.feature_dims.iter().sum();
        let pretrained = sizes.encoder.as_ref().map(|config| {
            PretrainedFeatures::new(
                config,
                self.pretrained_tuning,
                self.pretrained_layers,
                device,
            )
        });
        let d_input = self.word_dim
            + self.casing_dim
            + self.mention_dim
            + dictionary.as_ref().map_or(0, |_| d_dictionary)
            + d_features
            + chars.as_ref().map_or(0, CharCnn::d_output)
            + char_lstm.as_ref().map_or(0, CharLstm::d_output)
            + char_lm.as_ref().map_or(0, CharLm::d_output)
            + pretrained.as_ref().map_or(0, PretrainedFeatures::d_output);
        let network = Network {
            words: uniform_embedding(sizes.words, self.word_dim, device),
            casing,
            chars,
            char_lstm,
            char_lm,
            lm_weight: self.lm_weight,
            mentions,
            encoder: BiLstmConfig::new(d_input, self.hidden).init(device),
            dropout: DropoutConfig::new(self.dropout).init(),
            emissions: LinearConfig::new(2 * self.hidden, sizes.tags).init(device),
            crf: CrfConfig::new(sizes.tags).init(device),
            dictionary,
            features,
            pretrained,
        };
        network.map(&mut NumberedIds(0))
    }
}

/// Numbers a module's parameters in the order it visits them. Burn draws parameter ids at random
/// and writes them into the weights file, so without this two runs that learn the same weights
/// (a run, and the same run stopped and resumed in another process) would write other bytes.
struct NumberedIds(u64);

impl NumberedIds {
    fn next(&mut self) -> ParamId {
        self.0 += 1;
        ParamId::from(self.0)
    }
}

impl ModuleMapper for NumberedIds {
    fn map_float<const D: usize>(&mut self, mut param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        param.id = self.next();
        param
    }

    fn map_int<const D: usize>(
        &mut self,
        mut param: Param<Tensor<D, Int>>,
    ) -> Param<Tensor<D, Int>> {
        param.id = self.next();
        param
    }

    fn map_bool<const D: usize>(
        &mut self,
        mut param: Param<Tensor<D, burn::tensor::Bool>>,
    ) -> Param<Tensor<D, burn::tensor::Bool>> {
        param.id = self.next();
        param
    }
}

/// Each context id's share of the LSTM's input projection, `[ids, 8 * hidden]` row-major
/// ([`Network::context_shares`]): the dictionary's place ids first, then each feature column's
/// values from its offset.
///
/// Most words are in no phrase of any label. What that brings, the same for every such word,
/// is [`in_no_phrase`](Self::in_no_phrase), added to each word's cached row once
/// ([`WordGates`]); a place's row is then what it brings beyond it, and a word in no phrase
/// adds nothing in the recurrence's steps.
#[derive(Debug, Clone)]
pub struct ContextShares {
    /// The shares, one row per id; a dictionary place's, its share less its label's
    /// [`place::NONE`](nertrain_data::place::NONE) share (zeros for `NONE` itself).
    pub table: Vec<f32>,
    /// Every label's `NONE` share summed, `[8 * hidden]`: a word in no phrase of any label.
    /// Empty without dictionary features.
    pub in_no_phrase: Vec<f32>,
    /// Dictionary labels whose places have rows (0 without dictionary features).
    pub dictionary_labels: usize,
    /// Where each feature column's rows begin.
    pub feature_offsets: Vec<usize>,
}

impl ContextShares {
    /// The rows each word slot of `batch` adds (`ids[starts[slot]..starts[slot + 1]]`), read
    /// once for both directions: its places in phrases, then its feature values. Places of a
    /// dictionary the model has no features for are not read, as the tensor path does not read
    /// them; a batch without places is in no phrase, and one without values (which callers
    /// refuse before they get here) reads as unknown values, as the tensor path reads them.
    fn of_slots(&self, batch: &Batch) -> (Vec<usize>, Vec<usize>) {
        let labels = batch.dictionary_labels;
        let read_places = if self.dictionary_labels > 0 {
            labels
        } else {
            0
        };
        let none = usize::from(nertrain_data::place::NONE);
        let slots = batch.lengths.len() * batch.max_len;
        let mut starts = Vec::with_capacity(slots + 1);
        let mut ids = Vec::new();
        starts.push(0);
        for slot in 0..slots {
            let places = batch.dictionary[slot * labels..][..read_places]
                .iter()
                .map(|&id| id as usize)
                .filter(|id| id % nertrain_data::place::COUNT != none);
            ids.extend(places);
            ids.extend(self.feature_offsets.iter().enumerate().map(|(k, offset)| {
                let value = batch.features.get(k).map(|values| values[slot] as usize);
                offset + value.unwrap_or(Vocab::UNK_ID)
            }));
            starts.push(ids.len());
        }
        (starts, ids)
    }
}

/// The embeddings of the feature columns' values, one per column.
#[derive(Module, Debug)]
pub struct FeatureEmbeddings {
    /// Each column's value embedding, `[values, dim]`.
    pub columns: Vec<Embedding>,
}

impl FeatureEmbeddings {
    /// Each column's values embedded, `[batch, max_len, dim]` each. A batch without values
    /// (which callers refuse before they get here) reads as unknown values.
    fn forward(&self, inputs: &BatchTensors) -> Vec<Tensor<3>> {
        let [batch, time] = inputs.words.dims();
        self.columns
            .iter()
            .enumerate()
            .map(|(k, column)| {
                let ids = inputs.features.get(k).cloned().unwrap_or_else(|| {
                    Tensor::full([batch, time], Vocab::UNK_ID as i64, &column.weight.device())
                });
                column.forward(ids)
            })
            .collect()
    }
}

/// Where the network applies dropout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// The BiLSTM's input: each word's features joined, `[batch, max_len, input]`.
    Input,
    /// The BiLSTM's output, before the emission scores, `[batch, max_len, 2 * hidden]`.
    Output,
}

/// What inference from cached word gates gives: the BiLSTM's output, and the emissions when
/// tensor operations made them with it (read from the cached rows, they are left to make).
struct Cached {
    states: Tensor<3>,
    emissions: Option<Tensor<3>>,
}

/// What a batch's words bring to the LSTM's input.
enum WordInput {
    /// Their embeddings, `[batch, max_len, word_dim]`.
    Vectors(Tensor<3>),
    /// Their share of the input projection, `[batch, max_len, 8 * hidden]`
    /// ([`Network::form_gates`], from [`WordGates`]).
    Gates(Tensor<3>),
}

/// Embeddings (+ character features) → BiLSTM → linear emissions → CRF.
#[derive(Module, Debug)]
pub struct Network {
    /// Word embeddings.
    pub words: Embedding,
    /// The casing class's embedding, when `casing_dim` is not 0.
    pub casing: Option<Embedding>,
    /// The char-CNN, when `char_features = "cnn"` (the field keeps its first name so that saved
    /// models still load).
    pub chars: Option<CharCnn>,
    /// The char-LSTM, when `char_features = "lstm"`.
    pub char_lstm: Option<CharLstm>,
    /// The character language model, when `char_lm` is on.
    pub char_lm: Option<CharLm>,
    /// Weight of the language model's losses beside the CRF's.
    pub lm_weight: f64,
    /// Last among the input features, so that models saved before it existed still load.
    pub mentions: Option<Embedding>,
    /// The BiLSTM over the words' features.
    pub encoder: BiLstm,
    /// Dropout on the features and the BiLSTM's output.
    pub dropout: Dropout,
    /// From the BiLSTM's output to each tag's emission score.
    pub emissions: Linear,
    /// The CRF over the emissions.
    pub crf: Crf,
    /// The embedding of each word's place in each dictionary label's phrases (ids `label *
    /// place::COUNT + place`), when the model has a dictionary; last, so that models saved
    /// before it existed still load.
    pub dictionary: Option<Embedding>,
    /// The embeddings of the feature columns' values, when the model reads feature columns;
    /// last, for the same reason.
    pub features: Option<FeatureEmbeddings>,
    /// The pretrained encoder, when the model has one; last, for the same reason.
    pub pretrained: Option<PretrainedFeatures>,
}

impl Network {
    /// Per-token tag scores, `[batch, max_len, tags]`.
    pub fn emissions(&self, inputs: &BatchTensors) -> Tensor<3> {
        let vectors = self.words.forward(inputs.words.clone());
        let drop = |x: Tensor<3>, _: Dropped| self.dropout.forward(x);
        self.encode(inputs, WordInput::Vectors(vectors), &drop).0
    }

    /// [`emissions`](Self::emissions) with dropout on at inference (Monte Carlo dropout): each
    /// place dropout applies to ([`Dropped`]) is multiplied by `mask(shape, place)`, the
    /// kept values' factors (0, or 1 / (1 − p)), so that a caller draws them reproducibly.
    pub fn emissions_with_masks(
        &self,
        inputs: &BatchTensors,
        mask: &dyn Fn([usize; 3], Dropped) -> Tensor<3>,
    ) -> Tensor<3> {
        let vectors = self.words.forward(inputs.words.clone());
        let drop = |x: Tensor<3>, place: Dropped| {
            let factors = mask(x.dims(), place);
            x * factors
        };
        self.encode(inputs, WordInput::Vectors(vectors), &drop).0
    }

    /// [`emissions`](Self::emissions) with each word's share of the LSTM's input projection read
    /// from `cache` rather than computed: for inference, where the weights do not change.
    pub fn emissions_with_cache(&self, batch: &Batch, cache: &WordGates) -> Tensor<3> {
        let Cached { states, emissions } = self.cached(batch, cache);
        emissions.unwrap_or_else(|| self.emissions.forward(self.dropout.forward(states)))
    }

    /// The BiLSTM's output for each word, `[batch, max_len, 2 * hidden]`, read from `cache` as
    /// [`emissions_with_cache`](Self::emissions_with_cache) reads it: what the model makes of
    /// each word in its sentence, before the emission scores.
    pub fn states_with_cache(&self, batch: &Batch, cache: &WordGates) -> Tensor<3> {
        self.cached(batch, cache).states
    }

    /// Inference from `cache`: see [`Cached`].
    fn cached(&self, batch: &Batch, cache: &WordGates) -> Cached {
        let device = self.words.weight.device();
        // On the CPU, without sentence or document features to add, the recurrence reads the
        // cached rows straight into each step: a batch's gates are never laid out whole.
        let width = 8 * self.encoder.d_hidden();
        if self.reads_rows(&device) {
            let shares = cache.context_shares(self);
            let h = cache.with_rows(self, batch, |row| {
                let at = |b: usize, position: usize| row(b * batch.max_len + position);
                let recurrent = self.encoder.recurrent.val();
                let Some(shares) = shares else {
                    return recurrence::infer_from_rows(&at, None, recurrent, &batch.lengths);
                };
                // Each word's dictionary places' and feature values' shares, added to its row as
                // the recurrence reads it: a few additions per value, against the step's
                // products, and no copy of the batch's rows. The rows hold what a word in no
                // phrase brings: only the places of phrases add here.
                let (starts, ids) = shares.of_slots(batch);
                let half = width / 2;
                let addend = |b: usize, position: usize, d: usize, out: &mut [f32]| {
                    let slot = b * batch.max_len + position;
                    let ids = &ids[starts[slot]..starts[slot + 1]];
                    if ids.is_empty() {
                        return;
                    }
                    // Compiled for this CPU's widest vectors, as the recurrence's own loops are:
                    // with the baseline's four floats at a time, these additions showed in
                    // profiles of tagging beside the recurrence itself.
                    crate::vectorize::vectorized(
                        #[inline(always)]
                        || {
                            for &id in ids {
                                let share = &shares.table[id * width + d * half..][..half];
                                out.iter_mut().zip(share).for_each(|(o, s)| *o += s);
                            }
                        },
                    );
                };
                recurrence::infer_from_rows(&at, Some(&addend), recurrent, &batch.lengths)
            });
            return Cached {
                states: h,
                emissions: None,
            };
        }
        let inputs = BatchTensors::new(batch, &device);
        let gates = cache.gates(self, batch);
        let drop = |x: Tensor<3>, _: Dropped| self.dropout.forward(x);
        let (emissions, _, states) = self.encode(&inputs, WordInput::Gates(gates), &drop);
        Cached {
            states,
            emissions: Some(emissions),
        }
    }

    /// Whether inference from [`WordGates`] on `device` reads the cached rows straight into the
    /// recurrence, adding the dictionary places' and feature values' shares there
    /// ([`ContextShares`]), rather than through tensor operations: on the CPU, for a model
    /// without sentence or document features.
    pub fn reads_rows(&self, device: &Device) -> bool {
        self.char_lm.is_none()
            && self.mentions.is_none()
            && self.pretrained.is_none()
            && recurrence::infers_from_rows(device)
    }

    /// The share of the LSTM's input projection that depends on the word as written alone (its
    /// embedding, casing class and character features), bias included: `[words, 8 * hidden]`.
    pub fn form_gates(&self, forms: &FormInputs) -> Tensor<2> {
        let [n, _] = forms.words.dims();
        let word_dim = self.words.weight.dims()[1];
        let vectors = self
            .words
            .forward(forms.words.clone())
            .reshape([n, word_dim]);
        let features = self.form_features(forms.casing.clone(), &forms.chars, &forms.char_lengths);
        let x = Tensor::cat([vec![vectors], features].concat(), 1);
        let d_form = x.dims()[1];
        let input = &self.encoder.input;
        let width = 8 * self.encoder.d_hidden();
        let gates = x.matmul(input.weight.val().slice([0..d_form, 0..width]));
        match &input.bias {
            Some(bias) => gates + bias.val().unsqueeze_dim(0),
            None => gates,
        }
    }

    /// The input features that depend on the word as written, after its embedding, in input
    /// order (casing, char-CNN, char-LSTM): `[slots, d]` each, for `casing` `[rows, columns]`
    /// and `chars` `[rows * columns, max_word_len]`.
    fn form_features(
        &self,
        casing: Tensor<2, Int>,
        chars: &Tensor<2, Int>,
        char_lengths: &[usize],
    ) -> Vec<Tensor<2>> {
        let slots = char_lengths.len();
        let mut features = Vec::new();
        if let Some(embedding) = &self.casing {
            let d = embedding.weight.dims()[1];
            features.push(embedding.forward(casing).reshape([slots, d]));
        }
        if let Some(char_cnn) = &self.chars {
            features.push(char_cnn.forward(chars.clone()));
        }
        if let Some(char_lstm) = &self.char_lstm {
            features.push(char_lstm.forward(chars.clone(), char_lengths));
        }
        features
    }

    /// The emissions, the character language model's states when there is one, and the
    /// BiLSTM's output; `drop` applies dropout where [`Dropped`] says.
    fn encode(
        &self,
        inputs: &BatchTensors,
        words: WordInput,
        drop: &dyn Fn(Tensor<3>, Dropped) -> Tensor<3>,
    ) -> (Tensor<3>, Option<WordStates>, Tensor<3>) {
        let [batch, time] = inputs.words.dims();
        let in_sentence = |f: Tensor<2>| {
            let d = f.dims()[1];
            f.reshape([batch, time, d])
        };
        // The word's own features, needed beside its vectors only (the cached gates hold them).
        // Made before the context's: the order in which autodiff records operations changes the
        // last bits of training, and runs made before this order was kept reproduce exactly.
        let form: Vec<Tensor<3>> = match words {
            WordInput::Vectors(_) => self
                .form_features(inputs.casing.clone(), &inputs.chars, &inputs.char_lengths)
                .into_iter()
                .map(in_sentence)
                .collect(),
            WordInput::Gates(_) => Vec::new(),
        };
        // What depends on the sentence or the document, after the word's own features.
        let mut context = Vec::new();
        let lm_states = self.char_lm.as_ref().map(|char_lm| {
            let states = char_lm.word_states(inputs);
            context.push(char_lm.features(&states));
            states
        });
        if let Some(mentions) = &self.mentions {
            context.push(mentions.forward(inputs.mentions.clone()));
        }
        if let Some(dictionary) = &self.dictionary {
            context.push(self.dictionary_features(dictionary, inputs));
        }
        if let Some(features) = &self.features {
            context.extend(features.forward(inputs));
        }
        if let Some(pretrained) = &self.pretrained {
            context.push(self.pretrained_features(pretrained, inputs));
        }
        let gates = match words {
            WordInput::Vectors(vectors) => {
                let x = Tensor::cat([vec![vectors], form, context].concat(), 2);
                self.encoder.input.forward(drop(x, Dropped::Input))
            }
            // Inference only, where dropout is the identity.
            WordInput::Gates(gates) if context.is_empty() => gates,
            WordInput::Gates(gates) => self.with_context_share(gates, Tensor::cat(context, 2)),
        };
        let h = self.encoder.forward_gates(gates, &inputs.lengths);
        let emissions = self.emissions.forward(drop(h.clone(), Dropped::Output));
        (emissions, lm_states, h)
    }

    /// `gates` (`[batch, max_len, 8 * hidden]`) plus `context`'s share of the LSTM's input
    /// projection, added a bounded number of word slots at a time into `gates` itself: a long
    /// sentence holds its gates once, not beside the share and their sum.
    fn with_context_share(&self, gates: Tensor<3>, context: Tensor<3>) -> Tensor<3> {
        let weight = self.encoder.input.weight.val();
        let [d_input, width] = weight.dims();
        let [batch, time, d_context] = context.dims();
        let rest = weight
            .slice([d_input - d_context..d_input, 0..width])
            .unsqueeze_dim(0);
        let step = (SHARE_SLOTS / batch).max(1);
        if time <= step {
            return gates + context.matmul(rest);
        }
        let mut gates = gates;
        for start in (0..time).step_by(step) {
            let at = start..(start + step).min(time);
            let share = (context.clone())
                .slice([0..batch, at.clone(), 0..d_context])
                .matmul(rest.clone());
            let part = gates.clone().slice([0..batch, at.clone(), 0..width]) + share;
            gates = gates.slice_assign([0..batch, at, 0..width], part);
        }
        gates
    }

    /// What the pretrained encoder gives each word, `[batch, max_len, hidden]`; a batch made
    /// without sub-tokens (which callers refuse before they get here) gives zeros.
    fn pretrained_features(
        &self,
        pretrained: &PretrainedFeatures,
        inputs: &BatchTensors,
    ) -> Tensor<3> {
        let [batch, time] = inputs.words.dims();
        if let Some(states) = &inputs.encoder_states {
            let shape = [batch, time, pretrained.layers(), pretrained.hidden()];
            return pretrained.combine(states.clone().reshape(shape));
        }
        match &inputs.subwords {
            // Inference keeps what each word is given, not its every layer (word_features);
            // training combines the batch's layers at once, its gradients summed as runs made
            // before have them.
            Some(subwords) if !pretrained.mix.val().is_autodiff() => {
                pretrained.word_features(subwords, batch, time)
            }
            Some(subwords) => pretrained.combine(pretrained.word_states(subwords, batch, time)),
            None => Tensor::zeros([batch, time, pretrained.d_output()], &inputs.words.device()),
        }
    }

    /// Each dictionary place id's and feature value id's share of the LSTM's input projection
    /// (its embedding times its label's or column's rows of the input weights): what inference
    /// from cached rows adds for a word's places and values. `None` without either.
    pub fn context_shares(&self) -> Option<ContextShares> {
        if self.dictionary.is_none() && self.features.is_none() {
            return None;
        }
        let weight = self.encoder.input.weight.val();
        let [d_input, width] = weight.dims();
        // (embedding rows, their columns of the input weights), in input order: the
        // dictionary's labels, then the feature columns, last of the input.
        let mut blocks: Vec<(Tensor<2>, usize)> = Vec::new();
        let mut dictionary_labels = 0;
        if let Some(dictionary) = &self.dictionary {
            let [rows, d] = dictionary.weight.dims();
            let count = nertrain_data::place::COUNT;
            dictionary_labels = rows / count;
            for k in 0..dictionary_labels {
                let embedded = dictionary
                    .weight
                    .val()
                    .slice([k * count..(k + 1) * count, 0..d]);
                blocks.push((embedded, d));
            }
        }
        let mut feature_offsets = Vec::new();
        let mut rows_before: usize = blocks.iter().map(|(e, _)| e.dims()[0]).sum();
        for column in self.features.iter().flat_map(|f| &f.columns) {
            let [values, d] = column.weight.dims();
            feature_offsets.push(rows_before);
            rows_before += values;
            blocks.push((column.weight.val(), d));
        }
        let mut first = d_input - blocks.iter().map(|(_, d)| d).sum::<usize>();
        let shares: Vec<Tensor<2>> = blocks
            .into_iter()
            .map(|(embedded, d)| {
                let columns = weight.clone().slice([first..first + d, 0..width]);
                first += d;
                embedded.matmul(columns)
            })
            .collect();
        let mut table = crate::host_values(Tensor::cat(shares, 0));
        let mut in_no_phrase = vec![0.0; if dictionary_labels > 0 { width } else { 0 }];
        let count = nertrain_data::place::COUNT;
        for label in table[..dictionary_labels * count * width].chunks_exact_mut(count * width) {
            let none = usize::from(nertrain_data::place::NONE);
            let none_share = label[none * width..(none + 1) * width].to_vec();
            in_no_phrase
                .iter_mut()
                .zip(&none_share)
                .for_each(|(sum, s)| *sum += s);
            for place in label.chunks_exact_mut(width) {
                place.iter_mut().zip(&none_share).for_each(|(p, s)| *p -= s);
            }
        }
        Some(ContextShares {
            table,
            in_no_phrase,
            dictionary_labels,
            feature_offsets,
        })
    }

    /// Each word's dictionary places embedded and joined, `[batch, max_len, labels * d]`; a
    /// batch without places is in no phrase (the list is silent).
    fn dictionary_features(&self, dictionary: &Embedding, inputs: &BatchTensors) -> Tensor<3> {
        let [batch, time] = inputs.words.dims();
        let [rows, d] = dictionary.weight.dims();
        let labels = rows / nertrain_data::place::COUNT;
        let ids = inputs.dictionary.clone().unwrap_or_else(|| {
            let none: Vec<i64> = (0..labels)
                .map(|k| (k * nertrain_data::place::COUNT) as i64)
                .collect();
            Tensor::from_data(
                TensorData::new(none.repeat(batch * time), [batch, time * labels]),
                &dictionary.weight.device(),
            )
        });
        dictionary.forward(ids).reshape([batch, time, labels * d])
    }

    /// Sets the embedding of every vocabulary word that has a pretrained vector (looked up as the
    /// vocabulary holds it, then lowercased); returns how many did.
    pub fn with_word_vectors(mut self, words: &Vocab, vectors: &Vectors) -> (Self, usize) {
        let [n, dim] = self.words.weight.dims();
        assert_eq!(dim, vectors.dim, "embedding and vector dimensions agree");
        let device = self.words.weight.device();
        let mut weights: Vec<f32> = self.words.weight.val().into_data().iter::<f32>().collect();
        let mut found = 0;
        for (id, word) in words.items().iter().enumerate().skip(2) {
            if let Some(vector) = vectors.get(word) {
                weights[id * dim..(id + 1) * dim].copy_from_slice(vector);
                found += 1;
            }
        }
        let id = self.words.weight.id;
        self.words.weight = Param::from_tensor(Tensor::from_data(
            TensorData::new(weights, [n, dim]),
            &device,
        ));
        self.words.weight.id = id;
        (self, found)
    }

    /// The CRF negative log-likelihood of the batch's gold tags (of every path through the tags
    /// allowed, where some tokens are unlabelled), plus the weighted language-model losses when
    /// there is a character language model. Where the batch has teachers' marginals, the CRF's
    /// part is `(1 − teacher_weight) · NLL + teacher_weight · ` the loss against them
    /// ([`crate::Potentials::distillation_loss`]).
    ///
    /// `word_vectors` are the batch's word embeddings, `[batch, max_len, word_dim]`: training
    /// looks them up in its own row-sparse copy of [`Network::words`], so that a step costs
    /// nothing for the rows it does not touch.
    pub fn loss(
        &self,
        inputs: &BatchTensors,
        word_vectors: Tensor<3>,
        reduction: Reduction,
        constraints: Option<&Constraints>,
        teacher_weight: f64,
    ) -> Result<Tensor<1>, CrfError> {
        let Some(tags) = inputs.tags.clone() else {
            return Err(CrfError::Shape {
                what: "no gold tags",
                expected: inputs.mask.dims().to_vec(),
                found: Vec::new(),
            });
        };
        let drop = |x: Tensor<3>, _: Dropped| self.dropout.forward(x);
        let (emissions, lm_states, _) =
            self.encode(inputs, WordInput::Vectors(word_vectors), &drop);
        let potentials = self.crf.potentials(constraints);
        let (mask, lengths) = (inputs.mask.clone(), &inputs.lengths);
        let gold = |emissions: Tensor<3>| match inputs.allowed.clone() {
            Some(allowed) => {
                potentials.partial_nll(emissions, allowed, mask.clone(), lengths, reduction)
            }
            None => potentials.nll(emissions, tags.clone(), mask.clone(), lengths, reduction),
        };
        let distilled = |emissions: Tensor<3>, teacher| {
            potentials.distillation_loss(emissions, teacher, mask.clone(), lengths, reduction)
        };
        let crf_nll = match &inputs.teacher {
            Some(teacher) if teacher_weight >= 1.0 => distilled(emissions, teacher)?,
            Some(teacher) if teacher_weight > 0.0 => {
                gold(emissions.clone())? * (1.0 - teacher_weight)
                    + distilled(emissions, teacher)? * teacher_weight
            }
            _ => gold(emissions)?,
        };
        Ok(match (&self.char_lm, lm_states) {
            (Some(char_lm), Some(states)) => {
                let lm_nll = char_lm.nll(states, inputs.words.clone(), inputs.mask.clone());
                crf_nll + reduction.apply(lm_nll, &inputs.lengths) * self.lm_weight
            }
            _ => crf_nll,
        })
    }
}
