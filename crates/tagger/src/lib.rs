//! The inference core: a trained nertrain model loaded, and the one path from text to entities.
//! Every interface calls it (the `nertrain` binary's `tag` and `eval`, `nertrain serve`, the
//! Python module) and so does training, for its dev and test scores: the same input gives the
//! same output through each.
//!
//! The pipeline, one type per step:
//!
//! 1. **Text → tokens.** The model's own [`Tokenizer`] (saved with it when it was trained) cuts
//!    each text into words with character offsets, as its training data was cut.
//! 2. **Tokens → sentences.** The tokenizer ends sentences where its training data did; a
//!    sentence longer than [`MAX_SEGMENT_TOKENS`] is read in segments, so any input runs in bounded
//!    memory.
//! 3. **Texts → documents.** A model that reads documents reads the sentences of one document
//!    together ([`Layout`]): a text, or a run of lines up to a blank one.
//! 4. **Sentences → predictions.** Batches, emissions and CRF decoding (a [`Decoder`] over the
//!    loaded network), with entity confidences, marginals and n-best paths on request
//!    ([`TagOptions`]: the model's own, [`Tagger::options`], with a caller's changes).
//! 5. **Predictions → entities.** Each text's [`Tagged`]: its tokens and tags, and its entities
//!    with labels, character offsets and confidences; [`Tagged::into_record`] is the JSON object
//!    that `nertrain tag --format json` prints.
//!
//! Offsets count Unicode code points (what Python's `str` and spaCy slice with), end exclusive.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # // A model `nertrain fit` wrote: the binary's tests keep one of the sample.
//! # let run = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
//! #     .join("../cli/tests/fixtures/before-tokenizers/sentence");
//! use nertrain_tagger::{Layout, Tagger};
//!
//! let tagger = Tagger::load(&run, &burn::tensor::Device::flex())?;
//! let texts = ["Anna Schmidt, who works for Siemens, arrived in Lisbon on Monday."];
//! let tagged = tagger.tag(&texts, Layout::Texts, tagger.options())?;
//! assert_eq!(tagged[0].entities.len(), 3); // Anna Schmidt, Siemens, Lisbon
//! for entity in &tagged[0].entities {
//!     // Offsets are code points: slice with `chars()`, as Python slices a `str`.
//!     let text: String = texts[0].chars().skip(entity.start).take(entity.end - entity.start).collect();
//!     assert_eq!(text, entity.text);
//!     assert!(tagger.info().labels.contains(&entity.label));
//! }
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod decode;
mod encoder_cache;
mod error;
mod evaluate;
mod forced;
mod options;
mod record;
mod stream;
mod teach;
mod threads;

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::tensor::Device;
use nertrain_data::{
    CaseRule, Context, Corpus, DataError, Dictionary, Entry, Span, SubwordTokenizer, TagScheme,
    Tokenizer, TokenizerSpec, Vocabularies, read_dictionary,
};
use nertrain_model::files::DictionaryMeta;
use nertrain_model::{ModelFiles, ModelMeta, Network, WordGates};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

pub use decode::{
    DecodeSpec, Decoder, MAX_BATCH_TOKENS, Prediction, RankedPath, TagOptions, entity_confidences,
    entity_types,
};
pub use encoder_cache::EncoderCacheTally;
pub use error::Error;
pub use evaluate::{Evaluation, FileEvaluation, FileScores, Scored, SpanEvaluation};
/// A word with its character offsets: what [`Tagger::tokenize`] gives and [`Tagger::tag_tokens`] reads.
pub use nertrain_data::Token;
pub use options::{
    MAX_BATCH_SENTENCES, MAX_CONSISTENCY, MAX_DROPOUT_SAMPLES, MAX_NBEST, thread_pool,
};
pub use record::{Alternative, Entity, Record, TokenProbabilities, html_page, record_size_bound};
pub use stream::TagStream;
pub use teach::MAX_TEMPERATURE;
use threads::Threads;
pub use threads::lock;

/// A result of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// A sentence longer than this many tokens is read in segments of at most this many, each cut
/// after the last sentence-final stop within it when there is one.
pub const MAX_SEGMENT_TOKENS: usize = 250;

/// The largest bias ([`Tagger::with_biases`]) a label may have: emission scores are a few units,
/// and past this every word would be the label's.
pub const MAX_BIAS: f64 = nertrain_model::files::MAX_BIAS;

/// The most words one text may have: its tokens, segments and batches take memory in proportion
/// to its words, so a bound on them bounds the memory any input takes.
pub const MAX_TEXT_WORDS: usize = 1_000_000;

/// Interfaces that take texts without end (`tag --input`, Python's `Tagger.tag`) tag them in
/// chunks of this many texts, or of this many bytes, so that any input runs in bounded memory
/// and a call can stop between two; [`Chunker`] says where a chunk ends.
pub const CHUNK_TEXTS: usize = 1000;
/// See [`CHUNK_TEXTS`].
pub const CHUNK_BYTES: usize = 1 << 20;

/// Where a stream of texts is cut into the chunks tagged together: once a chunk is full, at the
/// next text that ends a document (any text, unless lines of a model that reads documents; then
/// a blank line), and whatever comes when a chunk holds eight times as much (a longer document
/// is read in segments, as a long one is anyway). Every interface cuts the same texts alike, so
/// they give the same output.
#[derive(Debug, Clone)]
pub struct Chunker {
    documents_span_texts: bool,
    texts: usize,
    bytes: usize,
}

impl Chunker {
    /// A chunker for texts laid out as `layout`, tagged by a model that reads documents or not.
    pub fn new(layout: Layout, reads_documents: bool) -> Self {
        Self {
            documents_span_texts: layout == Layout::Lines && reads_documents,
            texts: 0,
            bytes: 0,
        }
    }

    /// Counts `text` into the current chunk: whether the chunk ends after it.
    pub fn ends_after(&mut self, text: &str) -> bool {
        self.texts += 1;
        self.bytes += text.len();
        let full = self.texts >= CHUNK_TEXTS || self.bytes >= CHUNK_BYTES;
        let overfull = self.texts >= 8 * CHUNK_TEXTS || self.bytes >= 8 * CHUNK_BYTES;
        let between = !self.documents_span_texts || text.trim().is_empty();
        let ends = (full && between) || overfull;
        if ends {
            self.texts = 0;
            self.bytes = 0;
        }
        ends
    }
}

/// How a list of texts maps onto documents, for a model that reads documents (others read every
/// sentence alone either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Each text is one document.
    Texts,
    /// The texts are a file's lines: a run of lines up to a blank one is one document, and each
    /// line ends a sentence.
    Lines,
}

/// A trained model loaded for tagging text, with the tokenizer it was trained with.
pub struct Tagger {
    /// Its description.
    meta: ModelMeta,
    /// Its vocabularies.
    vocab: Vocabularies,
    /// The network, for inference.
    network: Network,
    /// Where its tensors are.
    device: Device,
    /// Kept across calls: `tag` predicts a long input chunk by chunk, and most words of a chunk
    /// were met in the ones before.
    word_gates: WordGates,
    tokenizer: Tokenizer,
    /// The dictionaries whose phrases are features of its words, when it has them.
    dictionary: Option<Dictionary>,
    /// Its pretrained encoder's tokenizer, when it has an encoder.
    subwords: Option<SubwordTokenizer>,
    /// What [`ModelInfo`] says of them: the stored ones', or those extended at load.
    dictionary_meta: Option<DictionaryMeta>,
    dir: PathBuf,
    /// Where its calls run, one at a time.
    threads: Threads,
    /// By label, the confidence below which the best path's entities are left out: the
    /// model's `thresholds.json`, or those a caller set ([`Tagger::with_thresholds`]).
    thresholds: BTreeMap<String, f64>,
    /// By label, what is added to the emission scores of its tags when the best path is chosen
    /// ([`Tagger::with_biases`]): the model's `thresholds.json`, or those a caller set.
    biases: BTreeMap<String, f64>,
    /// Where a frozen encoder's layers are kept between commands, when a caller names a store
    /// ([`Tagger::with_encoder_cache`]).
    encoder_cache: Option<encoder_cache::EncoderCache>,
    /// Why a store a caller named is not used ([`Tagger::encoder_cache_note`]).
    encoder_cache_note: Option<String>,
}

/// What a loaded model is: `nertrain serve`'s `GET /model`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// The entity types it finds.
    pub labels: Vec<String>,
    /// Its tags, in the order of marginals.
    pub tags: Vec<String>,
    /// The tag scheme of its training files, which its tags are written in.
    pub scheme: TagScheme,
    /// What it reads a sentence with: the sentence alone, or its document.
    pub context: Context,
    /// For a document-level model, its document consistency weight (0 otherwise).
    pub consistency: f64,
    /// How it cuts text: `treebank`, or `bert` for models from before tokenizers were saved.
    pub tokenizer: String,
    /// Its best epoch's dev F1, when the run recorded it.
    pub dev_f1: Option<f64>,
    /// Its test F1, when the run scored a test set.
    pub test_f1: Option<f64>,
    /// Whether it was trained on the dev set too (its dev F1 is then not held out).
    pub trained_on_dev: bool,
    /// The nertrain that trained it.
    pub trained_by: String,
    /// The nertrain running it.
    pub nertrain_version: String,
    /// The dictionaries whose phrases are features of its words, when it has them: their
    /// labels, entries and SHA-256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dictionary: Option<DictionaryMeta>,
    /// By label, the confidence below which entities are left out ([`Tagger::thresholds`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub thresholds: BTreeMap<String, f64>,
    /// By label, the bias of its tags' emission scores in decoding ([`Tagger::biases`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub biases: BTreeMap<String, f64>,
}

/// One text tagged: its tokens, the best path's tags, and what [`TagOptions`] asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Tagged {
    /// The text as given.
    pub text: String,
    /// Its words with character offsets.
    pub tokens: Vec<Token>,
    /// The best path's tag for each token, in the training files' scheme.
    pub tags: Vec<String>,
    /// The best path's entities, with confidences when asked for.
    pub entities: Vec<Entity>,
    /// With `marginals`: for each token, p(tag | text) for every tag of the model, in the order
    /// of [`Tagger::tags`].
    pub marginals: Vec<Vec<f64>>,
    /// With `nbest > 1`: the best paths, best first, with their probabilities. A text of several
    /// sentences keeps only its best path, whose probability is the product of its sentences'.
    pub nbest: Vec<TagPath>,
    /// With `confidence`, `marginals` or `nbest > 1`: ln p(best path | text), the sum of its
    /// sentences'.
    pub log_probability: Option<f64>,
    /// With `representation`: the mean of the BiLSTM's output over the text's words.
    pub representation: Vec<f32>,
    /// With `dropout_samples`: each token's mutual information between its tag and the
    /// model's weights (BALD), in nats.
    pub mutual_information: Vec<f64>,
}

/// One tag sequence of a text and its probability under the model.
#[derive(Debug, Clone, PartialEq)]
pub struct TagPath {
    /// A tag per token, in the training files' scheme.
    pub tags: Vec<String>,
    /// The path's entities.
    pub entities: Vec<Entity>,
    /// p(path | text).
    pub probability: f64,
}

impl Tagger {
    /// Loads a model directory written by `nertrain fit`, to tag on a pool of its own of
    /// `RAYON_NUM_THREADS` threads, or one per core.
    pub fn load(dir: &Path, device: &Device) -> Result<Self> {
        Self::load_with_threads(dir, device, None)
    }

    /// [`Self::load`], to tag on `threads` threads.
    pub fn load_with_threads(dir: &Path, device: &Device, threads: Option<usize>) -> Result<Self> {
        let threads = Threads::new(threads)?;
        let files = ModelFiles::new(dir);
        let (meta, vocab, network) = files.load(device)?;
        let tokenizer = files.tokenizer(&meta)?;
        let dictionary = files.read_dictionary(&meta)?;
        let subwords = files.read_subwords(&meta)?;
        let labels = entity_types(vocab.tags.items());
        let stored = files
            .read_thresholds(&labels)?
            .map(|s| s.labels)
            .unwrap_or_default();
        let thresholds = stored
            .iter()
            .map(|(l, t)| (l.clone(), t.threshold))
            .collect();
        let biases = stored
            .iter()
            .filter(|(_, t)| t.bias != 0.0)
            .map(|(l, t)| (l.clone(), t.bias))
            .collect();
        Ok(Self {
            thresholds,
            biases,
            dictionary,
            subwords,
            dictionary_meta: meta.dictionary.clone(),
            meta,
            vocab,
            network: network.valid(),
            device: device.clone(),
            word_gates: WordGates::default(),
            tokenizer,
            dir: dir.to_path_buf(),
            threads,
            encoder_cache: None,
            encoder_cache_note: None,
        })
    }

    /// What the model is, with the scores its run recorded.
    pub fn info(&self) -> ModelInfo {
        let meta = &self.meta;
        let files = ModelFiles::new(&self.dir);
        ModelInfo {
            labels: entity_types(self.tags()),
            tags: self.tags().to_vec(),
            scheme: meta.file_scheme,
            context: if meta.document.is_some() {
                Context::Document
            } else {
                Context::Sentence
            },
            consistency: meta.document.map_or(0.0, |d| d.consistency),
            tokenizer: match meta.tokenizer {
                Some(TokenizerSpec::Treebank { .. }) => "treebank",
                Some(TokenizerSpec::Bert) | None => "bert",
            }
            .into(),
            dev_f1: files.read_dev_scores().ok().map(|s| s.scores.overall.f1),
            test_f1: files.read_test_scores().ok().map(|s| s.scores.overall.f1),
            trained_on_dev: meta.trained_on_dev,
            trained_by: meta.nertrain_version.clone(),
            nertrain_version: env!("CARGO_PKG_VERSION").into(),
            dictionary: self.dictionary_meta.clone(),
            thresholds: self.thresholds.clone(),
            biases: self.biases.clone(),
        }
    }

    /// By label, the confidence below which [`Self::tag`] leaves the best path's entities out
    /// (unless [`TagOptions::thresholds`] is off): the model's `thresholds.json`, or those set with
    /// [`Self::with_thresholds`]. Empty: every entity is kept.
    pub fn thresholds(&self) -> &BTreeMap<String, f64> {
        &self.thresholds
    }

    /// The tagger with `thresholds` in place of the model's (an empty map keeps every entity):
    /// each a number from 0 to 1 for one of the model's entity types.
    pub fn with_thresholds(mut self, thresholds: BTreeMap<String, f64>) -> Result<Self> {
        self.check_labels("threshold", &thresholds, 0.0..=1.0)?;
        self.thresholds = thresholds;
        Ok(self)
    }

    /// By label, what [`Self::tag`] adds to the emission scores of the label's tags when it
    /// chooses the best path (unless [`TagOptions::thresholds`] is off): above 0, more of its
    /// entities are found (recall bought with precision), below 0 fewer. The path stays
    /// well-formed; confidences, marginals and n-best paths are the model's own.
    pub fn biases(&self) -> &BTreeMap<String, f64> {
        &self.biases
    }

    /// The tagger with `biases` in place of the model's (an empty map: none), each from
    /// -[`MAX_BIAS`] to [`MAX_BIAS`] for one of the model's entity types.
    pub fn with_biases(mut self, biases: BTreeMap<String, f64>) -> Result<Self> {
        self.check_labels("bias", &biases, -MAX_BIAS..=MAX_BIAS)?;
        self.biases = biases.into_iter().filter(|(_, b)| *b != 0.0).collect();
        Ok(self)
    }

    /// Whether each of `values` is for one of the model's entity types and in `range`.
    fn check_labels(
        &self,
        option: &'static str,
        values: &BTreeMap<String, f64>,
        range: std::ops::RangeInclusive<f64>,
    ) -> Result<()> {
        let labels = entity_types(self.tags());
        for (label, value) in values {
            let message = if !labels.contains(label) {
                format!("{label}: not a label of the model ({})", labels.join(", "))
            } else if !range.contains(value) {
                let (low, high) = range.clone().into_inner();
                format!("{label}={value}: expected a number from {low} to {high}")
            } else {
                continue;
            };
            return Err(Error::InvalidOption { option, message });
        }
        Ok(())
    }

    /// The tagger with the entries of dictionary `files` added to the model's, or, with
    /// `replace`, in place of the model's entries of every label the files give: a new name goes
    /// into the list, not into a training run. Entries match case unless their line says
    /// `ignore-case`. Every label must be one the model has dictionary features for.
    pub fn with_dictionaries(self, files: &[PathBuf], replace: bool) -> Result<Self> {
        Ok(self.with_dictionaries_read(files, replace)?.0)
    }

    /// [`Self::with_dictionaries`], with what reading each file found, as `fit` reports it
    /// (its entries, those given twice, those left out for their length).
    pub fn with_dictionaries_read(
        mut self,
        files: &[PathBuf],
        replace: bool,
    ) -> Result<(Self, Vec<String>)> {
        if files.is_empty() {
            return Ok((self, Vec::new()));
        }
        let Some(stored) = &self.dictionary else {
            return Err(Error::InvalidOption {
                option: "dictionary",
                message: format!(
                    "{} was trained without dictionaries: it has no features to read one with",
                    self.dir.display()
                ),
            });
        };
        let labels = stored.labels().to_vec();
        let mut added = Vec::new();
        let mut reads = Vec::new();
        for path in files {
            let (entries, counts) = read_dictionary(path, CaseRule::MatchCase, &self.tokenizer)?;
            reads.push(counts.summary(path));
            if let Some(entry) = entries.iter().find(|e| !labels.contains(&e.label)) {
                return Err(DataError::file(
                    path,
                    format!(
                        "label {} is not one of the model's dictionary labels ({})",
                        entry.label,
                        labels.join(", ")
                    ),
                )
                .into());
            }
            added.extend(entries);
        }
        let given: Vec<String> = added.iter().map(|e| e.label.clone()).collect();
        let mut entries: Vec<Entry> = stored
            .entries()
            .iter()
            .filter(|e| !(replace && given.contains(&e.label)))
            .cloned()
            .collect();
        entries.extend(added);
        let dictionary =
            Dictionary::new(labels, entries).map_err(|message| Error::InvalidOption {
                option: "dictionary",
                message,
            })?;
        self.dictionary_meta = Some(DictionaryMeta::of(&dictionary));
        self.dictionary = Some(dictionary);
        Ok((self, reads))
    }

    /// The device it runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The model directory it was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The model's description (`model.json`).
    pub fn meta(&self) -> &ModelMeta {
        &self.meta
    }

    /// The model's tags, in the order of [`Tagged::marginals`].
    pub fn tags(&self) -> &[String] {
        self.vocab.tags.items()
    }

    /// The model's tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The model's vocabularies.
    pub fn vocab(&self) -> &Vocabularies {
        &self.vocab
    }

    /// The network, for inference.
    pub fn network(&self) -> &Network {
        &self.network
    }

    /// Tags `texts`; one [`Tagged`] per text, in order. `layout` says which texts a model that
    /// reads documents reads together.
    pub fn tag<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        layout: Layout,
        options: TagOptions,
    ) -> Result<Vec<Tagged>> {
        let documents = match layout {
            Layout::Texts => (0..texts.len()).map(|i| i..i + 1).collect(),
            Layout::Lines => line_documents(texts),
        };
        self.tag_documents(texts, &documents, options)
    }

    /// Tags `texts`, reading each of `documents` (consecutive ranges of them) together; texts
    /// outside every range are documents alone. A tagger may be shared by threads: their calls
    /// run one at a time, each on all of the tagger's threads.
    pub fn tag_documents<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        documents: &[Range<usize>],
        options: TagOptions,
    ) -> Result<Vec<Tagged>> {
        self.run(|| self.tag_untokenized(texts, documents, options))
    }

    /// Runs `work` on the tagger's threads once other threads' calls have ended.
    fn run<T: Send>(&self, work: impl FnOnce() -> Result<T> + Send) -> Result<T> {
        self.threads.install(work)?
    }

    /// Runs `work` on the tagger's threads, holding the turn that each call takes, so that the
    /// tagger's calls inside it run there directly: for a caller that tags many times in a row
    /// and reads and writes in between (`tag --input`), whose work then stays on one thread.
    /// Other threads' calls wait until it ends.
    pub fn install<T: Send>(&self, work: impl FnOnce() -> T + Send) -> Result<T> {
        self.threads.install(work)
    }

    /// The threads the tagger works on.
    pub fn threads(&self) -> usize {
        self.threads.count()
    }

    /// Runs `work` with the tagger on its threads, beside any call running there and without
    /// waiting for it: for work that only reads the model (cutting texts into words,
    /// [`Self::tokenize`]), from threads that must not block (an async runtime's).
    pub fn spawn(
        self: &std::sync::Arc<Self>,
        work: impl FnOnce(&Tagger) + Send + 'static,
    ) -> Result<()> {
        let tagger = self.clone();
        self.threads.spawn(move || work(&tagger))
    }

    /// `text` cut into words as [`Self::tag`] cuts it, or `None` when it has more than a text
    /// may have ([`MAX_TEXT_WORDS`]): for callers that need the words first (to bound what a
    /// request costs) and then tag them with [`Self::tag_tokens`].
    pub fn tokenize(&self, text: &str) -> Option<Vec<Token>> {
        self.tokenizer.tokens_at_most(text, MAX_TEXT_WORDS)
    }

    /// Tags `texts`, each a document alone, from their words as [`Self::tokenize`] cut them
    /// (`tokens[i]` of `texts[i]`): the same as [`Self::tag`] with [`Layout::Texts`], without
    /// cutting them again.
    pub fn tag_tokens<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        tokens: Vec<Vec<Token>>,
        options: TagOptions,
    ) -> Result<Vec<Tagged>> {
        if tokens.len() != texts.len() {
            return Err(Error::InvalidOption {
                option: "tokens",
                message: format!("{} token lists for {} texts", tokens.len(), texts.len()),
            });
        }
        self.tag_tokens_forced(texts, tokens, &[], options)
    }

    /// [`Self::tag_tokens`] with `forced[i]` (entities in code points of `texts[i]`, none
    /// overlapping another; missing or empty: none) taken as given: each text is decoded by
    /// the best path through them, and its confidences and marginals are conditioned on them.
    /// An entity covers every word it touches; one that touches none, crosses a sentence end,
    /// overlaps another or has a label the model lacks is an error ([`Error::Forced`]).
    pub fn tag_tokens_forced<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        tokens: Vec<Vec<Token>>,
        forced: &[Vec<nertrain_annotate::CharSpan>],
        options: TagOptions,
    ) -> Result<Vec<Tagged>> {
        if tokens.len() != texts.len() || forced.len() > texts.len() {
            return Err(Error::InvalidOption {
                option: "tokens",
                message: format!(
                    "{} token lists and {} forced lists for {} texts",
                    tokens.len(),
                    forced.len(),
                    texts.len()
                ),
            });
        }
        let documents: Vec<Range<usize>> = (0..texts.len()).map(|i| i..i + 1).collect();
        self.run(|| self.tag_tokenized(texts, tokens, &documents, forced, options))
    }

    /// Tags the sentences of a CoNLL file read with the model's columns
    /// ([`ModelMeta::columns`]), its `-DOCSTART-` blocks the documents: each sentence is one
    /// text, its words joined by spaces. Its tags are not read. For words already cut, and for
    /// a model that reads feature columns, which text does not have.
    pub fn tag_corpus<L: Sync>(
        &self,
        corpus: &Corpus<L>,
        options: TagOptions,
    ) -> Result<Vec<Tagged>> {
        let predictions = self.predict_corpus(corpus, options)?;
        Ok(corpus
            .sentences
            .iter()
            .zip(predictions)
            .map(|(sentence, prediction)| {
                let (text, tokens) = nertrain_data::words_as_text(&sentence.words);
                tagged(&text, tokens, prediction)
            })
            .collect())
    }

    /// Predicts a CoNLL corpus's sentences, with their feature values, its `-DOCSTART-` blocks
    /// read as documents: what [`Self::tag_corpus`] and [`Self::evaluate`] tag.
    pub(crate) fn predict_corpus<L: Sync>(
        &self,
        corpus: &Corpus<L>,
        options: TagOptions,
    ) -> Result<Vec<Prediction>> {
        self.predict_corpus_within(corpus, &[], options)
    }

    /// [`Self::predict_corpus`] with the tags each sentence may have: `allowed[i]`, where
    /// given, is `[len * tags]` for sentence `i`.
    pub(crate) fn predict_corpus_within<L: Sync>(
        &self,
        corpus: &Corpus<L>,
        allowed: &[Option<Vec<bool>>],
        options: TagOptions,
    ) -> Result<Vec<Prediction>> {
        let (words, features) = corpus_words(corpus);
        let documents = corpus.documents(usize::MAX);
        self.run(|| self.predict(&words, &features, &documents, allowed, options))
    }

    /// The inputs the model reads for a CoNLL corpus's sentences as [`Self::evaluate`] tags
    /// them (its `-DOCSTART-` blocks read as documents): word, character, casing and feature
    /// ids, mention casing, dictionary places and the encoder's windows, as its training made
    /// them for the same sentences.
    pub fn corpus_inputs<L>(&self, corpus: &Corpus<L>) -> Result<Vec<nertrain_data::Encoded>> {
        let (words, features) = corpus_words(corpus);
        let documents = corpus.documents(usize::MAX);
        Ok(self.inputs(&words, &features, &documents)?.0)
    }

    /// Tags `texts`, cutting them into words first.
    fn tag_untokenized<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        documents: &[Range<usize>],
        options: TagOptions,
    ) -> Result<Vec<Tagged>> {
        let tokens: Vec<Vec<Token>> = texts
            .par_iter()
            .enumerate()
            .map(|(text, t)| {
                self.tokenize(t.as_ref()).ok_or(Error::TooManyWords {
                    text,
                    max: MAX_TEXT_WORDS,
                })
            })
            .collect::<Result<_>>()?;
        self.tag_tokenized(texts, tokens, documents, &[], options)
    }

    /// Each text's segments (token ranges of `tokens[i]`), as the model reads them: its sentences,
    /// the long ones cut.
    fn segments<S: AsRef<str>>(
        &self,
        texts: &[S],
        tokens: &[Vec<Token>],
    ) -> Vec<Vec<Range<usize>>> {
        texts
            .iter()
            .zip(tokens)
            .map(|(text, tokens)| {
                self.tokenizer
                    .sentences(text.as_ref(), tokens)
                    .into_iter()
                    .flat_map(|sentence| cut_long(tokens, sentence))
                    .collect()
            })
            .collect()
    }

    /// Whether [`Self::tag_tokens_forced`] can take `forced` on `texts` cut into `tokens`: an
    /// [`Error::Forced`] naming the first entity it cannot, found without decoding.
    pub fn check_forced<S: AsRef<str>>(
        &self,
        texts: &[S],
        tokens: &[Vec<Token>],
        forced: &[Vec<nertrain_annotate::CharSpan>],
    ) -> Result<()> {
        let segments = self.segments(texts, tokens);
        let tags = self.vocab.tags.items();
        forced::segment_masks(tokens, &segments, forced, tags, self.meta.train_scheme).map(drop)
    }

    /// Tags `texts` cut into `tokens`, reading each of `documents` together, with `forced`
    /// entities taken as given ([`Self::tag_tokens_forced`]).
    fn tag_tokenized<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        tokens: Vec<Vec<Token>>,
        documents: &[Range<usize>],
        forced: &[Vec<nertrain_annotate::CharSpan>],
        options: TagOptions,
    ) -> Result<Vec<Tagged>> {
        let segments = self.segments(texts, &tokens);
        // Each text's first segment; the documents of texts become documents of segments.
        let mut first_segment = Vec::with_capacity(texts.len() + 1);
        first_segment.push(0);
        for p in &segments {
            first_segment.push(first_segment.last().copied().unwrap_or(0) + p.len());
        }
        let segment_documents: Vec<Range<usize>> = documents
            .iter()
            .map(|d| first_segment[d.start]..first_segment[d.end])
            .collect();
        let words: Vec<Vec<&str>> = tokens
            .iter()
            .zip(&segments)
            .flat_map(|(tokens, segments)| {
                segments.iter().map(|segment| {
                    tokens[segment.clone()]
                        .iter()
                        .map(|t| t.text.as_str())
                        .collect()
                })
            })
            .collect();
        let allowed = if forced.iter().all(Vec::is_empty) {
            Vec::new()
        } else {
            let tags = self.vocab.tags.items();
            forced::segment_masks(&tokens, &segments, forced, tags, self.meta.train_scheme)?
        };
        let mut predictions = self
            .predict(&words, &[], &segment_documents, &allowed, options)?
            .into_iter();
        let scheme = self.meta.file_scheme;
        Ok(texts
            .iter()
            .zip(tokens)
            .zip(&segments)
            .map(|((text, tokens), segments)| {
                let segments = predictions.by_ref().take(segments.len()).collect();
                let prediction = join(segments, scheme, options.pair_marginals);
                tagged(text.as_ref(), tokens, prediction)
            })
            .collect())
    }
}

/// A sentence's segments of at most [`MAX_SEGMENT_TOKENS`] tokens.
fn cut_long(tokens: &[Token], sentence: Range<usize>) -> Vec<Range<usize>> {
    let mut segments = Vec::new();
    let mut start = sentence.start;
    while sentence.end - start > MAX_SEGMENT_TOKENS {
        let window = &tokens[start..start + MAX_SEGMENT_TOKENS];
        let stop = window
            .iter()
            .rposition(|t| matches!(t.text.as_str(), "." | "!" | "?"));
        let end = start + stop.map_or(MAX_SEGMENT_TOKENS, |i| i + 1);
        segments.push(start..end);
        start = end;
    }
    segments.push(start..sentence.end);
    segments
}

/// A file's lines as documents, as `tag --input` reads them for a model that reads documents:
/// each run of non-blank lines is one, and each blank line one alone.
pub fn line_documents<S: AsRef<str>>(lines: &[S]) -> Vec<Range<usize>> {
    let mut documents: Vec<Range<usize>> = Vec::new();
    let mut previous_blank = true;
    for (i, line) in lines.iter().enumerate() {
        let blank = line.as_ref().trim().is_empty();
        match documents.last_mut() {
            Some(document) if !previous_blank && !blank => document.end = i + 1,
            _ => documents.push(i..i + 1),
        }
        previous_blank = blank;
    }
    documents
}

/// One text's prediction from its segments': the entities of each, in the file's scheme, so none
/// runs into the next; marginals side by side, and with `pairs` the pair marginals too, those
/// across a boundary the product of its two tokens' (the segments are read apart); the best
/// path's probability is the product of the segments', and only it is kept of the n best.
fn join(segments: Vec<Prediction>, scheme: TagScheme, pairs: bool) -> Prediction {
    if segments.len() == 1 {
        return segments.into_iter().next().expect("one segment");
    }
    let mut joined = Prediction::default();
    let mut best_probability = segments.iter().all(|p| !p.nbest.is_empty()).then_some(1.0);
    joined.log_probability = segments.iter().map(|p| p.log_probability).sum();
    // The text's representation: its segments' means, weighted by their words.
    let words: usize = segments.iter().map(|p| p.tags.len()).sum();
    if let Some(d) = segments.first().map(|p| p.representation.len())
        && d > 0
    {
        joined.representation = vec![0.0; d];
        for segment in &segments {
            let weight = segment.tags.len() as f32 / words.max(1) as f32;
            for (sum, value) in joined
                .representation
                .iter_mut()
                .zip(&segment.representation)
            {
                *sum += weight * value;
            }
        }
    }
    for segment in segments {
        let offset = joined.tags.len();
        joined
            .spans
            .extend(segment.spans.into_iter().map(|span| Span {
                start: span.start + offset,
                end: span.end + offset,
                label: span.label,
            }));
        joined.tags.extend(segment.tags);
        joined.score += segment.score;
        joined.confidences.extend(segment.confidences);
        if pairs
            && let (Some(before), Some(after)) =
                (joined.marginals.last(), segment.marginals.first())
        {
            let outer = before.iter().flat_map(|b| after.iter().map(move |a| b * a));
            joined.pair_marginals.push(outer.collect());
        }
        joined.pair_marginals.extend(segment.pair_marginals);
        joined.marginals.extend(segment.marginals);
        joined.mutual_information.extend(segment.mutual_information);
        if let (Some(p), Some(best)) = (best_probability.as_mut(), segment.nbest.first()) {
            *p *= best.probability;
        }
    }
    joined.retag(scheme);
    if let Some(probability) = best_probability {
        joined.nbest = vec![RankedPath {
            tags: joined.tags.clone(),
            spans: joined.spans.clone(),
            probability,
        }];
    }
    joined
}

/// `spans` over `text`'s `tokens` as entities with character offsets, with confidences when
/// given.
fn entities(text: &[char], tokens: &[Token], spans: Vec<Span>, confidences: &[f64]) -> Vec<Entity> {
    spans
        .into_iter()
        .enumerate()
        .map(|(i, span)| {
            let (start, end) = (tokens[span.start].start, tokens[span.end - 1].end);
            Entity {
                label: span.label,
                start,
                end,
                text: text[start..end].iter().collect(),
                confidence: confidences.get(i).copied(),
                tokens: span.start..span.end,
            }
        })
        .collect()
}

fn tagged(text: &str, tokens: Vec<Token>, prediction: Prediction) -> Tagged {
    let chars: Vec<char> = text.chars().collect();
    let nbest = prediction
        .nbest
        .into_iter()
        .map(|path| TagPath {
            entities: entities(&chars, &tokens, path.spans, &[]),
            tags: path.tags,
            probability: path.probability,
        })
        .collect();
    Tagged {
        text: text.to_string(),
        entities: entities(&chars, &tokens, prediction.spans, &prediction.confidences),
        tokens,
        tags: prediction.tags,
        marginals: prediction.marginals,
        nbest,
        log_probability: prediction.log_probability,
        representation: prediction.representation,
        mutual_information: prediction.mutual_information,
    }
}

/// A corpus's sentences' words and feature values, as the model reads them.
fn corpus_words<L>(corpus: &Corpus<L>) -> (Vec<Vec<&str>>, Vec<&[Vec<String>]>) {
    let sentences = corpus.sentences.iter();
    let words = sentences
        .clone()
        .map(|s| s.words.iter().map(String::as_str).collect())
        .collect();
    let features = sentences.map(|s| s.features.as_slice()).collect();
    (words, features)
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Chunker {
        /// `texts` cut into chunks, as ranges of them.
        fn chunks<S: AsRef<str>>(mut self, texts: &[S]) -> Vec<Range<usize>> {
            let mut chunks = Vec::new();
            let mut start = 0;
            for (i, text) in texts.iter().enumerate() {
                if self.ends_after(text.as_ref()) {
                    chunks.push(start..i + 1);
                    start = i + 1;
                }
            }
            if start < texts.len() || texts.is_empty() {
                chunks.push(start..texts.len());
            }
            chunks
        }
    }

    /// The model's own options ask for confidences with its operating points, and every call
    /// that tags refuses options out of range, whoever made them.
    #[test]
    fn every_call_that_tags_checks_its_options() {
        let run = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../cli/tests/fixtures/before-tokenizers/sentence");
        let tagger = Tagger::load(&run, &Device::flex()).unwrap();
        let options = tagger.options();
        assert!(options.confidence && options.thresholds && options.nbest == 1);
        assert_eq!(options, TagOptions::of_model(tagger.meta()));
        let texts = ["Peter Weber lives in Berlin."];
        let tokens = || vec![tagger.tokenize(texts[0]).unwrap()];
        for bad in [
            TagOptions {
                nbest: 0,
                ..options
            },
            TagOptions {
                consistency: 2.0,
                ..options
            },
        ] {
            assert!(tagger.checked(bad).is_err());
            let refused =
                |result: Result<Vec<Tagged>>| matches!(result, Err(Error::InvalidOption { .. }));
            assert!(refused(tagger.tag(&texts, Layout::Texts, bad)));
            assert!(refused(tagger.tag_tokens(&texts, tokens(), bad)));
        }
    }

    /// Tagging words cut beforehand gives what tagging the texts gives.
    #[test]
    fn tagging_tokens_equals_tagging_their_texts() {
        let run = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../cli/tests/fixtures/before-tokenizers/sentence");
        let tagger = Tagger::load(&run, &Device::flex()).unwrap();
        let texts = [
            "Anna Schmidt, who works for Siemens, arrived in Lisbon on Monday. She left.",
            "",
            "Peter Weber lives in Berlin.",
        ];
        let options = TagOptions {
            marginals: true,
            ..tagger.options()
        };
        let tokens = texts.iter().map(|t| tagger.tokenize(t).unwrap()).collect();
        assert_eq!(
            tagger.tag_tokens(&texts, tokens, options).unwrap(),
            tagger.tag(&texts, Layout::Texts, options).unwrap()
        );
        assert!(matches!(
            tagger.tag_tokens(&texts, Vec::new(), options),
            Err(Error::InvalidOption {
                option: "tokens",
                ..
            })
        ));
    }

    #[test]
    fn long_sentences_are_cut_after_their_last_stop() {
        let mut tokens: Vec<Token> = Vec::new();
        for i in 0..600 {
            let text = if i % 100 == 99 { "." } else { "w" };
            tokens.push(Token {
                text: text.into(),
                start: 2 * i,
                end: 2 * i + 1,
            });
        }
        assert_eq!(cut_long(&tokens, 0..600), [0..200, 200..400, 400..600]);
        assert_eq!(
            cut_long(&tokens, 5..20).as_slice(),
            std::slice::from_ref(&(5..20))
        );
        let no_stops = vec![tokens[0].clone(); 600];
        assert_eq!(cut_long(&no_stops, 0..600), [0..250, 250..500, 500..600]);
    }

    #[test]
    fn chunks_end_between_documents_when_full() {
        let mut lines: Vec<String> = vec!["w".into(); CHUNK_TEXTS + 5];
        lines[CHUNK_TEXTS + 2] = String::new();
        let sentences = Chunker::new(Layout::Lines, false).chunks(&lines);
        // One document longer than eight chunks is read eight chunks at a time.
        let documents = Chunker::new(Layout::Lines, true).chunks(&lines);
        assert_eq!(
            documents,
            [0..CHUNK_TEXTS + 3, CHUNK_TEXTS + 3..CHUNK_TEXTS + 5]
        );
        // Texts are documents each, whatever the model reads.
        let texts = Chunker::new(Layout::Texts, true).chunks(&lines);
        assert_eq!(texts, sentences);
        // One document longer than eight chunks is read in chunks.
        let long = vec!["w"; 9 * CHUNK_TEXTS];
        let chunks = Chunker::new(Layout::Lines, true).chunks(&long);
        assert_eq!(
            chunks,
            [0..8 * CHUNK_TEXTS, 8 * CHUNK_TEXTS..9 * CHUNK_TEXTS]
        );
        let empty = Chunker::new(Layout::Texts, false).chunks::<&str>(&[]);
        assert_eq!(empty.len(), 1);
        assert!(empty[0].is_empty());
    }

    #[test]
    fn lines_up_to_a_blank_one_are_a_document() {
        let lines = ["a", "b", "", "c", " ", "", "d", "e", "f"];
        assert_eq!(line_documents(&lines), [0..2, 2..3, 3..4, 4..5, 5..6, 6..9]);
        assert!(line_documents::<&str>(&[]).is_empty());
    }
}
