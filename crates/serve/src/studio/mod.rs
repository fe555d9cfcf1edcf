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

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use nertrain_annotate::CharSpan;
use nertrain_annotate::label_studio::{CHECK, LabelingConfig, Prediction, Region, Target, Task};
use nertrain_tagger::{Strategy, TagOptions, TagSettings, Tagged, Tagger, Token, lock};
use serde::{Deserialize, Serialize};

pub use client::Connection;
pub use learn::{
    LabelF1, LearnSettings, LearningStatus, Progress, StudioEvent, VersionRecord, model_to_serve,
};

use crate::http::{RequestId, ServeError, Tally, json_answer, json_body};
use crate::served::Served;
use crate::{AppState, Logger, queue};

/// How the server works as Label Studio's ML backend.
#[derive(Debug, Clone)]
pub struct StudioOptions {
    /// The strategy whose worth makes a task's score.
    pub strategy: Strategy,
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
        let learner = match &options.train_into {
            Some(dir) => Some(learn::Learner::start(
                dir.clone(),
                options.learn.clone(),
                options.connection.clone(),
                served,
                log,
            )?),
            None => None,
        };
        Ok(Self {
            strategy: options.strategy,
            projects: Mutex::new(HashMap::new()),
            learner,
        })
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

/// Label Studio's project id, from its `"{id}.{created}"` form or a number.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ProjectUid {
    Number(u64),
    Text(String),
}

impl ProjectUid {
    fn id(&self) -> Option<u64> {
        match self {
            ProjectUid::Number(id) => Some(*id),
            ProjectUid::Text(text) => text.split('.').next()?.parse().ok(),
        }
    }
}

/// A `POST /setup` body.
#[derive(Debug, Deserialize)]
struct SetupRequest {
    project: ProjectUid,
    schema: String,
    #[serde(default)]
    hostname: Option<String>,
    #[serde(default)]
    access_token: Option<String>,
}

/// `/setup`'s answer.
#[derive(Serialize)]
struct SetupAnswer {
    model_version: String,
}

/// A `POST /predict` body.
#[derive(Debug, Deserialize)]
struct PredictRequest {
    tasks: Vec<Task>,
    #[serde(default)]
    label_config: Option<String>,
    #[serde(default)]
    project: Option<ProjectUid>,
}

/// A `POST /webhook` body.
#[derive(Debug, Deserialize)]
struct WebhookRequest {
    action: String,
    #[serde(default)]
    project: Option<WebhookProject>,
}

#[derive(Debug, Deserialize)]
struct WebhookProject {
    id: u64,
}

/// `/webhook`'s answer.
#[derive(Serialize)]
struct WebhookAnswer {
    status: String,
}

/// The actions that start a training.
const TRAINING_ACTIONS: [&str; 3] = ["START_TRAINING", "ANNOTATION_CREATED", "ANNOTATION_UPDATED"];

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
            }),
        }
    }
    objects
}

/// A bound on the bytes of the predictions of `texts` (each with its tokens), as serialised:
/// each token may start a region, which names its control, object, label and id and repeats
/// its text (escaped, six bytes a byte at most).
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
    let region = 160 + names + label + 6 * 20;
    let regions: usize = texts
        .iter()
        .zip(tokens)
        .map(|(text, tokens)| 6 * text.len() + tokens.len() * region)
        .sum();
    64 + regions + tasks * (96 + 6 * model_version.len())
}

/// `POST /predict`'s answer.
#[derive(Serialize)]
struct PredictAnswer {
    results: Vec<Prediction>,
    model_version: String,
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
    let config = predict_config(state, &predict)?;
    let version = state.served.get();
    config.check_labels(&version.info.labels).map_err(bad)?;
    let objects = Arc::new(objects(&config));
    let most = predict.tasks.len().saturating_mul(objects.len());
    if most > options.max_queued_texts {
        return Err(ServeError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "{} tasks × {} texts each: {most} texts to tag, more than this server ever \
                 queues ({}, --max-queued); send fewer tasks at a time",
                predict.tasks.len(),
                objects.len(),
                options.max_queued_texts
            ),
        ));
    }
    let (texts, sources) = texts_to_tag(&config, &objects, &predict.tasks)?;
    let name = |i: usize| {
        let source = &sources[i];
        format!(
            "tasks[{}].data.{}",
            source.task, objects[source.object].data_key
        )
    };
    let tag_options = version
        .tagger
        .options_with(TagSettings {
            confidence: true,
            ..state.studio.strategy.settings()
        })
        .map_err(|e| ServeError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let count = texts.len();
    let (texts, tokens, mut cost) =
        queue::measure(&version.tagger, texts, tag_options, &name).await?;
    cost.answer_bytes =
        prediction_size_bound(&config, &texts, &tokens, predict.tasks.len(), &version.id);
    queue::within_answer_limit(
        state,
        &cost,
        "tasks",
        "send fewer or shorter tasks at a time",
    )?;
    let held = queue::hold(state, &cost)?;
    let left_out = Arc::new(AtomicUsize::new(0));
    let tagged = Tagging {
        texts,
        tokens,
        sources,
        options: tag_options,
    };
    let piece = Piece {
        tasks: 0..0,
        task_ids: predict.tasks.iter().map(|t| t.id).collect(),
        sources: Vec::new(),
        config,
        objects,
        strategy: state.studio.strategy,
        model_version: version.id.clone(),
        left_out: left_out.clone(),
    };
    let results = tag_in_pieces(state, id, &version.tagger, tagged, piece).await?;
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

/// The texts of a request, cut into words, with where each came from and how to tag them.
struct Tagging {
    texts: Vec<String>,
    tokens: Vec<Vec<Token>>,
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
        };
        let answer = move |tagged, tagger: &Tagger| piece.answer(tagged, tagger);
        results.extend(queue::submit(state, id, request, answer).await?);
        first_task = end_task;
    }
    Ok(results)
}

/// A text of a task, and its entities kept, each with its target and confidence.
type TextSpans = (String, Vec<(usize, CharSpan, f64)>);

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
                let on_it = &self.objects[source.object].targets;
                let worth = tagger.worth_of(&tagged, self.strategy);
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
                        let span = CharSpan {
                            start: entity.start,
                            end: entity.end,
                            label: entity.label,
                        };
                        kept.push((target, span, entity.confidence.unwrap_or(1.0)));
                    } else {
                        self.left_out.fetch_add(1, Ordering::Relaxed);
                    }
                }
                spans.push((tagged.text, kept));
            }
            let id = self.task_ids[n].map_or_else(|| format!("t{task}"), |id| id.to_string());
            let mut result = Vec::new();
            for (text, kept) in &spans {
                for (i, (target, span, probability)) in kept.iter().enumerate() {
                    let target = &self.config.targets[*target];
                    let region = format!("{id}-{}-{i}", target.to_name);
                    result.push(Region::new(text, span, *probability, region, target));
                }
            }
            predictions.push(Prediction {
                model_version: self.model_version.clone(),
                score: certainty,
                result,
            });
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

/// `GET /versions`' answer.
#[derive(Serialize)]
struct Versions {
    versions: Vec<String>,
}

/// `GET /versions`: the served version's id, then those trained and kept.
pub(crate) async fn versions(State(state): State<Arc<AppState>>) -> Response {
    let mut versions = vec![state.served.get().id.clone()];
    if let Some(status) = state.studio.status() {
        for record in status.versions {
            if let Some(id) = record.id
                && !versions.contains(&id)
            {
                versions.push(id);
            }
        }
    }
    small_answer(&Versions { versions })
}
