//! Label Studio: its files and its protocol, in one place.
//!
//! - **Reading** its JSON export (an array of tasks: the text is `data.text`, or the data's one
//!   string; the spans are the `labels` results on it of the task's latest annotation, by
//!   `updated_at`, that was neither cancelled nor skipped; predictions are not gold) and its
//!   JSON-MIN rows (regions under each control's name; a row with an `annotation_id` but no
//!   region is an annotation without entities, one whose `annotation_id` is null a task nobody
//!   annotated; rows of one task are its annotators' annotations, the latest read). Tasks
//!   without an annotation, results on another `<Text>` of the task and results of other kinds
//!   are left out and counted. A region's `text` is checked against the text at its offsets:
//!   Label Studio counts code points, older versions UTF-16 units, and a region found only at
//!   its offsets read as UTF-16 units is realigned (and counted); one found at neither is an
//!   error.
//! - **The labeling config** ([`LabelingConfig`]): which `<Labels>` control labels which
//!   `<Text>` object, and the task data key the text is read from.
//! - **Tasks and predictions** as Label Studio imports them and as an ML backend answers
//!   ([`tasks`], [`Prediction`], [`Region`]), under a project's own names ([`Target`]), with the
//!   regions to decide shown as regions of the [`CHECK`] control.
//! - **Narrowing** an export's tasks to the text one target labels ([`narrow_tasks`]).
//! - **The wire**: the ML backend protocol's request and answer bodies ([`backend`]) and the
//!   REST API's that a backend reads and sends ([`rest`]).

pub mod backend;
mod config;
pub mod rest;

use std::collections::HashMap;
use std::path::Path;

use jiff::Timestamp;
use nertrain_data::DataError;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::exported::Exported;
use crate::tally::Tally;
use crate::units::{Utf16Offsets, parse_time};
use crate::{CharSpan, PreAnnotated};

pub use config::{LabelingConfig, Target};

/// The name of the `<Labels>` control, and of its one label, that marks the regions of a
/// Label Studio task to decide: `select --regions` writes them as a prediction of this control.
/// Its regions are never entities; in a task read as partly annotated (with `data.known`) they
/// are regions annotated in full, as `known`'s are.
pub const CHECK: &str = "check";

/// The task data key of the regions to decide, kept with a task through export.
const KNOWN: &str = "known";

/// A labelled region's value: JSON-MIN's region, and a `labels` result's `value`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LabelsValue {
    start: usize,
    end: usize,
    /// The characters it covers, as Label Studio saw them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    labels: Vec<String>,
}

/// The most results an annotator's context (an interactive pre-annotation) may hold: far more
/// than anyone draws on one text, few enough to check at once.
pub const MAX_CONTEXT_REGIONS: usize = 10_000;

/// The spans of Label Studio regions over `text`, each region's `text` checked against the
/// characters at its offsets (code points, or UTF-16 units where only they fit: realigned and
/// counted); an error names a region with other than one label, or whose text is at neither.
/// `at` makes an error of a message and the region's place in `regions`.
fn region_spans<E>(
    text: &str,
    regions: Vec<LabelsValue>,
    tally: &mut Tally,
    at: &dyn Fn(usize, String) -> E,
) -> Result<Vec<CharSpan>, E> {
    let mut chars: Option<Vec<char>> = None;
    let mut utf16: Option<Utf16Offsets> = None;
    let mut spans = Vec::with_capacity(regions.len());
    for (place, region) in regions.into_iter().enumerate() {
        let at = |message: String| at(place, message);
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
        if start > end {
            return Err(at(format!(
                "region {start}..{end} ({label}) is reversed: expected its start before its end"
            )));
        }
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
                        let there = match found {
                            Some(found) => format!("{found:?}"),
                            None if start == end => "empty (the region covers nothing)".into(),
                            None => format!("beyond the text's end ({} characters)", chars.len()),
                        };
                        return Err(at(format!(
                            "region {start}..{end} ({label}) says {said:?}, but the text there is \
                             {there}: its offsets do not point at its text, counted in code \
                             points or in UTF-16 units"
                        )));
                    }
                }
            }
        }
        spans.push(CharSpan { start, end, label });
    }
    Ok(spans)
}

/// JSON-MIN: what a flat object's keys say of it as a row of an annotation.
pub(crate) enum MinRow {
    /// Not a JSON-MIN row (no `annotation_id`).
    No,
    /// A row of a task nobody annotated: left out, and counted.
    Unannotated,
    /// A row of an annotation; of task `task` (when its `id` says) and this late among the
    /// task's annotations.
    Annotation(Option<(i64, Latest)>),
}

/// What orders a task's annotations, the latest last: `updated_at` (parsed), then the
/// annotation's id, then its place in the file.
pub(crate) type Latest = (Option<Timestamp>, Option<i64>);

/// An annotation's `updated_at`, parsed, or an error naming it.
fn updated_at(
    value: Option<&str>,
    at: &dyn Fn(String) -> DataError,
) -> Result<Option<Timestamp>, DataError> {
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

/// Reads a flat object's JSON-MIN keys, taking out the [`CHECK`] control's regions (the regions
/// decided, added to `known` where the row is partly annotated).
pub(crate) fn min_row(
    other: &mut HashMap<String, Value>,
    known: &mut Option<Vec<(usize, usize)>>,
    line: usize,
    tally: &mut Tally,
    at: &dyn Fn(String) -> DataError,
) -> Result<MinRow, DataError> {
    if let Some(checked) = other.remove(CHECK) {
        let checked = Vec::<LabelsValue>::deserialize(checked).map_err(|e| {
            at(format!(
                "`{CHECK}`: expected the Label Studio regions decided: {e}"
            ))
        })?;
        if let Some(known) = known.as_mut() {
            known.extend(checked.iter().map(|r| (r.start, r.end)));
        }
    }
    match other.get("annotation_id") {
        None => Ok(MinRow::No),
        Some(Value::Null) => {
            let id = other.get("id").and_then(Value::as_i64);
            tally.unannotated.push(match id {
                Some(id) => format!("task {id}, line {line}"),
                None => format!("line {line}"),
            });
            Ok(MinRow::Unannotated)
        }
        Some(annotation) => {
            let time = updated_at(other.get("updated_at").and_then(Value::as_str), at)?;
            let latest = (time, annotation.as_i64());
            let task = other.get("id").and_then(Value::as_i64);
            Ok(MinRow::Annotation(task.map(|task| (task, latest))))
        }
    }
}

/// Whether a flat object's `value` under some key is a list of Label Studio regions.
pub(crate) fn is_region_list(value: &Value) -> bool {
    first_object(value).is_some_and(|region| region.contains_key("labels"))
}

/// The kind of the regions of another kind of control (`hypertextlabels`, ...) a list holds,
/// and how many.
pub(crate) fn other_kind(value: &Value) -> Option<(String, usize)> {
    let kind = first_object(value)?
        .keys()
        .find(|k| k.ends_with("labels"))?;
    Some((kind.clone(), value.as_array().map_or(0, Vec::len)))
}

fn first_object(value: &Value) -> Option<&serde_json::Map<String, Value>> {
    value.as_array()?.first()?.as_object()
}

/// The regions under a JSON-MIN row's control `key`.
pub(crate) struct MinRegions(Vec<LabelsValue>);

impl MinRegions {
    /// The regions of `value`, under `key`.
    pub(crate) fn read(
        key: &str,
        value: &Value,
        at: &dyn Fn(String) -> DataError,
    ) -> Result<Self, DataError> {
        Vec::<LabelsValue>::deserialize(value)
            .map(Self)
            .map_err(|e| at(format!("`{key}`: Label Studio regions: {e}")))
    }

    /// More regions, of another control.
    pub(crate) fn extend(&mut self, more: MinRegions) {
        self.0.extend(more.0);
    }

    /// Their spans over `text`, checked.
    pub(crate) fn spans(
        self,
        text: &str,
        tally: &mut Tally,
        at: &dyn Fn(String) -> DataError,
    ) -> Result<Vec<CharSpan>, DataError> {
        region_spans(text, self.0, tally, &|_, message| at(message))
    }
}

/// The texts read, one row a task where JSON-MIN gives several (its annotators'): the latest,
/// as in the full export; the rest counted. Each row is given with its task and lateness when
/// it is a JSON-MIN row of a known task.
pub(crate) fn one_per_task(
    rows: Vec<(Exported, Option<(i64, Latest)>)>,
    tally: &mut Tally,
) -> Vec<Exported> {
    let mut latest: HashMap<i64, (Latest, usize)> = HashMap::new();
    for (index, (_, row)) in rows.iter().enumerate() {
        if let Some((task, row_latest)) = row {
            let entry = latest.entry(*task).or_insert((*row_latest, index));
            if (*row_latest, index) > *entry {
                *entry = (*row_latest, index);
            }
        }
    }
    let mut texts = Vec::with_capacity(rows.len());
    for (index, (exported, row)) in rows.into_iter().enumerate() {
        match row {
            Some((task, _)) if latest[&task].1 != index => tally.superseded += 1,
            _ => texts.push(exported),
        }
    }
    texts
}

/// A Label Studio task: its id, its data, and its annotations (as much of them as reading
/// gold takes). Predictions and other keys are not read.
#[derive(Debug, Deserialize, Serialize)]
pub struct Task {
    /// Its id in its project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    /// Its data: the texts under the keys the labeling config names, and anything else.
    pub data: HashMap<String, Value>,
    #[serde(default)]
    annotations: Vec<Annotation>,
}

/// One annotation of a task.
#[derive(Debug, Clone, Deserialize, Serialize)]
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
#[derive(Debug, Clone, Deserialize, Serialize)]
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

/// What Label Studio sends with an interactive pre-annotation (`params.context` of a
/// `/predict`): the results an annotator has drawn on the task so far.
#[derive(Debug, Default, Deserialize)]
pub struct AnnotatorRegions {
    #[serde(default)]
    result: Vec<AnnotationResult>,
}

impl AnnotatorRegions {
    /// Whether it holds no result.
    pub fn is_empty(&self) -> bool {
        self.result.is_empty()
    }

    /// The entities drawn by `targets`' controls (entity controls on one `<Text>`, whose text is
    /// `text`), checked as an export's regions are, in time linear in the text and the regions
    /// (at most [`MAX_CONTEXT_REGIONS`]); the [`CHECK`] control's regions and results of other
    /// kinds are left out. An error names the result (`context.result[i]`).
    pub fn spans_on(&self, targets: &[&Target], text: &str) -> Result<Vec<CharSpan>, String> {
        if self.result.len() > MAX_CONTEXT_REGIONS {
            return Err(format!(
                "context.result: {} regions, more than the {MAX_CONTEXT_REGIONS} an annotator's \
                 context may hold",
                self.result.len()
            ));
        }
        let mut regions = Vec::new();
        let mut places = Vec::new();
        for (i, result) in self.result.iter().enumerate() {
            let at = |message: String| format!("context.result[{i}]: {message}");
            let ours = targets.iter().any(|t| {
                result.from_name.as_deref() == Some(t.from_name.as_str())
                    && result.to_name.as_deref() == Some(t.to_name.as_str())
            });
            if !ours || result.kind.as_deref() != Some("labels") {
                continue;
            }
            let Some(value) = &result.value else {
                return Err(at("a `labels` result without a value".into()));
            };
            let region: LabelsValue = serde_json::from_str(value.get())
                .map_err(|e| at(format!("a `labels` result: {e}")))?;
            regions.push(region);
            places.push(i);
        }
        // All regions at once: the text is indexed once, not once a region.
        let at =
            |place: usize, message: String| format!("context.result[{}]: {message}", places[place]);
        region_spans(text, regions, &mut Tally::default(), &at)
    }
}

impl Task {
    /// The task's text for `target`: `data[target.data_key]`, or an error naming the field
    /// (`tasks[{index}].data.{key}`, as a request gives them).
    pub fn text_for(&self, target: &Target, index: usize) -> Result<&str, String> {
        let field = || format!("tasks[{index}].data.{}", target.data_key);
        match self.data.get(&target.data_key) {
            Some(Value::String(text)) => Ok(text),
            Some(_) => Err(format!("{}: expected a string, the task's text", field())),
            None => Err(format!(
                "{}: missing; <Text name=\"{}\"> reads its text there",
                field(),
                target.to_name
            )),
        }
    }
}

/// Whether a JSON array's element is a task of the full export (rather than a JSON-MIN row).
pub(crate) fn is_task(element: &RawValue) -> bool {
    serde_json::from_str::<HashMap<String, &RawValue>>(element.get())
        .is_ok_and(|keys| keys.contains_key("data") || keys.contains_key("annotations"))
}

/// Reads one task of the full export, found at `line` of `path` as the array's element
/// `index`: its text and the spans of its latest annotation, or `None` when it has none (and
/// it is counted).
pub(crate) fn read_task(
    element: &RawValue,
    path: &Path,
    line: usize,
    index: usize,
    tally: &mut Tally,
) -> Result<Option<Exported>, DataError> {
    let task_name = |id: Option<i64>| match id {
        Some(id) => format!("task {id} (number {})", index + 1),
        None => format!("task number {}", index + 1),
    };
    let task: Task = serde_json::from_str(element.get()).map_err(|e| {
        DataError::at(
            path,
            line,
            format!("{}: not a Label Studio task: {e}", task_name(None)),
        )
    })?;
    let at =
        |message: String| DataError::at(path, line, format!("{}: {message}", task_name(task.id)));
    let Some(annotation) = latest_annotation(task.annotations, &at)? else {
        tally.unannotated.push(task_name(task.id));
        return Ok(None);
    };
    let (key, text) = task_text(&task.data).map_err(&at)?;
    let mut known = match task.data.get(KNOWN) {
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
            let region: LabelsValue = serde_json::from_str(value.get())
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
    let spans = region_spans(&text, regions, tally, &|_, message| at(message))?;
    Ok(Some(Exported {
        text,
        spans,
        line,
        source: path.to_path_buf(),
        doc: None,
        known,
    }))
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

/// Label Studio tasks (elements of its JSON export) narrowed to the `<Text>` that `target`
/// labels, as a JSON export again: each task's data keeps only its text (and the regions it was
/// to be decided in, `known`), and its annotations only the results on the target's object.
/// The importer then reads the text the project labels whatever else a task's data holds
/// (metadata, other texts), which it cannot tell apart without the project's labeling config.
///
/// A task without `known` whose annotations mark regions of the [`CHECK`] control (an ML
/// backend's prediction with regions to decide, submitted) was decided there alone: it is given
/// an empty `known`, so that those regions are read as the parts decided, and the rest (but the
/// entities) as unknown.
pub fn narrow_tasks(tasks: &[Task], target: &Target) -> Result<String, String> {
    let data_key = &target.data_key;
    let mut narrowed = Vec::with_capacity(tasks.len());
    for (i, task) in tasks.iter().enumerate() {
        let name = || match task.id {
            Some(id) => format!("task {id}"),
            None => format!("task number {}", i + 1),
        };
        let text = match task.data.get(data_key) {
            Some(text @ Value::String(_)) => text.clone(),
            Some(_) => return Err(format!("{}: data.{data_key}: expected a string", name())),
            None => return Err(format!("{}: data.{data_key}: missing", name())),
        };
        let mut data = HashMap::from([(data_key.clone(), text)]);
        // The regions a task was to be decided in (`select --regions`) go with its text.
        if let Some(known) = task.data.get(KNOWN) {
            data.insert(KNOWN.into(), known.clone());
        } else if task.annotations.iter().any(|a| {
            a.result
                .iter()
                .any(|r| r.from_name.as_deref() == Some(CHECK))
        }) {
            data.insert(KNOWN.into(), Value::Array(Vec::new()));
        }
        let mut annotations = task.annotations.clone();
        for annotation in &mut annotations {
            annotation
                .result
                .retain(|r| r.to_name.as_deref().is_none_or(|n| n == target.to_name));
        }
        narrowed.push(Task {
            id: task.id,
            data,
            annotations,
        });
    }
    serde_json::to_string(&narrowed).map_err(|e| e.to_string())
}

/// A prediction as Label Studio takes it, in an imported task or from an ML backend.
#[derive(Debug, Clone, Serialize)]
pub struct Prediction {
    /// The model that made it; Label Studio does not ask a model again for a task that has its
    /// prediction.
    pub model_version: String,
    /// The task's score, by which the Data Manager sorts.
    pub score: f64,
    /// The regions.
    pub result: Vec<Region>,
}

/// A labelled region of a prediction, or of an annotation's result.
#[derive(Debug, Clone, Serialize)]
pub struct Region {
    /// Its id; none in a result an annotator submits, where Label Studio gives one.
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    from_name: String,
    to_name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    value: LabelsValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    score: Option<f64>,
}

impl Region {
    /// `span` of `text` (code points, as Label Studio counts them) with its probability, as a
    /// region named `id` of `target`.
    pub fn new(text: &str, span: &CharSpan, probability: f64, id: String, target: &Target) -> Self {
        Self {
            id: Some(id),
            score: Some(probability),
            ..Self::annotated(text, span, &target.from_name, &target.to_name)
        }
    }

    /// `span` of `text` (code points) as an annotator submits it, a region of the control
    /// `from_name` on the object `to_name`: no id (Label Studio gives one) and no score.
    pub fn annotated(text: &str, span: &CharSpan, from_name: &str, to_name: &str) -> Self {
        Self {
            id: None,
            from_name: from_name.to_string(),
            to_name: to_name.to_string(),
            kind: "labels",
            value: LabelsValue {
                start: span.start,
                end: span.end,
                text: Some(covered(text, span.start, span.end)),
                labels: vec![span.label.clone()],
            },
            score: None,
        }
    }

    /// The region `start..end` of `text` (code points) to decide, as a region named `id` of
    /// the [`CHECK`] control on `to_name`.
    pub fn check(text: &str, (start, end): (usize, usize), id: String, to_name: &str) -> Self {
        Self {
            id: Some(id),
            from_name: CHECK.to_string(),
            to_name: to_name.to_string(),
            kind: "labels",
            value: LabelsValue {
                start,
                end,
                text: Some(covered(text, start, end)),
                labels: vec![CHECK.to_string()],
            },
            score: None,
        }
    }
}

/// One text of a task and what a model found on it, under a project's names.
#[derive(Debug, Clone)]
pub struct TextPrediction<'a> {
    /// The text.
    pub text: &'a str,
    /// Its entities: the control that takes each (a target on this text), its span (code
    /// points, as Label Studio counts them) and its probability.
    pub entities: Vec<(&'a Target, &'a CharSpan, f64)>,
    /// The regions to decide (code points) as regions of the [`CHECK`] control on the
    /// `<Text>` named, where there are any.
    pub checks: Option<(&'a str, &'a [(usize, usize)])>,
}

impl Prediction {
    /// Task `task`'s prediction by `model_version`, with the task's score: each text's
    /// entities, then its regions to decide, as regions named `{task}-{to_name}-{i}` and
    /// `{task}-{to_name}-check-{i}` (unique in a project whose tasks have unique names).
    pub fn of_texts(task: &str, model_version: &str, score: f64, texts: &[TextPrediction]) -> Self {
        let mut result = Vec::new();
        for text in texts {
            for (i, (target, span, probability)) in text.entities.iter().enumerate() {
                let id = format!("{task}-{}-{i}", target.to_name);
                result.push(Region::new(text.text, span, *probability, id, target));
            }
            if let Some((to_name, regions)) = &text.checks {
                for (i, &region) in regions.iter().enumerate() {
                    let id = format!("{task}-{to_name}-{CHECK}-{i}");
                    result.push(Region::check(text.text, region, id, to_name));
                }
            }
        }
        Self {
            model_version: model_version.to_string(),
            score,
            result,
        }
    }
}

/// The characters `start..end` (code points) of `text`.
fn covered(text: &str, start: usize, end: usize) -> String {
    text.chars().skip(start).take(end - start).collect()
}

/// A task of Label Studio's import, with the model's prediction.
#[derive(Serialize)]
struct TaskOut<'a> {
    data: TaskData<'a>,
    predictions: [Prediction; 1],
}

/// An imported task's data: its text under the target's data key, the pool's line and the
/// regions to decide, kept with the task through export (the regions read back as `known`).
struct TaskData<'a> {
    key: &'a str,
    text: &'a str,
    line: usize,
    known: &'a [(usize, usize)],
}

impl Serialize for TaskData<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry(self.key, self.text)?;
        map.serialize_entry("line", &self.line)?;
        if !self.known.is_empty() {
            map.serialize_entry(KNOWN, self.known)?;
        }
        map.end()
    }
}

/// The task data keys a task's text cannot be under, since its other fields are.
pub const TASK_DATA_KEYS: [&str; 2] = ["line", KNOWN];

/// Tasks for Label Studio's import (a JSON array), each with the model's entities as a
/// prediction of `model_version` (scores per entity and per task) under `target`'s names
/// ([`Prediction::of_texts`], the task named `n{line}`), the
/// text under its data key (which must not be one of [`TASK_DATA_KEYS`]). A task with regions
/// to decide shows them as regions of the [`CHECK`] control on the same `<Text>` in its
/// prediction, and one read back as partly annotated carries them as `data.known`.
pub fn tasks(tasks: &[PreAnnotated], model_version: &str, target: &Target) -> String {
    let tasks: Vec<TaskOut<'_>> = tasks
        .iter()
        .map(|task| {
            let text = TextPrediction {
                text: &task.text,
                entities: task
                    .spans
                    .iter()
                    .map(|(span, probability)| (target, span, *probability))
                    .collect(),
                checks: (!task.regions.is_empty())
                    .then(|| (&target.to_name[..], &task.regions[..])),
            };
            let name = format!("n{}", task.line);
            TaskOut {
                data: TaskData {
                    key: &target.data_key,
                    text: &task.text,
                    line: task.line,
                    known: if task.partial { &task.regions } else { &[] },
                },
                predictions: [Prediction::of_texts(
                    &name,
                    model_version,
                    task.score,
                    &[text],
                )],
            }
        })
        .collect();
    serde_json::to_string_pretty(&tasks).expect("tasks serialise") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AnnotatedText;
    use crate::testing::{read_error, read_written, spans_of};

    /// A target that labels `<Text name="{to_name}" value="${data_key}">`.
    fn target(data_key: &str, to_name: &str) -> Target {
        Target {
            from_name: "label".into(),
            to_name: to_name.into(),
            data_key: data_key.into(),
            labels: Vec::new(),
        }
    }

    /// A Label Studio task of one text and the given results.
    fn task(text: &str, results: &str) -> String {
        format!(
            r#"[{{"id": 1, "data": {{"text": "{text}", "title": "Kovacs Ltd"}}, "annotations": [{{"id": 5, "result": [{results}]}}]}}]"#
        )
    }

    fn region(start: usize, end: usize, text: &str, to_name: &str) -> String {
        format!(
            r#"{{"from_name": "label", "to_name": "{to_name}", "type": "labels", "value": {{"start": {start}, "end": {end}, "text": "{text}", "labels": ["PER"]}}}}"#
        )
    }

    #[test]
    fn narrowed_label_studio_tasks_read_the_projects_text_whatever_else_their_data_holds() {
        let export = r#"[{"id": 3, "data": {"body": "Anna met Bob", "source": "mail 7", "n": 2},
            "annotations": [{"id": 9, "result": [
                {"from_name": "ents", "to_name": "doc", "type": "labels", "value": {"start": 0, "end": 4, "text": "Anna", "labels": ["PER"]}},
                {"from_name": "other", "to_name": "src", "type": "labels", "value": {"start": 0, "end": 4, "text": "mail", "labels": ["ORG"]}}]},
              {"id": 10, "was_cancelled": true, "result": []}],
            "predictions": [{"result": []}]}]"#;
        // As exported, two strings and no `text`: which one is labelled is unknown.
        let error = read_error("ls-narrow-raw", "e.json", export);
        assert!(error.contains("nor one string"), "{error}");
        let tasks: Vec<Task> = serde_json::from_str(export).unwrap();
        let narrowed = narrow_tasks(&tasks, &target("body", "doc")).unwrap();
        let corpus = read_written("ls-narrowed", "e.json", &narrowed).unwrap();
        assert_eq!(corpus.texts[0].text, "Anna met Bob");
        assert_eq!(spans_of(&corpus), [vec![(0, 4, "PER")]]);
        // The importer's rules still apply: the cancelled annotation is not the one read.
        assert!(corpus.warnings.is_empty(), "{:?}", corpus.warnings);
        for (key, message) in [
            ("title", "task 3: data.title: missing"),
            ("n", "data.n: expected a string"),
        ] {
            let error = narrow_tasks(&tasks, &target(key, "doc")).unwrap_err();
            assert!(error.contains(message), "{error}");
        }
    }

    #[test]
    fn label_studio_regions_are_checked_against_their_text() {
        let text = "🎉 Anna met Bob";
        // "Anna" at `start..end`, read back.
        let anna_at = |test: &str, start: usize, end: usize| {
            read_written(
                test,
                "t.json",
                &task(text, &region(start, end, "Anna", "text")),
            )
        };
        // Code points, as Label Studio counts them.
        let corpus = anna_at("ls-cp", 2, 6).unwrap();
        assert_eq!(spans_of(&corpus), [vec![(2, 6, "PER")]]);
        assert!(corpus.warnings.is_empty(), "{:?}", corpus.warnings);
        // UTF-16 units, as older versions counted: realigned, and said.
        let corpus = anna_at("ls-16", 3, 7).unwrap();
        assert_eq!(spans_of(&corpus), [vec![(2, 6, "PER")]]);
        assert!(corpus.warnings[0].contains("1 region's offsets were counted in UTF-16"));
        // At neither: an error naming the task, never other words labelled.
        let error = anna_at("ls-bad", 7, 10).unwrap_err().to_string();
        assert!(
            error.contains("t.json:1: task 1 (number 1): region 7..10 (PER) says \"Anna\", but the text there is \"met\""),
            "{error}"
        );
        // A region on the task's other text is not this text's.
        let results = [
            region(2, 6, "Anna", "text"),
            region(0, 6, "Kovacs", "title"),
        ]
        .join(",");
        let corpus = read_written("ls-to", "t.json", &task(text, &results)).unwrap();
        assert_eq!(spans_of(&corpus), [vec![(2, 6, "PER")]]);
        assert!(
            corpus.warnings[0].contains("another <Text> of their task left out (to_name: 1 title)"),
            "{:?}",
            corpus.warnings
        );
        // JSON-MIN regions are checked the same way.
        let min = format!(
            r#"[{{"id": 1, "text": "{text}", "label": [{{"start": 3, "end": 7, "text": "Anna", "labels": ["PER"]}}], "annotation_id": 5}}]"#
        );
        let corpus = read_written("ls-min16", "m.json", &min).unwrap();
        assert_eq!(spans_of(&corpus), [vec![(2, 6, "PER")]]);
    }

    #[test]
    fn label_studio_json_min_reads_as_label_studio_writes_it() {
        // As label-studio-converter writes JSON-MIN: a row per annotation, no control key for an
        // annotation without regions, `annotation_id` null for a task nobody annotated, every
        // control under its own name.
        let min = r#"[
  {"text": "Anna met Bob", "id": 1, "label": [{"start": 0, "end": 4, "text": "Anna", "labels": ["PER"]}], "place": [{"start": 9, "end": 12, "text": "Bob", "labels": ["LOC"]}], "annotator": 1, "annotation_id": 11, "created_at": "2024-05-01T10:00:00.000000Z", "updated_at": "2024-05-01T10:00:00.500000Z", "lead_time": 2.0},
  {"text": "Anna met Bob", "id": 1, "label": [{"start": 0, "end": 4, "text": "Anna", "labels": ["ORG"]}], "annotator": 2, "annotation_id": 12, "created_at": "2024-05-01T10:00:00Z", "updated_at": "2024-05-01T10:00:00Z", "lead_time": 2.0},
  {"text": "Nothing here", "id": 2, "annotator": 1, "annotation_id": 13, "created_at": "2024-05-01T10:00:00Z", "updated_at": "2024-05-01T10:00:00Z", "lead_time": 1.0},
  {"text": "Not yet seen", "id": 3, "annotator": null, "annotation_id": null, "created_at": null, "updated_at": null, "lead_time": null}
]"#;
        let corpus = read_written("ls-min", "m.json", min).unwrap();
        assert_eq!(
            spans_of(&corpus),
            [vec![(0, 4, "PER"), (9, 12, "LOC")], vec![]],
            "the later annotation of task 1 (by time, not as strings), both controls"
        );
        let warnings = corpus.warnings.join("\n");
        assert!(
            warnings.contains("1 task without an annotation"),
            "{warnings}"
        );
        assert!(
            warnings.contains("1 row of a task that has a later annotation"),
            "{warnings}"
        );
    }

    #[test]
    fn the_latest_annotation_is_the_latest_in_time() {
        let annotation = |id: u32, label: &str, updated: &str, extra: &str| {
            format!(
                r#"{{"id": {id}, "updated_at": "{updated}"{extra}, "result": [{{"from_name": "label", "to_name": "text", "type": "labels", "value": {{"start": 0, "end": 4, "text": "Anna", "labels": ["{label}"]}}}}]}}"#
            )
        };
        let export = format!(
            r#"[{{"id": 1, "data": {{"text": "Anna flew"}}, "annotations": [{}, {}, {}]}}]"#,
            annotation(1, "LATER", "2024-05-01T10:00:00.500000Z", ""),
            annotation(2, "EARLIER", "2024-05-01T10:00:00Z", ""),
            annotation(3, "SKIPPED", "2024-06-01T10:00:00Z", r#", "skipped": true"#),
        );
        let corpus = read_written("ls-time", "t.json", &export).unwrap();
        assert_eq!(spans_of(&corpus), [vec![(0, 4, "LATER")]]);
        let bad = export.replace("2024-05-01T10:00:00Z", "last tuesday");
        let error = read_error("ls-badtime", "t.json", &bad);
        assert!(
            error.contains("updated_at \"last tuesday\" is not a time"),
            "{error}"
        );
    }

    #[test]
    fn results_of_kinds_not_read_are_counted() {
        let results = [
            region(0, 4, "Anna", "text"),
            r#"{"from_name": "h", "to_name": "text", "type": "hypertextlabels", "value": {"start": "/p[1]", "end": "/p[1]", "startOffset": 0, "endOffset": 4, "hypertextlabels": ["PER"]}}"#.to_string(),
            r#"{"from_name": "p", "to_name": "text", "type": "paragraphlabels", "value": {"start": "0", "end": "0", "startOffset": 0, "endOffset": 4, "paragraphlabels": ["PER"]}}"#.to_string(),
        ]
        .join(",");
        let corpus = read_written("ls-kinds", "t.json", &task("Anna flew", &results)).unwrap();
        assert_eq!(spans_of(&corpus), [vec![(0, 4, "PER")]]);
        assert!(
            corpus.warnings[0].contains("(1 hypertextlabels, 1 paragraphlabels)"),
            "{:?}",
            corpus.warnings
        );
    }

    #[test]
    fn an_export_of_tasks_nobody_annotated_says_so() {
        let export = r#"[{"id": 1, "data": {"text": "a"}, "annotations": []},
                         {"id": 2, "data": {"text": "b"}, "annotations": [{"id": 3, "was_cancelled": true, "result": []}]}]"#;
        let error = read_error("ls-none", "t.json", export);
        assert!(
            error.contains("no annotated text is left to read")
                && error.contains("2 tasks without an annotation"),
            "{error}"
        );
    }

    /// Tasks `select --regions` writes, annotated as Label Studio exports them when the
    /// annotator submits the prediction with `results` (its regions, as JSON) in its place.
    fn region_tasks(
        partial: bool,
        results: impl Fn(&serde_json::Value) -> serde_json::Value,
    ) -> String {
        let span = |start, end, label: &str| CharSpan {
            start,
            end,
            label: label.into(),
        };
        let written = tasks(
            &[PreAnnotated {
                text: "Anna Kovacs met Bob Lee in Oslo.".into(),
                spans: vec![(span(0, 11, "PER"), 0.99), (span(16, 23, "ORG"), 0.4)],
                score: 0.5,
                line: 3,
                regions: vec![(16, 23)],
                partial,
            }],
            "nertrain test",
            &Target::default_ner(),
        );
        let mut tasks: Vec<serde_json::Value> = serde_json::from_str(&written).unwrap();
        for task in &mut tasks {
            let result = results(&task["predictions"][0]["result"]);
            task["annotations"] = serde_json::json!([{"id": 1, "result": result}]);
        }
        serde_json::to_string(&tasks).unwrap()
    }

    #[test]
    fn tasks_to_decide_in_regions_read_back_as_partly_annotated() {
        // The annotator corrects the doubtful entity and keeps the region to check.
        let corrected = region_tasks(true, |result| {
            let mut result = result.clone();
            result[1]["value"]["labels"] = serde_json::json!(["PER"]);
            result
        });
        let written: Vec<serde_json::Value> = serde_json::from_str(&corrected).unwrap();
        let checks: Vec<&serde_json::Value> = written[0]["predictions"][0]["result"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["from_name"] == CHECK)
            .collect();
        assert_eq!(checks.len(), 1);
        assert_eq!(checks[0]["value"]["text"], "Bob Lee");
        assert_eq!(written[0]["data"]["known"], serde_json::json!([[16, 23]]));
        let corpus = read_written("ls-regions", "e.json", &corrected).unwrap();
        // The check region is what was decided, not an entity.
        assert_eq!(spans_of(&corpus), [vec![(0, 11, "PER"), (16, 23, "PER")]]);
        assert_eq!(corpus.texts[0].known, Some(vec![(16, 23), (16, 23)]));
        // A region the annotator added is decided too; data.known stands when they delete one.
        let widened = region_tasks(true, |result| {
            let mut result = result.as_array().unwrap().clone();
            let mut added = result[2].clone();
            added["value"] =
                serde_json::json!({"start": 27, "end": 31, "text": "Oslo", "labels": [CHECK]});
            result.pop();
            result.push(added);
            serde_json::Value::Array(result)
        });
        let corpus = read_written("ls-regions-widened", "e.json", &widened).unwrap();
        assert_eq!(corpus.texts[0].known, Some(vec![(16, 23), (27, 31)]));
        // What the learner narrows to keeps them.
        let tasks: Vec<Task> = serde_json::from_str(&widened).unwrap();
        let narrowed = narrow_tasks(&tasks, &Target::default_ner()).unwrap();
        let narrowed = read_written("ls-regions-narrowed", "e.json", &narrowed).unwrap();
        assert_eq!(
            narrowed.texts,
            corpus
                .texts
                .iter()
                .map(|t| AnnotatedText {
                    source: narrowed.texts[0].source.clone(),
                    ..t.clone()
                })
                .collect::<Vec<_>>()
        );
        // Submitted from a backend's prediction (no data.known), narrowed for learning: decided
        // in its check regions alone.
        let live = region_tasks(false, |result| result.clone());
        let tasks: Vec<Task> = serde_json::from_str(&live).unwrap();
        let narrowed = narrow_tasks(&tasks, &Target::default_ner()).unwrap();
        let narrowed = read_written("ls-regions-live", "e.json", &narrowed).unwrap();
        assert_eq!(narrowed.texts[0].known, Some(vec![(16, 23)]));
        // JSON-MIN: the control's key and the data's, flattened.
        let min = r#"[{"id": 1, "text": "Anna met Bob today", "known": [[9, 12]], "annotation_id": 2,
            "label": [{"start": 0, "end": 4, "text": "Anna", "labels": ["PER"]}],
            "check": [{"start": 5, "end": 8, "text": "met", "labels": ["check"]}]}]"#;
        let corpus = read_written("ls-regions-min", "e.json", min).unwrap();
        assert_eq!(spans_of(&corpus), [vec![(0, 4, "PER")]]);
        assert_eq!(corpus.texts[0].known, Some(vec![(9, 12), (5, 8)]));
        // Read back in full, the pre-annotation taken where it was not checked: the regions
        // are neither entities nor what alone was decided.
        let whole = region_tasks(false, |result| result.clone());
        assert!(!whole.contains("known"), "{whole}");
        let corpus = read_written("ls-regions-whole", "e.json", &whole).unwrap();
        assert_eq!(spans_of(&corpus), [vec![(0, 11, "PER"), (16, 23, "ORG")]]);
        assert_eq!(corpus.texts[0].known, None);
        let min_whole = min.replace(r#""known": [[9, 12]], "#, "");
        let corpus = read_written("ls-regions-min-whole", "e.json", &min_whole).unwrap();
        assert_eq!(corpus.texts[0].known, None);
        let bad = region_tasks(true, |result| result.clone())
            .replace(r#""known":[[16,23]]"#, r#""known":"all""#);
        let error = read_error("ls-regions-bad", "e.json", &bad);
        assert!(
            error.contains("data.known: expected the regions decided"),
            "{error}"
        );
    }
}
