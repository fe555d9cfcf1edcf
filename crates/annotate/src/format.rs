//! Which tool a file is, decided in one place: by its name first (`.jsonl` lines, a `.json`
//! array, brat's `.ann` or a directory of them), then by the shape of each record, whose spans
//! the tool's own module reads.
//!
//! A JSON line (or an element of a JSON array that is not a Label Studio task) is one flat
//! object with a `text`; its spans are under the key its tool uses, looked for in this order:
//! `spans` (spaCy, Prodigy), `entities` (doccano), `label` or `labels` (doccano's triples, or a
//! Label Studio control's regions), then any other key holding Label Studio regions (JSON-MIN,
//! every control read). A line with none of these is an error naming it; an unlabelled text has
//! an empty list. Besides its spans, any line may say which document it is of (`doc`) and which
//! of its regions were annotated (`known`, or `partial`: only the spans given). Other keys are
//! ignored.

use std::collections::HashMap;
use std::path::Path;

use nertrain_data::DataError;
use serde::de::{Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::exported::{DocumentKey, Exported};
use crate::label_studio::{self, MinRegions, MinRow};
use crate::tally::Tally;
use crate::{CharSpan, brat, doccano, prodigy, spacy_spans};

/// The kinds of file annotated text is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// JSON lines of texts with spans (spaCy, Prodigy, doccano, Label Studio JSON-MIN).
    Lines,
    /// A JSON array: Label Studio's export of tasks (or of JSON-MIN objects, or any flat
    /// objects JSON lines may hold).
    Array,
    /// brat standoff: `.txt` and `.ann` pairs.
    Brat,
}

impl Format {
    /// The format of `path` when it holds annotated text: `.jsonl`, `.json`, `.ann`, or a
    /// directory (of brat files); `None` for anything else (CoNLL columns).
    pub fn of(path: &Path) -> Option<Self> {
        if path.is_dir() {
            return Some(Self::Brat);
        }
        match path.extension().and_then(|e| e.to_str()) {
            Some("jsonl") => Some(Self::Lines),
            Some("json") => Some(Self::Array),
            Some("ann") => Some(Self::Brat),
            _ => None,
        }
    }

    /// Reads `path` in this format: its texts as exported, in file order.
    pub(crate) fn read(self, path: &Path, tally: &mut Tally) -> Result<Vec<Exported>, DataError> {
        if self == Self::Brat {
            return brat::read(path, tally);
        }
        let text = nertrain_data::read_text(path)?;
        self.parse(&text, path, tally)
    }

    /// Parses `text` in this format, `path` naming where it is from in errors; brat's texts and
    /// annotations are files of a directory, read by [`read`](Self::read) alone.
    pub(crate) fn parse(
        self,
        text: &str,
        path: &Path,
        tally: &mut Tally,
    ) -> Result<Vec<Exported>, DataError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        match self {
            Self::Array => parse_array(text, path, tally),
            Self::Lines => parse_lines(text, path, tally),
            Self::Brat => Err(DataError::file(
                path,
                "brat annotations are read from their directory, not parsed from one text",
            )),
        }
    }
}

/// Key names under which a line's spans may be, in the order they are looked for.
const SPAN_KEYS: &str = "`spans` (Prodigy, spaCy), `label`, `labels` or `entities` (doccano), or \
                         a Label Studio region list (`[{\"start\", \"end\", \"labels\"}]`)";

/// A JSON object each of whose keys is given once: read into a map, a second `label` would
/// replace the first without a word.
struct UniqueKeys(serde_json::Map<String, Value>);

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = UniqueKeys;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UniqueKeys, A::Error> {
                let mut object = serde_json::Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value: Value = map.next_value()?;
                    if object.contains_key(&key) {
                        return Err(A::Error::custom(format!(
                            "the key `{key}` is given twice; which one is meant is not known"
                        )));
                    }
                    object.insert(key, value);
                }
                Ok(UniqueKeys(object))
            }
        }
        deserializer.deserialize_map(Keys)
    }
}

/// One flat object: the keys every tool's line may have, and the rest, where its spans are.
#[derive(Deserialize)]
struct FlatLine {
    text: Option<String>,
    #[serde(default)]
    doc: Option<DocumentKey>,
    /// Prodigy's verdict on the line.
    #[serde(default)]
    answer: Option<String>,
    /// Only the spans given are known; the rest of the text is unannotated.
    #[serde(default)]
    partial: bool,
    /// The regions annotated in full (code points, end exclusive); the rest is unannotated.
    #[serde(default)]
    known: Option<Vec<(usize, usize)>>,
    /// The spans under their tool's key, and JSON-MIN's `id`, `annotation_id` and
    /// `updated_at`: looked at by shape and name.
    #[serde(flatten)]
    other: HashMap<String, Value>,
}

/// What one flat object turned out to be.
enum FlatRead {
    /// A text with its spans; for a JSON-MIN row of a known task, the task and how late.
    Text(Exported, Option<(i64, label_studio::Latest)>),
    /// Left out (not gold, or not annotated), and counted.
    LeftOut,
}

impl FlatLine {
    /// Reads one object: JSON text whose keys are each given once.
    fn parse(json: &str) -> Result<Self, serde_json::Error> {
        let UniqueKeys(object) = serde_json::from_str(json)?;
        Self::deserialize(Value::Object(object))
    }

    /// The text with its spans and document, read at `line` of `path`, or what left it out.
    fn into_exported(
        mut self,
        path: &Path,
        line: usize,
        tally: &mut Tally,
        at: &dyn Fn(String) -> DataError,
    ) -> Result<FlatRead, DataError> {
        if !prodigy::is_gold(self.answer.as_deref(), tally).map_err(at)? {
            return Ok(FlatRead::LeftOut);
        }
        let doc = self.doc.take();
        let mut known = match (self.partial, self.known.take()) {
            (_, Some(regions)) => Some(regions),
            (true, None) => Some(Vec::new()),
            (false, None) => None,
        };
        let (is_min, min_row) =
            match label_studio::min_row(&mut self.other, &mut known, line, tally, at)? {
                MinRow::No => (false, None),
                MinRow::Unannotated => return Ok(FlatRead::LeftOut),
                MinRow::Annotation(row) => (true, row),
            };
        let (text, spans) = self.into_text(is_min, tally, at)?;
        let exported = Exported {
            text,
            spans,
            line,
            source: path.to_path_buf(),
            doc,
            known,
        };
        Ok(FlatRead::Text(exported, min_row))
    }

    /// The text and its spans in code points, read by the tool whose key holds them, or an
    /// error saying what was expected. A JSON-MIN row (`is_min`) without regions has no
    /// entities.
    fn into_text(
        mut self,
        is_min: bool,
        tally: &mut Tally,
        at: &dyn Fn(String) -> DataError,
    ) -> Result<(String, Vec<CharSpan>), DataError> {
        let text = self
            .text
            .ok_or_else(|| at("no `text`; expected {\"text\": ..., and its spans}".into()))?;
        let mut present = |key: &str| self.other.remove(key).filter(|v| !v.is_null());
        if let Some(spans) = present(spacy_spans::KEY) {
            return Ok((text, spacy_spans::spans(spans, at)?));
        }
        if let Some(entities) = present(doccano::ENTITIES_KEY) {
            let spans = doccano::entity_spans(&text, entities, at)?;
            return Ok((text, spans));
        }
        // doccano's keys first (also Label Studio's usual control name), then any other key
        // holding regions, in name order so that the result does not depend on order.
        let mut keys: Vec<&String> = self.other.keys().collect();
        keys.sort_by_key(|k| (!doccano::TRIPLE_KEYS.contains(&k.as_str()), k.as_str()));
        let mut regions: Option<MinRegions> = None;
        for key in keys {
            let value = &self.other[key];
            if label_studio::is_region_list(value) {
                let read = MinRegions::read(key, value, at)?;
                match regions.as_mut() {
                    Some(regions) => regions.extend(read),
                    None => regions = Some(read),
                }
            } else if doccano::TRIPLE_KEYS.contains(&key.as_str()) {
                let spans = doccano::triple_spans(&text, key, value, at)?;
                return Ok((text, spans));
            } else if let Some((kind, count)) = label_studio::other_kind(value) {
                // Under another name only a list of regions counts: an empty one (doccano's
                // `"Comments": []`) says nothing about entities.
                *tally.other_kinds.entry(kind).or_default() += count;
            }
        }
        match regions {
            Some(regions) => {
                let spans = regions.spans(&text, tally, at)?;
                Ok((text, spans))
            }
            None if is_min => Ok((text, Vec::new())),
            None => Err(at(format!(
                "no spans: expected {SPAN_KEYS}; a text without entities has an empty list \
                 (`\"spans\": []`)"
            ))),
        }
    }
}

/// Reads flat objects, one a line (blank lines skipped).
pub(crate) fn parse_lines(
    text: &str,
    path: &Path,
    tally: &mut Tally,
) -> Result<Vec<Exported>, DataError> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let at = |message: String| DataError::at(path, number, message);
        let record = FlatLine::parse(line)
            .map_err(|e| at(format!("expected a JSON object with `text` and spans: {e}")))?;
        if let FlatRead::Text(exported, row) = record.into_exported(path, number, tally, &at)? {
            rows.push((exported, row));
        }
    }
    Ok(label_studio::one_per_task(rows, tally))
}

/// Reads a JSON array: Label Studio's export of tasks, or flat objects (JSON-MIN). An element's
/// line is the line its object starts on.
pub(crate) fn parse_array(
    text: &str,
    path: &Path,
    tally: &mut Tally,
) -> Result<Vec<Exported>, DataError> {
    let elements: Vec<&RawValue> = serde_json::from_str(text).map_err(|e| {
        DataError::file(
            path,
            format!("expected a JSON array of Label Studio tasks: {e}"),
        )
    })?;
    let mut rows = Vec::new();
    // Elements come in order: each one's line is counted on from the last.
    let (mut counted_to, mut line) = (0, 1);
    for (index, element) in elements.into_iter().enumerate() {
        let offset = element.get().as_ptr() as usize - text.as_ptr() as usize;
        line += text.as_bytes()[counted_to..offset]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        counted_to = offset;
        if label_studio::is_task(element) {
            if let Some(exported) = label_studio::read_task(element, path, line, index, tally)? {
                rows.push((exported, None));
            }
            continue;
        }
        let at = |message: String| {
            DataError::at(path, line, format!("task number {}: {message}", index + 1))
        };
        let record = FlatLine::parse(element.get())
            .map_err(|e| at(format!("expected a task or a JSON-MIN object: {e}")))?;
        if let FlatRead::Text(exported, row) = record.into_exported(path, line, tally, &at)? {
            rows.push((exported, row));
        }
    }
    Ok(label_studio::one_per_task(rows, tally))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::parse_array;
    use crate::tally::Tally;
    use crate::testing::{example, spans_of};
    use crate::{parse_annotated, read_annotated};

    #[test]
    fn bad_lines_are_errors_naming_the_line() {
        let cases = [
            (r#"{"text": 5}"#, "invalid type"),
            (r#"{"spans": []}"#, "no `text`"),
            (r#"{"text": "ab"}"#, "no spans: expected `spans`"),
            (r#"{"text": "ab", "tags": ["O"]}"#, "no spans"),
            (r#"{"text": "ab", "Comments": []}"#, "no spans"),
            (
                r#"{"text": "ab", "label": [{"start": 0, "end": 1, "labels": ["A", "B"]}]}"#,
                "2 labels",
            ),
            (
                r#"{"text": "ab", "spans": [{"start": 1, "end": 3, "label": "X"}]}"#,
                "not within",
            ),
            (
                r#"{"text": "ab", "spans": [{"start": 1, "end": 1, "label": "X"}]}"#,
                "not within",
            ),
            (
                r#"{"text": "ab", "spans": [{"start": 0, "end": 1, "label": "A B"}]}"#,
                "label",
            ),
            (
                r#"{"text": "abc", "spans": [{"start": 0, "end": 2, "label": "X"}, {"start": 1, "end": 3, "label": "Y"}]}"#,
                "overlap",
            ),
            ("not json", "expected"),
        ];
        for (line, expected) in cases {
            let text = format!("{{\"text\": \"fine\", \"spans\": []}}\n{line}\n");
            let error = parse_annotated(&text, Path::new("x.jsonl")).unwrap_err();
            assert_eq!(error.line, Some(2), "{line}");
            assert!(
                error.message.contains(expected),
                "{line}: {}",
                error.message
            );
        }
    }

    #[test]
    fn the_tools_exports_are_read_as_they_write_them() {
        let expected = vec![
            vec![(0, 11, "PER"), (20, 29, "LOC")],
            vec![(0, 7, "ORG"), (17, 25, "LOC")],
            vec![],
        ];
        for name in [
            "doccano.jsonl",
            "doccano-entities.jsonl",
            "label-studio-min.json",
            "prodigy.jsonl",
        ] {
            let corpus = read_annotated(&example(name)).unwrap();
            assert_eq!(spans_of(&corpus), expected, "{name}");
            assert!(corpus.warnings.is_empty(), "{name}");
        }
        // The full export: the latest annotation not cancelled, predictions ignored, a task
        // without annotations left out and warned of.
        let corpus = read_annotated(&example("label-studio.json")).unwrap();
        assert_eq!(spans_of(&corpus), expected, "label-studio.json");
        assert_eq!(corpus.texts[1].line, 94, "a task's line is where it starts");
        assert!(
            corpus.warnings[0].contains("1 task without an annotation"),
            "{:?}",
            corpus.warnings
        );
        // brat: a text a file, each its own document; the discontinuous span left out.
        let corpus = read_annotated(&example("brat")).unwrap();
        assert_eq!(
            spans_of(&corpus),
            [
                vec![(0, 11, "PER"), (20, 29, "LOC")],
                vec![(0, 7, "ORG"), (17, 25, "LOC")]
            ]
        );
        assert_eq!(corpus.texts[1].document, 1);
        assert!(
            corpus.warnings[0].contains("discontinuous"),
            "{:?}",
            corpus.warnings
        );
        assert_eq!(
            spans_of(&read_annotated(&example("brat/1.ann")).unwrap()),
            [vec![(0, 11, "PER"), (20, 29, "LOC")]]
        );
    }

    #[test]
    fn shapes_the_tools_do_not_write_are_errors_naming_the_place() {
        let dir = std::env::temp_dir().join(format!("nertrain-formats-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cases = [
            (
                "tasks.json",
                r#"{"text": "not an array"}"#,
                "expected a JSON array",
            ),
            (
                "tasks.json",
                "[\n{\"data\": {\"a\": \"x\", \"b\": \"y\"}, \"annotations\": [{\"result\": []}]}]",
                "tasks.json:2: task number 1: its data has no `text`",
            ),
            ("min.json", "[{\"text\": \"ab\", \"id\": 3}]", "no spans"),
            ("a.ann", "T1\tPER 0 3\tAnn\n", "cannot read"),
        ];
        for (name, content, expected) in cases {
            let path = dir.join(name);
            std::fs::write(&path, content).unwrap();
            let error = read_annotated(&path).unwrap_err().to_string();
            assert!(error.contains(expected), "{name}: {error}");
        }
        std::fs::write(dir.join("b.txt"), "Anna Kovacs").unwrap();
        for (ann, expected) in [
            (
                "T1\tPER 0 4\tAnne\n",
                "b.ann:1: offsets 0..4 cover \"Anna\"",
            ),
            ("X1\tfoo\n", "b.ann:1: expected a brat annotation"),
            ("T1\tPER 0\tAnna\n", "b.ann:1: expected `TYPE START END`"),
        ] {
            std::fs::write(dir.join("b.ann"), ann).unwrap();
            let error = read_annotated(&dir.join("b.ann")).unwrap_err().to_string();
            assert!(error.contains(expected), "{ann:?}: {error}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn messages_name_what_is_wrong() {
        let error = |line: &str| {
            parse_annotated(line, Path::new("x.jsonl"))
                .unwrap_err()
                .to_string()
        };
        let negative = error(r#"{"text": "Anna", "label": [[-1, 4, "PER"]]}"#);
        assert!(
            negative.contains("`label`: expected doccano's") && negative.contains("-1"),
            "{negative}"
        );
        let twice = error(r#"{"text": "Anna", "label": [[0, 4, "PER"]], "label": []}"#);
        assert!(twice.contains("the key `label` is given twice"), "{twice}");
    }

    #[test]
    fn label_studio_lines_are_counted_in_linear_time() {
        let tasks = |n: usize| {
            let task = r#"{"id": 1, "data": {"text": "Anna flew"}, "annotations": [{"id": 1, "result": []}]}"#;
            format!("[\n{}\n]", vec![task; n].join(",\n"))
        };
        let time = |text: &str| {
            (0..3)
                .map(|_| {
                    let started = std::time::Instant::now();
                    let mut tally = Tally::default();
                    parse_array(text, Path::new("t.json"), &mut tally).unwrap();
                    started.elapsed().as_secs_f64()
                })
                .fold(f64::INFINITY, f64::min)
        };
        let (small, large) = (tasks(4_000), tasks(32_000));
        let ratio = time(&large) / time(&small);
        assert!(
            ratio < 24.0,
            "8 times the tasks took {ratio:.1} times as long"
        );
        let mut tally = Tally::default();
        let read = parse_array(&large, Path::new("t.json"), &mut tally).unwrap();
        assert_eq!(read.last().unwrap().line, 32_001);
    }
}
