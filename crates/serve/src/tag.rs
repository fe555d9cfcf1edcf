//! `POST /tag`: texts in, the records `nertrain tag --format json` prints out.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use nertrain_tagger::{Record, TagOptions, Tagger};
use serde::Deserialize;

use crate::http::{RequestId, ServeError, Tally, json_answer, json_body};
use crate::{AppState, queue};

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
    /// Keep every entity, whatever the model's confidence thresholds.
    #[serde(default)]
    all_entities: bool,
}

fn one() -> usize {
    1
}

/// `POST /tag`.
pub(crate) async fn tag(
    State(state): State<Arc<AppState>>,
    axum::Extension(RequestId(id)): axum::Extension<RequestId>,
    request: Request,
) -> Result<Response, ServeError> {
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
    let (texts, tokens, cost) = queue::measure(&version.tagger, texts, tag_options, &name).await?;
    let advice = if tag_options.marginals || tag_options.nbest > 1 {
        "send fewer or shorter texts, or ask without probs and nbest"
    } else {
        "send fewer or shorter texts"
    };
    let what = if single { "text" } else { "texts" };
    queue::within_answer_limit(state, &cost, what, advice)?;
    let held = queue::hold(state, &cost)?;
    let request = crate::batch::Request {
        tagger: version.tagger.clone(),
        texts,
        tokens,
        words: cost.tokens,
        options: tag_options,
        forced: Vec::new(),
    };
    drop(version);
    // One piece: its answer is serialised where it is made, on the batching thread.
    let body = queue::submit(state, id, request, move |tagged, tagger| {
        let records: Vec<Record> = tagged
            .into_iter()
            .map(|t| t.into_record(tagger.tags()))
            .collect();
        if single {
            serde_json::to_vec(&records[0])
        } else {
            serde_json::to_vec(&records)
        }
    })
    .await?
    .map_err(|e| {
        ServeError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("making the answer: {e}"),
        )
    })?;
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

/// The texts of a `POST /tag` request, whether it named one `text`, and the tagging options.
fn parse_request(
    state: &AppState,
    tagger: &Tagger,
    request: TagRequest,
) -> Result<(Vec<String>, bool, TagOptions), ServeError> {
    let bad = |message: String| ServeError::new(StatusCode::BAD_REQUEST, message);
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
    let options = TagOptions {
        marginals: request.probs,
        nbest: request.nbest,
        thresholds: !request.all_entities,
        ..tagger.options()
    };
    let options = tagger.checked(options).map_err(|e| bad(e.to_string()))?;
    Ok((texts, single, options))
}
