//! Training and running taggers: the experiment configuration, the fit loop (SGD with momentum or
//! Adam, global-norm clipping, learning-rate decay, early stopping on dev span F1, checkpoints and
//! resume), the on-disk model directory, and prediction with a trained model.

mod backend;
mod bench;
mod clip;
pub mod config;
mod curves;
mod fit;
mod model_dir;
mod predict;
mod progress;
mod sparse_adam;
mod sparse_words;
mod step;

pub use backend::Backend;
pub use bench::{BenchOptions, bench};
pub use config::{ConfigError, ConfigOrigin, CrfOptions, DataConfig, Experiment, TrainConfig};
pub use fit::{EpochMetrics, FitOptions, FitOutcome, fit, read_tagged};
pub use model_dir::{ModelDir, ModelMeta, write_atomic};
pub use predict::{
    CalibrationBin, PredictOptions, Prediction, Predictor, calibration, entity_types, score_corpus,
};
pub use step::Optimizer;

/// Any failure of training or running a model, as a message meant for the user.
pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T> = std::result::Result<T, Error>;
