//! Character features of each word: embedded characters read by a bidirectional LSTM, the last
//! forward state and the last backward state concatenated (Lample et al., 2016). Each word is
//! read within its own length, so padding characters never reach its features.

use burn::config::Config;
use burn::module::Module;
use burn::nn::Embedding;
use burn::tensor::{Int, Tensor, TensorData};

use crate::{BiLstm, BiLstmConfig, uniform_embedding};

/// The char-LSTM's sizes.
#[derive(Config, Debug)]
pub struct CharLstmConfig {
    /// Characters in the vocabulary.
    pub n_chars: usize,
    /// Size of a character's embedding.
    #[config(default = 25)]
    pub char_dim: usize,
    /// Hidden size of each direction; a word's features have twice this.
    #[config(default = 25)]
    pub hidden: usize,
}

impl CharLstmConfig {
    /// A char-LSTM with fresh weights.
    pub fn init(&self, device: &burn::tensor::Device) -> CharLstm {
        CharLstm {
            embedding: uniform_embedding(self.n_chars, self.char_dim, device),
            lstm: BiLstmConfig::new(self.char_dim, self.hidden).init(device),
        }
    }
}

/// A bidirectional LSTM over a word's characters, its two final states (Lample et al.): a feature vector per word.
#[derive(Module, Debug)]
pub struct CharLstm {
    /// Character embeddings.
    pub embedding: Embedding,
    /// The LSTM over them.
    pub lstm: BiLstm,
}

impl CharLstm {
    /// Size of a word's features.
    pub fn d_output(&self) -> usize {
        2 * self.lstm.d_hidden()
    }

    /// `chars`: `[words, max_word_len]` ids, 0 for padding; `lengths`: characters per word →
    /// `[words, 2 * hidden]`, zeros for words of no characters.
    pub fn forward(&self, chars: Tensor<2, Int>, lengths: &[usize]) -> Tensor<2> {
        let [words, word_len] = chars.dims();
        let h = self.lstm.d_hidden();
        let device = chars.device();
        let states = self
            .lstm
            .forward(self.embedding.forward(chars), lengths)
            .reshape([words * word_len, 2 * h]);
        // The forward direction has read the word at its last character, the backward one at its
        // first. An empty word reads row 0 of its slot and is zeroed below.
        let rows = |last: bool| {
            let index: Vec<i64> = lengths
                .iter()
                .enumerate()
                .map(|(w, &len)| (w * word_len + if last { len.max(1) - 1 } else { 0 }) as i64)
                .collect();
            Tensor::<1, Int>::from_data(TensorData::new(index, [words]), &device)
        };
        let forward = states
            .clone()
            .slice([0..words * word_len, 0..h])
            .select(0, rows(true));
        let backward = states
            .slice([0..words * word_len, h..2 * h])
            .select(0, rows(false));
        let present: Vec<f32> = lengths.iter().map(|&len| f32::from(len > 0)).collect();
        let present = Tensor::<1>::from_data(TensorData::new(present, [words]), &device);
        Tensor::cat(vec![forward, backward], 1) * present.unsqueeze_dim(1)
    }
}
