//! Learning from a Label Studio project's annotations, in the background.
//!
//! A training event fetches the project's labeling config and annotated tasks (narrowed to the
//! text of its first `<Labels>` on a `<Text>`, so that the importer reads the text the project
//! labels whatever else a task holds), holds out a fixed share of them by
//! task id (never trained on), continues the served model on the rest into `DIR/vN` (`nertrain
//! fit --start-from`, in a process of its own, so that serving links no training code and a
//! training that fails or is killed cannot take the server with it; the served model's own
//! training file is rehearsed when it is at hand), and scores the new version and the served one
//! on the held-out tasks (`nertrain eval`, in processes of their own too: scoring in the server
//! would hold the served model's turn for as long as the held-out share takes, and it grows with
//! the project). The new version is served only if
//! it does no worse there; otherwise it stays on disk and the status says why. One training runs
//! at a time; events that come during it make one more. `DIR/versions.json`, replaced whole
//! after each version, says which version is served, so a crash loses nothing and the next
//! start serves the newest accepted version ([`model_to_serve`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nertrain_annotate::label_studio::{self, LabelingConfig, Task};
use nertrain_data::Scores;
use nertrain_model::ModelFiles;
use nertrain_tagger::{Tagger, lock};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::client::Connection;
use crate::served::{Served, Version, weights_id};
use crate::{LogLine, Logger};

/// The file that says which version is served.
const REGISTRY: &str = "versions.json";

/// How a version is trained and judged.
#[derive(Debug, Clone)]
pub struct LearnSettings {
    /// The `nertrain` binary that trains (`fit`).
    pub trainer: PathBuf,
    /// Epochs of continued training at most (the best on the held-out tasks is kept).
    pub epochs: usize,
    /// Threads training takes, so that tagging keeps the rest.
    pub threads: usize,
    /// Threads a version tags with once served (by default one per core).
    pub tag_threads: Option<usize>,
    /// The share of annotated tasks held out, in percent, chosen by task id.
    pub heldout_percent: u64,
    /// Annotation events that start a training (a training asked for outright starts one).
    pub every: usize,
    /// Dictionary files every version is judged and served with, beside the dictionary stored
    /// in it (which continued training keeps), as the model first served reads them.
    pub dictionaries: Vec<PathBuf>,
    /// Whether [`dictionaries`](Self::dictionaries) replace the stored entries of their labels
    /// rather than extend them.
    pub replace_dictionary: bool,
}

impl Default for LearnSettings {
    fn default() -> Self {
        Self {
            trainer: PathBuf::from("nertrain"),
            epochs: 10,
            threads: 1,
            tag_threads: None,
            heldout_percent: 20,
            every: 10,
            dictionaries: Vec::new(),
            replace_dictionary: false,
        }
    }
}

/// What learning did, for the log.
#[derive(Debug, Clone, PartialEq)]
pub enum StudioEvent {
    /// A training began.
    Started {
        /// Its version's name (`v3`).
        version: String,
        /// The Label Studio project.
        project: u64,
        /// Annotated tasks trained on, and held out.
        train_tasks: usize,
        /// Tasks held out.
        heldout_tasks: usize,
    },
    /// A version was trained, and served or kept.
    Finished(VersionRecord),
    /// A training failed.
    Failed {
        /// Why.
        message: String,
    },
}

/// A version trained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionRecord {
    /// Its directory's name, `vN`.
    pub name: String,
    /// Its weights' id (Label Studio's model version).
    pub id: Option<String>,
    /// Whether it was served.
    pub served: bool,
    /// Its span F1 on the held-out tasks.
    pub heldout_f1: f64,
    /// The F1 of the version served before it, on the same tasks.
    pub previous_f1: f64,
    /// Annotated tasks trained on.
    pub train_tasks: usize,
    /// Annotated tasks held out.
    pub heldout_tasks: usize,
    /// Why it was or was not served.
    pub reason: String,
    /// Seconds from the training's start to the decision.
    pub seconds: f64,
}

/// `DIR/versions.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Registry {
    /// The weights' id of the model the first version continued.
    base: String,
    /// The project learned from.
    project: Option<u64>,
    /// The version served (`vN`), or none: the base model.
    served: Option<String>,
    versions: Vec<VersionRecord>,
}

/// A training under way.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Progress {
    /// The version's name.
    pub version: String,
    /// The epoch being trained, from 1 (0: fetching and reading the annotations).
    pub epoch: usize,
    /// Epochs at most.
    pub epochs: usize,
    /// Seconds since it began.
    pub seconds: f64,
}

/// What `GET /model` says of learning.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LearningStatus {
    /// Where versions go.
    pub dir: PathBuf,
    /// The project learned from.
    pub project: Option<u64>,
    /// The version served (`vN`), or none: the model the server started with.
    pub served: Option<String>,
    /// The versions trained, oldest first.
    pub versions: Vec<VersionRecord>,
    /// The training under way.
    pub training: Option<Progress>,
    /// Whether another training will follow it.
    pub pending: bool,
    /// Why the last training failed, until one succeeds.
    pub last_error: Option<String>,
}

/// The model the server starts with: the newest version served before in `dir`, or `base`.
/// A `dir` that continued another model is an error.
pub fn model_to_serve(dir: &Path, base: &Path) -> Result<PathBuf, String> {
    let Some(registry) = read_registry(dir)? else {
        return Ok(base.to_path_buf());
    };
    let id = weights_id(&ModelFiles::new(base).weights_file()).map_err(|e| e.to_string())?;
    if registry.base != id {
        return Err(format!(
            "{}: its versions continue the model of weights {}, not {} ({}); give that \
             --model, or another --train-into",
            dir.join(REGISTRY).display(),
            registry.base,
            id,
            base.display()
        ));
    }
    Ok(match registry.served {
        Some(name) => dir.join(name),
        None => base.to_path_buf(),
    })
}

fn read_registry(dir: &Path) -> Result<Option<Registry>, String> {
    let path = dir.join(REGISTRY);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

struct State {
    registry: Registry,
    /// Connections `/setup` gave, by project.
    connections: std::collections::HashMap<u64, Connection>,
    /// The project whose training is asked for.
    requested: Option<u64>,
    /// Annotation events since the last training was asked for.
    annotations: usize,
    training: Option<(Progress, Instant)>,
    last_error: Option<String>,
    stopping: bool,
}

struct Shared {
    dir: PathBuf,
    settings: LearnSettings,
    /// From the environment; before any `/setup` connection.
    connection: Option<Connection>,
    served: Arc<Served>,
    log: Logger,
    state: Mutex<State>,
    wake: Condvar,
    interrupt: Arc<AtomicBool>,
}

impl Shared {
    /// A `nertrain` command on the threads training may take, its errors appended to `log`.
    fn trainer(&self, log: &Path) -> Result<Command, String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let mut command = Command::new(&self.settings.trainer);
        command
            .env("RAYON_NUM_THREADS", self.settings.threads.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        Ok(command)
    }

    /// Runs `command` to its end, calling `tick` now and then; a stop kills it.
    fn run_child(
        &self,
        mut command: Command,
        name: &str,
        log: &Path,
        mut tick: impl FnMut(),
    ) -> Result<(), String> {
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.settings.trainer.display()))?;
        let status = loop {
            if self.interrupt.load(Ordering::SeqCst) {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("training {name} was stopped; it is not served"));
            }
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => {}
                Err(e) => return Err(format!("training {name}: {e}")),
            }
            tick();
            std::thread::sleep(Duration::from_millis(100));
        };
        if status.success() {
            return Ok(());
        }
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let last: Vec<&str> = text.lines().rev().take(3).collect();
        let last: Vec<&str> = last.into_iter().rev().collect();
        Err(format!(
            "training {name} failed ({status}; {}): {}",
            log.display(),
            last.join(" / ")
        ))
    }
}

/// The learner: its state, and the thread that trains.
pub(crate) struct Learner {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Learner {
    /// Starts learning into `dir` (made if missing).
    pub(crate) fn start(
        dir: PathBuf,
        settings: LearnSettings,
        connection: Option<Connection>,
        served: Arc<Served>,
        log: Logger,
    ) -> std::io::Result<Self> {
        std::fs::create_dir_all(&dir)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        let registry = read_registry(&dir)
            .map_err(std::io::Error::other)?
            .unwrap_or_else(|| Registry {
                base: served.get().id.clone(),
                project: None,
                served: None,
                versions: Vec::new(),
            });
        let shared = Arc::new(Shared {
            dir,
            settings,
            connection,
            served,
            log,
            state: Mutex::new(State {
                registry,
                connections: Default::default(),
                requested: None,
                annotations: 0,
                training: None,
                last_error: None,
                stopping: false,
            }),
            wake: Condvar::new(),
            interrupt: Arc::new(AtomicBool::new(false)),
        });
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("nertrain-learner".into())
                .spawn(move || run(&shared))?
        };
        Ok(Self {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Keeps the address and key `/setup` gave for `project`.
    pub(crate) fn set_up(&self, project: u64, connection: Option<Connection>) {
        if let Some(connection) = connection {
            lock(&self.shared.state)
                .connections
                .insert(project, connection);
        }
    }

    /// Asks for a training on `project`'s annotations, outright or as one more annotation
    /// (which starts one every [`LearnSettings::every`]); says what will happen.
    pub(crate) fn request(
        &self,
        project: u64,
        connection: Option<Connection>,
        outright: bool,
    ) -> Result<String, String> {
        let mut state = lock(&self.shared.state);
        if let Some(bound) = state.registry.project
            && bound != project
        {
            return Err(format!(
                "this server learns from project {bound}; serve project {project} with its own \
                 --train-into"
            ));
        }
        if let Some(connection) = connection {
            state.connections.insert(project, connection);
        }
        if !outright && state.requested.is_none() {
            state.annotations += 1;
            let every = self.shared.settings.every;
            if state.annotations < every {
                return Ok(format!(
                    "{} of {every} annotations toward the next training",
                    state.annotations
                ));
            }
        }
        state.annotations = 0;
        let status = match (&state.training, state.requested) {
            (Some((progress, _)), _) => format!(
                "training {} under way; one more will follow it",
                progress.version
            ),
            (None, Some(_)) => "training queued".to_string(),
            (None, None) => "training started".to_string(),
        };
        state.requested = Some(project);
        self.shared.wake.notify_all();
        Ok(status)
    }

    /// What learning did and is doing.
    pub(crate) fn status(&self) -> LearningStatus {
        let state = lock(&self.shared.state);
        LearningStatus {
            dir: self.shared.dir.clone(),
            project: state.registry.project,
            served: state.registry.served.clone(),
            versions: state.registry.versions.clone(),
            training: state.training.as_ref().map(|(progress, started)| Progress {
                seconds: started.elapsed().as_secs_f64(),
                ..progress.clone()
            }),
            pending: state.requested.is_some(),
            last_error: state.last_error.clone(),
        }
    }

    /// Stops a training under way after its current batch (its version is not served) and
    /// waits for the thread.
    pub(crate) fn stop(&self) {
        lock(&self.shared.state).stopping = true;
        self.shared.interrupt.store(true, Ordering::SeqCst);
        self.shared.wake.notify_all();
        if let Some(thread) = lock(&self.thread).take() {
            let _ = thread.join();
        }
    }
}

/// Trains each time one is asked for, until stopped.
fn run(shared: &Shared) {
    loop {
        let project = {
            let mut state = lock(&shared.state);
            loop {
                if state.stopping {
                    return;
                }
                if let Some(project) = state.requested.take() {
                    break project;
                }
                state = shared
                    .wake
                    .wait(state)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        };
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            train_version(shared, project)
        }))
        .unwrap_or_else(|_| Err("the training panicked".into()));
        let mut state = lock(&shared.state);
        state.training = None;
        match outcome {
            Ok(()) => state.last_error = None,
            Err(message) => {
                state.last_error = Some(message.clone());
                drop(state);
                (shared.log)(LogLine::Studio(StudioEvent::Failed { message }));
            }
        }
    }
}

/// The next version's name: one past the highest `vN` in `dir`, finished or not, so that a
/// crashed training's directory is never reused.
fn next_name(dir: &Path) -> Result<String, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let highest = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_prefix('v')?
                .parse::<u64>()
                .ok()
        })
        .max()
        .unwrap_or(0);
    Ok(format!("v{}", highest + 1))
}

/// Whether task `id` is held out: by a mix of its id, so that tasks imported in any order or
/// pattern are held out evenly, and a task held out once always is.
fn held_out(id: u64, percent: u64) -> bool {
    let mut x = id.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    x % 100 < percent
}

/// The export's tasks split into those trained on and those held out.
fn split(export: &[u8], percent: u64) -> Result<(Vec<&RawValue>, Vec<&RawValue>), String> {
    let tasks: Vec<&RawValue> = serde_json::from_slice(export)
        .map_err(|e| format!("Label Studio's export is not a JSON array of tasks: {e}"))?;
    let (mut train, mut heldout) = (Vec::new(), Vec::new());
    for (i, task) in tasks.into_iter().enumerate() {
        let number = || format!("Label Studio's export: task number {}", i + 1);
        let read: Task =
            serde_json::from_str(task.get()).map_err(|e| format!("{}: {e}", number()))?;
        let id = read
            .id
            .and_then(|id| u64::try_from(id).ok())
            .ok_or_else(|| format!("{}: expected its `id`, a whole number", number()))?;
        if held_out(id, percent) {
            heldout.push(task);
        } else {
            train.push(task);
        }
    }
    Ok((train, heldout))
}

/// Trains, judges and (when it does no worse) serves one version.
fn train_version(shared: &Shared, project: u64) -> Result<(), String> {
    let started = Instant::now();
    let name = next_name(&shared.dir)?;
    let epochs = shared.settings.epochs;
    let set_progress = |epoch: usize| {
        let mut state = lock(&shared.state);
        let progress = Progress {
            version: name.clone(),
            epoch,
            epochs,
            seconds: 0.0,
        };
        state.training = Some((progress, started));
    };
    set_progress(0);
    let connection = {
        let state = lock(&shared.state);
        shared
            .connection
            .clone()
            .or_else(|| state.connections.get(&project).cloned())
    }
    .ok_or(
        "no Label Studio to fetch annotations from: set LABEL_STUDIO_URL and \
         LABEL_STUDIO_API_KEY, or connect the model in Label Studio (its setup gives them)",
    )?;
    // The text the project labels, which a task's data alone does not say when it holds more.
    let config = connection.label_config(project)?;
    let config = LabelingConfig::parse(&config)
        .map_err(|e| format!("project {project}'s labeling config: {e}"))?;
    let target = &config.targets[0];
    let export = connection.export(project)?;
    let (train, heldout) = split(&export, shared.settings.heldout_percent)?;
    if heldout.is_empty() || train.is_empty() {
        return Err(format!(
            "{} annotated tasks, {} of them held out: a version needs tasks to train on and \
             held-out tasks to be judged on (about {}% of tasks, chosen by id, are held out); \
             annotate more",
            train.len() + heldout.len(),
            heldout.len(),
            shared.settings.heldout_percent
        ));
    }
    let data = shared.dir.join("data").join(&name);
    std::fs::create_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
    let (train_file, heldout_file) = (data.join("train.json"), data.join("heldout.json"));
    for (path, tasks) in [(&train_file, &train), (&heldout_file, &heldout)] {
        let narrowed = label_studio::narrow_tasks(tasks, target)
            .map_err(|e| format!("Label Studio's export: {e}"))?;
        nertrain_data::io::write_atomic(path, &narrowed)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let (train_tasks, heldout_tasks) = (train.len(), heldout.len());
    drop(export);
    (shared.log)(LogLine::Studio(StudioEvent::Started {
        version: name.clone(),
        project,
        train_tasks,
        heldout_tasks,
    }));

    let current = shared.served.get();
    let from = current.tagger.dir().to_path_buf();
    let output = shared.dir.join(&name);
    let quoted = |path: &Path| serde_json::to_string(&path.to_string_lossy()).unwrap_or_default();
    let settings = [
        format!("data.train={}", quoted(&train_file)),
        // The held-out tasks choose the epoch and judge the version; they are never trained on.
        format!("data.dev={}", quoted(&heldout_file)),
        format!("data.test={}", quoted(&heldout_file)),
        format!("train.output={}", quoted(&output)),
        format!("train.epochs={epochs}"),
        "train.with_dev=false".to_string(),
    ];
    let log_file = data.join("fit.log");
    let mut fit = shared.trainer(&log_file)?;
    fit.arg("fit").arg("--start-from").arg(&from);
    for setting in &settings {
        fit.arg("--set").arg(setting);
    }
    // The epoch under way, from the lines the run adds to its metrics.
    let metrics = output.join("metrics.jsonl");
    shared.run_child(fit, &name, &log_file, || {
        let done = std::fs::read_to_string(&metrics).map_or(0, |m| m.lines().count());
        set_progress((done + 1).min(epochs));
    })?;
    // Judged in processes of their own too, so that scoring takes no turn from the served
    // model's requests.
    let score = |model: &Path, scores: &str| -> Result<f64, String> {
        let scores = data.join(scores);
        let mut eval = shared.trainer(&log_file)?;
        eval.arg("eval")
            .arg("--model")
            .arg(model)
            .arg("--data")
            .arg(&heldout_file)
            .arg("--json");
        for file in &shared.settings.dictionaries {
            eval.arg("--dictionary").arg(file);
        }
        if shared.settings.replace_dictionary {
            eval.arg("--replace-dictionary");
        }
        let out =
            std::fs::File::create(&scores).map_err(|e| format!("{}: {e}", scores.display()))?;
        eval.stdout(out);
        shared.run_child(eval, &name, &log_file, || {})?;
        let read: Scores = std::fs::read(&scores)
            .map_err(|e| e.to_string())
            .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
            .map_err(|e| format!("scoring the held-out tasks ({}): {e}", scores.display()))?;
        Ok(read.overall.f1)
    };
    let previous_f1 = score(&from, "heldout-served.json")?;
    let heldout_f1 = score(&output, "heldout-new.json")?;
    let served = heldout_f1 >= previous_f1;
    let version = if served {
        let trained = Tagger::load_with_threads(
            &output,
            current.tagger.device(),
            shared.settings.tag_threads,
        )
        .and_then(|tagger| {
            tagger.with_dictionaries(
                &shared.settings.dictionaries,
                shared.settings.replace_dictionary,
            )
        })
        .map_err(|e| format!("{}: {e}", output.display()))?;
        Some(Version::new(trained).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let record = VersionRecord {
        name: name.clone(),
        id: Some(match &version {
            Some(version) => version.id.clone(),
            None => {
                weights_id(&ModelFiles::new(&output).weights_file()).map_err(|e| e.to_string())?
            }
        }),
        served,
        heldout_f1,
        previous_f1,
        train_tasks,
        heldout_tasks,
        reason: if served {
            format!("held-out F1 {heldout_f1:.2} is not below the served model's {previous_f1:.2}")
        } else {
            format!(
                "held-out F1 {heldout_f1:.2} is below the served model's {previous_f1:.2}; kept \
                 on disk, not served"
            )
        },
        seconds: started.elapsed().as_secs_f64(),
    };
    let mut state = lock(&shared.state);
    let mut registry = state.registry.clone();
    registry.project = Some(project);
    registry.versions.push(record.clone());
    if served {
        registry.served = Some(name);
    }
    let bytes = serde_json::to_vec_pretty(&registry).map_err(|e| e.to_string())?;
    let path = shared.dir.join(REGISTRY);
    nertrain_data::io::write_atomic(&path, &bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    // Served only once the registry says so, so that a restart serves it too.
    if let Some(version) = version {
        shared.served.replace(version);
    }
    state.registry = registry;
    drop(state);
    (shared.log)(LogLine::Studio(StudioEvent::Finished(record)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_out_about_the_share_asked_and_always_the_same_tasks() {
        let held = (1..=10_000).filter(|&id| held_out(id, 20)).count();
        assert!((1_800..=2_200).contains(&held), "{held}");
        assert_eq!(held_out(17, 20), held_out(17, 20));
        assert!((1..=1000).all(|id| !held_out(id, 0)));
    }

    #[test]
    fn a_new_version_never_reuses_a_directory() {
        let dir = std::env::temp_dir().join(format!("nertrain-learn-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("v2")).unwrap();
        std::fs::create_dir_all(dir.join("v10")).unwrap();
        std::fs::create_dir_all(dir.join("data")).unwrap();
        assert_eq!(next_name(&dir).unwrap(), "v11");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
