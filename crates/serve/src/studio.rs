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
//!   project's annotations (`nertrain_studio::learn`) when the server learns, and says so when
//!   it does not.
//! - `GET /versions`: the versions trained.
//!
//! What each does is `nertrain_studio`'s; this module reads the requests under the server's
//! limits, tags on its queue, and answers.
//!
//! Label Studio shows its users an error's status line, not its body, so error answers carry
//! their message as the reason phrase too.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use nertrain_annotate::CharSpan;
use nertrain_annotate::label_studio::Prediction;
use nertrain_annotate::label_studio::backend::{
    PredictAnswer, PredictRequest, SetupRequest, WebhookRequest,
};
use nertrain_studio::predict::{Answering, Drawn, Source, prediction_size_bound};
use nertrain_studio::{self as studio, ServeRefusal, Version};
use nertrain_tagger::{TagOptions, Tagger, Token};
use serde::Serialize;

use crate::http::{RequestId, ServeError, Tally, json_answer, json_body};
use crate::{AppState, queue};

impl From<studio::Error> for ServeError {
    fn from(error: studio::Error) -> Self {
        let status = match &error {
            studio::Error::Invalid(_) => StatusCode::BAD_REQUEST,
            studio::Error::Unfit(_) => StatusCode::UNPROCESSABLE_ENTITY,
            studio::Error::Refused(_) => StatusCode::CONFLICT,
            studio::Error::Forbidden(_) => StatusCode::FORBIDDEN,
            studio::Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ServeError::new(status, error.to_string())
    }
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
    Ok(small_answer(&state.studio.setup(&setup)?))
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
    let (tagging, answering, mut cost) = draw_texts(state, &version, predict).await?;
    cost.answer_bytes = prediction_size_bound(
        answering.config(),
        &tagging.texts,
        &tagging.tokens,
        tagging.task_ids.len(),
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
    let cut = state.studio.cut(&version.id);
    let results = tag_in_groups(state, id, &version.tagger, tagging, &answering, cut).await?;
    let body = queue::serialize(PredictAnswer {
        results,
        model_version: version.id.clone(),
    })
    .await?;
    let left_out = answering.left_out();
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
/// the model), cut into words and measured, with the annotator's entities to force; what
/// answers them; and what tagging them costs.
async fn draw_texts(
    state: &AppState,
    version: &Version,
    predict: PredictRequest,
) -> Result<(Tagging, Arc<Answering>, queue::Cost), ServeError> {
    let answering = state.studio.answering(&predict, version)?;
    within_queue(state, predict.tasks.len(), answering.objects().len())?;
    let (texts, sources) = answering.texts_to_tag(&predict.tasks)?;
    let name = |i: usize| {
        let source = &sources[i];
        let object = &answering.objects()[source.object];
        format!("tasks[{}].data.{}", source.task, object.data_key)
    };
    let tag_options = answering.tag_options(&version.tagger);
    let (texts, tokens, cost) = queue::measure(&version.tagger, texts, tag_options, &name).await?;
    let drawn = Drawn {
        context: predict.params.and_then(|p| p.context),
        answering: answering.clone(),
        texts,
        tokens,
        sources,
    };
    let (drawn, forced) =
        queue::on_tagger(&version.tagger, move |tagger| Ok(drawn.forced(tagger)?)).await?;
    let tagging = Tagging {
        task_ids: predict.tasks.iter().map(|t| t.id).collect(),
        texts: drawn.texts,
        tokens: drawn.tokens,
        forced,
        sources: drawn.sources,
        options: tag_options,
    };
    Ok((tagging, answering, cost))
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

/// The texts of a request, cut into words, with where each came from and how to tag them.
struct Tagging {
    /// The tasks' ids in Label Studio, where they have one.
    task_ids: Vec<Option<i64>>,
    texts: Vec<String>,
    tokens: Vec<Vec<Token>>,
    /// Entities forced on each text; empty: none.
    forced: Vec<Vec<CharSpan>>,
    sources: Vec<Source>,
    options: TagOptions,
}

/// The predictions of every task, tagged in groups of whole tasks of at most `max_texts` texts
/// each, so that one request of many tasks takes its turn in the queue like many requests;
/// regions to decide cut at `cut`.
async fn tag_in_groups(
    state: &AppState,
    id: u64,
    tagger: &Arc<Tagger>,
    tagging: Tagging,
    answering: &Arc<Answering>,
    cut: f64,
) -> Result<Vec<Prediction>, ServeError> {
    let Tagging {
        task_ids,
        mut texts,
        mut tokens,
        mut forced,
        mut sources,
        options,
    } = tagging;
    let tasks = task_ids.len();
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
        let group = answering.group(
            first_task..end_task,
            task_ids[first_task..end_task].to_vec(),
            std::mem::replace(&mut sources, rest_sources),
            cut,
        );
        let words = tokens.iter().map(Vec::len).sum();
        let request = crate::batch::Request {
            tagger: tagger.clone(),
            texts: std::mem::replace(&mut texts, rest_texts),
            tokens: std::mem::replace(&mut tokens, rest_tokens),
            words,
            options,
            forced: std::mem::replace(&mut forced, rest_forced),
        };
        let answer = move |tagged, tagger: &Tagger| group.answer(tagged, tagger);
        results.extend(queue::submit(state, id, request, answer).await?);
        first_task = end_task;
    }
    Ok(results)
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
    Ok(small_answer(&state.studio.webhook(&event)?))
}

/// `POST /versions/{name}/serve`: serves the accepted version `name` (`vN`, or `base`: the model
/// the server started from) from now on, without a restart; Label Studio's predictions are
/// refreshed with it.
pub(crate) async fn serve_version(
    State(state): State<Arc<AppState>>,
    axum::extract::Path(name): axum::extract::Path<String>,
) -> Result<Response, ServeError> {
    // Loading a model reads its files: not on the async runtime.
    let answer = tokio::task::spawn_blocking(move || state.studio.serve_version(&name))
        .await
        .map_err(|e| ServeError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    match answer {
        Ok(served) => Ok(small_answer(&served)),
        Err(refusal) => {
            let status = match refusal {
                ServeRefusal::Unknown(_) => StatusCode::NOT_FOUND,
                ServeRefusal::NotLearning
                | ServeRefusal::NotAccepted(..)
                | ServeRefusal::Removed(_) => StatusCode::CONFLICT,
                ServeRefusal::Load(_) => StatusCode::INTERNAL_SERVER_ERROR,
            };
            Err(ServeError::new(status, refusal.to_string()))
        }
    }
}

/// `GET /versions`: the served version's id, then those that may be served instead (the accepted
/// versions kept on disk, and the model the server started from): Label Studio's list of model
/// versions.
pub(crate) async fn versions(State(state): State<Arc<AppState>>) -> Response {
    small_answer(&state.studio.versions())
}
