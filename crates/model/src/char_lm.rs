//! LM-LSTM-CRF's character language model (Liu et al., 2018). A bidirectional LSTM reads each
//! sentence's characters as one sequence, words separated by a separator character. A word's
//! features are the forward state at the separator after it and the backward state at the
//! separator before it, through a highway layer. During training, the same states, through their
//! own highway layers, predict the next word (forward) and the previous word (backward): the
//! language-model losses that teach the character LSTM from the corpus itself. The prediction
//! heads are used only in training.

use burn::config::Config;
use burn::module::Module;
use burn::nn::{Dropout, DropoutConfig, Embedding, Linear, LinearConfig};
use burn::tensor::activation::{log_softmax, relu, sigmoid};
use burn::tensor::{Device, Int, Tensor};

use crate::{BatchTensors, BiLstm, BiLstmConfig, uniform_embedding};

/// `gate · relu(transform(x)) + (1 − gate) · x`, with `gate = σ(W x + b)` (Srivastava et al.).
#[derive(Module, Debug)]
pub struct Highway {
    /// The transformation.
    pub transform: Linear,
    /// The gate.
    pub gate: Linear,
}

impl Highway {
    /// A highway layer of `d` in and out.
    pub fn new(d: usize, device: &Device) -> Self {
        Self {
            transform: LinearConfig::new(d, d).init(device),
            gate: LinearConfig::new(d, d).init(device),
        }
    }

    /// The layer applied to the last dimension of `x`.
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        let gate = sigmoid(self.gate.forward(x.clone()));
        let transformed = relu(self.transform.forward(x.clone()));
        x.clone() + gate * (transformed - x)
    }
}

/// The character language model's sizes.
#[derive(Config, Debug)]
pub struct CharLmConfig {
    /// Characters in the vocabulary.
    pub n_chars: usize,
    /// The heads predict word ids below this; every other word is predicted as `<unk>`, and
    /// `<pad>` stands for the sentence boundary.
    pub lm_words: usize,
    /// Size of a character's embedding.
    #[config(default = 30)]
    pub char_dim: usize,
    /// Hidden size of each direction; a word's features have twice this.
    #[config(default = 100)]
    pub hidden: usize,
    /// Dropout on the LSTM's states before any highway.
    #[config(default = 0.5)]
    pub dropout: f64,
}

impl CharLmConfig {
    /// A character language model with fresh weights.
    pub fn init(&self, device: &Device) -> CharLm {
        let h = self.hidden;
        CharLm {
            embedding: uniform_embedding(self.n_chars, self.char_dim, device),
            lstm: BiLstmConfig::new(self.char_dim, h).init(device),
            to_features: Highway::new(2 * h, device),
            to_next_word: Highway::new(h, device),
            to_previous_word: Highway::new(h, device),
            next_word: LinearConfig::new(h, self.lm_words).init(device),
            previous_word: LinearConfig::new(h, self.lm_words).init(device),
            dropout: DropoutConfig::new(self.dropout).init(),
        }
    }
}

/// A character-level language model over whole sentences (LM-LSTM-CRF, Liu et al.): its states at word boundaries are each word's features, and its heads predict the next and previous words.
#[derive(Module, Debug)]
pub struct CharLm {
    /// Character embeddings.
    pub embedding: Embedding,
    /// The LSTM over the sentence's characters.
    pub lstm: BiLstm,
    /// From the LSTM's states to the tagger's word features.
    pub to_features: Highway,
    /// From the forward state to the next word's prediction.
    pub to_next_word: Highway,
    /// From the backward state to the previous word's prediction.
    pub to_previous_word: Highway,
    /// The next word's scores over the predicted words.
    pub next_word: Linear,
    /// The previous word's scores over the predicted words.
    pub previous_word: Linear,
    /// Dropout on the LSTM's states.
    pub dropout: Dropout,
}

/// The character LSTM's states at each word slot, `[batch, max_len, hidden]` per direction.
#[derive(Debug, Clone)]
pub struct WordStates {
    /// At the separator after the word: the sentence read up to and including it.
    pub forward: Tensor<3>,
    /// At the separator before the word: the sentence read from its end back to the word.
    pub backward: Tensor<3>,
}

impl CharLm {
    /// Size of a word's features.
    pub fn d_output(&self) -> usize {
        2 * self.lstm.d_hidden()
    }

    /// Words the heads predict.
    pub fn lm_words(&self) -> usize {
        self.next_word.weight.dims()[1]
    }

    /// The LSTM's states at the separators around each word.
    pub fn word_states(&self, inputs: &BatchTensors) -> WordStates {
        let states = self.lstm.forward(
            self.embedding.forward(inputs.sentence_chars.clone()),
            &inputs.sentence_char_lengths,
        );
        let states = self.dropout.forward(states);
        let [batch, chars, _] = states.dims();
        let [_, words] = inputs.word_ends.dims();
        let h = self.lstm.d_hidden();
        let at = |positions: &Tensor<2, Int>, direction: usize| {
            let index = positions.clone().unsqueeze_dim::<3>(2).repeat_dim(2, h);
            debug_assert_eq!(index.dims(), [batch, words, h]);
            states
                .clone()
                .slice([0..batch, 0..chars, direction * h..(direction + 1) * h])
                .gather(1, index)
        };
        WordStates {
            forward: at(&inputs.word_ends, 0),
            backward: at(&inputs.word_starts, 1),
        }
    }

    /// Each word's features for the tagger, `[batch, max_len, 2 * hidden]`.
    pub fn features(&self, states: &WordStates) -> Tensor<3> {
        self.to_features.forward(Tensor::cat(
            vec![states.forward.clone(), states.backward.clone()],
            2,
        ))
    }

    /// Negative log-likelihood of the next word plus that of the previous word, averaged over each
    /// sentence's words, `[batch]`; `words`: `[batch, max_len]` word ids, padded with `<pad>`.
    /// Averaged, as in Liu et al., so that the language model's share of a sentence's loss does
    /// not grow with its length and swamp the CRF's (whose gradient it shares, clipping included).
    pub fn nll(&self, states: WordStates, words: Tensor<2, Int>, mask: Tensor<2>) -> Tensor<1> {
        let [batch, time] = words.dims();
        let boundary = Tensor::<2, Int>::zeros([batch, 1], &words.device());
        let (next, previous) = if time == 1 {
            (boundary.clone(), boundary)
        } else {
            (
                Tensor::cat(
                    vec![words.clone().slice([0..batch, 1..time]), boundary.clone()],
                    1,
                ),
                Tensor::cat(vec![boundary, words.slice([0..batch, 0..time - 1])], 1),
            )
        };
        let lm_words = self.lm_words();
        let head_nll = |logits: Tensor<3>, targets: Tensor<2, Int>| {
            let rare = targets.clone().greater_equal_elem(lm_words as i64);
            let targets = targets.mask_fill(rare, nertrain_data::Vocab::UNK_ID as i64);
            let log_p = log_softmax(logits, 2).gather(2, targets.unsqueeze_dim(2));
            -(log_p.squeeze_dim::<2>(2) * mask.clone()).sum_dim(1)
        };
        let next_nll = head_nll(
            self.next_word
                .forward(self.to_next_word.forward(states.forward)),
            next,
        );
        let previous_nll = head_nll(
            self.previous_word
                .forward(self.to_previous_word.forward(states.backward)),
            previous,
        );
        let words_per_sentence = mask.sum_dim(1);
        ((next_nll + previous_nll) / words_per_sentence).squeeze_dim(1)
    }
}
