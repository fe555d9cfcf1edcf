//! What a selection asks for: the strategy, the budget and what it counts, near duplicates,
//! diversity, regions and the seed.

use crate::{BudgetUnit, Regions, Strategy};

/// What to choose, and how.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Selection {
    /// How a text's worth is measured.
    pub strategy: Strategy,
    /// How many texts, or tokens to decide, to choose ([`Self::unit`]).
    pub budget: usize,
    /// What the budget counts.
    pub unit: BudgetUnit,
    /// A text whose words overlap a chosen text's by more than this (Jaccard similarity of their
    /// lower-cased word sets) is skipped, so that near-duplicates are not labelled twice; 1: no
    /// such step.
    pub max_similarity: f64,
    /// How much a text's likeness to those chosen before it counts against its worth, 0 to
    /// [`MAX_DIVERSITY`]; 0: not at all. Likeness is the cosine of what the model makes of two
    /// texts (the mean of its BiLSTM's output over their words, centred on the candidates');
    /// the best-scored candidates are taken in turn by their place in the worth order (1 for
    /// the best, towards 0 for the last) less this times their greatest likeness to one taken.
    pub diversity: f64,
    /// With regions: only each chosen text's doubtful regions are to be decided, the runs of
    /// tokens whose most probable tag has a marginal below a cut ([`Regions`] says which),
    /// widened to the whole of each predicted entity they touch; a text without one is not
    /// chosen.
    pub regions: Option<Regions>,
    /// The seed of the random strategy and of BALD's dropout masks.
    pub seed: u64,
}

/// The most [`Selection::diversity`] may be: beyond it, worth no longer orders candidates.
pub const MAX_DIVERSITY: f64 = 100.0;

impl Default for Selection {
    fn default() -> Self {
        Self {
            strategy: Strategy::Margin,
            budget: 100,
            unit: BudgetUnit::Texts,
            max_similarity: 0.7,
            diversity: 0.0,
            regions: None,
            seed: 1,
        }
    }
}
