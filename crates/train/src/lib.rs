//! Training and running taggers: the experiment configuration, the fit loop (SGD with momentum or
//! Adam, global-norm clipping, learning-rate decay, early stopping on dev span F1, checkpoints and
//! resume), the on-disk model directory, and prediction with a trained model.

mod backend;
mod bench;
pub mod config;
mod curves;
mod error;
mod fit;
mod io;
mod model_dir;
mod optim;
mod predict;
mod step;

pub use backend::Backend;
pub use bench::{BenchOptions, bench};
pub use config::{
    ConfigError, ConfigOrigin, CrfOptions, DataConfig, Experiment, Optimizer, TrainConfig,
};
pub use error::Error;
pub use fit::{EpochMetrics, FitEvent, FitOptions, FitOutcome, fit, parse_tagged, read_tagged};
pub use io::{write_atomic, write_output};
pub use model_dir::{ModelDir, ModelMeta};
pub use predict::{
    CalibrationBin, PredictOptions, Prediction, Predictor, RankedPath, calibration, entity_types,
    score_corpus,
};

pub type Result<T> = std::result::Result<T, Error>;
