//! What a refresh of Label Studio's predictions did and is doing: the learner's status shows
//! it, `DIR/refresh.json` keeps it, and an event tells it. Its own module, so that the refresher
//! and the events both use it and neither the other's.

use serde::{Deserialize, Serialize};

/// Where a refresh is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefreshPhase {
    /// Reading the tasks to find where the regions are cut.
    Measuring,
    /// Posting the predictions.
    Posting,
    /// Every task without an annotation has the version's prediction, and the project's model
    /// version is the version.
    Done,
    /// Stopped by an error (the next version served, or a restart, tries again).
    Failed,
}

/// What a refresh did, and is doing: `GET /model` shows it, and `DIR/refresh.json` keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RefreshStatus {
    /// The model version whose predictions are posted.
    pub version: String,
    /// The Label Studio project.
    pub project: u64,
    /// Where it is.
    pub phase: RefreshPhase,
    /// Tasks a page.
    pub page_size: usize,
    /// Pages of the project's tasks.
    pub pages: usize,
    /// Pages done in this phase.
    pub page: usize,
    /// The highest task id read in this phase: the next page is of the tasks above it, so that
    /// tasks deleted meanwhile shift no task out of the refresh.
    #[serde(default)]
    pub after_task: Option<i64>,
    /// Tasks given the version's prediction.
    pub predicted: usize,
    /// Tasks passed over: annotated already.
    pub annotated: usize,
    /// Tasks passed over: their text could not be read (missing, or too long to tag).
    pub unreadable: usize,
    /// The certainty a token is below to be in a region to decide, once known.
    pub cut: Option<f64>,
    /// Tasks passed over: the prediction posted before stands (the same version, cut where it
    /// was, on a task read then).
    #[serde(default)]
    pub stood: usize,
    /// The highest task id read.
    #[serde(default)]
    pub newest_task: Option<i64>,
    /// The last refresh of the same version on the same project, when it was done: what it
    /// posted stands where the cut has not moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Posted>,
    /// Seconds it has taken (over every run, when it was resumed).
    pub seconds: f64,
    /// Why it failed.
    pub error: Option<String>,
}

/// What a refresh done posted: the cut of its regions, on the tasks up to the newest it read.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Posted {
    /// The certainty its regions were cut at.
    pub cut: f64,
    /// The highest task id it read: those above were imported since.
    pub newest_task: i64,
}

impl Posted {
    /// Whether the prediction posted for task `id` stands at `cut`.
    pub(crate) fn stands(&self, id: Option<i64>, cut: f64) -> bool {
        self.cut == cut && id.is_some_and(|id| id <= self.newest_task)
    }
}
