//! What the studio tells its caller as it goes: a training begun, finished or failed, a version
//! served by hand, Label Studio brought in step. The caller (the server) decides where they go.

use std::path::PathBuf;
use std::sync::Arc;

use crate::status::RefreshStatus;
use crate::versions::VersionRecord;

/// What learning did or found, for the log.
#[derive(Debug, Clone, PartialEq)]
pub enum StudioEvent {
    /// A training began.
    Started {
        /// Its version's name (`v3`).
        version: String,
        /// The Label Studio project.
        project: u64,
        /// Annotated tasks trained on, and held out.
        train_tasks: usize,
        /// Tasks held out.
        heldout_tasks: usize,
        /// The dev file that judges it, in place of held-out tasks.
        dev: Option<PathBuf>,
    },
    /// A version was trained, and served or kept.
    Finished(VersionRecord),
    /// A training failed (or a refresh of Label Studio's predictions).
    Failed {
        /// Why.
        message: String,
    },
    /// A version was served by hand (`POST /versions/NAME/serve`).
    Switched {
        /// Its name (`v3`), or `base`.
        name: String,
        /// Its weights' id.
        id: String,
    },
    /// Every task of a project without an annotation has the served version's prediction.
    Refreshed(RefreshStatus),
}

/// Where the studio's events go.
pub type Events = Arc<dyn Fn(StudioEvent) + Send + Sync>;
