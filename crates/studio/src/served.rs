//! The model being served: one version at a time, replaced whole when a newer one is accepted.
//! A request holds the version it started with until it is answered, so a swap never mixes two
//! models in one answer.

use std::path::Path;
use std::sync::{Arc, Mutex};

use nertrain_model::ModelFiles;
use nertrain_tagger::{ModelInfo, Tagger, lock};

/// A loaded model and what it is.
pub struct Version {
    /// The tagger.
    pub tagger: Arc<Tagger>,
    /// What its model is.
    pub info: ModelInfo,
    /// A short id of its weights: Label Studio's model version.
    pub id: String,
}

/// Whether the server can tag text with `tagger`: not when its model reads feature columns
/// (POS, chunk, ...) beside the words, which text does not have; the error says so.
pub fn check_servable(tagger: &Tagger) -> std::io::Result<()> {
    if tagger.feature_columns().is_empty() {
        return Ok(());
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!(
            "{}: the model reads feature columns {:?} of its training data beside the words, \
             which the texts a server receives do not have; tag CoNLL lines with those columns \
             (nertrain tag --input FILE --columns), or score them (nertrain eval)",
            tagger.dir().display(),
            tagger.feature_columns()
        ),
    ))
}

impl Version {
    /// `tagger`, with the id of its weights; an error when it cannot tag text
    /// ([`check_servable`]).
    pub fn new(tagger: Tagger) -> std::io::Result<Self> {
        let id = weights_id(tagger.dir())?;
        Self::with_id(tagger, id)
    }

    /// `tagger`, whose weights' id is `id` (already hashed by the caller); an error when it
    /// cannot tag text ([`check_servable`]).
    pub fn with_id(tagger: Tagger, id: String) -> std::io::Result<Self> {
        check_servable(&tagger)?;
        Ok(Self {
            info: tagger.info(),
            tagger: Arc::new(tagger),
            id,
        })
    }
}

/// The weights' short id ([`ModelFiles::weights_id`]) of the model in `dir`.
pub(crate) fn weights_id(dir: &Path) -> std::io::Result<String> {
    ModelFiles::new(dir)
        .weights_id()
        .map_err(|e| std::io::Error::other(e.to_string()))
}

/// The version being served.
pub struct Served(Mutex<Arc<Version>>);

impl Served {
    /// Serves `version`.
    pub fn new(version: Version) -> Self {
        Self(Mutex::new(Arc::new(version)))
    }

    /// The version serving now.
    pub fn get(&self) -> Arc<Version> {
        lock(&self.0).clone()
    }

    /// Serves `version` from now on; requests under way finish with the one they started with.
    pub fn replace(&self, version: Version) {
        *lock(&self.0) = Arc::new(version);
    }
}
