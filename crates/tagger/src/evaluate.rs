//! Scoring a model on gold data: CoNLL files by conlleval's rules over the file's own tokens, and
//! span-annotated text by exact character spans over what [`Tagger::tag`] finds in it.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use nertrain_annotate::{
    AnnotatedCorpus, CharSpan, LabelledFile, Misaligned, read_labelled, read_sentences,
};
use nertrain_data::{
    CalibrationBin, ColumnSpec, Confusion, Corpus, LabelConfidences, OperatingPoint, Report,
    Scorer, Scores, SpanScorer, TagScheme, calibration, label_confidences, read_tagged, spans,
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

    /// Scores the model on a gold file read as `fit` reads its held-out files
    /// ([`read_sentences`]: an export cut into words by the treebank rules, its spans that miss
    /// them left out) and scored as `fit` scores the epochs it chooses among, so that a model is
    /// judged the way its epoch was chosen.
    pub fn evaluate_as_fit(&self, path: &Path, options: TagOptions) -> Result<FileEvaluation> {
        let (gold, read_warnings) = read_sentences(path, &self.meta().columns)?;
        let mut evaluation = self.evaluate_gold(gold.complete("scoring")?, options)?;
        evaluation.warnings.splice(0..0, read_warnings);
        Ok(evaluation)
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
        let known = entity_types(self.tags());
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

    /// Chooses, on the gold file `path`, how each label of `targets` (a label and a recall in
    /// percent, each label once) reaches its recall: the highest confidence threshold that keeps
    /// it, when the model's own entities reach it; otherwise the smallest bias of the label's
    /// emission scores that does (each bias tried is a decoding of the file). Each label is
    /// chosen with every other label's operating point in effect (those the tagger has for
    /// labels not chosen here, as `thresholds.json` stores them, and the others chosen here), and
    /// again until every choice holds with all of them, so that what is recorded is the recall
    /// decoding with all of them delivers on the file. The labels whose stored recall was chosen
    /// on `path` are chosen again with them, and are among the choices returned. `kept` are the file's entities as the model
    /// decodes it (the [`FileEvaluation::by_label`] of `path` scored with
    /// [`TagOptions::thresholds`] off). Returns the tagger, its
    /// thresholds and biases cleared, and the choices as `thresholds.json` records them; an
    /// error names the first label out of reach.
    pub fn choose_for_recall(
        self,
        path: &Path,
        kept: &BTreeMap<String, LabelConfidences>,
        targets: &[(String, f64)],
        options: TagOptions,
    ) -> Result<(Self, BTreeMap<String, LabelThreshold>)> {
        check_recall_targets(path, kept, targets)?;
        let targets = &self.with_stored_targets(path, targets)?;
        let others = |map: &BTreeMap<String, f64>| -> BTreeMap<String, f64> {
            let chosen_here = |label: &String| targets.iter().any(|(l, _)| l == label);
            let kept = map.iter().filter(|(label, _)| !chosen_here(label));
            kept.map(|(label, value)| (label.clone(), *value)).collect()
        };
        let biases = others(self.biases());
        let mut tagger = self.with_thresholds(BTreeMap::new())?.with_biases(biases)?;
        let options = TagOptions {
            thresholds: true,
            confidence: true,
            ..options
        };
        let mut chosen = BTreeMap::new();
        let mut short_of = None;
        for _ in 0..RECALL_ROUNDS {
            for (label, target) in targets {
                let choice;
                (tagger, choice) = tagger.choose_one(path, kept, label, *target, options)?;
                chosen.insert(label.clone(), choice);
            }
            // Decoded with every choice: a bias chosen after a label can take entities from it.
            let delivered = tagger.delivered(path, kept, &chosen, options)?;
            let short = targets
                .iter()
                .find(|(label, target)| delivered[label].recall < *target);
            for (label, point) in delivered {
                let how = chosen.get_mut(&label).and_then(|c| c.chosen.as_mut());
                if let Some(how) = how {
                    (how.precision, how.recall) = (point.precision, point.recall);
                }
            }
            let Some((label, target)) = short else {
                return Ok((tagger.with_biases(BTreeMap::new())?, chosen));
            };
            short_of = Some((label, *target));
            // Thresholds alone leave other labels' entities as they are: another round would
            // choose the same.
            if chosen.values().all(|c| c.bias == 0.0) {
                break;
            }
        }
        let (label, target) = short_of.expect("the rounds end early only when every label holds");
        let recall = chosen[label].chosen.as_ref().map_or(0.0, |c| c.recall);
        Err(Error::InvalidOption {
            option: "recall",
            message: format!(
                "{label}={target}: out of reach on {} together with the other operating points \
                 ({}): decoded with all of them, {label}'s recall is {recall:.2}%",
                path.display(),
                tagger.other_biases(label).join(", ")
            ),
        })
    }

    /// The biases in effect for labels other than `label`, as a message names them.
    fn other_biases(&self, label: &str) -> Vec<String> {
        let others = self.biases().iter().filter(|(l, _)| *l != label);
        others
            .map(|(l, bias)| format!("{l} bias {bias:.4}"))
            .collect()
    }

    /// `targets` and the recalls stored in `thresholds.json` that were chosen on `path` for other
    /// labels: chosen again with the new ones, so that a bias chosen now cannot leave a stored
    /// label short of the recall it records.
    fn with_stored_targets(
        &self,
        path: &Path,
        targets: &[(String, f64)],
    ) -> Result<Vec<(String, f64)>> {
        let labels = entity_types(self.tags());
        let stored = ModelFiles::new(self.dir()).read_thresholds(&labels)?;
        let mut all = targets.to_vec();
        for (label, threshold) in stored.map(|s| s.labels).unwrap_or_default() {
            let Some(chosen) = threshold.chosen else {
                continue;
            };
            let here = chosen.file == path
                || std::fs::canonicalize(&chosen.file).ok() == std::fs::canonicalize(path).ok();
            if here && !all.iter().any(|(l, _)| *l == label) {
                all.push((label, chosen.target_recall));
            }
        }
        Ok(all)
    }

    /// How `label` reaches `target` percent recall on `path` with the tagger's biases of the
    /// other labels in effect: a threshold, or else a bias, which the tagger returned has.
    fn choose_one(
        self,
        path: &Path,
        kept: &BTreeMap<String, LabelConfidences>,
        label: &str,
        target: f64,
        options: TagOptions,
    ) -> Result<(Self, LabelThreshold)> {
        let mut biases = self.biases().clone();
        biases.remove(label);
        let mut tagger = self.with_biases(biases)?;
        // Without a bias in effect the entities are the model's own, already decoded.
        let entities = if tagger.biases().is_empty() {
            kept.get(label).cloned().unwrap_or_default()
        } else {
            let decoded = tagger.label_entities(path, options)?;
            decoded.get(label).cloned().unwrap_or_default()
        };
        let (threshold, bias, point) = match entities.for_recall(target) {
            Some(point) => (point.threshold.clamp(0.0, 1.0), 0.0, point),
            None => {
                let found;
                (tagger, found) = tagger.bias_for_recall(path, label, target, options)?;
                let others = tagger.other_biases(label);
                let with_others = if others.is_empty() {
                    String::new()
                } else {
                    format!(" with the other operating points ({})", others.join(", "))
                };
                let (bias, point) = found.map_err(|most| Error::InvalidOption {
                    option: "recall",
                    message: format!(
                        "{label}={target}: out of reach on {}{with_others}: the model's own \
                         entities keep {:.2}%, and with its emission scores raised (by up to \
                         {SCANNED_BIAS}) {:.2}% at most (a recall of exact spans: a bias does \
                         not mend boundaries)",
                        path.display(),
                        entities.at(0.0).recall,
                        most.recall
                    ),
                })?;
                (0.0, bias, point)
            }
        };
        let mut biases = tagger.biases().clone();
        biases.insert(label.to_string(), bias);
        let how = ChosenThreshold {
            file: path.to_path_buf(),
            target_recall: target,
            precision: point.precision,
            recall: point.recall,
        };
        let choice = LabelThreshold {
            threshold,
            bias,
            chosen: Some(how),
        };
        Ok((tagger.with_biases(biases)?, choice))
    }

    /// Each chosen label's scores on `path` decoded with the tagger's biases (every choice's
    /// among them), its entities below its threshold left out.
    fn delivered(
        &self,
        path: &Path,
        kept: &BTreeMap<String, LabelConfidences>,
        chosen: &BTreeMap<String, LabelThreshold>,
        options: TagOptions,
    ) -> Result<BTreeMap<String, OperatingPoint>> {
        let decoded;
        let entities = if self.biases().is_empty() {
            kept
        } else {
            decoded = self.label_entities(path, options)?;
            &decoded
        };
        Ok(chosen
            .iter()
            .map(|(label, choice)| {
                let point = entities.get(label).cloned().unwrap_or_default();
                (label.clone(), point.at(choice.threshold))
            })
            .collect())
    }

    /// Each label's entities on the gold file `path`, decoded with `options` (confidences on).
    fn label_entities(
        &self,
        path: &Path,
        options: TagOptions,
    ) -> Result<BTreeMap<String, LabelConfidences>> {
        Ok(self
            .evaluate_file(path, options)?
            .by_label
            .unwrap_or_default())
    }

    /// The smallest bias of `label`'s emission scores whose decoding of `path` keeps `target`
    /// percent of its gold entities, with its scores; when none up to [`SCANNED_BIAS`] does,
    /// the scores of the one that kept the most. Biases are tried in steps of
    /// [`BIAS_STEP`], then halved between the last two: recall rises with the bias only so
    /// far, and then falls as the label's spans run into each other. Other labels keep the
    /// tagger's biases.
    fn bias_for_recall(
        self,
        path: &Path,
        label: &str,
        target: f64,
        options: TagOptions,
    ) -> Result<(Self, BiasFound)> {
        let mut tagger = self;
        let at = |tagger: Self, bias: f64| -> Result<(Self, OperatingPoint)> {
            let mut biases = tagger.biases().clone();
            biases.insert(label.to_string(), bias);
            let tagger = tagger.with_biases(biases)?;
            let entities = tagger.label_entities(path, options)?;
            let point = entities.get(label).cloned().unwrap_or_default().at(0.0);
            Ok((tagger, point))
        };
        let mut most: Option<OperatingPoint> = None;
        let (mut low, mut high) = (0.0, BIAS_STEP);
        let mut best = loop {
            let point;
            (tagger, point) = at(tagger, high)?;
            if point.recall >= target {
                break point;
            }
            if most.is_none_or(|m| point.recall > m.recall) {
                most = Some(point);
            }
            if high >= SCANNED_BIAS {
                return Ok((tagger, Err(most.unwrap_or(point))));
            }
            (low, high) = (high, high + BIAS_STEP);
        };
        for _ in 0..8 {
            let middle = (low + high) / 2.0;
            let point;
            (tagger, point) = at(tagger, middle)?;
            if point.recall >= target {
                (high, best) = (middle, point);
            } else {
                low = middle;
            }
        }
        Ok((tagger, Ok((high, best))))
    }

    /// Stores `chosen` thresholds in the model's `thresholds.json`, beside those stored for other
    /// labels, so that every interface that loads the model applies them.
    pub fn store_thresholds(&self, chosen: BTreeMap<String, LabelThreshold>) -> Result<()> {
        let files = ModelFiles::new(self.dir());
        let labels = entity_types(self.tags());
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
            let sentences = gold.sentences.iter().zip(&predictions).map(|(s, p)| {
                let found = p.spans.iter().cloned().zip(p.confidences.iter().copied());
                (spans(&s.tags), found.collect())
            });
            label_confidences(sentences, |span| &span.label)
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
        for (text, tagged) in gold.texts.iter().zip(&tagged) {
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
        let by_label = options.confidence.then(|| {
            let texts = gold.texts.iter().zip(&tagged).map(|(text, tagged)| {
                let found = tagged.entities.iter();
                let found = found.filter_map(|e| Some((e.span(), e.confidence?)));
                (text.spans.clone(), found.collect())
            });
            label_confidences(texts, |span: &CharSpan| &span.label)
        });
        Ok(SpanEvaluation {
            tagged,
            gold_tags,
            misaligned,
            report: scorer.report(),
            by_label,
        })
    }
}

/// The steps in which biases are tried for a recall ([`Tagger::choose_for_recall`]), and the
/// largest tried: emission scores are a few units apart, and past this a label's spans have
/// long since begun to run into each other.
const BIAS_STEP: f64 = 0.25;
/// Rounds of choosing every label's operating point with the others' in effect, at most: a bias
/// chosen for one label can take entities from another chosen before it.
const RECALL_ROUNDS: usize = 3;
const SCANNED_BIAS: f64 = 10.0;

/// A bias and the scores it gives, or the scores of the bias that kept the most when none
/// reaches a recall.
type BiasFound = std::result::Result<(f64, OperatingPoint), OperatingPoint>;

/// One `word gold predicted` line.
/// Refuses recalls to choose that cannot be: a label given twice, a percentage outside (0, 100],
/// or a label without gold entities in `path` to measure recall on.
fn check_recall_targets(
    path: &Path,
    kept: &BTreeMap<String, LabelConfidences>,
    targets: &[(String, f64)],
) -> Result<()> {
    let invalid = |message: String| Error::InvalidOption {
        option: "recall",
        message,
    };
    for (i, (label, target)) in targets.iter().enumerate() {
        if targets[..i].iter().any(|(earlier, _)| earlier == label) {
            return Err(invalid(format!(
                "{label}: given twice; give each label's recall once"
            )));
        }
        if !(*target > 0.0 && *target <= 100.0) {
            return Err(invalid(format!(
                "{label}={target}: expected a percentage above 0 and at most 100 (every entity \
                 left out keeps no recall to choose by)"
            )));
        }
        if kept.get(label).is_none_or(|l| l.gold == 0) {
            return Err(invalid(format!(
                "{label}: {} has no gold entity of this label to measure recall on",
                path.display()
            )));
        }
    }
    Ok(())
}

fn push_row(text: &mut String, columns: [&str; 3]) {
    text.push_str(&columns.join(" "));
    text.push('\n');
}
