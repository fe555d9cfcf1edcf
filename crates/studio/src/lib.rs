//! The annotation loop's engine: nertrain as Label Studio's ML backend, with no HTTP in it.
//!
//! - The **backend** ([`Studio`]): a project set up ([`Studio::setup`]), its tasks' predictions
//!   ([`predict`]: the texts a labeling config labels, the annotator's regions to force, each
//!   task's prediction from its texts tagged), the webhook's annotation events
//!   ([`Studio::webhook`]), the versions that may be served ([`Studio::versions`]) and serving
//!   one by hand ([`Studio::serve_version`]).
//! - The **learner** ([`learn`]): fetch a project's annotations, stage them, train a version
//!   (`nertrain fit --job`, in a process of its own), judge it against the served model
//!   (`judge.rs`), publish it ([`versions`]), and bring Label Studio's predictions in step
//!   ([`refresh`]), through Label Studio's REST API ([`client`]).
//!
//! What it does is told as [`StudioEvent`]s; what it refuses, as an [`Error`] (or a
//! [`ServeRefusal`]) that the server answers with its own status.

#![warn(missing_docs)]

mod child;
pub mod client;
mod error;
mod events;
mod judge;
pub mod learn;
pub mod predict;
pub mod refresh;
mod served;
pub mod status;
pub mod versions;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use nertrain_annotate::label_studio::LabelingConfig;
use nertrain_annotate::label_studio::backend::{
    PredictRequest, SetupAnswer, SetupRequest, TRAINING_ACTIONS, VersionsAnswer, WebhookAnswer,
    WebhookRequest,
};
use nertrain_select::{DEFAULT_FLOOR, Regions, Strategy};
use nertrain_tagger::lock;

use crate::predict::Answering;

pub use client::Connection;
pub use events::{Events, StudioEvent};
pub use judge::LabelF1;
pub use learn::{LearnSettings, LearningStatus, Progress};
pub use refresh::RefreshSettings;
pub use served::{Served, Version, check_servable};
pub use status::{Posted, RefreshPhase, RefreshStatus};
pub use versions::{RegistryError, ServeRefusal, VersionRecord, VersionServed, model_to_serve};

/// Why the backend refused a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The request is not what the protocol says, or does not fit the model.
    Invalid(String),
    /// The annotator's regions do not fit the text's words.
    Unfit(String),
    /// Not by this server, or not now: learning is off, or bound to another project.
    Refused(String),
    /// `/setup` names a Label Studio this server does not learn from.
    Forbidden(String),
    /// Something on the server's side failed.
    Internal(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Invalid(message)
            | Self::Unfit(message)
            | Self::Refused(message)
            | Self::Forbidden(message)
            | Self::Internal(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {}

/// How the server works as Label Studio's ML backend.
#[derive(Debug, Clone)]
pub struct StudioOptions {
    /// The strategy whose worth makes a task's score.
    pub strategy: Strategy,
    /// Where the doubtful regions of a task shown as the [`CHECK`] control's regions are
    /// cut, for a project whose labeling config has one: a task's tokens less sure than
    /// this ([`Regions::threshold`]).
    ///
    /// [`CHECK`]: nertrain_annotate::label_studio::CHECK
    pub regions: Regions,
    /// Learn from the annotations into this directory's versions (`v1`, `v2`, ...); off
    /// without it.
    pub train_into: Option<PathBuf>,
    /// Label Studio's address and key, when given (`LABEL_STUDIO_URL`,
    /// `LABEL_STUDIO_API_KEY`); otherwise those `/setup` sends are used.
    pub connection: Option<Connection>,
    /// How a version is trained.
    pub learn: LearnSettings,
}

impl Default for StudioOptions {
    fn default() -> Self {
        Self {
            strategy: Strategy::Margin,
            regions: Regions::Budget(DEFAULT_FLOOR),
            train_into: None,
            connection: None,
            learn: LearnSettings::default(),
        }
    }
}

/// A project as `/setup` described it.
struct Project {
    config: Arc<LabelingConfig>,
}

/// The backend's state: the version served, the projects set up, and the learner.
pub struct Studio {
    strategy: Strategy,
    /// Label Studio's address from the environment, when given.
    connection: Option<Connection>,
    regions: Regions,
    served: Arc<Served>,
    projects: Mutex<HashMap<u64, Project>>,
    learner: Option<learn::Learner>,
}

/// What the webhook says when the server does not learn.
const TRAINING_OFF: &str = "training is off: start nertrain serve with --train-into DIR to learn \
                            from annotations; predictions still work";

impl Studio {
    /// The backend of the version `served`, learning into `options.train_into` when given;
    /// what learning does goes to `events`.
    pub fn start(
        options: &StudioOptions,
        served: Arc<Served>,
        events: Events,
    ) -> std::io::Result<Self> {
        let mut settings = options.learn.clone();
        settings.refresh.strategy = options.strategy;
        settings.refresh.regions = options.regions;
        let learner = match &options.train_into {
            Some(dir) => Some(learn::Learner::start(
                dir.clone(),
                settings,
                options.connection.clone(),
                served.clone(),
                events,
            )?),
            None => None,
        };
        Ok(Self {
            strategy: options.strategy,
            connection: options.connection.clone(),
            regions: options.regions,
            served,
            projects: Mutex::new(HashMap::new()),
            learner,
        })
    }

    /// The strategy whose worth makes a task's score.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// Where regions to decide are cut for `version`: as its refresh found it from the
    /// project's tasks, or before that (and without learning), at the threshold or floor.
    pub fn cut(&self, version: &str) -> f64 {
        let found = self.learner.as_ref().and_then(|l| l.cut_for(version));
        found.unwrap_or_else(|| self.regions.threshold())
    }

    /// The origin of the Label Studio this server works for: from the environment, or the one
    /// learning was set up with.
    pub fn label_studio_origin(&self) -> Option<String> {
        let set_up = || self.learner.as_ref().and_then(learn::Learner::connection);
        let connection = self.connection.clone().or_else(set_up)?;
        Some(connection.origin().to_string())
    }

    /// What learning did, when the server learns.
    pub fn status(&self) -> Option<LearningStatus> {
        self.learner.as_ref().map(learn::Learner::status)
    }

    /// Stops a training under way (its version is left unserved) and waits for the learner
    /// until `deadline` at most.
    pub fn stop(&self, deadline: Instant) {
        if let Some(learner) = &self.learner {
            learner.stop(deadline);
        }
    }

    /// A project set up: its labeling config checked against the served model and kept for
    /// the predictions asked without one; the Label Studio it names learnt from, when the
    /// environment named none. Answers the served version.
    pub fn setup(&self, setup: &SetupRequest) -> Result<SetupAnswer, Error> {
        let project = setup.project.id().ok_or_else(|| {
            Error::Invalid("project: expected Label Studio's \"{id}.{created}\"".into())
        })?;
        let config = LabelingConfig::parse(&setup.schema).map_err(Error::Invalid)?;
        let version = self.served.get();
        config
            .check_labels(&version.info.labels)
            .map_err(Error::Invalid)?;
        if let Some(learner) = &self.learner {
            learner.note_project(project);
        }
        if let Some(learner) = &self.learner
            && !learner.configured()
            && let (Some(url), Some(key)) = (&setup.hostname, &setup.access_token)
            && !url.is_empty()
            && !key.is_empty()
        {
            let connection =
                Connection::new(url, key).map_err(|e| Error::Invalid(format!("hostname: {e}")))?;
            learner.set_up(connection)?;
        }
        let config = Arc::new(config);
        lock(&self.projects).insert(project, Project { config });
        Ok(SetupAnswer {
            model_version: version.id.clone(),
        })
    }

    /// The labeling config a `/predict` names: its own, or its project's as `/setup` gave it.
    pub fn predict_config(&self, predict: &PredictRequest) -> Result<Arc<LabelingConfig>, Error> {
        match (&predict.label_config, &predict.project) {
            (Some(xml), _) => Ok(Arc::new(
                LabelingConfig::parse(xml).map_err(Error::Invalid)?,
            )),
            (None, Some(project)) => project
                .id()
                .and_then(|id| lock(&self.projects).get(&id).map(|p| p.config.clone()))
                .ok_or_else(|| {
                    Error::Invalid("label_config: missing, and the project was not set up".into())
                }),
            (None, None) => Err(Error::Invalid("missing field `label_config`".into())),
        }
    }

    /// What answers a `/predict` by `version`: its labeling config ([`Self::predict_config`]),
    /// checked against the model, with the tasks scored by the server's strategy.
    pub fn answering(
        &self,
        predict: &PredictRequest,
        version: &Version,
    ) -> Result<Arc<Answering>, Error> {
        let config = self.predict_config(predict)?;
        let answering = Answering::new(config, self.strategy, version).map_err(Error::Invalid)?;
        Ok(Arc::new(answering))
    }

    /// An annotation event: one more toward the next training, or a training asked for
    /// outright. Says what will happen.
    pub fn webhook(&self, event: &WebhookRequest) -> Result<WebhookAnswer, Error> {
        if !TRAINING_ACTIONS.contains(&event.action.as_str()) {
            return Ok(WebhookAnswer {
                status: format!("{}: nothing to do", event.action),
            });
        }
        let Some(learner) = &self.learner else {
            // Asked for from Label Studio's page, the user should see why nothing happens.
            if event.action == "START_TRAINING" {
                return Err(Error::Refused(TRAINING_OFF.into()));
            }
            return Ok(WebhookAnswer {
                status: TRAINING_OFF.into(),
            });
        };
        let project = event
            .project
            .as_ref()
            .ok_or_else(|| Error::Invalid("project: missing; expected {\"id\": 1}".into()))?
            .id;
        let status = learner.request(project, event.action == "START_TRAINING")?;
        Ok(WebhookAnswer { status })
    }

    /// Serves the accepted version `name` (`vN`, or `base`: the model the server started from)
    /// from now on, without a restart; Label Studio's predictions are refreshed with it. Reads
    /// the version's files: not for an async runtime's threads.
    pub fn serve_version(&self, name: &str) -> Result<VersionServed, ServeRefusal> {
        let learner = self.learner.as_ref().ok_or(ServeRefusal::NotLearning)?;
        learner.serve_version(name)
    }

    /// The served version's id, then those that may be served instead (the accepted versions
    /// kept on disk, and the model the server started from): Label Studio's list of model
    /// versions.
    pub fn versions(&self) -> VersionsAnswer {
        let mut versions = vec![self.served.get().id.clone()];
        if let Some(status) = self.status() {
            let servable = status
                .versions
                .into_iter()
                .filter(|r| r.served && !r.pruned);
            for id in servable.filter_map(|r| r.id).chain([status.base]) {
                if !versions.contains(&id) {
                    versions.push(id);
                }
            }
        }
        VersionsAnswer { versions }
    }
}
