//! The model as a teacher: each sentence's distribution over tag paths, given as its marginals,
//! for a student CRF distilled from it (`Potentials::distillation_loss`).

use nertrain_data::{Corpus, TeacherMarginals};

use crate::{Error, Prediction, Result, TagOptions, Tagger};

/// The highest temperature a teacher's scores are divided by: far above it, every path is
/// about as likely as every other, and nothing is left to learn.
pub const MAX_TEMPERATURE: f64 = 100.0;

impl Tagger {
    /// Each of `corpus`'s sentences read as this model reads a file (its documents,
    /// dictionary and encoder, under its own constraints), given as the marginals of its
    /// distribution over tag paths over its tag ids, its scores divided by `temperature`
    /// first. `allowed[i]`, where given, is `[len * tags]` for sentence `i` (missing or `None`:
    /// any tag): the distribution is over the paths through allowed tags, as where a
    /// partially labelled sentence's known tags condition it.
    pub fn teacher_marginals<L: Sync>(
        &self,
        corpus: &Corpus<L>,
        temperature: f64,
        allowed: &[Option<Vec<bool>>],
    ) -> Result<Vec<TeacherMarginals>> {
        if !(temperature > 0.0 && temperature <= MAX_TEMPERATURE) {
            return Err(Error::InvalidOption {
                option: "temperature",
                message: format!(
                    "{temperature}; expected a number above 0, at most {MAX_TEMPERATURE}"
                ),
            });
        }
        let options = TagOptions {
            pair_marginals: true,
            temperature,
            confidence: false,
            nbest: 1,
            thresholds: false,
            ..self.options()
        };
        let tags = self.vocab.tags.len();
        let predictions = self.predict_corpus_within(corpus, allowed, options)?;
        Ok(predictions
            .into_iter()
            .map(|p| marginals(p, tags))
            .collect())
    }
}

/// A sentence's marginals from its prediction (made with `pair_marginals`).
fn marginals(prediction: Prediction, tags: usize) -> TeacherMarginals {
    let values = |rows: Vec<Vec<f64>>| rows.into_iter().flatten().map(|p| p as f32).collect();
    TeacherMarginals {
        rows: 1,
        time: prediction.marginals.len(),
        tags,
        unary: values(prediction.marginals),
        pairwise: values(prediction.pair_marginals),
    }
}
