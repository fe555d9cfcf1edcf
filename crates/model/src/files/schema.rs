//! What `model.json` and the other description files hold: the model's settings and sizes, how it
//! was trained and from what, its dictionaries, scores and operating points, as serde records.

use std::collections::BTreeMap;
use std::path::PathBuf;

use burn::config::Config;
use nertrain_data::{
    ColumnSpec, Dictionary, Entry, Scores, SubwordTokenizer, TagScheme, TokenizerSpec,
};
use serde::{Deserialize, Serialize};

use crate::{NetworkConfig, VocabSizes};

use super::json::dictionary_json;
use super::weights::sha256_hex;

/// Bumped whenever a model file's layout or meaning changes.
pub const FORMAT_VERSION: u32 = 1;

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
    /// Its weights' id ([`ModelFiles::weights_id`](crate::ModelFiles::weights_id)).
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
pub(super) fn labels_once<'de, D: serde::Deserializer<'de>>(
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

pub(super) fn is_zero(value: &f64) -> bool {
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
