//! Steps 1 and 2: the project's annotated tasks fetched, split into those trained on and those
//! held out, and staged as the files a training reads.

use std::path::{Path, PathBuf};

use nertrain_annotate::PreAnnotated;
use nertrain_annotate::label_studio::{self, LabelingConfig, Target, Task};
use serde_json::value::RawValue;

use crate::error::{LearnError, file_error};

use super::{EXPORT, Shared};

/// Whether task `id` is held out: by a mix of its id, so that tasks imported in any order or
/// pattern are held out evenly, and a task held out once always is.
pub(super) fn held_out(id: u64, percent: u64) -> bool {
    let mut x = id.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    x % 100 < percent
}

/// The export's tasks split into those trained on and those held out.
pub(super) fn split(export: &[u8], percent: u64) -> Result<(Vec<Task>, Vec<Task>), LearnError> {
    let tasks: Vec<&RawValue> = serde_json::from_slice(export)
        .map_err(|e| LearnError::Export(format!("not a JSON array of tasks: {e}")))?;
    let (mut train, mut heldout) = (Vec::new(), Vec::new());
    for (i, task) in tasks.into_iter().enumerate() {
        let number = || format!("task number {}", i + 1);
        let task: Task = serde_json::from_str(task.get())
            .map_err(|e| LearnError::Export(format!("{}: {e}", number())))?;
        let id = task
            .id
            .and_then(|id| u64::try_from(id).ok())
            .ok_or_else(|| {
                LearnError::Export(format!("{}: expected its `id`, a whole number", number()))
            })?;
        if held_out(id, percent) {
            heldout.push(task);
        } else {
            train.push(task);
        }
    }
    Ok((train, heldout))
}

/// What Label Studio gave: the target the project labels and its annotated tasks.
pub(super) struct Fetched {
    pub(super) target: Target,
    /// The export, streamed to disk.
    pub(super) export: PathBuf,
}

/// A version's data on disk: the tasks trained on and held out, narrowed to the target.
pub(super) struct Staged {
    /// `DIR/data/vN`.
    pub(super) dir: PathBuf,
    pub(super) train: PathBuf,
    /// What chooses the epoch and judges: the held-out tasks as texts annotated in full (a
    /// partly annotated task's known parts), or the dev file.
    pub(super) heldout: PathBuf,
    /// Whether [`heldout`](Self::heldout) is the dev file.
    pub(super) dev: bool,
    pub(super) train_tasks: usize,
    pub(super) heldout_tasks: usize,
    /// Held-out tasks annotated only in part, scored on their known parts.
    pub(super) heldout_partial: usize,
    /// The labels the project labels: the only ones scored.
    pub(super) labels: Vec<String>,
    /// The served model's labels the project lacks: open in training, out of scoring.
    pub(super) open_labels: Vec<String>,
}

/// Fetch: the project's labeling config (which text it labels, which a task's data alone does
/// not say when it holds more) and its annotated tasks, streamed into `DIR/data/vN` under the
/// export cap.
pub(super) fn fetch(shared: &Shared, project: u64, name: &str) -> Result<Fetched, LearnError> {
    let connection = shared.connection().ok_or(LearnError::NoConnection)?;
    let config = connection
        .label_config(project)
        .map_err(LearnError::Fetch)?;
    let config = LabelingConfig::parse(&config)
        .map_err(|message| LearnError::Config { project, message })?;
    let target = config
        .entity_target()
        .map_err(|message| LearnError::Config { project, message })?
        .0
        .clone();
    let export = shared.dir.join("data").join(name).join(EXPORT);
    connection
        .export_to(project, &export, shared.settings.max_export_bytes)
        .map_err(LearnError::Fetch)?;
    Ok(Fetched { target, export })
}

/// Stage: the tasks split by id into trained on and held out (none held out where a dev file
/// judges), each narrowed to the target's text, written under `DIR/data/vN`; the held-out ones
/// as texts annotated in full.
pub(super) fn stage(
    shared: &Shared,
    name: &str,
    fetched: Fetched,
    model_labels: &[String],
) -> Result<Staged, LearnError> {
    let dev = shared.settings.dev.clone();
    let percent = if dev.is_some() {
        0
    } else {
        shared.settings.heldout_percent
    };
    let export = std::fs::read(&fetched.export).map_err(file_error(&fetched.export))?;
    let (train, heldout) = split(&export, percent)?;
    drop(export);
    let _ = std::fs::remove_file(&fetched.export);
    let tasks = train.len() + heldout.len();
    let too_few = |heldout: usize| LearnError::TooFew {
        tasks,
        heldout,
        percent,
    };
    if train.is_empty() || (dev.is_none() && heldout.is_empty()) {
        return Err(too_few(heldout.len()));
    }
    let dir = shared.dir.join("data").join(name);
    let narrow = |tasks: &[Task]| {
        label_studio::narrow_tasks(tasks, &fetched.target).map_err(LearnError::Export)
    };
    let train_file = dir.join("train.json");
    nertrain_data::io::write_atomic(&train_file, narrow(&train)?.as_bytes())
        .map_err(file_error(&train_file))?;
    let (heldout_file, heldout_partial) = match &dev {
        Some(dev) => (dev.clone(), 0),
        None => write_heldout(&narrow(&heldout)?, &dir.join("heldout.jsonl"))?
            .ok_or_else(|| too_few(0))?,
    };
    let labels = fetched.target.labels.clone();
    Ok(Staged {
        train_tasks: train.len(),
        heldout_tasks: heldout.len(),
        heldout_partial,
        open_labels: model_labels
            .iter()
            .filter(|label| !labels.contains(label))
            .cloned()
            .collect(),
        labels,
        dir,
        train: train_file,
        heldout: heldout_file,
        dev: dev.is_some(),
    })
}

/// The held-out tasks (`narrowed`, the JSON array [`label_studio::narrow_tasks`] makes) written
/// to `file` as texts annotated in full: each task's known parts. Says how many tasks are known
/// in part only, or `None` when no text is left to judge on.
pub(super) fn write_heldout(
    narrowed: &str,
    file: &Path,
) -> Result<Option<(PathBuf, usize)>, LearnError> {
    let read = nertrain_annotate::parse_annotated(narrowed, Path::new("held-out tasks.json"))
        .map_err(|e| LearnError::Export(e.to_string()))?;
    let partial = read.texts.iter().filter(|t| t.is_partial()).count();
    let parts: Vec<PreAnnotated> = read
        .texts
        .iter()
        .flat_map(|text| text.known_parts())
        .filter(|part| !part.text.trim().is_empty())
        .map(|part| PreAnnotated {
            spans: part.spans.into_iter().map(|span| (span, 1.0)).collect(),
            text: part.text,
            score: 0.0,
            line: part.line,
            regions: Vec::new(),
            partial: false,
        })
        .collect();
    if parts.is_empty() {
        return Ok(None);
    }
    let lines = nertrain_annotate::doccano::lines(&parts);
    nertrain_data::io::write_atomic(file, lines.as_bytes()).map_err(file_error(file))?;
    Ok(Some((file.to_path_buf(), partial)))
}
