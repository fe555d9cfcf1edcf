//! spaCy's spans as JSON lines: `{"text": ..., "spans": [{"start", "end", "label"}]}`, the shape
//! of a `Doc`'s entities or span group with character offsets, in code points, read as they
//! are. Prodigy writes its lines in this shape too, with an answer.

use nertrain_data::DataError;
use serde::Deserialize;
use serde_json::Value;

use crate::CharSpan;

/// The key the spans are under.
pub(crate) const KEY: &str = "spans";

/// The spans under [`KEY`].
pub(crate) fn spans(
    value: Value,
    at: &dyn Fn(String) -> DataError,
) -> Result<Vec<CharSpan>, DataError> {
    Vec::<CharSpan>::deserialize(value).map_err(|e| {
        at(format!(
            "`{KEY}`: expected spaCy's spans, [{{\"start\", \"end\", \"label\"}}, ...] in code \
             points: {e}"
        ))
    })
}
