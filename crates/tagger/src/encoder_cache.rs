//! A frozen encoder's layers kept between commands as texts are tagged: what `select` reads each
//! round of the annotation loop over the same pool, and `eval` over the same gold file.

use std::path::Path;
use std::sync::Mutex;

use nertrain_data::Encoded;
use nertrain_model::encoder::{LayerStore, fine_tuned_note};
use nertrain_model::{Backend, Network};

use crate::{Result, Tagger};

/// What tagging through an encoder cache ([`Tagger::with_encoder_cache`]) has read, computed and
/// could not use since the model was loaded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EncoderCacheTally {
    /// Sentences whose layers were read from the store.
    pub read: usize,
    /// Sentences whose layers were computed (and written to it).
    pub computed: usize,
    /// Files that could not be read (computed again) or written (not kept), and why.
    pub problems: Vec<String>,
}

/// The store and its tally.
pub(crate) struct EncoderCache {
    store: LayerStore,
    tally: Mutex<EncoderCacheTally>,
}

impl EncoderCache {
    /// Sets the layers at each word of `sentences`, from the store or computed by `network`'s
    /// encoder.
    pub(crate) fn fill(&self, network: &Network, sentences: &mut [Encoded], max_word_len: usize) {
        let Some(pretrained) = &network.pretrained else {
            return;
        };
        let filled = self.store.fill(pretrained, sentences, max_word_len);
        let mut tally = crate::lock(&self.tally);
        tally.read += filled.read;
        tally.computed += filled.computed;
        tally.problems.extend(filled.problems());
    }
}

impl Tagger {
    /// This tagger, reading its frozen encoder's layers of each sentence from a store under
    /// `root` where an earlier command (`fit --encoder-cache`, or another tagger) left them, and
    /// writing those it computes there; `backend` is the one its device runs. A model without a
    /// frozen encoder has no such layers, and is returned as it is.
    pub fn with_encoder_cache(mut self, root: &Path, backend: Backend) -> Result<Self> {
        let Some(pretrained) = self.network.pretrained.as_ref().filter(|p| p.frozen) else {
            if self.network.pretrained.is_some() {
                self.encoder_cache_note = Some(fine_tuned_note(root));
            }
            return Ok(self);
        };
        let store = LayerStore::open(root, pretrained, backend)?;
        self.encoder_cache = Some(EncoderCache {
            store,
            tally: Mutex::default(),
        });
        Ok(self)
    }

    /// Why the store named in [`with_encoder_cache`](Self::with_encoder_cache) is not used:
    /// the model's encoder is fine-tuned.
    pub fn encoder_cache_note(&self) -> Option<&str> {
        self.encoder_cache_note.as_deref()
    }

    /// What the encoder cache has read and computed, with the directory of its files; `None`
    /// without one.
    pub fn encoder_cache_tally(&self) -> Option<(&Path, EncoderCacheTally)> {
        let cache = self.encoder_cache.as_ref()?;
        Some((cache.store.dir(), crate::lock(&cache.tally).clone()))
    }
}
