//! Choosing what to label next: every text of an unlabelled pool is scored by what the CRF gives
//! exactly (the best paths' probabilities, token marginals, entity confidences, and their spread
//! over passes with dropout on), the highest first, within a budget of texts or of tokens to
//! decide, skipping texts too like one already chosen (in their words, and optionally in what
//! the model makes of them), and the chosen are tagged again so that an annotator corrects the
//! model's entities rather than starts from nothing. With regions, only each text's doubtful
//! parts are to be decided: the rest is left to the model.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

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
    /// What a text is tagged with for its worth to be read off it ([`Tagger::worth_of`]).
    pub fn settings(self) -> TagSettings {
        TagSettings {
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
            ..TagSettings::default()
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

/// Where the doubtful regions of a text are cut: how sure the model may be of a token (its most
/// probable tag's marginal) that is still to be decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Regions {
    /// Every token below this threshold (above 0, at most 1). A model sure of everything it
    /// still gets wrong leaves nothing below it, and a loop of rounds runs dry.
    Below(f64),
    /// Every token below this floor (above 0, at most 1), as with [`Regions::Below`]; and when
    /// the pool holds fewer than the token budget below it, the cut rises to the pool's least
    /// sure tokens until they fill the budget. A loop of rounds has something to decide while
    /// the model is not wholly sure of a token.
    Budget(f64),
}

/// The floor of `budget` alone ([`Regions::Budget`]): the threshold the loop of rounds did best
/// with on CoNLL-2003 (docs/results).
pub const DEFAULT_FLOOR: f64 = 0.99;

impl Regions {
    /// The threshold, or the floor.
    pub fn threshold(self) -> f64 {
        match self {
            Regions::Below(t) | Regions::Budget(t) => t,
        }
    }
}

impl std::fmt::Display for Regions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Regions::Below(t) => write!(f, "{t}"),
            Regions::Budget(t) if *t == DEFAULT_FLOOR => write!(f, "budget"),
            Regions::Budget(t) => write!(f, "budget:{t}"),
        }
    }
}

impl std::str::FromStr for Regions {
    type Err = String;

    /// `0.99` (below a threshold), `budget` or `budget:0.9` (by the token budget, with a floor:
    /// [`DEFAULT_FLOOR`] without one).
    fn from_str(text: &str) -> std::result::Result<Self, String> {
        let expected = "; expected a marginal above 0, at most 1 (0.99), `budget`, or `budget:` and \
                        one (budget:0.9)";
        let threshold = |t: &str| match t.parse::<f64>() {
            Ok(t) if t > 0.0 && t <= 1.0 => Ok(t),
            _ => Err(format!("{text:?}{expected}")),
        };
        match text.split_once(':') {
            None if text == "budget" => Ok(Regions::Budget(DEFAULT_FLOOR)),
            Some(("budget", floor)) => threshold(floor).map(Regions::Budget),
            None => threshold(text).map(Regions::Below),
            Some(_) => Err(format!("{text:?}{expected}")),
        }
    }
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

/// A chosen text.
#[derive(Debug, Clone, PartialEq)]
pub struct Selected {
    /// Its place in the pool, from 0.
    pub index: usize,
    /// Its worth, by the strategy (higher first).
    pub score: f64,
    /// The model's tags and entities, with confidences: its pre-annotation.
    pub tagged: Tagged,
    /// With [`Selection::regions`]: the regions to decide, by their tokens (ranges of
    /// `tagged.tokens`), in order; empty otherwise.
    pub regions: Vec<Range<usize>>,
}

impl Selected {
    /// The tokens to decide: those of the regions, or with none, the text's.
    pub fn cost(&self) -> usize {
        if self.regions.is_empty() {
            self.tagged.tokens.len()
        } else {
            self.regions.iter().map(ExactSizeIterator::len).sum()
        }
    }

    /// The regions to decide in characters of the text (code points, end exclusive).
    pub fn region_offsets(&self) -> Vec<(usize, usize)> {
        let tokens = &self.tagged.tokens;
        self.regions
            .iter()
            .map(|r| (tokens[r.start].start, tokens[r.end - 1].end))
            .collect()
    }
}

/// A text's tagging and its regions to decide (token ranges).
type TaggedRegions = (Tagged, Vec<Range<usize>>);

/// What scoring the pool gives: each text's worth and cost, and the best-scored texts' tagging
/// with their regions.
struct Scores {
    /// Each text's worth, higher first (−∞ for a text without words, or with regions, one
    /// without a doubtful token).
    worth: Vec<f64>,
    /// Each text's tokens to decide (1 each when the budget counts texts).
    cost: Vec<usize>,
    /// The best-scored texts' tagging and regions, by their place in the pool.
    kept: HashMap<usize, TaggedRegions>,
    /// With regions, the certainty their tokens are below.
    cut: Option<f64>,
}

/// How sure the model is of each token of `tagged`: its most probable tag's marginal.
fn certainties(tagged: &Tagged) -> impl Iterator<Item = f64> + '_ {
    tagged
        .marginals
        .iter()
        .map(|row| row.iter().copied().fold(0.0, f64::max))
}

/// A pool's doubt, token by token (1 − certainty: in f32 so, the certainties close to 1 stay
/// apart), text after text: what a [`Regions::Budget`] cut is found from once the whole pool is
/// seen, by `select` and by a server that refreshes a project's predictions alike.
#[derive(Debug, Clone, Default)]
pub struct PoolDoubt {
    tokens: Vec<f32>,
    /// The place of each text's tokens in `tokens`.
    texts: Vec<Range<usize>>,
}

impl PoolDoubt {
    /// Adds the next text of the pool, tagged with marginals.
    pub fn add(&mut self, tagged: &Tagged) {
        let start = self.tokens.len();
        let doubt = certainties(tagged).map(|c| (1.0 - c) as f32);
        self.tokens.extend(doubt);
        self.texts.push(start..self.tokens.len());
    }

    /// Texts added.
    pub fn texts(&self) -> usize {
        self.texts.len()
    }

    /// The certainty a token must be below to be decided when `regions` cuts a pool with a
    /// budget of `budget` tokens: a threshold as it is; a floor while the pool holds the budget
    /// below it, or else the certainty below which it holds the budget (1 when it holds no
    /// more).
    pub fn cut(&self, regions: Regions, budget: usize) -> f64 {
        match regions {
            Regions::Below(threshold) => threshold,
            Regions::Budget(floor) => budget_cut(&self.tokens, budget, floor),
        }
    }

    /// The texts' regions under the cut `at` and their cost, given those (and their cost) cut
    /// at `floor` as the pool was read: at the floor these stand, as a threshold's; above it,
    /// exact for the texts `kept`, their tokens below it (before widening to entities) for the
    /// rest. A text without one is out.
    fn cut_regions(
        self,
        at: f64,
        floor: f64,
        worth: &mut [f64],
        cost: &mut [usize],
        kept: &mut HashMap<usize, TaggedRegions>,
    ) {
        if at == floor {
            for (w, &c) in worth.iter_mut().zip(cost.iter()) {
                if c == 0 {
                    *w = f64::NEG_INFINITY;
                }
            }
            kept.retain(|&i, _| worth[i].is_finite());
            return;
        }
        for (i, range) in self.texts.into_iter().enumerate() {
            let below = match kept.get_mut(&i) {
                Some((tagged, regions)) => {
                    *regions = doubtful_regions(tagged, at);
                    regions.iter().map(ExactSizeIterator::len).sum()
                }
                None => self.tokens[range]
                    .iter()
                    .filter(|&&d| 1.0 - f64::from(d) < at)
                    .count(),
            };
            cost[i] = below;
            if below == 0 {
                worth[i] = f64::NEG_INFINITY;
            }
        }
        kept.retain(|&i, _| worth[i].is_finite());
    }
}

/// The cut of [`Regions::Budget`]: `floor` while the pool holds `budget` tokens below it;
/// otherwise the certainty below which it holds `budget` tokens (1 when it holds no more).
/// `doubt` is each of the pool's tokens' 1 − certainty (kept so, in f32, to tell apart the
/// certainties close to 1), in any order; it is copied only when the cut rises above the floor.
fn budget_cut(doubt: &[f32], budget: usize, floor: f64) -> f64 {
    let below_floor = doubt
        .iter()
        .filter(|&&d| 1.0 - f64::from(d) < floor)
        .count();
    if below_floor >= budget {
        return floor;
    }
    if doubt.len() <= budget {
        return 1.0;
    }
    // Most doubtful first: `budget` tokens lie before the one found (on a copy: finding it
    // reorders it).
    let mut doubt = doubt.to_vec();
    let (_, &mut nth, _) = doubt.select_nth_unstable_by(budget, |a, b| b.total_cmp(a));
    (1.0 - f64::from(nth)).min(1.0)
}

impl Tagger {
    /// Chooses texts of `texts` (a pool of unlabelled texts, each a document for a model that
    /// reads documents) within `selection.budget`, most worth labelling first. Texts without
    /// words are never chosen.
    pub fn select<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        selection: &Selection,
    ) -> Result<Vec<Selected>> {
        self.check_selection(selection)?;
        // The best-scored texts' tagging is kept from scoring, so that those chosen are not
        // decoded again; a few more than the budget, for those passed over. Each text chosen
        // costs at least one unit of the budget.
        let keep = selection.budget.saturating_mul(2).saturating_add(32);
        let Scores {
            worth,
            cost,
            mut kept,
            cut,
        } = self.scored(texts, selection, keep)?;
        let mut order: Vec<usize> = (0..texts.len()).filter(|&i| worth[i].is_finite()).collect();
        order.sort_by(|&a, &b| ranked(&worth, a, b));
        if selection.diversity > 0.0 {
            order = diversified(&order, &kept, &cost, selection);
        }
        let chosen = choose(
            texts,
            &order,
            |i| cost[i],
            selection.budget,
            selection.max_similarity,
        );
        let missing: Vec<usize> = chosen
            .iter()
            .copied()
            .filter(|i| !kept.contains_key(i))
            .collect();
        if !missing.is_empty() {
            let missing_texts: Vec<&str> = missing.iter().map(|&i| texts[i].as_ref()).collect();
            // Their worth is known: only what their regions need is asked for again.
            let options = self.options_with(TagSettings {
                marginals: selection.regions.is_some(),
                ..TagSettings::default()
            })?;
            let tagged = self.tag(&missing_texts, Layout::Texts, options)?;
            for (i, tagged) in missing.into_iter().zip(tagged) {
                let regions = cut.map_or_else(Vec::new, |cut| doubtful_regions(&tagged, cut));
                kept.insert(i, (tagged, regions));
            }
        }
        // Every chosen text is kept now: from scoring, or tagged just above.
        Ok(chosen
            .into_iter()
            .filter_map(|index| {
                kept.remove(&index).map(|(mut tagged, regions)| {
                    // As the model's own options tag it: what scoring alone needed goes.
                    tagged.marginals = Vec::new();
                    tagged.nbest = Vec::new();
                    tagged.representation = Vec::new();
                    tagged.mutual_information = Vec::new();
                    Selected {
                        index,
                        score: worth[index],
                        tagged,
                        regions,
                    }
                })
            })
            .collect())
    }

    /// Whether `selection` is one this model can choose by: its settings in their ranges.
    fn check_selection(&self, selection: &Selection) -> Result<()> {
        let invalid = |option, message: String| Err(Error::InvalidOption { option, message });
        if !(0.0..=1.0).contains(&selection.max_similarity) {
            return invalid(
                "max_similarity",
                format!("{}; expected 0 to 1", selection.max_similarity),
            );
        }
        if !(0.0..=MAX_DIVERSITY).contains(&selection.diversity) {
            return invalid(
                "diversity",
                format!("{}; expected 0 to {MAX_DIVERSITY}", selection.diversity),
            );
        }
        if let Some(regions) = selection.regions {
            let threshold = regions.threshold();
            if !(threshold > 0.0 && threshold <= 1.0) {
                return invalid(
                    "regions",
                    format!("{threshold}; expected a marginal above 0, at most 1"),
                );
            }
            if matches!(regions, Regions::Budget(_)) && selection.unit != BudgetUnit::Tokens {
                return invalid(
                    "regions",
                    format!(
                        "{regions}: cuts regions by a budget of tokens; count the budget in \
                         tokens"
                    ),
                );
            }
        }
        if selection.strategy == Strategy::Bald && self.network().dropout.prob == 0.0 {
            return invalid(
                "strategy",
                "bald: the model was trained without dropout (model.dropout = 0), so passes \
                 with dropout on all agree; choose another strategy"
                    .into(),
            );
        }
        Ok(())
    }

    /// Each text's worth of labelling under `strategy`, higher first (−∞ for a text without
    /// words). Texts are tagged a chunk at a time, so a pool of any size runs in bounded memory.
    pub fn worth<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        strategy: Strategy,
        seed: u64,
    ) -> Result<Vec<f64>> {
        let selection = Selection {
            strategy,
            seed,
            ..Selection::default()
        };
        Ok(self.scored(texts, &selection, 0)?.worth)
    }

    /// What texts are tagged with to score them for `selection`, and to pre-annotate them.
    fn scoring_settings(&self, selection: &Selection) -> TagSettings {
        let settings = selection.strategy.settings();
        TagSettings {
            confidence: true,
            marginals: settings.marginals || selection.regions.is_some(),
            representation: selection.diversity > 0.0,
            dropout_seed: selection.seed,
            ..settings
        }
    }

    /// Each text's worth and cost, and the tagging of the `keep` best-scored texts (with their
    /// regions) as [`Self::tag`] gives it with the model's options and what scoring needs.
    fn scored<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        selection: &Selection,
        keep: usize,
    ) -> Result<Scores> {
        let strategy = selection.strategy;
        let mut random_worth = Vec::new();
        if strategy == Strategy::Random {
            random_worth = shuffled_worth(texts, selection.seed);
            // Nothing else to read off the texts: they are tagged once chosen.
            let counts_texts = selection.unit == BudgetUnit::Texts;
            if counts_texts && selection.regions.is_none() && selection.diversity == 0.0 {
                return Ok(Scores {
                    cost: vec![1; texts.len()],
                    worth: random_worth,
                    kept: HashMap::new(),
                    cut: None,
                });
            }
        }
        let options = self.options_with(self.scoring_settings(selection))?;
        let begins = self.begins();
        let floor = selection.regions.map(Regions::threshold);
        // By budget the cut is known once the whole pool is seen.
        let by_budget = matches!(selection.regions, Some(Regions::Budget(_)));
        let mut worth = Vec::with_capacity(texts.len());
        let mut cost = Vec::with_capacity(texts.len());
        let mut kept: Vec<(usize, TaggedRegions)> = Vec::new();
        let mut doubt = PoolDoubt::default();
        let pool = texts.iter().map(|text| Ok(text.as_ref()));
        for tagged in self.tag_stream(pool, Layout::Texts, options) {
            for tagged in tagged? {
                let i = worth.len();
                let mut score = if strategy == Strategy::Random {
                    random_worth[i]
                } else {
                    score_of(&tagged, strategy, &begins)
                };
                let regions = floor.map_or_else(Vec::new, |t| doubtful_regions(&tagged, t));
                // By budget the cut may rise above the floor: a text is out once it is known.
                if floor.is_some() && regions.is_empty() && !by_budget {
                    score = f64::NEG_INFINITY;
                }
                if by_budget {
                    doubt.add(&tagged);
                }
                worth.push(score);
                cost.push(text_cost(
                    selection.unit,
                    &tagged,
                    floor.map(|_| &regions[..]),
                ));
                if keep > 0 && score.is_finite() {
                    kept.push((i, (tagged, regions)));
                }
            }
            if kept.len() > 2 * keep {
                kept.sort_by(|a, b| ranked(&worth, a.0, b.0));
                kept.truncate(keep);
            }
        }
        kept.sort_by(|a, b| ranked(&worth, a.0, b.0));
        kept.truncate(keep);
        let mut kept: HashMap<usize, TaggedRegions> = kept.into_iter().collect();
        let mut cut = floor;
        if let (true, Some(regions), Some(floor)) = (by_budget, selection.regions, floor) {
            let at = doubt.cut(regions, selection.budget);
            cut = Some(at);
            doubt.cut_regions(at, floor, &mut worth, &mut cost, &mut kept);
        }
        Ok(Scores {
            worth,
            cost,
            kept,
            cut,
        })
    }
}

/// `Random`'s worth of each of `texts`: their places in an order shuffled with `seed`, the
/// first highest; a blank text's −∞.
fn shuffled_worth<S: AsRef<str>>(texts: &[S], seed: u64) -> Vec<f64> {
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.shuffle(&mut StdRng::seed_from_u64(seed));
    let mut worth = vec![0.0; texts.len()];
    for (rank, &i) in order.iter().enumerate() {
        let blank = texts[i].as_ref().trim().is_empty();
        worth[i] = if blank {
            f64::NEG_INFINITY
        } else {
            (texts.len() - rank) as f64
        };
    }
    worth
}

/// What labelling `tagged` costs in `unit`: with `regions` to decide, their tokens alone.
fn text_cost(unit: BudgetUnit, tagged: &Tagged, regions: Option<&[Range<usize>]>) -> usize {
    match (unit, regions) {
        (BudgetUnit::Texts, _) => 1,
        (BudgetUnit::Tokens, Some(regions)) => regions.iter().map(ExactSizeIterator::len).sum(),
        (BudgetUnit::Tokens, None) => tagged.tokens.len(),
    }
}

impl Tagger {
    /// `tagged`'s worth of labelling under `strategy`, higher first (−∞ for a text without
    /// words); it must have been tagged with [`Strategy::settings`]. `Random` has no worth of
    /// its own: 0.
    pub fn worth_of(&self, tagged: &Tagged, strategy: Strategy) -> f64 {
        score_of(tagged, strategy, &self.begins())
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
fn score_of(tagged: &Tagged, strategy: Strategy, begins: &[bool]) -> f64 {
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

/// The runs of `tagged`'s tokens whose most probable tag has a marginal below `threshold`,
/// widened to the whole of each predicted entity they touch (and covering each entity whose
/// probability is below it), so that an annotator decides whole entities; in order. `tagged`
/// must carry marginals.
pub fn doubtful_regions(tagged: &Tagged, threshold: f64) -> Vec<Range<usize>> {
    let mut doubtful: Vec<bool> = certainties(tagged).map(|c| c < threshold).collect();
    doubtful.resize(tagged.tokens.len(), false);
    for entity in &tagged.entities {
        let tokens = entity.tokens.clone();
        let unsure = entity.confidence.is_some_and(|c| c < threshold);
        if unsure || doubtful[tokens.clone()].iter().any(|&d| d) {
            doubtful[tokens].fill(true);
        }
    }
    let mut regions: Vec<Range<usize>> = Vec::new();
    for (t, &d) in doubtful.iter().enumerate() {
        if !d {
            continue;
        }
        match regions.last_mut() {
            Some(last) if last.end == t => last.end = t + 1,
            _ => regions.push(t..t + 1),
        }
    }
    regions
}

/// `order` (candidates, best first) with its first candidates taken again in turn, each time
/// the one whose place in `order` (1 for the first, towards 0 for the last of them) less
/// `selection.diversity` times its greatest likeness (cosine, at least 0) to one taken before
/// is highest; likeness is of the texts' representations, centred on the candidates'. Only the
/// kept candidates (with representations) are taken again, until they cover twice the budget;
/// the rest follow in their order.
fn diversified(
    order: &[usize],
    kept: &HashMap<usize, TaggedRegions>,
    cost: &[usize],
    selection: &Selection,
) -> Vec<usize> {
    let candidates: Vec<usize> = order
        .iter()
        .copied()
        .take_while(|i| {
            kept.get(i)
                .is_some_and(|(t, _)| !t.representation.is_empty())
        })
        .collect();
    let n = candidates.len();
    if n == 0 {
        return order.to_vec();
    }
    let d = kept[&candidates[0]].0.representation.len();
    let mut mean = vec![0.0f64; d];
    for i in &candidates {
        for (m, &v) in mean.iter_mut().zip(&kept[i].0.representation) {
            *m += f64::from(v) / n as f64;
        }
    }
    let vectors: Vec<Vec<f64>> = candidates
        .iter()
        .map(|i| {
            let centred: Vec<f64> = kept[i]
                .0
                .representation
                .iter()
                .zip(&mean)
                .map(|(&v, m)| f64::from(v) - m)
                .collect();
            let norm = centred.iter().map(|v| v * v).sum::<f64>().sqrt();
            centred
                .into_iter()
                .map(|v| if norm > 0.0 { v / norm } else { 0.0 })
                .collect()
        })
        .collect();
    let mut likeness = vec![0.0f64; n];
    let mut taken = vec![false; n];
    let mut reordered = Vec::with_capacity(order.len());
    let enough = selection.budget.saturating_mul(2);
    let mut covered = 0usize;
    while covered < enough && reordered.len() < n {
        let best = (0..n)
            .filter(|&j| !taken[j])
            .map(|j| {
                let place = 1.0 - j as f64 / n as f64;
                (j, place - selection.diversity * likeness[j])
            })
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
            .map(|(j, _)| j)
            .expect("a candidate left");
        taken[best] = true;
        reordered.push(candidates[best]);
        covered = covered.saturating_add(cost[candidates[best]]);
        for j in 0..n {
            if !taken[j] {
                let cosine: f64 = vectors[j]
                    .iter()
                    .zip(&vectors[best])
                    .map(|(a, b)| a * b)
                    .sum();
                likeness[j] = likeness[j].max(cosine);
            }
        }
    }
    let placed: HashSet<usize> = reordered.iter().copied().collect();
    reordered.extend(order.iter().copied().filter(|i| !placed.contains(i)));
    reordered
}

/// The texts of `order` (indices into `texts`, best first) in turn while their `cost`s fit in
/// `budget` (a text that would overrun what is left is passed over), skipping each whose word
/// set is more than `max_similarity` like (Jaccard) one already chosen.
///
/// Comparing every candidate with every chosen text takes time in the square of the budget.
/// Instead, as in similarity joins (PPJoin's prefix and positional filtering), each set's words
/// are ordered rarest first: two sets of Jaccard similarity above `t` share a word among the
/// first `|s| − ⌈t·|s|⌉ + 1` of each, and the first word they share bounds their overlap by one
/// more than the fewer words either has after it. Chosen texts are indexed by their prefix words,
/// grouped by the word's place and the text's size, so that a whole group whose bound cannot
/// reach the threshold is passed over at once: texts from one template, alike but not near
/// enough, cost one bound each, not a comparison each. Exact: no near duplicate is missed.
fn choose<S: AsRef<str>>(
    texts: &[S],
    order: &[usize],
    cost: impl Fn(usize) -> usize,
    budget: usize,
    max_similarity: f64,
) -> Vec<usize> {
    let mut left = budget;
    if max_similarity >= 1.0 {
        let mut chosen = Vec::new();
        for &i in order {
            if left == 0 {
                break;
            }
            if cost(i) <= left {
                left -= cost(i);
                chosen.push(i);
            }
        }
        return chosen;
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
    // For each word, the chosen texts with it in their prefix, by (its place there, their size).
    let mut index: PrefixIndex = HashMap::new();
    let mut empty_chosen = false;
    for &i in order {
        if left == 0 {
            break;
        }
        if cost(i) > left {
            continue;
        }
        let mut words: Vec<(usize, &str)> = word_set(texts[i].as_ref())
            .iter()
            .filter_map(|w| frequency.get_key_value(w))
            .map(|(word, &count)| (count, word.as_str()))
            .collect();
        words.sort_unstable();
        let candidate: HashSet<&str> = words.iter().map(|&(_, w)| w).collect();
        let near = if words.is_empty() {
            // Two texts of no words are alike (Jaccard 1).
            empty_chosen
        } else {
            let is_near = |other: usize| jaccard(&chosen_sets[other], &candidate) > max_similarity;
            has_near(&words, &index, max_similarity, is_near)
        };
        if near {
            continue;
        }
        empty_chosen |= words.is_empty();
        add_to_index(&mut index, &words, chosen_sets.len(), max_similarity);
        left -= cost(i);
        chosen.push(i);
        chosen_sets.push(candidate);
    }
    chosen
}

/// Chosen words are indexed by text, place and size: each prefix word of text `number` (its
/// words rarest first) with its place and the text's size.
type PrefixIndex<'a> = HashMap<&'a str, HashMap<(usize, usize), Vec<usize>>>;

/// Adds chosen text `number` (its words rarest first) to the index of prefix words.
fn add_to_index<'a>(
    index: &mut PrefixIndex<'a>,
    words: &[(usize, &'a str)],
    number: usize,
    t: f64,
) {
    let size = words.len();
    for (place, &(_, word)) in words[..prefix_len(size, t)].iter().enumerate() {
        index
            .entry(word)
            .or_default()
            .entry((place, size))
            .or_default()
            .push(number);
    }
}

/// How many of a set's rarest words any set more than `t` like it (Jaccard) shares one of:
/// `|s| − ⌈t·|s|⌉ + 1`, longer where rounding might make it short, so that no pair is missed.
fn prefix_len(size: usize, t: f64) -> usize {
    (size + 1)
        .saturating_sub((t * size as f64 - 1e-9).ceil() as usize)
        .min(size)
}

/// Whether a chosen text is more than `t` like `words` (a candidate's words, rarest first), as
/// `is_near` says of a chosen text by its number, asking it only of those that the prefix and
/// positional bounds leave.
fn has_near(
    words: &[(usize, &str)],
    index: &PrefixIndex,
    t: f64,
    mut is_near: impl FnMut(usize) -> bool,
) -> bool {
    let size = words.len();
    let mut compared = HashSet::new();
    for (place, (_, word)) in words[..prefix_len(size, t)].iter().enumerate() {
        let Some(groups) = index.get(word) else {
            continue;
        };
        for (&(other_place, other_size), others) in groups {
            // Met first at this word (a pair more than `t` alike first meets within both
            // prefixes), they share it and at most the fewer words either has after it; more
            // than `t` alike needs an overlap above t·(|x| + |y|) / (1 + t).
            let bound = 1 + (size - place - 1).min(other_size - other_place - 1);
            let needed = t * (size + other_size) as f64 / (1.0 + t);
            if (bound as f64) < needed - 1e-9 {
                continue;
            }
            for &other in others {
                if compared.insert(other) && is_near(other) {
                    return true;
                }
            }
        }
    }
    false
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
                        choose(&texts, &order, |_| 1, budget, max),
                        choose_by_comparing_all(&texts, budget, max),
                        "seed {seed}, max {max}, budget {budget}"
                    );
                }
            }
        }
    }

    /// Texts of one template, alike but not near enough (Jaccard 8/12 to one another), as
    /// machine-made pools are: all are chosen, and a candidate is compared with none of them.
    #[test]
    fn a_templated_pool_costs_a_bound_per_group_not_a_comparison_per_text() {
        let texts: Vec<String> = (0..3_000)
            .map(|i| format!("a b c d e f g h u{i} v{i}"))
            .collect();
        let order: Vec<usize> = (0..texts.len()).collect();
        assert_eq!(
            choose(&texts, &order, |_| 1, 3_000, 0.7),
            choose_by_comparing_all(&texts, 3_000, 0.7)
        );
        assert_eq!(choose(&texts, &order, |_| 1, 3_000, 0.7).len(), 3_000);
        let sets: Vec<Vec<&str>> = texts.iter().map(|t| t.split(' ').collect()).collect();
        let mut frequency: HashMap<&str, usize> = HashMap::new();
        for word in sets.iter().flatten() {
            *frequency.entry(word).or_default() += 1;
        }
        fn ordered<'a>(set: &[&'a str], frequency: &HashMap<&str, usize>) -> Vec<(usize, &'a str)> {
            let count = |w: &str| frequency.get(w).copied().unwrap_or(0);
            let mut words: Vec<(usize, &str)> = set.iter().map(|w| (count(w), *w)).collect();
            words.sort_unstable();
            words
        }
        let mut index: PrefixIndex = HashMap::new();
        let mut compared = 0;
        for (number, set) in sets.iter().enumerate() {
            let words = ordered(set, &frequency);
            assert!(!has_near(&words, &index, 0.7, |_| {
                compared += 1;
                false
            }));
            add_to_index(&mut index, &words, number, 0.7);
        }
        assert_eq!(compared, 0);
        // A true near duplicate (one slot word changed: 9/11) is still found.
        let near = ordered(
            &["a", "b", "c", "d", "e", "f", "g", "h", "u7", "x"],
            &frequency,
        );
        assert!(has_near(&near, &index, 0.7, |other| other == 7));
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
                    assert_eq!(choose(&texts, &order, |_| 1, budget, 0.7).len(), budget);
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

    fn fixture() -> Tagger {
        let run = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../cli/tests/fixtures/before-tokenizers/sentence");
        Tagger::load(&run, &burn::tensor::Device::flex()).unwrap()
    }

    const POOL: [&str; 6] = [
        "Anna Schmidt, who works for Siemens, arrived in Lisbon on Monday.",
        "Peter Weber lives in Berlin.",
        "The Olympic delegation met Weber at 10:30 a.m. in Oslo.",
        "Shares of Atlas Airlines fell 12 percent after the German report.",
        "Dublin's central bank cut rates by 0.25 percentage points on Friday.",
        "Tomas Brennan and Tanaka met in Helsinki to discuss the Greek elections.",
    ];

    #[test]
    fn doubtful_regions_are_widened_to_whole_entities() {
        let token = |i: usize| crate::Token {
            text: "w".into(),
            start: 2 * i,
            end: 2 * i + 1,
        };
        let entity = |tokens: Range<usize>, confidence: f64| crate::Entity {
            label: "PER".into(),
            start: 2 * tokens.start,
            end: 2 * tokens.end - 1,
            text: String::new(),
            confidence: Some(confidence),
            tokens,
        };
        let sure = vec![0.99, 0.01];
        let unsure = vec![0.6, 0.4];
        let tagged = Tagged {
            text: String::new(),
            tokens: (0..8).map(token).collect(),
            tags: Vec::new(),
            // Token 2 is doubtful inside the entity 1..4; token 6 alone; the entity 7..8 is
            // sure token by token but not as a whole.
            marginals: [&sure, &sure, &unsure, &sure, &sure, &sure, &unsure, &sure]
                .map(|row| row.clone())
                .to_vec(),
            entities: vec![entity(1..4, 0.5), entity(7..8, 0.9)],
            nbest: Vec::new(),
            log_probability: None,
            representation: Vec::new(),
            mutual_information: Vec::new(),
        };
        assert_eq!(doubtful_regions(&tagged, 0.95), [1..4, 6..8]);
        assert_eq!(doubtful_regions(&tagged, 0.5), [] as [Range<usize>; 0]);
        // Adjacent runs are one region.
        assert_eq!(
            doubtful_regions(&tagged, 0.999),
            vec![Range { start: 0, end: 8 }]
        );
    }

    #[test]
    fn mnlp_is_the_best_paths_log_probability_per_token() {
        let tagger = fixture();
        let settings = TagSettings {
            nbest: 2,
            ..Strategy::Mnlp.settings()
        };
        let options = tagger.options_with(settings).unwrap();
        for tagged in tagger.tag(&POOL, Layout::Texts, options).unwrap() {
            let p = tagged.nbest[0].probability;
            let mnlp = tagger.worth_of(&tagged, Strategy::Mnlp);
            let expected = -p.ln() / tagged.tokens.len() as f64;
            assert!((mnlp - expected).abs() < 1e-9, "{mnlp} against {expected}");
        }
    }

    #[test]
    fn bald_does_not_depend_on_the_texts_tagged_with_it() {
        let tagger = fixture();
        let information = |texts: &[&str], seed: u64| {
            let settings = TagSettings {
                dropout_seed: seed,
                ..Strategy::Bald.settings()
            };
            let options = tagger.options_with(settings).unwrap();
            tagger.tag(texts, Layout::Texts, options).unwrap()[0]
                .mutual_information
                .clone()
        };
        // The same masks, whatever else is in the batch: the same values, but for the float
        // rounding of a batch of another shape.
        let alone = information(&POOL[..1], 1);
        let batched = information(&POOL, 1);
        assert_eq!(alone.len(), tagger.tokenize(POOL[0]).unwrap().len());
        for (a, b) in alone.iter().zip(&batched) {
            assert!((a - b).abs() < 1e-6, "{alone:?} against {batched:?}");
        }
        let most = (tagger.labels().len() as f64).ln();
        assert!(alone.iter().all(|&i| (0.0..=most).contains(&i)));
        assert!(alone.iter().any(|&i| i > 1e-6), "{alone:?}");
        assert_ne!(information(&POOL[..1], 2), alone);
    }

    #[test]
    fn token_budgets_count_the_tokens_to_decide() {
        let tagger = fixture();
        let tokens: Vec<usize> = POOL
            .iter()
            .map(|t| tagger.tokenize(t).unwrap().len())
            .collect();
        let below = |t| Some(Regions::Below(t));
        for (budget, regions) in [(30, None), (15, None), (6, below(0.99)), (40, below(0.9))] {
            let selection = Selection {
                budget,
                unit: BudgetUnit::Tokens,
                regions,
                ..Selection::default()
            };
            let chosen = tagger.select(&POOL, &selection).unwrap();
            let cost: usize = chosen.iter().map(Selected::cost).sum();
            assert!(cost <= budget && cost > 0, "{cost} of {budget}");
            for selected in &chosen {
                match regions {
                    None => {
                        assert!(selected.regions.is_empty());
                        assert_eq!(selected.cost(), tokens[selected.index]);
                    }
                    Some(_) => assert!(!selected.regions.is_empty()),
                }
            }
            // Nothing left out would have fitted.
            let left = budget - cost;
            let passed_over = (0..POOL.len())
                .filter(|i| !chosen.iter().any(|s| s.index == *i))
                .filter(|&i| regions.is_none() && tokens[i] <= left);
            assert_eq!(passed_over.count(), 0, "budget {budget}");
        }
    }

    #[test]
    fn regions_are_spelled_as_they_parse() {
        for (text, regions) in [
            ("0.99", Regions::Below(0.99)),
            ("budget", Regions::Budget(DEFAULT_FLOOR)),
            ("budget:0.999", Regions::Budget(0.999)),
        ] {
            assert_eq!(text.parse::<Regions>(), Ok(regions));
            assert_eq!(regions.to_string(), text);
        }
        for bad in ["0", "1.5", "budget:0", "budgets", "lowest:0.9", ""] {
            let error = bad.parse::<Regions>().unwrap_err();
            assert!(error.contains("budget:0.9"), "{error}");
        }
    }

    #[test]
    fn the_budget_cut_is_the_floor_until_the_pool_runs_short_of_it() {
        let doubt = |certainties: &[f64]| -> Vec<f32> {
            certainties.iter().map(|c| (1.0 - c) as f32).collect()
        };
        // Three tokens below 0.99: a budget of three takes the floor.
        let pool = [0.5, 0.9, 0.95, 0.999, 0.9999, 1.0];
        assert_eq!(budget_cut(&doubt(&pool), 3, 0.99), 0.99);
        // A budget of four rises to the fourth least sure token's certainty (taking 0.999).
        let cut = budget_cut(&doubt(&pool), 4, 0.99);
        assert!(cut > 0.999 && (cut - 0.9999).abs() < 1e-6, "{cut}");
        // Certainties a hair below 1 stay apart.
        let close = [0.999_999_9, 0.999_999_99, 1.0];
        let cut = budget_cut(&doubt(&close), 1, 0.99);
        assert!(cut > 0.999_999_9 && cut < 1.0, "{cut}");
        // A budget beyond the pool: everything not wholly sure.
        assert_eq!(budget_cut(&doubt(&pool), 10, 0.99), 1.0);
    }

    #[test]
    fn regions_by_budget_take_the_least_sure_tokens_and_do_not_run_dry() {
        let tagger = fixture();
        let options = tagger
            .options_with(TagSettings {
                marginals: true,
                confidence: true,
                ..TagSettings::default()
            })
            .unwrap();
        let tagged = tagger.tag(&POOL, Layout::Texts, options).unwrap();
        let mut sure: Vec<f64> = tagged.iter().flat_map(certainties).collect();
        sure.sort_by(f64::total_cmp);
        // Nothing is doubtful below the least sure token or entity.
        let entities = tagged.iter().flat_map(|t| &t.entities);
        let least = entities
            .filter_map(|e| e.confidence)
            .fold(sure[0], f64::min);
        let select = |budget, regions| {
            let selection = Selection {
                strategy: Strategy::Mnlp,
                budget,
                unit: BudgetUnit::Tokens,
                regions: Some(regions),
                ..Selection::default()
            };
            tagger.select(&POOL, &selection).unwrap()
        };
        // A threshold under every token leaves nothing to decide; the budget still finds the
        // least sure tokens.
        assert!(select(8, Regions::Below(least)).is_empty());
        let chosen = select(8, Regions::Budget(least));
        let cost: usize = chosen.iter().map(Selected::cost).sum();
        assert!(cost > 0 && cost <= 8, "{cost}");
        // Each region holds one of the pool's 9 least sure tokens (the cut is the ninth's
        // certainty, as an f32 of its doubt), or is an entity less sure than that.
        let cut = sure[8] + 1e-6;
        for selected in &chosen {
            let own: Vec<f64> = certainties(&tagged[selected.index]).collect();
            let unsure_entity = |region: &Range<usize>| {
                let mut entities = tagged[selected.index].entities.iter();
                entities.any(|e| e.tokens == *region && e.confidence.is_some_and(|c| c < cut))
            };
            for region in &selected.regions {
                let below = own[region.clone()].iter().any(|&c| c < cut);
                assert!(below || unsure_entity(region), "{region:?}: {own:?}");
            }
        }
        // A floor under which the pool holds the budget: the threshold's regions, exactly.
        let floor = Regions::Budget(sure[20]);
        let as_threshold = select(8, Regions::Below(sure[20]));
        assert_eq!(select(8, floor), as_threshold);
        assert!(!as_threshold.is_empty());
        // Counting texts, a budget of tokens cannot cut regions.
        let selection = Selection {
            regions: Some(Regions::Budget(DEFAULT_FLOOR)),
            ..Selection::default()
        };
        let error = tagger.select(&POOL, &selection).unwrap_err().to_string();
        assert!(error.contains("tokens"), "{error}");
    }

    #[test]
    fn diversity_passes_over_what_is_like_a_text_chosen() {
        let tagger = fixture();
        let worth = tagger.worth(&POOL, Strategy::Margin, 1).unwrap();
        let best = (0..POOL.len())
            .max_by(|&a, &b| worth[a].total_cmp(&worth[b]))
            .unwrap();
        // Four copies of the text worth most, and the rest once each.
        let mut pool = vec![POOL[best]; 4];
        pool.extend((0..POOL.len()).filter(|&i| i != best).map(|i| POOL[i]));
        let chosen = |diversity: f64| -> Vec<usize> {
            let selection = Selection {
                budget: 3,
                max_similarity: 1.0,
                diversity,
                ..Selection::default()
            };
            let chosen = tagger.select(&pool, &selection).unwrap();
            chosen.into_iter().map(|s| s.index).collect()
        };
        assert_eq!(chosen(0.0), [0, 1, 2]);
        let diverse = chosen(10.0);
        assert_eq!(diverse.len(), 3);
        assert_eq!(diverse.iter().filter(|&&i| i < 4).count(), 1, "{diverse:?}");
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
