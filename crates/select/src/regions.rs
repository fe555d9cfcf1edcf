//! The doubtful regions of a text: the runs of tokens the model is not sure of, widened to whole
//! entities, cut below a threshold or by the pool's token budget.

use std::collections::HashMap;
use std::ops::Range;

use nertrain_tagger::Tagged;

/// A text's tagging and its regions to decide (token ranges).
pub(crate) type TaggedRegions = (Tagged, Vec<Range<usize>>);

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

/// How sure the model is of each token of `tagged`: its most probable tag's marginal.
pub(crate) fn certainties(tagged: &Tagged) -> impl Iterator<Item = f64> + '_ {
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
    pub(crate) fn cut_regions(
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

/// `regions` of `tagged` (ranges of its tokens) in characters of its text (code points, end
/// exclusive).
pub(crate) fn region_offsets(tagged: &Tagged, regions: &[Range<usize>]) -> Vec<(usize, usize)> {
    let tokens = &tagged.tokens;
    regions
        .iter()
        .map(|r| (tokens[r.start].start, tokens[r.end - 1].end))
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubtful_regions_are_widened_to_whole_entities() {
        let token = |i: usize| nertrain_tagger::Token {
            text: "w".into(),
            start: 2 * i,
            end: 2 * i + 1,
        };
        let entity = |tokens: Range<usize>, confidence: f64| nertrain_tagger::Entity {
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
}
