//! The transport: what every route shares of HTTP. Bodies read within a limit and a time
//! (`413` and `408` in JSON, the rest of an over-long body drained so that its client reads the
//! answer), JSON bodies whose errors name the field, errors as answers ([`ServeError`], with
//! their message as the reason phrase too), and answers that hold their share of the answer
//! budget until they are sent, with what the log line says of them.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::sync::OwnedSemaphorePermit;

/// The body of every error answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What was wrong.
    pub error: String,
    /// The request's number in the server's log (for `500`s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
}

/// What a handler learned, for the log line.
#[derive(Clone, Default)]
pub(crate) struct Tally {
    /// Texts tagged.
    pub(crate) texts: usize,
    /// Their tokens.
    pub(crate) tokens: usize,
    /// What went wrong, or was left out.
    pub(crate) error: Option<String>,
}

/// An error answer: its status, what was wrong, and for a `500` the request's number in the log.
pub(crate) struct ServeError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
    pub(crate) id: Option<u64>,
}

impl ServeError {
    /// An answer of `status` saying `message`.
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            id: None,
        }
    }
}

impl IntoResponse for ServeError {
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
pub(crate) fn reason_phrase(message: &str) -> Vec<u8> {
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

/// A request's number in the log.
#[derive(Clone, Copy)]
pub(crate) struct RequestId(pub(crate) u64);

/// A JSON answer of `body`, holding `held` of the answer budget until it is sent, with `tally`
/// for the log.
pub(crate) fn json_answer(body: Vec<u8>, held: OwnedSemaphorePermit, tally: Tally) -> Response {
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
pub(crate) const MAX_DRAIN_BYTES: usize = 16 << 20;

/// The request's body, of at most `limit` bytes, within `timeout`. Past the limit the rest is
/// read and dropped (at most [`MAX_DRAIN_BYTES`] more, within the same time) before the `413`.
pub(crate) async fn read_body(
    request: Request,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, ServeError> {
    let too_large = || {
        ServeError::new(
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
                return Err(ServeError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    format!(
                        "the body did not come within {} s; send it at once",
                        timeout.as_secs_f64()
                    ),
                ));
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                return Err(ServeError::new(
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
pub(crate) async fn json_body<T: DeserializeOwned>(
    request: Request,
    limit: usize,
    timeout: Duration,
    expected: &str,
) -> Result<T, ServeError> {
    let body = read_body(request, limit, timeout).await?;
    let bad = |message: String| ServeError::new(StatusCode::BAD_REQUEST, message);
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
