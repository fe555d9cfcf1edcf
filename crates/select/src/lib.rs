//! Choosing what to label next: every text of an unlabelled pool is scored by what the CRF gives
//! exactly (the best paths' probabilities, token marginals, entity confidences, and their spread
//! over passes with dropout on), the highest first, within a budget of texts or of tokens to
//! decide, skipping texts too like one already chosen (in their words, and optionally in what
//! the model makes of them), and the chosen are tagged again so that an annotator corrects the
//! model's entities rather than starts from nothing. With regions, only each text's doubtful
//! parts are to be decided: the rest is left to the model.
//!
//! Active learning over a trained model's [`Tagger`]: the strategies ([`Strategy`]), the
//! doubtful regions ([`Regions`], [`doubtful_regions`]), near duplicates and diversity, and the
//! driver that fills a budget ([`Selector`]), and the one builder of what a task shows
//! ([`PreAnnotation`]). It reads the tagger's public interface only.
//!
//! [`Tagger`]: nertrain_tagger::Tagger

#![warn(missing_docs)]

mod diversity;
mod preannotate;
mod regions;
mod selection;
mod selector;
mod strategy;

pub use preannotate::{PreAnnotation, task_score};
pub use regions::{DEFAULT_FLOOR, PoolDoubt, Regions, doubtful_regions};
pub use selection::{MAX_DIVERSITY, Selection};
pub use selector::{Selected, Selector};
pub use strategy::{BALD_SAMPLES, BudgetUnit, Strategy};
