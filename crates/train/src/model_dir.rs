//! The run directory: the model files of its best epoch (whose format `nertrain_model::files`
//! owns), and the training run's record. This module names the run's own files.
//!
//! ```text
//! model.json     the model's description; written first, it marks the directory as a run
//! vocab.json     word, character and tag vocabularies
//! dictionary.json the dictionaries' entries, when the experiment names dictionaries
//! subwords.json  the pretrained encoder's tokenizer, when the experiment names an encoder
//! config.toml    the resolved experiment
//! model.bpk      weights of the best epoch (Burn's burnpack format)
//! dev.json       the best epoch's dev scores, overall and per type, and that epoch's number
//! metrics.jsonl  one JSON object per epoch
//! curves.svg     loss, dev F1 and learning rate per epoch
//! test.json      the best model's test scores, when the experiment names a test set
//! thresholds.json confidence thresholds a user chose for the weights (`eval --thresholds
//!                --store`); deleted when other weights are published
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

use nertrain_data::lock::{LockError, ProcessLock};
use nertrain_data::{Dictionary, Vocabularies};
use nertrain_model::files::{save_weights, scores_json};
use nertrain_model::{ModelFiles, ModelMeta, Network, RecordedScores};

use crate::io::{PARTIAL, remove_if_present, with_suffix, write_atomic, write_synced};
use crate::{Error, Result};

const CONFIG: &str = "config.toml";
const METRICS: &str = "metrics.jsonl";
const CURVES: &str = "curves.svg";
const CHECKPOINT: &str = "checkpoint";
/// The run trained on train and dev after this one (`train.with_dev`), a run directory itself.
const WITH_DEV: &str = "with-dev";
/// Inside a checkpoint: the loop state, the training model's weights, and the best epoch's
/// weights when it is this one (its dev scores are `dev.json` there too).
const STATE: &str = "state.json";
const TRAINING_WEIGHTS: &str = "model.bpk";
const BEST_WEIGHTS: &str = "best.bpk";
/// Inside a checkpoint: the best epoch's dev scores, when it is this one.
const BEST_DEV_SCORES: &str = "dev.json";
/// Inside a checkpoint: Burn's optimiser state, the fine-tuned encoder's, and the word table's
/// row-sparse update state.
const OPTIMIZER: &str = "optimizer.bpk";
const ENCODER_OPTIMIZER: &str = "encoder-optimizer.bpk";
const WORDS: &str = "words.bin";

/// A committed checkpoint: where its training weights and trainer state are, and its loop state
/// as read from `state_file`.
#[derive(Debug, Clone)]
pub(crate) struct StoredCheckpoint {
    pub(crate) weights: PathBuf,
    pub(crate) trainer: TrainerFiles,
    pub(crate) state_file: PathBuf,
    pub(crate) state: String,
}

/// Where a checkpoint keeps the trainer's state.
#[derive(Debug, Clone)]
pub(crate) struct TrainerFiles {
    /// Burn's optimiser state.
    pub(crate) optimizer: PathBuf,
    /// The fine-tuned pretrained encoder's optimiser state, when there is one.
    pub(crate) encoder_optimizer: PathBuf,
    /// The word table's row-sparse update state.
    pub(crate) words: PathBuf,
}

impl TrainerFiles {
    fn in_dir(dir: &Path) -> Self {
        Self {
            optimizer: dir.join(OPTIMIZER),
            encoder_optimizer: dir.join(ENCODER_OPTIMIZER),
            words: dir.join(WORDS),
        }
    }
}
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

/// A run directory.
#[derive(Debug, Clone)]
pub struct ModelDir {
    /// The directory.
    pub path: PathBuf,
    /// Its model files.
    files: ModelFiles,
}

/// The right to write a run directory, held by one process at a time: an advisory lock, which the
/// system releases when the process ends, however it ends.
#[derive(Debug)]
pub struct RunLock {
    _lock: ProcessLock,
    /// The directory did not exist before the lock made it.
    pub created_dir: bool,
}

impl ModelDir {
    /// The run directory `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        Self {
            files: ModelFiles::new(&path),
            path,
        }
    }

    /// The model files of its best epoch.
    pub fn files(&self) -> &ModelFiles {
        &self.files
    }

    /// The best model's weights.
    pub fn weights_file(&self) -> PathBuf {
        self.files.weights_file()
    }
    /// Where `train.with_dev` trains on train and dev, after this run chose the epochs.
    pub fn with_dev_dir(&self) -> PathBuf {
        self.path.join(WITH_DEV)
    }
    /// The resolved experiment.
    pub fn config_file(&self) -> PathBuf {
        self.path.join(CONFIG)
    }
    /// One JSON object per epoch.
    pub fn metrics_file(&self) -> PathBuf {
        self.path.join(METRICS)
    }
    /// Loss, dev F1 and learning rate per epoch, drawn.
    pub fn curves_file(&self) -> PathBuf {
        self.path.join(CURVES)
    }
    fn checkpoint_path(&self) -> PathBuf {
        self.path.join(CHECKPOINT)
    }

    /// Every file and directory of a run, the only ones `clear` deletes, the description first.
    fn run_files(&self) -> [PathBuf; 12] {
        [
            self.files.meta_file(),
            self.files.vocab_file(),
            self.files.dictionary_file(),
            self.files.subwords_file(),
            self.config_file(),
            self.files.weights_file(),
            self.files.dev_scores_file(),
            self.metrics_file(),
            self.curves_file(),
            self.files.test_scores_file(),
            self.files.thresholds_file(),
            self.checkpoint_path(),
        ]
    }

    /// Takes the run's writer lock (creating the directory when it is not there), or refuses,
    /// naming the process that holds it. Held until the lock is dropped.
    pub fn lock(&self) -> Result<RunLock> {
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
        let lock = ProcessLock::take(&path).map_err(|e| match e {
            LockError::Held(holder) => Error::refused(
                &self.path,
                format!(
                    "{} is writing this run (nertrain fit); wait for it to finish, or stop it, \
                     then try again",
                    holder.map_or("another process".to_string(), |pid| format!(
                        "process {pid}"
                    ))
                ),
            ),
            LockError::Linked => Error::refused(&path, LockError::Linked.to_string()),
            LockError::Io { action, source } => Error::io(&path, action, source),
        })?;
        Ok(RunLock {
            _lock: lock,
            created_dir,
        })
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
        self.files.is_model()
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
        for path in self.run_files().into_iter().rev() {
            for path in [with_suffix(&path, OLD), with_suffix(&path, PARTIAL), path] {
                remove_if_present(&path)?;
            }
        }
        Ok(())
    }

    /// The epochs recorded so far.
    pub fn read_metrics(&self) -> Result<Vec<crate::EpochMetrics>> {
        let path = self.metrics_file();
        let text = self.files.read(&path)?;
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
    pub fn read_dev_scores(&self) -> Result<RecordedScores> {
        Ok(self.files.read_dev_scores()?)
    }

    /// Removes a finished run's checkpoint (and a replaced one left by a crash): the run can no
    /// longer be resumed, and keeps its model, scores and metrics.
    pub fn remove_checkpoint(&self) -> Result<()> {
        let current = self.checkpoint_path();
        for path in [with_suffix(&current, OLD), current] {
            match std::fs::remove_dir_all(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&path, "remove", e)),
            }
        }
        Ok(())
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
        model: &Network,
        write: impl FnOnce(&TrainerFiles) -> Result<()>,
        state: &[u8],
        best: Option<(&Network, &RecordedScores)>,
    ) -> Result<()> {
        let current = self.checkpoint_path();
        let partial = with_suffix(&current, PARTIAL);
        let old = with_suffix(&current, OLD);
        let staged = (|| {
            remove_if_present(&partial)?;
            std::fs::create_dir_all(&partial).map_err(|e| Error::io(&partial, "create", e))?;
            save_weights(model, &partial.join(TRAINING_WEIGHTS))?;
            write(&TrainerFiles::in_dir(&partial))?;
            if let Some((best, report)) = best {
                save_weights(best, &partial.join(BEST_WEIGHTS))?;
                write_atomic(&partial.join(BEST_DEV_SCORES), &scores_json(report))?;
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
        for (kept, published) in [
            (BEST_WEIGHTS, self.files.weights_file()),
            (BEST_DEV_SCORES, self.files.dev_scores_file()),
        ] {
            let from = checkpoint.join(kept);
            if from.exists() {
                let bytes = std::fs::read(&from).map_err(|e| Error::io(&from, "read", e))?;
                staged.push((published, bytes));
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
        self.forget_thresholds_of_other_weights(&staged)?;
        for (path, _) in &staged {
            std::fs::rename(with_suffix(path, PARTIAL), path)
                .map_err(|e| Error::io(path, "write", e))?;
        }
        Ok(())
    }

    /// Deletes the thresholds chosen for the published weights when `staged` replaces them with
    /// others, before they are replaced: thresholds never outlive the weights they were chosen
    /// for, even across a crash. Publishing the same weights again (a resumed run) keeps them.
    fn forget_thresholds_of_other_weights(&self, staged: &[(PathBuf, Vec<u8>)]) -> Result<()> {
        let thresholds = self.files.thresholds_file();
        let weights = self.files.weights_file();
        let Some((_, new)) = staged.iter().find(|(path, _)| *path == weights) else {
            return Ok(());
        };
        if !thresholds.exists() || std::fs::read(&weights).is_ok_and(|old| old == *new) {
            return Ok(());
        }
        remove_if_present(&thresholds)
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

    /// Writes the test scores of the best model.
    pub(crate) fn write_test_scores(&self, scores: &RecordedScores) -> Result<()> {
        Ok(self.files.write_test_scores(scores)?)
    }

    /// Writes the model's description, vocabularies and dictionary, and the experiment, when a
    /// run starts.
    pub(crate) fn write_description(
        &self,
        meta: &ModelMeta,
        vocab: &Vocabularies,
        dictionary: Option<&Dictionary>,
        config_toml: &str,
    ) -> Result<()> {
        std::fs::create_dir_all(&self.path).map_err(|e| Error::io(&self.path, "create", e))?;
        self.update_meta(meta)?;
        if let Some(dictionary) = dictionary {
            self.files.write_dictionary(dictionary)?;
        }
        self.files.write_vocab(vocab)?;
        write_atomic(&self.config_file(), config_toml.as_bytes())
    }

    /// Rewrites the model description alone (the decoding settings chosen after training).
    pub(crate) fn update_meta(&self, meta: &ModelMeta) -> Result<()> {
        Ok(self.files.write_meta(meta)?)
    }

    /// The run's model description.
    pub fn read_meta(&self) -> Result<ModelMeta> {
        Ok(self.files.read_meta()?)
    }

    /// The run's dictionary, checked against `meta`, when it has one.
    pub fn read_dictionary(&self, meta: &ModelMeta) -> Result<Option<Dictionary>> {
        Ok(self.files.read_dictionary(meta)?)
    }

    /// The run's vocabularies, checked against `meta`.
    pub fn read_vocab(&self, meta: &ModelMeta) -> Result<Vocabularies> {
        Ok(self.files.read_vocab(meta)?)
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
