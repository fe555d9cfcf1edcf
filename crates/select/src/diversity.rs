//! Choosing texts unlike one another: near duplicates (in their words) passed over exactly, and
//! optionally candidates reordered by how unlike those taken the model reads them.

use std::collections::{HashMap, HashSet};

use crate::Selection;
use crate::regions::TaggedRegions;

/// `order` (candidates, best first) with its first candidates taken again in turn, each time
/// the one whose place in `order` (1 for the first, towards 0 for the last of them) less
/// `selection.diversity` times its greatest likeness (cosine, at least 0) to one taken before
/// is highest; likeness is of the texts' representations, centred on the candidates'. Only the
/// kept candidates (with representations) are taken again, until they cover twice the budget;
/// the rest follow in their order.
pub(crate) fn diversified(
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
pub(crate) fn choose<S: AsRef<str>>(
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
    use rand::SeedableRng;
    use rand::rngs::StdRng;

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
