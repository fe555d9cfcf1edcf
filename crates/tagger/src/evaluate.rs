//! Scoring a model on gold data: CoNLL files by conlleval's rules over the file's own tokens, and
//! span-annotated text by exact character spans over what [`Tagger::tag`] finds in it.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use nertrain_annotate::{AnnotatedCorpus, CharSpan, LabelledFile, Misaligned, read_labelled};
use nertrain_data::{
    CalibrationBin, ColumnSpec, Confusion, Corpus, LabelConfidences, Report, Scorer, Scores,
    SpanScorer, TagScheme, calibration, label_confidences, read_tagged, spans,
};
use serde::Serialize;

use nertrain_model::{ChosenThreshold, LabelThreshold, ModelFiles, StoredThresholds};

use crate::{Entity, Error, Result, TagOptions, Tagged, Tagger, entity_confidences, entity_types};

/// A model's predictions on a tagged corpus, scored.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// The predicted tags of each sentence, in the file's scheme.
    pub predicted: Vec<Vec<String>>,
    /// conlleval's counts.
    pub report: Report,
    /// With `confidence`: predicted entities binned by confidence, with their precision.
    pub calibration: Option<Vec<CalibrationBin>>,
    /// With `confidence`: each label's predicted entities by confidence, for its precision and
    /// recall at any threshold.
    pub by_label: Option<BTreeMap<String, LabelConfidences>>,
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
    /// With `confidence`: each label's predicted entities by confidence.
    pub by_label: Option<BTreeMap<String, LabelConfidences>>,
}

/// A model scored on a gold file, as `nertrain eval` scores it.
#[derive(Debug, Clone)]
pub struct FileEvaluation {
    /// What was scored: a CoNLL file's sentences, or span-annotated texts.
    pub scored: Scored,
    /// conlleval's counts (exact character spans for span-annotated texts).
    pub report: Report,
    /// For a CoNLL file with `confidence`: predicted entities binned by confidence.
    pub calibration: Option<Vec<CalibrationBin>>,
    /// With `confidence`: each label's predicted entities by confidence, for its operating
    /// points ([`LabelConfidences`]).
    pub by_label: Option<BTreeMap<String, LabelConfidences>>,
    /// What the caller should know about the gold data: tags the model never saw, IOBES tags
    /// read by conlleval's rules, spans between the model's tokens.
    pub warnings: Vec<String>,
}

impl FileEvaluation {
    /// Scores a file of predictions as conlleval does: its last column the predicted tags, the
    /// one before it the gold tags (`eval --predicted`).
    pub fn of_predictions(path: &Path) -> Result<Self> {
        let column = |tag_column| ColumnSpec {
            word_column: 0,
            tag_column,
            feature_columns: Vec::new(),
        };
        let gold = read_tagged(path, &column(-2))?;
        let predicted = read_tagged(path, &column(-1))?;
        let warnings = [gold.iobes_warning(), predicted.iobes_warning()]
            .into_iter()
            .flatten()
            .collect();
        let predicted: Vec<Vec<String>> = predicted.sentences.into_iter().map(|s| s.tags).collect();
        Ok(Self {
            report: Scorer::score_corpus(&gold, &predicted),
            calibration: None,
            by_label: None,
            warnings,
            scored: Scored::Conll { gold, predicted },
        })
    }
}

/// The predictions of a [`FileEvaluation`], beside their gold tags.
#[derive(Debug, Clone)]
pub enum Scored {
    /// A CoNLL file: its sentences and the tags predicted for each.
    Conll {
        /// The file as read.
        gold: Corpus,
        /// Each sentence's predicted tags, in the file's scheme.
        predicted: Vec<Vec<String>>,
    },
    /// Span-annotated texts, tagged as text.
    Spans(SpanEvaluation),
}

/// The numbers `nertrain eval --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileScores {
    /// Overall and per-type scores.
    #[serde(flatten)]
    pub scores: Scores,
    /// Predicted entities binned by confidence, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Vec<CalibrationBin>>,
}

impl FileEvaluation {
    /// The numbers `nertrain eval --json` prints.
    pub fn scores(&self) -> FileScores {
        FileScores {
            scores: self.report.scores(),
            calibration: self.calibration.clone(),
        }
    }

    /// `word gold predicted` lines, a blank line after each sentence or text.
    pub fn columns(&self) -> String {
        let mut text = String::new();
        match &self.scored {
            Scored::Conll { gold, predicted } => {
                for (sentence, tags) in gold.sentences.iter().zip(predicted) {
                    for ((word, gold), predicted) in
                        sentence.words.iter().zip(&sentence.tags).zip(tags)
                    {
                        push_row(&mut text, [word, gold, predicted]);
                    }
                    text.push('\n');
                }
            }
            Scored::Spans(evaluation) => {
                for (tagged, gold) in evaluation.tagged.iter().zip(&evaluation.gold_tags) {
                    for ((token, gold), predicted) in
                        tagged.tokens.iter().zip(gold).zip(&tagged.tags)
                    {
                        push_row(&mut text, [&token.text, gold, predicted]);
                    }
                    text.push('\n');
                }
            }
        }
        text
    }

    /// For each of `targets` (a label and a recall in percent), the highest confidence
    /// threshold that keeps the label's recall on this file, as `thresholds.json` records it
    /// (`file` names this file there); an error naming the first label whose recall is out of a
    /// threshold's reach, or that was not scored with confidences.
    pub fn thresholds_for_recall(
        &self,
        file: &Path,
        targets: &[(String, f64)],
    ) -> Result<BTreeMap<String, LabelThreshold>> {
        let invalid = |message: String| Error::InvalidOption {
            option: "recall",
            message,
        };
        let by_label = self.by_label.as_ref().ok_or_else(|| {
            invalid("the file was scored without confidences; thresholds need them".into())
        })?;
        let mut chosen = BTreeMap::new();
        for (label, target) in targets {
            if !(0.0..=100.0).contains(target) {
                return Err(invalid(format!(
                    "{label}={target}: expected a percentage from 0 to 100"
                )));
            }
            let Some(entities) = by_label.get(label).filter(|l| l.gold > 0) else {
                return Err(invalid(format!(
                    "{label}: {} has no gold entity of this label to measure recall on",
                    file.display()
                )));
            };
            let Some(point) = entities.for_recall(*target) else {
                return Err(invalid(format!(
                    "{label}={target}: out of a threshold's reach on {}: with every entity kept \
                     the recall is {:.2}% (a threshold only leaves entities out)",
                    file.display(),
                    entities.at(0.0).recall
                )));
            };
            let threshold = LabelThreshold {
                threshold: point.threshold.clamp(0.0, 1.0),
                chosen: Some(ChosenThreshold {
                    file: file.to_path_buf(),
                    target_recall: *target,
                    precision: point.precision,
                    recall: point.recall,
                }),
            };
            chosen.insert(label.clone(), threshold);
        }
        Ok(chosen)
    }

    /// Entity types confused with each other, with missed and spurious entities (CoNLL files).
    pub fn confusion(&self) -> Option<Confusion> {
        let Scored::Conll { gold, predicted } = &self.scored else {
            return None;
        };
        let mut confusion = Confusion::default();
        for (sentence, tags) in gold.sentences.iter().zip(predicted) {
            confusion.add_sentence(&sentence.tags, tags);
        }
        Some(confusion)
    }
}

impl Tagger {
    /// Scores the model on a gold file: a CoNLL file read with the model's columns (its
    /// `-DOCSTART-` blocks are the documents) by conlleval's rules, or span-annotated text
    /// (`.jsonl`, Label Studio's `.json`, brat) tagged as text and scored as exact character
    /// spans.
    pub fn evaluate_file(&self, path: &Path, options: TagOptions) -> Result<FileEvaluation> {
        let annotated = match read_labelled(path, &self.meta().columns)? {
            LabelledFile::Columns(gold) => {
                return self.evaluate_gold(gold.complete("scoring")?, options);
            }
            LabelledFile::Spans(annotated) => annotated,
        };
        let evaluation = self.evaluate_spans(&annotated, options)?;
        let mut warnings = annotated.warnings;
        if let Some(first) = evaluation.misaligned.first() {
            let count = evaluation.misaligned.len();
            warnings.push(format!(
                "{first} ({count} span{} in all fall between the model's tokens; scored as \
                 missed)",
                if count == 1 { "" } else { "s" }
            ));
        }
        Ok(FileEvaluation {
            report: evaluation.report.clone(),
            calibration: None,
            by_label: evaluation.by_label.clone(),
            warnings,
            scored: Scored::Spans(evaluation),
        })
    }

    /// [`Tagger::evaluate_file`] of a CoNLL corpus read elsewhere (stdin, say): the corpus's
    /// path names it in warnings.
    pub fn evaluate_gold(&self, gold: Corpus, options: TagOptions) -> Result<FileEvaluation> {
        let path = gold.path.clone();
        let mut warnings: Vec<String> = gold.iobes_warning().into_iter().collect();
        warnings.extend(self.check_features(&gold)?);
        let gold_scheme = TagScheme::detect(gold.sentences.iter().map(|s| s.tags.as_slice()));
        let model_scheme = self.meta().file_scheme;
        if gold_scheme != model_scheme && !gold.sentences.is_empty() {
            warnings.push(format!(
                "{}: its tags read as {gold_scheme} but the model writes {model_scheme}: entities \
                 are scored alike, but token accuracy compares tags as written (`nertrain \
                 convert --to {model_scheme}` makes the file comparable token by token)",
                path.display()
            ));
        }
        let known = entity_types(self.labels());
        let gold_tags: Vec<String> = gold
            .sentences
            .iter()
            .flat_map(|s| s.tags.iter().cloned())
            .collect();
        let unseen: Vec<String> = entity_types(&gold_tags)
            .into_iter()
            .filter(|label| !known.contains(label))
            .collect();
        if !unseen.is_empty() {
            warnings.push(format!(
                "{}: tags the model never saw in training (it cannot predict them): {}",
                path.display(),
                unseen.join(", ")
            ));
        }
        let evaluation = self.evaluate(&gold, options)?;
        Ok(FileEvaluation {
            report: evaluation.report,
            calibration: evaluation.calibration,
            by_label: evaluation.by_label,
            warnings,
            scored: Scored::Conll {
                gold,
                predicted: evaluation.predicted,
            },
        })
    }

    /// Stores `chosen` thresholds in the model's `thresholds.json`, beside those stored for other
    /// labels, so that every interface that loads the model applies them.
    pub fn store_thresholds(&self, chosen: BTreeMap<String, LabelThreshold>) -> Result<()> {
        let files = ModelFiles::new(self.dir());
        let labels = entity_types(self.labels());
        let mut stored = files.read_thresholds(&labels)?.unwrap_or(StoredThresholds {
            labels: BTreeMap::new(),
        });
        stored.labels.extend(chosen);
        Ok(files.write_thresholds(&stored)?)
    }

    /// Predicts a tagged corpus's sentences (its `-DOCSTART-` blocks are the documents) and scores
    /// them with conlleval's rules.
    pub fn evaluate(&self, gold: &Corpus, options: TagOptions) -> Result<Evaluation> {
        let predictions = self.predict_corpus(gold, options)?;
        let calibration = options
            .confidence
            .then(|| calibration(entity_confidences(gold, &predictions)));
        let by_label = options.confidence.then(|| {
            label_confidences(
                gold.sentences
                    .iter()
                    .zip(&predictions)
                    .map(|(s, p)| (spans(&s.tags), p.spans.as_slice(), p.confidences.as_slice())),
            )
        });
        let predicted: Vec<Vec<String>> = predictions.into_iter().map(|p| p.tags).collect();
        Ok(Evaluation {
            report: Scorer::score_corpus(gold, &predicted),
            predicted,
            calibration,
            by_label,
        })
    }

    /// Tags span-annotated texts (a document's texts read together) and scores the entities found
    /// against the gold ones as exact character spans.
    pub fn evaluate_spans(
        &self,
        gold: &AnnotatedCorpus,
        options: TagOptions,
    ) -> Result<SpanEvaluation> {
        if let Some(text) = gold.texts.iter().find(|t| t.is_partial()) {
            let message = "only part of this text is annotated (`partial` or `known`); scoring \
                           needs every entity annotated";
            return Err(nertrain_data::DataError::at(&text.source, text.line, message).into());
        }
        let texts: Vec<&str> = gold.texts.iter().map(|t| t.text.as_str()).collect();
        let mut documents: Vec<Range<usize>> = Vec::new();
        for (i, text) in gold.texts.iter().enumerate() {
            match documents.last_mut() {
                Some(d) if gold.texts[d.start].document == text.document => d.end = i + 1,
                _ => documents.push(i..i + 1),
            }
        }
        let tagged = self.tag_documents(&texts, &documents, options)?;
        let mut scorer = SpanScorer::new();
        let mut gold_tags = Vec::with_capacity(tagged.len());
        let mut misaligned = Vec::new();
        let mut by_label: BTreeMap<String, LabelConfidences> = BTreeMap::new();
        for (text, tagged) in gold.texts.iter().zip(&tagged) {
            for span in &text.spans {
                by_label.entry(span.label.clone()).or_default().gold += 1;
            }
            for entity in &tagged.entities {
                let correct = text.spans.contains(&entity.span());
                let label = by_label.entry(entity.label.clone()).or_default();
                label.found.extend(entity.confidence.map(|c| (c, correct)));
            }
            let (tags, bad) = gold.tags(text, &tagged.tokens);
            let found: Vec<CharSpan> = tagged.entities.iter().map(Entity::span).collect();
            let typed = |spans: &'_ [CharSpan]| -> Vec<(CharSpan, String)> {
                spans.iter().map(|s| (s.clone(), s.label.clone())).collect()
            };
            scorer.add_entities(&typed(&text.spans), &typed(&found));
            scorer.add_tokens(&tags, &tagged.tags);
            gold_tags.push(tags);
            misaligned.extend(bad);
        }
        Ok(SpanEvaluation {
            tagged,
            gold_tags,
            misaligned,
            report: scorer.report(),
            by_label: options.confidence.then_some(by_label),
        })
    }
}

/// One `word gold predicted` line.
fn push_row(text: &mut String, columns: [&str; 3]) {
    text.push_str(&columns.join(" "));
    text.push('\n');
}
