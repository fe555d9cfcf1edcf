//! The run directory: everything needed to run a trained tagger, and the training run's record.
//! This module is the only place that names its files.
//!
//! ```text
//! model.json     format version, architecture, vocabulary sizes, tag schemes, columns; written
//!                first, it marks the directory as a run
//! vocab.json     word, character and tag vocabularies
//! config.toml    the resolved experiment
//! model.bpk      weights of the best epoch (Burn's burnpack format)
//! dev.json       the best epoch's dev scores, overall and per type, and that epoch's number
//! metrics.jsonl  one JSON object per epoch
//! curves.svg     loss, dev F1 and learning rate per epoch
//! test.json      the best model's test scores, when the experiment names a test set
//! checkpoint/    the last epoch's weights, optimiser and loop state, for `fit --resume`; when
//!                that epoch was the best, also its weights and dev scores as published above
//! .nertrain.lock the writer's lock: `fit` holds an advisory lock on it while it runs, and
//!                writes its process id in it
//! ```
//!
//! nertrain writes only into a new or empty directory or into a run of its own, and deletes only
//! the files above. Every file is written to a temporary name and renamed into place, so a crash
//! leaves either the old file or the new one, never a torn one. An epoch is committed by one
//! rename of its checkpoint, and then published: its best model, dev scores and metrics are
//! copied out of the checkpoint. Resuming publishes again, so a crash between the two steps
//! leaves nothing that disagrees about the best epoch once the run is resumed.

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use nertrain_data::{ColumnSpec, TagScheme, Tokenizer, TokenizerSpec, Vocabularies};
use nertrain_model::{Tagger, TaggerConfig, VocabSizes};
use serde::{Deserialize, Serialize};

use crate::config::{DocumentContext, merge};
use crate::io::{
    PARTIAL, load_module, remove_if_present, save_module, with_suffix, write_atomic, write_synced,
};
use crate::{CrfOptions, Error, Result};

const META: &str = "model.json";
const VOCAB: &str = "vocab.json";
const CONFIG: &str = "config.toml";
const WEIGHTS: &str = "model.bpk";
const DEV_REPORT: &str = "dev.json";
const METRICS: &str = "metrics.jsonl";
const CURVES: &str = "curves.svg";
const TEST_REPORT: &str = "test.json";
const CHECKPOINT: &str = "checkpoint";
/// The run trained on train and dev after this one (`train.with_dev`), a run directory itself.
const WITH_DEV: &str = "with-dev";
/// Inside a checkpoint: the loop state, the training model's weights, and the best epoch's
/// weights when it is this one (its dev scores are `dev.json` there too).
const STATE: &str = "state.json";
const TRAINING_WEIGHTS: &str = "model.bpk";
const BEST_WEIGHTS: &str = "best.bpk";
/// Inside a checkpoint: Burn's optimiser state, and the word table's row-sparse update state.
const OPTIMIZER: &str = "optimizer.bpk";
const WORDS: &str = "words.bin";

/// A committed checkpoint: where its training weights and trainer state are, and its loop state
/// as read from `state_file`.
#[derive(Debug, Clone)]
pub struct StoredCheckpoint {
    pub weights: PathBuf,
    pub trainer: TrainerFiles,
    pub state_file: PathBuf,
    pub state: String,
}

/// Where a checkpoint keeps the trainer's state.
#[derive(Debug, Clone)]
pub struct TrainerFiles {
    pub optimizer: PathBuf,
    pub words: PathBuf,
}

impl TrainerFiles {
    fn in_dir(dir: &Path) -> Self {
        Self {
            optimizer: dir.join(OPTIMIZER),
            words: dir.join(WORDS),
        }
    }
}
/// Every file and directory of a run, the only ones `clear` deletes.
const RUN_FILES: [&str; 9] = [
    META,
    VOCAB,
    CONFIG,
    WEIGHTS,
    DEV_REPORT,
    METRICS,
    CURVES,
    TEST_REPORT,
    CHECKPOINT,
];
/// Why a `train.output` that is a file is refused.
const NOT_A_DIRECTORY: &str = "exists and is not a directory; choose another train.output";
/// Why a directory that is neither empty nor a run is refused.
const NOT_OURS: &str = "not empty and not a nertrain run; nertrain writes only into a new or \
                        empty directory or one of its own runs (choose another train.output)";
/// Locked by the one process writing the run (`fit`), which writes its pid in it. Kept: taking a
/// lock on a file that another process may be deleting is a race.
const LOCK: &str = ".nertrain.lock";
/// The replaced checkpoint, between the two renames that swap in a new one.
const OLD: &str = "old";

/// The most values a model's word table may hold (4 GiB of floats), tags it may have (its CRF
/// holds their square), and characters a word may be read with.
const MAX_WORD_TABLE: usize = 1 << 30;
const MAX_TAGS: usize = 4096;
const MAX_WORD_LEN: usize = 1 << 16;

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
}

impl ModelMeta {
    /// The model's tokenizer, compiled. Models without a saved one cut text as nertrain did when
    /// they were trained: BERT's pre-tokenizer, and sentences only for document-level models.
    pub fn tokenizer(&self) -> Result<Tokenizer> {
        match &self.tokenizer {
            Some(spec) => Tokenizer::new(spec).map_err(|e| Error::model("model.json", e.0)),
            None => Ok(Tokenizer::bert(self.document.is_some())),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ModelDir {
    pub path: PathBuf,
}

/// The right to write a run directory, held by one process at a time: an advisory lock, which the
/// system releases when the process ends, however it ends.
#[derive(Debug)]
pub struct RunLock {
    file: std::fs::File,
    /// The directory did not exist before the lock made it.
    pub created_dir: bool,
}

impl Drop for RunLock {
    /// Empties the file before the lock goes, so that no one reads this process's id as the
    /// holder's after it.
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
    }
}

/// The id of the process holding a run's lock, as it wrote it. A holder writes it just after
/// taking the lock, so an empty file (or the id of a process that is gone, left by one that was
/// killed) is read again for a moment.
fn lock_holder(file: &mut std::fs::File) -> Option<u32> {
    use std::io::{Read, Seek};
    for _ in 0..50 {
        let mut text = String::new();
        let read = file.rewind().and_then(|()| file.read_to_string(&mut text));
        let pid = read.ok().and_then(|_| text.trim().parse::<u32>().ok());
        if let Some(pid) = pid
            && Path::new(&format!("/proc/{pid}")).exists()
        {
            return Some(pid);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    None
}

impl ModelDir {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    pub fn meta_file(&self) -> PathBuf {
        self.path.join(META)
    }
    pub fn vocab_file(&self) -> PathBuf {
        self.path.join(VOCAB)
    }
    pub fn weights_file(&self) -> PathBuf {
        self.path.join(WEIGHTS)
    }
    /// Where `train.with_dev` trains on train and dev, after this run chose the epochs.
    pub fn with_dev_dir(&self) -> PathBuf {
        self.path.join(WITH_DEV)
    }
    pub fn config_file(&self) -> PathBuf {
        self.path.join(CONFIG)
    }
    pub fn metrics_file(&self) -> PathBuf {
        self.path.join(METRICS)
    }
    pub fn dev_report_file(&self) -> PathBuf {
        self.path.join(DEV_REPORT)
    }
    pub fn test_report_file(&self) -> PathBuf {
        self.path.join(TEST_REPORT)
    }
    pub fn curves_file(&self) -> PathBuf {
        self.path.join(CURVES)
    }
    fn checkpoint_path(&self) -> PathBuf {
        self.path.join(CHECKPOINT)
    }

    /// Takes the run's writer lock (creating the directory when it is not there), or refuses,
    /// naming the process that holds it. Held until the lock is dropped.
    pub fn lock(&self) -> Result<RunLock> {
        use std::io::{Seek, Write};
        let created_dir = !self.path.exists();
        if created_dir {
            std::fs::create_dir_all(&self.path)
                .map_err(|e| Error::io(&self.path, "create the directory", e))?;
        } else if !self.path.is_dir() {
            return Err(Error::refused(&self.path, NOT_A_DIRECTORY));
        } else if !self.is_run() && !self.is_empty()? {
            // Not even a lock file goes where nertrain would not write a run.
            return Err(Error::refused(&self.path, NOT_OURS));
        }
        let path = self.path.join(LOCK);
        if std::fs::symlink_metadata(&path).is_ok_and(|m| !m.is_file()) {
            return Err(Error::refused(
                &path,
                "is not a regular file (a link?); nertrain locks runs with a file of its own",
            ));
        }
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io(&path, "open the run's lock", e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = match lock_holder(&mut file) {
                    Some(pid) => format!("process {pid}"),
                    None => "another process".to_string(),
                };
                return Err(Error::refused(
                    &self.path,
                    format!(
                        "{holder} is writing this run (nertrain fit); wait for it to finish, or \
                         stop it, then try again"
                    ),
                ));
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(Error::io(&path, "lock", e));
            }
        }
        let written = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "{}", std::process::id()));
        written.map_err(|e| Error::io(&path, "write", e))?;
        Ok(RunLock { file, created_dir })
    }

    /// Undoes what [`ModelDir::lock`] made when nothing else was written: the lock file, and
    /// the directory when the lock created it.
    pub fn remove_unused(&self, lock: RunLock) {
        if lock.created_dir && !self.is_run() {
            let _ = std::fs::remove_file(self.path.join(LOCK));
            let _ = std::fs::remove_dir(&self.path);
        }
    }

    /// Whether the directory holds a run: its `model.json` is a nertrain model description.
    pub fn is_run(&self) -> bool {
        std::fs::read_to_string(self.meta_file())
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .is_some_and(|meta| meta.get("nertrain_version").is_some())
    }

    /// Checks that a new run may start here: a directory that does not exist yet or is empty, or,
    /// with `overwrite`, a run of nertrain's. Nothing is changed.
    pub fn check_new(&self, overwrite: bool) -> Result<()> {
        let refused = |message: &str| Err(Error::refused(&self.path, message));
        if !self.path.exists() {
            return Ok(());
        }
        if !self.path.is_dir() {
            return refused(NOT_A_DIRECTORY);
        }
        if self.is_run() {
            return if overwrite {
                Ok(())
            } else {
                refused(
                    "a run is already there; continue it with --resume, replace it with \
                     --overwrite, or choose another train.output",
                )
            };
        }
        if !self.is_empty()? {
            return refused(NOT_OURS);
        }
        Ok(())
    }

    /// Whether the directory holds nothing but, perhaps, the writer's lock.
    fn is_empty(&self) -> Result<bool> {
        let entries = std::fs::read_dir(&self.path)
            .map_err(|e| Error::io(&self.path, "read the directory", e))?;
        let mut others = entries.filter(|e| e.as_ref().map_or(true, |e| e.file_name() != LOCK));
        Ok(others.next().is_none())
    }

    /// Deletes the files of a previous run here and nothing else; refuses a directory that is not
    /// a run. Files of other programs stay.
    pub fn clear(&self) -> Result<()> {
        if !self.path.exists() {
            return Ok(());
        }
        if !self.is_run() {
            return Err(Error::refused(
                &self.path,
                "not a nertrain run directory; not deleting anything in it",
            ));
        }
        let with_dev = ModelDir::new(self.with_dev_dir());
        if std::fs::symlink_metadata(&with_dev.path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(Error::refused(
                &with_dev.path,
                "is a symbolic link, not this run's own directory; nertrain neither deletes nor \
                 writes through it: move it away and try again",
            ));
        }
        if with_dev.is_run() {
            with_dev.clear()?;
            // Left in place when it holds files of other programs.
            let _ = std::fs::remove_dir(&with_dev.path);
        }
        // The description goes last: until then the directory is still recognisably a run.
        for name in RUN_FILES.iter().rev() {
            let path = self.path.join(name);
            for path in [with_suffix(&path, OLD), with_suffix(&path, PARTIAL), path] {
                remove_if_present(&path)?;
            }
        }
        Ok(())
    }

    /// The epochs recorded so far.
    pub fn read_metrics(&self) -> Result<Vec<crate::EpochMetrics>> {
        let path = self.metrics_file();
        let text = std::fs::read_to_string(&path).map_err(|e| missing_or(&self.path, &path, e))?;
        text.lines()
            .enumerate()
            .map(|(i, line)| {
                serde_json::from_str(line).map_err(|e| {
                    Error::model(
                        format!("{}:{}", path.display(), i + 1),
                        format!("not an epoch record: {e}"),
                    )
                })
            })
            .collect()
    }

    /// The best epoch's dev scores, with the number of that epoch (absent in runs of older
    /// versions).
    pub fn read_dev_report(&self) -> Result<serde_json::Value> {
        let path = self.dev_report_file();
        let text = std::fs::read_to_string(&path).map_err(|e| missing_or(&self.path, &path, e))?;
        serde_json::from_str(&text)
            .map_err(|e| Error::model(&path, format!("not a dev score file: {e}")))
    }

    /// The checkpoint to resume from: `checkpoint/`, or `checkpoint.old/` when a crash came
    /// between the two renames that replace it.
    pub(crate) fn checkpoint(&self) -> Option<PathBuf> {
        let current = self.checkpoint_path();
        let old = with_suffix(&current, OLD);
        [current, old]
            .into_iter()
            .find(|dir| dir.join(STATE).is_file())
    }

    /// Whether an epoch has finished here: there is a model or a metrics file.
    pub(crate) fn has_trained(&self) -> bool {
        self.weights_file().exists() || self.metrics_file().exists()
    }

    /// Commits a checkpoint: `write` fills a fresh directory with the training state, which then
    /// replaces the last checkpoint in one rename. `best`, when this epoch is the best so far, is
    /// its model and dev scores, kept in the checkpoint until [`publish`](Self::publish) copies
    /// them out. On failure the last checkpoint stays and nothing is left behind.
    pub(crate) fn commit_checkpoint(
        &self,
        model: &Tagger,
        write: impl FnOnce(&TrainerFiles) -> Result<()>,
        state: &[u8],
        best: Option<(&Tagger, &serde_json::Value)>,
    ) -> Result<()> {
        let current = self.checkpoint_path();
        let partial = with_suffix(&current, PARTIAL);
        let old = with_suffix(&current, OLD);
        let staged = (|| {
            remove_if_present(&partial)?;
            std::fs::create_dir_all(&partial).map_err(|e| Error::io(&partial, "create", e))?;
            save_module(model, &partial.join(TRAINING_WEIGHTS))?;
            write(&TrainerFiles::in_dir(&partial))?;
            if let Some((best, report)) = best {
                save_module(best, &partial.join(BEST_WEIGHTS))?;
                write_atomic(
                    &partial.join(DEV_REPORT),
                    serde_json::to_string_pretty(report)?.as_bytes(),
                )?;
            }
            failpoint("checkpoint")?;
            write_atomic(&partial.join(STATE), state)
        })();
        if let Err(e) = staged {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(e);
        }
        let io = |e: std::io::Error| Error::io(&current, "replace", e);
        remove_if_present(&old)?;
        if current.exists() {
            std::fs::rename(&current, &old).map_err(io)?;
        }
        let swapped =
            failpoint("swap").and_then(|()| std::fs::rename(&partial, &current).map_err(io));
        if let Err(e) = swapped {
            // Put the last checkpoint back, so the run is as it was before this epoch.
            let _ = std::fs::remove_dir_all(&partial);
            if old.exists() {
                let _ = std::fs::rename(&old, &current);
            }
            return Err(e);
        }
        remove_if_present(&old)
    }

    /// Publishes the committed checkpoint: its best model and dev scores, when it has them, and
    /// the metrics and curves of every epoch. Everything is written to temporary files first and
    /// renamed into place last, so a failure leaves the run as it was.
    pub(crate) fn publish(&self, metrics_jsonl: &str, curves_svg: &str) -> Result<()> {
        let checkpoint = self
            .checkpoint()
            .ok_or_else(|| Error::model(&self.path, "no checkpoint to publish"))?;
        let mut staged: Vec<(PathBuf, Vec<u8>)> = Vec::new();
        for (kept, published) in [(BEST_WEIGHTS, WEIGHTS), (DEV_REPORT, DEV_REPORT)] {
            let from = checkpoint.join(kept);
            if from.exists() {
                let bytes = std::fs::read(&from).map_err(|e| Error::io(&from, "read", e))?;
                staged.push((self.path.join(published), bytes));
            }
        }
        staged.push((self.metrics_file(), metrics_jsonl.as_bytes().to_vec()));
        staged.push((self.curves_file(), curves_svg.as_bytes().to_vec()));
        let written = staged.iter().try_for_each(|(path, bytes)| {
            write_synced(&with_suffix(path, PARTIAL), bytes)
                .map_err(|e| Error::io(path, "write", e))
        });
        let written = written.and_then(|()| failpoint("publish"));
        if let Err(e) = written {
            for (path, _) in &staged {
                let _ = std::fs::remove_file(with_suffix(path, PARTIAL));
            }
            return Err(e);
        }
        for (path, _) in &staged {
            std::fs::rename(with_suffix(path, PARTIAL), path)
                .map_err(|e| Error::io(path, "write", e))?;
        }
        Ok(())
    }

    /// The committed checkpoint, if there is one.
    pub(crate) fn read_checkpoint(&self) -> Result<Option<StoredCheckpoint>> {
        let Some(dir) = self.checkpoint() else {
            return Ok(None);
        };
        let state_file = dir.join(STATE);
        let state =
            std::fs::read_to_string(&state_file).map_err(|e| Error::io(&state_file, "read", e))?;
        Ok(Some(StoredCheckpoint {
            weights: dir.join(TRAINING_WEIGHTS),
            trainer: TrainerFiles::in_dir(&dir),
            state_file,
            state,
        }))
    }

    /// Records the experiment a resumed run continues with.
    pub(crate) fn write_config(&self, config_toml: &str) -> Result<()> {
        write_atomic(&self.config_file(), config_toml.as_bytes())
    }

    /// Writes the test report of the best model.
    pub(crate) fn write_test_report(&self, report: &serde_json::Value) -> Result<()> {
        write_atomic(
            &self.test_report_file(),
            serde_json::to_string_pretty(report)?.as_bytes(),
        )
    }

    pub fn write_description(
        &self,
        meta: &ModelMeta,
        vocab: &Vocabularies,
        config_toml: &str,
    ) -> Result<()> {
        std::fs::create_dir_all(&self.path).map_err(|e| Error::io(&self.path, "create", e))?;
        write_atomic(
            &self.meta_file(),
            serde_json::to_string_pretty(meta)?.as_bytes(),
        )?;
        write_atomic(&self.vocab_file(), serde_json::to_string(vocab)?.as_bytes())?;
        write_atomic(&self.config_file(), config_toml.as_bytes())
    }

    /// Rewrites the model description alone (the decoding settings chosen after training).
    pub fn update_meta(&self, meta: &ModelMeta) -> Result<()> {
        write_atomic(
            &self.meta_file(),
            serde_json::to_string_pretty(meta)?.as_bytes(),
        )
    }

    pub fn read_meta(&self) -> Result<ModelMeta> {
        let path = self.meta_file();
        let text = std::fs::read_to_string(&path).map_err(|e| missing_or(&self.path, &path, e))?;
        let not_a_model = |e: serde_json::Error| {
            Error::model(&path, format!("not a nertrain model description: {e}"))
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
            return Err(Error::model(
                &path,
                format!(
                    "model format {} but this nertrain reads format {FORMAT_VERSION}",
                    meta.format
                ),
            ));
        }
        // Sizes are checked before any of them is allocated: a changed or damaged description
        // must be an error, not gigabytes allocated or a panic in a layer.
        let damaged = |message: String| {
            Error::model(
                &path,
                format!("{message}; the file was changed or damaged, or not written by nertrain"),
            )
        };
        crate::config::check_model(&meta.model).map_err(|(_, message)| damaged(message))?;
        let sizes = &meta.sizes;
        let word_table = sizes.words.saturating_mul(meta.model.word_dim);
        let sizes_fit = word_table <= MAX_WORD_TABLE && sizes.chars <= MAX_WORD_TABLE / 64;
        if !sizes_fit {
            return Err(damaged(format!(
                "sizes: {} words of {} values and {} characters is more than nertrain makes",
                sizes.words, meta.model.word_dim, sizes.chars
            )));
        }
        if sizes.lm_words > sizes.words {
            return Err(damaged(format!(
                "sizes.lm_words: expected at most the {} words, found {}",
                sizes.words, sizes.lm_words
            )));
        }
        if !(1..=MAX_TAGS).contains(&sizes.tags) {
            return Err(damaged(format!(
                "sizes.tags: expected 1 to {MAX_TAGS}, found {}",
                sizes.tags
            )));
        }
        if !(1..=MAX_WORD_LEN).contains(&meta.max_word_len) {
            return Err(damaged(format!(
                "max_word_len: expected 1 to {MAX_WORD_LEN}, found {}",
                meta.max_word_len
            )));
        }
        Ok(meta)
    }

    pub fn read_vocab(&self, meta: &ModelMeta) -> Result<Vocabularies> {
        let path = self.vocab_file();
        let text = std::fs::read_to_string(&path).map_err(|e| missing_or(&self.path, &path, e))?;
        let vocab: Vocabularies = serde_json::from_str(&text)
            .map_err(|e| Error::model(&path, format!("not a vocabulary file: {e}")))?;
        let tags = vocab.tags.items();
        let mut seen = std::collections::HashSet::new();
        for tag in tags {
            nertrain_data::check_tag(tag).map_err(|m| Error::model(&path, format!("tags: {m}")))?;
            if !seen.insert(tag) {
                return Err(Error::model(&path, format!("tags: {tag:?} is there twice")));
            }
        }
        // The language model's share of the words is the model's, not the vocabulary's.
        let sizes = VocabSizes {
            lm_words: meta.sizes.lm_words.min(vocab.words.len()),
            ..VocabSizes::from(&vocab)
        };
        if sizes != meta.sizes {
            return Err(Error::model(
                &path,
                format!(
                    "vocabulary sizes {sizes:?} do not match model.json's {:?}",
                    meta.sizes
                ),
            ));
        }
        Ok(vocab)
    }

    /// The best model, its description and vocabularies, checked against each other.
    pub fn load(&self, device: &Device) -> Result<(ModelMeta, Vocabularies, Tagger)> {
        let meta = self.read_meta()?;
        let vocab = self.read_vocab(&meta)?;
        let weights = self.weights_file();
        if !weights.exists() {
            return Err(Error::model(
                &self.path,
                "no weights yet (model.bpk is written when the first epoch ends)",
            ));
        }
        // A description changed to sizes within bounds but not the weights': refused before the
        // model is built, which allocates what the description says.
        let needed = 4 * least_values(&meta);
        let held = std::fs::metadata(&weights).map_or(0, |m| m.len());
        if needed > held {
            return Err(Error::model(
                &weights,
                format!(
                    "not a readable weights file: it is truncated or damaged, or of another run \
                     ({held} bytes, but model.json describes at least {needed})"
                ),
            ));
        }
        let model = load_module(meta.model.init(meta.sizes, device), &weights)?;
        Ok((meta, vocab, model))
    }
}

/// The fewest weights a model of this description has: its word table, the BiLSTM's recurrent
/// matrices (both directions, four gates) and the CRF's transitions; each a 32-bit float.
fn least_values(meta: &ModelMeta) -> u64 {
    let (words, dim) = (meta.sizes.words as u64, meta.model.word_dim as u64);
    let (hidden, tags) = (meta.model.hidden as u64, meta.sizes.tags as u64);
    words * dim + 8 * hidden * hidden + tags * tags
}

fn missing_or(dir: &Path, file: &Path, e: std::io::Error) -> crate::Error {
    if e.kind() == std::io::ErrorKind::NotFound {
        if dir.is_dir() {
            Error::model(
                dir,
                format!(
                    "not a nertrain model directory ({} is missing)",
                    file.display()
                ),
            )
        } else {
            Error::model(dir, "no such model directory")
        }
    } else {
        Error::io(file, "read", e)
    }
}

/// A point where tests make the run directory's writes fail, compiled only with the `failpoints`
/// feature: `NERTRAIN_FAILPOINT=name:N` fails the `N`th time `name` is reached (the first, without
/// `:N`), and `name:N:abort` ends the process there instead.
fn failpoint(name: &str) -> Result<()> {
    if !cfg!(feature = "failpoints") {
        return Ok(());
    }
    static REACHED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let set = std::env::var("NERTRAIN_FAILPOINT").unwrap_or_default();
    let mut parts = set.split(':');
    if parts.next() != Some(name) {
        return Ok(());
    }
    let nth: usize = parts.next().and_then(|n| n.parse().ok()).unwrap_or(1);
    let abort = parts.next() == Some("abort");
    if REACHED.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 != nth {
        return Ok(());
    }
    if abort {
        // Ends at once, as a crash or `kill -9` would, without leaving a core file behind.
        std::process::exit(134);
    }
    Err(Error::io(
        name,
        "go past a failpoint",
        std::io::Error::other("failpoint reached"),
    ))
}
