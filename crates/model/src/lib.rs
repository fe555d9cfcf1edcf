//! The network: word embeddings and character features → a length-aware bidirectional LSTM →
//! linear emissions → a linear-chain CRF. Burn modules with `#[derive(Config)]` configurations.
//!
//! The CRF maths lives in [`crf`] and nowhere else.

mod bilstm;
mod char_cnn;
mod char_lstm;
pub mod crf;
mod inputs;
pub mod recurrence;
mod tagger;

pub use bilstm::{BiLstm, BiLstmConfig};
pub use char_cnn::{CharCnn, CharCnnConfig};
pub use char_lstm::{CharLstm, CharLstmConfig};
pub use crf::{Constraints, Crf, CrfConfig, Marginals, Potentials, Reduction};
pub use inputs::BatchTensors;
pub use tagger::{CharFeatures, Tagger, TaggerConfig, VocabSizes};
