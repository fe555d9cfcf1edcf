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
//! and tags the rest together on the rayon pool, so many clients sending one sentence each are
//! decoded in batches as `tag --input` decodes a file. The async runtime only moves bytes.
//! Past the queue's bound a request gets `503` with `Retry-After`; past the body limit, `413`;
//! bad JSON, wrong types, empty texts and `nbest` out of range, `400` naming the field. A panic
//! while tagging fails its batch's requests with `500` and an id that the log line carries; the
//! server goes on. The caller's shutdown future stops accepting; requests in flight finish.

#![warn(missing_docs)]

mod batch;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use nertrain_tagger::{ModelInfo, Record, TagSettings, Tagger};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;

use crate::batch::{Batcher, Submitted};

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
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            max_body_bytes: 1 << 20,
            max_queued_texts: 10_000,
            max_texts: 1_000,
            batch_words: 4_096,
            batch_wait: Duration::ZERO,
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
    /// Words in them.
    pub tokens: usize,
    /// Time from the request's arrival to its answer.
    pub millis: f64,
    /// What went wrong, for an answer that is not `2xx`.
    pub error: Option<String>,
}

/// Where the log lines go (the CLI prints them).
pub type Logger = Arc<dyn Fn(RequestLog) + Send + Sync>;

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
    /// Shared with the batching thread; requests' settings are checked against it.
    tagger: Arc<Tagger>,
    info: ModelInfo,
    options: ServeOptions,
    requests: AtomicU64,
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

/// Serves `tagger` on `listener` until `shutdown` completes, then finishes the requests in
/// flight. Tagging runs on `pool`; `log` receives a line per request.
pub async fn serve(
    listener: TcpListener,
    tagger: Tagger,
    pool: rayon::ThreadPool,
    options: ServeOptions,
    log: Logger,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let info = tagger.info();
    let tagger = Arc::new(tagger);
    let batcher = Batcher::start(tagger.clone(), pool, options.clone())?;
    let state = Arc::new(AppState {
        batcher,
        tagger,
        info,
        options: options.clone(),
        requests: AtomicU64::new(0),
    });
    let app = Router::new()
        .route(
            "/",
            get(|| async { Html(nertrain_tagger::html_page(None)) }),
        )
        .route("/health", get(health))
        .route("/model", get(model))
        .route("/tag", post(tag))
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
        .with_state(state.clone());
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await;
    state.batcher.stop();
    served
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
    log(RequestLog {
        id,
        method,
        path,
        status: response.status().as_u16(),
        texts: tally.texts,
        tokens: tally.tokens,
        millis: started.elapsed().as_secs_f64() * 1000.0,
        error: tally.error,
    });
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

async fn model(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    axum::Json(state.info.clone())
}

async fn tag(
    State(state): State<Arc<AppState>>,
    axum::Extension(RequestId(id)): axum::Extension<RequestId>,
    request: Request,
) -> Response {
    match tag_request(&state, id, request).await {
        Ok(response) => response,
        Err(failure) => failure.into_response(),
    }
}

async fn tag_request(state: &AppState, id: u64, request: Request) -> Result<Response, Failure> {
    let limit = state.options.max_body_bytes;
    let body: Bytes = axum::body::to_bytes(request.into_body(), limit)
        .await
        .map_err(|e| {
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.to_string().contains("length limit"));
            if too_large {
                Failure::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the body is over {limit} bytes; send fewer texts per request"),
                )
            } else {
                Failure::new(
                    StatusCode::BAD_REQUEST,
                    format!("cannot read the body: {e}"),
                )
            }
        })?;
    let (texts, single, options) = parse_request(state, &body)?;
    let tokens = texts.iter().map(|t| t.split_whitespace().count()).sum();
    let count = texts.len();
    let reply = match state.batcher.submit(texts, tokens, options) {
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
    let records: Vec<Record> = match reply {
        Ok(records) => records,
        Err(message) => {
            return Err(Failure {
                id: Some(id),
                ..Failure::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("tagging failed ({message}); the log has request {id}"),
                )
            });
        }
    };
    let body = if single {
        serde_json::to_vec(&records[0])
    } else {
        serde_json::to_vec(&records)
    }
    .map_err(|e| Failure::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let mut response = Response::new(Body::from(body));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response.extensions_mut().insert(Tally {
        texts: count,
        tokens,
        error: None,
    });
    Ok(response)
}

/// The texts of a `POST /tag` body, whether it named one `text`, and the tagging options.
fn parse_request(
    state: &AppState,
    body: &[u8],
) -> Result<(Vec<String>, bool, nertrain_tagger::TagOptions), Failure> {
    let bad = |message: String| Failure::new(StatusCode::BAD_REQUEST, message);
    let text = std::str::from_utf8(body).map_err(|e| {
        bad(format!(
            "the body is not UTF-8 (at byte {}); send JSON in UTF-8",
            e.valid_up_to()
        ))
    })?;
    let deserializer = &mut serde_json::Deserializer::from_str(text);
    let request: TagRequest = serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            String::new()
        } else {
            format!("{path}: ")
        };
        bad(format!(
            "{field}{}; expected {{\"texts\": [\"...\"], \"probs\": false, \"nbest\": 1}} or \
             {{\"text\": \"...\"}}",
            e.inner()
        ))
    })?;
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
    let options = state
        .tagger
        .options_with(settings)
        .map_err(|e| bad(e.to_string()))?;
    Ok((texts, single, options))
}
