//! What a caller may change of a model's own decoding settings, checked in one place for every
//! interface (`tag`, `eval`, `serve`, Python), and the thread pool they all tag on.

use crate::{Error, Result, TagOptions, Tagger};

/// The most n-best paths one call may ask for.
pub const MAX_NBEST: usize = 100;

/// The most a document consistency weight may be: far past any weight that helps (those tried
/// on dev end at 32), and short of where the decoder's scores stop being finite.
pub const MAX_CONSISTENCY: f64 = 1000.0;

/// The most sentences one decoding batch may hold.
pub const MAX_BATCH_SENTENCES: usize = 100_000;

/// The most passes with dropout on that one call may ask for: each costs a pass over the
/// texts through the network's tensor operations.
pub const MAX_DROPOUT_SAMPLES: usize = 100;

/// A caller's changes to a model's decoding settings; [`Tagger::options_with`] checks them and
/// makes the [`TagOptions`] a call decodes with. The default changes nothing and asks for
/// entity confidences.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TagSettings {
    /// Decode without the tag scheme's constraints, even when the model was trained with them.
    pub unconstrained: bool,
    /// A document consistency weight other than the model's own (only for a model that reads
    /// documents).
    pub consistency: Option<f64>,
    /// Each entity's probability.
    pub confidence: bool,
    /// Each token's tag marginals.
    pub marginals: bool,
    /// How many best paths to return, 1 to [`MAX_NBEST`].
    pub nbest: usize,
    /// Sentences per decoding batch, 1 to [`MAX_BATCH_SENTENCES`] (by default 100).
    pub batch_size: Option<usize>,
    /// Each sentence's representation ([`TagOptions::representation`]).
    pub representation: bool,
    /// Passes with dropout on for each token's mutual information, 0 to
    /// [`MAX_DROPOUT_SAMPLES`] ([`TagOptions::dropout_samples`]); 0: none.
    pub dropout_samples: usize,
    /// The seed of their dropout masks.
    pub dropout_seed: u64,
    /// Keep every entity of the best path, whatever the tagger's confidence thresholds.
    pub all_entities: bool,
}

impl Default for TagSettings {
    fn default() -> Self {
        Self {
            unconstrained: false,
            consistency: None,
            confidence: true,
            marginals: false,
            nbest: 1,
            batch_size: None,
            representation: false,
            dropout_samples: 0,
            dropout_seed: 0,
            all_entities: false,
        }
    }
}

impl TagSettings {
    /// The options these settings make over a model's own (`defaults`), or the first setting out
    /// of range. `reads_documents`: whether the model reads documents.
    fn resolve(self, defaults: TagOptions, reads_documents: bool) -> Result<TagOptions> {
        let invalid = |option, message: String| Err(Error::InvalidOption { option, message });
        if !(1..=MAX_NBEST).contains(&self.nbest) {
            return invalid(
                "nbest",
                format!("{}; expected 1 to {MAX_NBEST}", self.nbest),
            );
        }
        if self.dropout_samples > MAX_DROPOUT_SAMPLES {
            return invalid(
                "dropout_samples",
                format!(
                    "{}; expected 0 to {MAX_DROPOUT_SAMPLES}",
                    self.dropout_samples
                ),
            );
        }
        if let Some(size) = self.batch_size
            && !(1..=MAX_BATCH_SENTENCES).contains(&size)
        {
            return invalid(
                "batch_size",
                format!("{size}; expected 1 to {MAX_BATCH_SENTENCES}"),
            );
        }
        if let Some(weight) = self.consistency {
            if !reads_documents {
                return invalid(
                    "consistency",
                    "this model reads each sentence alone (data.context = \"sentence\"); the \
                     weight applies to models that read documents"
                        .into(),
                );
            }
            if !(0.0..=MAX_CONSISTENCY).contains(&weight) {
                return invalid(
                    "consistency",
                    format!("{weight}; expected a number from 0 to {MAX_CONSISTENCY}"),
                );
            }
        }
        Ok(TagOptions {
            constrained: defaults.constrained && !self.unconstrained,
            confidence: self.confidence,
            marginals: self.marginals,
            pair_marginals: false,
            temperature: 1.0,
            nbest: self.nbest,
            batch_size: self.batch_size.unwrap_or(defaults.batch_size),
            consistency: self.consistency.unwrap_or(defaults.consistency),
            representation: self.representation,
            dropout_samples: self.dropout_samples,
            dropout_seed: self.dropout_seed,
            thresholds: defaults.thresholds && !self.all_entities,
        })
    }
}

impl Tagger {
    /// Options as the model was trained to be decoded: constrained to its tag scheme when it was
    /// trained so, with its document consistency weight, and entity confidences.
    pub fn options(&self) -> TagOptions {
        let defaults = self.default_options();
        TagSettings::default()
            .resolve(defaults, self.reads_documents())
            .unwrap_or(defaults)
    }

    /// The options `settings` make over the model's own, or an [`Error::InvalidOption`] naming
    /// the first setting out of range or that this model cannot use.
    pub fn options_with(&self, settings: TagSettings) -> Result<TagOptions> {
        settings.resolve(self.default_options(), self.reads_documents())
    }
}

/// A pool of `threads` worker threads to tag (or train) on: by default `RAYON_NUM_THREADS`, or
/// one per core. Their stacks are as deep as a main thread's: the model's recursion is deeper
/// than rayon's default allows.
pub fn thread_pool(threads: Option<usize>) -> Result<rayon::ThreadPool> {
    if threads == Some(0) {
        return Err(Error::InvalidOption {
            option: "threads",
            message: "0; expected at least 1".into(),
        });
    }
    Ok(rayon::ThreadPoolBuilder::new()
        .num_threads(threads.unwrap_or(0))
        .stack_size(8 << 20)
        .thread_name(|i| format!("nertrain-{i}"))
        .build()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> TagOptions {
        TagOptions {
            consistency: 4.0,
            thresholds: true,
            ..TagOptions::default()
        }
    }

    #[test]
    fn settings_change_only_what_they_name() {
        let options = TagSettings::default().resolve(defaults(), true).unwrap();
        assert_eq!(
            options,
            TagOptions {
                confidence: true,
                ..defaults()
            }
        );
        let changed = TagSettings {
            unconstrained: true,
            consistency: Some(0.0),
            marginals: true,
            nbest: 5,
            batch_size: Some(7),
            confidence: false,
            representation: true,
            dropout_samples: 3,
            dropout_seed: 9,
            all_entities: true,
        };
        let options = changed.resolve(defaults(), true).unwrap();
        assert!(!options.constrained && options.marginals && !options.confidence);
        assert_eq!(
            (options.nbest, options.batch_size, options.consistency),
            (5, 7, 0.0)
        );
        assert!(options.representation);
        assert_eq!((options.dropout_samples, options.dropout_seed), (3, 9));
        assert!(!options.thresholds);
    }

    #[test]
    fn settings_out_of_range_name_the_setting() {
        let cases = [
            (
                TagSettings {
                    dropout_samples: MAX_DROPOUT_SAMPLES + 1,
                    ..Default::default()
                },
                true,
                "dropout_samples",
            ),
            (
                TagSettings {
                    nbest: 0,
                    ..Default::default()
                },
                true,
                "nbest: 0; expected 1 to 100",
            ),
            (
                TagSettings {
                    nbest: 101,
                    ..Default::default()
                },
                true,
                "nbest: 101;",
            ),
            (
                TagSettings {
                    batch_size: Some(0),
                    ..Default::default()
                },
                true,
                "batch_size: 0;",
            ),
            (
                TagSettings {
                    consistency: Some(f64::NAN),
                    ..Default::default()
                },
                true,
                "consistency: NaN;",
            ),
            (
                TagSettings {
                    consistency: Some(1001.0),
                    ..Default::default()
                },
                true,
                "consistency: 1001;",
            ),
            (
                TagSettings {
                    consistency: Some(1.0),
                    ..Default::default()
                },
                false,
                "consistency: this model reads each sentence alone",
            ),
        ];
        for (settings, reads_documents, expected) in cases {
            let error = settings.resolve(defaults(), reads_documents).unwrap_err();
            assert!(
                error.to_string().starts_with(expected),
                "{error} for {settings:?}"
            );
        }
    }

    #[test]
    fn a_pool_of_no_threads_is_refused() {
        assert!(
            thread_pool(Some(0))
                .unwrap_err()
                .to_string()
                .starts_with("threads: 0;")
        );
        assert_eq!(thread_pool(Some(2)).unwrap().current_num_threads(), 2);
    }
}
