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

pub mod auth;
mod batch;
mod guard;
mod http;
mod queue;
mod studio;
mod tag;

pub use http::ErrorBody;
pub use nertrain_studio::check_servable;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use nertrain_tagger::{ModelInfo, Tagger};
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::batch::Batcher;
use crate::http::{RequestId, ServeError, Tally};
use nertrain_studio::{Served, Studio, StudioEvent, StudioOptions, Version};

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
    /// The credentials the routes that start work or change what is served ask for (and every
    /// route, as [`auth::Guarded`] says); none: they are open.
    pub auth: Option<auth::Auth>,
    /// Host names clients may reach the server by, besides loopback names and IP addresses
    /// (a `Host` naming any other gets `403`, as a page on a rebound name of its own would).
    pub allowed_hosts: Vec<String>,
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
            auth: None,
            allowed_hosts: Vec::new(),
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
    /// The server is ready, listening on this address: said once, before any request.
    Listening(std::net::SocketAddr),
    /// A request was answered.
    Request(RequestLog),
    /// Something learning from Label Studio did or found.
    Studio(StudioEvent),
}

/// Where the log lines go (the CLI prints them).
pub type Logger = Arc<dyn Fn(LogLine) + Send + Sync>;

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
    let events = {
        let log = log.clone();
        Arc::new(move |event| log(LogLine::Studio(event)))
    };
    let studio = Studio::start(&options.studio, served.clone(), events)?;
    let state = Arc::new(AppState {
        batcher,
        served,
        answers: Arc::new(Semaphore::new(mebibytes(options.answers_in_flight_bytes))),
        options: options.clone(),
        requests: AtomicU64::new(0),
        studio,
    });
    log(LogLine::Listening(listener.local_addr()?));
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
    // is dropped with the runtime. The learner gets what is left of the grace too: its child is
    // killed at once, and a fetch from a Label Studio that does not answer is left behind.
    let deadline = Instant::now() + options.shutdown_grace;
    let finished = tokio::time::timeout(options.shutdown_grace, graceful.shutdown()).await;
    state.batcher.stop();
    let studio = state.clone();
    let _ = tokio::task::spawn_blocking(move || studio.studio.stop(deadline)).await;
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
        .route("/tag", post(tag::tag))
        .route("/setup", post(studio::setup))
        .route("/predict", post(studio::predict))
        .route("/webhook", post(studio::webhook))
        .route("/versions", get(studio::versions))
        .route("/versions/{name}/serve", post(studio::serve_version))
        .fallback(|| async { ServeError::new(StatusCode::NOT_FOUND, "no such path; see GET /") })
        .method_not_allowed_fallback(|| async {
            ServeError::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed here")
        })
        // The body is read with its own limit in `tag`, which answers 413 in JSON.
        .layer(DefaultBodyLimit::disable())
        // Inside the log, so that refused requests are logged too.
        .layer(middleware::from_fn_with_state(
            state.options.auth.clone(),
            auth::require,
        ))
        // Before the credentials: a page elsewhere is refused whatever it sends.
        .layer(middleware::from_fn_with_state(state.clone(), guard::admit))
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
    learning: Option<nertrain_studio::LearningStatus>,
}

async fn model(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    let version = state.served.get();
    axum::Json(ModelAnswer {
        info: version.info.clone(),
        version: version.id.clone(),
        learning: state.studio.status(),
    })
}
