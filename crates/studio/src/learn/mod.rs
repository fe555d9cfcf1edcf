//! Learning from a Label Studio project's annotations, in the background, a training a version
//! in five steps:
//!
//! 1. **fetch** the project's labeling config and annotated tasks;
//! 2. **stage** them: split by task id into those trained on and a fixed share held out (never
//!    trained on) — or all trained on, where a gold dev file judges instead — each narrowed to
//!    the text of the config's first `<Labels>` on a `<Text>`, so that the importer reads the
//!    text the project labels whatever else a task holds;
//! 3. **train**: the served model continued on them into `DIR/vN` by a [`FitJob`](nertrain_data::job::FitJob) that
//!    `nertrain fit --job` runs in a process of its own (so that serving links no training code
//!    and a training that fails or is killed cannot take the server with it; the training file
//!    of the model the server started from is rehearsed when it is at hand, never an earlier
//!    version's tasks, which the export holds again), its progress and outcome read from the
//!    job's [`JobEvent`](nertrain_data::job::JobEvent)s;
//! 4. **judge** the new version against the served one on the held-out tasks or the dev file,
//!    each scored once and as the epoch was chosen: the new version by its training (the
//!    held-out file is its test file), the served one by a [`ScoreJob`](nertrain_data::job::ScoreJob) that `nertrain eval
//!    --job` runs (in a process of its own too: scoring in the server would hold the served
//!    model's turn for as long as the held-out share takes, and it grows with the project);
//! 5. **publish**: the version is recorded, and served only if it does no worse; otherwise it
//!    stays on disk and the status says why. Either way Label Studio is brought in step: with
//!    the new version's predictions, or with the served version's regions re-cut for the tasks
//!    still without an annotation (fewer now, so the cut a region budget needs has moved).
//!
//! The steps are `stage.rs`'s (1, 2), `jobs.rs`'s (the processes that train and score) and
//! `version.rs`'s (a version through 3 to 5); this module keeps the scheduler, its state and
//! what it reports. Each step fails with its own `LearnError`. One training runs at a time; events that come
//! during it make one more. `DIR/versions.json`, replaced whole after each version, says which
//! version is served, so a crash loses nothing and the next start serves the newest accepted
//! version ([`model_to_serve`](crate::versions::model_to_serve)); the registry and pruning are
//! [`versions`](crate::versions)', whether a version is served `judge.rs`'s.

mod jobs;
mod stage;
mod version;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nertrain_data::lock::{LockError, ProcessLock};
use nertrain_tagger::lock;
use serde::Serialize;

use crate::child::{dies_with_server, kill_group};
use crate::client::Connection;
use crate::error::{LearnError, file_error};
use crate::events::{Events, StudioEvent};
use crate::refresh::{RefreshSettings, Refresher};
use crate::served::{Served, weights_id};
use crate::status::RefreshStatus;
use crate::versions::{
    BASE, Registry, ServeRefusal, VersionRecord, VersionServed, read_registry, write_registry,
};
use version::{load_version, refresh, train_version};

/// The file whose lock keeps a second server out of the versions directory.
const LOCK: &str = ".nertrain-serve.lock";

/// The annotations fetched, in a version's data directory until they are staged.
const EXPORT: &str = "export.json";

/// How a version is trained and judged.
#[derive(Debug, Clone)]
pub struct LearnSettings {
    /// The `nertrain` binary that trains (`fit`).
    pub trainer: PathBuf,
    /// Epochs of continued training at most (the best on the held-out tasks, or the dev file, is
    /// kept).
    pub epochs: usize,
    /// Threads training takes, so that tagging keeps the rest.
    pub threads: usize,
    /// Threads a version tags with once served (by default one per core).
    pub tag_threads: Option<usize>,
    /// The share of annotated tasks held out, in percent, chosen by task id (none with
    /// [`dev`](Self::dev)).
    pub heldout_percent: u64,
    /// A gold file (any that `nertrain eval` scores) that chooses each version's epoch and
    /// judges it against the served model in place of held-out tasks, so that every annotated
    /// task is trained on.
    pub dev: Option<PathBuf>,
    /// Annotation events that start a training (a training asked for outright starts one).
    pub every: usize,
    /// Dictionary files every version is judged and served with, beside the dictionary stored
    /// in it (which continued training keeps), as the model first served reads them.
    pub dictionaries: Vec<PathBuf>,
    /// Whether [`dictionaries`](Self::dictionaries) replace the stored entries of their labels
    /// rather than extend them.
    pub replace_dictionary: bool,
    /// The least time between the starts of two trainings: one asked for sooner waits.
    pub min_interval: Duration,
    /// Versions kept on disk besides the one served and the one served before it; older ones
    /// are removed (their records stay).
    pub keep_versions: usize,
    /// The largest export of Label Studio's read, in bytes.
    pub max_export_bytes: u64,
    /// F1 points a new version may lose on any one label of the held-out tasks and still be
    /// served.
    pub label_margin: f64,
    /// The model the server started from (`--model`): what serving `base` goes back to.
    pub base_model: PathBuf,
    /// How Label Studio's predictions are refreshed once a version is served.
    pub refresh: RefreshSettings,
}

impl Default for LearnSettings {
    fn default() -> Self {
        Self {
            trainer: PathBuf::from("nertrain"),
            epochs: 10,
            threads: 1,
            tag_threads: None,
            heldout_percent: 20,
            dev: None,
            every: 10,
            dictionaries: Vec::new(),
            replace_dictionary: false,
            min_interval: Duration::from_secs(60),
            keep_versions: 3,
            max_export_bytes: 256 << 20,
            label_margin: 5.0,
            base_model: PathBuf::new(),
            refresh: RefreshSettings::default(),
        }
    }
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
    /// The weights' id of the model the server started from (`base`).
    pub base: String,
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
    /// Label Studio's predictions brought in step with the served version: the last refresh,
    /// or the one under way.
    pub refresh: Option<RefreshStatus>,
    /// Whether a refresh is asked for and not yet begun ([`refresh`](Self::refresh) is the last
    /// one until it begins).
    pub refresh_asked: bool,
}

struct State {
    registry: Registry,
    /// The connection the first `/setup` gave, when none came from the environment: a later
    /// `/setup` may renew its key, never move it to another origin.
    set_up: Option<Connection>,
    /// The project whose training is asked for.
    requested: Option<u64>,
    /// The project the last `/setup` named: the one refreshed before a version is learnt.
    setup_project: Option<u64>,
    /// Annotation events since the last training was asked for.
    annotations: usize,
    training: Option<(Progress, Instant)>,
    /// When the last training began.
    last_started: Option<Instant>,
    last_error: Option<String>,
    stopping: bool,
}

impl State {
    /// Nothing asked for yet, with `registry` as read.
    fn new(registry: Registry) -> Self {
        Self {
            registry,
            set_up: None,
            requested: None,
            setup_project: None,
            annotations: 0,
            training: None,
            last_started: None,
            last_error: None,
            stopping: false,
        }
    }
}

struct Shared {
    dir: PathBuf,
    settings: LearnSettings,
    /// From the environment; before any `/setup` connection.
    connection: Option<Connection>,
    served: Arc<Served>,
    events: Events,
    state: Mutex<State>,
    wake: Condvar,
    interrupt: Arc<AtomicBool>,
    /// Brings Label Studio's predictions in step with each version served.
    refresher: Refresher,
    /// Held while the server lives: one server per versions directory.
    _lock: ProcessLock,
}

impl Shared {
    /// The Label Studio learning reads from: the environment's, or the first `/setup`'s.
    fn connection(&self) -> Option<Connection> {
        let set_up = lock(&self.state).set_up.clone();
        self.connection.clone().or(set_up)
    }

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
        dies_with_server(&mut command);
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
                kill_group(&child);
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
        events: Events,
    ) -> std::io::Result<Self> {
        std::fs::create_dir_all(&dir)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        let lock = ProcessLock::take(&dir.join(LOCK)).map_err(|e| {
            let why = match e {
                LockError::Held(_) => format!(
                    "another nertrain serve learns into it ({e}); give each server its own \
                     --train-into"
                ),
                _ => format!("{}: {e}", LOCK),
            };
            std::io::Error::other(format!("{}: {why}", dir.display()))
        })?;
        let registry = read_registry(&dir)
            .map_err(std::io::Error::other)?
            .unwrap_or_else(|| Registry {
                base: served.get().id.clone(),
                project: None,
                served: None,
                history: Vec::new(),
                versions: Vec::new(),
            });
        let refresher = Refresher::start(
            &dir,
            settings.refresh.clone(),
            served.clone(),
            events.clone(),
        )?;
        if let Some(connection) = &connection {
            refresher.resume(connection.clone());
        }
        let shared = Arc::new(Shared {
            dir,
            settings,
            connection,
            served,
            events,
            refresher,
            state: Mutex::new(State::new(registry)),
            wake: Condvar::new(),
            interrupt: Arc::new(AtomicBool::new(false)),
            _lock: lock,
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

    /// Whether Label Studio's address and key came from the environment, so that what setup
    /// names is not used (nor checked: Label Studio may name itself otherwise than the operator).
    pub(crate) fn configured(&self) -> bool {
        self.shared.connection.is_some()
    }

    /// Keeps the Label Studio `/setup` names, when the environment named none and no earlier
    /// `/setup` named another origin; refuses one that would move learning elsewhere.
    pub(crate) fn set_up(&self, connection: Connection) -> Result<(), crate::Error> {
        if self.configured() {
            return Ok(());
        }
        let mut state = lock(&self.shared.state);
        match &state.set_up {
            Some(first) if first.base() != connection.base() => {
                Err(crate::Error::Forbidden(format!(
                    "this server learns from the Label Studio at {}, which the first setup named, not \
                 {}; restart it (or set LABEL_STUDIO_URL) to learn from another",
                    first.base(),
                    connection.base()
                )))
            }
            _ => {
                state.set_up = Some(connection);
                Ok(())
            }
        }
    }

    /// The Label Studio learning reads from: the environment's, or the first `/setup`'s.
    pub(crate) fn connection(&self) -> Option<Connection> {
        self.shared.connection()
    }

    /// Notes the project a `/setup` names: Label Studio's predictions of it are refreshed when
    /// a version is served, before learning has bound the server to a project.
    pub(crate) fn note_project(&self, project: u64) {
        lock(&self.shared.state).setup_project = Some(project);
    }

    /// Asks for a training on `project`'s annotations, outright or as one more annotation
    /// (which starts one every [`LearnSettings::every`]); says what will happen.
    pub(crate) fn request(&self, project: u64, outright: bool) -> Result<String, crate::Error> {
        let mut state = lock(&self.shared.state);
        if let Some(bound) = state.registry.project
            && bound != project
        {
            return Err(crate::Error::Refused(format!(
                "this server learns from project {bound}; serve project {project} with its own \
                 --train-into"
            )));
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
            (None, _) => {
                let wait = until_next(&state, self.shared.settings.min_interval);
                if wait.is_zero() {
                    "training started".to_string()
                } else {
                    format!(
                        "training queued: it starts in {} s (one training at most every {} s)",
                        wait.as_secs().max(1),
                        self.shared.settings.min_interval.as_secs()
                    )
                }
            }
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
            base: state.registry.base.clone(),
            project: state.registry.project,
            served: state.registry.served.clone(),
            versions: state.registry.versions.clone(),
            training: state.training.as_ref().map(|(progress, started)| Progress {
                seconds: started.elapsed().as_secs_f64(),
                ..progress.clone()
            }),
            pending: state.requested.is_some(),
            last_error: state.last_error.clone(),
            refresh: self.shared.refresher.status(),
            refresh_asked: self.shared.refresher.asked(),
        }
    }

    /// Where regions to decide are cut for the served `version`, once its refresh has found it
    /// from the project's tasks.
    pub(crate) fn cut_for(&self, version: &str) -> Option<f64> {
        self.shared.refresher.cut_for(version)
    }

    /// Serves the accepted version `name` (`vN`, or `base`: the model the server started from)
    /// from now on, as a restart would; Label Studio's predictions are refreshed. Says what is
    /// served, or why not (a name that is not one, or a version not accepted or removed).
    pub(crate) fn serve_version(&self, name: &str) -> Result<VersionServed, ServeRefusal> {
        let shared = &self.shared;
        let (dir, project) = {
            let state = lock(&shared.state);
            let project = state.registry.project.or(state.setup_project);
            if name == BASE {
                (shared.settings.base_model.clone(), project)
            } else {
                let record = state.registry.versions.iter().find(|r| r.name == name);
                match record {
                    None => return Err(ServeRefusal::Unknown(name.to_string())),
                    Some(r) if !r.served => {
                        return Err(ServeRefusal::NotAccepted(
                            name.to_string(),
                            r.reason.clone(),
                        ));
                    }
                    Some(r) if r.pruned => return Err(ServeRefusal::Removed(name.to_string())),
                    Some(_) => (shared.dir.join(name), project),
                }
            }
        };
        let current = shared.served.get();
        let version = weights_id(&dir)
            .map_err(|e| LearnError::Load(e.to_string()))
            .and_then(|id| load_version(shared, &dir, &id, &current.tagger))
            .map_err(|e| ServeRefusal::Load(e.to_string()))?;
        let id = version.id.clone();
        {
            let mut state = lock(&shared.state);
            let mut registry = state.registry.clone();
            registry.serve(name);
            write_registry(&shared.dir, &registry)
                .map_err(|e| ServeRefusal::Load(e.to_string()))?;
            shared.served.replace(version);
            state.registry = registry;
        }
        (shared.events)(StudioEvent::Switched {
            name: name.to_string(),
            id: id.clone(),
        });
        if let Some(project) = project {
            refresh(shared, project);
        }
        Ok(VersionServed {
            name: name.to_string(),
            id,
        })
    }

    /// Stops a training under way (its child killed; its version is not served) and waits for
    /// the thread until `deadline`: one still fetching from a Label Studio that does
    /// not answer is left behind (the process is ending), so that a server stops in time
    /// whatever Label Studio does. Says whether the thread ended.
    pub(crate) fn stop(&self, deadline: Instant) -> bool {
        self.shared.refresher.stop();
        lock(&self.shared.state).stopping = true;
        self.shared.interrupt.store(true, Ordering::SeqCst);
        self.shared.wake.notify_all();
        let Some(thread) = lock(&self.thread).take() else {
            return true;
        };
        while !thread.is_finished() {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = thread.join();
        true
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
                let wait = until_next(&state, shared.settings.min_interval);
                if wait.is_zero()
                    && let Some(project) = state.requested.take()
                {
                    state.last_started = Some(Instant::now());
                    break project;
                }
                state = if state.requested.is_some() {
                    shared
                        .wake
                        .wait_timeout(state, wait)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0
                } else {
                    shared
                        .wake
                        .wait(state)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                };
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
                (shared.events)(StudioEvent::Failed { message });
            }
        }
    }
}

/// How long the next training must wait for the last one's start to be `interval` ago.
fn until_next(state: &State, interval: Duration) -> Duration {
    state.last_started.map_or(Duration::ZERO, |started| {
        interval.saturating_sub(started.elapsed())
    })
}

#[cfg(test)]
mod tests {
    use super::stage::held_out;
    use super::*;
    use crate::versions::Registry;

    #[test]
    fn holds_out_about_the_share_asked_and_always_the_same_tasks() {
        let held = (1..=10_000).filter(|&id| held_out(id, 20)).count();
        assert!((1_800..=2_200).contains(&held), "{held}");
        assert_eq!(held_out(17, 20), held_out(17, 20));
        assert!((1..=1000).all(|id| !held_out(id, 0)));
    }

    #[test]
    fn trainings_wait_for_the_least_interval() {
        let mut state = State::new(Registry {
            base: String::new(),
            project: None,
            served: None,
            history: Vec::new(),
            versions: Vec::new(),
        });
        let minute = Duration::from_secs(60);
        assert_eq!(until_next(&state, minute), Duration::ZERO);
        state.last_started = Some(Instant::now());
        assert!(until_next(&state, minute) > Duration::from_secs(59));
        assert_eq!(until_next(&state, Duration::ZERO), Duration::ZERO);
    }
}
