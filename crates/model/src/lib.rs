//! The network: word embeddings and character features → a length-aware bidirectional LSTM →
//! linear emissions → a linear-chain CRF. Burn modules with `#[derive(Config)]` configurations.
//!
//! The CRF maths lives in [`crf`] and nowhere else; the model files (description, vocabularies,
//! weights) are read in [`files`] and nowhere else.

#![warn(missing_docs)]

mod backend;
mod bilstm;
mod char_cnn;
mod char_lm;
mod char_lstm;
pub mod crf;
pub mod encoder;
mod error;
pub mod files;
mod grow;
mod host;
mod inputs;
mod network;
pub mod recurrence;
mod vectorize;
mod word_gates;

pub use backend::{Backend, BackendError};
pub use bilstm::{BiLstm, BiLstmConfig};
pub use char_cnn::{CharCnn, CharCnnConfig};
pub use char_lm::{CharLm, CharLmConfig, Highway, WordStates};
pub use char_lstm::{CharLstm, CharLstmConfig};
pub use crf::{Constraints, Crf, CrfConfig, CrfError, Marginals, Potentials, Reduction};
pub use error::FileError;
pub use files::{
    ChosenThreshold, CrfOptions, DataSummary, Distillation, DocumentContext, FORMAT_VERSION,
    FileSummary, LabelThreshold, ModelFiles, ModelMeta, RecordedScores, StartedFrom,
    StoredThresholds, TeacherSummary,
};
pub use grow::{GrowError, first_non_finite, grown_from, with_weights_of};
pub use host::sum_of_squares;
pub use inputs::BatchTensors;
pub use network::{
    Architecture, CharFeatures, ContextShares, Dropped, FeatureEmbeddings, Network, NetworkConfig,
    VocabSizes,
};
pub use word_gates::{FormInputs, WordGates};

/// A float tensor's values on the host, in one copy (`TensorData::iter` converts each value
/// through a boxed iterator, which shows in tagging time when the word cache's rows go through it).
pub fn host_values<const D: usize>(tensor: burn::tensor::Tensor<D>) -> Vec<f32> {
    let data = tensor.into_data();
    match data.as_slice::<f32>() {
        Ok(values) => values.to_vec(),
        // Stored in another float type.
        Err(_) => data.iter::<f32>().collect(),
    }
}

/// An embedding table initialised uniformly in ±√(3 / dim), so each entry has variance 1 / dim
/// (Lample et al.; Ma & Hovy).
fn uniform_embedding(
    count: usize,
    dim: usize,
    device: &burn::tensor::Device,
) -> burn::nn::Embedding {
    let bound = (3.0 / dim as f64).sqrt();
    burn::nn::EmbeddingConfig::new(count, dim)
        .with_initializer(burn::nn::Initializer::Uniform {
            min: -bound,
            max: bound,
        })
        .init(device)
}
