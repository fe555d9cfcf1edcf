//! Training taggers: the experiment configuration, the fit loop (SGD with momentum or Adam,
//! global-norm clipping, learning-rate decay, early stopping on dev span F1, checkpoints and exact
//! resume, training on train and dev), and the run directory it writes. Dev and test sets are
//! scored through the inference core, `nertrain-tagger`, as `nertrain eval` scores them.

#![warn(missing_docs)]

mod bench;
mod card;
pub mod config;
mod curves;
mod error;
mod fit;
mod io;
mod job;
mod model_dir;
mod optim;
mod step;

pub use bench::{BenchOptions, BenchResult, bench};
pub use card::{CARD_MARK, model_card};
pub use config::{ConfigError, ConfigOrigin, DataConfig, Experiment, Optimizer, TrainConfig};
pub use error::Error;
pub use fit::{EpochMetrics, FitEvent, FitOptions, FitOutcome, fit};
pub use io::write_atomic;
pub use job::{JobEnd, end_job, record_job_event};
pub use model_dir::ModelDir;
pub use nertrain_model::Backend;

/// A result of this crate.
pub type Result<T> = std::result::Result<T, Error>;
