//! doccano: JSON lines with `label` or `labels` (`[[start, end, "PER"]]`), or `entities`
//! (`{"start_offset", "end_offset", "label"}`, projects with relations). doccano counts offsets
//! in UTF-16 units (JavaScript string indices): they are read into code points, and written
//! back in its units.

use nertrain_data::DataError;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::units::Utf16Offsets;
use crate::{CharSpan, PreAnnotated};

/// The keys doccano puts its triples under.
pub(crate) const TRIPLE_KEYS: [&str; 2] = ["label", "labels"];

/// The key of doccano's entity objects.
pub(crate) const ENTITIES_KEY: &str = "entities";

/// doccano's entity object (projects with relations).
#[derive(Deserialize)]
struct Entity {
    start_offset: usize,
    end_offset: usize,
    label: String,
}

/// The spans of `entities` (doccano's entity objects) over `text`, in code points.
pub(crate) fn entity_spans(
    text: &str,
    entities: Value,
    at: &dyn Fn(String) -> DataError,
) -> Result<Vec<CharSpan>, DataError> {
    let entities = Vec::<Entity>::deserialize(entities).map_err(|e| {
        at(format!(
            "`{ENTITIES_KEY}`: expected doccano's [{{\"start_offset\", \"end_offset\", \
             \"label\"}}, ...]: {e}"
        ))
    })?;
    let spans = entities
        .into_iter()
        .map(|e| CharSpan {
            start: e.start_offset,
            end: e.end_offset,
            label: e.label,
        })
        .collect();
    from_utf16(text, spans, at)
}

/// The spans of doccano's triples under `key` over `text`, in code points; an error names the
/// key when the value is not triples.
pub(crate) fn triple_spans(
    text: &str,
    key: &str,
    triples: &Value,
    at: &dyn Fn(String) -> DataError,
) -> Result<Vec<CharSpan>, DataError> {
    let triples = Vec::<(usize, usize, String)>::deserialize(triples).map_err(|e| {
        at(format!(
            "`{key}`: expected doccano's [[start, end, \"TYPE\"], ...] or Label Studio regions \
             [{{\"start\", \"end\", \"labels\"}}, ...]: {e}"
        ))
    })?;
    let spans = triples
        .into_iter()
        .map(|(start, end, label)| CharSpan { start, end, label })
        .collect();
    from_utf16(text, spans, at)
}

/// The spans of doccano offsets (UTF-16 units) in code points of `text`.
fn from_utf16(
    text: &str,
    spans: Vec<CharSpan>,
    at: &dyn Fn(String) -> DataError,
) -> Result<Vec<CharSpan>, DataError> {
    let offsets = Utf16Offsets::new(text);
    if offsets.is_identity() {
        return Ok(spans);
    }
    spans
        .into_iter()
        .map(
            |span| match (offsets.to_chars(span.start), offsets.to_chars(span.end)) {
                (Some(start), Some(end)) => Ok(CharSpan { start, end, ..span }),
                _ => Err(at(format!(
                    "span {}..{} ({}) does not fall between characters of the text: doccano's \
                 offsets count UTF-16 units, in which a character beyond U+FFFF (an emoji) \
                 counts two",
                    span.start, span.end, span.label
                ))),
            },
        )
        .collect()
}

/// doccano's JSONL import line.
#[derive(Serialize)]
struct LineOut<'a> {
    text: &'a str,
    label: Vec<(usize, usize, &'a str)>,
    line: usize,
    score: f64,
    /// The regions to decide, in code points (as `known` is read back).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    known: &'a [(usize, usize)],
}

/// Lines for doccano's JSONL import: the text, the model's entities as `label` (offsets in
/// UTF-16 units, as doccano counts them), and the pool's line and the task's score as metadata.
pub fn lines(tasks: &[PreAnnotated]) -> String {
    let mut out = String::new();
    for task in tasks {
        let units = Utf16Offsets::new(&task.text);
        let line = LineOut {
            text: &task.text,
            label: task
                .spans
                .iter()
                .map(|(s, _)| {
                    (
                        units.to_units(s.start),
                        units.to_units(s.end),
                        s.label.as_str(),
                    )
                })
                .collect(),
            line: task.line,
            score: task.score,
            known: if task.partial { &task.regions } else { &[] },
        };
        out.push_str(&serde_json::to_string(&line).expect("a line serialises"));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::parse_annotated;
    use crate::testing::spans_of;

    #[test]
    fn doccano_offsets_are_utf16_units() {
        // "😀 " is three UTF-16 units and two code points; "中" one of each.
        let text = "😀 Anna in 中国 met 👩‍👩‍👧 Bob";
        let units = |s: &str| -> usize { text[..text.find(s).unwrap()].encode_utf16().count() };
        let chars = |s: &str| -> usize { text[..text.find(s).unwrap()].chars().count() };
        let line = format!(
            r#"{{"text": "{text}", "label": [[{}, {}, "PER"], [{}, {}, "LOC"], [{}, {}, "PER"]]}}"#,
            units("Anna"),
            units("Anna") + 4,
            units("中国"),
            units("中国") + 2,
            units("Bob"),
            units("Bob") + 3
        );
        let expected = vec![vec![
            (chars("Anna"), chars("Anna") + 4, "PER"),
            (chars("中国"), chars("中国") + 2, "LOC"),
            (chars("Bob"), chars("Bob") + 3, "PER"),
        ]];
        let corpus = parse_annotated(&line, Path::new("d.jsonl")).unwrap();
        assert_eq!(spans_of(&corpus), expected);
        let entities = format!(
            r#"{{"text": "{text}", "entities": [{{"id": 1, "start_offset": {}, "end_offset": {}, "label": "PER"}}]}}"#,
            units("Bob"),
            units("Bob") + 3
        );
        let corpus = parse_annotated(&entities, Path::new("d.jsonl")).unwrap();
        assert_eq!(
            spans_of(&corpus),
            [vec![(chars("Bob"), chars("Bob") + 3, "PER")]]
        );
        // Inside an emoji's surrogate pair: an error, not a guess.
        let error = parse_annotated(
            &format!(r#"{{"text": "{text}", "label": [[1, 5, "PER"]]}}"#),
            Path::new("d.jsonl"),
        )
        .unwrap_err();
        assert!(error.to_string().contains("UTF-16"), "{error}");
        // And written as doccano reads them.
        let written = lines(&[PreAnnotated {
            text: text.to_string(),
            spans: vec![(
                CharSpan {
                    start: chars("Bob"),
                    end: chars("Bob") + 3,
                    label: "PER".into(),
                },
                0.9,
            )],
            score: 1.0,
            line: 1,
            regions: Vec::new(),
            partial: false,
        }]);
        assert!(
            written.contains(&format!(
                "[[{},{},\"PER\"]]",
                units("Bob"),
                units("Bob") + 3
            )),
            "{written}"
        );
        let back = parse_annotated(&written, Path::new("d.jsonl")).unwrap();
        assert_eq!(
            spans_of(&back),
            [vec![(chars("Bob"), chars("Bob") + 3, "PER")]]
        );
    }
}
