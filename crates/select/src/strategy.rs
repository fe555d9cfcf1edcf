//! How a text's worth of labelling is measured, and what a budget counts.

use nertrain_tagger::{TagOptions, Tagged};
use serde::{Deserialize, Serialize};

/// How a text's worth of labelling is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// 1 − p(best path): the model is least sure of its whole answer.
    LeastConfidence,
    /// 1 − (p(best path) − p(second best path)), from the exact two best paths. A text of several
    /// sentences has no second path of its own; its margin is its best path's probability.
    Margin,
    /// The entropy of each token's tag marginals, averaged over the text's tokens (in nats).
    Entropy,
    /// The expected number of wrong entities, under the model: those predicted that are not in
    /// the text (the sum of 1 − p(entity)) and those in the text that are not predicted (the
    /// expected number of entities, from the marginals of the tags that begin one, less the sum
    /// of p(entity) of those predicted).
    ExpectedErrors,
    /// Maximum normalised log-probability (Shen et al., 2017): −ln p(best path) over the text's
    /// tokens, so that long texts are not preferred for their length alone.
    Mnlp,
    /// BALD by Monte Carlo dropout over the CRF: the mutual information between each token's tag
    /// and the model's weights (the entropy of the tag marginals averaged over
    /// [`BALD_SAMPLES`] passes with dropout on, less their average entropy), averaged over the
    /// text's tokens: what the model does not know, rather than what is ambiguous.
    Bald,
    /// A seeded shuffle: the baseline every other strategy must beat.
    Random,
}

/// Passes with dropout on that [`Strategy::Bald`] averages over.
pub const BALD_SAMPLES: usize = 10;

impl Strategy {
    /// Every strategy.
    pub const ALL: [Strategy; 7] = [
        Strategy::LeastConfidence,
        Strategy::Margin,
        Strategy::Entropy,
        Strategy::ExpectedErrors,
        Strategy::Mnlp,
        Strategy::Bald,
        Strategy::Random,
    ];

    /// Its name, as `select --strategy` and Python spell it.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::LeastConfidence => "least-confidence",
            Strategy::Margin => "margin",
            Strategy::Entropy => "entropy",
            Strategy::ExpectedErrors => "expected-errors",
            Strategy::Mnlp => "mnlp",
            Strategy::Bald => "bald",
            Strategy::Random => "random",
        }
    }
}

impl Strategy {
    /// `base` with what a text is tagged with for its worth to be read off it
    /// ([`Selector::worth_of`](crate::Selector::worth_of)).
    pub fn options(self, base: TagOptions) -> TagOptions {
        TagOptions {
            // The best path's probability comes with the forward-backward pass that entity
            // confidences take.
            confidence: matches!(self, Strategy::ExpectedErrors | Strategy::Mnlp),
            marginals: matches!(self, Strategy::Entropy | Strategy::ExpectedErrors),
            nbest: match self {
                Strategy::LeastConfidence | Strategy::Margin => 2,
                _ => 1,
            },
            dropout_samples: if self == Strategy::Bald {
                BALD_SAMPLES
            } else {
                0
            },
            ..base
        }
    }

    /// How sure the model is of a text of this `worth`, from 0 to 1, lower when the text is
    /// worth more: the order in which Label Studio's uncertainty sampling and an ascending sort
    /// by prediction score take tasks. Bounded worths are turned over (1 − worth); the others,
    /// unbounded, become 1 / (1 + worth).
    pub fn certainty(self, worth: f64) -> f64 {
        match self {
            Strategy::LeastConfidence | Strategy::Margin => (1.0 - worth).clamp(0.0, 1.0),
            Strategy::Entropy | Strategy::ExpectedErrors | Strategy::Mnlp | Strategy::Bald => {
                1.0 / (1.0 + worth.max(0.0))
            }
            Strategy::Random => 0.5,
        }
    }
}

impl std::str::FromStr for Strategy {
    type Err = String;

    fn from_str(name: &str) -> std::result::Result<Self, String> {
        Strategy::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Strategy::ALL.iter().map(|s| s.name()).collect();
                format!("{name:?}; expected one of {}", names.join(", "))
            })
    }
}

/// What a selection's budget counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BudgetUnit {
    /// Texts chosen.
    #[default]
    Texts,
    /// Tokens to decide, as the model cuts the texts: every token of a text chosen, or with
    /// regions only those of its regions. What an annotator reads is roughly what labelling
    /// costs; a text that would overrun what is left is passed over for a shorter one.
    Tokens,
}

impl BudgetUnit {
    /// Its name, as `select --budget-unit` and Python spell it.
    pub fn name(self) -> &'static str {
        match self {
            BudgetUnit::Texts => "texts",
            BudgetUnit::Tokens => "tokens",
        }
    }
}

impl std::str::FromStr for BudgetUnit {
    type Err = String;

    fn from_str(name: &str) -> std::result::Result<Self, String> {
        [BudgetUnit::Texts, BudgetUnit::Tokens]
            .into_iter()
            .find(|u| u.name() == name)
            .ok_or_else(|| format!("{name:?}; expected texts or tokens"))
    }
}

/// One tagged text's worth under `strategy`; `begins` marks the tags that begin an entity.
pub(crate) fn score_of(tagged: &Tagged, strategy: Strategy, begins: &[bool]) -> f64 {
    if tagged.tokens.is_empty() {
        return f64::NEG_INFINITY;
    }
    let tokens = tagged.tokens.len() as f64;
    let probability = |k: usize| tagged.nbest.get(k).map(|p| p.probability);
    match strategy {
        Strategy::LeastConfidence => 1.0 - probability(0).unwrap_or(1.0),
        Strategy::Margin => 1.0 - (probability(0).unwrap_or(1.0) - probability(1).unwrap_or(0.0)),
        Strategy::Entropy => {
            let total: f64 = tagged
                .marginals
                .iter()
                .map(|row| {
                    row.iter()
                        .filter(|&&p| p > 0.0)
                        .map(|&p| -p * p.ln())
                        .sum::<f64>()
                })
                .sum();
            total / tokens
        }
        Strategy::ExpectedErrors => {
            let expected_entities: f64 = tagged
                .marginals
                .iter()
                .map(|row| {
                    row.iter()
                        .zip(begins)
                        .filter(|(_, b)| **b)
                        .map(|(p, _)| p)
                        .sum::<f64>()
                })
                .sum();
            let confidences: f64 = tagged
                .entities
                .iter()
                .map(|e| e.confidence.unwrap_or(1.0))
                .sum();
            tagged.entities.len() as f64 - confidences + (expected_entities - confidences)
        }
        Strategy::Mnlp => -tagged.log_probability.unwrap_or(0.0) / tokens,
        Strategy::Bald => tagged.mutual_information.iter().sum::<f64>() / tokens,
        Strategy::Random => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies_are_named_as_they_parse() {
        for strategy in Strategy::ALL {
            assert_eq!(strategy.name().parse::<Strategy>(), Ok(strategy));
        }
        assert!("best".parse::<Strategy>().unwrap_err().contains("margin"));
    }
}
