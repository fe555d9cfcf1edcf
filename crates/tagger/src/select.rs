//! Choosing what to label next: every text of an unlabelled pool is scored by what the CRF gives
//! exactly (the best paths' probabilities, token marginals, entity confidences), the highest
//! first, skipping texts too like one already chosen, and the chosen are tagged again so that an
//! annotator corrects the model's entities rather than starts from nothing.

use std::collections::{HashMap, HashSet};

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use crate::{Error, Layout, Result, TagSettings, Tagged, Tagger};

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
    /// A seeded shuffle: the baseline every other strategy must beat.
    Random,
}

impl Strategy {
    /// Every strategy.
    pub const ALL: [Strategy; 5] = [
        Strategy::LeastConfidence,
        Strategy::Margin,
        Strategy::Entropy,
        Strategy::ExpectedErrors,
        Strategy::Random,
    ];

    /// Its name, as `select --strategy` and Python spell it.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::LeastConfidence => "least-confidence",
            Strategy::Margin => "margin",
            Strategy::Entropy => "entropy",
            Strategy::ExpectedErrors => "expected-errors",
            Strategy::Random => "random",
        }
    }
}

impl Strategy {
    /// What a text is tagged with for its worth to be read off it ([`Tagger::worth_of`]).
    pub fn settings(self) -> TagSettings {
        TagSettings {
            confidence: self == Strategy::ExpectedErrors,
            marginals: matches!(self, Strategy::Entropy | Strategy::ExpectedErrors),
            nbest: match self {
                Strategy::LeastConfidence | Strategy::Margin => 2,
                _ => 1,
            },
            ..TagSettings::default()
        }
    }

    /// How sure the model is of a text of this `worth`, from 0 to 1, lower when the text is
    /// worth more: the order in which Label Studio's uncertainty sampling and an ascending sort
    /// by prediction score take tasks. Bounded worths are turned over (1 − worth); entropy and
    /// expected errors, unbounded, become 1 / (1 + worth).
    pub fn certainty(self, worth: f64) -> f64 {
        match self {
            Strategy::LeastConfidence | Strategy::Margin => (1.0 - worth).clamp(0.0, 1.0),
            Strategy::Entropy | Strategy::ExpectedErrors => 1.0 / (1.0 + worth.max(0.0)),
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

/// What to choose, and how.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Selection {
    /// How a text's worth is measured.
    pub strategy: Strategy,
    /// How many texts to choose.
    pub budget: usize,
    /// A text whose words overlap a chosen text's by more than this (Jaccard similarity of their
    /// lower-cased word sets) is skipped, so that near-duplicates are not labelled twice; 1: no
    /// such step.
    pub max_similarity: f64,
    /// The seed of the random strategy.
    pub seed: u64,
}

impl Default for Selection {
    fn default() -> Self {
        Self {
            strategy: Strategy::Margin,
            budget: 100,
            max_similarity: 0.7,
            seed: 1,
        }
    }
}

/// A chosen text.
#[derive(Debug, Clone, PartialEq)]
pub struct Selected {
    /// Its place in the pool, from 0.
    pub index: usize,
    /// Its worth, by the strategy (higher first).
    pub score: f64,
    /// The model's tags and entities, with confidences: its pre-annotation.
    pub tagged: Tagged,
}

impl Tagger {
    /// Chooses up to `selection.budget` texts of `texts` (a pool of unlabelled texts, each a
    /// document for a model that reads documents), most worth labelling first. Texts without
    /// words are never chosen.
    pub fn select<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        selection: &Selection,
    ) -> Result<Vec<Selected>> {
        if !(0.0..=1.0).contains(&selection.max_similarity) {
            return Err(Error::InvalidOption {
                option: "max_similarity",
                message: format!("{}; expected 0 to 1", selection.max_similarity),
            });
        }
        // The best-scored texts' tagging is kept from scoring, so that those chosen are not
        // decoded again; a few more than the budget, for near-duplicates passed over.
        let keep = selection.budget.saturating_mul(2).saturating_add(32);
        let (scores, mut kept) = self.scored(texts, selection.strategy, selection.seed, keep)?;
        let mut order: Vec<usize> = (0..texts.len())
            .filter(|&i| scores[i].is_finite())
            .collect();
        order.sort_by(|&a, &b| ranked(&scores, a, b));
        let chosen = choose(texts, &order, selection.budget, selection.max_similarity);
        let missing: Vec<usize> = chosen
            .iter()
            .copied()
            .filter(|i| !kept.contains_key(i))
            .collect();
        let missing_texts: Vec<&str> = missing.iter().map(|&i| texts[i].as_ref()).collect();
        let tagged = self.tag(&missing_texts, Layout::Texts, self.options())?;
        kept.extend(missing.into_iter().zip(tagged));
        // Every chosen text is kept now: from scoring, or tagged just above.
        Ok(chosen
            .into_iter()
            .filter_map(|index| {
                kept.remove(&index).map(|tagged| Selected {
                    index,
                    score: scores[index],
                    tagged,
                })
            })
            .collect())
    }

    /// Each text's worth of labelling under `strategy`, higher first (−∞ for a text without
    /// words). Texts are tagged a chunk at a time, so a pool of any size runs in bounded memory.
    pub fn worth<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        strategy: Strategy,
        seed: u64,
    ) -> Result<Vec<f64>> {
        Ok(self.scored(texts, strategy, seed, 0)?.0)
    }

    /// [`Self::worth`], and the tagging of the `keep` best-scored texts as [`Self::tag`] gives
    /// it with the model's options (by their place in `texts`).
    fn scored<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        strategy: Strategy,
        seed: u64,
        keep: usize,
    ) -> Result<(Vec<f64>, HashMap<usize, Tagged>)> {
        if strategy == Strategy::Random {
            let mut order: Vec<usize> = (0..texts.len()).collect();
            order.shuffle(&mut StdRng::seed_from_u64(seed));
            let mut scores = vec![0.0; texts.len()];
            for (rank, &i) in order.iter().enumerate() {
                let blank = texts[i].as_ref().trim().is_empty();
                scores[i] = if blank {
                    f64::NEG_INFINITY
                } else {
                    (texts.len() - rank) as f64
                };
            }
            return Ok((scores, HashMap::new()));
        }
        let options = self.options_with(TagSettings {
            confidence: strategy.settings().confidence || keep > 0,
            ..strategy.settings()
        })?;
        let begins = self.begins();
        let mut scores = Vec::with_capacity(texts.len());
        let mut kept: Vec<(usize, Tagged)> = Vec::new();
        let pool = texts.iter().map(|text| Ok(text.as_ref()));
        for tagged in self.tag_stream(pool, Layout::Texts, options) {
            for mut tagged in tagged? {
                let score = worth(&tagged, strategy, &begins);
                scores.push(score);
                if keep > 0 && score.is_finite() {
                    // As the model's own options tag it: what scoring alone needed goes.
                    tagged.marginals = Vec::new();
                    tagged.nbest = Vec::new();
                    kept.push((scores.len() - 1, tagged));
                }
            }
            if kept.len() > 2 * keep {
                kept.sort_by(|a, b| ranked(&scores, a.0, b.0));
                kept.truncate(keep);
            }
        }
        kept.sort_by(|a, b| ranked(&scores, a.0, b.0));
        kept.truncate(keep);
        Ok((scores, kept.into_iter().collect()))
    }
}

impl Tagger {
    /// `tagged`'s worth of labelling under `strategy`, higher first (−∞ for a text without
    /// words); it must have been tagged with [`Strategy::settings`]. `Random` has no worth of
    /// its own: 0.
    pub fn worth_of(&self, tagged: &Tagged, strategy: Strategy) -> f64 {
        worth(tagged, strategy, &self.begins())
    }

    /// The tags that begin an entity (`B-`, and `S-` in IOBES), in the marginals' order.
    fn begins(&self) -> Vec<bool> {
        self.labels()
            .iter()
            .map(|tag| matches!(tag.split_once('-'), Some(("B" | "S", _))))
            .collect()
    }
}

/// The order of texts `a` and `b` by their `scores`, higher first, then by their place.
fn ranked(scores: &[f64], a: usize, b: usize) -> std::cmp::Ordering {
    scores[b].total_cmp(&scores[a]).then(a.cmp(&b))
}

/// One tagged text's worth under `strategy`; `begins` marks the tags that begin an entity.
fn worth(tagged: &Tagged, strategy: Strategy, begins: &[bool]) -> f64 {
    if tagged.tokens.is_empty() {
        return f64::NEG_INFINITY;
    }
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
            total / tagged.tokens.len() as f64
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
        Strategy::Random => 0.0,
    }
}

/// The first `budget` texts of `order` (indices into `texts`, best first), skipping each whose
/// word set is more than `max_similarity` like (Jaccard) one already chosen.
///
/// Comparing every candidate with every chosen text takes time in the square of the budget.
/// Instead, as in similarity joins (prefix filtering), each set's words are ordered rarest
/// first: two sets of Jaccard similarity at least `t` share a word among the first
/// `|s| − ⌈t·|s|⌉ + 1` of each, so only chosen texts sharing a word of the candidate's prefix
/// with their own prefix are compared, and rare words make those few.
fn choose<S: AsRef<str>>(
    texts: &[S],
    order: &[usize],
    budget: usize,
    max_similarity: f64,
) -> Vec<usize> {
    if max_similarity >= 1.0 {
        return order.iter().copied().take(budget).collect();
    }
    // Words by how many candidate texts have them, then by their text: one order for all sets.
    // Counted in one pass; a text's set is made again when its turn comes, so that memory
    // holds the vocabulary and the chosen texts, not the pool.
    let mut frequency: HashMap<String, usize> = HashMap::new();
    for &i in order {
        for word in word_set(texts[i].as_ref()) {
            *frequency.entry(word).or_default() += 1;
        }
    }
    let mut chosen = Vec::new();
    let mut chosen_sets: Vec<HashSet<&str>> = Vec::new();
    let mut index: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut empty_chosen = false;
    for &i in order {
        if chosen.len() == budget {
            break;
        }
        let mut words: Vec<(usize, &str)> = word_set(texts[i].as_ref())
            .iter()
            .filter_map(|w| frequency.get_key_value(w))
            .map(|(word, &count)| (count, word.as_str()))
            .collect();
        words.sort_unstable();
        // Longer than the bound where rounding might make it short: never missing a pair.
        let prefix = (words.len() + 1)
            .saturating_sub((max_similarity * words.len() as f64 - 1e-9).ceil() as usize)
            .min(words.len());
        let candidate: HashSet<&str> = words.iter().map(|&(_, w)| w).collect();
        let mut compared = HashSet::new();
        let near = if words.is_empty() {
            // Two texts of no words are alike (Jaccard 1).
            empty_chosen
        } else {
            words[..prefix].iter().any(|(_, word)| {
                index.get(word).is_some_and(|others| {
                    others.iter().any(|&other| {
                        compared.insert(other)
                            && jaccard(&chosen_sets[other], &candidate) > max_similarity
                    })
                })
            })
        };
        if near {
            continue;
        }
        empty_chosen |= words.is_empty();
        for &(_, word) in &words[..prefix] {
            index.entry(word).or_default().push(chosen_sets.len());
        }
        chosen.push(i);
        chosen_sets.push(candidate);
    }
    chosen
}

/// A text's words, lower-cased, as a set.
fn word_set(text: &str) -> HashSet<String> {
    text.split_whitespace().map(str::to_lowercase).collect()
}

/// |a ∩ b| / |a ∪ b|; 1 for two empty sets.
fn jaccard<T: Eq + std::hash::Hash>(a: &HashSet<T>, b: &HashSet<T>) -> f64 {
    let shared = a.intersection(b).count();
    let union = a.len() + b.len() - shared;
    if union == 0 {
        1.0
    } else {
        shared as f64 / union as f64
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

    /// What `choose` must give: every candidate compared with every text chosen.
    fn choose_by_comparing_all(texts: &[String], budget: usize, max: f64) -> Vec<usize> {
        let mut chosen: Vec<usize> = Vec::new();
        for i in 0..texts.len() {
            if chosen.len() == budget {
                break;
            }
            let words = word_set(&texts[i]);
            if !chosen
                .iter()
                .any(|&c| jaccard(&word_set(&texts[c]), &words) > max)
            {
                chosen.push(i);
            }
        }
        chosen
    }

    /// Texts of a few words drawn from a small vocabulary, so that many are alike.
    fn pool(size: usize, seed: u64) -> Vec<String> {
        use rand::Rng;
        let mut rng = StdRng::seed_from_u64(seed);
        (0..size)
            .map(|_| {
                let n = rng.random_range(0..7);
                (0..n)
                    .map(|_| format!("w{}", rng.random_range(0..12)))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    #[test]
    fn choosing_by_prefixes_chooses_as_comparing_every_pair() {
        for seed in 0..20 {
            let texts = pool(300, seed);
            let order: Vec<usize> = (0..texts.len()).collect();
            for max in [0.0, 0.2, 0.5, 0.7, 0.9, 0.99, 1.0] {
                for budget in [1, 10, 300] {
                    assert_eq!(
                        choose(&texts, &order, budget, max),
                        choose_by_comparing_all(&texts, budget, max),
                        "seed {seed}, max {max}, budget {budget}"
                    );
                }
            }
        }
    }

    /// Eight times the budget may take about eight times as long, not sixty-four (each
    /// candidate was compared with every text chosen).
    #[test]
    fn choosing_takes_time_in_proportion_to_the_budget() {
        // Sentences sharing common words, each with rare words of its own.
        let texts: Vec<String> = (0..40_000)
            .map(|i| format!("the {} of a {} in the {} and", i, i * 7 + 1, i * 13 + 2))
            .collect();
        let order: Vec<usize> = (0..texts.len()).collect();
        let time = |budget: usize| {
            (0..3)
                .map(|_| {
                    let started = std::time::Instant::now();
                    assert_eq!(choose(&texts, &order, budget, 0.7).len(), budget);
                    started.elapsed().as_secs_f64()
                })
                .fold(f64::INFINITY, f64::min)
        };
        let ratio = time(32_000) / time(4_000);
        assert!(
            ratio < 24.0,
            "8 times the budget took {ratio:.1} times as long"
        );
    }

    #[test]
    fn near_duplicates_are_similar_and_others_not() {
        let a = word_set("Leeds 3 Chelsea 1");
        let b = word_set("leeds 1 Chelsea 3");
        let c = word_set("Anna flew to Lisbon");
        assert_eq!(jaccard(&a, &b), 1.0);
        assert_eq!(jaccard(&a, &c), 0.0);
        assert_eq!(jaccard(&word_set(""), &word_set("")), 1.0);
    }
}
