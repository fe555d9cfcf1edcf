//! The bodies of Label Studio's REST API that a backend reads and sends: a personal access
//! token's exchange, a project, the Data Manager's pages of tasks and their query, predictions
//! imported, and a project's model version.

use serde::{Deserialize, Serialize};

use super::{Prediction, Task};

/// `POST /api/token/refresh/`'s body: a personal access token (a secret: no `Debug`).
#[derive(Serialize)]
pub struct Refresh<'a> {
    /// The token.
    pub refresh: &'a str,
}

/// `/api/token/refresh/`'s answer (a secret: no `Debug`).
#[derive(Deserialize)]
pub struct Access {
    /// A short-lived access token.
    pub access: String,
}

/// A project (`GET /api/projects/{id}`), as much of it as a backend reads.
#[derive(Debug, Deserialize)]
pub struct ProjectAnswer {
    /// Its labeling config.
    pub label_config: String,
}

/// A page of a project's tasks, as the Data Manager lists them (`GET /api/tasks`).
#[derive(Debug, Deserialize)]
pub struct TasksPage {
    /// The tasks the query finds in all.
    pub total: usize,
    /// This page's.
    pub tasks: Vec<ListedTask>,
}

/// A task as the Data Manager lists it: the task, and how many annotations it has.
#[derive(Debug, Deserialize)]
pub struct ListedTask {
    /// The task.
    #[serde(flatten)]
    pub task: Task,
    /// Its annotations' count.
    #[serde(default)]
    pub total_annotations: usize,
}

/// A Data Manager query (`/api/tasks`' `query`): its filters and order.
#[derive(Debug, Serialize)]
pub struct TasksQuery {
    /// The filters.
    pub filters: Filters,
    /// The column the tasks are sorted by.
    pub ordering: [&'static str; 1],
}

/// A query's filters and how they combine.
#[derive(Debug, Serialize)]
pub struct Filters {
    /// `and` or `or`.
    pub conjunction: &'static str,
    /// The filters.
    pub items: Vec<Filter>,
}

/// One filter of a Data Manager query: a column, how it compares, and with what.
#[derive(Debug, Serialize)]
pub struct Filter {
    /// The column: `filter:tasks:id`, ...
    pub filter: &'static str,
    /// `greater`, `equal`, ...
    pub operator: &'static str,
    /// The column's type: `Number`, ...
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// What it is compared with.
    pub value: i64,
}

/// A prediction for a task, as `POST /api/projects/{id}/import/predictions` takes it.
#[derive(Debug, Serialize)]
pub struct TaskPrediction {
    /// The task's id.
    pub task: i64,
    /// The prediction.
    #[serde(flatten)]
    pub prediction: Prediction,
}

/// `/import/predictions`' answer.
#[derive(Debug, Deserialize)]
pub struct Created {
    /// How many predictions Label Studio made.
    pub created: usize,
}

/// `PATCH /api/projects/{id}`'s body setting the project's model version: the predictions
/// whose scores the Data Manager sorts by.
#[derive(Debug, Serialize)]
pub struct ModelVersion<'a> {
    /// The version.
    pub model_version: &'a str,
}
