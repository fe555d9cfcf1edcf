//! The model files: a trained tagger on disk, and the one owner of their format, which reads and
//! writes them. Training writes them here into its run directory (which adds its checkpoints and
//! metrics around them); everything that runs a model (tagging, serving, evaluation, a resumed
//! run) reads them here. Each file is written beside its place, synced, and renamed into it.
//!
//! ```text
//! model.json  format version, architecture, vocabulary sizes, tag schemes, columns, and how raw
//!             text is cut; a directory is a model (or a run) when it holds one
//! vocab.json  word, character and tag vocabularies
//! model.bpk   the weights (Burn's burnpack format)
//! dev.json    the scores the run recorded for these weights on dev, with their epoch
//! test.json   and on the test set, when the run had one
//! dictionary.json  the dictionaries' labels and entries, when the model reads dictionary
//!             features; model.json holds its SHA-256, so that every interface that loads the
//!             model computes the same features from the same entries
//! thresholds.json  per-label confidence thresholds chosen on a gold file (`eval --thresholds
//!             --store`), when a user chose them; deleted when new weights are published
//! subwords.json  the pretrained encoder's tokenizer (its checkpoint's `tokenizer.json`), when
//!             the model has an encoder; model.json holds the encoder's shape, model.bpk its
//!             weights, so the model needs nothing of the checkpoint
//! ```
//!
//! Every size a description gives is checked before anything of that size is allocated, and the
//! weight file's size against the description before the model is built: a changed or damaged
//! file is an error naming it, never gigabytes allocated or a panic in a layer.

mod json;
mod limits;
mod schema;
mod weights;

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use nertrain_data::{Dictionary, MAX_TOKENIZER_BYTES, SubwordTokenizer, Tokenizer, Vocabularies};
use sha2::{Digest, Sha256};

use crate::{FileError, Network, NetworkConfig, VocabSizes};

use json::dictionary_json;
pub use json::{merge_json, scores_json};
pub use limits::{MAX_LAYER, OutOfRange, check_config};
use limits::{check_sizes, least_values};
pub use schema::*;
use weights::{hex, sha256_hex};
pub use weights::{load_weights, save_weights};

const META: &str = "model.json";

const VOCAB: &str = "vocab.json";

const WEIGHTS: &str = "model.bpk";

const DEV_SCORES: &str = "dev.json";

const TEST_SCORES: &str = "test.json";

const DICTIONARY: &str = "dictionary.json";

const THRESHOLDS: &str = "thresholds.json";

const SUBWORDS: &str = "subwords.json";

/// The files of a model in a directory.
#[derive(Debug, Clone)]
pub struct ModelFiles {
    /// The directory.
    pub path: PathBuf,
}

impl ModelFiles {
    /// The model files in `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// Its description, `model.json`.
    pub fn meta_file(&self) -> PathBuf {
        self.path.join(META)
    }

    /// Its vocabularies, `vocab.json`.
    pub fn vocab_file(&self) -> PathBuf {
        self.path.join(VOCAB)
    }

    /// Its weights, `model.bpk`.
    pub fn weights_file(&self) -> PathBuf {
        self.path.join(WEIGHTS)
    }

    /// Its dev scores as its run recorded them, `dev.json`.
    pub fn dev_scores_file(&self) -> PathBuf {
        self.path.join(DEV_SCORES)
    }

    /// Its test scores as its run recorded them, `test.json`.
    pub fn test_scores_file(&self) -> PathBuf {
        self.path.join(TEST_SCORES)
    }

    /// Where the dictionaries are (`dictionary.json`).
    pub fn dictionary_file(&self) -> PathBuf {
        self.path.join(DICTIONARY)
    }

    /// Where the pretrained encoder's tokenizer is (`subwords.json`), when the model has one.
    pub fn subwords_file(&self) -> PathBuf {
        self.path.join(SUBWORDS)
    }

    /// A checkpoint's `tokenizer.json` (or another model's `subwords.json`) read and checked as
    /// fitting `encoder`, to be copied into a new model.
    pub fn subwords_to_copy(
        tokenizer: &Path,
        encoder: &crate::encoder::EncoderConfig,
    ) -> Result<SubwordsCopy, FileError> {
        let bytes = read_tokenizer(tokenizer)?;
        let read = SubwordTokenizer::from_bytes(&bytes, tokenizer)
            .map_err(|e| FileError::invalid(tokenizer, e.message))?;
        crate::encoder::check_tokenizer(encoder, &read)
            .map_err(|message| FileError::invalid(tokenizer, message))?;
        Ok(SubwordsCopy {
            tokenizer: read,
            sha256: sha256_hex(&bytes),
            bytes,
        })
    }

    /// Writes the pretrained encoder's tokenizer (`subwords.json`), as
    /// [`subwords_to_copy`](Self::subwords_to_copy) read it.
    pub fn write_subwords(&self, bytes: &[u8]) -> Result<(), FileError> {
        nertrain_data::io::write_atomic(&self.subwords_file(), bytes)?;
        Ok(())
    }

    /// The pretrained encoder's tokenizer, when the model has an encoder: checked against the
    /// SHA-256 and the encoder's shape that `model.json` records.
    pub fn read_subwords(&self, meta: &ModelMeta) -> Result<Option<SubwordTokenizer>, FileError> {
        let Some(encoder) = &meta.sizes.encoder else {
            return Ok(None);
        };
        let path = self.subwords_file();
        let bytes = read_tokenizer(&path)?;
        if let Some(recorded) = &meta.subwords_sha256
            && sha256_hex(&bytes) != *recorded
        {
            return Err(FileError::invalid(
                &path,
                "its SHA-256 is not the one model.json records: the file was changed, or is \
                 another model's",
            ));
        }
        let tokenizer = SubwordTokenizer::from_bytes(&bytes, &path)
            .map_err(|e| FileError::invalid(&path, e.message))?;
        crate::encoder::check_tokenizer(encoder, &tokenizer)
            .map_err(|message| FileError::invalid(&path, message))?;
        Ok(Some(tokenizer))
    }

    /// Writes the dictionaries (`dictionary.json`), as [`DictionaryMeta::of`] describes them.
    pub fn write_dictionary(&self, dictionary: &Dictionary) -> Result<(), FileError> {
        let path = self.dictionary_file();
        nertrain_data::io::write_atomic(&path, &dictionary_json(dictionary))?;
        Ok(())
    }

    /// The model's dictionaries, compiled, when it reads dictionary features: checked against
    /// the SHA-256 and labels that `model.json` records.
    pub fn read_dictionary(&self, meta: &ModelMeta) -> Result<Option<Dictionary>, FileError> {
        let Some(recorded) = &meta.dictionary else {
            return Ok(None);
        };
        let path = self.dictionary_file();
        let bytes = std::fs::read(&path).map_err(|source| FileError::Io {
            path: path.clone(),
            action: "read",
            source,
        })?;
        if sha256_hex(&bytes) != recorded.sha256 {
            return Err(FileError::invalid(
                &path,
                "its SHA-256 is not the one model.json records: the file was changed, or is \
                 another model's",
            ));
        }
        let stored: StoredDictionary = serde_json::from_slice(&bytes)
            .map_err(|e| FileError::invalid(&path, format!("not a nertrain dictionary: {e}")))?;
        if stored.labels != recorded.labels || stored.labels.len() != meta.sizes.dictionary_labels {
            return Err(FileError::invalid(
                &path,
                format!(
                    "labels {:?}, but model.json records {:?} ({} dictionary labels)",
                    stored.labels, recorded.labels, meta.sizes.dictionary_labels
                ),
            ));
        }
        Dictionary::new(stored.labels, stored.entries)
            .map(Some)
            .map_err(|e| FileError::invalid(&path, e))
    }

    /// The SHA-256 of the weights file, in hex: what a model card names the weights by. Read in
    /// pieces: weights can be large.
    pub fn weights_sha256(&self) -> Result<String, FileError> {
        use std::io::Read;
        let path = self.weights_file();
        let io = |source| FileError::Io {
            path: path.clone(),
            action: "read",
            source,
        };
        let mut file = std::fs::File::open(&path).map_err(io)?;
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; 1 << 16];
        loop {
            let read = file.read(&mut buffer).map_err(io)?;
            if read == 0 {
                break;
            }
            hasher.update(&buffer[..read]);
        }
        Ok(hex(&hasher.finalize()))
    }

    /// The weights' short id: the first 12 hex digits of their SHA-256, the same wherever the
    /// model directory is (Label Studio's model version for them).
    pub fn weights_id(&self) -> Result<String, FileError> {
        let mut id = self.weights_sha256()?;
        id.truncate(12);
        Ok(id)
    }

    /// Copies the model's files (not a run's checkpoint, metrics or experiment) into `dir`,
    /// created when missing: each written atomically, and a file of the model's names that this
    /// model lacks (its thresholds, say) deleted there, so that `dir` holds this model alone.
    /// With `weights_sha256` (what a loaded model's weights hashed to), the weights must still
    /// be those: a directory written again since it was loaded is an error, and nothing is
    /// copied.
    pub fn copy_to(
        &self,
        dir: &Path,
        weights_sha256: Option<&str>,
    ) -> Result<ModelFiles, FileError> {
        let to = ModelFiles::new(dir);
        let io = |path: &Path, action, source| FileError::Io {
            path: path.to_path_buf(),
            action,
            source,
        };
        // The description last: a copy cut short is not a model.
        let names = [
            VOCAB,
            WEIGHTS,
            DEV_SCORES,
            TEST_SCORES,
            DICTIONARY,
            THRESHOLDS,
            SUBWORDS,
            META,
        ];
        // Every file read before any is written, so that what is checked is what is copied.
        let mut read = Vec::with_capacity(names.len());
        for name in names {
            let from = self.path.join(name);
            match std::fs::read(&from) {
                Ok(bytes) => read.push((name, Some(bytes))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    if matches!(name, META | VOCAB | WEIGHTS) {
                        return Err(FileError::invalid(
                            &self.path,
                            format!("not a nertrain model directory ({name} is missing)"),
                        ));
                    }
                    read.push((name, None));
                }
                Err(e) => return Err(io(&from, "read", e)),
            }
        }
        if let Some(expected) = weights_sha256 {
            let weights = read.iter().find(|(name, _)| *name == WEIGHTS);
            let found = weights
                .and_then(|(_, bytes)| bytes.as_deref())
                .map(sha256_hex);
            if found.as_deref() != Some(expected) {
                return Err(FileError::invalid(
                    self.weights_file(),
                    format!(
                        "written again since the model in use was loaded from it (SHA-256 {}, \
                         loaded {expected}): these are not the weights in use; load the model \
                         again to save what the directory holds now",
                        found.unwrap_or_default()
                    ),
                ));
            }
        }
        std::fs::create_dir_all(dir).map_err(|e| io(dir, "create", e))?;
        for (name, bytes) in read {
            let target = to.path.join(name);
            match bytes {
                Some(bytes) => nertrain_data::io::write_atomic(&target, &bytes)?,
                None => match std::fs::remove_file(&target) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(io(&target, "delete", e));
                    }
                    _ => {}
                },
            }
        }
        Ok(to)
    }

    /// Where the confidence thresholds are (`thresholds.json`), when they were chosen.
    pub fn thresholds_file(&self) -> PathBuf {
        self.path.join(THRESHOLDS)
    }

    /// The model's confidence thresholds, when they were chosen: each a number from 0 to 1 for
    /// one of `labels` (the model's entity types).
    pub fn read_thresholds(
        &self,
        labels: &[String],
    ) -> Result<Option<StoredThresholds>, FileError> {
        let path = self.thresholds_file();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(FileError::Io {
                    path,
                    action: "read",
                    source,
                });
            }
        };
        let stored: StoredThresholds = serde_json::from_str(&text)
            .map_err(|e| FileError::invalid(&path, format!("not nertrain thresholds: {e}")))?;
        for (label, threshold) in &stored.labels {
            if !labels.contains(label) {
                return Err(FileError::invalid(
                    &path,
                    format!(
                        "labels.{label}: not a label of the model ({})",
                        labels.join(", ")
                    ),
                ));
            }
            if !threshold.bias.is_finite() || threshold.bias.abs() > MAX_BIAS {
                return Err(FileError::invalid(
                    &path,
                    format!(
                        "labels.{label}.bias: expected a number from -{MAX_BIAS} to {MAX_BIAS}, \
                         found {}",
                        threshold.bias
                    ),
                ));
            }
            if !(0.0..=1.0).contains(&threshold.threshold) {
                return Err(FileError::invalid(
                    &path,
                    format!(
                        "labels.{label}.threshold: expected a number from 0 to 1, found {}",
                        threshold.threshold
                    ),
                ));
            }
        }
        Ok(Some(stored))
    }

    /// Writes the confidence thresholds (`thresholds.json`), replacing the last ones atomically.
    pub fn write_thresholds(&self, thresholds: &StoredThresholds) -> Result<(), FileError> {
        let path = self.thresholds_file();
        let json = serde_json::to_string_pretty(thresholds)
            .map_err(|e| FileError::invalid(&path, format!("cannot write JSON: {e}")))?;
        Ok(nertrain_data::io::write_atomic(&path, json.as_bytes())?)
    }

    /// Whether the directory holds a model: its `model.json` is a nertrain model description.
    pub fn is_model(&self) -> bool {
        std::fs::read_to_string(self.meta_file())
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .is_some_and(|meta| meta.get("nertrain_version").is_some())
    }

    /// Reads and checks the description.
    pub fn read_meta(&self) -> Result<ModelMeta, FileError> {
        let path = self.meta_file();
        let text = self.read(&path)?;
        let not_a_model = |e: serde_json::Error| {
            FileError::invalid(&path, format!("not a nertrain model description: {e}"))
        };
        let mut given: serde_json::Value = serde_json::from_str(&text).map_err(not_a_model)?;
        // Settings added after a model was saved take their defaults, which is what the model was
        // trained with.
        for (section, defaults) in [
            ("model", serde_json::to_value(NetworkConfig::new())),
            ("crf", serde_json::to_value(CrfOptions::new())),
        ] {
            if let Some(stored) = given.get_mut(section) {
                let mut filled = defaults.map_err(not_a_model)?;
                merge_json(&mut filled, stored.take());
                *stored = filled;
            }
        }
        let meta: ModelMeta = serde_json::from_value(given).map_err(not_a_model)?;
        if meta.format != FORMAT_VERSION {
            return Err(FileError::invalid(
                &path,
                format!(
                    "model format {} but this nertrain reads format {FORMAT_VERSION}",
                    meta.format
                ),
            ));
        }
        check_sizes(&meta).map_err(|message| {
            FileError::invalid(
                &path,
                format!("{message}; the file was changed or damaged, or not written by nertrain"),
            )
        })?;
        Ok(meta)
    }

    /// Reads the vocabularies and checks them against the description.
    pub fn read_vocab(&self, meta: &ModelMeta) -> Result<Vocabularies, FileError> {
        let path = self.vocab_file();
        let text = self.read(&path)?;
        let vocab: Vocabularies = serde_json::from_str(&text)
            .map_err(|e| FileError::invalid(&path, format!("not a vocabulary file: {e}")))?;
        let mut seen = std::collections::HashSet::new();
        for tag in vocab.tags.items() {
            nertrain_data::check_tag(tag)
                .map_err(|m| FileError::invalid(&path, format!("tags: {m}")))?;
            if !seen.insert(tag) {
                return Err(FileError::invalid(
                    &path,
                    format!("tags: {tag:?} is there twice"),
                ));
            }
        }
        // The language model's share of the words is the model's, not the vocabulary's.
        let sizes = VocabSizes {
            lm_words: meta.sizes.lm_words.min(vocab.words.len()),
            dictionary_labels: meta.sizes.dictionary_labels,
            encoder: meta.sizes.encoder.clone(),
            ..VocabSizes::from(&vocab)
        };
        if sizes != meta.sizes {
            return Err(FileError::invalid(
                &path,
                format!(
                    "vocabulary sizes {sizes:?} do not match model.json's {:?}",
                    meta.sizes
                ),
            ));
        }
        Ok(vocab)
    }

    /// The description's tokenizer, compiled. Models without a saved one cut text as nertrain
    /// did when they were trained: BERT's pre-tokenizer, and sentences only for document-level
    /// models.
    pub fn tokenizer(&self, meta: &ModelMeta) -> Result<Tokenizer, FileError> {
        match &meta.tokenizer {
            Some(spec) => {
                Tokenizer::new(spec).map_err(|e| FileError::invalid(self.meta_file(), e.0))
            }
            None => Ok(Tokenizer::bert(meta.document.is_some())),
        }
    }

    /// The model, its description and vocabularies, checked against each other.
    pub fn load(&self, device: &Device) -> Result<(ModelMeta, Vocabularies, Network), FileError> {
        let meta = self.read_meta()?;
        let vocab = self.read_vocab(&meta)?;
        let weights = self.weights_file();
        if !weights.exists() {
            return Err(FileError::invalid(
                &self.path,
                "no weights yet (model.bpk is written when the first epoch ends)",
            ));
        }
        // A description changed to sizes within bounds but not the weights': refused before the
        // model is built, which allocates what the description says.
        let needed = 4 * least_values(&meta);
        let held = std::fs::metadata(&weights).map_or(0, |m| m.len());
        if needed > held {
            return Err(FileError::invalid(
                &weights,
                format!(
                    "not a readable weights file: it is truncated or damaged, or of another run \
                     ({held} bytes, but model.json describes at least {needed})"
                ),
            ));
        }
        let model = load_weights(meta.model.init(&meta.sizes, device), &weights)?;
        Ok((meta, vocab, model))
    }

    /// Writes the model's description (`model.json`), replacing the last one atomically.
    pub fn write_meta(&self, meta: &ModelMeta) -> Result<(), FileError> {
        let path = self.meta_file();
        let json = serde_json::to_string_pretty(meta)
            .map_err(|e| FileError::invalid(&path, format!("cannot write JSON: {e}")))?;
        Ok(nertrain_data::io::write_atomic(&path, json.as_bytes())?)
    }

    /// Writes the model's vocabularies (`vocab.json`), replacing the last ones atomically.
    pub fn write_vocab(&self, vocab: &Vocabularies) -> Result<(), FileError> {
        let path = self.vocab_file();
        let json = serde_json::to_string(vocab)
            .map_err(|e| FileError::invalid(&path, format!("cannot write JSON: {e}")))?;
        Ok(nertrain_data::io::write_atomic(&path, json.as_bytes())?)
    }

    /// Writes the test scores of the model (`test.json`).
    pub fn write_test_scores(&self, scores: &RecordedScores) -> Result<(), FileError> {
        let path = self.test_scores_file();
        Ok(nertrain_data::io::write_atomic(
            &path,
            &scores_json(scores),
        )?)
    }

    /// The dev scores its run recorded.
    pub fn read_dev_scores(&self) -> Result<RecordedScores, FileError> {
        self.read_scores(&self.dev_scores_file(), "a dev score file")
    }

    /// The test scores its run recorded.
    pub fn read_test_scores(&self) -> Result<RecordedScores, FileError> {
        self.read_scores(&self.test_scores_file(), "a test score file")
    }

    fn read_scores(&self, path: &Path, what: &str) -> Result<RecordedScores, FileError> {
        let text = self.read(path)?;
        serde_json::from_str(&text)
            .map_err(|e| FileError::invalid(path, format!("not {what}: {e}")))
    }

    /// A file of the model's directory as text; a missing one is an error that says whether the
    /// directory is there.
    pub fn read(&self, file: &Path) -> Result<String, FileError> {
        std::fs::read_to_string(file).map_err(|e| {
            if e.kind() != std::io::ErrorKind::NotFound {
                FileError::Io {
                    path: file.to_path_buf(),
                    action: "read",
                    source: e,
                }
            } else if self.path.is_dir() {
                FileError::invalid(
                    &self.path,
                    format!(
                        "not a nertrain model directory ({} is missing)",
                        file.display()
                    ),
                )
            } else {
                FileError::invalid(&self.path, "no such model directory")
            }
        })
    }
}

/// The SHA-256 of `bytes`, in hex.
/// A tokenizer file's bytes, read only from a regular file of at most [`MAX_TOKENIZER_BYTES`].
fn read_tokenizer(path: &Path) -> Result<Vec<u8>, FileError> {
    nertrain_data::io::read_regular(path, MAX_TOKENIZER_BYTES).map_err(|source| FileError::Io {
        path: path.to_path_buf(),
        action: "read",
        source,
    })
}
