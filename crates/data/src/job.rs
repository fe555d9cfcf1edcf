//! Work driven from outside the command line: a training (`FitJob`: which model to continue, on
//! which files, into where) and the events `fit --job` appends as it goes, read back with the
//! same types; and a scoring (`ScoreJob`: a model on a held-out file, scored as `fit` chooses its
//! epoch), which `eval --job` runs. They live here, where every crate that writes or reads them
//! meets (the studio's learner and Python write them, `fit` and `eval` read them), and below
//! the network, which they do not need.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What `nertrain fit --job FILE` trains: `start_from`'s own experiment, continued on `train`,
/// its epoch chosen and its model scored on `heldout` (never trained on), into `output`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitJob {
    /// The trained model continued (a run directory).
    pub start_from: PathBuf,
    /// What it is trained on.
    pub train: PathBuf,
    /// What chooses its epoch and scores it (its dev and test file).
    pub heldout: PathBuf,
    /// The run directory written.
    pub output: PathBuf,
    /// Epochs at most.
    pub epochs: usize,
    /// More settings of the experiment, as `--set` takes them (`train.lr=0.01`).
    #[serde(default)]
    pub overrides: Vec<String>,
    /// Labels the training data does not annotate: where it says `O`, a word may still be
    /// one of them (`data.open_labels`); empty: as `start_from`'s experiment says.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_labels: Vec<String>,
    /// Where the run's [`JobEvent`]s are appended, one JSON object a line.
    pub events: PathBuf,
    /// Whether the finished run keeps its checkpoint (the optimiser's state, several times the
    /// weights), which only resuming it needs; a caller that keeps many runs drops it.
    #[serde(default = "yes")]
    pub keep_checkpoint: bool,
    /// Whether `start_from`'s own training file is rehearsed where its experiment rehearses
    /// nothing else. A caller that sends that file's data again (continuing a model an earlier
    /// job trained on part of what it sends now) says no, so that nothing is trained on twice.
    #[serde(default = "yes")]
    pub rehearse_own: bool,
}

fn yes() -> bool {
    true
}

impl FitJob {
    /// Reads a job file; an error names the file and what is wrong.
    pub fn read(path: &Path) -> Result<Self, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let job: Self = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{}: not a fit job: {e}", path.display()))?;
        if job.epochs == 0 {
            return Err(format!("{}: epochs: expected at least 1", path.display()));
        }
        // Events are appended: into a file that is there already, they would mix with another
        // run's, or grow a file that is not events at all (a model's own files).
        if std::fs::symlink_metadata(&job.events).is_ok() {
            return Err(format!(
                "{}: events: {} exists; a job's events go into a new file of their own",
                path.display(),
                job.events.display()
            ));
        }
        Ok(job)
    }
}

/// What `nertrain eval --job FILE` scores: `model` on `data`, read as `fit` reads its held-out
/// file (`nertrain_annotate::read_sentences`) and scored as `fit` scores the epochs it chooses
/// among, `open_labels` left out; its scores written whole to `scores`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoreJob {
    /// The model scored (a run directory).
    pub model: PathBuf,
    /// The gold file: CoNLL columns, or an annotation tool's export.
    pub data: PathBuf,
    /// Dictionary files the model tags with, beside the dictionary stored in it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dictionaries: Vec<PathBuf>,
    /// Whether [`dictionaries`](Self::dictionaries) replace the stored entries of their labels
    /// rather than extend them.
    #[serde(default)]
    pub replace_dictionary: bool,
    /// Labels the gold file does not annotate: left out of the scores, as `fit` leaves out its
    /// open labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_labels: Vec<String>,
    /// Where the scores go (`Scores`, as JSON); written whole or not at all.
    pub scores: PathBuf,
}

impl ScoreJob {
    /// Reads a job file; an error names the file and what is wrong.
    pub fn read(path: &Path) -> Result<Self, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_slice(&bytes)
            .map_err(|e| format!("{}: not a score job: {e}", path.display()))
    }
}

/// What a job's run reports, a line of its events file each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum JobEvent {
    /// An epoch was trained, scored on the held-out file and committed.
    Epoch {
        /// The epoch, from 1.
        epoch: usize,
        /// Epochs at most.
        epochs: usize,
        /// Its span F1 on the held-out file, in percent.
        heldout_f1: f64,
        /// Whether it is the best so far.
        best: bool,
    },
    /// The run is over; the best epoch's model is in the output directory.
    Done {
        /// The best epoch, from 1.
        best_epoch: usize,
        /// Its held-out F1.
        best_heldout_f1: f64,
    },
    /// The run failed: nothing usable is in the output directory.
    Error {
        /// Why.
        message: String,
    },
}

impl JobEvent {
    /// The events of an events file as far as it is written (a line being written is left for
    /// the next read); an error names the file and line.
    pub fn read_all(path: &Path) -> Result<Vec<Self>, String> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        text.split_inclusive('\n')
            .filter(|line| line.ends_with('\n'))
            .enumerate()
            .map(|(i, line)| {
                serde_json::from_str(line)
                    .map_err(|e| format!("{}:{}: not a job event: {e}", path.display(), i + 1))
            })
            .collect()
    }

    /// Appends the event to `path` as one line.
    pub fn append(&self, path: &Path) -> std::io::Result<()> {
        use std::io::Write;
        let mut line = serde_json::to_vec(self).map_err(std::io::Error::other)?;
        line.push(b'\n');
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?
            .write_all(&line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_read_back_as_written_and_a_partial_line_waits() {
        let dir = std::env::temp_dir().join(format!("nertrain-job-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("events.jsonl");
        assert_eq!(JobEvent::read_all(&path).unwrap(), []);
        let events = [
            JobEvent::Epoch {
                epoch: 1,
                epochs: 2,
                heldout_f1: 50.5,
                best: true,
            },
            JobEvent::Done {
                best_epoch: 1,
                best_heldout_f1: 50.5,
            },
        ];
        for event in &events {
            event.append(&path).unwrap();
        }
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut file, b"{\"event\": \"err").unwrap();
        assert_eq!(JobEvent::read_all(&path).unwrap(), events);
        std::fs::write(&path, "{\"event\": \"nothing\"}\n").unwrap();
        let error = JobEvent::read_all(&path).unwrap_err();
        assert!(error.contains("events.jsonl:1: not a job event"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_job_names_what_is_wrong_with_it() {
        let dir = std::env::temp_dir().join(format!("nertrain-jobfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("job.json");
        std::fs::write(&path, r#"{"start_from": "m", "train": "t", "heldout": "h", "output": "o", "epochs": 0, "events": "e"}"#).unwrap();
        assert!(
            FitJob::read(&path)
                .unwrap_err()
                .contains("epochs: expected at least 1")
        );
        std::fs::write(&path, r#"{"start_from": "m", "trian": "t"}"#).unwrap();
        assert!(
            FitJob::read(&path)
                .unwrap_err()
                .contains("unknown field `trian`")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
