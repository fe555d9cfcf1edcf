//! Scoring, in one place: spans exactly as the CoNLL `conlleval` script computes it ([`Scorer`]),
//! entities matched whole ([`SpanScorer`]: annotated text's character spans), the confusion of
//! types, and calibration (a reliability table of entity confidences).
//!
//! The main loop is a line-for-line port of conlleval's, over the chunk rules of
//! [`crate::scheme`] (conlleval's `startOfChunk` and `endOfChunk`), so IOB1 input, stray `I-` tags
//! and type switches score as there, and the entities counted are those [`crate::spans`] finds.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::scheme::{Tag, end_of_chunk, start_of_chunk};

/// Gold, predicted and correct chunk counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ChunkCounts {
    /// Chunks in the gold tags.
    pub gold: usize,
    /// Chunks predicted.
    pub found: usize,
    /// Predicted chunks that match a gold one exactly.
    pub correct: usize,
}

impl std::iter::Sum for ChunkCounts {
    /// The counts of several types together.
    fn sum<I: Iterator<Item = Self>>(counts: I) -> Self {
        counts.fold(Self::default(), |sum, c| Self {
            gold: sum.gold + c.gold,
            found: sum.found + c.found,
            correct: sum.correct + c.correct,
        })
    }
}

impl From<&TypeScore> for ChunkCounts {
    fn from(score: &TypeScore) -> Self {
        Self {
            gold: score.gold,
            found: score.found,
            correct: score.correct,
        }
    }
}

impl ChunkCounts {
    /// Precision, recall and F1 as percentages, computed in conlleval's order of operations.
    pub fn prf(&self) -> (f64, f64, f64) {
        let precision = if self.found > 0 {
            100.0 * self.correct as f64 / self.found as f64
        } else {
            0.0
        };
        let recall = if self.gold > 0 {
            100.0 * self.correct as f64 / self.gold as f64
        } else {
            0.0
        };
        let f1 = if precision + recall > 0.0 {
            2.0 * precision * recall / (precision + recall)
        } else {
            0.0
        };
        (precision, recall, f1)
    }
}

/// Accumulates conlleval's counts over sentences of (gold, predicted) tags.
#[derive(Debug, Clone, Default)]
pub struct Scorer {
    tokens: usize,
    correct_tags: usize,
    overall: ChunkCounts,
    by_type: BTreeMap<String, ChunkCounts>,
    last_gold: (String, String, bool),
    last_predicted: (String, String, bool),
    in_correct: bool,
}

impl Scorer {
    /// A scorer that has seen nothing.
    pub fn new() -> Self {
        Self {
            last_gold: ("O".into(), String::new(), false),
            last_predicted: ("O".into(), String::new(), false),
            ..Self::default()
        }
    }

    /// conlleval's counts of `predicted` tags (a list per sentence) against `gold`'s.
    pub fn score_corpus(gold: &crate::Corpus, predicted: &[Vec<String>]) -> Report {
        let mut scorer = Self::new();
        for (sentence, tags) in gold.sentences.iter().zip(predicted) {
            scorer.add_sentence(&sentence.tags, tags);
        }
        scorer.report()
    }

    /// Adds one sentence; its end is a sentence break, as a blank line is to conlleval.
    pub fn add_sentence<S: AsRef<str>, T: AsRef<str>>(&mut self, gold: &[S], predicted: &[T]) {
        assert_eq!(
            gold.len(),
            predicted.len(),
            "gold and predicted tags of one sentence"
        );
        for (gold, predicted) in gold.iter().zip(predicted) {
            self.step(
                Tag::parse(gold.as_ref()),
                Tag::parse(predicted.as_ref()),
                false,
            );
        }
        self.step(Tag::OUTSIDE, Tag::OUTSIDE, true);
    }

    fn step(&mut self, gold: Tag, predicted: Tag, boundary: bool) {
        let last_gold = Tag {
            prefix: &self.last_gold.0,
            label: &self.last_gold.1,
            closes: self.last_gold.2,
        };
        let last_predicted = Tag {
            prefix: &self.last_predicted.0,
            label: &self.last_predicted.1,
            closes: self.last_predicted.2,
        };
        let gold_ends = end_of_chunk(last_gold, gold);
        let predicted_ends = end_of_chunk(last_predicted, predicted);
        let gold_starts = start_of_chunk(last_gold, gold);
        let predicted_starts = start_of_chunk(last_predicted, predicted);

        if self.in_correct {
            if gold_ends && predicted_ends && last_predicted.label == last_gold.label {
                self.in_correct = false;
                self.overall.correct += 1;
                self.by_type
                    .entry(last_gold.label.to_string())
                    .or_default()
                    .correct += 1;
            } else if gold_ends != predicted_ends || predicted.label != gold.label {
                self.in_correct = false;
            }
        }
        if gold_starts && predicted_starts && predicted.label == gold.label {
            self.in_correct = true;
        }
        if gold_starts {
            self.overall.gold += 1;
            self.by_type.entry(gold.label.to_string()).or_default().gold += 1;
        }
        if predicted_starts {
            self.overall.found += 1;
            self.by_type
                .entry(predicted.label.to_string())
                .or_default()
                .found += 1;
        }
        if !boundary {
            if gold == predicted {
                self.correct_tags += 1;
            }
            self.tokens += 1;
        }
        self.last_gold = (gold.prefix.to_string(), gold.label.to_string(), gold.closes);
        self.last_predicted = (
            predicted.prefix.to_string(),
            predicted.label.to_string(),
            predicted.closes,
        );
    }

    /// The counts so far.
    pub fn report(&self) -> Report {
        debug_assert!(!self.in_correct, "every sentence ends in a break");
        Report {
            tokens: self.tokens,
            correct_tags: self.correct_tags,
            overall: self.overall,
            by_type: self.by_type.clone(),
        }
    }
}

/// The outcome of scoring: conlleval's counts, printable in its layout.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Tokens scored.
    pub tokens: usize,
    /// Tokens whose tag is right.
    pub correct_tags: usize,
    /// Chunk counts over every type.
    pub overall: ChunkCounts,
    /// Chunk counts per entity type.
    pub by_type: BTreeMap<String, ChunkCounts>,
}

/// A type's line of the report, for JSON output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TypeScore {
    /// Percent of predicted chunks that are right.
    pub precision: f64,
    /// Percent of gold chunks found.
    pub recall: f64,
    /// Their harmonic mean.
    pub f1: f64,
    /// Gold chunks.
    pub gold: usize,
    /// Predicted chunks.
    pub found: usize,
    /// Correct chunks.
    pub correct: usize,
}

impl From<ChunkCounts> for TypeScore {
    fn from(counts: ChunkCounts) -> Self {
        let (precision, recall, f1) = counts.prf();
        Self {
            precision,
            recall,
            f1,
            gold: counts.gold,
            found: counts.found,
            correct: counts.correct,
        }
    }
}

impl Report {
    /// The report with the chunks of `labels` left out (the report itself when `labels` is empty):
    /// what data that does not decide those labels can score.
    pub fn without(&self, labels: &[String]) -> Report {
        if labels.is_empty() {
            return self.clone();
        }
        let by_type: BTreeMap<String, ChunkCounts> = self
            .by_type
            .iter()
            .filter(|(label, _)| !labels.contains(label))
            .map(|(label, counts)| (label.clone(), *counts))
            .collect();
        Report {
            overall: by_type.values().copied().sum(),
            by_type,
            ..self.clone()
        }
    }

    /// Overall span F1, in percent.
    pub fn f1(&self) -> f64 {
        self.overall.prf().2
    }

    /// Percent of tokens whose tag is right.
    pub fn accuracy(&self) -> f64 {
        if self.tokens > 0 {
            100.0 * self.correct_tags as f64 / self.tokens as f64
        } else {
            0.0
        }
    }

    /// The report's scores: overall and per-type precision, recall, F1 and counts.
    pub fn scores(&self) -> Scores {
        Scores {
            tokens: self.tokens,
            accuracy: self.accuracy(),
            overall: TypeScore::from(self.overall),
            types: self
                .by_type
                .iter()
                .map(|(label, counts)| (label.clone(), TypeScore::from(*counts)))
                .collect(),
        }
    }
}

/// A report's scores as `eval --json` prints them and a run's report files hold them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scores {
    /// Tokens scored.
    pub tokens: usize,
    /// Percent of tokens whose tag is right.
    pub accuracy: f64,
    /// Every entity type together.
    pub overall: TypeScore,
    /// Each entity type.
    pub types: BTreeMap<String, TypeScore>,
}

impl fmt::Display for Report {
    /// conlleval's report, byte for byte.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "processed {} tokens with {} phrases; found: {} phrases; correct: {}.",
            self.tokens, self.overall.gold, self.overall.found, self.overall.correct
        )?;
        if self.tokens > 0 {
            let (precision, recall, f1) = self.overall.prf();
            writeln!(
                f,
                "accuracy: {}%; precision: {}%; recall: {}%; FB1: {}",
                percent(self.accuracy()),
                percent(precision),
                percent(recall),
                percent(f1)
            )?;
        }
        for (label, counts) in &self.by_type {
            let (precision, recall, f1) = counts.prf();
            writeln!(
                f,
                "{label:>17}: precision: {}%; recall: {}%; FB1: {}  {}",
                percent(precision),
                percent(recall),
                percent(f1),
                counts.found
            )?;
        }
        Ok(())
    }
}

/// Counts of entities matched exactly as whole units rather than chunk by chunk: annotated
/// text's character spans, say, where the gold and the found entities are each a set. The report
/// is [`Scorer`]'s; its token accuracy compares each token's entity type (or none), B and I alike,
/// since the gold and the found tags may be in different schemes.
#[derive(Debug, Clone, Default)]
pub struct SpanScorer {
    tokens: usize,
    correct_tags: usize,
    overall: ChunkCounts,
    by_type: BTreeMap<String, ChunkCounts>,
}

impl SpanScorer {
    /// A scorer that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one text's entities: `gold` and `found`, each an entity (equal to another when it is
    /// the same entity: same place, same type) and its type.
    pub fn add_entities<E: Eq + std::hash::Hash, L: AsRef<str>>(
        &mut self,
        gold: &[(E, L)],
        found: &[(E, L)],
    ) {
        let gold_set: std::collections::HashSet<&E> = gold.iter().map(|(e, _)| e).collect();
        for (_, label) in gold {
            self.overall.gold += 1;
            self.by_type
                .entry(label.as_ref().to_string())
                .or_default()
                .gold += 1;
        }
        for (entity, label) in found {
            let correct = usize::from(gold_set.contains(entity));
            self.overall.found += 1;
            self.overall.correct += correct;
            let by_type = self.by_type.entry(label.as_ref().to_string()).or_default();
            by_type.found += 1;
            by_type.correct += correct;
        }
    }

    /// Adds one text's tokens: the gold and the found tags, in any schemes.
    pub fn add_tokens<S: AsRef<str>, T: AsRef<str>>(&mut self, gold: &[S], found: &[T]) {
        let types = |tags: Vec<crate::Span>, len: usize| {
            let mut types: Vec<Option<String>> = vec![None; len];
            for span in tags {
                types[span.start..span.end].fill(Some(span.label));
            }
            types
        };
        let gold_types = types(crate::spans(gold), gold.len());
        let found_types = types(crate::spans(found), found.len());
        self.tokens += found.len();
        self.correct_tags += gold_types
            .iter()
            .zip(&found_types)
            .filter(|(g, f)| g == f)
            .count();
    }

    /// The counts so far.
    pub fn report(self) -> Report {
        Report {
            tokens: self.tokens,
            correct_tags: self.correct_tags,
            overall: self.overall,
            by_type: self.by_type,
        }
    }
}

/// A reliability table's row: predicted entities binned by confidence, with the share that are
/// correct.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalibrationBin {
    /// The bin's lowest confidence.
    pub from: f64,
    /// Its highest (excluded, but for the last bin).
    pub to: f64,
    /// Predicted entities in it.
    pub entities: usize,
    /// Their mean confidence.
    pub mean_confidence: f64,
    /// Percent of the bin's entities that match a gold entity exactly.
    pub precision: f64,
}

/// Bins predicted entities, each a confidence and whether it matches a gold entity exactly,
/// into tenths of confidence, and measures each bin's precision.
pub fn calibration(entities: impl IntoIterator<Item = (f64, bool)>) -> Vec<CalibrationBin> {
    let mut bins: Vec<(usize, f64, usize)> = vec![(0, 0.0, 0); 10];
    for (confidence, correct) in entities {
        let bin = &mut bins[((confidence * 10.0) as usize).min(9)];
        bin.0 += 1;
        bin.1 += confidence;
        bin.2 += usize::from(correct);
    }
    bins.into_iter()
        .enumerate()
        .map(|(i, (entities, confidence_sum, correct))| CalibrationBin {
            from: i as f64 / 10.0,
            to: (i + 1) as f64 / 10.0,
            entities,
            mean_confidence: if entities > 0 {
                confidence_sum / entities as f64
            } else {
                0.0
            },
            precision: if entities > 0 {
                100.0 * correct as f64 / entities as f64
            } else {
                0.0
            },
        })
        .collect()
}

/// Entity types confused with each other: gold spans against predicted spans with the same
/// boundaries. A gold entity with no predicted span of its boundaries is *missed*; a predicted
/// one with no gold span of its boundaries is *spurious* (a boundary error counts as both).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confusion {
    /// `(gold type, predicted type)`; `None` for missed or spurious.
    pub counts: BTreeMap<(Option<String>, Option<String>), usize>,
}

impl Confusion {
    /// Counts one sentence's gold against its predicted tags.
    pub fn add_sentence<S: AsRef<str>, T: AsRef<str>>(&mut self, gold: &[S], predicted: &[T]) {
        let gold = crate::spans(gold);
        let predicted = crate::spans(predicted);
        let same_place = |a: &crate::Span, b: &crate::Span| a.start == b.start && a.end == b.end;
        for g in &gold {
            let p = predicted
                .iter()
                .find(|p| same_place(g, p))
                .map(|p| p.label.clone());
            *self.counts.entry((Some(g.label.clone()), p)).or_default() += 1;
        }
        for p in predicted
            .iter()
            .filter(|p| !gold.iter().any(|g| same_place(g, p)))
        {
            *self
                .counts
                .entry((None, Some(p.label.clone())))
                .or_default() += 1;
        }
    }

    /// Rows are gold types (then spurious), columns predicted types (then missed).
    pub fn table(&self) -> String {
        let mut labels: Vec<&String> = self
            .counts
            .keys()
            .flat_map(|(g, p)| g.iter().chain(p.iter()))
            .collect();
        labels.sort();
        labels.dedup();
        let width = labels
            .iter()
            .map(|l| l.len())
            .max()
            .unwrap_or(0)
            .max("(spurious)".len());
        let first = "gold \\ predicted".len().max(width);
        let mut out = format!("{:>first$}", "gold \\ predicted");
        for label in &labels {
            out.push_str(&format!(" {label:>width$}"));
        }
        out.push_str(&format!(" {:>width$}\n", "(missed)"));
        let rows = labels
            .iter()
            .map(|l| Some((*l).clone()))
            .chain(std::iter::once(None));
        for gold in rows {
            out.push_str(&format!(
                "{:>first$}",
                gold.as_deref().unwrap_or("(spurious)")
            ));
            let columns = labels
                .iter()
                .map(|l| Some((*l).clone()))
                .chain(std::iter::once(None));
            for predicted in columns {
                let count = self
                    .counts
                    .get(&(gold.clone(), predicted))
                    .copied()
                    .unwrap_or(0);
                out.push_str(&format!(" {count:>width$}"));
            }
            out.push('\n');
        }
        out
    }
}

/// `printf("%6.2f")`: Rust's formatting rounds the exact binary value half-to-even, as glibc does.
fn percent(value: f64) -> String {
    format!("{value:6.2}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_without_labels_sums_the_others() {
        let counts = |gold, found, correct| ChunkCounts {
            gold,
            found,
            correct,
        };
        let report = Report {
            tokens: 10,
            correct_tags: 8,
            overall: counts(5, 7, 4),
            by_type: BTreeMap::from([
                ("LOC".to_string(), counts(0, 3, 0)),
                ("PER".to_string(), counts(5, 4, 4)),
            ]),
        };
        let per = report.without(&["LOC".to_string()]);
        assert_eq!(per.overall, counts(5, 4, 4));
        assert_eq!(per.by_type.keys().collect::<Vec<_>>(), ["PER"]);
        assert!(per.f1() > report.f1());
        assert_eq!(report.without(&[]), report);
    }

    /// Scores sentences written as space-separated tags with `/` for a sentence break.
    fn score(gold: &str, predicted: &str) -> Report {
        let mut scorer = Scorer::new();
        let gold: Vec<Vec<&str>> = gold
            .split('/')
            .map(|s| s.split_whitespace().collect())
            .collect();
        let predicted: Vec<Vec<&str>> = predicted
            .split('/')
            .map(|s| s.split_whitespace().collect())
            .collect();
        for (g, p) in gold.iter().zip(&predicted) {
            scorer.add_sentence(g, p);
        }
        scorer.report()
    }

    /// Every case of `specs/span-f1.md`: gold/found/correct and F1 as printed.
    #[test]
    fn span_f1_spec_cases() {
        let cases = [
            ("B-PER I-PER O", "I-PER I-PER O", (1, 1, 1), "100.00"),
            (
                "B-LOC I-LOC O O",
                "B-LOC I-LOC O I-LOC",
                (1, 2, 1),
                " 66.67",
            ),
            ("B-ORG I-ORG O", "B-ORG I-PER O", (1, 2, 0), "  0.00"),
            ("B-PER O", "B-PER I-LOC", (1, 2, 1), " 66.67"),
            (
                "I-PER I-PER O I-LOC",
                "B-PER I-PER O B-LOC",
                (2, 2, 2),
                "100.00",
            ),
            ("I-PER B-PER O", "I-PER B-PER O", (2, 2, 2), "100.00"),
            (
                "B-PER I-PER O O",
                "B-PER I-PER I-LOC I-LOC",
                (1, 2, 1),
                " 66.67",
            ),
            ("B-PER B-PER O", "B-PER I-PER O", (2, 1, 0), "  0.00"),
            ("B-PER / I-PER", "B-PER / I-PER", (2, 2, 2), "100.00"),
        ];
        for (gold, predicted, (g, f, c), f1) in cases {
            let report = score(gold, predicted);
            assert_eq!(
                report.overall,
                ChunkCounts {
                    gold: g,
                    found: f,
                    correct: c
                },
                "{gold} | {predicted}"
            );
            assert_eq!(percent(report.f1()), f1, "{gold} | {predicted}");
        }
    }

    #[test]
    fn iobes_is_read_as_iob2() {
        let report = score("S-PER B-LOC E-LOC", "B-PER B-LOC I-LOC");
        assert_eq!(
            report.overall,
            ChunkCounts {
                gold: 2,
                found: 2,
                correct: 2
            }
        );
    }

    #[test]
    fn report_layout_matches_conlleval() {
        let report = score("B-PER I-PER O B-LOC / B-ORG", "B-PER I-PER O B-ORG / B-ORG");
        let expected = "\
processed 5 tokens with 3 phrases; found: 3 phrases; correct: 2.
accuracy:  80.00%; precision:  66.67%; recall:  66.67%; FB1:  66.67
              LOC: precision:   0.00%; recall:   0.00%; FB1:   0.00  0
              ORG: precision:  50.00%; recall: 100.00%; FB1:  66.67  2
              PER: precision: 100.00%; recall: 100.00%; FB1: 100.00  1
";
        assert_eq!(report.to_string(), expected);
    }

    #[test]
    fn rounding_is_half_to_even_on_exact_ties() {
        // 100 * 97 / 800 = 12.125 exactly; glibc's printf("%.2f") gives 12.12.
        assert_eq!(percent(100.0 * 97.0 / 800.0), " 12.12");
        assert_eq!(percent(100.0 * 99.0 / 800.0), " 12.38");
    }

    #[test]
    fn confusion_counts_type_errors_misses_and_spurious_entities() {
        let mut confusion = Confusion::default();
        confusion.add_sentence(
            &["B-PER", "I-PER", "O", "B-LOC", "O", "B-ORG", "I-ORG"],
            &["B-PER", "I-PER", "O", "B-ORG", "B-MISC", "B-ORG", "O"],
        );
        let count = |g: Option<&str>, p: Option<&str>| {
            confusion
                .counts
                .get(&(g.map(String::from), p.map(String::from)))
                .copied()
                .unwrap_or(0)
        };
        assert_eq!(count(Some("PER"), Some("PER")), 1);
        assert_eq!(count(Some("LOC"), Some("ORG")), 1);
        assert_eq!(count(Some("ORG"), None), 1, "boundary error: missed...");
        assert_eq!(count(None, Some("ORG")), 1, "...and spurious");
        assert_eq!(count(None, Some("MISC")), 1);
        let table = confusion.table();
        assert!(
            table.lines().next().unwrap().ends_with("(missed)"),
            "{table}"
        );
        assert_eq!(
            table.lines().count(),
            6,
            "a header, four types, spurious: {table}"
        );
    }

    #[test]
    fn empty_scores_are_zero() {
        let report = score("O O", "O O");
        assert_eq!(report.f1(), 0.0);
        assert_eq!(report.accuracy(), 100.0);
    }

    #[test]
    fn entities_matched_whole_count_as_conlleval_counts_chunks() {
        // Gold PER (0..4) and LOC (9..12); found PER (0..4), ORG (9..12), LOC (13..17).
        let mut scorer = SpanScorer::new();
        scorer.add_entities(
            &[((0, 4, "PER"), "PER"), ((9, 12, "LOC"), "LOC")],
            &[
                ((0, 4, "PER"), "PER"),
                ((9, 12, "ORG"), "ORG"),
                ((13, 17, "LOC"), "LOC"),
            ],
        );
        // Tokens by entity type, whatever the schemes: B-PER I-PER and S-PER E-PER differ in
        // nothing but scheme.
        scorer.add_tokens(
            &["B-PER", "I-PER", "O", "B-LOC"],
            &["B-PER", "E-PER", "O", "S-ORG"],
        );
        let report = scorer.report();
        assert_eq!(
            (
                report.overall.gold,
                report.overall.found,
                report.overall.correct
            ),
            (2, 3, 1)
        );
        assert_eq!(report.by_type["LOC"].gold, 1);
        assert_eq!(report.by_type["LOC"].found, 1);
        assert_eq!(report.by_type["LOC"].correct, 0);
        assert_eq!(report.by_type["ORG"].found, 1);
        assert_eq!((report.tokens, report.correct_tags), (4, 3));
    }

    #[test]
    fn calibration_bins_entities_by_tenths_of_confidence() {
        let bins = calibration([(0.05, false), (0.95, true), (1.0, true), (0.91, false)]);
        assert_eq!(bins.len(), 10);
        assert_eq!(bins[0].entities, 1);
        assert_eq!(bins[0].precision, 0.0);
        assert_eq!(bins[9].entities, 3, "a confidence of 1 is in the last bin");
        assert!((bins[9].precision - 200.0 / 3.0).abs() < 1e-9);
        assert!((bins[9].mean_confidence - (0.95 + 1.0 + 0.91) / 3.0).abs() < 1e-12);
        assert_eq!(bins[5].entities, 0);
        assert_eq!(bins[5].mean_confidence, 0.0);
    }
}
