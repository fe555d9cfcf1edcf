//! Scoring a model on gold data: CoNLL files by conlleval's rules over the file's own tokens, and
//! span-annotated text by exact character spans over what [`Tagger::tag`] finds in it.

use std::collections::{BTreeMap, HashSet};
use std::ops::Range;

use nertrain_data::{AnnotatedCorpus, CharSpan, ChunkCounts, Corpus, Misaligned, Report, spans};
use nertrain_train::{CalibrationBin, calibration, score_corpus};

use crate::{Result, TagOptions, Tagged, Tagger};

/// A model's predictions on a tagged corpus, scored.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// The predicted tags of each sentence, in the file's scheme.
    pub predicted: Vec<Vec<String>>,
    /// conlleval's counts.
    pub report: Report,
    /// With `confidence`: predicted entities binned by confidence, with their precision.
    pub calibration: Option<Vec<CalibrationBin>>,
}

/// A model's entities in span-annotated texts, scored as exact character spans.
#[derive(Debug, Clone)]
pub struct SpanEvaluation {
    /// Each text as tagged.
    pub tagged: Vec<Tagged>,
    /// Each text's gold tags over the model's tokens (IOB2, from the spans that fall on them).
    pub gold_tags: Vec<Vec<String>>,
    /// Gold spans that do not fall on the model's token boundaries (still scored, never found).
    pub misaligned: Vec<Misaligned>,
    /// Entity counts by exact character span and type; token counts over the model's tokens.
    pub report: Report,
}

impl Tagger {
    /// Predicts a tagged corpus's sentences (its `-DOCSTART-` blocks are the documents) and scores
    /// them with conlleval's rules.
    pub fn evaluate(&self, gold: &Corpus, options: TagOptions) -> Result<Evaluation> {
        let _one_call = self.one_call();
        let words: Vec<Vec<&str>> = gold
            .sentences
            .iter()
            .map(|s| s.words.iter().map(String::as_str).collect())
            .collect();
        let documents = gold.documents(usize::MAX);
        let predictions = self.predictor().predict(&words, &documents, options)?;
        let calibration = options.confidence.then(|| calibration(gold, &predictions));
        let predicted: Vec<Vec<String>> = predictions.into_iter().map(|p| p.tags).collect();
        Ok(Evaluation {
            report: score_corpus(gold, &predicted),
            predicted,
            calibration,
        })
    }

    /// Tags span-annotated texts (a document's texts read together) and scores the entities found
    /// against the gold ones as exact character spans.
    pub fn evaluate_spans(
        &self,
        gold: &AnnotatedCorpus,
        options: TagOptions,
    ) -> Result<SpanEvaluation> {
        let texts: Vec<&str> = gold.texts.iter().map(|t| t.text.as_str()).collect();
        let mut documents: Vec<Range<usize>> = Vec::new();
        for (i, text) in gold.texts.iter().enumerate() {
            match documents.last_mut() {
                Some(d) if gold.texts[d.start].document == text.document => d.end = i + 1,
                _ => documents.push(i..i + 1),
            }
        }
        let tagged = {
            let _one_call = self.one_call();
            self.tag_documents_unlocked(&texts, &documents, options)?
        };
        let mut counts = SpanCounts::default();
        let mut gold_tags = Vec::with_capacity(tagged.len());
        let mut misaligned = Vec::new();
        for (text, tagged) in gold.texts.iter().zip(&tagged) {
            let (tags, bad) = gold.tags(text, &tagged.tokens);
            counts.add(&text.spans, tagged, &tags);
            gold_tags.push(tags);
            misaligned.extend(bad);
        }
        Ok(SpanEvaluation {
            tagged,
            gold_tags,
            misaligned,
            report: counts.report(),
        })
    }
}

/// Entity and token counts over texts.
#[derive(Default)]
struct SpanCounts {
    tokens: usize,
    correct_tags: usize,
    overall: ChunkCounts,
    by_type: BTreeMap<String, ChunkCounts>,
}

impl SpanCounts {
    fn add(&mut self, gold: &[CharSpan], tagged: &Tagged, gold_tags: &[String]) {
        let found: Vec<CharSpan> = tagged
            .entities
            .iter()
            .map(|e| CharSpan {
                start: e.start,
                end: e.end,
                label: e.label.clone(),
            })
            .collect();
        let gold_set: HashSet<&CharSpan> = gold.iter().collect();
        for span in gold {
            self.overall.gold += 1;
            self.by_type.entry(span.label.clone()).or_default().gold += 1;
        }
        for span in &found {
            let correct = usize::from(gold_set.contains(span));
            self.overall.found += 1;
            self.overall.correct += correct;
            let by_type = self.by_type.entry(span.label.clone()).or_default();
            by_type.found += 1;
            by_type.correct += correct;
        }
        // Token accuracy compares entity membership and type token by token (B/I alike), as
        // the model's tags and the gold spans' may differ in scheme.
        let labels = |tags: &[String]| {
            let mut labels: Vec<Option<String>> = vec![None; tags.len()];
            for span in spans(tags) {
                labels[span.start..span.end].fill(Some(span.label));
            }
            labels
        };
        let (gold_labels, found_labels) = (labels(gold_tags), labels(&tagged.tags));
        self.tokens += tagged.tokens.len();
        self.correct_tags += gold_labels
            .iter()
            .zip(&found_labels)
            .filter(|(g, f)| g == f)
            .count();
    }

    fn report(self) -> Report {
        Report {
            tokens: self.tokens,
            correct_tags: self.correct_tags,
            overall: self.overall,
            by_type: self.by_type,
        }
    }
}
