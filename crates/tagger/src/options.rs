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

impl TagOptions {
    /// Checks what a caller may have changed, `reads_documents`: whether the model reads
    /// documents; an [`Error::InvalidOption`] names the first option out of range or that the
    /// model cannot use.
    pub fn check(&self, reads_documents: bool) -> Result<()> {
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
        if !(1..=MAX_BATCH_SENTENCES).contains(&self.batch_size) {
            return invalid(
                "batch_size",
                format!("{}; expected 1 to {MAX_BATCH_SENTENCES}", self.batch_size),
            );
        }
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return invalid(
                "temperature",
                format!("{}; expected a number above 0", self.temperature),
            );
        }
        let weight = self.consistency;
        if !(0.0..=MAX_CONSISTENCY).contains(&weight) {
            return invalid(
                "consistency",
                format!("{weight}; expected a number from 0 to {MAX_CONSISTENCY}"),
            );
        }
        if weight != 0.0 && !reads_documents {
            return invalid(
                "consistency",
                "this model reads each sentence alone (data.context = \"sentence\"); the \
                 weight applies to models that read documents"
                    .into(),
            );
        }
        Ok(())
    }
}

impl Tagger {
    /// Options as the model was trained to be decoded ([`TagOptions::of_model`]): what a
    /// caller changes with struct update syntax, and [`Tagger::checked`] checks.
    pub fn options(&self) -> TagOptions {
        TagOptions::of_model(&self.meta)
    }

    /// `options`, or an [`Error::InvalidOption`] naming the first option out of range or that
    /// this model cannot use ([`TagOptions::check`]); every call that tags checks them too.
    pub fn checked(&self, options: TagOptions) -> Result<TagOptions> {
        options.check(self.reads_documents())?;
        Ok(options)
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

    fn options() -> TagOptions {
        TagOptions {
            constrained: true,
            confidence: true,
            marginals: false,
            pair_marginals: false,
            temperature: 1.0,
            nbest: 1,
            batch_size: 100,
            consistency: 4.0,
            representation: false,
            dropout_samples: 0,
            dropout_seed: 0,
            thresholds: true,
        }
    }

    #[test]
    fn options_in_range_pass() {
        assert!(options().check(true).is_ok());
        let sentence_model = TagOptions {
            consistency: 0.0,
            nbest: MAX_NBEST,
            batch_size: MAX_BATCH_SENTENCES,
            dropout_samples: MAX_DROPOUT_SAMPLES,
            temperature: 0.5,
            ..options()
        };
        assert!(sentence_model.check(false).is_ok());
    }

    #[test]
    fn options_out_of_range_name_the_option() {
        let cases = [
            (
                TagOptions {
                    dropout_samples: MAX_DROPOUT_SAMPLES + 1,
                    ..options()
                },
                true,
                "dropout_samples",
            ),
            (
                TagOptions {
                    nbest: 0,
                    ..options()
                },
                true,
                "nbest: 0; expected 1 to 100",
            ),
            (
                TagOptions {
                    nbest: 101,
                    ..options()
                },
                true,
                "nbest: 101;",
            ),
            (
                TagOptions {
                    batch_size: 0,
                    ..options()
                },
                true,
                "batch_size: 0;",
            ),
            (
                TagOptions {
                    temperature: 0.0,
                    ..options()
                },
                true,
                "temperature: 0;",
            ),
            (
                TagOptions {
                    consistency: f64::NAN,
                    ..options()
                },
                true,
                "consistency: NaN;",
            ),
            (
                TagOptions {
                    consistency: 1001.0,
                    ..options()
                },
                true,
                "consistency: 1001;",
            ),
            (
                options(),
                false,
                "consistency: this model reads each sentence alone",
            ),
        ];
        for (options, reads_documents, expected) in cases {
            let error = options.check(reads_documents).unwrap_err();
            assert!(
                error.to_string().starts_with(expected),
                "{error} for {options:?}"
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
