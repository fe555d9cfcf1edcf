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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use burn::config::Config;
use burn::module::Module;
use burn::tensor::Device;
use nertrain_data::{
    ColumnSpec, Dictionary, Entry, MAX_TOKENIZER_BYTES, Scores, SubwordTokenizer, TagScheme,
    Tokenizer, TokenizerSpec, Vocabularies,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{FileError, Network, NetworkConfig, VocabSizes};

const META: &str = "model.json";
const VOCAB: &str = "vocab.json";
const WEIGHTS: &str = "model.bpk";
const DEV_SCORES: &str = "dev.json";
const TEST_SCORES: &str = "test.json";
const DICTIONARY: &str = "dictionary.json";
const THRESHOLDS: &str = "thresholds.json";
const SUBWORDS: &str = "subwords.json";

/// Bumped whenever a model file's layout or meaning changes.
pub const FORMAT_VERSION: u32 = 1;

/// The largest layer size accepted: past it a BiLSTM's weights and optimiser state alone take
/// gigabytes, and a size with zeros too many would end the process on a failed allocation.
pub const MAX_LAYER: usize = 4096;

/// The most values a model's word table may hold (4 GiB of floats), tags it may have (its CRF
/// holds their square), and characters a word may be read with.
const MAX_WORD_TABLE: usize = 1 << 30;
const MAX_TAGS: usize = 4096;
const MAX_WORD_LEN: usize = 1 << 16;

/// The most feature columns a model may read.
const MAX_FEATURES: usize = 64;
/// The most values a feature column may have (a categorical column, not a second word column).
const MAX_FEATURE_VALUES: usize = 1 << 20;

/// How the tag scheme's rules are enforced (see [`Constraints`](crate::Constraints)).
#[derive(Config, Debug, PartialEq)]
pub struct CrfOptions {
    /// Decode only well-formed sequences of the training scheme (`eval` and `tag` can turn it off).
    #[config(default = true)]
    pub constrained_decoding: bool,
    /// Also apply the constraints in the training loss.
    #[config(default = false)]
    pub constrained_training: bool,
}

/// How a document-level model reads documents and decodes with them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocumentContext {
    /// Documents are read in pieces of at most this many tokens (`data.document_tokens`).
    pub max_tokens: usize,
    /// How strongly the predictions for all mentions of a capitalised word in its document pull
    /// each one: added to its emission scores, times their class probabilities averaged by
    /// confidence. Chosen on dev when training ends; 0 decodes each sentence on its own.
    pub consistency: f64,
}

/// A model's description: `model.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelMeta {
    /// [`FORMAT_VERSION`] when it was written.
    pub format: u32,
    /// The nertrain that trained it.
    pub nertrain_version: String,
    /// The network's architecture.
    pub model: NetworkConfig,
    /// How the tag scheme's rules are enforced.
    pub crf: CrfOptions,
    /// The sizes of its vocabularies.
    pub sizes: VocabSizes,
    /// The scheme of the training files; predictions are written in it.
    pub file_scheme: TagScheme,
    /// The scheme the model's tags are in.
    pub train_scheme: TagScheme,
    /// Where words and tags are in its training files, and so in gold files scored with it.
    pub columns: ColumnSpec,
    /// Longer words keep their first characters for character features.
    pub max_word_len: usize,
    /// How a document-level model (`data.context = "document"`) reads and decodes documents;
    /// absent for a sentence-level one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document: Option<DocumentContext>,
    /// Trained on the dev set too (`train.with_dev`): its dev scores are not held out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trained_on_dev: bool,
    /// How raw text is cut into words and sentences, as the training data was; absent in models
    /// written before it was saved, which read text with BERT's pre-tokenizer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<TokenizerSpec>,
    /// The model its training started from (`train.start_from`), when it did not start afresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_from: Option<StartedFrom>,
    /// The dictionaries it reads features from (`dictionary.json`), when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dictionary: Option<DictionaryMeta>,
    /// The SHA-256 of its pretrained encoder's tokenizer (`subwords.json`), in hex, when it has
    /// one; absent in models written before it was recorded, whose tokenizer is read unchecked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subwords_sha256: Option<String>,
    /// The files it was trained and chosen on, and their sizes; absent in models written before
    /// they were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataSummary>,
    /// The teachers it learnt from besides its gold labels (`[distill]`), when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distilled: Option<Distillation>,
}

/// What a model was distilled from: its teachers, how their loss was weighed against the gold
/// labels', and the unlabelled text it learnt from them alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Distillation {
    /// Its teachers, in the order of `[distill] teachers`.
    pub teachers: Vec<TeacherSummary>,
    /// The teachers' share of the loss.
    pub weight: f64,
    /// What the teachers' scores were divided by before their marginals were taken.
    pub temperature: f64,
    /// The unlabelled files, as read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unlabelled: Vec<FileSummary>,
}

/// A teacher a model was distilled from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeacherSummary {
    /// Its directory, as the experiment named it.
    pub path: PathBuf,
    /// Its weights' id ([`ModelFiles::weights_id`]).
    pub weights_id: String,
}

/// What a model was trained, chosen and tested on, as its run read them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataSummary {
    /// The training file (with the dev file after it, for a model trained on dev too).
    pub train: FileSummary,
    /// The dev file, on which the epoch was chosen.
    pub dev: FileSummary,
    /// The test file, when the run scored one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<FileSummary>,
}

/// A data file as a run read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSummary {
    /// Its path, as the experiment named it.
    pub path: PathBuf,
    /// Its sentences.
    pub sentences: usize,
    /// Their words.
    pub tokens: usize,
}

impl FileSummary {
    /// The summary of a corpus as read.
    pub fn of<L>(corpus: &nertrain_data::Corpus<L>) -> Self {
        Self {
            path: corpus.path.clone(),
            sentences: corpus.sentences.len(),
            tokens: corpus.sentences.iter().map(|s| s.words.len()).sum(),
        }
    }
}

/// A pretrained encoder's tokenizer read to be copied into a new model as its `subwords.json`.
#[derive(Debug, Clone)]
pub struct SubwordsCopy {
    /// As read.
    pub tokenizer: SubwordTokenizer,
    /// The file's bytes, which the model's copy is.
    pub bytes: Vec<u8>,
    /// Their SHA-256, in hex, for `model.json`.
    pub sha256: String,
}

/// What `model.json` says of the model's dictionary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DictionaryMeta {
    /// Its labels, in the order of the features.
    pub labels: Vec<String>,
    /// Its entries.
    pub entries: usize,
    /// The SHA-256 of `dictionary.json`, in hex.
    pub sha256: String,
}

impl DictionaryMeta {
    /// What `model.json` records of `dictionary`, stored.
    pub fn of(dictionary: &Dictionary) -> Self {
        Self {
            labels: dictionary.labels().to_vec(),
            entries: dictionary.entries().len(),
            sha256: sha256_hex(&dictionary_json(dictionary)),
        }
    }
}

/// `dictionary.json`'s bytes.
fn dictionary_json(dictionary: &Dictionary) -> Vec<u8> {
    // Strings and lists of them: nothing here fails to serialise.
    serde_json::to_vec(&StoredDictionary::of(dictionary)).expect("a dictionary serialises")
}

/// `dictionary.json`: a model's dictionaries, entries cut into words as the model cuts text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredDictionary {
    /// The labels, in the order of the features.
    pub labels: Vec<String>,
    /// The entries, sorted, each once.
    pub entries: Vec<Entry>,
}

impl StoredDictionary {
    /// What `dictionary` stores.
    pub fn of(dictionary: &Dictionary) -> Self {
        Self {
            labels: dictionary.labels().to_vec(),
            entries: dictionary.entries().to_vec(),
        }
    }
}

/// The model a run continued, and what it added to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartedFrom {
    /// Its directory, as the experiment named it.
    pub path: PathBuf,
    /// Its vocabularies' sizes; the new model's first ids are its ids.
    pub sizes: VocabSizes,
    /// The tags it did not have.
    pub tags_added: Vec<String>,
}

/// Scores a run recorded for its model (`dev.json`, `test.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedScores {
    /// The epoch whose model was scored: in `dev.json`, absent in runs of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<usize>,
    /// Overall and per-type scores.
    #[serde(flatten)]
    pub scores: Scores,
}

/// `thresholds.json`: the confidence below which the model's entities of each label are left
/// out, chosen on a gold file by `nertrain eval --thresholds`. It belongs to the weights it was
/// chosen for: a run that publishes new weights deletes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredThresholds {
    /// By label: the threshold, and how it was chosen.
    #[serde(deserialize_with = "labels_once")]
    pub labels: BTreeMap<String, LabelThreshold>,
}

/// A map from labels that names each label once: JSON allows a key twice, and reading would
/// silently keep the last.
fn labels_once<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, LabelThreshold>, D::Error> {
    struct Once;
    impl<'de> serde::de::Visitor<'de> for Once {
        type Value = BTreeMap<String, LabelThreshold>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object of labels, each once")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut labels = BTreeMap::new();
            while let Some((label, threshold)) = map.next_entry::<String, LabelThreshold>()? {
                if labels.contains_key(&label) {
                    return Err(serde::de::Error::custom(format!(
                        "{label}: given twice; give each label once"
                    )));
                }
                labels.insert(label, threshold);
            }
            Ok(labels)
        }
    }
    deserializer.deserialize_map(Once)
}

/// One label's confidence threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelThreshold {
    /// Entities of the label whose confidence is below it are left out (their words tagged `O`).
    pub threshold: f64,
    /// Added to the emission scores of the label's tags when the best path is chosen: above 0,
    /// a recall past the model's own is bought with precision.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bias: f64,
    /// How it was chosen, when it was chosen on a gold file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chosen: Option<ChosenThreshold>,
}

fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

/// The largest bias a label's tags may have in `thresholds.json`.
pub const MAX_BIAS: f64 = 100.0;

/// How a threshold was chosen: the file, the recall asked for, and what it gave there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChosenThreshold {
    /// The gold file it was chosen on (a dev file).
    pub file: PathBuf,
    /// The recall asked for, in percent.
    pub target_recall: f64,
    /// The label's precision on the file at the threshold, in percent.
    pub precision: f64,
    /// The label's recall on the file at the threshold, in percent.
    pub recall: f64,
}

/// Settings of a [`NetworkConfig`] out of their range: the settings (its fields' names) and what
/// they must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfRange {
    /// The settings, by their names in [`NetworkConfig`].
    pub settings: &'static [&'static str],
    /// What they must be.
    pub expected: &'static str,
}

impl std::fmt::Display for OutOfRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let named: Vec<String> = self.settings.iter().map(|s| format!("model.{s}")).collect();
        write!(f, "{}: expected {}", named.join(" and "), self.expected)
    }
}

/// The first of a network's settings that make no sense: checked for an experiment before
/// anything is read or deleted (which names them as the experiment's keys), and for a model's
/// `model.json` before anything is allocated.
pub fn check_config(m: &NetworkConfig) -> Result<(), OutOfRange> {
    let size = |v: usize| (1..=MAX_LAYER).contains(&v);
    let checks: [(bool, &'static [&'static str], &'static str); 9] = [
        (size(m.word_dim), &["word_dim"], "1 to 4096"),
        (size(m.hidden), &["hidden"], "1 to 4096"),
        (
            size(m.char_dim) && size(m.char_filters),
            &["char_dim", "char_filters"],
            "1 to 4096",
        ),
        (
            size(m.char_hidden) && size(m.char_lm_hidden),
            &["char_hidden", "char_lm_hidden"],
            "1 to 4096",
        ),
        (
            m.casing_dim <= MAX_LAYER && m.mention_dim <= MAX_LAYER,
            &["casing_dim", "mention_dim"],
            "0 to 4096",
        ),
        (
            m.dictionary_dim <= MAX_LAYER,
            &["dictionary_dim"],
            "0 to 4096",
        ),
        (
            m.feature_dims.iter().all(|&d| size(d)) && m.feature_dims.len() <= MAX_FEATURES,
            &["feature_dims"],
            "at most 64 columns, each of dim 1 to 4096",
        ),
        (
            m.lm_weight >= 0.0 && m.lm_weight.is_finite(),
            &["lm_weight"],
            "zero or positive",
        ),
        (
            (0.0..1.0).contains(&m.dropout),
            &["dropout"],
            "a probability in [0, 1)",
        ),
    ];
    match checks.iter().find(|(ok, _, _)| !ok) {
        Some(&(_, settings, expected)) => Err(OutOfRange { settings, expected }),
        None => Ok(()),
    }
}

/// Overlays `given` on `base`, table by table: settings added after a file was written take
/// their defaults from `base`.
pub fn merge_json(base: &mut serde_json::Value, given: serde_json::Value) {
    match (base, given) {
        (serde_json::Value::Object(base), serde_json::Value::Object(given)) => {
            for (key, value) in given {
                match base.get_mut(&key) {
                    Some(slot) => merge_json(slot, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (slot, value) => *slot = value,
    }
}

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

/// The sizes of a description that nertrain never makes, checked before any is allocated.
fn check_sizes(meta: &ModelMeta) -> Result<(), String> {
    check_config(&meta.model).map_err(|e| e.to_string())?;
    let sizes = &meta.sizes;
    let word_table = sizes.words.saturating_mul(meta.model.word_dim);
    if word_table > MAX_WORD_TABLE || sizes.chars > MAX_WORD_TABLE / 64 {
        return Err(format!(
            "sizes: {} words of {} values and {} characters is more than nertrain makes",
            sizes.words, meta.model.word_dim, sizes.chars
        ));
    }
    if sizes.lm_words > sizes.words {
        return Err(format!(
            "sizes.lm_words: expected at most the {} words, found {}",
            sizes.words, sizes.lm_words
        ));
    }
    let dictionary_labels = meta.dictionary.as_ref().map_or(0, |d| d.labels.len());
    if sizes.dictionary_labels != dictionary_labels || dictionary_labels > MAX_TAGS {
        return Err(format!(
            "sizes.dictionary_labels: expected the {dictionary_labels} labels of the dictionary \
             (at most {MAX_TAGS}), found {}",
            sizes.dictionary_labels
        ));
    }
    let columns = meta.columns.feature_columns.len();
    if sizes.features.len() != columns || meta.model.feature_dims.len() != columns {
        return Err(format!(
            "sizes.features: expected the vocabulary sizes of the {columns} feature columns, \
             with a dim each in model.feature_dims; found {} sizes and {} dims",
            sizes.features.len(),
            meta.model.feature_dims.len()
        ));
    }
    if let Some(&values) = sizes
        .features
        .iter()
        .find(|&&v| !(2..=MAX_FEATURE_VALUES).contains(&v))
    {
        return Err(format!(
            "sizes.features: expected 2 to {MAX_FEATURE_VALUES} values per column, found {values}"
        ));
    }
    if !(1..=MAX_TAGS).contains(&sizes.tags) {
        return Err(format!(
            "sizes.tags: expected 1 to {MAX_TAGS}, found {}",
            sizes.tags
        ));
    }
    if let Some(encoder) = &sizes.encoder {
        encoder
            .check()
            .map_err(|message| format!("sizes.encoder: {message}"))?;
        meta.model.pretrained_layers.check(encoder)?;
    }
    if !(1..=MAX_WORD_LEN).contains(&meta.max_word_len) {
        return Err(format!(
            "max_word_len: expected 1 to {MAX_WORD_LEN}, found {}",
            meta.max_word_len
        ));
    }
    Ok(())
}

/// The fewest weights a model of this description has: its word table, the BiLSTM's recurrent
/// matrices (both directions, four gates) and the CRF's transitions; each a 32-bit float.
fn least_values(meta: &ModelMeta) -> u64 {
    let (words, dim) = (meta.sizes.words as u64, meta.model.word_dim as u64);
    let (hidden, tags) = (meta.model.hidden as u64, meta.sizes.tags as u64);
    let encoder = meta
        .sizes
        .encoder
        .as_ref()
        .and_then(|e| e.parameters())
        .unwrap_or(0) as u64;
    words * dim + 8 * hidden * hidden + tags * tags + encoder
}

/// Scores as their files (`dev.json`, `test.json`) hold them: keys sorted, as `eval --json`
/// prints them.
pub fn scores_json(scores: &RecordedScores) -> Vec<u8> {
    // Numbers, strings and maps of them: nothing here fails to serialise.
    nertrain_data::io::to_sorted_json(scores, true)
        .expect("scores serialise")
        .into_bytes()
}

/// Saves a module's weights (`model.bpk`, or a checkpoint's) as every model file is written:
/// beside their place, synced, and renamed over it, so that a reader finds the old weights or
/// the new, never a torn file.
pub fn save_weights<M: Module>(module: &M, path: &Path) -> Result<(), FileError> {
    let partial = nertrain_data::io::with_suffix(path, nertrain_data::io::PARTIAL);
    let io = |action, e: std::io::Error| FileError::Io {
        path: path.to_path_buf(),
        action,
        source: e,
    };
    let saved = match std::fs::remove_file(&partial) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("write", e)),
        _ => Ok(()),
    }
    .and_then(|()| {
        module
            .clone()
            .save_file(&partial)
            .map_err(|e| io("save weights", std::io::Error::other(e.to_string())))?;
        std::fs::File::open(&partial)
            .and_then(|f| f.sync_all())
            .and_then(|()| std::fs::rename(&partial, path))
            .map_err(|e| io("write", e))
    });
    if saved.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    saved
}

/// Loads weights into a module of the right architecture; a damaged file, or one for another
/// shape, is an error that says which.
///
/// The file is read whole, from one open, before any of it is used: read by path, tensor by
/// tensor, a model replaced while it loads (as `fit` replaces the best one each better epoch)
/// gave weights of both, or a missing file halfway.
pub fn load_weights<M: Module>(module: M, path: &Path) -> Result<M, FileError> {
    use burn::store::{ModuleRecord, RecordError};
    let bytes = std::fs::read(path).map_err(|e| {
        let message = if e.kind() == std::io::ErrorKind::NotFound {
            format!("cannot read: the file is missing ({e})")
        } else {
            format!("cannot read: {e}")
        };
        FileError::invalid(path, message)
    })?;
    let record = ModuleRecord::from_bytes(burn::tensor::Bytes::from_bytes_vec(bytes));
    record
        .and_then(|record| module.try_load_record(record))
        .map_err(|e| {
            let message = match e {
                RecordError::Io(detail) if !path.exists() => {
                    format!("cannot read: the file is missing ({detail})")
                }
                RecordError::Io(detail) => format!(
                    "not a readable weights file: it is truncated or damaged ({detail}); \
                 restore it or train again"
                ),
                RecordError::Validation(detail) => {
                    format!("weights do not fit this model (as model.json describes it): {detail}")
                }
            };
            FileError::invalid(path, message)
        })
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

fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// `bytes` in lower-case hex.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
