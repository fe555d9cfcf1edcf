//! The versions a learner trained, on disk: `DIR/vN` each, `DIR/data/vN` for its data, and
//! `DIR/versions.json`, replaced whole after each version, which says which one is served and
//! what each was judged, so that a crash loses nothing and the next start serves the newest
//! accepted version ([`model_to_serve`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{LearnError, file_error};
use crate::judge::LabelF1;
use crate::served::weights_id;

/// The file that says which version is served.
const REGISTRY: &str = "versions.json";

/// A version trained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionRecord {
    /// Its directory's name, `vN`.
    pub name: String,
    /// Its weights' id (Label Studio's model version).
    pub id: Option<String>,
    /// Whether it was served.
    pub served: bool,
    /// Its span F1 on the held-out tasks (or the [`dev`](Self::dev) file), over the project's
    /// labels.
    pub heldout_f1: f64,
    /// The F1 of the version served before it, on the same tasks.
    pub previous_f1: f64,
    /// Each of the project's labels: its gold entities held out, and its F1 under both models.
    #[serde(default)]
    pub labels: BTreeMap<String, LabelF1>,
    /// Entities of the project's labels found by the served model and by this one.
    #[serde(default)]
    pub found: (usize, usize),
    /// Annotated tasks trained on.
    pub train_tasks: usize,
    /// Annotated tasks held out.
    pub heldout_tasks: usize,
    /// The gold dev file that chose its epoch and judged it, in place of held-out tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev: Option<PathBuf>,
    /// Of them, those annotated only in part (`select --regions`), scored on their known parts.
    #[serde(default)]
    pub heldout_partial: usize,
    /// The served model's labels the project lacks: left open in training, not scored.
    #[serde(default)]
    pub open_labels: Vec<String>,
    /// Why it was or was not served.
    pub reason: String,
    /// Seconds from the training's start to the decision.
    pub seconds: f64,
    /// Whether its directory was removed (only its record, log and events are left).
    #[serde(default)]
    pub pruned: bool,
}

/// `DIR/versions.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Registry {
    /// The weights' id of the model the first version continued.
    pub(crate) base: String,
    /// The project learned from.
    pub(crate) project: Option<u64>,
    /// The version served (`vN`), or none: the base model.
    pub(crate) served: Option<String>,
    /// What was served, each time it changed (learnt or chosen by hand), oldest first: `vN`, or
    /// `base`. Written since rollbacks are kept by it; empty in an older registry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) history: Vec<String>,
    pub(crate) versions: Vec<VersionRecord>,
}

impl Registry {
    /// Serves `name` (`vN`, or [`BASE`]) from now on, and notes it in the history.
    pub(crate) fn serve(&mut self, name: &str) {
        self.served = (name != BASE).then(|| name.to_string());
        if self.history.last().map(String::as_str) != Some(name) {
            self.history.push(name.to_string());
        }
    }

    /// The version served before the one served now, when it was a version: the one a
    /// rollback goes back to. From the history, or in an older registry without one, the
    /// accepted version listed before the served one.
    pub(crate) fn served_before(&self) -> Option<String> {
        let served = self.served.as_deref()?;
        if !self.history.is_empty() {
            let before = self.history.iter().rev().skip_while(|n| *n == served);
            return before.take(1).find(|n| *n != BASE).cloned();
        }
        let accepted: Vec<&str> = self
            .versions
            .iter()
            .filter(|r| r.served)
            .map(|r| r.name.as_str())
            .collect();
        let at = accepted.iter().position(|name| *name == served)?;
        at.checked_sub(1).map(|before| accepted[before].to_string())
    }
}

/// Why a versions directory cannot be served from.
#[derive(Debug)]
pub enum RegistryError {
    /// A file could not be read: the registry, or the model's weights.
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The versions continue another model than the one given.
    OtherModel {
        /// The registry.
        registry: PathBuf,
        /// The weights id its versions continue.
        continued: String,
        /// The given model's weights id.
        given: String,
        /// The given model.
        model: PathBuf,
    },
}

impl std::fmt::Display for RegistryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegistryError::Unreadable { path, message } => {
                write!(f, "{}: {message}", path.display())
            }
            RegistryError::OtherModel {
                registry,
                continued,
                given,
                model,
            } => write!(
                f,
                "{}: its versions continue the model of weights {continued}, not {given} ({}); \
                 give that --model, or another --train-into",
                registry.display(),
                model.display()
            ),
        }
    }
}

impl std::error::Error for RegistryError {}

/// The model the server starts with: the newest version served before in `dir`, or `base`.
/// A `dir` that continued another model is an error.
pub fn model_to_serve(dir: &Path, base: &Path) -> Result<PathBuf, RegistryError> {
    let Some(registry) = read_registry(dir)? else {
        return Ok(base.to_path_buf());
    };
    let id = weights_id(base).map_err(|e| RegistryError::Unreadable {
        path: base.to_path_buf(),
        message: e.to_string(),
    })?;
    if registry.base != id {
        return Err(RegistryError::OtherModel {
            registry: dir.join(REGISTRY),
            continued: registry.base,
            given: id,
            model: base.to_path_buf(),
        });
    }
    Ok(match registry.served {
        Some(name) => dir.join(name),
        None => base.to_path_buf(),
    })
}

/// The registry of `dir`'s versions, when it has one.
pub(crate) fn read_registry(dir: &Path) -> Result<Option<Registry>, RegistryError> {
    let path = dir.join(REGISTRY);
    let unreadable = |message: String| RegistryError::Unreadable {
        path: path.clone(),
        message,
    };
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| unreadable(e.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(unreadable(e.to_string())),
    }
}

/// The number of a version's name, `v12`.
fn version_number(name: &str) -> Option<u64> {
    name.strip_prefix('v')?.parse().ok()
}

/// The next version's name, reserved: one past the highest `vN` in `dir` or its `data`,
/// finished, failed or crashed, its `data/vN` made at once, so that no name is used twice.
pub(crate) fn next_name(dir: &Path) -> Result<String, LearnError> {
    let data = dir.join("data");
    std::fs::create_dir_all(&data).map_err(file_error(&data))?;
    let mut highest = 0;
    for place in [dir, data.as_path()] {
        let entries = std::fs::read_dir(place).map_err(file_error(place))?;
        highest = entries
            .filter_map(|e| version_number(e.ok()?.file_name().to_str()?))
            .fold(highest, u64::max);
    }
    let name = format!("v{}", highest + 1);
    let reserved = data.join(&name);
    std::fs::create_dir(&reserved).map_err(file_error(&reserved))?;
    Ok(name)
}

/// The name that serves the model the server started from.
pub const BASE: &str = "base";

/// A version served by hand.
#[derive(Debug, Clone, Serialize)]
pub struct VersionServed {
    /// Its name (`vN`), or `base`.
    pub name: String,
    /// Its weights' id.
    pub id: String,
}

/// Why a version cannot be served.
#[derive(Debug)]
pub enum ServeRefusal {
    /// The server does not learn, so it has no versions.
    NotLearning,
    /// No version has the name.
    Unknown(String),
    /// It was trained, but judged worse than the version served then (the reason).
    NotAccepted(String, String),
    /// Its directory was removed (`--keep-versions`).
    Removed(String),
    /// It could not be loaded.
    Load(String),
}

impl std::fmt::Display for ServeRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeRefusal::NotLearning => f.write_str(
                "this server has no versions: start nertrain serve with --train-into DIR to learn \
                 them",
            ),
            ServeRefusal::Unknown(name) => write!(
                f,
                "no version is named {name:?}; GET /model lists them (or serve {BASE:?})"
            ),
            ServeRefusal::NotAccepted(name, reason) => {
                write!(
                    f,
                    "{name} was never accepted ({reason}); serve an accepted version"
                )
            }
            ServeRefusal::Removed(name) => write!(
                f,
                "{name} was removed from disk (--keep-versions); its record alone is left"
            ),
            ServeRefusal::Load(message) => f.write_str(message),
        }
    }
}

pub(crate) fn write_registry(dir: &Path, registry: &Registry) -> Result<(), LearnError> {
    let bytes = serde_json::to_vec_pretty(registry).expect("the registry serialises");
    let path = dir.join(REGISTRY);
    nertrain_data::io::write_atomic(&path, &bytes).map_err(file_error(&path))
}

/// Files of a version's data directory kept when it is pruned: what says how it went.
const KEPT_WHEN_PRUNED: [&str; 2] = ["fit.log", "events.jsonl"];

/// Removes the versions (and failed trainings) past those kept: the one served, the one served
/// before it, and the `keep` newest others. A removed version's record stays, marked pruned, and
/// its data directory keeps its log and events (and its name, which is never used again).
pub(crate) fn prune(dir: &Path, registry: &mut Registry, keep: usize) {
    let mut kept: Vec<String> = Vec::new();
    if let Some(served) = &registry.served {
        kept.push(served.clone());
        kept.extend(registry.served_before());
    }
    let others = registry
        .versions
        .iter()
        .rev()
        .filter(|r| !kept.contains(&r.name) && !r.pruned)
        .take(keep)
        .map(|r| r.name.clone())
        .collect::<Vec<_>>();
    kept.extend(others);
    let data = dir.join("data");
    let names: Vec<String> = std::fs::read_dir(&data)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| version_number(name).is_some() && !kept.contains(name))
        .collect();
    for name in names {
        let _ = std::fs::remove_dir_all(dir.join(&name));
        if let Ok(entries) = std::fs::read_dir(data.join(&name)) {
            for entry in entries.flatten() {
                if !KEPT_WHEN_PRUNED.contains(&entry.file_name().to_str().unwrap_or_default()) {
                    let path = entry.path();
                    let _ = if path.is_dir() {
                        std::fs::remove_dir_all(&path)
                    } else {
                        std::fs::remove_file(&path)
                    };
                }
            }
        }
        if let Some(record) = registry.versions.iter_mut().find(|r| r.name == name) {
            record.pruned = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_version_never_reuses_a_directory() {
        let dir = std::env::temp_dir().join(format!("nertrain-learn-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("v2")).unwrap();
        std::fs::create_dir_all(dir.join("v10")).unwrap();
        std::fs::create_dir_all(dir.join("data")).unwrap();
        assert_eq!(next_name(&dir).unwrap(), "v11");
        // A training that failed before writing its version (fetching, say) left only its
        // reserved data directory: the next name is past it.
        assert!(dir.join("data/v11").is_dir() && !dir.join("v11").exists());
        assert_eq!(next_name(&dir).unwrap(), "v12");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn record(name: &str, served: bool) -> VersionRecord {
        VersionRecord {
            name: name.into(),
            id: None,
            served,
            heldout_f1: 0.0,
            previous_f1: 0.0,
            labels: BTreeMap::new(),
            found: (0, 0),
            train_tasks: 1,
            heldout_tasks: 1,
            heldout_partial: 0,
            dev: None,
            open_labels: Vec::new(),
            reason: String::new(),
            seconds: 0.0,
            pruned: false,
        }
    }

    #[test]
    fn pruning_keeps_the_served_its_predecessor_and_the_newest_others() {
        let dir = std::env::temp_dir().join(format!("nertrain-prune-{}", std::process::id()));
        let served = [false, true, false, false, true, false, false];
        for n in 1..=served.len() + 1 {
            std::fs::create_dir_all(dir.join(format!("v{n}/checkpoint"))).unwrap();
            std::fs::create_dir_all(dir.join(format!("data/v{n}"))).unwrap();
            std::fs::write(dir.join(format!("data/v{n}/train.json")), "[]").unwrap();
            std::fs::write(dir.join(format!("data/v{n}/fit.log")), "log").unwrap();
        }
        let mut registry = Registry {
            base: "base".into(),
            project: Some(1),
            served: Some("v5".into()),
            history: Vec::new(),
            versions: served
                .iter()
                .enumerate()
                .map(|(i, &s)| record(&format!("v{}", i + 1), s))
                .collect(),
        };
        // v8 failed: no record.
        prune(&dir, &mut registry, 2);
        let kept: Vec<String> = (1..=8)
            .map(|n| format!("v{n}"))
            .filter(|name| dir.join(name).exists())
            .collect();
        assert_eq!(kept, ["v2", "v5", "v6", "v7"]);
        let pruned: Vec<&str> = registry
            .versions
            .iter()
            .filter(|r| r.pruned)
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(pruned, ["v1", "v3", "v4"]);
        // A pruned version's data keeps its log and its name.
        assert!(dir.join("data/v1/fit.log").exists());
        assert!(!dir.join("data/v1/train.json").exists());
        assert_eq!(next_name(&dir).unwrap(), "v9");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn pruning_keeps_the_version_actually_served_before_a_rollback() {
        let dir = std::env::temp_dir().join(format!("nertrain-prune-back-{}", std::process::id()));
        for n in 1..=6 {
            std::fs::create_dir_all(dir.join(format!("v{n}"))).unwrap();
            std::fs::create_dir_all(dir.join(format!("data/v{n}"))).unwrap();
        }
        // v2 then v5 then v6 were learnt and served; the operator rolled back to v5.
        let served = [false, true, false, false, true, true];
        let mut registry = Registry {
            base: "base".into(),
            project: Some(1),
            served: None,
            history: Vec::new(),
            versions: served
                .iter()
                .enumerate()
                .map(|(i, &s)| record(&format!("v{}", i + 1), s))
                .collect(),
        };
        for name in ["v2", "v5", "v6", "v5"] {
            registry.serve(name);
        }
        assert_eq!(registry.served_before().as_deref(), Some("v6"));
        prune(&dir, &mut registry, 0);
        let kept: Vec<String> = (1..=6)
            .map(|n| format!("v{n}"))
            .filter(|name| dir.join(name).exists())
            .collect();
        assert_eq!(kept, ["v5", "v6"]);
        // Back to the base: no version is its predecessor but the one served before it.
        registry.serve(BASE);
        assert_eq!(registry.served, None);
        registry.serve("v5");
        assert_eq!(registry.served_before(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
