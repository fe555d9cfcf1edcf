//! What annotation tools export, read as texts with character spans; detected from the content,
//! and read in the units each tool counts its offsets in.
//!
//! - **Flat lines** (`.jsonl`, one object a line; also the objects of a JSON array):
//!   - Prodigy and spaCy's `spans` (`{"start", "end", "label"}`), in code points. A Prodigy
//!     `answer` other than `accept` (`reject`, `ignore`) is not gold: the line is left out, and
//!     counted in a warning.
//!   - doccano's `label` or `labels` (`[[start, end, "PER"]]`) or `entities`
//!     (`{"start_offset", "end_offset", "label"}`), in UTF-16 units (JavaScript string indices),
//!     converted to code points.
//!   - Label Studio's JSON-MIN regions (`{"start", "end", "text", "labels": ["PER"]}`) under each
//!     control's name, every control read. A row with an `annotation_id` but no region is an
//!     annotation without entities; one whose `annotation_id` is null is a task nobody annotated,
//!     left out. Rows of one task (`id`) are its annotators' annotations: the latest is read.
//!
//!   A line with none of these is an error naming it; an unlabelled text has an empty list.
//! - **Label Studio's JSON export** (`.json`, an array of tasks): the text is `data.text` (or the
//!   data's one string), the spans the `labels` results on it of the task's latest annotation
//!   (by `updated_at`) that was neither cancelled nor skipped. Predictions are not gold and are
//!   ignored; a task without an annotation is left out, and counted in a warning, as are results
//!   on another `<Text>` of the task and `hypertextlabels` or `paragraphlabels` results.
//!
//!   A Label Studio region's `text` is checked against the text at its offsets: Label Studio
//!   counts code points, older versions UTF-16 units, and a region whose text is found at its
//!   offsets read as UTF-16 units is realigned (counted in a warning); one found at neither is an
//!   error.
//! - **brat standoff** (a directory of `.txt` and `.ann` pairs, or one `.ann`): each `.txt` is a
//!   text and a document; its text-bound annotations (`T1<TAB>PER 0 11<TAB>Anna Kovacs`) are the
//!   spans, in code points, checked against the text they name. Discontinuous ones are left out
//!   with a warning; relations, events, attributes, normalisations and notes are ignored.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::de::{Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::units::{Utf16Offsets, parse_time};
use super::{CharSpan, DocumentKey, Exported};
use crate::DataError;

/// The annotation formats read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnnotationFormat {
    /// JSON lines of texts with spans (Prodigy and spaCy, doccano, Label Studio JSON-MIN).
    Lines,
    /// Label Studio's JSON export: an array of tasks (or of JSON-MIN objects).
    LabelStudio,
    /// brat standoff: `.txt` and `.ann` pairs.
    Brat,
}

impl AnnotationFormat {
    /// The format of `path` when it holds annotated text: `.jsonl`, `.json`, `.ann`, or a
    /// directory (of brat files); `None` for anything else (CoNLL columns).
    pub fn of(path: &Path) -> Option<Self> {
        if path.is_dir() {
            return Some(Self::Brat);
        }
        match path.extension().and_then(|e| e.to_str()) {
            Some("jsonl") => Some(Self::Lines),
            Some("json") => Some(Self::LabelStudio),
            Some("ann") => Some(Self::Brat),
            _ => None,
        }
    }
}

/// What reading a file left out or changed, counted, for one warning each.
#[derive(Default)]
pub(super) struct Tally {
    /// Prodigy answers other than `accept`, by answer.
    answers: BTreeMap<String, usize>,
    /// Label Studio tasks without an annotation that counts.
    unannotated: Vec<String>,
    /// JSON-MIN rows of a task whose later annotation was read instead.
    superseded: usize,
    /// Label Studio results on another `<Text>` of their task, by its name.
    other_texts: BTreeMap<String, usize>,
    /// Label Studio results of a kind not read, by kind.
    other_kinds: BTreeMap<String, usize>,
    /// Label Studio regions whose offsets were UTF-16 units.
    realigned: usize,
    /// brat: discontinuous spans (`file:line`), `.txt` files without a `.ann`, subdirectories.
    discontinuous: Vec<String>,
    lone_texts: Vec<PathBuf>,
    subdirectories: Vec<PathBuf>,
}

impl Tally {
    /// How many texts were left out whole: when none is read, the reason.
    pub(super) fn texts_left_out(&self) -> usize {
        self.answers.values().sum::<usize>() + self.unannotated.len() + self.lone_texts.len()
    }

    /// One warning a kind of thing left out or changed, naming `path`.
    pub(super) fn into_warnings(self, path: &Path) -> Vec<String> {
        let file = path.display();
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let counts = |map: &BTreeMap<String, usize>| {
            map.iter()
                .map(|(name, n)| format!("{n} {name}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut warnings = Vec::new();
        if !self.answers.is_empty() {
            warnings.push(format!(
                "{file}: lines whose answer is not `accept` are not gold and were left out ({})",
                counts(&self.answers)
            ));
        }
        if let Some(first) = self.unannotated.first() {
            warnings.push(format!(
                "{file}: {} without an annotation that was not cancelled or skipped, left out \
                 (the first: {first})",
                plural(self.unannotated.len(), "task", "tasks")
            ));
        }
        if self.superseded > 0 {
            warnings.push(format!(
                "{file}: {} of a task that has a later annotation left out (one annotation per \
                 task: the latest by updated_at)",
                plural(self.superseded, "row", "rows")
            ));
        }
        if !self.other_texts.is_empty() {
            warnings.push(format!(
                "{file}: results on another <Text> of their task left out (to_name: {})",
                counts(&self.other_texts)
            ));
        }
        if !self.other_kinds.is_empty() {
            warnings.push(format!(
                "{file}: results of a kind not read left out ({}); only `labels` on a <Text> \
                 are entities here",
                counts(&self.other_kinds)
            ));
        }
        if self.realigned > 0 {
            warnings.push(format!(
                "{file}: {} counted in UTF-16 units (as older Label Studio versions do), read as \
                 such",
                plural(
                    self.realigned,
                    "region's offsets were",
                    "regions' offsets were"
                )
            ));
        }
        if let Some(first) = self.discontinuous.first() {
            warnings.push(format!(
                "{first}: a discontinuous span, left out: entities here are contiguous ({} in all)",
                self.discontinuous.len()
            ));
        }
        if let Some(first) = self.lone_texts.first() {
            warnings.push(format!(
                "{file}: {} without a .ann of the same name, left out (the first: {})",
                plural(self.lone_texts.len(), ".txt file", ".txt files"),
                first.display()
            ));
        }
        if let Some(first) = self.subdirectories.first() {
            warnings.push(format!(
                "{file}: {} not read (only the directory's own .ann files are; the first: {})",
                plural(self.subdirectories.len(), "subdirectory", "subdirectories"),
                first.display()
            ));
        }
        warnings
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

/// One flat object: the text, and its spans under whichever key the tool used.
#[derive(Deserialize)]
struct FlatLine {
    text: Option<String>,
    #[serde(default)]
    spans: Option<Vec<CharSpan>>,
    #[serde(default)]
    entities: Option<Vec<DoccanoEntity>>,
    #[serde(default)]
    doc: Option<DocumentKey>,
    /// Prodigy's verdict on the line: only `accept` is gold.
    #[serde(default)]
    answer: Option<String>,
    /// Only the spans given are known; the rest of the text is unannotated.
    #[serde(default)]
    partial: bool,
    /// The regions annotated in full (code points, end exclusive); the rest is unannotated.
    #[serde(default)]
    known: Option<Vec<(usize, usize)>>,
    /// `label`, `labels`, a Label Studio control's name, and JSON-MIN's `id`, `annotation_id`
    /// and `updated_at`: looked at by shape and name.
    #[serde(flatten)]
    other: HashMap<String, Value>,
}

/// doccano's entity object (projects with relations).
#[derive(Deserialize)]
struct DoccanoEntity {
    start_offset: usize,
    end_offset: usize,
    label: String,
}

/// A Label Studio region (JSON-MIN, and a result's `value`).
#[derive(Deserialize)]
struct Region {
    start: usize,
    end: usize,
    labels: Vec<String>,
    /// The characters it covers, as Label Studio saw them.
    #[serde(default)]
    text: Option<String>,
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

/// The spans of Label Studio regions over `text`, each region's `text` checked against the
/// characters at its offsets (code points, or UTF-16 units where only they fit: realigned and
/// counted); an error names a region with other than one label, or whose text is at neither.
fn region_spans(
    text: &str,
    regions: Vec<Region>,
    tally: &mut Tally,
    at: &dyn Fn(String) -> DataError,
) -> Result<Vec<CharSpan>, DataError> {
    let mut chars: Option<Vec<char>> = None;
    let mut utf16: Option<Utf16Offsets> = None;
    let mut spans = Vec::with_capacity(regions.len());
    for region in regions {
        let label = match <[String; 1]>::try_from(region.labels) {
            Ok([label]) => label,
            Err(labels) => {
                return Err(at(format!(
                    "region {}..{} has {} labels; expected one (entities here have one type)",
                    region.start,
                    region.end,
                    labels.len()
                )));
            }
        };
        let (mut start, mut end) = (region.start, region.end);
        if let Some(said) = &region.text {
            let chars = chars.get_or_insert_with(|| text.chars().collect());
            let covered = |start: usize, end: usize| {
                (start < end && end <= chars.len()).then(|| chars[start..end].iter().collect())
            };
            let found: Option<String> = covered(start, end);
            if found.as_ref() != Some(said) {
                let utf16 = utf16.get_or_insert_with(|| Utf16Offsets::new(text));
                let realigned = (utf16.to_chars(start), utf16.to_chars(end));
                match realigned {
                    (Some(s), Some(e)) if covered(s, e).as_ref() == Some(said) => {
                        (start, end) = (s, e);
                        tally.realigned += 1;
                    }
                    _ => {
                        return Err(at(format!(
                            "region {start}..{end} ({label}) says {said:?}, but the text there is \
                             {}: its offsets do not point at its text, counted in code points or \
                             in UTF-16 units",
                            found.map_or("beyond the text's end".into(), |f| format!("{f:?}"))
                        )));
                    }
                }
            }
        }
        spans.push(CharSpan { start, end, label });
    }
    Ok(spans)
}

/// A JSON-MIN row's place among its task's annotations: which task, and how late.
struct MinRow {
    task: i64,
    latest: Latest,
}

/// What orders a task's annotations, the latest last: `updated_at` (parsed), then the
/// annotation's id, then its place in the file.
type Latest = (Option<(i64, u32)>, Option<i64>);

/// What one flat object turned out to be.
enum FlatRead {
    /// A text with its spans; for a JSON-MIN row, its task and time.
    Text(Exported, Option<MinRow>),
    /// Left out (not gold, or not annotated), and counted.
    LeftOut,
}

/// An annotation's `updated_at`, parsed, or an error naming it.
fn updated_at(
    value: Option<&str>,
    at: &dyn Fn(String) -> DataError,
) -> Result<Option<(i64, u32)>, DataError> {
    value
        .map(|time| {
            parse_time(time).ok_or_else(|| {
                at(format!(
                    "updated_at {time:?} is not a time (expected RFC 3339, as \
                     2024-05-01T10:00:00.5Z)"
                ))
            })
        })
        .transpose()
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
        match self.answer.as_deref() {
            None | Some("accept") => {}
            Some(answer @ ("reject" | "ignore")) => {
                *tally.answers.entry(answer.to_string()).or_default() += 1;
                return Ok(FlatRead::LeftOut);
            }
            Some(other) => {
                return Err(at(format!(
                    "answer {other:?}: expected Prodigy's accept, reject or ignore"
                )));
            }
        }
        let doc = self.doc.take();
        let mut known = match (self.partial, self.known.take()) {
            (_, Some(regions)) => Some(regions),
            (true, None) => Some(Vec::new()),
            (false, None) => None,
        };
        // JSON-MIN: the regions of the control that marks what was to be decided.
        if let Some(checked) = self.other.remove(CHECK) {
            let checked = Vec::<Region>::deserialize(checked).map_err(|e| {
                at(format!(
                    "`{CHECK}`: expected the Label Studio regions decided: {e}"
                ))
            })?;
            if let Some(known) = known.as_mut() {
                known.extend(checked.iter().map(|r| (r.start, r.end)));
            }
        }
        // JSON-MIN: one row an annotation, `annotation_id` null for a task nobody annotated.
        let min_row = match self.other.get("annotation_id") {
            None => None,
            Some(Value::Null) => {
                let id = self.other.get("id").and_then(Value::as_i64);
                tally.unannotated.push(match id {
                    Some(id) => format!("task {id}, line {line}"),
                    None => format!("line {line}"),
                });
                return Ok(FlatRead::LeftOut);
            }
            Some(annotation) => {
                let time = updated_at(self.other.get("updated_at").and_then(Value::as_str), at)?;
                let latest = (time, annotation.as_i64());
                self.other
                    .get("id")
                    .and_then(Value::as_i64)
                    .map(|task| MinRow { task, latest })
            }
        };
        let is_min = self.other.contains_key("annotation_id");
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

    /// The text and its spans in code points, or an error saying what was expected. A JSON-MIN
    /// row (`is_min`) without regions has no entities.
    fn into_text(
        self,
        is_min: bool,
        tally: &mut Tally,
        at: &dyn Fn(String) -> DataError,
    ) -> Result<(String, Vec<CharSpan>), DataError> {
        let text = self
            .text
            .ok_or_else(|| at("no `text`; expected {\"text\": ..., and its spans}".into()))?;
        if let Some(spans) = self.spans {
            return Ok((text, spans));
        }
        if let Some(entities) = self.entities {
            let spans = entities
                .into_iter()
                .map(|e| CharSpan {
                    start: e.start_offset,
                    end: e.end_offset,
                    label: e.label,
                })
                .collect();
            let spans = from_utf16(&text, spans, at)?;
            return Ok((text, spans));
        }
        // `label` and `labels` first (doccano, and Label Studio's usual control name), then any
        // other key holding regions, in name order so that the result does not depend on order.
        let mut keys: Vec<&String> = self.other.keys().collect();
        keys.sort_by_key(|k| (!matches!(k.as_str(), "label" | "labels"), k.as_str()));
        let mut regions: Option<Vec<Region>> = None;
        for key in keys {
            let value = &self.other[key];
            let named = matches!(key.as_str(), "label" | "labels");
            let first = value.as_array().and_then(|a| a.first());
            let regions_here = first
                .and_then(Value::as_object)
                .filter(|region| region.contains_key("labels"));
            if named && regions_here.is_none() {
                // doccano's triples, or nothing a tool writes under this name.
                let triples = Vec::<(usize, usize, String)>::deserialize(value).map_err(|e| {
                    at(format!(
                        "`{key}`: expected doccano's [[start, end, \"TYPE\"], ...] or Label \
                         Studio regions [{{\"start\", \"end\", \"labels\"}}, ...]: {e}"
                    ))
                })?;
                let spans = triples
                    .into_iter()
                    .map(|(start, end, label)| CharSpan { start, end, label })
                    .collect();
                let spans = from_utf16(&text, spans, at)?;
                return Ok((text, spans));
            }
            // Under another name only a list of regions counts: an empty one (doccano's
            // `"Comments": []`) says nothing about entities.
            if regions_here.is_none() {
                let other_kind = first
                    .and_then(Value::as_object)
                    .and_then(|region| region.keys().find(|k| k.ends_with("labels")));
                if let Some(kind) = other_kind {
                    let count = value.as_array().map_or(0, Vec::len);
                    *tally.other_kinds.entry(kind.clone()).or_default() += count;
                }
                continue;
            }
            let read = Vec::<Region>::deserialize(value)
                .map_err(|e| at(format!("`{key}`: Label Studio regions: {e}")))?;
            regions.get_or_insert_with(Vec::new).extend(read);
        }
        match regions {
            Some(regions) => {
                let spans = region_spans(&text, regions, tally, at)?;
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

/// The texts read, one row a task where JSON-MIN gives several (its annotators'): the latest,
/// as in the full export; the rest counted.
fn one_per_task(rows: Vec<(Exported, Option<MinRow>)>, tally: &mut Tally) -> Vec<Exported> {
    let mut latest: HashMap<i64, (Latest, usize)> = HashMap::new();
    for (index, (_, row)) in rows.iter().enumerate() {
        if let Some(row) = row {
            let entry = latest.entry(row.task).or_insert((row.latest, index));
            if (row.latest, index) > *entry {
                *entry = (row.latest, index);
            }
        }
    }
    let mut texts = Vec::with_capacity(rows.len());
    for (index, (exported, row)) in rows.into_iter().enumerate() {
        match row {
            Some(row) if latest[&row.task].1 != index => tally.superseded += 1,
            _ => texts.push(exported),
        }
    }
    texts
}

/// Reads flat objects, one a line (blank lines skipped).
pub(super) fn parse_lines(
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
    Ok(one_per_task(rows, tally))
}

/// A Label Studio task (the full export), as much of it as the importer reads.
#[derive(Deserialize, Serialize)]
struct Task {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<i64>,
    data: HashMap<String, Value>,
    #[serde(default)]
    annotations: Vec<Annotation>,
}

/// One annotation of a task.
#[derive(Deserialize, Serialize)]
struct Annotation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<i64>,
    #[serde(default)]
    was_cancelled: bool,
    /// Older exports' word for cancelled.
    #[serde(default)]
    skipped: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    updated_at: Option<String>,
    #[serde(default)]
    result: Vec<AnnotationResult>,
}

/// One result of an annotation: a labelled region, or something else (a choice, a relation).
#[derive(Deserialize, Serialize)]
struct AnnotationResult {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    /// The control (`<Labels name=…>`) that made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from_name: Option<String>,
    /// The object (`<Text name=…>`) it is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    to_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value: Option<Box<RawValue>>,
}

/// Label Studio tasks (elements of its JSON export) narrowed to one `<Text>` of their project,
/// as a JSON export again: each task's data keeps only its text at `data_key`, and its
/// annotations only the results on `to_name`. The importer then reads the text the project
/// labels whatever else a task's data holds (metadata, other texts), which it cannot tell apart
/// without the project's labeling config.
pub fn narrow_label_studio_tasks(
    tasks: &[&RawValue],
    data_key: &str,
    to_name: &str,
) -> Result<Vec<u8>, String> {
    let mut narrowed = Vec::with_capacity(tasks.len());
    for (i, task) in tasks.iter().enumerate() {
        let mut task: Task = serde_json::from_str(task.get())
            .map_err(|e| format!("task number {}: not a Label Studio task: {e}", i + 1))?;
        let name = || match task.id {
            Some(id) => format!("task {id}"),
            None => format!("task number {}", i + 1),
        };
        let text = match task.data.remove(data_key) {
            Some(text @ Value::String(_)) => text,
            Some(_) => return Err(format!("{}: data.{data_key}: expected a string", name())),
            None => return Err(format!("{}: data.{data_key}: missing", name())),
        };
        let known = task.data.remove("known");
        task.data = HashMap::from([(data_key.to_string(), text)]);
        // The regions a task was to be decided in (`select --regions`) go with its text.
        if let Some(known) = known {
            task.data.insert("known".into(), known);
        }
        for annotation in &mut task.annotations {
            annotation
                .result
                .retain(|r| r.to_name.as_deref().is_none_or(|n| n == to_name));
        }
        narrowed.push(task);
    }
    serde_json::to_vec(&narrowed).map_err(|e| e.to_string())
}

/// Reads Label Studio's JSON export (an array of tasks), or a JSON array of flat objects
/// (JSON-MIN). A task's line is the line its object starts on.
pub(super) fn parse_label_studio(
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
        let task_name = |id: Option<i64>| match id {
            Some(id) => format!("task {id} (number {})", index + 1),
            None => format!("task number {}", index + 1),
        };
        let is_task = serde_json::from_str::<HashMap<String, &RawValue>>(element.get())
            .is_ok_and(|keys| keys.contains_key("data") || keys.contains_key("annotations"));
        if !is_task {
            let at = |message: String| {
                DataError::at(path, line, format!("{}: {message}", task_name(None)))
            };
            let record = FlatLine::parse(element.get())
                .map_err(|e| at(format!("expected a task or a JSON-MIN object: {e}")))?;
            if let FlatRead::Text(exported, row) = record.into_exported(path, line, tally, &at)? {
                rows.push((exported, row));
            }
            continue;
        }
        let task: Task = serde_json::from_str(element.get()).map_err(|e| {
            DataError::at(
                path,
                line,
                format!("{}: not a Label Studio task: {e}", task_name(None)),
            )
        })?;
        let at = |message: String| {
            DataError::at(path, line, format!("{}: {message}", task_name(task.id)))
        };
        let Some(annotation) = latest_annotation(task.annotations, &at)? else {
            tally.unannotated.push(task_name(task.id));
            continue;
        };
        let (key, text) = task_text(&task.data).map_err(&at)?;
        let mut known = match task.data.get("known") {
            None => None,
            Some(value) => Some(Vec::<(usize, usize)>::deserialize(value).map_err(|e| {
                at(format!(
                    "data.known: expected the regions decided, [[start, end], ...]: {e}"
                ))
            })?),
        };
        let mut regions = Vec::new();
        for result in annotation.result {
            match result.kind.as_deref() {
                Some("labels") => {}
                Some(kind @ ("hypertextlabels" | "paragraphlabels")) => {
                    *tally.other_kinds.entry(kind.to_string()).or_default() += 1;
                    continue;
                }
                _ => continue,
            }
            // A result on another of the task's texts: its object's name is that text's key.
            if let Some(name) = &result.to_name
                && name != key
                && task.data.contains_key(name)
            {
                *tally.other_texts.entry(name.clone()).or_default() += 1;
                continue;
            }
            if let Some(value) = result.value {
                let region: Region = serde_json::from_str(value.get())
                    .map_err(|e| at(format!("a `labels` result: {e}")))?;
                if result.from_name.as_deref() == Some(CHECK) {
                    if let Some(known) = known.as_mut() {
                        known.push((region.start, region.end));
                    }
                    continue;
                }
                regions.push(region);
            }
        }
        let spans = region_spans(&text, regions, tally, &at)?;
        let exported = Exported {
            text,
            spans,
            line,
            source: path.to_path_buf(),
            doc: None,
            known,
        };
        rows.push((exported, None));
    }
    Ok(one_per_task(rows, tally))
}

/// The annotation a task's gold spans come from: the latest (by `updated_at` as a time, then
/// `id`, then order) that was neither cancelled nor skipped.
fn latest_annotation(
    annotations: Vec<Annotation>,
    at: &dyn Fn(String) -> DataError,
) -> Result<Option<Annotation>, DataError> {
    let mut best: Option<(Latest, usize, Annotation)> = None;
    for (index, annotation) in annotations.into_iter().enumerate() {
        if annotation.was_cancelled || annotation.skipped {
            continue;
        }
        let latest = (
            updated_at(annotation.updated_at.as_deref(), at)?,
            annotation.id,
        );
        if best
            .as_ref()
            .is_none_or(|(l, i, _)| (latest, index) > (*l, *i))
        {
            best = Some((latest, index, annotation));
        }
    }
    Ok(best.map(|(_, _, annotation)| annotation))
}

/// A task's text and its key: `data.text`, or the data's one string.
fn task_text(data: &HashMap<String, Value>) -> Result<(&str, String), String> {
    if let Some((key, Value::String(text))) = data.get_key_value("text") {
        return Ok((key.as_str(), text.clone()));
    }
    let strings: Vec<(&String, &String)> = data
        .iter()
        .filter_map(|(k, v)| match v {
            Value::String(s) => Some((k, s)),
            _ => None,
        })
        .collect();
    match strings.as_slice() {
        [(key, text)] => Ok((key.as_str(), (*text).clone())),
        _ => {
            let mut keys: Vec<&String> = data.keys().collect();
            keys.sort();
            Err(format!(
                "its data has no `text`, nor one string to read instead (keys: {keys:?})"
            ))
        }
    }
}

/// Reads brat standoff: every `.ann` of a directory with its `.txt` (in name order), or one
/// `.ann` (or `.txt`) and its pair.
pub(super) fn read_brat(path: &Path, tally: &mut Tally) -> Result<Vec<Exported>, DataError> {
    let annotation_files: Vec<PathBuf> = if path.is_dir() {
        let entries = std::fs::read_dir(path)
            .map_err(|e| DataError::file(path, format!("cannot read the directory: {e}")))?;
        let entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        let with = |p: &PathBuf, extension: &str| p.extension().is_some_and(|e| e == extension);
        let sorted = |mut paths: Vec<PathBuf>| {
            paths.sort();
            paths
        };
        let files = sorted(entries.iter().filter(|p| with(p, "ann")).cloned().collect());
        if files.is_empty() {
            return Err(DataError::file(
                path,
                "no .ann files: expected brat standoff, a .txt and a .ann of the same name each",
            ));
        }
        tally.lone_texts = sorted(
            entries
                .iter()
                .filter(|p| with(p, "txt") && !p.with_extension("ann").exists())
                .cloned()
                .collect(),
        );
        tally.subdirectories = sorted(entries.iter().filter(|p| p.is_dir()).cloned().collect());
        files
    } else {
        vec![path.with_extension("ann")]
    };
    let mut exported = Vec::new();
    for ann in annotation_files {
        let txt = ann.with_extension("txt");
        let text = crate::conll::read_text(&txt)?;
        let spans = parse_brat(
            &crate::conll::read_text(&ann)?,
            &text,
            &ann,
            &mut tally.discontinuous,
        )?;
        exported.push(Exported {
            text,
            spans,
            line: 1,
            source: ann,
            doc: None,
            known: None,
        });
    }
    Ok(exported)
}

/// The text-bound annotations of a `.ann` file over `text`; discontinuous ones go to
/// `discontinuous` as `file:line`.
fn parse_brat(
    ann: &str,
    text: &str,
    path: &Path,
    discontinuous: &mut Vec<String>,
) -> Result<Vec<CharSpan>, DataError> {
    let chars: Vec<char> = text.chars().collect();
    let mut spans = Vec::new();
    for (i, line) in ann.lines().enumerate() {
        let number = i + 1;
        let at = |message: String| DataError::at(path, number, message);
        let line = line.strip_suffix('\r').unwrap_or(line);
        match line.chars().next() {
            None => continue,
            Some('T') => {}
            Some('R' | 'E' | 'A' | 'M' | 'N' | '#' | '*') => continue,
            Some(_) => {
                return Err(at(
                    "expected a brat annotation: T (text-bound), R, E, A, M, N, # or * lines"
                        .into(),
                ));
            }
        }
        let fields: Vec<&str> = line.splitn(3, '\t').collect();
        let [_, middle, covered] = fields.as_slice() else {
            return Err(at("expected `T1<TAB>TYPE START END<TAB>TEXT`".into()));
        };
        let (label, offsets) = middle
            .split_once(' ')
            .ok_or_else(|| at(format!("expected `TYPE START END`, found {middle:?}")))?;
        if offsets.contains(';') {
            discontinuous.push(format!("{}:{number}", path.display()));
            continue;
        }
        let parse = |s: &str| {
            s.parse::<usize>()
                .map_err(|_| at(format!("expected `TYPE START END`, found {middle:?}")))
        };
        let (start, end) = match offsets.split_once(' ') {
            Some((start, end)) => (parse(start)?, parse(end)?),
            None => return Err(at(format!("expected `TYPE START END`, found {middle:?}"))),
        };
        if start < end && end <= chars.len() {
            let found: String = chars[start..end].iter().collect();
            if found != *covered {
                return Err(at(format!(
                    "offsets {start}..{end} cover {found:?} in the .txt, but the annotation \
                     says {covered:?}: offsets must count characters (code points) of the text"
                )));
            }
        }
        spans.push(CharSpan {
            start,
            end,
            label: label.to_string(),
        });
    }
    Ok(spans)
}

/// A text with a model's entities, to be corrected by an annotator rather than labelled from
/// nothing: what `select` writes, in a shape the tools import.
#[derive(Debug, Clone, PartialEq)]
pub struct PreAnnotated {
    /// The text.
    pub text: String,
    /// The model's entities, each with its probability.
    pub spans: Vec<(CharSpan, f64)>,
    /// How much labelling it is worth (higher first), by the strategy that chose it.
    pub score: f64,
    /// Its line in the pool, from 1, so that answers can be matched to the pool.
    pub line: usize,
    /// When only parts of it are to be decided: those regions (code points, end exclusive),
    /// shown as regions to check; empty when the whole text is.
    pub regions: Vec<(usize, usize)>,
    /// Whether, read back, only the regions and the entities are annotated (written as
    /// `known`: the rest is unknown), rather than the whole text as submitted (the model's
    /// pre-annotation taken where it was not checked).
    pub partial: bool,
}

/// The name of the `<Labels>` control, and of its one label, that marks the regions of a
/// Label Studio task to decide: `select --regions` writes them as a prediction of this control.
/// Its regions are never entities; in a task read as partly annotated (with `data.known`) they
/// are regions annotated in full, as `known`'s are.
pub const CHECK: &str = "check";

/// A task of Label Studio's import, with the model's prediction.
#[derive(Serialize)]
struct TaskOut<'a> {
    data: TaskData<'a>,
    predictions: [StudioPrediction<'a>; 1],
}

#[derive(Serialize)]
struct TaskData<'a> {
    text: &'a str,
    /// The pool's line, kept with the task through export.
    line: usize,
    /// The regions to decide, kept with the task through export and read back as `known`.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    known: &'a [(usize, usize)],
}

/// A prediction as Label Studio takes it, in an imported task or from an ML backend.
#[derive(Debug, Serialize)]
pub struct StudioPrediction<'a> {
    /// The model that made it; Label Studio does not ask a model again for a task that has its
    /// prediction.
    pub model_version: &'a str,
    /// The task's score, by which the Data Manager sorts.
    pub score: f64,
    /// The regions.
    pub result: Vec<StudioRegion<'a>>,
}

/// Where regions go in a Label Studio project: the `<Labels>` control (`from_name`) and the
/// `<Text>` object it labels (`to_name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StudioTarget<'a> {
    /// The `<Labels>` control's name.
    pub from_name: &'a str,
    /// The `<Text>` object's name.
    pub to_name: &'a str,
}

/// A labelled region of a prediction.
#[derive(Debug, Serialize)]
pub struct StudioRegion<'a> {
    id: String,
    from_name: &'a str,
    to_name: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    value: RegionValue<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    score: Option<f64>,
}

impl<'a> StudioRegion<'a> {
    /// `span` of `text` (code points, as Label Studio counts them) with its probability, as a
    /// region named `id` of `target`.
    pub fn new(
        text: &str,
        span: &'a CharSpan,
        probability: f64,
        id: String,
        target: StudioTarget<'a>,
    ) -> Self {
        Self {
            id,
            from_name: target.from_name,
            to_name: target.to_name,
            kind: "labels",
            value: RegionValue {
                start: span.start,
                end: span.end,
                text: text
                    .chars()
                    .skip(span.start)
                    .take(span.end - span.start)
                    .collect(),
                labels: [span.label.as_str()],
            },
            score: Some(probability),
        }
    }

    /// The region `start..end` of `text` to decide, as a region named `id` of the [`CHECK`]
    /// control on `to_name`.
    fn check(text: &str, (start, end): (usize, usize), id: String, to_name: &'a str) -> Self {
        Self {
            id,
            from_name: CHECK,
            to_name,
            kind: "labels",
            value: RegionValue {
                start,
                end,
                text: text.chars().skip(start).take(end - start).collect(),
                labels: [CHECK],
            },
            score: None,
        }
    }
}

#[derive(Debug, Serialize)]
struct RegionValue<'a> {
    start: usize,
    end: usize,
    text: String,
    labels: [&'a str; 1],
}

/// doccano's JSONL import line.
#[derive(Serialize)]
struct DoccanoOut<'a> {
    text: &'a str,
    label: Vec<(usize, usize, &'a str)>,
    line: usize,
    score: f64,
    /// The regions to decide, in code points (as `known` is read back).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    known: &'a [(usize, usize)],
}

/// The names of Label Studio's default NER config, which `select`'s tasks are written for.
const DEFAULT_TARGET: StudioTarget<'static> = StudioTarget {
    from_name: "label",
    to_name: "text",
};

/// Tasks for Label Studio's import (a JSON array), each with the model's entities as a
/// prediction of `model_version` (scores per entity and per task), for a labeling config whose
/// `<Labels name="label" toName="text">` labels a `<Text name="text" value="$text">`. A task with
/// regions to decide shows them as regions of the [`CHECK`] control in its prediction, for a
/// config that has `<Labels name="check" toName="text">` with `<Label value="check"/>` too, and
/// one read back as partly annotated carries them as `data.known`.
pub fn label_studio_tasks(tasks: &[PreAnnotated], model_version: &str) -> String {
    let tasks: Vec<TaskOut<'_>> = tasks
        .iter()
        .map(|task| {
            let entities = task
                .spans
                .iter()
                .enumerate()
                .map(|(i, (span, probability))| {
                    let id = format!("n{}-{i}", task.line);
                    StudioRegion::new(&task.text, span, *probability, id, DEFAULT_TARGET)
                });
            let checks = task.regions.iter().enumerate().map(|(i, &region)| {
                let id = format!("n{}-c{i}", task.line);
                StudioRegion::check(&task.text, region, id, DEFAULT_TARGET.to_name)
            });
            TaskOut {
                data: TaskData {
                    text: &task.text,
                    line: task.line,
                    known: if task.partial { &task.regions } else { &[] },
                },
                predictions: [StudioPrediction {
                    model_version,
                    score: task.score,
                    result: entities.chain(checks).collect(),
                }],
            }
        })
        .collect();
    serde_json::to_string_pretty(&tasks).expect("tasks serialise") + "\n"
}

/// Lines for doccano's JSONL import: the text, the model's entities as `label` (offsets in
/// UTF-16 units, as doccano counts them), and the pool's line and the task's worth as metadata.
pub fn doccano_lines(tasks: &[PreAnnotated]) -> String {
    let mut out = String::new();
    for task in tasks {
        let units = Utf16Offsets::new(&task.text);
        let line = DoccanoOut {
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
