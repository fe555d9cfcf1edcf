//! The experiment file (TOML): `[data]`, `[model]`, `[crf]`, `[train]`, `[distill]`. Unknown keys are errors that name
//! the closest known key; `--set section.key=value` overrides are checked the same way.

use std::path::{Path, PathBuf};

use burn::config::Config;
use nertrain_data::{CaseRule, ColumnSpec, Context, TagScheme, TextNormalization};
use nertrain_model::files::{check_config, merge_json};
use nertrain_model::{CrfOptions, NetworkConfig, Reduction};
use serde::{Deserialize, Serialize};

use crate::Backend;

/// The experiment's `[data]` section: the files and how they are read.
#[derive(Config, Debug)]
pub struct DataConfig {
    /// The training file (CoNLL columns, or span-annotated `.jsonl`).
    pub train: PathBuf,
    /// The dev file, on which the best epoch is chosen.
    pub dev: PathBuf,
    /// Scored with the best model when training ends.
    pub test: Option<PathBuf>,
    /// The words' column; negative counts from the end.
    #[config(default = 0)]
    pub word_column: isize,
    /// Negative counts from the end: -1 is the last column.
    #[config(default = -1)]
    pub tag_column: isize,
    /// The files' tag scheme; detected from the training file when absent.
    pub scheme: Option<TagScheme>,
    /// The scheme the model learns; predictions are converted back to the files' scheme.
    #[config(default = "TagScheme::Iob2")]
    pub train_scheme: TagScheme,
    /// Words are lowercased before lookup (characters still see them as written).
    #[config(default = false)]
    pub lowercase: bool,
    /// Every digit of a word becomes `0` before lookup.
    #[config(default = true)]
    pub digits_to_zero: bool,
    /// Training words seen fewer times than this are `<unk>`.
    #[config(default = 1)]
    pub min_word_count: usize,
    /// During training, each occurrence of a word seen once in the training set becomes `<unk>`
    /// with this probability, so `<unk>` learns what unseen words look like (Lample et al., 2016).
    #[config(default = 0.0)]
    pub singleton_unk: f64,
    /// Pretrained word vectors (GloVe or word2vec text, optionally gzipped) to start the word
    /// embeddings from; their dimension must be `model.word_dim`. Words of the train, dev and
    /// test files that have a vector join the vocabulary.
    pub vectors: Option<PathBuf>,
    /// Longer words keep their first characters for character features.
    #[config(default = 25)]
    pub max_word_len: usize,
    /// With `model.char_lm`, the language model predicts the training words seen at least this
    /// often, and every other word as `<unk>`.
    #[config(default = 5)]
    pub lm_min_count: usize,
    /// What a sentence is read with: `sentence` alone, or `document`: the other sentences of its
    /// `-DOCSTART-` document (of the whole file when it has no markers), in pieces of at most
    /// `document_tokens` tokens. Documents give each word's mention casing (`model.mention_dim`)
    /// and, when decoding, the predictions for all its mentions (with a consistency weight
    /// chosen on dev when training ends).
    #[config(default = "Context::Sentence")]
    pub context: Context,
    /// A document-level model reads documents in pieces of at most this many tokens.
    #[config(default = 2000)]
    pub document_tokens: usize,
    /// Rehearsal, when continuing a model (`train.start_from`): sentences of an earlier
    /// training file mixed into this one, so that what the model learned from them is kept.
    pub rehearse: Option<PathBuf>,
    /// How many of `rehearse`'s sentences, drawn at random with `train.seed`; 0 takes them all.
    #[config(default = 0)]
    pub rehearse_sentences: usize,
    /// Dictionaries (`LABEL<TAB>phrase` lines, optionally `<TAB>match-case` or `ignore-case`):
    /// each word's place in their phrases of each label is a feature (`model.dictionary_dim`).
    /// A file, or `{ path = "...", case = "ignore-case" }` for its entries' default case rule
    /// (match-case otherwise). The compiled dictionary is stored in the model.
    #[config(default = "Vec::new()")]
    pub dictionaries: Vec<DictionarySource>,
    /// Extra columns of the CoNLL files (POS, chunk, any categorical column) whose values are
    /// features of each word: `{ column = 1, dim = 20 }` each, the column counted as
    /// `word_column` is (negative from the end), its values embedded in `dim` values. Their
    /// vocabularies are stored in the model, which then tags CoNLL lines with these columns,
    /// not text.
    #[config(default = "Vec::new()")]
    pub features: Vec<FeatureColumn>,
    /// Labels the training file does not decide (a project that labels only some of a model's
    /// labels, continuing it): where the file says `O` a token may still be one of them, so
    /// training leaves them open there, and the dev score that chooses the epoch leaves them
    /// out. Rehearsed sentences are read as they are.
    #[config(default = "Vec::new()")]
    pub open_labels: Vec<String>,
}

/// A feature column of the experiment's CoNLL files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeatureColumn {
    /// The column, from 0; negative counts from the end.
    pub column: isize,
    /// Size of the embedding of its values.
    pub dim: usize,
}

/// A dictionary file of the experiment, and its entries' default case rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DictionarySource {
    /// A file whose entries match case unless they say otherwise.
    Path(PathBuf),
    /// A file and its entries' default case rule.
    WithCase {
        /// The file.
        path: PathBuf,
        /// `match-case` or `ignore-case`.
        case: CaseRule,
    },
}

impl DictionarySource {
    /// The file, and its entries' default case rule.
    pub fn file(&self) -> (&Path, CaseRule) {
        match self {
            Self::Path(path) => (path, CaseRule::MatchCase),
            Self::WithCase { path, case } => (path, *case),
        }
    }
}

impl TrainConfig {
    /// The fine-tuned encoder's learning rate at batch `batch` (from 0) of epoch `epoch` (from
    /// 0), of `batches` an epoch: a linear warm-up over the first `encoder_warmup` epochs, and
    /// the decay of every other rate (`lr_decay`). It depends on nothing but the step, so a
    /// run resumed with more epochs continues as it would have.
    pub fn encoder_lr_at(&self, epoch: usize, batch: usize, batches: usize) -> f64 {
        let step = (epoch * batches + batch + 1) as f64;
        let warmup = (self.encoder_warmup * batches as f64).max(1.0);
        self.encoder_lr * (step / warmup).min(1.0) / (1.0 + self.lr_decay * epoch as f64)
    }

    /// Every parameter's update rule, with its settings.
    pub fn update_rule(&self) -> UpdateRule {
        UpdateRule {
            optimizer: self.optimizer,
            momentum: self.momentum,
            betas: (self.adam_beta1, self.adam_beta2),
            epsilon: self.adam_epsilon,
        }
    }
}

/// The update rule of every parameter, with its settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UpdateRule {
    /// SGD or Adam.
    pub optimizer: Optimizer,
    /// SGD's momentum.
    pub momentum: f64,
    /// Adam's β₁ and β₂.
    pub betas: (f64, f64),
    /// Adam's ε.
    pub epsilon: f64,
}

impl UpdateRule {
    /// SGD with `momentum`, no dampening.
    pub fn sgd(momentum: f64) -> Self {
        Self {
            optimizer: Optimizer::Sgd,
            momentum,
            betas: (0.9, 0.999),
            epsilon: 1e-8,
        }
    }
}

impl DataConfig {
    /// Where words, tags and feature values are in the files.
    pub fn columns(&self) -> ColumnSpec {
        ColumnSpec {
            word_column: self.word_column,
            tag_column: self.tag_column,
            feature_columns: self.features.iter().map(|f| f.column).collect(),
        }
    }

    /// How words are normalised before lookup.
    pub fn normalization(&self) -> TextNormalization {
        TextNormalization {
            lowercase: self.lowercase,
            digits_to_zero: self.digits_to_zero,
        }
    }
}

/// The experiment's `[train]` section: the loop, the optimiser, the run directory.
#[derive(Config, Debug)]
pub struct TrainConfig {
    /// Epochs at most.
    #[config(default = 50)]
    pub epochs: usize,
    /// Sentences per training step.
    #[config(default = 10)]
    pub batch_size: usize,
    /// Sentences per decoding batch when dev and test are scored.
    #[config(default = 100)]
    pub eval_batch_size: usize,
    /// The learning rate of the first epoch.
    #[config(default = 0.015)]
    pub lr: f64,
    /// Epoch `e` (from 0) trains at `lr / (1 + lr_decay * e)`.
    #[config(default = 0.05)]
    pub lr_decay: f64,
    /// The update rule.
    #[config(default = "Optimizer::Sgd")]
    pub optimizer: Optimizer,
    /// The pretrained encoder's peak learning rate when it is fine-tuned
    /// (`model.pretrained_tuning = "fine-tune"`): AdamW, apart from the rest of the network's
    /// rule, as an encoder's rate is orders of magnitude below a CRF's.
    #[config(default = 5e-5)]
    pub encoder_lr: f64,
    /// Epochs over which the encoder's rate rises linearly to `encoder_lr`; it then decays as
    /// every other rate does (`lr_decay`).
    #[config(default = 1.0)]
    pub encoder_warmup: f64,
    /// AdamW's weight decay of the fine-tuned encoder's weights.
    #[config(default = 0.01)]
    pub encoder_weight_decay: f64,
    /// SGD's momentum.
    #[config(default = 0.9)]
    pub momentum: f64,
    /// Adam's decay rates of the first and second moment estimates, and the ε added to the
    /// second's square root (PyTorch's defaults; for the word embedding, ε is added as PyTorch's
    /// `SparseAdam` adds it, before the bias correction).
    #[config(default = 0.9)]
    pub adam_beta1: f64,
    /// Adam's β₂.
    #[config(default = 0.999)]
    pub adam_beta2: f64,
    /// Adam's ε.
    #[config(default = 1e-8)]
    pub adam_epsilon: f64,
    /// Maximum L2 norm of all gradients together (as PyTorch's `clip_grad_norm_`); 0 turns it off.
    #[config(default = 5.0)]
    pub clip_norm: f64,
    /// How a batch's sentence losses are combined into the one that is differentiated.
    #[config(default = "Reduction::Sum")]
    pub reduction: Reduction,
    /// Stop after this many epochs without a better dev F1.
    #[config(default = 8)]
    pub patience: usize,
    /// The seed of the weights, the batches and every random draw of a step.
    #[config(default = 42)]
    pub seed: u64,
    /// The backend that trains (`--backend` on the command line overrides it).
    #[config(default = "Backend::Flex")]
    pub backend: Backend,
    /// Where the run directory goes.
    #[config(default = "PathBuf::from(\"runs/default\")")]
    pub output: PathBuf,
    /// When the run ends, train a second model from scratch on train and dev together, for the
    /// run's best number of epochs, into `<output>/with-dev` (as Flair's `train_with_dev`). Its
    /// dev scores are not held out; choose by the first run's.
    #[config(default = false)]
    pub with_dev: bool,
    /// The share of the dictionary phrases found in a training batch that are hidden from it,
    /// drawn anew for every batch: the model learns to read the context when the list is silent
    /// rather than trust the list alone.
    #[config(default = 0.2)]
    pub dictionary_dropout: f64,
    /// A trained model (a run directory) whose weights this run starts from instead of fresh
    /// ones: its words, characters and tags are kept and the training data's new ones added, its
    /// architecture and training scheme are used (`[model]` must describe the same network).
    pub start_from: Option<PathBuf>,
}

/// The update rule of every parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Optimizer {
    /// SGD with momentum, no dampening (as PyTorch's).
    Sgd,
    /// Adam (`train.adam_beta1`, `adam_beta2`, `adam_epsilon`); the word embedding's update is
    /// the lazy one of PyTorch's `SparseAdam`.
    Adam,
}

/// The experiment's `[distill]` section: the trained models a run learns from besides its gold
/// labels (none: it learns from the labels alone).
#[derive(Config, Debug)]
pub struct DistillConfig {
    /// Trained models (run directories) whose distributions over tag paths the run learns
    /// from; several are an ensemble, their marginals averaged.
    #[config(default = "Vec::new()")]
    pub teachers: Vec<PathBuf>,
    /// The loss is `(1 - weight)` times the gold labels' plus `weight` times the teachers';
    /// 1 learns from the teachers alone.
    #[config(default = 0.5)]
    pub weight: f64,
    /// The teachers' scores are divided by it before their marginals are taken: above 1 their
    /// distributions are flatter, below 1 sharper.
    #[config(default = 1.0)]
    pub temperature: f64,
    /// Text no one labelled, learnt from the teachers alone: CoNLL columns whose tags are all
    /// `-`, or raw text a line each, cut into words as the first teacher cuts text.
    #[config(default = "Vec::new()")]
    pub unlabelled: Vec<PathBuf>,
}

/// A whole experiment, as read from TOML.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Experiment {
    /// `[data]`.
    pub data: DataConfig,
    /// `[model]`: the architecture.
    pub model: NetworkConfig,
    /// `[crf]`: how the tag scheme's rules are enforced.
    pub crf: CrfOptions,
    /// `[train]`.
    pub train: TrainConfig,
    /// `[distill]`.
    pub distill: DistillConfig,
}

/// An experiment that cannot be read, and where the mistake is: in a `--set` override (a usage
/// error of the command line) or in the file, at a line when one can be named.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// Where the mistake is.
    pub origin: ConfigOrigin,
    /// What is wrong, and what was expected.
    pub message: String,
}

/// Where an experiment's mistake is.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigOrigin {
    /// The `--set` item, as given.
    Override(String),
    /// In the experiment file (or its template, when `path` is none).
    File {
        /// The file.
        path: Option<PathBuf>,
        /// The line of the key, when the file has it.
        line: Option<usize>,
    },
}

impl ConfigError {
    fn in_file(message: impl Into<String>) -> Self {
        Self {
            origin: ConfigOrigin::File {
                path: None,
                line: None,
            },
            message: message.into(),
        }
    }

    /// Whether the command line, not the file, is at fault.
    pub fn is_usage(&self) -> bool {
        matches!(self.origin, ConfigOrigin::Override(_))
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let message = &self.message;
        match &self.origin {
            ConfigOrigin::Override(item) => write!(f, "--set {item}: {message}"),
            ConfigOrigin::File { path: None, .. } => f.write_str(message),
            ConfigOrigin::File {
                path: Some(path),
                line: None,
            } => write!(f, "{}: {message}", path.display()),
            ConfigOrigin::File {
                path: Some(path),
                line: Some(line),
            } => write!(f, "{}:{line}: {message}", path.display()),
        }
    }
}

impl std::error::Error for ConfigError {}

impl Experiment {
    /// Reads an experiment file and applies `key=value` overrides.
    pub fn load(path: &Path, overrides: &[String]) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            origin: ConfigOrigin::File {
                path: Some(path.to_path_buf()),
                line: None,
            },
            message: format!("cannot read: {e}"),
        })?;
        Self::parse(&text, overrides).map_err(|mut e| {
            if let ConfigOrigin::File { path: at, .. } = &mut e.origin {
                *at = Some(path.to_path_buf());
            }
            e
        })
    }

    /// Parses an experiment and applies `key=value` overrides. An error names the key, and its
    /// line in `text` or the override that set it.
    pub fn parse(text: &str, overrides: &[String]) -> Result<Self, ConfigError> {
        let mut table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            // The error's own rendering quotes the line, which may be megabytes long.
            let line = e
                .span()
                .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
            ConfigError {
                origin: ConfigOrigin::File { path: None, line },
                message: format!("not valid TOML: {}", e.message().trim_end()),
            }
        })?;
        for item in overrides {
            apply_override(&mut table, item).map_err(|message| ConfigError {
                origin: ConfigOrigin::Override(item.clone()),
                message,
            })?;
        }
        let located = |key: &str, message: String| locate(text, overrides, key, message);
        // JSON has no NaN or infinity: they would reach the settings as `null`.
        if let Some((key, value)) = non_finite(&table, "") {
            return Err(located(
                &key,
                format!("{key}: expected a finite number, found {value}"),
            ));
        }
        let given = serde_json::to_value(&table)
            .map_err(|e| ConfigError::in_file(format!("cannot read the settings: {e}")))?;
        // Burn's configs need every field, so the user's keys go over a serialised template.
        let mut merged = serde_json::to_value(Self::template()).expect("the defaults serialise");
        check_keys(&given, &merged, "").map_err(|(key, message)| located(&key, message))?;
        if let Some(data) = merged.get_mut("data").and_then(|d| d.as_object_mut()) {
            data.remove("train");
            data.remove("dev");
        }
        merge_json(&mut merged, given);
        let mut experiment: Self = serde_path_to_error::deserialize(merged).map_err(|e| {
            let key = e.path().to_string();
            located(&key, format!("{key}: {}", e.inner()))
        })?;
        // The model's feature sizes follow data.features: one place to set them.
        let dims: Vec<usize> = experiment.data.features.iter().map(|f| f.dim).collect();
        if !experiment.model.feature_dims.is_empty() && experiment.model.feature_dims != dims {
            return Err(located(
                "model.feature_dims",
                format!(
                    "model.feature_dims: expected the dims of data.features ({dims:?}), found \
                     {:?}; set each column's dim in data.features",
                    experiment.model.feature_dims
                ),
            ));
        }
        experiment.model.feature_dims = dims;
        experiment
            .validate()
            .map_err(|(key, message)| located(&key, message))?;
        Ok(experiment)
    }

    /// Values that parse but make no sense are errors naming the key and the range expected.
    fn validate(&self) -> Result<(), (String, String)> {
        self.validate_model()?;
        self.validate_data()?;
        self.validate_train()?;
        self.validate_distill()
    }

    /// The network's settings, as the model checks them, named as the experiment's keys.
    fn validate_model(&self) -> Result<(), (String, String)> {
        check_config(&self.model).map_err(|unfit| {
            // The network's settings are the experiment's `[model]` keys, but for the feature
            // columns' sizes, which `data.features` sets.
            let keys: Vec<String> = unfit
                .settings
                .iter()
                .map(|&s| match s {
                    "feature_dims" => "data.features".to_string(),
                    _ => format!("model.{s}"),
                })
                .collect();
            let message = format!("{}: expected {}", keys.join(" and "), unfit.expected);
            (keys[0].clone(), message)
        })
    }

    /// `[data]`, and the `[model]` settings that depend on it.
    fn validate_data(&self) -> Result<(), (String, String)> {
        let (d, m) = (&self.data, &self.model);
        let columns = self.data.columns();
        let mut distinct = columns.feature_columns.clone();
        distinct.sort_unstable();
        distinct.dedup();
        first_unmet(&[
            (
                distinct.len() == columns.feature_columns.len()
                    && !distinct.contains(&columns.word_column)
                    && !distinct.contains(&columns.tag_column),
                "data.features",
                "columns other than data.word_column and data.tag_column, each once",
            ),
            (d.document_tokens >= 1, "data.document_tokens", "at least 1"),
            (
                m.mention_dim == 0 || d.context == Context::Document,
                "model.mention_dim",
                "0 unless data.context = \"document\" (mention casing comes from documents)",
            ),
            (
                d.train_scheme != TagScheme::Iob1,
                "data.train_scheme",
                "iob2 or iobes (iob1 files are converted on reading)",
            ),
            (d.min_word_count >= 1, "data.min_word_count", "at least 1"),
            (
                d.dictionaries.is_empty() || m.dictionary_dim > 0,
                "model.dictionary_dim",
                "a size of at least 1 (5, say) for the features of data.dictionaries",
            ),
            (
                (0.0..=1.0).contains(&d.singleton_unk),
                "data.singleton_unk",
                "a probability in [0, 1]",
            ),
            (d.max_word_len >= 1, "data.max_word_len", "at least 1"),
            (d.lm_min_count >= 1, "data.lm_min_count", "at least 1"),
        ])
    }

    /// `[train]`.
    fn validate_train(&self) -> Result<(), (String, String)> {
        let t = &self.train;
        first_unmet(&[
            (t.epochs >= 1, "train.epochs", "at least 1"),
            (t.batch_size >= 1, "train.batch_size", "at least 1"),
            (
                (0.0..1.0).contains(&t.dictionary_dropout),
                "train.dictionary_dropout",
                "a probability in [0, 1)",
            ),
            (
                t.eval_batch_size >= 1,
                "train.eval_batch_size",
                "at least 1",
            ),
            (
                t.lr > 0.0 && t.lr.is_finite(),
                "train.lr",
                "a positive number",
            ),
            (
                t.lr_decay >= 0.0 && t.lr_decay.is_finite(),
                "train.lr_decay",
                "zero or positive",
            ),
            (
                t.encoder_lr > 0.0 && t.encoder_lr.is_finite(),
                "train.encoder_lr",
                "a positive number",
            ),
            (
                t.encoder_warmup >= 0.0 && t.encoder_warmup.is_finite(),
                "train.encoder_warmup",
                "zero or more epochs",
            ),
            (
                (0.0..1.0).contains(&t.encoder_weight_decay),
                "train.encoder_weight_decay",
                "a number in [0, 1)",
            ),
            (
                (0.0..1.0).contains(&t.momentum),
                "train.momentum",
                "a number in [0, 1)",
            ),
            (
                (0.0..1.0).contains(&t.adam_beta1) && (0.0..1.0).contains(&t.adam_beta2),
                "train.adam_beta1 and train.adam_beta2",
                "numbers in [0, 1)",
            ),
            (
                t.adam_epsilon > 0.0 && t.adam_epsilon.is_finite(),
                "train.adam_epsilon",
                "a positive number",
            ),
            (
                t.clip_norm >= 0.0,
                "train.clip_norm",
                "zero (off) or positive",
            ),
            (
                !t.output.as_os_str().is_empty(),
                "train.output",
                "a directory path",
            ),
        ])
    }

    /// `[distill]`.
    fn validate_distill(&self) -> Result<(), (String, String)> {
        let d = &self.distill;
        first_unmet(&[
            (
                (0.0..=1.0).contains(&d.weight),
                "distill.weight",
                "a number in [0, 1] (1: the teachers alone)",
            ),
            (
                d.temperature > 0.0 && d.temperature <= nertrain_tagger::MAX_TEMPERATURE,
                "distill.temperature",
                "a number above 0, at most 100",
            ),
            (
                d.unlabelled.is_empty() || !d.teachers.is_empty(),
                "distill.unlabelled",
                "none without distill.teachers, whose marginals are all it is learnt from",
            ),
        ])
    }

    /// Every setting at its default, with empty paths where the user must give one.
    fn template() -> Self {
        Self {
            data: DataConfig::new(PathBuf::new(), PathBuf::new()),
            model: NetworkConfig::new(),
            crf: CrfOptions::new(),
            train: TrainConfig::new(),
            distill: DistillConfig::new(),
        }
    }

    /// The resolved experiment as TOML, every default written out: what `config.toml` holds.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("an experiment serialises")
    }
}

/// Where an error about `key` (`section.key`, or `a and b`) comes from: the override that set it,
/// or else the file, at the key's line when the file has it.
fn locate(text: &str, overrides: &[String], key: &str, message: String) -> ConfigError {
    let key = key.split_whitespace().next().unwrap_or_default();
    let related = |a: &str, b: &str| a == b || a.starts_with(&format!("{b}."));
    let set_by = overrides.iter().rev().find(|item| {
        let set = item
            .split_once('=')
            .map_or(item.as_str(), |(k, _)| k)
            .trim();
        related(set, key) || related(key, set)
    });
    let origin = match set_by {
        Some(item) => ConfigOrigin::Override(item.clone()),
        None => ConfigOrigin::File {
            path: None,
            line: line_of(text, key),
        },
    };
    ConfigError { origin, message }
}

/// The line of `text` where the TOML key `section.key` is written, or its section when the key
/// itself is not there.
fn line_of(text: &str, key: &str) -> Option<usize> {
    let document = toml::de::DeTable::parse(text).ok()?;
    let mut table = document.get_ref();
    let mut found = None;
    for part in key.split('.') {
        let Some((name, value)) = table.iter().find(|(name, _)| name.get_ref() == part) else {
            break;
        };
        found = Some(name.span().start);
        match value.get_ref() {
            toml::de::DeValue::Table(inner) => table = inner,
            _ => break,
        }
    }
    found.map(|at| text[..at].matches('\n').count() + 1)
}

/// `a.b.c=value`: the value is read as TOML (`0.5`, `true`, `"iob2"`), or else as a bare string.
fn apply_override(table: &mut toml::Table, item: &str) -> Result<(), String> {
    // TOML would read a second line as another setting, and only the first would be kept.
    if item.contains(['\n', '\r']) {
        return Err("expected section.key=value on one line, found a line break".into());
    }
    let (key, raw) = item
        .split_once('=')
        .ok_or_else(|| "expected section.key=value".to_string())?;
    let value = format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()));
    let mut parts: Vec<&str> = key.trim().split('.').collect();
    let last = parts
        .pop()
        .filter(|k| !k.is_empty())
        .ok_or_else(|| "empty key".to_string())?;
    let mut node = table;
    for part in parts {
        node = node
            .entry(part)
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()
            .ok_or_else(|| format!("{part} is not a section"))?;
    }
    node.insert(last.to_string(), value);
    Ok(())
}

/// The first setting whose value is a float that is not finite (`nan`, `inf`), as
/// `(section.key, value)`.
fn non_finite(table: &toml::Table, prefix: &str) -> Option<(String, f64)> {
    table.iter().find_map(|(key, value)| {
        let key = format!("{prefix}{key}");
        match value {
            toml::Value::Float(v) if !v.is_finite() => Some((key, *v)),
            toml::Value::Table(inner) => non_finite(inner, &format!("{key}.")),
            _ => None,
        }
    })
}

/// Every key the user wrote must be one the experiment knows.
fn check_keys(
    given: &serde_json::Value,
    known: &serde_json::Value,
    prefix: &str,
) -> Result<(), (String, String)> {
    let (Some(given), Some(known)) = (given.as_object(), known.as_object()) else {
        return Ok(());
    };
    for (key, value) in given {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match known.get(key) {
            Some(known_value) => check_keys(value, known_value, &path)?,
            None => {
                let closest = known.keys().min_by_key(|k| strsim::levenshtein(k, key));
                let hint = match closest {
                    Some(k) if strsim::levenshtein(k, key) <= 3.max(key.len() / 3) => {
                        let full = if prefix.is_empty() {
                            k.clone()
                        } else {
                            format!("{prefix}.{k}")
                        };
                        format!("; did you mean `{full}`?")
                    }
                    _ => format!(
                        "; known keys here: {}",
                        known.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                };
                return Err((path.clone(), format!("unknown key `{path}`{hint}")));
            }
        }
    }
    Ok(())
}

/// The first check not met, as its key and `key: expected ...`.
fn first_unmet(checks: &[(bool, &str, &str)]) -> Result<(), (String, String)> {
    match checks.iter().find(|(ok, _, _)| !ok) {
        Some((_, key, expected)) => Err((key.to_string(), format!("{key}: expected {expected}"))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "[data]\ntrain = \"a.txt\"\ndev = \"b.txt\"\n";

    #[test]
    fn defaults_fill_what_is_not_given() {
        let e = Experiment::parse(MINIMAL, &[]).unwrap();
        assert_eq!(e.train.batch_size, 10);
        assert_eq!(e.model.hidden, 100);
        assert_eq!(e.data.tag_column, -1);
        assert_eq!(e.data.scheme, None);
    }

    #[test]
    fn unknown_keys_suggest_the_closest() {
        let err = Experiment::parse(&format!("{MINIMAL}[model]\nhiden = 3\n"), &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown key `model.hiden`; did you mean `model.hidden`?"
        );
        let err = Experiment::parse(&format!("{MINIMAL}[trian]\n"), &[]).unwrap_err();
        assert!(err.to_string().contains("did you mean `train`?"), "{err}");
    }

    #[test]
    fn wrong_types_are_errors() {
        let err =
            Experiment::parse(&format!("{MINIMAL}[train]\nepochs = \"many\"\n"), &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "train.epochs: invalid type: string \"many\", expected usize"
        );
        let err = Experiment::parse("[data]\ntrain = \"a\"\n", &[]).unwrap_err();
        assert!(err.to_string().contains("missing field `dev`"), "{err}");
    }

    #[test]
    fn overrides_are_applied_and_checked() {
        let e = Experiment::parse(MINIMAL, &["train.lr=0.1".into(), "data.scheme=iob1".into()])
            .unwrap();
        assert_eq!(e.train.lr, 0.1);
        assert_eq!(e.data.scheme, Some(TagScheme::Iob1));
        let err = Experiment::parse(MINIMAL, &["train.lrr=0.1".into()]).unwrap_err();
        assert!(
            err.to_string().contains("did you mean `train.lr`?"),
            "{err}"
        );
        assert!(Experiment::parse(MINIMAL, &["train.epochs=x".into()]).is_err());
        assert!(Experiment::parse(MINIMAL, &["novalue".into()]).is_err());
        for item in ["train.lr=0.1\ntrain.epochs=3", "train.lr=0.1\r\n"] {
            let err = Experiment::parse(MINIMAL, &[item.into()]).unwrap_err();
            assert!(err.is_usage(), "{err}");
            assert!(err.to_string().contains("on one line"), "{err}");
            assert!(err.to_string().contains("train.lr=0.1"), "{err}");
        }
    }

    #[test]
    fn out_of_range_values_name_the_key() {
        let cases = [
            ("train.lr=0", "train.lr: expected a positive number"),
            (
                "train.lr_decay=-1",
                "train.lr_decay: expected zero or positive",
            ),
            (
                "model.dropout=1.0",
                "model.dropout: expected a probability in [0, 1)",
            ),
            (
                "train.batch_size=0",
                "train.batch_size: expected at least 1",
            ),
            (
                "data.train_scheme=iob1",
                "data.train_scheme: expected iob2 or iobes",
            ),
        ];
        for (set, expected) in cases {
            let err = Experiment::parse(MINIMAL, &[set.into()]).unwrap_err();
            assert!(err.message.starts_with(expected), "{set}: {err}");
            assert!(err.is_usage(), "{set}: the override is at fault");
            assert!(
                err.to_string().starts_with(&format!("--set {set}: ")),
                "{err}"
            );
        }
    }

    #[test]
    fn file_errors_name_the_line_of_the_key() {
        let text = format!("{MINIMAL}\n[train]\nlr = 0.1\nepochs = 0\n");
        let err = Experiment::parse(&text, &[]).unwrap_err();
        assert!(!err.is_usage());
        assert_eq!(
            err.origin,
            ConfigOrigin::File {
                path: None,
                line: Some(7)
            }
        );
        let err = Experiment::load(Path::new("/no/such/file.toml"), &[]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("/no/such/file.toml: cannot read"),
            "{err}"
        );
        // The same mistake, made on the command line, is the override's.
        let err = Experiment::parse(MINIMAL, &["train.epochs=0".into()]).unwrap_err();
        assert_eq!(err.origin, ConfigOrigin::Override("train.epochs=0".into()));
    }

    #[test]
    fn resolved_config_round_trips() {
        let e = Experiment::parse(MINIMAL, &["model.dropout=0.25".into()]).unwrap();
        let again = Experiment::parse(&e.to_toml(), &[]).unwrap();
        assert_eq!(again.to_toml(), e.to_toml());
    }
}
