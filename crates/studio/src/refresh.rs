//! Keeping Label Studio in step with the served version. Once a version is served (learnt, or
//! chosen by hand), every task of the project without an annotation is given the new version's
//! prediction (its entities, its regions to decide and its score, as `/predict` answers) and
//! the project's model version is switched to it, so that the Data Manager's order by
//! prediction score is the new model's doubt.
//!
//! The tasks are read a page at a time, at a bounded pace of requests, in two passes where the
//! regions are cut by a budget: the first measures the pool's doubt to find the cut
//! ([`PoolDoubt`]), the second posts the predictions. Progress is saved after every page
//! (`DIR/refresh.json`), so a refresh cut short resumes where it stopped; a newer version served
//! meanwhile ends it, and its own refresh begins.
//!
//! The served version is refreshed again after a version is trained and not served: the tasks
//! annotated since leave the pool, so the cut a region budget needs may have moved. The
//! predictions posted before stand where nothing has changed: the same version, the same cut,
//! a task Label Studio had then.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nertrain_annotate::label_studio::LabelingConfig;
use nertrain_annotate::label_studio::rest::{ListedTask, TaskPrediction};
use nertrain_select::{DEFAULT_FLOOR, PoolDoubt, Regions, Strategy};
use nertrain_tagger::{TagOptions, Tagged, Tagger, Token, lock};

use crate::client::{ClientError, Connection};
use crate::events::{Events, StudioEvent};
use crate::predict::{Answering, Source};
use crate::served::{Served, Version};
use crate::status::{Posted, RefreshPhase, RefreshStatus};

/// The file that says how far the last refresh went.
const PROGRESS: &str = "refresh.json";

/// Why a refresh stopped short of done: it resumes where it last saved.
#[derive(Debug)]
pub(crate) enum RefreshError {
    /// Label Studio could not be asked, or answered with an error.
    LabelStudio(ClientError),
    /// The project's labeling config cannot be read.
    Config {
        /// The project.
        project: u64,
        /// Why.
        message: String,
    },
    /// The project cannot be refreshed as it is: its config labels nothing the model finds, or
    /// its tasks are listed out of order.
    Project {
        /// The project.
        project: u64,
        /// What is wrong with it.
        message: String,
    },
    /// The served model could not tag a page's texts.
    Tagging(nertrain_tagger::Error),
    /// How far the refresh went could not be saved.
    Progress {
        /// The progress file.
        file: PathBuf,
        /// Why.
        message: String,
    },
}

impl std::fmt::Display for RefreshError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RefreshError::LabelStudio(error) => error.fmt(f),
            RefreshError::Config { project, message } => {
                write!(f, "project {project}'s labeling config: {message}")
            }
            RefreshError::Project { project, message } => write!(f, "project {project}: {message}"),
            RefreshError::Tagging(error) => error.fmt(f),
            RefreshError::Progress { file, message } => write!(f, "{}: {message}", file.display()),
        }
    }
}

impl From<ClientError> for RefreshError {
    fn from(error: ClientError) -> Self {
        RefreshError::LabelStudio(error)
    }
}

impl From<nertrain_tagger::Error> for RefreshError {
    fn from(error: nertrain_tagger::Error) -> Self {
        RefreshError::Tagging(error)
    }
}

/// How a refresh reads Label Studio, and what it posts.
#[derive(Debug, Clone)]
pub struct RefreshSettings {
    /// Tasks a page.
    pub page_size: usize,
    /// Requests to Label Studio a second at most.
    pub per_second: f64,
    /// The strategy whose worth makes a task's score.
    pub strategy: Strategy,
    /// Where regions to decide are cut.
    pub regions: Regions,
    /// With [`Regions::Budget`], the tokens the pool's regions should hold.
    pub budget: usize,
}

impl Default for RefreshSettings {
    fn default() -> Self {
        Self {
            page_size: 500,
            per_second: 5.0,
            strategy: Strategy::Margin,
            regions: Regions::Below(DEFAULT_FLOOR),
            budget: 2000,
        }
    }
}

/// The refreshing thread, and what it shares.
pub(crate) struct Refresher {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    settings: RefreshSettings,
    served: Arc<Served>,
    file: PathBuf,
    events: Events,
    state: Mutex<State>,
    wake: Condvar,
    stopping: AtomicBool,
}

struct State {
    /// The project whose refresh is asked for, with the connection to reach it.
    wanted: Option<(u64, Connection)>,
    status: Option<RefreshStatus>,
}

impl Refresher {
    /// The refresher of versions in `dir`, with the progress a refresh left there.
    pub(crate) fn start(
        dir: &Path,
        settings: RefreshSettings,
        served: Arc<Served>,
        events: Events,
    ) -> std::io::Result<Self> {
        let file = dir.join(PROGRESS);
        let status = match std::fs::read(&file) {
            Ok(bytes) => Some(
                serde_json::from_slice(&bytes)
                    .map_err(|e| std::io::Error::other(format!("{}: {e}", file.display())))?,
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("{}: {e}", file.display()),
                ));
            }
        };
        let shared = Arc::new(Shared {
            settings,
            served,
            file,
            events,
            state: Mutex::new(State {
                wanted: None,
                status,
            }),
            wake: Condvar::new(),
            stopping: AtomicBool::new(false),
        });
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("nertrain-refresh".into())
                .spawn(move || run(&shared))?
        };
        Ok(Self {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Asks for `project`'s tasks to be given the served version's predictions (a refresh of
    /// another version under way ends at its next page).
    pub(crate) fn want(&self, project: u64, connection: Connection) {
        lock(&self.shared.state).wanted = Some((project, connection));
        self.shared.wake.notify_all();
    }

    /// Asks for the refresh of the served version to go on, if one was cut short.
    pub(crate) fn resume(&self, connection: Connection) {
        let served = self.shared.served.get().id.clone();
        let unfinished = lock(&self.shared.state)
            .status
            .as_ref()
            .filter(|s| s.version == served && s.phase != RefreshPhase::Done)
            .map(|s| s.project);
        if let Some(project) = unfinished {
            self.want(project, connection);
        }
    }

    /// What the last refresh did, or the one under way is doing.
    pub(crate) fn status(&self) -> Option<RefreshStatus> {
        lock(&self.shared.state).status.clone()
    }

    /// Whether a refresh is asked for and not yet begun.
    pub(crate) fn asked(&self) -> bool {
        lock(&self.shared.state).wanted.is_some()
    }

    /// Where regions are cut for `version`, once its refresh has found it.
    pub(crate) fn cut_for(&self, version: &str) -> Option<f64> {
        let state = lock(&self.shared.state);
        let status = state.status.as_ref()?;
        (status.version == version).then_some(status.cut).flatten()
    }

    /// Ends the refresh at its next step, and the thread with it.
    pub(crate) fn stop(&self) {
        self.shared
            .stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.shared.wake.notify_all();
        if let Some(thread) = lock(&self.thread).take()
            && thread.is_finished()
        {
            let _ = thread.join();
        }
    }
}

impl Shared {
    fn stopping(&self) -> bool {
        self.stopping.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether the refresh of `version` should end: the server stops, another refresh is
    /// asked for, or another version is served.
    fn superseded(&self, version: &str) -> bool {
        self.stopping() || lock(&self.state).wanted.is_some() || self.served.get().id != version
    }

    /// Keeps `status` as the one shown and in `DIR/refresh.json`.
    fn save(&self, status: &RefreshStatus) -> Result<(), RefreshError> {
        lock(&self.state).status = Some(status.clone());
        let bytes = serde_json::to_vec_pretty(status).expect("a status serialises");
        nertrain_data::io::write_atomic(&self.file, &bytes).map_err(|e| RefreshError::Progress {
            file: self.file.clone(),
            message: e.to_string(),
        })
    }
}

/// Refreshes each project asked for, until stopped.
fn run(shared: &Shared) {
    loop {
        // The refresh taken up is shown at once, so that no one reads the last one's as its.
        let (connection, version, mut status) = {
            let mut state = lock(&shared.state);
            loop {
                if shared.stopping() {
                    return;
                }
                if let Some((project, connection)) = state.wanted.take() {
                    let version = shared.served.get();
                    let saved = state.status.clone();
                    let status = resumed(saved, &version.id, project, shared.settings.page_size);
                    state.status = Some(status.clone());
                    break (connection, version, status);
                }
                state = shared
                    .wake
                    .wait(state)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        };
        let started = Instant::now();
        let seconds = status.seconds;
        let outcome = refresh(shared, &version, &connection, &mut status, started);
        status.seconds = seconds + started.elapsed().as_secs_f64();
        match outcome {
            Ok(()) if status.phase == RefreshPhase::Done => {
                (shared.events)(StudioEvent::Refreshed(status.clone()));
            }
            Ok(()) => {}
            Err(error) => {
                let message = error.to_string();
                status.phase = RefreshPhase::Failed;
                status.error = Some(message.clone());
                (shared.events)(StudioEvent::Failed {
                    message: format!("refreshing Label Studio's predictions: {message}"),
                });
            }
        }
        // A status that cannot be saved is still shown; the next refresh starts afresh.
        let _ = shared.save(&status);
    }
}

/// The refresh of `version` on `project` in pages of `page_size` tasks: where `saved` (the last
/// one) stopped, when it is of them and not done; otherwise a new one, which knows what `saved`
/// posted when it was of them and done.
fn resumed(
    saved: Option<RefreshStatus>,
    version: &str,
    project: u64,
    page_size: usize,
) -> RefreshStatus {
    match saved {
        Some(s)
            if s.version == version
                && s.project == project
                && s.page_size == page_size
                && s.phase != RefreshPhase::Done =>
        {
            RefreshStatus {
                // A failed refresh goes on from its last page, in the phase it failed in (the
                // pool's doubt is not saved: measuring starts again).
                phase: if s.cut.is_some() {
                    RefreshPhase::Posting
                } else {
                    RefreshPhase::Measuring
                },
                page: if s.cut.is_some() { s.page } else { 0 },
                after_task: if s.cut.is_some() { s.after_task } else { None },
                error: None,
                ..s
            }
        }
        saved => RefreshStatus {
            before: saved
                .filter(|s| {
                    s.version == version && s.project == project && s.phase == RefreshPhase::Done
                })
                .and_then(|s| {
                    Some(Posted {
                        cut: s.cut?,
                        newest_task: s.newest_task?,
                    })
                }),
            version: version.to_string(),
            project,
            phase: RefreshPhase::Measuring,
            page_size,
            pages: 0,
            page: 0,
            after_task: None,
            predicted: 0,
            annotated: 0,
            unreadable: 0,
            cut: None,
            stood: 0,
            newest_task: None,
            seconds: 0.0,
            error: None,
        },
    }
}

/// What a refresh reads and tags with.
struct ProjectReader<'a> {
    connection: &'a Connection,
    answering: Arc<Answering>,
    options: TagOptions,
    pace: Pace,
}

/// Gives `project`'s tasks without an annotation `version`'s predictions, from where `status`
/// says, saving it after every page; ends early (not done) when superseded.
fn refresh(
    shared: &Shared,
    version: &Version,
    connection: &Connection,
    status: &mut RefreshStatus,
    started: Instant,
) -> Result<(), RefreshError> {
    let (mut reading, checks) = read_project(shared, version, connection, status.project)?;
    let save = |status: &RefreshStatus| {
        let mut shown = status.clone();
        shown.seconds += started.elapsed().as_secs_f64();
        shared.save(&shown)
    };
    if status.phase == RefreshPhase::Measuring {
        status.cut = Some(if checks {
            match measure(shared, version, &mut reading, status)? {
                Some(cut) => cut,
                None => return Ok(()),
            }
        } else {
            shared.settings.regions.threshold()
        });
        status.phase = RefreshPhase::Posting;
        status.page = 0;
        status.after_task = None;
        save(status)?;
    }
    let cut = status.cut.unwrap_or(shared.settings.regions.threshold());
    loop {
        if shared.superseded(&version.id) {
            return Ok(());
        }
        let Some(last) = post_page(shared, version, &mut reading, status, cut)? else {
            break;
        };
        save(status)?;
        if last {
            break;
        }
    }
    // Label Studio refuses a model version it has no prediction of: with every task annotated
    // there is nothing to sort.
    if status.predicted + status.stood > 0 {
        reading.pace.wait(shared);
        connection.set_model_version(status.project, &version.id)?;
    }
    status.phase = RefreshPhase::Done;
    Ok(())
}

/// What a refresh of `project` reads its tasks with: its labeling config (checked against the
/// version's labels), its objects and the options they tag with; and whether the config has a
/// control for regions to decide.
fn read_project<'a>(
    shared: &Shared,
    version: &Version,
    connection: &'a Connection,
    project: u64,
) -> Result<(ProjectReader<'a>, bool), RefreshError> {
    let mut pace = Pace::new(shared.settings.per_second);
    pace.wait(shared);
    let xml = connection.label_config(project)?;
    let config =
        LabelingConfig::parse(&xml).map_err(|message| RefreshError::Config { project, message })?;
    let answering = Answering::new(Arc::new(config), shared.settings.strategy, version)
        .map_err(|message| RefreshError::Project { project, message })?;
    let checks = answering.checks();
    let options = answering.tag_options(&version.tagger);
    let reading = ProjectReader {
        connection,
        answering: Arc::new(answering),
        options,
        pace,
    };
    Ok((reading, checks))
}

/// Posts the predictions of the page after those `status` has done, with regions cut at
/// `cut`: whether it was the last, or `None` when no page is left. The page counts in `status`,
/// and the next one is read after it, only once Label Studio has taken its predictions: a page
/// whose import failed is posted again when resumed.
fn post_page(
    shared: &Shared,
    version: &Version,
    reading: &mut ProjectReader,
    status: &mut RefreshStatus,
    cut: f64,
) -> Result<Option<bool>, RefreshError> {
    reading.pace.wait(shared);
    let mut posted = status.clone();
    let Some(page) = next_page(reading.connection, &mut posted)? else {
        return Ok(None);
    };
    let mut tasks = page.tasks;
    if let Some(before) = posted.before {
        let read = tasks.len();
        tasks.retain(|t| t.total_annotations > 0 || !before.stands(t.task.id, cut));
        posted.stood += read - tasks.len();
    }
    let tagged = tag_page(version, reading, tasks, &mut posted)?;
    let predictions = predict(version, reading, tagged, cut);
    if !predictions.is_empty() {
        reading.pace.wait(shared);
        posted.predicted +=
            (reading.connection).import_predictions(posted.project, &predictions)?;
    }
    posted.page += 1;
    *status = posted;
    Ok(Some(page.last))
}

/// The first pass with regions by budget: every task without an annotation tagged for its
/// doubt, and the cut that doubt gives; `None` when superseded.
fn measure(
    shared: &Shared,
    version: &Version,
    reading: &mut ProjectReader,
    status: &mut RefreshStatus,
) -> Result<Option<f64>, RefreshError> {
    // The pool's doubt is not saved: measuring resumes from the first page.
    let mut doubt = PoolDoubt::default();
    let mut counted = status.clone();
    counted.page = 0;
    counted.after_task = None;
    loop {
        if shared.superseded(&version.id) {
            return Ok(None);
        }
        reading.pace.wait(shared);
        let Some(page) = next_page(reading.connection, &mut counted)? else {
            break;
        };
        let tagged = tag_page(version, reading, page.tasks, &mut counted)?;
        for tagged in &tagged.tagged {
            doubt.add(tagged);
        }
        counted.page += 1;
        status.page = counted.page;
        status.pages = counted.pages;
        lock(&shared.state).status = Some(status.clone());
        if page.last {
            break;
        }
    }
    Ok(Some(
        doubt.cut(shared.settings.regions, shared.settings.budget),
    ))
}

/// A page of the project's tasks, read after the last one.
struct Page {
    tasks: Vec<ListedTask>,
    /// Whether no task is after it.
    last: bool,
}

/// The tasks after those `status` has read (by id), a page of them, noted in `status`; `None`
/// when none is left.
fn next_page(
    connection: &Connection,
    status: &mut RefreshStatus,
) -> Result<Option<Page>, RefreshError> {
    let size = status.page_size;
    let page = connection.tasks_after(status.project, status.after_task, size)?;
    status.pages = status.page + page.total.div_ceil(size);
    if page.tasks.is_empty() {
        return Ok(None);
    }
    let newest = page.tasks.iter().filter_map(|t| t.task.id).max();
    if newest <= status.after_task {
        return Err(RefreshError::Project {
            project: status.project,
            message: format!(
                "Label Studio listed tasks without ids above {:?}; expected tasks by id",
                status.after_task
            ),
        });
    }
    status.after_task = newest;
    status.newest_task = status.newest_task.max(newest);
    Ok(Some(Page {
        last: page.total <= page.tasks.len(),
        tasks: page.tasks,
    }))
}

/// A page's tasks without an annotation, their texts tagged.
struct PageTagged {
    tagged: Vec<Tagged>,
    /// Where each text came from (its task by its place in `ids`).
    sources: Vec<Source>,
    ids: Vec<Option<i64>>,
}

/// A page's tasks without an annotation, their texts tagged. Tasks annotated, or whose text
/// cannot be read, are counted in `status` and passed over.
fn tag_page(
    version: &Version,
    reading: &ProjectReader,
    tasks: Vec<ListedTask>,
    status: &mut RefreshStatus,
) -> Result<PageTagged, RefreshError> {
    let tagger: &Tagger = &version.tagger;
    let mut texts: Vec<String> = Vec::new();
    let mut tokens: Vec<Vec<Token>> = Vec::new();
    let mut sources: Vec<Source> = Vec::new();
    let mut ids: Vec<Option<i64>> = Vec::new();
    for listed in tasks {
        if listed.total_annotations > 0 {
            status.annotated += 1;
            continue;
        }
        let task = std::slice::from_ref(&listed.task);
        let Ok((task_texts, task_sources)) = reading.answering.texts_to_tag(task) else {
            status.unreadable += 1;
            continue;
        };
        let cut: Option<Vec<Vec<Token>>> = task_texts.iter().map(|t| tagger.tokenize(t)).collect();
        let Some(cut) = cut else {
            status.unreadable += 1;
            continue;
        };
        let n = ids.len();
        sources.extend(task_sources.into_iter().map(|s| Source {
            task: n,
            object: s.object,
        }));
        texts.extend(task_texts);
        tokens.extend(cut);
        ids.push(listed.task.id);
    }
    let tagged = if texts.is_empty() {
        Vec::new()
    } else {
        tagger.tag_tokens(&texts, tokens, reading.options)?
    };
    Ok(PageTagged {
        tagged,
        sources,
        ids,
    })
}

/// The predictions of a page's tasks, from their texts tagged, with regions cut at `cut`.
fn predict(
    version: &Version,
    reading: &ProjectReader,
    page: PageTagged,
    cut: f64,
) -> Vec<TaskPrediction> {
    let PageTagged {
        tagged,
        sources,
        ids,
    } = page;
    let group = reading
        .answering
        .group(0..ids.len(), ids.clone(), sources, cut);
    let predictions = group.answer(tagged, &version.tagger);
    ids.into_iter()
        .zip(predictions)
        .filter_map(|(id, prediction)| {
            Some(TaskPrediction {
                task: id?,
                prediction,
            })
        })
        .collect()
}

/// Requests at most so many a second: each waits for its turn.
struct Pace {
    every: Duration,
    next: Instant,
}

impl Pace {
    fn new(per_second: f64) -> Self {
        Self {
            every: Duration::from_secs_f64(1.0 / per_second.max(0.01)),
            next: Instant::now(),
        }
    }

    /// Waits for the next request's turn (or for the server to stop).
    fn wait(&mut self, shared: &Shared) {
        self.wait_unless(&shared.stopping);
    }

    /// Waits for the next request's turn, or until `stop` is set.
    fn wait_unless(&mut self, stop: &AtomicBool) {
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let now = Instant::now();
            if now >= self.next {
                break;
            }
            std::thread::sleep((self.next - now).min(Duration::from_millis(100)));
        }
        self.next = Instant::now() + self.every;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    fn status(phase: RefreshPhase, page: usize, cut: Option<f64>) -> RefreshStatus {
        RefreshStatus {
            phase,
            page,
            pages: 10,
            predicted: 100 * page,
            cut,
            error: Some("Label Studio went away".into()),
            ..resumed(None, "v-a", 7, 100)
        }
    }

    #[test]
    fn a_refresh_cut_short_goes_on_from_its_last_page() {
        let posting = status(RefreshPhase::Failed, 4, Some(0.99));
        let again = resumed(Some(posting.clone()), "v-a", 7, 100);
        assert_eq!(
            (again.phase, again.page, again.predicted, again.error),
            (RefreshPhase::Posting, 4, 400, None)
        );
        // Measuring is not saved page by page: it starts again.
        let measuring = status(RefreshPhase::Measuring, 4, None);
        let again = resumed(Some(measuring), "v-a", 7, 100);
        assert_eq!((again.phase, again.page), (RefreshPhase::Measuring, 0));
        // Another version, project or page size, or one done: a new refresh.
        let done = status(RefreshPhase::Done, 10, Some(0.99));
        for (saved, version, project, size) in [
            (posting.clone(), "v-b", 7, 100),
            (posting.clone(), "v-a", 8, 100),
            (posting, "v-a", 7, 25),
            (done, "v-a", 7, 100),
        ] {
            let fresh = resumed(Some(saved), version, project, size);
            assert_eq!(
                (
                    fresh.phase,
                    fresh.page,
                    fresh.predicted,
                    fresh.version.as_str()
                ),
                (RefreshPhase::Measuring, 0, 0, version)
            );
        }
    }

    #[test]
    fn a_refresh_of_the_version_done_before_keeps_what_it_posted() {
        let done = RefreshStatus {
            newest_task: Some(90),
            ..status(RefreshPhase::Done, 10, Some(0.97))
        };
        let again = resumed(Some(done.clone()), "v-a", 7, 100);
        let before = again.before.expect("the done refresh is known");
        assert_eq!(
            (again.phase, again.page, again.stood),
            (RefreshPhase::Measuring, 0, 0)
        );
        // Its predictions stand on the tasks it read, where the cut has not moved.
        assert!(before.stands(Some(90), 0.97) && before.stands(Some(3), 0.97));
        assert!(!before.stands(Some(91), 0.97), "a task imported since");
        assert!(!before.stands(Some(3), 0.96) && !before.stands(None, 0.97));
        // Another version or project, or a refresh not done, posted nothing that stands.
        for (saved, version, project) in [
            (done.clone(), "v-b", 7),
            (done.clone(), "v-a", 8),
            (RefreshStatus { cut: None, ..done }, "v-a", 7),
        ] {
            assert_eq!(resumed(Some(saved), version, project, 100).before, None);
        }
    }

    /// A Label Studio with one project of `TASKS` tasks, on loopback, that refuses the one
    /// import of predictions it is told to: as much of the REST API as a refresh uses.
    struct FakeStudio {
        url: String,
        /// Which import (counted from 1) answers 500.
        failing: Mutex<Option<usize>>,
        imports: AtomicUsize,
        /// The task ids given a prediction, in the order imported.
        predicted: Mutex<Vec<i64>>,
        model_version: Mutex<Option<String>>,
    }

    const TASKS: i64 = 40;

    #[derive(serde::Deserialize)]
    struct Query {
        filters: QueryFilters,
    }

    #[derive(serde::Deserialize)]
    struct QueryFilters {
        items: Vec<QueryFilter>,
    }

    #[derive(serde::Deserialize)]
    struct QueryFilter {
        value: i64,
    }

    #[derive(serde::Deserialize)]
    struct Imported {
        task: i64,
    }

    #[derive(serde::Deserialize)]
    struct Patched {
        model_version: String,
    }

    impl FakeStudio {
        fn start(failing: usize) -> Arc<Self> {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let studio = Arc::new(Self {
                url: format!("http://{}", listener.local_addr().unwrap()),
                failing: Mutex::new(Some(failing)),
                imports: AtomicUsize::new(0),
                predicted: Mutex::new(Vec::new()),
                model_version: Mutex::new(None),
            });
            let serving = studio.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    serving.answer(stream.unwrap());
                }
            });
            studio
        }

        /// Reads one request from `stream` and answers it, closing the connection.
        fn answer(&self, mut stream: std::net::TcpStream) {
            use std::io::{BufRead, BufReader, Read, Write};
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let mut target = line.split(' ');
            let (method, target) = (target.next().unwrap(), target.next().unwrap().to_string());
            let mut length = 0;
            loop {
                let mut header = String::new();
                reader.read_line(&mut header).unwrap();
                if header.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = header.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let (status, answer) = self.route(method, &target, &body);
            let reply = format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{answer}",
                answer.len()
            );
            stream.write_all(reply.as_bytes()).unwrap();
        }

        fn route(&self, method: &str, target: &str, body: &[u8]) -> (&'static str, String) {
            let (path, query) = target.split_once('?').unwrap_or((target, ""));
            match (method, path) {
                ("GET", "/api/projects/3") => {
                    let config = r#"<View><Labels name="label" toName="text"><Label value="PER"/><Label value="LOC"/><Label value="ORG"/><Label value="MISC"/></Labels><Text name="text" value="$text"/></View>"#;
                    (
                        "200 OK",
                        serde_json::json!({ "label_config": config }).to_string(),
                    )
                }
                ("GET", "/api/tasks") => ("200 OK", self.page(query)),
                ("POST", "/api/projects/3/import/predictions") => {
                    let n = self
                        .imports
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
                        + 1;
                    if *lock(&self.failing) == Some(n) {
                        return ("500 Internal Server Error", "{\"detail\": \"busy\"}".into());
                    }
                    let imported: Vec<Imported> = serde_json::from_slice(body).unwrap();
                    let created = imported.len();
                    lock(&self.predicted).extend(imported.into_iter().map(|p| p.task));
                    ("201 Created", format!("{{\"created\": {created}}}"))
                }
                ("PATCH", "/api/projects/3") => {
                    let patched: Patched = serde_json::from_slice(body).unwrap();
                    *lock(&self.model_version) = Some(patched.model_version);
                    ("200 OK", "{}".into())
                }
                _ => ("404 Not Found", "{}".into()),
            }
        }

        /// The tasks above the query's id, by id, a page of `page_size`.
        fn page(&self, query: &str) -> String {
            let mut size = 0;
            let mut after = 0;
            for (key, value) in query.split('&').filter_map(|pair| pair.split_once('=')) {
                match key {
                    "page_size" => size = value.parse().unwrap(),
                    "query" => {
                        let query: Query = serde_json::from_str(&percent_decoded(value)).unwrap();
                        after = query.filters.items.first().map_or(0, |f| f.value);
                    }
                    _ => {}
                }
            }
            let above: Vec<i64> = (after + 1..=TASKS).collect();
            let tasks: Vec<serde_json::Value> = above
                .iter()
                .take(size)
                .map(|id| {
                    let text = format!("Peter Weber lives in Berlin, task {id}.");
                    serde_json::json!({ "id": id, "data": { "text": text }, "total_annotations": 0 })
                })
                .collect();
            serde_json::json!({ "total": above.len(), "tasks": tasks }).to_string()
        }
    }

    fn percent_decoded(value: &str) -> String {
        let bytes = value.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'%' => {
                    out.push(u8::from_str_radix(&value[i + 1..i + 3], 16).unwrap());
                    i += 3;
                }
                b'+' => {
                    out.push(b' ');
                    i += 1;
                }
                b => {
                    out.push(b);
                    i += 1;
                }
            }
        }
        String::from_utf8(out).unwrap()
    }

    /// The refresher's status once it has ended what it was asked.
    fn ended(refresher: &Refresher) -> RefreshStatus {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(status) = refresher.status()
                && !refresher.asked()
                && matches!(status.phase, RefreshPhase::Done | RefreshPhase::Failed)
            {
                return status;
            }
            assert!(Instant::now() < deadline, "{:?}", refresher.status());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn a_page_whose_import_failed_is_posted_again_when_the_refresh_resumes() {
        let run = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../cli/tests/fixtures/before-tokenizers/sentence");
        let device = nertrain_model::Backend::Flex.device().unwrap();
        let version = Version::new(Tagger::load(&run, &device).unwrap()).unwrap();
        let id = version.id.clone();
        let dir = tempfile::tempdir().unwrap();
        let settings = RefreshSettings {
            page_size: 10,
            per_second: 1000.0,
            ..RefreshSettings::default()
        };
        let served = Arc::new(Served::new(version));
        let refresher = Refresher::start(dir.path(), settings, served, Arc::new(|_| {})).unwrap();
        let studio = FakeStudio::start(2);
        let connection = Connection::new(&studio.url, "token").unwrap();

        refresher.want(3, connection.clone());
        let failed = ended(&refresher);
        assert_eq!(failed.phase, RefreshPhase::Failed);
        assert!(
            failed.error.as_deref().unwrap().contains("500"),
            "{failed:?}"
        );
        // Only the page Label Studio took counts.
        assert_eq!((failed.page, failed.predicted), (1, 10), "{failed:?}");
        assert_eq!(*lock(&studio.model_version), None);

        refresher.want(3, connection);
        let done = ended(&refresher);
        assert_eq!(done.phase, RefreshPhase::Done, "{done:?}");
        let mut predicted = lock(&studio.predicted).clone();
        predicted.sort_unstable();
        assert_eq!(predicted, (1..=TASKS).collect::<Vec<_>>());
        assert_eq!(done.predicted + done.stood, TASKS as usize, "{done:?}");
        assert_eq!(done.pages, 4);
        assert_eq!(lock(&studio.model_version).as_deref(), Some(id.as_str()));
        refresher.stop();
    }

    #[test]
    fn requests_keep_their_pace_until_told_to_stop() {
        let stop = AtomicBool::new(false);
        let mut pace = Pace::new(50.0);
        let started = Instant::now();
        for _ in 0..6 {
            pace.wait_unless(&stop);
        }
        // Five intervals of 20 ms after the first request, which goes at once.
        assert!(
            started.elapsed() >= Duration::from_millis(100),
            "{:?}",
            started.elapsed()
        );
        let mut slow = Pace::new(0.01);
        slow.wait_unless(&stop);
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let stopped = Instant::now();
        slow.wait_unless(&stop);
        assert!(stopped.elapsed() < Duration::from_secs(1));
    }
}
