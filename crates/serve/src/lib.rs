//! `nertrain serve`: a trained tagger as an HTTP service.
//!
//! - `POST /tag` with `{"texts": ["...", ...], "probs": false, "nbest": 1}` (or one `"text"`)
//!   answers with the records `nertrain tag --format json` prints ([`nertrain_tagger::Record`]):
//!   an array of them for `texts`, one for `text`. A document-level model reads each text as one
//!   document.
//! - `GET /health`; `GET /model`: the model's labels, scheme, context, consistency weight, dev
//!   and test scores and the nertrain version ([`nertrain_tagger::ModelInfo`]); `GET /`: a page
//!   to paste text into and see its entities.
//!
//! Requests wait in one bounded queue. A single batching thread takes what is queued (up to a
//! token budget, or what arrives within an optional wait), drops the requests whose client has gone,
//! and tags the rest together on the tagger's threads, so many clients sending one sentence each are
//! decoded in batches as `tag --input` decodes a file. The async runtime only moves bytes.
//! Past the queue's bound a request gets `503` with `Retry-After`; past the body limit, `413`;
//! bad JSON, wrong types, empty texts and `nbest` out of range, `400` naming the field. A panic
//! while tagging fails its batch's requests with `500` and an id that the log line carries; the
//! server goes on. The caller's shutdown future stops accepting; requests in flight finish.

#![warn(missing_docs)]

mod batch;
mod served;
pub mod studio;

pub use served::check_servable;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use nertrain_tagger::{
    MAX_TEXT_WORDS, ModelInfo, Record, TagOptions, TagSettings, Tagger, Token, record_size_bound,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use crate::batch::{Batcher, Submitted};
use crate::served::{Served, Version};
use crate::studio::{Studio, StudioOptions};

/// Limits and batching of the service.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Largest request body, in bytes; a larger one gets `413`.
    pub max_body_bytes: usize,
    /// Most texts waiting to be tagged, all requests together; past it, `503`.
    pub max_queued_texts: usize,
    /// Most texts in one request.
    pub max_texts: usize,
    /// A batch is tagged once its texts hold about this many words.
    pub batch_words: usize,
    /// How long the batching thread waits for more requests before tagging a batch below
    /// `batch_words`. None by default: requests that come while a batch is tagged make the
    /// next one, and a wait only delays a lone request.
    pub batch_wait: Duration,
    /// The largest answer one request may get, in bytes, as [`record_size_bound`] bounds it
    /// before tagging; a larger one gets `413`.
    pub max_answer_bytes: usize,
    /// All answers being made at once, in bytes as above; past it, `503`.
    pub answers_in_flight_bytes: usize,
    /// Most connections open at once; past it, new ones wait to be accepted.
    pub max_connections: usize,
    /// How long a client may take to send a request's head, and an idle connection may stay
    /// open waiting for its next request.
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body; past it, `408`.
    pub body_timeout: Duration,
    /// After the shutdown signal, how long requests in flight may take to finish before their
    /// connections are closed.
    pub shutdown_grace: Duration,
    /// Largest `POST /predict` body, in bytes: Label Studio sends every task it asks about in
    /// one request, with its annotations and predictions.
    pub max_predict_body_bytes: usize,
    /// As Label Studio's ML backend: the task score, and learning from its annotations.
    pub studio: StudioOptions,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            max_body_bytes: 1 << 20,
            max_queued_texts: 10_000,
            max_texts: 1_000,
            batch_words: 4_096,
            batch_wait: Duration::ZERO,
            max_answer_bytes: 128 << 20,
            answers_in_flight_bytes: 512 << 20,
            max_connections: 512,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(10),
            max_predict_body_bytes: 64 << 20,
            studio: StudioOptions::default(),
        }
    }
}

/// One line of the request log: what the CLI prints on stderr for each request.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestLog {
    /// The request's number, from 1; a `500`'s body names it.
    pub id: u64,
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path requested.
    pub path: String,
    /// The status answered.
    pub status: u16,
    /// Texts tagged.
    pub texts: usize,
    /// Tokens in them, as the model cuts them.
    pub tokens: usize,
    /// Time from the request's arrival to its answer.
    pub millis: f64,
    /// What went wrong, for an answer that is not `2xx`.
    pub error: Option<String>,
}

/// What the server tells its log.
#[derive(Debug, Clone, PartialEq)]
pub enum LogLine {
    /// A request was answered.
    Request(RequestLog),
    /// Something learning from Label Studio did or found.
    Studio(studio::StudioEvent),
}

/// Where the log lines go (the CLI prints them).
pub type Logger = Arc<dyn Fn(LogLine) + Send + Sync>;

/// The body of every error answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What was wrong.
    pub error: String,
    /// The request's number in the server's log (for `500`s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
}

/// A `POST /tag` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TagRequest {
    #[serde(default)]
    texts: Option<Vec<String>>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    probs: bool,
    #[serde(default = "one")]
    nbest: usize,
}

fn one() -> usize {
    1
}

struct AppState {
    batcher: Batcher,
    /// The version requests are cut into words, checked and tagged with.
    served: Arc<Served>,
    /// Bytes of answers being made, in MiB: each request holds its answer's bound until its
    /// answer is sent.
    answers: Arc<Semaphore>,
    options: ServeOptions,
    requests: AtomicU64,
    studio: Studio,
}

/// What a handler learned, for the log line.
#[derive(Clone, Default)]
struct Tally {
    texts: usize,
    tokens: usize,
    error: Option<String>,
}

/// An error answer: status and message.
struct Failure {
    status: StatusCode,
    message: String,
    id: Option<u64>,
}

impl Failure {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            id: None,
        }
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: self.message.clone(),
            id: self.id,
        };
        let mut response = (self.status, axum::Json(body)).into_response();
        // Label Studio shows its users the status line, not the body.
        if let Ok(reason) = hyper::ext::ReasonPhrase::try_from(reason_phrase(&self.message)) {
            response.extensions_mut().insert(reason);
        }
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response.extensions_mut().insert(Tally {
            error: Some(self.message),
            ..Tally::default()
        });
        response
    }
}

/// `message` as an HTTP reason phrase: printable ASCII, at most 400 bytes.
fn reason_phrase(message: &str) -> Vec<u8> {
    let mut phrase: Vec<u8> = message
        .chars()
        .map(|c| {
            if c == ' ' || c.is_ascii_graphic() {
                c as u8
            } else {
                b'?'
            }
        })
        .take(400)
        .collect();
    if phrase.is_empty() {
        phrase.extend_from_slice(b"error");
    }
    phrase
}

/// Serves `tagger` on `listener` until `shutdown` completes, then finishes the requests in
/// flight for at most `options.shutdown_grace` and closes every connection. Tagging, and cutting
/// requests into words, run on the tagger's threads; `log` receives a line per request.
pub async fn serve(
    listener: TcpListener,
    tagger: Tagger,
    options: ServeOptions,
    log: Logger,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<Stopped> {
    let served = Arc::new(Served::new(Version::new(tagger)?));
    let batcher = Batcher::start(options.clone())?;
    let studio = Studio::start(&options.studio, served.clone(), log.clone())?;
    let state = Arc::new(AppState {
        batcher,
        served,
        answers: Arc::new(Semaphore::new(mebibytes(options.answers_in_flight_bytes))),
        options: options.clone(),
        requests: AtomicU64::new(0),
        studio,
    });
    let app = router(state.clone(), log);
    let connections = Arc::new(Semaphore::new(options.max_connections));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(options.header_timeout);
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            permit = connections.clone().acquire_owned() => match permit {
                Ok(permit) => tokio::select! {
                    () = &mut shutdown => break,
                    accepted = listener.accept() => accepted.map(|(stream, _)| (stream, permit)),
                },
                Err(_) => break,
            },
        };
        let (stream, permit) = match accepted {
            Ok(accepted) => accepted,
            // Out of file descriptors, or a connection reset before it was accepted: the
            // listener itself is fine.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let connection =
            http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
            drop(permit);
        });
    }
    drop(listener);
    // Idle connections close at once, requests in flight finish; what is left after the grace
    // is dropped with the runtime.
    let finished = tokio::time::timeout(options.shutdown_grace, graceful.shutdown()).await;
    state.batcher.stop();
    state.studio.stop();
    Ok(Stopped {
        every_request_answered: finished.is_ok(),
    })
}

/// How a server stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped {
    /// Every connection finished within the grace; otherwise the rest were closed.
    pub every_request_answered: bool,
}

/// The routes, with the request log around them.
fn router(state: Arc<AppState>, log: Logger) -> Router {
    Router::new()
        .route(
            "/",
            get(|| async { Html(nertrain_tagger::html_page(None)) }),
        )
        .route("/health", get(health))
        .route("/model", get(model))
        .route("/tag", post(tag))
        .route("/setup", post(studio::setup))
        .route("/predict", post(studio::predict))
        .route("/webhook", post(studio::webhook))
        .route("/versions", get(studio::versions))
        .fallback(|| async { Failure::new(StatusCode::NOT_FOUND, "no such path; see GET /") })
        .method_not_allowed_fallback(|| async {
            Failure::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed here")
        })
        // The body is read with its own limit in `tag`, which answers 413 in JSON.
        .layer(DefaultBodyLimit::disable())
        .layer(middleware::from_fn_with_state(
            (state.clone(), log),
            log_request,
        ))
        .with_state(state)
}

/// `bytes` in whole MiB, rounded up: the unit of the answer budget.
fn mebibytes(bytes: usize) -> usize {
    bytes.div_ceil(1 << 20).max(1)
}

/// Logs every request, and numbers it.
async fn log_request(
    State((state, log)): State<(Arc<AppState>, Logger)>,
    mut request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let id = state.requests.fetch_add(1, Ordering::Relaxed) + 1;
    let method = request.method().to_string();
    let path = request.uri().path().to_string();
    request.extensions_mut().insert(RequestId(id));
    let mut response = next.run(request).await;
    let tally = response
        .extensions()
        .get::<Tally>()
        .cloned()
        .unwrap_or_default();
    if response.status() == StatusCode::INTERNAL_SERVER_ERROR {
        // The id in the body is the log line's.
        response.extensions_mut().remove::<Tally>();
    }
    log(LogLine::Request(RequestLog {
        id,
        method,
        path,
        status: response.status().as_u16(),
        texts: tally.texts,
        tokens: tally.tokens,
        millis: started.elapsed().as_secs_f64() * 1000.0,
        error: tally.error,
    }));
    response
}

#[derive(Clone, Copy)]
struct RequestId(u64);

/// `GET /health`'s answer.
#[derive(Serialize)]
struct Health {
    status: &'static str,
}

async fn health() -> impl IntoResponse {
    axum::Json(Health { status: "ok" })
}

/// `GET /model`'s answer: the served model, and what learning from Label Studio did.
#[derive(Serialize)]
struct ModelAnswer {
    #[serde(flatten)]
    info: ModelInfo,
    /// The id of the served weights: Label Studio's model version.
    version: String,
    /// Learning from Label Studio's annotations, when the server does.
    #[serde(skip_serializing_if = "Option::is_none")]
    learning: Option<studio::LearningStatus>,
}

async fn model(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    let version = state.served.get();
    axum::Json(ModelAnswer {
        info: version.info.clone(),
        version: version.id.clone(),
        learning: state.studio.status(),
    })
}

async fn tag(
    State(state): State<Arc<AppState>>,
    axum::Extension(RequestId(id)): axum::Extension<RequestId>,
    request: Request,
) -> Result<Response, Failure> {
    let state = &*state;
    let options = &state.options;
    let request: TagRequest = json_body(
        request,
        options.max_body_bytes,
        options.body_timeout,
        "{\"texts\": [\"...\"], \"probs\": false, \"nbest\": 1} or {\"text\": \"...\"}",
    )
    .await?;
    let version = state.served.get();
    let (texts, single, tag_options) = parse_request(state, &version.tagger, request)?;
    let count = texts.len();
    let name = |i: usize| {
        if single {
            "text".to_string()
        } else {
            format!("texts[{i}]")
        }
    };
    let (texts, tokens, cost) = measure(&version.tagger, texts, tag_options, &name).await?;
    if cost.answer_bytes > options.max_answer_bytes {
        return Err(Failure::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "{}: the answer would take up to {} MiB, over this server's {} MiB; send fewer \
                 or shorter texts{}",
                if single { "text" } else { "texts" },
                mebibytes(cost.answer_bytes),
                mebibytes(options.max_answer_bytes),
                if tag_options.marginals || tag_options.nbest > 1 {
                    ", or ask without probs and nbest"
                } else {
                    ""
                }
            ),
        ));
    }
    let held = hold_answer(state, &cost)?;
    let answer: batch::Answer = Box::new(move |tagged, tagger| {
        let records: Vec<Record> = tagged
            .into_iter()
            .map(|t| t.into_record(tagger.labels()))
            .collect();
        let body = if single {
            serde_json::to_vec(&records[0])
        } else {
            serde_json::to_vec(&records)
        };
        body.map_err(|e| e.to_string())
    });
    let request = batch::Request {
        tagger: version.tagger.clone(),
        texts,
        tokens,
        words: cost.tokens,
        options: tag_options,
        answer,
    };
    drop(version);
    let body = tagged_answer(state, id, request).await?;
    Ok(json_answer(
        body,
        held,
        Tally {
            texts: count,
            tokens: cost.tokens,
            error: None,
        },
    ))
}

/// Holds `cost`'s answer bytes of the answer budget, or says why not.
fn hold_answer(state: &AppState, cost: &Cost) -> Result<OwnedSemaphorePermit, Failure> {
    let budget = u32::try_from(mebibytes(cost.answer_bytes)).unwrap_or(u32::MAX);
    state
        .answers
        .clone()
        .try_acquire_many_owned(budget)
        .map_err(|_| {
            Failure::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the server is making as many answers as it may at once; try again shortly",
            )
        })
}

/// Queues `request` and waits for its answer's body.
async fn tagged_answer(
    state: &AppState,
    id: u64,
    request: batch::Request,
) -> Result<Vec<u8>, Failure> {
    let reply = match state.batcher.submit(request) {
        Submitted::Queued(reply) => reply,
        Submitted::Full => {
            return Err(Failure::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the queue is full; try again shortly",
            ));
        }
    };
    let reply = reply
        .await
        .unwrap_or_else(|_| Err("the tagging thread stopped".into()));
    reply.map_err(|message| Failure {
        id: Some(id),
        ..Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("tagging failed ({message}); the log has request {id}"),
        )
    })
}

/// A JSON answer of `body`, holding `held` of the answer budget until it is sent, with `tally`
/// for the log.
fn json_answer(body: Vec<u8>, held: OwnedSemaphorePermit, tally: Tally) -> Response {
    let mut response = Response::new(Body::new(HeldBody::new(body.into(), held)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response.extensions_mut().insert(tally);
    response
}

/// Bytes drained from a body past its limit, so that a client that sends all of it before
/// reading the answer reads the `413` instead of a reset connection.
const MAX_DRAIN_BYTES: usize = 16 << 20;

/// The request's body, of at most `limit` bytes, within `timeout`. Past the limit the rest is
/// read and dropped (at most [`MAX_DRAIN_BYTES`] more, within the same time) before the `413`.
async fn read_body(request: Request, limit: usize, timeout: Duration) -> Result<Bytes, Failure> {
    let too_large = || {
        Failure::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is over {limit} bytes; send fewer texts per request"),
        )
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|length| length > limit.saturating_add(MAX_DRAIN_BYTES)) {
        // Too much to drain: the connection closes after the answer.
        return Err(too_large());
    }
    let deadline = tokio::time::Instant::now() + timeout;
    let mut body = request.into_body();
    let mut bytes = Vec::new();
    let mut read = 0usize;
    loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) if read > limit => return Err(too_large()),
            Err(_) => {
                return Err(Failure::new(
                    StatusCode::REQUEST_TIMEOUT,
                    format!(
                        "the body did not come within {} s; send it at once",
                        timeout.as_secs_f64()
                    ),
                ));
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                return Err(Failure::new(
                    StatusCode::BAD_REQUEST,
                    format!("cannot read the body: {e}"),
                ));
            }
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        read = read.saturating_add(data.len());
        if read <= limit {
            bytes.extend_from_slice(&data);
        } else if read > limit.saturating_add(MAX_DRAIN_BYTES) {
            return Err(too_large());
        } else {
            bytes = Vec::new();
        }
    }
    if read > limit {
        return Err(too_large());
    }
    Ok(bytes.into())
}

/// What a request costs: its tokens as the model cuts them, and a bound on its answer's bytes.
struct Cost {
    tokens: usize,
    answer_bytes: usize,
}

/// Cuts each text into tokens as `tagger` does (on its threads, not the async runtime),
/// refusing a text of more words than a text may have with `400` naming it (`name` names a text
/// by its place), and bounds the answer's size. Gives the texts back with their tokens, which
/// the tagger then reads.
async fn measure(
    tagger: &Arc<Tagger>,
    texts: Vec<String>,
    options: TagOptions,
    name: &(dyn Fn(usize) -> String + Sync),
) -> Result<(Vec<String>, Vec<Vec<Token>>, Cost), Failure> {
    let (sender, receiver) = oneshot::channel();
    let spawned = tagger.spawn(move |tagger| {
        let labels = tagger.labels();
        let mut cost = Cost {
            tokens: 0,
            answer_bytes: 0,
        };
        let mut cut = Vec::with_capacity(texts.len());
        for (i, text) in texts.iter().enumerate() {
            let Some(tokens) = tagger.tokenize(text) else {
                let _ = sender.send(Err(i));
                return;
            };
            cost.tokens += tokens.len();
            cost.answer_bytes += record_size_bound(text, tokens.len(), labels, &options) + 1;
            cut.push(tokens);
        }
        let _ = sender.send(Ok((texts, cut, cost)));
    });
    if let Err(error) = spawned {
        return Err(Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the tagging threads cannot start: {error}"),
        ));
    }
    match receiver.await {
        Ok(Ok(measured)) => Ok(measured),
        Ok(Err(i)) => Err(Failure::new(
            StatusCode::BAD_REQUEST,
            format!(
                "{}: more than {MAX_TEXT_WORDS} words; split it into smaller texts",
                name(i)
            ),
        )),
        Err(_) => Err(Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the tagging threads stopped",
        )),
    }
}

/// An answer's bytes, sent in pieces, holding its share of the answer budget until the last
/// piece is taken to be sent.
struct HeldBody {
    bytes: Bytes,
    _held: OwnedSemaphorePermit,
}

impl HeldBody {
    /// Pieces this large let the connection take the answer as fast as the client reads it.
    const PIECE: usize = 64 << 10;

    fn new(bytes: Bytes, held: OwnedSemaphorePermit) -> Self {
        Self { bytes, _held: held }
    }
}

impl axum::body::HttpBody for HeldBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.bytes.is_empty() {
            return Poll::Ready(None);
        }
        let piece = Self::PIECE.min(self.bytes.len());
        let piece = self.bytes.split_to(piece);
        Poll::Ready(Some(Ok(Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.bytes.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.bytes.len() as u64)
    }
}

/// A JSON body of at most `limit` bytes, read within `timeout`, as `T`; a `400` names the field
/// that is wrong and shows what was `expected`.
async fn json_body<T: DeserializeOwned>(
    request: Request,
    limit: usize,
    timeout: Duration,
    expected: &str,
) -> Result<T, Failure> {
    let body = read_body(request, limit, timeout).await?;
    let bad = |message: String| Failure::new(StatusCode::BAD_REQUEST, message);
    let text = std::str::from_utf8(&body).map_err(|e| {
        bad(format!(
            "the body is not UTF-8 (at byte {}); send JSON in UTF-8",
            e.valid_up_to()
        ))
    })?;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            String::new()
        } else {
            format!("{path}: ")
        };
        bad(format!("{field}{}; expected {expected}", e.inner()))
    })?;
    deserializer.end().map_err(|e| {
        bad(format!(
            "{e}: expected one JSON object and nothing after it but white space"
        ))
    })?;
    Ok(value)
}

/// The texts of a `POST /tag` request, whether it named one `text`, and the tagging options.
fn parse_request(
    state: &AppState,
    tagger: &Tagger,
    request: TagRequest,
) -> Result<(Vec<String>, bool, TagOptions), Failure> {
    let bad = |message: String| Failure::new(StatusCode::BAD_REQUEST, message);
    let (texts, single) = match (request.texts, request.text) {
        (Some(_), Some(_)) => return Err(bad("give `texts` or `text`, not both".into())),
        (None, None) => return Err(bad("missing field `texts` (or `text`)".into())),
        (Some(texts), None) => (texts, false),
        (None, Some(text)) => (vec![text], true),
    };
    if texts.is_empty() {
        return Err(bad("texts: empty; give at least one text".into()));
    }
    if texts.len() > state.options.max_texts {
        return Err(bad(format!(
            "texts: {} texts; at most {} a request",
            texts.len(),
            state.options.max_texts
        )));
    }
    if let Some(i) = texts.iter().position(|t| t.trim().is_empty()) {
        let field = if single {
            "text".to_string()
        } else {
            format!("texts[{i}]")
        };
        return Err(bad(format!("{field}: empty; give text to tag")));
    }
    let settings = TagSettings {
        marginals: request.probs,
        nbest: request.nbest,
        ..TagSettings::default()
    };
    let options = tagger
        .options_with(settings)
        .map_err(|e| bad(e.to_string()))?;
    Ok((texts, single, options))
}
