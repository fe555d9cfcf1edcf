//! The bodies of Label Studio's ML backend protocol (`label_studio/ml/api_connector.py`): what
//! Label Studio sends to `/setup`, `/predict` and `/webhook`, and what a backend answers to
//! them and to `/versions`.

use serde::{Deserialize, Serialize};

use super::{AnnotatorRegions, Prediction, Task};

/// Label Studio's project id, in its `"{id}.{created}"` form or as a number.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum ProjectUid {
    /// A plain id.
    Number(u64),
    /// `"{id}.{created}"`.
    Text(String),
}

impl ProjectUid {
    /// The project's id; `None` when the text does not start with one.
    pub fn id(&self) -> Option<u64> {
        match self {
            ProjectUid::Number(id) => Some(*id),
            ProjectUid::Text(text) => text.split('.').next()?.parse().ok(),
        }
    }
}

/// A `POST /setup` body.
#[derive(Debug, Deserialize)]
pub struct SetupRequest {
    /// The project being connected.
    pub project: ProjectUid,
    /// Its labeling config.
    pub schema: String,
    /// Label Studio's address, as it sees itself.
    #[serde(default)]
    pub hostname: Option<String>,
    /// An API key of the user who connected the backend.
    #[serde(default)]
    pub access_token: Option<String>,
}

/// `/setup`'s answer.
#[derive(Debug, Serialize)]
pub struct SetupAnswer {
    /// The version of the model that will answer.
    pub model_version: String,
}

/// A `POST /predict` body.
#[derive(Debug, Deserialize)]
pub struct PredictRequest {
    /// The tasks to predict.
    pub tasks: Vec<Task>,
    /// The project's labeling config, when sent.
    #[serde(default)]
    pub label_config: Option<String>,
    /// The project, when sent.
    #[serde(default)]
    pub project: Option<ProjectUid>,
    /// With an interactive pre-annotation, its parameters.
    #[serde(default)]
    pub params: Option<PredictParams>,
}

/// A `/predict`'s `params`: with an interactive pre-annotation, the annotator's regions.
#[derive(Debug, Deserialize)]
pub struct PredictParams {
    /// The regions drawn so far.
    #[serde(default)]
    pub context: Option<AnnotatorRegions>,
}

/// `POST /predict`'s answer: a prediction per task, in the tasks' order.
#[derive(Debug, Serialize)]
pub struct PredictAnswer {
    /// The predictions.
    pub results: Vec<Prediction>,
    /// The version of the model that made them.
    pub model_version: String,
}

/// A `POST /webhook` body.
#[derive(Debug, Deserialize)]
pub struct WebhookRequest {
    /// What happened: `ANNOTATION_CREATED`, `START_TRAINING`, ...
    pub action: String,
    /// The project it happened in.
    #[serde(default)]
    pub project: Option<WebhookProject>,
}

/// A webhook's project.
#[derive(Debug, Deserialize)]
pub struct WebhookProject {
    /// Its id.
    pub id: u64,
}

/// `/webhook`'s answer.
#[derive(Debug, Serialize)]
pub struct WebhookAnswer {
    /// What the backend did about it.
    pub status: String,
}

/// `GET /versions`' answer.
#[derive(Debug, Serialize)]
pub struct VersionsAnswer {
    /// The versions a backend can answer with, the one answering now first.
    pub versions: Vec<String>,
}

/// The webhook actions that ask for training.
pub const TRAINING_ACTIONS: [&str; 3] =
    ["START_TRAINING", "ANNOTATION_CREATED", "ANNOTATION_UPDATED"];
