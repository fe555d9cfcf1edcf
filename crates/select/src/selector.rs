//! The selection driver: a pool scored a chunk at a time, its best texts kept with their tagging,
//! the budget filled in worth order past near duplicates, and the chosen pre-annotated.

use std::collections::HashMap;
use std::ops::Range;

use nertrain_tagger::{Error, Layout, Result, TagOptions, Tagged, Tagger};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use crate::diversity::{choose, diversified};
use crate::regions::{PoolDoubt, TaggedRegions, doubtful_regions, region_offsets};
use crate::strategy::score_of;
use crate::{BudgetUnit, MAX_DIVERSITY, Regions, Selection, Strategy};

/// A chosen text.
#[derive(Debug, Clone, PartialEq)]
pub struct Selected {
    /// Its place in the pool, from 0.
    pub index: usize,
    /// Its worth, by the strategy (higher first); its task's score is the certainty of it
    /// ([`Selected::pre_annotation`]).
    pub worth: f64,
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
        region_offsets(&self.tagged, &self.regions)
    }
}

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

/// Chooses from pools with one model's tagging: [`Selector::select`] fills a budget, and
/// [`Selector::worth_of`] scores what was tagged elsewhere by the same measure.
#[derive(Clone)]
pub struct Selector<'t> {
    tagger: &'t Tagger,
    /// The tags that begin an entity (`B-`, and `S-` in IOBES), in the marginals' order.
    begins: Vec<bool>,
}

impl<'t> Selector<'t> {
    /// Chooses by what `tagger` makes of texts.
    pub fn new(tagger: &'t Tagger) -> Self {
        let begins = tagger
            .tags()
            .iter()
            .map(|tag| matches!(tag.split_once('-'), Some(("B" | "S", _))))
            .collect();
        Self { tagger, begins }
    }

    /// The model it chooses by.
    pub fn tagger(&self) -> &'t Tagger {
        self.tagger
    }
}

impl Selector<'_> {
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
            let options = TagOptions {
                marginals: selection.regions.is_some(),
                ..self.tagger.options()
            };
            let tagged = self.tagger.tag(&missing_texts, Layout::Texts, options)?;
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
                        worth: worth[index],
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
        if selection.strategy == Strategy::Bald && self.tagger.network().dropout.prob == 0.0 {
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
    fn scoring_options(&self, selection: &Selection) -> TagOptions {
        let options = selection.strategy.options(self.tagger.options());
        TagOptions {
            confidence: true,
            marginals: options.marginals || selection.regions.is_some(),
            representation: selection.diversity > 0.0,
            dropout_seed: selection.seed,
            ..options
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
        let options = self.scoring_options(selection);
        let begins = &self.begins[..];
        let floor = selection.regions.map(Regions::threshold);
        // By budget the cut is known once the whole pool is seen.
        let by_budget = matches!(selection.regions, Some(Regions::Budget(_)));
        let mut worth = Vec::with_capacity(texts.len());
        let mut cost = Vec::with_capacity(texts.len());
        let mut kept: Vec<(usize, TaggedRegions)> = Vec::new();
        let mut doubt = PoolDoubt::default();
        let pool = texts.iter().map(|text| Ok(text.as_ref()));
        for tagged in self.tagger.tag_stream(pool, Layout::Texts, options) {
            for tagged in tagged? {
                let i = worth.len();
                let mut score = if strategy == Strategy::Random {
                    random_worth[i]
                } else {
                    score_of(&tagged, strategy, begins)
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

impl Selector<'_> {
    /// `tagged`'s worth of labelling under `strategy`, higher first (−∞ for a text without
    /// words); it must have been tagged with [`Strategy::settings`]. `Random` has no worth of
    /// its own: 0.
    pub fn worth_of(&self, tagged: &Tagged, strategy: Strategy) -> f64 {
        score_of(tagged, strategy, &self.begins)
    }
}

/// The order of texts `a` and `b` by their `scores`, higher first, then by their place.
fn ranked(scores: &[f64], a: usize, b: usize) -> std::cmp::Ordering {
    scores[b].total_cmp(&scores[a]).then(a.cmp(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DEFAULT_FLOOR;
    use crate::regions::certainties;

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
    fn mnlp_is_the_best_paths_log_probability_per_token() {
        let tagger = fixture();
        let selector = Selector::new(&tagger);
        let options = TagOptions {
            nbest: 2,
            ..Strategy::Mnlp.options(tagger.options())
        };
        for tagged in tagger.tag(&POOL, Layout::Texts, options).unwrap() {
            let p = tagged.nbest[0].probability;
            let mnlp = selector.worth_of(&tagged, Strategy::Mnlp);
            let expected = -p.ln() / tagged.tokens.len() as f64;
            assert!((mnlp - expected).abs() < 1e-9, "{mnlp} against {expected}");
        }
    }

    #[test]
    fn bald_does_not_depend_on_the_texts_tagged_with_it() {
        let tagger = fixture();
        let information = |texts: &[&str], seed: u64| {
            let options = TagOptions {
                dropout_seed: seed,
                ..Strategy::Bald.options(tagger.options())
            };
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
        let most = (tagger.tags().len() as f64).ln();
        assert!(alone.iter().all(|&i| (0.0..=most).contains(&i)));
        assert!(alone.iter().any(|&i| i > 1e-6), "{alone:?}");
        assert_ne!(information(&POOL[..1], 2), alone);
    }

    #[test]
    fn token_budgets_count_the_tokens_to_decide() {
        let tagger = fixture();
        let selector = Selector::new(&tagger);
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
            let chosen = selector.select(&POOL, &selection).unwrap();
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
    fn regions_by_budget_take_the_least_sure_tokens_and_do_not_run_dry() {
        let tagger = fixture();
        let selector = Selector::new(&tagger);
        let options = TagOptions {
            marginals: true,
            ..tagger.options()
        };
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
            selector.select(&POOL, &selection).unwrap()
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
        let error = selector.select(&POOL, &selection).unwrap_err().to_string();
        assert!(error.contains("tokens"), "{error}");
    }

    #[test]
    fn diversity_passes_over_what_is_like_a_text_chosen() {
        let tagger = fixture();
        let selector = Selector::new(&tagger);
        let worth = selector.worth(&POOL, Strategy::Margin, 1).unwrap();
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
            let chosen = selector.select(&pool, &selection).unwrap();
            chosen.into_iter().map(|s| s.index).collect()
        };
        assert_eq!(chosen(0.0), [0, 1, 2]);
        let diverse = chosen(10.0);
        assert_eq!(diverse.len(), 3);
        assert_eq!(diverse.iter().filter(|&&i| i < 4).count(), 1, "{diverse:?}");
    }
}
