//! Pre-annotations: what a model found on a text as a task shows it to an annotator. The one
//! builder of the tasks `select` writes and of the predictions the Label Studio backend answers,
//! so that both give the same entities, regions and score for the same text.

use std::ops::Range;

use nertrain_annotate::{CharSpan, PreAnnotated};
use nertrain_tagger::Tagged;

use crate::regions::{doubtful_regions, region_offsets};
use crate::{Selected, Selector, Strategy};

/// The score of a task whose text is of `worth` by `strategy`: the model's certainty, from 0
/// to 1, lowest for the texts most worth labelling ([`Strategy::certainty`]). The one
/// convention of every task nertrain writes or serves, the order in which Label Studio's
/// uncertainty sampling and an ascending sort by prediction score take them; a text with
/// nothing to decide (no words, or no doubtful region) is certain.
pub fn task_score(strategy: Strategy, worth: f64) -> f64 {
    if worth.is_finite() {
        strategy.certainty(worth)
    } else {
        1.0
    }
}

/// A text's pre-annotation.
#[derive(Debug, Clone, PartialEq)]
pub struct PreAnnotation {
    /// The text.
    pub text: String,
    /// The model's entities (code points, as Label Studio counts them), each with its
    /// confidence.
    pub entities: Vec<(CharSpan, f64)>,
    /// The regions to decide (code points, end exclusive), in order; empty when the whole text
    /// is to be decided.
    pub regions: Vec<(usize, usize)>,
    /// The task's score ([`task_score`]).
    pub score: f64,
}

impl PreAnnotation {
    /// `tagged` as a task shows it, its regions to decide given by their tokens (ranges of
    /// `tagged.tokens`), scored by the certainty of its `worth` by `strategy`.
    pub fn new(tagged: Tagged, regions: &[Range<usize>], strategy: Strategy, worth: f64) -> Self {
        let regions = region_offsets(&tagged, regions);
        let entities = tagged
            .entities
            .iter()
            .map(|e| (e.span(), e.confidence.unwrap_or(1.0)))
            .collect();
        Self {
            text: tagged.text,
            entities,
            regions,
            score: task_score(strategy, worth),
        }
    }

    /// Leaves out the entities whose label `shown` refuses: how many went.
    pub fn keep_labels(&mut self, shown: impl Fn(&str) -> bool) -> usize {
        let before = self.entities.len();
        self.entities.retain(|(span, _)| shown(&span.label));
        before - self.entities.len()
    }

    /// As a task of a file of tasks: the pool's `line` (from 1), and whether it reads back
    /// annotated in its regions only (`partial`).
    pub fn into_task(self, line: usize, partial: bool) -> PreAnnotated {
        PreAnnotated {
            text: self.text,
            spans: self.entities,
            score: self.score,
            line,
            regions: self.regions,
            partial,
        }
    }
}

impl Selected {
    /// Its task's score by `strategy` (the one that chose it).
    pub fn task_score(&self, strategy: Strategy) -> f64 {
        task_score(strategy, self.worth)
    }

    /// Its pre-annotation, scored by `strategy` (the one that chose it).
    pub fn pre_annotation(self, strategy: Strategy) -> PreAnnotation {
        PreAnnotation::new(self.tagged, &self.regions, strategy, self.worth)
    }
}

impl Selector<'_> {
    /// The pre-annotation of a text the model tagged, scored by `strategy`, with the regions
    /// whose tokens are less sure than `cut` to decide when one is given (the text tagged with
    /// marginals).
    pub fn pre_annotate(
        &self,
        tagged: Tagged,
        strategy: Strategy,
        cut: Option<f64>,
    ) -> PreAnnotation {
        let worth = self.worth_of(&tagged, strategy);
        let regions = cut.map_or_else(Vec::new, |cut| doubtful_regions(&tagged, cut));
        PreAnnotation::new(tagged, &regions, strategy, worth)
    }
}
