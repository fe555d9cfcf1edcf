//! What annotation tools export, read as texts with character spans; detected from the content.
//!
//! - **Flat lines** (`.jsonl`, one object a line; also the objects of a JSON array): Prodigy and
//!   spaCy's `spans` (`{"start", "end", "label"}`), doccano's `label` or `labels`
//!   (`[[start, end, "PER"]]`) or `entities` (`{"start_offset", "end_offset", "label"}`), and
//!   Label Studio's JSON-MIN regions under any key (`{"start", "end", "labels": ["PER"]}`). A line
//!   with none of them is an error naming it; an unlabelled text has an empty list.
//! - **Label Studio's JSON export** (`.json`, an array of tasks): the text is `data.text` (or the
//!   data's one string), the spans those of the task's latest annotation that was not cancelled.
//!   Predictions are not gold and are ignored; a task without an annotation is left out, and
//!   counted in a warning.
//! - **brat standoff** (a directory of `.txt` and `.ann` pairs, or one `.ann`): each `.txt` is a
//!   text and a document; its text-bound annotations (`T1<TAB>PER 0 11<TAB>Anna Kovacs`) are the
//!   spans, checked against the text they name. Discontinuous ones are left out with a warning;
//!   relations, events, attributes, normalisations and notes are ignored.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

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

/// Key names under which a line's spans may be, in the order they are looked for.
const SPAN_KEYS: &str = "`spans` (Prodigy, spaCy), `label`, `labels` or `entities` (doccano), or \
                         a Label Studio region list (`[{\"start\", \"end\", \"labels\"}]`)";

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
    /// Only the spans given are known; the rest of the text is unannotated.
    #[serde(default)]
    partial: bool,
    /// The regions annotated in full (code points, end exclusive); the rest is unannotated.
    #[serde(default)]
    known: Option<Vec<(usize, usize)>>,
    /// `label`, `labels`, or a Label Studio control's name: looked at by shape (a flattened
    /// field cannot hold raw JSON, only values).
    #[serde(flatten)]
    other: HashMap<String, serde_json::Value>,
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
}

/// A list of spans in one of the shapes a key may hold.
#[derive(Deserialize)]
#[serde(untagged)]
enum SpanList {
    /// doccano: `[[start, end, "PER"]]`.
    Triples(Vec<(usize, usize, String)>),
    /// Label Studio JSON-MIN.
    Regions(Vec<Region>),
}

/// The spans of a Label Studio region list, or an error saying which region has other than one
/// label.
fn region_spans(
    regions: Vec<Region>,
    at: &dyn Fn(String) -> DataError,
) -> Result<Vec<CharSpan>, DataError> {
    regions
        .into_iter()
        .map(|region| match <[String; 1]>::try_from(region.labels) {
            Ok([label]) => Ok(CharSpan {
                start: region.start,
                end: region.end,
                label,
            }),
            Err(labels) => Err(at(format!(
                "region {}..{} has {} labels; expected one (entities here have one type)",
                region.start,
                region.end,
                labels.len()
            ))),
        })
        .collect()
}

impl FlatLine {
    /// The text with its spans and document, read at `line` of `path`.
    fn into_exported(
        mut self,
        path: &Path,
        line: usize,
        at: &dyn Fn(String) -> DataError,
    ) -> Result<Exported, DataError> {
        let doc = self.doc.clone();
        let known = match (self.partial, self.known.take()) {
            (_, Some(regions)) => Some(regions),
            (true, None) => Some(Vec::new()),
            (false, None) => None,
        };
        let (text, spans) = self.into_text(at)?;
        Ok(Exported {
            text,
            spans,
            line,
            source: path.to_path_buf(),
            doc,
            known,
        })
    }

    /// The text and its spans, or an error saying what was expected.
    fn into_text(
        self,
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
            return Ok((text, spans));
        }
        // `label` and `labels` first (doccano, and Label Studio's usual control name), then any
        // other key holding regions, in name order so that the choice does not depend on order.
        let mut keys: Vec<&String> = self.other.keys().collect();
        keys.sort_by_key(|k| (!matches!(k.as_str(), "label" | "labels"), k.as_str()));
        for key in keys {
            let named = matches!(key.as_str(), "label" | "labels");
            // Under another name only a list with spans in it counts: an empty one (doccano's
            // `"Comments": []`) says nothing about entities.
            if !named && self.other[key].as_array().is_none_or(Vec::is_empty) {
                continue;
            }
            match SpanList::deserialize(&self.other[key]) {
                Ok(SpanList::Triples(triples)) => {
                    let spans = triples
                        .into_iter()
                        .map(|(start, end, label)| CharSpan { start, end, label })
                        .collect();
                    return Ok((text, spans));
                }
                Ok(SpanList::Regions(regions)) => return Ok((text, region_spans(regions, at)?)),
                Err(_) => continue,
            }
        }
        Err(at(format!(
            "no spans: expected {SPAN_KEYS}; a text without entities has an empty list \
             (`\"spans\": []`)"
        )))
    }
}

/// Reads flat objects, one a line (blank lines skipped).
pub(super) fn parse_lines(text: &str, path: &Path) -> Result<Vec<Exported>, DataError> {
    let mut exported = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let at = |message: String| DataError::at(path, number, message);
        let record: FlatLine = serde_json::from_str(line)
            .map_err(|e| at(format!("expected a JSON object with `text` and spans: {e}")))?;
        exported.push(record.into_exported(path, number, &at)?);
    }
    Ok(exported)
}

/// A Label Studio task (the full export).
#[derive(Deserialize)]
struct Task {
    #[serde(default)]
    id: Option<i64>,
    data: HashMap<String, serde_json::Value>,
    #[serde(default)]
    annotations: Vec<Annotation>,
}

/// One annotation of a task.
#[derive(Deserialize)]
struct Annotation {
    #[serde(default)]
    id: Option<i64>,
    #[serde(default)]
    was_cancelled: bool,
    #[serde(default)]
    updated_at: Option<String>,
    #[serde(default)]
    result: Vec<AnnotationResult>,
}

/// One result of an annotation: a labelled region, or something else (a choice, a relation).
#[derive(Deserialize)]
struct AnnotationResult {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    value: Option<Box<RawValue>>,
}

/// Reads Label Studio's JSON export (an array of tasks), or a JSON array of flat objects
/// (JSON-MIN). A task's line is the line its object starts on.
pub(super) fn parse_label_studio(
    text: &str,
    path: &Path,
    warnings: &mut Vec<String>,
) -> Result<Vec<Exported>, DataError> {
    let elements: Vec<&RawValue> = serde_json::from_str(text).map_err(|e| {
        DataError::file(
            path,
            format!("expected a JSON array of Label Studio tasks: {e}"),
        )
    })?;
    let mut exported = Vec::new();
    let mut unannotated = Vec::new();
    for (index, element) in elements.into_iter().enumerate() {
        let offset = element.get().as_ptr() as usize - text.as_ptr() as usize;
        let line = text[..offset].matches('\n').count() + 1;
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
            let record: FlatLine = serde_json::from_str(element.get())
                .map_err(|e| at(format!("expected a task or a JSON-MIN object: {e}")))?;
            exported.push(record.into_exported(path, line, &at)?);
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
        let Some(annotation) = latest_annotation(task.annotations) else {
            unannotated.push(task_name(task.id));
            continue;
        };
        let text = task_text(&task.data).map_err(&at)?;
        let mut regions = Vec::new();
        for result in annotation.result {
            let labelled = matches!(result.kind.as_deref(), Some("labels"));
            if let (true, Some(value)) = (labelled, result.value) {
                let region: Region = serde_json::from_str(value.get())
                    .map_err(|e| at(format!("a `labels` result: {e}")))?;
                regions.push(region);
            }
        }
        exported.push(Exported {
            text,
            spans: region_spans(regions, &at)?,
            line,
            source: path.to_path_buf(),
            doc: None,
            known: None,
        });
    }
    if let Some(first) = unannotated.first() {
        warnings.push(format!(
            "{}: {} task{} without an annotation that was not cancelled, left out (the first: {first})",
            path.display(),
            unannotated.len(),
            if unannotated.len() == 1 { "" } else { "s" }
        ));
    }
    Ok(exported)
}

/// The annotation a task's gold spans come from: the latest that was not cancelled (by
/// `updated_at`, then `id`, then order).
fn latest_annotation(annotations: Vec<Annotation>) -> Option<Annotation> {
    annotations
        .into_iter()
        .enumerate()
        .filter(|(_, a)| !a.was_cancelled)
        .max_by(|(i, a), (j, b)| (&a.updated_at, a.id, i).cmp(&(&b.updated_at, b.id, j)))
        .map(|(_, a)| a)
}

/// A task's text: `data.text`, or the data's one string.
fn task_text(data: &HashMap<String, serde_json::Value>) -> Result<String, String> {
    if let Some(serde_json::Value::String(text)) = data.get("text") {
        return Ok(text.clone());
    }
    let strings: Vec<&String> = data
        .values()
        .filter_map(|v| match v {
            serde_json::Value::String(s) => Some(s),
            _ => None,
        })
        .collect();
    match strings.as_slice() {
        [text] => Ok((*text).clone()),
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
pub(super) fn read_brat(
    path: &Path,
    warnings: &mut Vec<String>,
) -> Result<Vec<Exported>, DataError> {
    let annotation_files: Vec<PathBuf> = if path.is_dir() {
        let entries = std::fs::read_dir(path)
            .map_err(|e| DataError::file(path, format!("cannot read the directory: {e}")))?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "ann"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(DataError::file(
                path,
                "no .ann files: expected brat standoff, a .txt and a .ann of the same name each",
            ));
        }
        files
    } else {
        vec![path.with_extension("ann")]
    };
    let mut exported = Vec::new();
    let mut discontinuous = Vec::new();
    for ann in annotation_files {
        let txt = ann.with_extension("txt");
        let text = crate::conll::read_text(&txt)?;
        let spans = parse_brat(
            &crate::conll::read_text(&ann)?,
            &text,
            &ann,
            &mut discontinuous,
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
    if let Some(first) = discontinuous.first() {
        warnings.push(format!(
            "{first}: a discontinuous span, left out: entities here are contiguous ({} in all)",
            discontinuous.len()
        ));
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
}

/// A task of Label Studio's import, with the model's prediction.
#[derive(Serialize)]
struct TaskOut<'a> {
    data: TaskData<'a>,
    predictions: [PredictionOut<'a>; 1],
}

#[derive(Serialize)]
struct TaskData<'a> {
    text: &'a str,
    /// The pool's line, kept with the task through export.
    line: usize,
}

#[derive(Serialize)]
struct PredictionOut<'a> {
    model_version: &'a str,
    /// The task's worth, by which the annotator may sort.
    score: f64,
    result: Vec<RegionOut<'a>>,
}

#[derive(Serialize)]
struct RegionOut<'a> {
    id: String,
    from_name: &'static str,
    to_name: &'static str,
    #[serde(rename = "type")]
    kind: &'static str,
    value: RegionValue<'a>,
    score: f64,
}

#[derive(Serialize)]
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
}

/// Tasks for Label Studio's import (a JSON array), each with the model's entities as a
/// prediction of `model_version` (scores per entity and per task), for a labeling config whose
/// `<Labels name="label" toName="text">` labels a `<Text name="text" value="$text">`.
pub fn label_studio_tasks(tasks: &[PreAnnotated], model_version: &str) -> String {
    let tasks: Vec<TaskOut<'_>> = tasks
        .iter()
        .map(|task| TaskOut {
            data: TaskData {
                text: &task.text,
                line: task.line,
            },
            predictions: [PredictionOut {
                model_version,
                score: task.score,
                result: task
                    .spans
                    .iter()
                    .enumerate()
                    .map(|(i, (span, probability))| RegionOut {
                        id: format!("n{}-{i}", task.line),
                        from_name: "label",
                        to_name: "text",
                        kind: "labels",
                        value: RegionValue {
                            start: span.start,
                            end: span.end,
                            text: task
                                .text
                                .chars()
                                .skip(span.start)
                                .take(span.end - span.start)
                                .collect(),
                            labels: [span.label.as_str()],
                        },
                        score: *probability,
                    })
                    .collect(),
            }],
        })
        .collect();
    serde_json::to_string_pretty(&tasks).expect("tasks serialise") + "\n"
}

/// Lines for doccano's JSONL import: the text, the model's entities as `label`, and the pool's
/// line and the task's worth as metadata.
pub fn doccano_lines(tasks: &[PreAnnotated]) -> String {
    let mut out = String::new();
    for task in tasks {
        let line = DoccanoOut {
            text: &task.text,
            label: task
                .spans
                .iter()
                .map(|(s, _)| (s.start, s.end, s.label.as_str()))
                .collect(),
            line: task.line,
            score: task.score,
        };
        out.push_str(&serde_json::to_string(&line).expect("a line serialises"));
        out.push('\n');
    }
    out
}
