//! Learning from a Label Studio project's annotations, in the background, a training a version
//! in five steps:
//!
//! 1. **fetch** the project's labeling config and annotated tasks;
//! 2. **stage** them: split by task id into those trained on and a fixed share held out (never
//!    trained on), each narrowed to the text of the config's first `<Labels>` on a `<Text>`, so
//!    that the importer reads the text the project labels whatever else a task holds;
//! 3. **train**: the served model continued on them into `DIR/vN` by a [`FitJob`] that
//!    `nertrain fit --job` runs in a process of its own (so that serving links no training code
//!    and a training that fails or is killed cannot take the server with it; the served model's
//!    own training file is rehearsed when it is at hand), its progress and outcome read from the
//!    job's [`JobEvent`]s;
//! 4. **judge** the new version and the served one on the held-out tasks (`nertrain eval`, in
//!    processes of their own too: scoring in the server would hold the served model's turn for
//!    as long as the held-out share takes, and it grows with the project), read as `Scores`;
//! 5. **publish**: the version is recorded, and served only if it does no worse; otherwise it
//!    stays on disk and the status says why.
//!
//! Each step fails with its own [`LearnError`]. One training runs at a time; events that come
//! during it make one more. `DIR/versions.json`, replaced whole after each version, says which
//! version is served, so a crash loses nothing and the next start serves the newest accepted
//! version ([`model_to_serve`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nertrain_annotate::label_studio::{self, LabelingConfig, Target, Task};
use nertrain_data::Scores;
use nertrain_model::ModelFiles;
use nertrain_model::job::{FitJob, JobEvent};
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
    fn trainer(&self, log: &Path) -> Result<Command, LearnError> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(file_error(log))?;
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
    ) -> Result<(), LearnError> {
        let failed = |message: String| LearnError::Child {
            version: name.to_string(),
            message,
        };
        let mut child = command.spawn().map_err(|e| {
            failed(format!(
                "cannot start {}: {e}",
                self.settings.trainer.display()
            ))
        })?;
        let status = loop {
            if self.interrupt.load(Ordering::SeqCst) {
                let _ = child.kill();
                let _ = child.wait();
                return Err(LearnError::Stopped {
                    version: name.to_string(),
                });
            }
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => {}
                Err(e) => return Err(failed(e.to_string())),
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
        Err(failed(format!(
            "failed ({status}; {}): {}",
            log.display(),
            last.join(" / ")
        )))
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
        .map_err(|_| "the training panicked".to_string())
        .and_then(|outcome| outcome.map_err(|e| e.to_string()));
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
fn next_name(dir: &Path) -> Result<String, LearnError> {
    let entries = std::fs::read_dir(dir).map_err(file_error(dir))?;
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

/// Why a training made no version: each step's own failures.
#[derive(Debug)]
pub(crate) enum LearnError {
    /// No Label Studio address and key, from the environment or `/setup`.
    NoConnection,
    /// Label Studio could not be asked, or answered with an error.
    Fetch(String),
    /// The project's labeling config has no entity control on a text.
    Config {
        /// The project.
        project: u64,
        /// What the config lacks.
        message: String,
    },
    /// The export is not what Label Studio writes.
    Export(String),
    /// Too few annotated tasks to train on and to judge on.
    TooFew {
        /// Annotated tasks.
        tasks: usize,
        /// Of them, held out.
        heldout: usize,
        /// The share held out, in percent.
        percent: u64,
    },
    /// A file of the version could not be written or read.
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// `nertrain` (`fit` or `eval`) could not run, or failed.
    Child {
        /// The version.
        version: String,
        /// What failed, and the end of its log.
        message: String,
    },
    /// The server stopped it.
    Stopped {
        /// The version.
        version: String,
    },
    /// The version trained cannot be loaded to be served.
    Load(String),
}

impl std::fmt::Display for LearnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoConnection => write!(
                f,
                "no Label Studio to fetch annotations from: set LABEL_STUDIO_URL and \
                 LABEL_STUDIO_API_KEY, or connect the model in Label Studio (its setup gives them)"
            ),
            Self::Fetch(message) | Self::Load(message) => f.write_str(message),
            Self::Config { project, message } => {
                write!(f, "project {project}'s labeling config: {message}")
            }
            Self::Export(message) => write!(f, "Label Studio's export: {message}"),
            Self::TooFew {
                tasks,
                heldout,
                percent,
            } => write!(
                f,
                "{tasks} annotated tasks, {heldout} of them held out: a version needs tasks to \
                 train on and held-out tasks to be judged on (about {percent}% of tasks, chosen \
                 by id, are held out); annotate more"
            ),
            Self::File { path, message } => write!(f, "{}: {message}", path.display()),
            Self::Child { version, message } => write!(f, "training {version} {message}"),
            Self::Stopped { version } => {
                write!(f, "training {version} was stopped; it is not served")
            }
        }
    }
}

/// A [`LearnError::File`] of `path`.
fn file_error<E: std::fmt::Display>(path: &Path) -> impl Fn(E) -> LearnError + '_ {
    move |e| LearnError::File {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// The export's tasks split into those trained on and those held out.
fn split(export: &[u8], percent: u64) -> Result<(Vec<Task>, Vec<Task>), LearnError> {
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
struct Fetched {
    target: Target,
    export: Vec<u8>,
}

/// A version's data on disk: the tasks trained on and held out, narrowed to the target.
struct Staged {
    /// `DIR/data/vN`.
    dir: PathBuf,
    train: PathBuf,
    heldout: PathBuf,
    train_tasks: usize,
    heldout_tasks: usize,
}

/// The held-out F1 of the version served and of the new one.
struct Judged {
    previous_f1: f64,
    heldout_f1: f64,
}

/// Trains, judges and (when it does no worse) serves one version: fetch, stage, train, judge,
/// publish.
fn train_version(shared: &Shared, project: u64) -> Result<(), LearnError> {
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
    let fetched = fetch(shared, project)?;
    let staged = stage(shared, &name, fetched)?;
    (shared.log)(LogLine::Studio(StudioEvent::Started {
        version: name.clone(),
        project,
        train_tasks: staged.train_tasks,
        heldout_tasks: staged.heldout_tasks,
    }));
    let current = shared.served.get();
    let from = current.tagger.dir().to_path_buf();
    let output = shared.dir.join(&name);
    train(shared, &name, &staged, &from, &output, set_progress)?;
    let judged = judge(shared, &name, &staged, &from, &output)?;
    let served = judged.heldout_f1 >= judged.previous_f1;
    let version = if served {
        Some(load_version(shared, &output, &current.tagger)?)
    } else {
        None
    };
    let id = match &version {
        Some(version) => version.id.clone(),
        None => weights_id(&ModelFiles::new(&output).weights_file())
            .map_err(|e| LearnError::Load(e.to_string()))?,
    };
    let Judged {
        previous_f1,
        heldout_f1,
    } = judged;
    let record = VersionRecord {
        name,
        id: Some(id),
        served,
        heldout_f1,
        previous_f1,
        train_tasks: staged.train_tasks,
        heldout_tasks: staged.heldout_tasks,
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
    publish(shared, project, record, version)
}

/// Fetch: the project's labeling config (which text it labels, which a task's data alone does
/// not say when it holds more) and its annotated tasks.
fn fetch(shared: &Shared, project: u64) -> Result<Fetched, LearnError> {
    let connection = {
        let state = lock(&shared.state);
        shared
            .connection
            .clone()
            .or_else(|| state.connections.get(&project).cloned())
    }
    .ok_or(LearnError::NoConnection)?;
    let config = connection
        .label_config(project)
        .map_err(LearnError::Fetch)?;
    let config = LabelingConfig::parse(&config)
        .map_err(|message| LearnError::Config { project, message })?;
    let target = config.targets[0].clone();
    let export = connection.export(project).map_err(LearnError::Fetch)?;
    Ok(Fetched { target, export })
}

/// Stage: the tasks split by id into trained on and held out, each narrowed to the target's
/// text, written under `DIR/data/vN`.
fn stage(shared: &Shared, name: &str, fetched: Fetched) -> Result<Staged, LearnError> {
    let percent = shared.settings.heldout_percent;
    let (train, heldout) = split(&fetched.export, percent)?;
    if heldout.is_empty() || train.is_empty() {
        return Err(LearnError::TooFew {
            tasks: train.len() + heldout.len(),
            heldout: heldout.len(),
            percent,
        });
    }
    let dir = shared.dir.join("data").join(name);
    std::fs::create_dir_all(&dir).map_err(file_error(&dir))?;
    let (train_file, heldout_file) = (dir.join("train.json"), dir.join("heldout.json"));
    for (path, tasks) in [(&train_file, &train), (&heldout_file, &heldout)] {
        let narrowed =
            label_studio::narrow_tasks(tasks, &fetched.target).map_err(LearnError::Export)?;
        nertrain_data::io::write_atomic(path, &narrowed).map_err(file_error(path))?;
    }
    Ok(Staged {
        train_tasks: train.len(),
        heldout_tasks: heldout.len(),
        dir,
        train: train_file,
        heldout: heldout_file,
    })
}

/// Train: the served model continued on the staged tasks into `output` (`nertrain fit --job`,
/// in a process of its own), each epoch read from the job's events as it is written.
fn train(
    shared: &Shared,
    name: &str,
    staged: &Staged,
    from: &Path,
    output: &Path,
    set_progress: impl Fn(usize),
) -> Result<(), LearnError> {
    let epochs = shared.settings.epochs;
    let job = FitJob {
        start_from: from.to_path_buf(),
        train: staged.train.clone(),
        // The held-out tasks choose the epoch and judge the version; they are never trained on.
        heldout: staged.heldout.clone(),
        output: output.to_path_buf(),
        epochs,
        overrides: Vec::new(),
        events: staged.dir.join("events.jsonl"),
    };
    let job_file = staged.dir.join("job.json");
    let bytes = serde_json::to_vec_pretty(&job).expect("a job serialises");
    nertrain_data::io::write_atomic(&job_file, &bytes).map_err(file_error(&job_file))?;
    let log_file = staged.dir.join("fit.log");
    let mut fit = shared.trainer(&log_file)?;
    fit.arg("fit").arg("--job").arg(&job_file);
    let epoch_done = || {
        JobEvent::read_all(&job.events)
            .unwrap_or_default()
            .iter()
            .filter_map(|event| match event {
                JobEvent::Epoch { epoch, .. } => Some(*epoch),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    };
    shared.run_child(fit, name, &log_file, || {
        set_progress((epoch_done() + 1).min(epochs));
    })?;
    let events = JobEvent::read_all(&job.events).map_err(|message| LearnError::File {
        path: job.events.clone(),
        message,
    })?;
    match events.last() {
        Some(JobEvent::Done { .. }) => Ok(()),
        Some(JobEvent::Error { message }) => Err(LearnError::Child {
            version: name.to_string(),
            message: format!("failed: {message}"),
        }),
        _ => Err(LearnError::Child {
            version: name.to_string(),
            message: format!("ended without saying how ({})", job.events.display()),
        }),
    }
}

/// Judge: the served model and the new one scored on the held-out tasks (`nertrain eval`, in
/// processes of their own too, so that scoring takes no turn from the served model's requests).
fn judge(
    shared: &Shared,
    name: &str,
    staged: &Staged,
    from: &Path,
    output: &Path,
) -> Result<Judged, LearnError> {
    let log_file = staged.dir.join("fit.log");
    let score = |model: &Path, scores: &str| -> Result<f64, LearnError> {
        let scores = staged.dir.join(scores);
        let mut eval = shared.trainer(&log_file)?;
        eval.arg("eval")
            .arg("--model")
            .arg(model)
            .arg("--data")
            .arg(&staged.heldout)
            .arg("--json");
        for file in &shared.settings.dictionaries {
            eval.arg("--dictionary").arg(file);
        }
        if shared.settings.replace_dictionary {
            eval.arg("--replace-dictionary");
        }
        let out = std::fs::File::create(&scores).map_err(file_error(&scores))?;
        eval.stdout(out);
        shared.run_child(eval, name, &log_file, || {})?;
        let read: Scores = std::fs::read(&scores)
            .map_err(|e| e.to_string())
            .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
            .map_err(|message| LearnError::File {
                path: scores.clone(),
                message: format!("scoring the held-out tasks: {message}"),
            })?;
        Ok(read.overall.f1)
    };
    Ok(Judged {
        previous_f1: score(from, "heldout-served.json")?,
        heldout_f1: score(output, "heldout-new.json")?,
    })
}

/// The new version, loaded on the served model's device to be served with the server's
/// dictionaries.
fn load_version(shared: &Shared, output: &Path, served: &Tagger) -> Result<Version, LearnError> {
    let trained = Tagger::load_with_threads(output, served.device(), shared.settings.tag_threads)
        .and_then(|tagger| {
            tagger.with_dictionaries(
                &shared.settings.dictionaries,
                shared.settings.replace_dictionary,
            )
        })
        .map_err(|e| LearnError::Load(format!("{}: {e}", output.display())))?;
    Version::new(trained).map_err(|e| LearnError::Load(e.to_string()))
}

/// Publish: the version recorded in `versions.json` (replaced whole), then served if it is to be,
/// so that a restart serves it too.
fn publish(
    shared: &Shared,
    project: u64,
    record: VersionRecord,
    version: Option<Version>,
) -> Result<(), LearnError> {
    let mut state = lock(&shared.state);
    let mut registry = state.registry.clone();
    registry.project = Some(project);
    registry.versions.push(record.clone());
    if record.served {
        registry.served = Some(record.name.clone());
    }
    let bytes = serde_json::to_vec_pretty(&registry).expect("the registry serialises");
    let path = shared.dir.join(REGISTRY);
    nertrain_data::io::write_atomic(&path, &bytes).map_err(file_error(&path))?;
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
