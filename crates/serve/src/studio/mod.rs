//! `nertrain serve` as a Label Studio ML backend, the protocol Label Studio 1.23 speaks
//! (`label_studio/ml/api_connector.py`):
//!
//! - `POST /setup` (the project, its labeling config, Label Studio's address and a token)
//!   checks the config against the model and answers the model version: a short id of the
//!   served weights.
//! - `POST /predict` (tasks and the labeling config) answers one prediction per task, under the
//!   project's own control and object names, with each region's entity confidence and a task
//!   score from a selection strategy: the model's certainty, lowest for the tasks most worth
//!   labelling, as Label Studio's uncertainty sampling takes them.
//! - `POST /webhook` (annotations submitted, training asked for) starts learning from the
//!   project's annotations ([`learn`]) when the server learns, and says so when it does not.
//! - `GET /versions`: the versions trained.
//!
//! Label Studio shows its users an error's status line, not its body, so error answers carry
//! their message as the reason phrase too.

mod client;
mod learn;
mod refresh;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use nertrain_annotate::CharSpan;
use nertrain_annotate::label_studio::backend::{
    PredictAnswer, PredictRequest, SetupAnswer, SetupRequest, TRAINING_ACTIONS, VersionsAnswer,
    WebhookAnswer, WebhookRequest,
};
use nertrain_annotate::label_studio::{
    CHECK, Context, LabelingConfig, Prediction, Target, Task, TextPrediction,
};
use nertrain_tagger::{
    DEFAULT_FLOOR, Regions, Strategy, TagOptions, TagSettings, Tagged, Tagger, Token,
    doubtful_regions, lock,
};
use serde::Serialize;

pub use client::Connection;
pub use learn::{
    LabelF1, LearnSettings, LearningStatus, Progress, StudioEvent, VersionRecord, model_to_serve,
};
pub use refresh::{RefreshPhase, RefreshSettings, RefreshStatus};

use crate::http::{RequestId, ServeError, Tally, json_answer, json_body};
use crate::served::{Served, Version};
use crate::{AppState, Logger, queue};

/// How the server works as Label Studio's ML backend.
#[derive(Debug, Clone)]
pub struct StudioOptions {
    /// The strategy whose worth makes a task's score.
    pub strategy: Strategy,
    /// Where the doubtful regions of a task shown as the [`CHECK`] control's regions are
    /// cut, for a project whose labeling config has one: a task's tokens less sure than
    /// this ([`Regions::threshold`]).
    pub regions: Regions,
    /// Learn from the annotations into this directory's versions (`v1`, `v2`, ...); off
    /// without it.
    pub train_into: Option<PathBuf>,
    /// Label Studio's address and key, when given (`LABEL_STUDIO_URL`,
    /// `LABEL_STUDIO_API_KEY`); otherwise those `/setup` sends are used.
    pub connection: Option<Connection>,
    /// How a version is trained.
    pub learn: LearnSettings,
}

impl Default for StudioOptions {
    fn default() -> Self {
        Self {
            strategy: Strategy::Margin,
            regions: Regions::Budget(DEFAULT_FLOOR),
            train_into: None,
            connection: None,
            learn: LearnSettings::default(),
        }
    }
}

/// A project as `/setup` described it.
struct Project {
    config: Arc<LabelingConfig>,
}

/// The backend's state: the projects set up, and the learner.
pub(crate) struct Studio {
    strategy: Strategy,
    /// Label Studio's address from the environment, when given.
    connection: Option<Connection>,
    regions: Regions,
    projects: Mutex<HashMap<u64, Project>>,
    learner: Option<learn::Learner>,
}

impl Studio {
    /// The backend, learning into `options.train_into` when given.
    pub(crate) fn start(
        options: &StudioOptions,
        served: Arc<Served>,
        log: Logger,
    ) -> std::io::Result<Self> {
        let mut settings = options.learn.clone();
        settings.refresh.strategy = options.strategy;
        settings.refresh.regions = options.regions;
        let learner = match &options.train_into {
            Some(dir) => Some(learn::Learner::start(
                dir.clone(),
                settings,
                options.connection.clone(),
                served,
                log,
            )?),
            None => None,
        };
        Ok(Self {
            strategy: options.strategy,
            connection: options.connection.clone(),
            regions: options.regions,
            projects: Mutex::new(HashMap::new()),
            learner,
        })
    }

    /// Where regions to decide are cut for `version`: as its refresh found it from the
    /// project's tasks, or before that (and without learning), at the threshold or floor.
    fn cut(&self, version: &str) -> f64 {
        let found = self.learner.as_ref().and_then(|l| l.cut_for(version));
        found.unwrap_or_else(|| self.regions.threshold())
    }

    /// The origin of the Label Studio this server works for: from the environment, or the one
    /// learning was set up with.
    pub(crate) fn label_studio_origin(&self) -> Option<String> {
        let set_up = || self.learner.as_ref().and_then(learn::Learner::connection);
        let connection = self.connection.clone().or_else(set_up)?;
        Some(connection.origin().to_string())
    }

    /// What learning did, when the server learns.
    pub(crate) fn status(&self) -> Option<LearningStatus> {
        self.learner.as_ref().map(learn::Learner::status)
    }

    /// Stops a training under way (its version is left unserved) and waits for the learner
    /// until `deadline` at most.
    pub(crate) fn stop(&self, deadline: std::time::Instant) {
        if let Some(learner) = &self.learner {
            learner.stop(deadline);
        }
    }
}

fn bad(message: impl Into<String>) -> ServeError {
    ServeError::new(StatusCode::BAD_REQUEST, message)
}

/// A JSON answer with nothing to hold.
fn small_answer(value: &impl Serialize) -> Response {
    axum::Json(value).into_response()
}

/// `POST /setup`.
pub(crate) async fn setup(
    State(state): State<Arc<AppState>>,
    request: Request,
) -> Result<Response, ServeError> {
    let setup: SetupRequest = json_body(
        request,
        state.options.max_body_bytes,
        state.options.body_timeout,
        "{\"project\": \"1.1700000000\", \"schema\": \"<View>...</View>\"}",
    )
    .await?;
    let project = setup
        .project
        .id()
        .ok_or_else(|| bad("project: expected Label Studio's \"{id}.{created}\""))?;
    let config = LabelingConfig::parse(&setup.schema).map_err(bad)?;
    let version = state.served.get();
    config.check_labels(&version.info.labels).map_err(bad)?;
    if let Some(learner) = &state.studio.learner {
        learner.note_project(project);
    }
    if let Some(learner) = &state.studio.learner
        && !learner.configured()
        && let (Some(url), Some(key)) = (&setup.hostname, &setup.access_token)
        && !url.is_empty()
        && !key.is_empty()
    {
        let connection = Connection::new(url, key).map_err(|e| bad(format!("hostname: {e}")))?;
        learner
            .set_up(connection)
            .map_err(|message| ServeError::new(StatusCode::FORBIDDEN, message))?;
    }
    lock(&state.studio.projects).insert(
        project,
        Project {
            config: Arc::new(config),
        },
    );
    Ok(small_answer(&SetupAnswer {
        model_version: version.id.clone(),
    }))
}

/// Where a text to tag came from: its task and the object (a `<Text>`'s data key) it is read
/// for.
struct Source {
    task: usize,
    object: usize,
}

/// A text a config's entity controls label: its data key, and the controls on it (indices of
/// `config.targets`). Each is tagged once per task, however many controls label it; the
/// [`CHECK`] control marks regions to decide, never entities, so it asks for no text.
struct Object {
    data_key: String,
    targets: Vec<usize>,
    /// The `<Text>` name the [`CHECK`] control marks regions on, where the config has one on
    /// this text.
    check: Option<String>,
}

/// The objects of `config`'s entity controls, in the config's order.
fn objects(config: &LabelingConfig) -> Vec<Object> {
    let mut objects: Vec<Object> = Vec::new();
    for (i, target) in config.targets.iter().enumerate() {
        if target.from_name == CHECK {
            continue;
        }
        match objects.iter_mut().find(|o| o.data_key == target.data_key) {
            Some(object) => object.targets.push(i),
            None => objects.push(Object {
                data_key: target.data_key.clone(),
                targets: vec![i],
                check: None,
            }),
        }
    }
    for object in &mut objects {
        object.check = config
            .targets
            .iter()
            .find(|t| t.from_name == CHECK && t.data_key == object.data_key)
            .map(|t| t.to_name.clone());
    }
    objects
}

/// A bound on the bytes of the predictions of `texts` (each with its tokens), as serialised:
/// each token may start a region (and one of the [`CHECK`] control besides, where the config
/// has one), which names its control, object, label and id and repeats its text (escaped, six
/// bytes a byte at most).
fn prediction_size_bound(
    config: &LabelingConfig,
    texts: &[String],
    tokens: &[Vec<Token>],
    tasks: usize,
    model_version: &str,
) -> usize {
    let longest = |f: fn(&Target) -> usize| config.targets.iter().map(f).max().unwrap_or(0);
    let names = longest(|t| t.from_name.len()) + 2 * longest(|t| t.to_name.len());
    let label = longest(|t| t.labels.iter().map(String::len).max().unwrap_or(0));
    let checks = config.targets.iter().any(|t| t.from_name == CHECK);
    let region = (160 + names + label + 6 * 20) * if checks { 2 } else { 1 };
    let regions: usize = texts
        .iter()
        .zip(tokens)
        .map(|(text, tokens)| 6 * text.len() + tokens.len() * region)
        .sum();
    64 + regions + tasks * (96 + 6 * model_version.len())
}

/// `POST /predict`.
pub(crate) async fn predict(
    State(state): State<Arc<AppState>>,
    axum::Extension(RequestId(id)): axum::Extension<RequestId>,
    request: Request,
) -> Result<Response, ServeError> {
    let state = &*state;
    let options = &state.options;
    let predict: PredictRequest = json_body(
        request,
        options.max_predict_body_bytes,
        options.body_timeout,
        "{\"tasks\": [{\"id\": 1, \"data\": {\"text\": \"...\"}}], \"label_config\": \"<View>...</View>\"}",
    )
    .await?;
    let version = state.served.get();
    let (tagging, template, mut cost) = draw_texts(state, &version, predict).await?;
    cost.answer_bytes = prediction_size_bound(
        &template.config,
        &tagging.texts,
        &tagging.tokens,
        template.task_ids.len(),
        &version.id,
    );
    queue::within_answer_limit(
        state,
        &cost,
        "tasks",
        "send fewer or shorter tasks at a time",
    )?;
    let held = queue::hold(state, &cost)?;
    let count = tagging.texts.len();
    let left_out = template.left_out.clone();
    let results = tag_in_pieces(state, id, &version.tagger, tagging, template).await?;
    let body = queue::serialize(PredictAnswer {
        results,
        model_version: version.id.clone(),
    })
    .await?;
    let left_out = left_out.load(Ordering::Relaxed);
    let tally = Tally {
        texts: count,
        tokens: cost.tokens,
        error: (left_out > 0).then(|| {
            format!("{left_out} entities of labels the labeling config lacks were left out")
        }),
    };
    Ok(json_answer(body, held, tally))
}

/// A `/predict`'s texts to tag, read from its tasks under its labeling config (checked against
/// the model), cut into words and measured, with the annotator's entities to force; what every
/// piece of its answer shares; and what tagging them costs.
async fn draw_texts(
    state: &AppState,
    version: &Version,
    predict: PredictRequest,
) -> Result<(Tagging, Piece, queue::Cost), ServeError> {
    let config = predict_config(state, &predict)?;
    config.check_labels(&version.info.labels).map_err(bad)?;
    let objects = Arc::new(objects(&config));
    within_queue(state, predict.tasks.len(), objects.len())?;
    let (texts, sources) = texts_to_tag(&config, &objects, &predict.tasks)?;
    let name = |i: usize| {
        let source = &sources[i];
        format!(
            "tasks[{}].data.{}",
            source.task, objects[source.object].data_key
        )
    };
    let tag_options = predict_options(&version.tagger, state.studio.strategy, &objects)
        .map_err(|e| ServeError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let (texts, tokens, cost) = queue::measure(&version.tagger, texts, tag_options, &name).await?;
    let drawn = Drawn {
        context: predict.params.and_then(|p| p.context),
        config: config.clone(),
        objects: objects.clone(),
        texts,
        tokens,
        sources,
    };
    let (drawn, forced) =
        queue::on_tagger(&version.tagger, move |tagger| drawn.forced(tagger)).await?;
    let tagging = Tagging {
        texts: drawn.texts,
        tokens: drawn.tokens,
        forced,
        sources: drawn.sources,
        options: tag_options,
    };
    let template = Piece {
        tasks: 0..0,
        task_ids: predict.tasks.iter().map(|t| t.id).collect(),
        sources: Vec::new(),
        config,
        objects,
        strategy: state.studio.strategy,
        cut: state.studio.cut(&version.id),
        model_version: version.id.clone(),
        left_out: Arc::new(AtomicUsize::new(0)),
    };
    Ok((tagging, template, cost))
}

/// Whether `tasks` of `texts` texts each are no more texts than the server ever queues.
fn within_queue(state: &AppState, tasks: usize, texts: usize) -> Result<(), ServeError> {
    let most = tasks.saturating_mul(texts);
    let max = state.options.max_queued_texts;
    if most > max {
        return Err(ServeError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "{tasks} tasks × {texts} texts each: {most} texts to tag, more than this server \
                 ever queues ({max}, --max-queued); send fewer tasks at a time",
            ),
        ));
    }
    Ok(())
}

/// What the texts of `objects` are tagged with for their predictions: entity confidences, what
/// `strategy`'s task score needs, and marginals where a [`CHECK`] control shows regions.
fn predict_options(
    tagger: &Tagger,
    strategy: Strategy,
    objects: &[Object],
) -> nertrain_tagger::Result<TagOptions> {
    tagger.options_with(TagSettings {
        confidence: true,
        marginals: objects.iter().any(|o| o.check.is_some()),
        ..strategy.settings()
    })
}

/// The labeling config a `/predict` names: its own, or its project's as `/setup` gave it.
fn predict_config(
    state: &AppState,
    predict: &PredictRequest,
) -> Result<Arc<LabelingConfig>, ServeError> {
    match (&predict.label_config, &predict.project) {
        (Some(xml), _) => Ok(Arc::new(LabelingConfig::parse(xml).map_err(bad)?)),
        (None, Some(project)) => project
            .id()
            .and_then(|id| {
                lock(&state.studio.projects)
                    .get(&id)
                    .map(|p| p.config.clone())
            })
            .ok_or_else(|| bad("label_config: missing, and the project was not set up")),
        (None, None) => Err(bad("missing field `label_config`")),
    }
}

/// Every object's text of every task, blank ones left out (they have no entities), with where
/// each came from.
fn texts_to_tag(
    config: &LabelingConfig,
    objects: &[Object],
    tasks: &[Task],
) -> Result<(Vec<String>, Vec<Source>), ServeError> {
    let mut texts = Vec::new();
    let mut sources = Vec::new();
    for (t, task) in tasks.iter().enumerate() {
        for (o, object) in objects.iter().enumerate() {
            let target = &config.targets[object.targets[0]];
            let text = task.text_for(target, t).map_err(bad)?;
            if !text.trim().is_empty() {
                texts.push(text.to_string());
                sources.push(Source { task: t, object: o });
            }
        }
    }
    Ok((texts, sources))
}

/// A request's texts cut into words, and the regions an annotator has drawn on them, when any.
struct Drawn {
    context: Option<Context>,
    config: Arc<LabelingConfig>,
    objects: Arc<Vec<Object>>,
    texts: Vec<String>,
    tokens: Vec<Vec<Token>>,
    sources: Vec<Source>,
}

impl Drawn {
    /// The entities the annotator drew, to be forced on each text (none without a context),
    /// checked against the texts and their words; the texts are given back.
    fn forced(self, tagger: &Tagger) -> Result<(Self, Vec<Vec<CharSpan>>), ServeError> {
        let forced = forced_spans(
            self.context.as_ref(),
            &self.config,
            &self.objects,
            &self.texts,
            &self.sources,
        )?;
        if !forced.is_empty() {
            tagger
                .check_forced(&self.texts, &self.tokens, &forced)
                .map_err(|e| {
                    ServeError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        format!("params.context: {e}"),
                    )
                })?;
        }
        Ok((self, forced))
    }
}

/// The entities an annotator has drawn (an interactive pre-annotation's `context`), to be
/// forced on each of `texts` (from `sources`); none without a context.
fn forced_spans(
    context: Option<&Context>,
    config: &LabelingConfig,
    objects: &[Object],
    texts: &[String],
    sources: &[Source],
) -> Result<Vec<Vec<CharSpan>>, ServeError> {
    let Some(context) = context.filter(|c| !c.is_empty()) else {
        return Ok(Vec::new());
    };
    if sources.iter().any(|s| s.task > 0) {
        return Err(bad(
            "params.context: the annotator's regions go with one task, and this request has more",
        ));
    }
    texts
        .iter()
        .zip(sources)
        .map(|(text, source)| {
            let object = &objects[source.object];
            let targets: Vec<&Target> =
                object.targets.iter().map(|&t| &config.targets[t]).collect();
            context.spans_on(&targets, text).map_err(|e| {
                ServeError::new(StatusCode::UNPROCESSABLE_ENTITY, format!("params.{e}"))
            })
        })
        .collect()
}

/// The texts of a request, cut into words, with where each came from and how to tag them.
struct Tagging {
    texts: Vec<String>,
    tokens: Vec<Vec<Token>>,
    /// Entities forced on each text; empty: none.
    forced: Vec<Vec<CharSpan>>,
    sources: Vec<Source>,
    options: TagOptions,
}

/// The predictions of every task, tagged in pieces of whole tasks of at most `max_texts` texts
/// each, so that one request of many tasks takes its turn in the queue like many requests.
/// `template` is what every piece shares.
async fn tag_in_pieces(
    state: &AppState,
    id: u64,
    tagger: &Arc<Tagger>,
    tagging: Tagging,
    template: Piece,
) -> Result<Vec<Prediction>, ServeError> {
    let Tagging {
        mut texts,
        mut tokens,
        mut forced,
        mut sources,
        options,
    } = tagging;
    let tasks = template.task_ids.len();
    let mut results = Vec::with_capacity(tasks);
    let mut first_task = 0;
    while first_task < tasks {
        let mut end_task = first_task;
        let mut taken = 0;
        while end_task < tasks {
            let of_task = sources[taken..]
                .iter()
                .take_while(|s| s.task == end_task)
                .count();
            if taken > 0 && taken + of_task > state.options.max_texts {
                break;
            }
            taken += of_task;
            end_task += 1;
        }
        let rest_texts = texts.split_off(taken);
        let rest_tokens = tokens.split_off(taken);
        let rest_forced = forced.split_off(taken.min(forced.len()));
        let rest_sources = sources.split_off(taken);
        let piece = Piece {
            tasks: first_task..end_task,
            task_ids: template.task_ids[first_task..end_task].to_vec(),
            sources: std::mem::replace(&mut sources, rest_sources),
            config: template.config.clone(),
            objects: template.objects.clone(),
            model_version: template.model_version.clone(),
            left_out: template.left_out.clone(),
            ..template
        };
        let words = tokens.iter().map(Vec::len).sum();
        let request = crate::batch::Request {
            tagger: tagger.clone(),
            texts: std::mem::replace(&mut texts, rest_texts),
            tokens: std::mem::replace(&mut tokens, rest_tokens),
            words,
            options,
            forced: std::mem::replace(&mut forced, rest_forced),
        };
        let answer = move |tagged, tagger: &Tagger| piece.answer(tagged, tagger);
        results.extend(queue::submit(state, id, request, answer).await?);
        first_task = end_task;
    }
    Ok(results)
}

/// A text of a task, its entities kept (each with its target and confidence), and where it has
/// a [`CHECK`] control, the `<Text>` it marks and the regions to decide there (code points).
type TextSpans = (
    String,
    Vec<(usize, CharSpan, f64)>,
    Option<(String, Vec<(usize, usize)>)>,
);

/// Tasks answered together: their predictions from their texts tagged.
struct Piece {
    /// The tasks, by their place in the request.
    tasks: std::ops::Range<usize>,
    task_ids: Vec<Option<i64>>,
    /// Where each text of the piece came from.
    sources: Vec<Source>,
    config: Arc<LabelingConfig>,
    objects: Arc<Vec<Object>>,
    strategy: Strategy,
    /// A token less sure than this is in a region to decide, on a text with a [`CHECK`] control.
    cut: f64,
    model_version: String,
    left_out: Arc<AtomicUsize>,
}

impl Piece {
    /// The tasks' predictions.
    fn answer(self, tagged: Vec<Tagged>, tagger: &Tagger) -> Vec<Prediction> {
        let mut predictions = Vec::with_capacity(self.tasks.len());
        let mut texts = self.sources.iter().zip(tagged).peekable();
        for (n, task) in self.tasks.clone().enumerate() {
            let mut certainty: f64 = 1.0;
            let mut spans: Vec<TextSpans> = Vec::new();
            while let Some((source, tagged)) = texts.next_if(|(s, _)| s.task == task) {
                let object = &self.objects[source.object];
                let on_it = &object.targets;
                let worth = tagger.worth_of(&tagged, self.strategy);
                let checked = object.check.clone().map(|to_name| {
                    let tokens = &tagged.tokens;
                    let regions = doubtful_regions(&tagged, self.cut);
                    let offsets = regions.iter();
                    let offsets = offsets.map(|r| (tokens[r.start].start, tokens[r.end - 1].end));
                    (to_name, offsets.collect())
                });
                if worth.is_finite() {
                    certainty = certainty.min(self.strategy.certainty(worth));
                }
                let mut kept = Vec::new();
                for entity in tagged.entities {
                    // The first control on the text with the entity's label takes it.
                    let taker = on_it
                        .iter()
                        .find(|&&t| self.config.targets[t].labels.contains(&entity.label));
                    if let Some(&target) = taker {
                        kept.push((target, entity.span(), entity.confidence.unwrap_or(1.0)));
                    } else {
                        self.left_out.fetch_add(1, Ordering::Relaxed);
                    }
                }
                spans.push((tagged.text, kept, checked));
            }
            let id = self.task_ids[n].map_or_else(|| format!("t{task}"), |id| id.to_string());
            let texts: Vec<TextPrediction> = spans
                .iter()
                .map(|(text, kept, checked)| TextPrediction {
                    text,
                    entities: kept
                        .iter()
                        .map(|(target, span, p)| (&self.config.targets[*target], span, *p))
                        .collect(),
                    checks: checked
                        .as_ref()
                        .map(|(to_name, regions)| (&to_name[..], &regions[..])),
                })
                .collect();
            predictions.push(Prediction::of_texts(
                &id,
                &self.model_version,
                certainty,
                &texts,
            ));
        }
        predictions
    }
}

/// `POST /webhook`.
pub(crate) async fn webhook(
    State(state): State<Arc<AppState>>,
    request: Request,
) -> Result<Response, ServeError> {
    // Webhooks carry the whole annotation and task: the predict limit, not the tag one.
    let event: WebhookRequest = json_body(
        request,
        state.options.max_predict_body_bytes,
        state.options.body_timeout,
        "{\"action\": \"START_TRAINING\", \"project\": {\"id\": 1}}",
    )
    .await?;
    if !TRAINING_ACTIONS.contains(&event.action.as_str()) {
        return Ok(small_answer(&WebhookAnswer {
            status: format!("{}: nothing to do", event.action),
        }));
    }
    let Some(learner) = &state.studio.learner else {
        let off = "training is off: start nertrain serve with --train-into DIR to learn from \
                   annotations; predictions still work";
        // Asked for from Label Studio's page, the user should see why nothing happens.
        if event.action == "START_TRAINING" {
            return Err(ServeError::new(StatusCode::CONFLICT, off));
        }
        return Ok(small_answer(&WebhookAnswer { status: off.into() }));
    };
    let project = event
        .project
        .ok_or_else(|| bad("project: missing; expected {\"id\": 1}"))?
        .id;
    let status = learner
        .request(project, event.action == "START_TRAINING")
        .map_err(|message| ServeError::new(StatusCode::CONFLICT, message))?;
    Ok(small_answer(&WebhookAnswer { status }))
}

/// `POST /versions/{name}/serve`: serves the accepted version `name` (`vN`, or `base`: the model
/// the server started from) from now on, without a restart; Label Studio's predictions are
/// refreshed with it.
pub(crate) async fn serve_version(
    State(state): State<Arc<AppState>>,
    axum::extract::Path(name): axum::extract::Path<String>,
) -> Result<Response, ServeError> {
    if state.studio.learner.is_none() {
        return Err(ServeError::new(
            StatusCode::CONFLICT,
            "this server has no versions: start nertrain serve with --train-into DIR to learn \
             them",
        ));
    }
    // Loading a model reads its files: not on the async runtime.
    let answer = tokio::task::spawn_blocking(move || {
        let learner = state.studio.learner.as_ref().expect("checked above");
        learner.serve_version(&name)
    })
    .await
    .map_err(|e| ServeError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    match answer {
        Ok(served) => Ok(small_answer(&served)),
        Err(refusal) => {
            let status = match refusal {
                learn::ServeRefusal::Unknown(_) => StatusCode::NOT_FOUND,
                learn::ServeRefusal::NotAccepted(..) | learn::ServeRefusal::Removed(_) => {
                    StatusCode::CONFLICT
                }
                learn::ServeRefusal::Load(_) => StatusCode::INTERNAL_SERVER_ERROR,
            };
            Err(ServeError::new(status, refusal.to_string()))
        }
    }
}

/// `GET /versions`: the served version's id, then those that may be served instead (the accepted
/// versions kept on disk, and the model the server started from): Label Studio's list of model
/// versions.
pub(crate) async fn versions(State(state): State<Arc<AppState>>) -> Response {
    let mut versions = vec![state.served.get().id.clone()];
    if let Some(status) = state.studio.status() {
        let servable = status
            .versions
            .into_iter()
            .filter(|r| r.served && !r.pruned);
        for id in servable.filter_map(|r| r.id).chain([status.base]) {
            if !versions.contains(&id) {
                versions.push(id);
            }
        }
    }
    small_answer(&VersionsAnswer { versions })
}
