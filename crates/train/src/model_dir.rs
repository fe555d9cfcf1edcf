//! The model directory: everything needed to run a trained tagger, and the training run's record.
//!
//! ```text
//! model.json     format version, architecture, vocabulary sizes, tag schemes, columns
//! vocab.json     word, character and tag vocabularies
//! model.bpk      weights of the best epoch (Burn's burnpack format)
//! config.toml    the resolved experiment
//! metrics.jsonl  one JSON object per epoch
//! curves.svg     loss, dev F1 and learning rate per epoch
//! dev.json       the best epoch's dev scores, overall and per type
//! checkpoint/    last epoch's weights, optimiser state and loop state, for `fit --resume`
//! ```
//! Every file is written to a temporary name and renamed into place, so a crash leaves either
//! the old file or the new one, never a torn one.

use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::tensor::Device;
use nertrain_data::{ColumnSpec, TagScheme, Vocabularies};
use nertrain_model::{Tagger, TaggerConfig, VocabSizes};
use serde::{Deserialize, Serialize};

use crate::config::merge;
use crate::{CrfOptions, Result};

/// Bumped whenever the directory's layout or a file's meaning changes.
pub const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelMeta {
    pub format: u32,
    pub nertrain_version: String,
    pub model: TaggerConfig,
    pub crf: CrfOptions,
    pub sizes: VocabSizes,
    /// The scheme of the training files; predictions are written in it.
    pub file_scheme: TagScheme,
    /// The scheme the model's tags are in.
    pub train_scheme: TagScheme,
    pub columns: ColumnSpec,
    pub max_word_len: usize,
}

#[derive(Debug, Clone)]
pub struct ModelDir {
    pub path: PathBuf,
}

impl ModelDir {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    pub fn meta_file(&self) -> PathBuf {
        self.path.join("model.json")
    }
    pub fn vocab_file(&self) -> PathBuf {
        self.path.join("vocab.json")
    }
    pub fn weights_file(&self) -> PathBuf {
        self.path.join("model.bpk")
    }
    pub fn config_file(&self) -> PathBuf {
        self.path.join("config.toml")
    }
    pub fn metrics_file(&self) -> PathBuf {
        self.path.join("metrics.jsonl")
    }
    pub fn dev_report_file(&self) -> PathBuf {
        self.path.join("dev.json")
    }
    pub fn checkpoint_dir(&self) -> PathBuf {
        self.path.join("checkpoint")
    }

    /// The epochs recorded so far.
    pub fn read_metrics(&self) -> Result<Vec<crate::EpochMetrics>> {
        let path = self.metrics_file();
        let text = std::fs::read_to_string(&path).map_err(|e| missing_or(&self.path, &path, e))?;
        text.lines()
            .enumerate()
            .map(|(i, line)| {
                serde_json::from_str(line).map_err(|e| {
                    format!("{}:{}: not an epoch record: {e}", path.display(), i + 1).into()
                })
            })
            .collect()
    }

    /// Deletes a previous run here; refuses a directory that is not one.
    pub fn remove(&self) -> Result<()> {
        if !self.path.exists() {
            return Ok(());
        }
        if !self.meta_file().exists() {
            return Err(format!(
                "{}: not a nertrain run directory; not deleting it",
                self.path.display()
            )
            .into());
        }
        std::fs::remove_dir_all(&self.path)
            .map_err(|e| format!("{}: cannot delete: {e}", self.path.display()).into())
    }

    pub fn write_description(
        &self,
        meta: &ModelMeta,
        vocab: &Vocabularies,
        config_toml: &str,
    ) -> Result<()> {
        std::fs::create_dir_all(&self.path)
            .map_err(|e| format!("{}: cannot create: {e}", self.path.display()))?;
        write_atomic(
            &self.meta_file(),
            serde_json::to_string_pretty(meta)?.as_bytes(),
        )?;
        write_atomic(&self.vocab_file(), serde_json::to_string(vocab)?.as_bytes())?;
        write_atomic(&self.config_file(), config_toml.as_bytes())
    }

    pub fn save_weights(&self, model: &Tagger) -> Result<()> {
        save_module(model, &self.weights_file())
    }

    pub fn read_meta(&self) -> Result<ModelMeta> {
        let path = self.meta_file();
        let text = std::fs::read_to_string(&path).map_err(|e| missing_or(&self.path, &path, e))?;
        let not_a_model = |e: serde_json::Error| {
            format!("{}: not a nertrain model description: {e}", path.display())
        };
        let mut given: serde_json::Value = serde_json::from_str(&text).map_err(not_a_model)?;
        // Settings added after a model was saved take their defaults, which is what the model was
        // trained with.
        for (section, defaults) in [
            ("model", serde_json::to_value(TaggerConfig::new())?),
            ("crf", serde_json::to_value(CrfOptions::new())?),
        ] {
            if let Some(stored) = given.get_mut(section) {
                let mut filled = defaults;
                merge(&mut filled, stored.take());
                *stored = filled;
            }
        }
        let meta: ModelMeta = serde_json::from_value(given).map_err(not_a_model)?;
        if meta.format != FORMAT_VERSION {
            return Err(format!(
                "{}: model format {} but this nertrain reads format {FORMAT_VERSION}",
                path.display(),
                meta.format
            )
            .into());
        }
        Ok(meta)
    }

    pub fn read_vocab(&self, meta: &ModelMeta) -> Result<Vocabularies> {
        let path = self.vocab_file();
        let text = std::fs::read_to_string(&path).map_err(|e| missing_or(&self.path, &path, e))?;
        let vocab: Vocabularies = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a vocabulary file: {e}", path.display()))?;
        // The language model's share of the words is the model's, not the vocabulary's.
        let sizes = VocabSizes {
            lm_words: meta.sizes.lm_words.min(vocab.words.len()),
            ..VocabSizes::from(&vocab)
        };
        if sizes != meta.sizes {
            return Err(format!(
                "{}: vocabulary sizes {sizes:?} do not match model.json's {:?}",
                path.display(),
                meta.sizes
            )
            .into());
        }
        Ok(vocab)
    }

    /// The best model, its description and vocabularies, checked against each other.
    pub fn load(&self, device: &Device) -> Result<(ModelMeta, Vocabularies, Tagger)> {
        let meta = self.read_meta()?;
        let vocab = self.read_vocab(&meta)?;
        let weights = self.weights_file();
        if !weights.exists() {
            return Err(format!(
                "{}: no weights yet (model.bpk is written when the first epoch ends)",
                self.path.display()
            )
            .into());
        }
        let model = load_module(meta.model.init(meta.sizes, device), &weights)?;
        Ok((meta, vocab, model))
    }
}

fn missing_or(dir: &Path, file: &Path, e: std::io::Error) -> crate::Error {
    if e.kind() == std::io::ErrorKind::NotFound {
        if dir.is_dir() {
            format!(
                "{}: not a nertrain model directory ({} is missing)",
                dir.display(),
                file.display()
            )
            .into()
        } else {
            format!("{}: no such model directory", dir.display()).into()
        }
    } else {
        format!("{}: cannot read: {e}", file.display()).into()
    }
}

/// Writes `bytes` to a sibling temporary file, syncs it, and renames it over `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let partial = partial_path(path);
    let result = (|| {
        let mut file = std::fs::File::create(&partial)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&partial, path)
    })();
    result.map_err(|e| format!("{}: cannot write: {e}", path.display()).into())
}

fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    path.with_file_name(name)
}

/// Saves a module's weights atomically.
pub fn save_module<M: Module>(module: &M, path: &Path) -> Result<()> {
    let partial = partial_path(path);
    let _ = std::fs::remove_file(&partial);
    module
        .clone()
        .save_file(&partial)
        .map_err(|e| format!("{}: cannot save weights: {e:?}", path.display()))?;
    std::fs::File::open(&partial)
        .and_then(|f| f.sync_all())
        .map_err(|e| format!("{}: {e}", partial.display()))?;
    std::fs::rename(&partial, path)
        .map_err(|e| format!("{}: cannot write: {e}", path.display()).into())
}

/// Loads weights into a module of the right architecture; a file for another shape is an error.
pub fn load_module<M: Module>(module: M, path: &Path) -> Result<M> {
    module
        .try_load_file(path)
        .map_err(|e| format!("{}: weights do not fit this model: {e:?}", path.display()).into())
}
