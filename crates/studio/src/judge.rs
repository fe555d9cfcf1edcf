//! Whether a new version is served: its held-out scores against the served model's, over the
//! project's labels only.

use std::collections::BTreeMap;

use nertrain_data::{ChunkCounts, Scores};
use serde::{Deserialize, Serialize};

/// A label's held-out F1 under the served model and the new one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelF1 {
    /// Its gold entities in the held-out texts.
    pub gold: usize,
    /// The served model's F1.
    pub previous: f64,
    /// The new version's F1.
    pub new: f64,
}

/// What a version is judged on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JudgedOn {
    /// The annotated tasks held out.
    Heldout,
    /// The gold dev file.
    Dev,
}

impl JudgedOn {
    /// The F1 it gives, by name.
    fn f1(self) -> &'static str {
        match self {
            Self::Heldout => "held-out F1",
            Self::Dev => "dev F1",
        }
    }

    /// It, as the subject of a sentence with no gold entity.
    fn without_entities(self) -> &'static str {
        match self {
            Self::Heldout => "the held-out tasks have",
            Self::Dev => "the dev file has",
        }
    }
}

/// Whether a new version is served, judged on the held-out texts (or the dev file) by the
/// project's labels only.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Judgement {
    pub(crate) served: bool,
    pub(crate) previous_f1: f64,
    pub(crate) new_f1: f64,
    /// Each project label's F1 under both models.
    pub(crate) labels: BTreeMap<String, LabelF1>,
    /// Entities of the project's labels found by the served model and the new one: on held-out
    /// texts without a gold entity, each is false, and they judge.
    pub(crate) found: (usize, usize),
    pub(crate) reason: String,
}

impl Judgement {
    /// Judges `new` against `previous` (each model's held-out scores) on `labels` alone: served
    /// when its F1 is not below the served model's and it loses no more than `margin` F1 points
    /// on any label with gold entities; on texts with no gold entity of those labels, when it
    /// finds no more (false) entities than the served model.
    pub(crate) fn of(
        previous: &Scores,
        new: &Scores,
        labels: &[String],
        margin: f64,
        on: JudgedOn,
    ) -> Self {
        let counts = |scores: &Scores| -> ChunkCounts {
            labels
                .iter()
                .filter_map(|label| scores.types.get(label))
                .map(ChunkCounts::from)
                .sum()
        };
        let (before, after) = (counts(previous), counts(new));
        let f1 = |scores: &Scores, label: &str| scores.types.get(label).map_or(0.0, |s| s.f1);
        let table: BTreeMap<String, LabelF1> = labels
            .iter()
            .map(|label| {
                let gold = new.types.get(label).map_or(0, |s| s.gold);
                let judged = LabelF1 {
                    gold,
                    previous: f1(previous, label),
                    new: f1(new, label),
                };
                (label.clone(), judged)
            })
            .collect();
        let (previous_f1, new_f1) = (before.prf().2, after.prf().2);
        let found = (before.found, after.found);
        let (served, reason) = if after.gold == 0 {
            let served = found.1 <= found.0;
            let reason = format!(
                "{} no entity of the project's labels: it finds {} (all false) against the \
                 served model's {}",
                on.without_entities(),
                found.1,
                found.0
            );
            (served, reason)
        } else {
            let lost: Vec<String> = table
                .iter()
                .filter(|(_, l)| l.gold > 0 && l.previous - l.new > margin)
                .map(|(label, l)| format!("{label} {:.2} → {:.2}", l.previous, l.new))
                .collect();
            let f1 = on.f1();
            if new_f1 < previous_f1 {
                let reason =
                    format!("{f1} {new_f1:.2} is below the served model's {previous_f1:.2}");
                (false, reason)
            } else if !lost.is_empty() {
                let reason = format!(
                    "{f1} {new_f1:.2} (served: {previous_f1:.2}), but it loses more than \
                     {margin} F1 points on {}",
                    lost.join(", ")
                );
                (false, reason)
            } else {
                let reason = format!(
                    "{f1} {new_f1:.2} is not below the served model's {previous_f1:.2}, and no \
                     label loses more than {margin} points"
                );
                (true, reason)
            }
        };
        Self {
            served,
            previous_f1,
            new_f1,
            labels: table,
            found,
            reason: if served {
                reason
            } else {
                format!("{reason}; kept on disk, not served")
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scores(types: &[(&str, usize, usize, usize)]) -> Scores {
        let mut report = nertrain_data::Report {
            tokens: 100,
            correct_tags: 90,
            overall: Default::default(),
            by_type: BTreeMap::new(),
        };
        for &(label, gold, found, correct) in types {
            let counts = nertrain_data::ChunkCounts {
                gold,
                found,
                correct,
            };
            report.by_type.insert(label.to_string(), counts);
            report.overall.gold += gold;
            report.overall.found += found;
            report.overall.correct += correct;
        }
        report.scores()
    }

    #[test]
    fn entity_free_held_out_tasks_judge_by_false_entities() {
        let labels = ["PER".to_string()];
        let previous = scores(&[("PER", 0, 18, 0)]);
        let worse = scores(&[("PER", 0, 36, 0)]);
        let judged = Judgement::of(&previous, &worse, &labels, 5.0, JudgedOn::Heldout);
        assert!(!judged.served, "{judged:?}");
        assert!(judged.reason.contains("finds 36"), "{}", judged.reason);
        assert!(
            judged
                .reason
                .starts_with("the held-out tasks have no entity")
        );
        let on_dev = Judgement::of(&previous, &worse, &labels, 5.0, JudgedOn::Dev);
        assert!(
            on_dev.reason.starts_with("the dev file has no entity"),
            "{}",
            on_dev.reason
        );
        assert_eq!(judged.found, (18, 36));
        let better = scores(&[("PER", 0, 4, 0)]);
        assert!(Judgement::of(&previous, &better, &labels, 5.0, JudgedOn::Heldout).served);
    }

    #[test]
    fn labels_the_project_lacks_are_not_scored() {
        // The served model finds LOC entities the PER-only project never labelled: they are
        // not counted against it, nor is forgetting them counted for the new version.
        let labels = ["PER".to_string()];
        let previous = scores(&[("PER", 10, 10, 9), ("LOC", 0, 12, 0)]);
        let forgot = scores(&[("PER", 10, 10, 8), ("LOC", 0, 0, 0)]);
        let judged = Judgement::of(&previous, &forgot, &labels, 5.0, JudgedOn::Heldout);
        assert!(!judged.served, "{judged:?}");
        assert!((judged.previous_f1 - 90.0).abs() < 1e-9);
        assert_eq!(judged.labels.keys().collect::<Vec<_>>(), ["PER"]);
    }

    #[test]
    fn a_version_losing_a_label_past_the_margin_is_not_served_and_the_label_named() {
        let labels = ["ORG".to_string(), "PER".to_string()];
        let previous = scores(&[("PER", 50, 50, 40), ("ORG", 10, 10, 9)]);
        let new = scores(&[("PER", 50, 50, 48), ("ORG", 10, 10, 8)]);
        let judged = Judgement::of(&previous, &new, &labels, 5.0, JudgedOn::Heldout);
        assert!(judged.new_f1 > judged.previous_f1);
        assert!(!judged.served && judged.reason.contains("ORG 90.00 → 80.00"));
        assert!(
            judged.reason.starts_with("held-out F1 "),
            "{}",
            judged.reason
        );
        let on_dev = Judgement::of(&previous, &new, &labels, 5.0, JudgedOn::Dev);
        assert!(on_dev.reason.starts_with("dev F1 "), "{}", on_dev.reason);
        assert!(Judgement::of(&previous, &new, &labels, 10.0, JudgedOn::Heldout).served);
    }
}
