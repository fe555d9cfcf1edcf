//! Steps 3 to 5 for one version: trained, judged against the served one, recorded and served
//! when it does no worse, and Label Studio brought in step.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use nertrain_tagger::{Tagger, lock};

use crate::error::LearnError;
use crate::events::StudioEvent;
use crate::judge::{JudgedOn, Judgement};
use crate::served::{Version, weights_id};
use crate::versions::{BASE, VersionRecord, next_name, prune, write_registry};

use super::jobs::{new_version_scores, score, train};
use super::stage::{Staged, fetch, stage};
use super::{Progress, Shared};

/// Trains, judges and (when it does no worse) serves one version: fetch, stage, train, judge,
/// publish.
pub(super) fn train_version(shared: &Shared, project: u64) -> Result<(), LearnError> {
    let started = Instant::now();
    let name = next_name(&shared.dir)?;
    let epochs = shared.settings.epochs;
    let set_progress = |epoch: usize| {
        let mut state = lock(&shared.state);
        let progress = Progress {
            version: name.clone(),
            epoch,
            epochs,
            seconds: 0.0,
        };
        state.training = Some((progress, started));
    };
    set_progress(0);
    let fetched = fetch(shared, project, &name)?;
    let current = shared.served.get();
    let staged = stage(shared, &name, fetched, &current.info.labels)?;
    (shared.events)(StudioEvent::Started {
        version: name.clone(),
        project,
        train_tasks: staged.train_tasks,
        heldout_tasks: staged.heldout_tasks,
        dev: shared.settings.dev.clone(),
    });
    let from = current.tagger.dir().to_path_buf();
    let output = shared.dir.join(&name);
    train(shared, &name, &staged, &from, &output, set_progress)?;
    let trained = Trained {
        name,
        staged,
        output,
        started,
    };
    judge_and_publish(shared, project, &trained, current)
}

/// A version trained, to be judged.
pub(super) struct Trained {
    pub(super) name: String,
    pub(super) staged: Staged,
    pub(super) output: PathBuf,
    pub(super) started: Instant,
}

/// Judges the version `trained` against the model served (`against`, the one it continued, or
/// the one served since), and publishes it. A version served by hand while it was judged (a
/// rollback) is judged against in turn: a version is served over it only if it does no worse
/// than that model, and its reason says so.
pub(super) fn judge_and_publish(
    shared: &Shared,
    project: u64,
    trained: &Trained,
    mut against: Arc<Version>,
) -> Result<(), LearnError> {
    let Trained {
        name,
        staged,
        output,
        started,
    } = trained;
    let on = if staged.dev {
        JudgedOn::Dev
    } else {
        JudgedOn::Heldout
    };
    let scored = |model: &Path| score(shared, name, staged, model, "heldout-served");
    let new = new_version_scores(shared, name, staged, output)?;
    // Hashed once: however often the version is judged again, its weights are the same.
    let id = weights_id(output).map_err(|e| LearnError::Load(e.to_string()))?;
    let mut previous = scored(against.tagger.dir())?;
    let mut chosen_meanwhile: Option<String> = None;
    loop {
        let mut judgement = Judgement::of(
            &previous,
            &new,
            &staged.labels,
            shared.settings.label_margin,
            on,
        );
        if let Some(chosen) = &chosen_meanwhile {
            judgement.reason = format!(
                "judged against {chosen}, served by hand while it trained: {}",
                judgement.reason
            );
        }
        let version = if judgement.served {
            Some(load_version(shared, output, &id, &against.tagger)?)
        } else {
            None
        };
        let record = VersionRecord {
            name: name.clone(),
            id: Some(id.clone()),
            served: judgement.served,
            heldout_f1: judgement.new_f1,
            previous_f1: judgement.previous_f1,
            labels: judgement.labels,
            found: judgement.found,
            train_tasks: staged.train_tasks,
            heldout_tasks: staged.heldout_tasks,
            heldout_partial: staged.heldout_partial,
            dev: shared.settings.dev.clone(),
            open_labels: staged.open_labels.clone(),
            reason: judgement.reason,
            seconds: started.elapsed().as_secs_f64(),
            pruned: false,
        };
        match publish(shared, project, record, version, &against.id)? {
            Published::Done => return Ok(()),
            Published::ServedMeanwhile { name, version } => {
                previous = scored(version.tagger.dir())?;
                chosen_meanwhile = Some(name);
                against = version;
            }
        }
    }
}

/// The new version (its weights' id `id`), loaded on the served model's device to be served
/// with the server's dictionaries.
pub(super) fn load_version(
    shared: &Shared,
    output: &Path,
    id: &str,
    served: &Tagger,
) -> Result<Version, LearnError> {
    let trained = Tagger::load_with_threads(output, served.device(), shared.settings.tag_threads)
        .and_then(|tagger| {
            tagger.with_dictionaries(
                &shared.settings.dictionaries,
                shared.settings.replace_dictionary,
            )
        })
        .map_err(|e| LearnError::Load(format!("{}: {e}", output.display())))?;
    Version::with_id(trained, id.to_string()).map_err(|e| LearnError::Load(e.to_string()))
}

/// What [`publish`] did.
pub(super) enum Published {
    /// The version was recorded (and served, if it was to be).
    Done,
    /// Nothing: the model served is no longer the one the version was judged against (one was
    /// served by hand meanwhile); it is to be judged against this one.
    ServedMeanwhile {
        /// Its name (`vN`, or `base`).
        name: String,
        version: Arc<Version>,
    },
}

/// Publish: the version recorded in `versions.json` (replaced whole), then served if it is to be,
/// so that a restart serves it too; then the versions past those kept are removed. Label Studio
/// is refreshed either way: into the new version, or with the served one's regions re-cut for
/// the pool the new annotations left (posted only if the cut moved). Nothing is done when the
/// model served is not `judged_against` (its id) any more.
pub(super) fn publish(
    shared: &Shared,
    project: u64,
    record: VersionRecord,
    version: Option<Version>,
    judged_against: &str,
) -> Result<Published, LearnError> {
    let mut state = lock(&shared.state);
    // Versions are served by hand under this lock too: what is served now stays so until the
    // record is written.
    let served = shared.served.get();
    if served.id != judged_against {
        let name = state.registry.served.clone();
        return Ok(Published::ServedMeanwhile {
            name: name.unwrap_or_else(|| BASE.to_string()),
            version: served,
        });
    }
    let mut registry = state.registry.clone();
    registry.project = Some(project);
    registry.versions.push(record.clone());
    if record.served {
        registry.serve(&record.name);
    }
    prune(&shared.dir, &mut registry, shared.settings.keep_versions);
    write_registry(&shared.dir, &registry)?;
    if let Some(version) = version {
        shared.served.replace(version);
    }
    state.registry = registry;
    drop(state);
    (shared.events)(StudioEvent::Finished(record));
    refresh(shared, project);
    Ok(Published::Done)
}

/// Asks for `project`'s predictions to be refreshed with the served version, when Label Studio
/// can be reached.
pub(super) fn refresh(shared: &Shared, project: u64) {
    if let Some(connection) = shared.connection() {
        shared.refresher.want(project, connection);
    }
}
