//! Operating points: a label's precision and recall when its entities below a confidence
//! threshold are left out, scored by conlleval's rules (an entity is correct when its words and
//! type match a gold one), and the threshold that keeps a recall a user asks for.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::ChunkCounts;

/// The thresholds `eval --thresholds` shows each label's precision and recall at.
pub const THRESHOLD_GRID: [f64; 12] =
    [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99];

/// One label's predicted entities, each its confidence and whether it is correct, and how many
/// gold entities it has: its precision and recall at any threshold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelConfidences {
    /// Gold entities of the label.
    pub gold: usize,
    /// Predicted entities of the label: confidence, and whether it matches a gold one exactly.
    pub found: Vec<(f64, bool)>,
}

/// A label's scores with its entities below `threshold` left out.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OperatingPoint {
    /// Entities whose confidence is below it are left out.
    pub threshold: f64,
    /// Entities kept.
    pub kept: usize,
    /// Of those, the correct ones.
    pub correct: usize,
    /// Percent of the kept entities that are correct.
    pub precision: f64,
    /// Percent of the gold entities kept and correct.
    pub recall: f64,
    /// Their harmonic mean.
    pub f1: f64,
}

impl LabelConfidences {
    /// The label's scores with its entities below `threshold` left out.
    pub fn at(&self, threshold: f64) -> OperatingPoint {
        let kept = self.found.iter().filter(|(c, _)| *c >= threshold);
        let (found, correct) = kept.fold((0, 0), |(n, k), (_, ok)| (n + 1, k + usize::from(*ok)));
        point(threshold, self.gold, found, correct)
    }

    /// The scores at every threshold that changes them (each entity's confidence), highest
    /// first: the label's precision–recall curve.
    pub fn curve(&self) -> Vec<OperatingPoint> {
        let mut found = self.found.clone();
        found.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut points: Vec<OperatingPoint> = Vec::new();
        let mut correct = 0;
        for (i, &(confidence, ok)) in found.iter().enumerate() {
            correct += usize::from(ok);
            // Entities of equal confidence are kept or left out together.
            if found.get(i + 1).is_some_and(|next| next.0 == confidence) {
                continue;
            }
            points.push(point(confidence, self.gold, i + 1, correct));
        }
        points
    }

    /// The highest threshold whose recall is at least `target` percent, with its scores; `None`
    /// when even every entity kept falls short (a threshold only leaves entities out, so the
    /// decoder's own recall is the most it can keep).
    pub fn for_recall(&self, target: f64) -> Option<OperatingPoint> {
        if target <= 0.0 {
            return Some(self.at(f64::INFINITY));
        }
        self.curve().into_iter().find(|p| p.recall >= target)
    }
}

/// Scores of `found` entities, `correct` of them right, against `gold`.
fn point(threshold: f64, gold: usize, found: usize, correct: usize) -> OperatingPoint {
    let (precision, recall, f1) = ChunkCounts {
        gold,
        found,
        correct,
    }
    .prf();
    OperatingPoint {
        threshold,
        kept: found,
        correct,
        precision,
        recall,
        f1,
    }
}

/// Each label's [`LabelConfidences`] over sentences (or texts), each its gold entities and its
/// predicted ones with their confidences; `label` gives an entity's type. A predicted entity is
/// correct when it equals a gold one: token spans for a CoNLL file, character spans for
/// span-annotated text.
pub fn label_confidences<S: PartialEq>(
    sentences: impl IntoIterator<Item = (Vec<S>, Vec<(S, f64)>)>,
    label: impl Fn(&S) -> &str,
) -> BTreeMap<String, LabelConfidences> {
    let mut labels: BTreeMap<String, LabelConfidences> = BTreeMap::new();
    for (gold, found) in sentences {
        for entity in &gold {
            labels.entry(label(entity).to_string()).or_default().gold += 1;
        }
        for (entity, confidence) in found {
            let correct = gold.contains(&entity);
            let entry = labels.entry(label(&entity).to_string()).or_default();
            entry.found.push((confidence, correct));
        }
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Span;

    fn label() -> LabelConfidences {
        LabelConfidences {
            gold: 4,
            found: vec![
                (0.9, true),
                (0.4, false),
                (0.7, true),
                (0.7, false),
                (0.2, true),
            ],
        }
    }

    #[test]
    fn a_threshold_keeps_the_entities_at_or_above_it() {
        let at = label().at(0.7);
        assert_eq!((at.kept, at.correct), (3, 2));
        assert_eq!((at.precision, at.recall), (100.0 * 2.0 / 3.0, 50.0));
        let all = label().at(0.0);
        assert_eq!((all.kept, all.correct, all.recall), (5, 3, 75.0));
    }

    #[test]
    fn the_curve_has_a_point_per_confidence_and_ties_go_together() {
        let curve = label().curve();
        let thresholds: Vec<f64> = curve.iter().map(|p| p.threshold).collect();
        assert_eq!(thresholds, [0.9, 0.7, 0.4, 0.2]);
        for p in &curve {
            assert_eq!(*p, label().at(p.threshold));
        }
    }

    #[test]
    fn the_threshold_for_a_recall_is_the_highest_that_keeps_it() {
        assert_eq!(label().for_recall(25.0).unwrap().threshold, 0.9);
        assert_eq!(label().for_recall(50.0).unwrap().threshold, 0.7);
        assert_eq!(label().for_recall(60.0).unwrap().threshold, 0.2);
        // Three of four gold entities are found at all: 80% is out of a threshold's reach.
        assert_eq!(label().for_recall(80.0), None);
    }

    #[test]
    fn spans_count_by_label_and_match_by_words_and_type() {
        let span = |start, end, label: &str| Span {
            start,
            end,
            label: label.into(),
        };
        let gold = vec![span(0, 2, "PER"), span(3, 4, "LOC")];
        let found = vec![(span(0, 2, "PER"), 0.8), (span(3, 4, "ORG"), 0.6)];
        let labels = label_confidences([(gold, found)], |s| &s.label);
        assert_eq!(labels["PER"].gold, 1);
        assert_eq!(labels["PER"].found, [(0.8, true)]);
        assert_eq!(labels["LOC"].found, []);
        assert_eq!(labels["ORG"].found, [(0.6, false)]);
        assert_eq!(labels["ORG"].gold, 0);
    }
}
