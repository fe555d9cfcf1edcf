//! The tagging queue, as a route uses it: a request's texts measured (cut into words on the
//! tagger's threads, a text over the word bound refused, its answer's size bounded), its
//! answer's bytes held of the budget, its texts submitted to the batching thread
//! ([`crate::batch`]) with what makes them a typed answer there, and an answer made of several
//! pieces serialised once, off the async runtime.

use std::sync::Arc;

use axum::http::StatusCode;
use nertrain_tagger::{MAX_TEXT_WORDS, TagOptions, Tagged, Tagger, Token, record_size_bound};
use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, oneshot};

use crate::batch::{self, Submitted};
use crate::http::ServeError;
use crate::{AppState, mebibytes};

/// What a request costs: its tokens as the model cuts them, and a bound on its answer's bytes.
pub(crate) struct Cost {
    /// Tokens, as the model cuts the texts.
    pub(crate) tokens: usize,
    /// A bound on the answer's bytes.
    pub(crate) answer_bytes: usize,
}

/// Cuts each text into tokens as `tagger` does (on its threads, not the async runtime),
/// refusing a text of more words than a text may have with `400` naming it (`name` names a text
/// by its place), and bounds the answer's size. Gives the texts back with their tokens, which
/// the tagger then reads.
pub(crate) async fn measure(
    tagger: &Arc<Tagger>,
    texts: Vec<String>,
    options: TagOptions,
    name: &(dyn Fn(usize) -> String + Sync),
) -> Result<(Vec<String>, Vec<Vec<Token>>, Cost), ServeError> {
    let (sender, receiver) = oneshot::channel();
    let spawned = tagger.spawn(move |tagger| {
        let labels = tagger.tags();
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
        return Err(ServeError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the tagging threads cannot start: {error}"),
        ));
    }
    match receiver.await {
        Ok(Ok(measured)) => Ok(measured),
        Ok(Err(i)) => Err(ServeError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "{}: more than {MAX_TEXT_WORDS} words; split it into smaller texts",
                name(i)
            ),
        )),
        Err(_) => Err(ServeError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the tagging threads stopped",
        )),
    }
}

/// `work` done on the tagger's threads, off the async runtime: for what costs time in the size
/// of a request (checking an annotator's regions against its texts).
pub(crate) async fn on_tagger<T: Send + 'static>(
    tagger: &Arc<Tagger>,
    work: impl FnOnce(&Tagger) -> Result<T, ServeError> + Send + 'static,
) -> Result<T, ServeError> {
    let (sender, receiver) = oneshot::channel();
    tagger
        .spawn(move |tagger| drop(sender.send(work(tagger))))
        .map_err(|error| {
            ServeError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the tagging threads cannot start: {error}"),
            )
        })?;
    receiver.await.unwrap_or_else(|_| {
        Err(ServeError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the tagging threads stopped",
        ))
    })
}

/// Refuses (`413`) a request whose answer may be larger than one answer may be
/// (`--max-answer`), before anything is tagged: `what` names what was sent, `advice` what to
/// send instead.
pub(crate) fn within_answer_limit(
    state: &AppState,
    cost: &Cost,
    what: &str,
    advice: &str,
) -> Result<(), ServeError> {
    let max = state.options.max_answer_bytes;
    if cost.answer_bytes <= max {
        return Ok(());
    }
    Err(ServeError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "{what}: the answer would take up to {} MiB, over this server's {} MiB \
             (--max-answer); {advice}",
            mebibytes(cost.answer_bytes),
            mebibytes(max)
        ),
    ))
}

/// Holds `cost`'s answer bytes of the answer budget, or says why not (`503`).
pub(crate) fn hold(state: &AppState, cost: &Cost) -> Result<OwnedSemaphorePermit, ServeError> {
    let budget = u32::try_from(mebibytes(cost.answer_bytes)).unwrap_or(u32::MAX);
    state
        .answers
        .clone()
        .try_acquire_many_owned(budget)
        .map_err(|_| {
            ServeError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the server is making as many answers as it may at once; try again shortly",
            )
        })
}

/// Queues `request`, to be made into a `T` by `answer` once tagged, and waits for it; a full
/// queue is a `503`, a failure while tagging a `500` that names request `id`.
pub(crate) async fn submit<T, F>(
    state: &AppState,
    id: u64,
    request: batch::Request,
    answer: F,
) -> Result<T, ServeError>
where
    T: Send + 'static,
    F: FnOnce(Vec<Tagged>, &Tagger) -> T + Send + 'static,
{
    let reply = match state.batcher.submit(request, answer) {
        Submitted::Queued(reply) => reply,
        Submitted::Full => {
            return Err(ServeError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the queue is full; try again shortly",
            ));
        }
    };
    let reply = reply
        .await
        .unwrap_or_else(|_| Err("the tagging thread stopped".into()));
    reply.map_err(|message| ServeError {
        id: Some(id),
        ..ServeError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("tagging failed ({message}); the log has request {id}"),
        )
    })
}

/// `answer` as JSON, serialised once, on a blocking thread rather than the async runtime.
pub(crate) async fn serialize<T: Serialize + Send + 'static>(
    answer: T,
) -> Result<Vec<u8>, ServeError> {
    let failed = |message: String| ServeError::new(StatusCode::INTERNAL_SERVER_ERROR, message);
    tokio::task::spawn_blocking(move || serde_json::to_vec(&answer))
        .await
        .map_err(|e| failed(format!("making the answer: {e}")))?
        .map_err(|e| failed(format!("making the answer: {e}")))
}
