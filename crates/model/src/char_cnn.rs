//! Character features of each word: embedded characters, a 1-D convolution, max over the word
//! (Ma & Hovy, 2016). Padding characters are masked out, so a word's features do not depend on
//! the other words of its batch.

use burn::config::Config;
use burn::module::Module;
use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::nn::{Embedding, PaddingConfig1d};
use burn::tensor::{Int, Tensor};

use crate::uniform_embedding;

/// The char-CNN's sizes.
#[derive(Config, Debug)]
pub struct CharCnnConfig {
    /// Characters in the vocabulary.
    pub n_chars: usize,
    /// Size of a character's embedding.
    #[config(default = 30)]
    pub char_dim: usize,
    /// Convolution filters: the size of a word's features.
    #[config(default = 50)]
    pub filters: usize,
    /// Characters each filter sees.
    #[config(default = 3)]
    pub kernel: usize,
}

impl CharCnnConfig {
    /// A char-CNN with fresh weights.
    pub fn init(&self, device: &burn::tensor::Device) -> CharCnn {
        let pad = self.kernel / 2;
        CharCnn {
            embedding: uniform_embedding(self.n_chars, self.char_dim, device),
            conv: Conv1dConfig::new(self.char_dim, self.filters, self.kernel)
                .with_padding(PaddingConfig1d::Explicit(pad, self.kernel - 1 - pad))
                .init(device),
        }
    }
}

/// A convolution over a word's characters, max-pooled (Ma & Hovy): a feature vector per word.
#[derive(Module, Debug)]
pub struct CharCnn {
    /// Character embeddings.
    pub embedding: Embedding,
    /// The convolution.
    pub conv: Conv1d,
}

impl CharCnn {
    /// Size of a word's features.
    pub fn d_output(&self) -> usize {
        self.conv.weight.dims()[0]
    }

    /// `chars`: `[words, max_word_len]` ids, 0 for padding → `[words, filters]`.
    pub fn forward(&self, chars: Tensor<2, Int>) -> Tensor<2> {
        let [words, _] = chars.dims();
        let present = chars.clone().greater_elem(0).float(); // [words, len]
        let embedded = self.embedding.forward(chars) * present.clone().unsqueeze_dim(2);
        let features = self.conv.forward(embedded.swap_dims(1, 2)); // [words, filters, len]
        // Padding positions can never win the max; a word slot with no characters gets zeros.
        let blocked = (present.clone().neg() + 1.0).unsqueeze_dim::<3>(1) * -1e4;
        let pooled = (features + blocked)
            .max_dim(2)
            .reshape([words, self.d_output()]);
        let has_chars = present.max_dim(1);
        pooled * has_chars
    }
}
