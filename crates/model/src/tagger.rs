use burn::config::Config;
use burn::module::Module;
use burn::module::Param;
use burn::nn::{Dropout, DropoutConfig, Embedding, Linear, LinearConfig};
use burn::tensor::{Device, Tensor, TensorData};
use nertrain_data::{Vectors, Vocab};
use serde::{Deserialize, Serialize};

use crate::{
    BatchTensors, BiLstm, BiLstmConfig, CharCnn, CharCnnConfig, CharLstm, CharLstmConfig,
    Constraints, Crf, CrfConfig, Reduction, uniform_embedding,
};

/// Which character features each word gets besides its embedding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CharFeatures {
    None,
    /// A convolution over the word's characters, max-pooled (Ma & Hovy).
    Cnn,
    /// A bidirectional LSTM over the word's characters, its two final states (Lample et al.).
    Lstm,
}

/// The architecture's hyper-parameters; vocabulary sizes come from the data ([`VocabSizes`]).
#[derive(Config, Debug)]
pub struct TaggerConfig {
    #[config(default = 100)]
    pub word_dim: usize,
    #[config(default = "CharFeatures::Cnn")]
    pub char_features: CharFeatures,
    #[config(default = 30)]
    pub char_dim: usize,
    /// Convolution filters of the char-CNN.
    #[config(default = 50)]
    pub char_filters: usize,
    /// Hidden size of each direction of the char-LSTM.
    #[config(default = 25)]
    pub char_hidden: usize,
    /// Hidden size of each LSTM direction.
    #[config(default = 100)]
    pub hidden: usize,
    /// Dropout on the LSTM's input and output.
    #[config(default = 0.5)]
    pub dropout: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VocabSizes {
    pub words: usize,
    pub chars: usize,
    pub tags: usize,
}

impl From<&nertrain_data::Vocabularies> for VocabSizes {
    fn from(vocab: &nertrain_data::Vocabularies) -> Self {
        Self {
            words: vocab.words.len(),
            chars: vocab.chars.len(),
            tags: vocab.tags.len(),
        }
    }
}

impl TaggerConfig {
    pub fn init(&self, sizes: VocabSizes, device: &Device) -> Tagger {
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
        let d_input = self.word_dim
            + chars.as_ref().map_or(0, CharCnn::d_output)
            + char_lstm.as_ref().map_or(0, CharLstm::d_output);
        Tagger {
            words: uniform_embedding(sizes.words, self.word_dim, device),
            chars,
            char_lstm,
            encoder: BiLstmConfig::new(d_input, self.hidden).init(device),
            dropout: DropoutConfig::new(self.dropout).init(),
            emissions: LinearConfig::new(2 * self.hidden, sizes.tags).init(device),
            crf: CrfConfig::new(sizes.tags).init(device),
        }
    }
}

/// Embeddings (+ character features) → BiLSTM → linear emissions → CRF.
#[derive(Module, Debug)]
pub struct Tagger {
    pub words: Embedding,
    /// The char-CNN, when `char_features = "cnn"` (the field keeps its first name so that saved
    /// models still load).
    pub chars: Option<CharCnn>,
    pub char_lstm: Option<CharLstm>,
    pub encoder: BiLstm,
    pub dropout: Dropout,
    pub emissions: Linear,
    pub crf: Crf,
}

impl Tagger {
    /// Per-token tag scores, `[batch, max_len, tags]`.
    pub fn emissions(&self, inputs: &BatchTensors) -> Tensor<3> {
        let [batch, time] = inputs.words.dims();
        let mut x = self.words.forward(inputs.words.clone());
        if let Some(chars) = &self.chars {
            let features = chars.forward(inputs.chars.clone());
            let d = features.dims()[1];
            x = Tensor::cat(vec![x, features.reshape([batch, time, d])], 2);
        }
        if let Some(char_lstm) = &self.char_lstm {
            let features = char_lstm.forward(inputs.chars.clone(), &inputs.char_lengths);
            let d = features.dims()[1];
            x = Tensor::cat(vec![x, features.reshape([batch, time, d])], 2);
        }
        let h = self
            .encoder
            .forward(self.dropout.forward(x), &inputs.lengths);
        self.emissions.forward(self.dropout.forward(h))
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
        self.words.weight = Param::from_tensor(Tensor::from_data(
            TensorData::new(weights, [n, dim]),
            &device,
        ));
        (self, found)
    }

    /// The CRF negative log-likelihood of the batch's gold tags.
    pub fn loss(
        &self,
        inputs: &BatchTensors,
        reduction: Reduction,
        constraints: Option<&Constraints>,
    ) -> Tensor<1> {
        let tags = inputs.tags.clone().expect("a training batch carries tags");
        self.crf.potentials(constraints).nll(
            self.emissions(inputs),
            tags,
            inputs.mask.clone(),
            &inputs.lengths,
            reduction,
        )
    }
}
