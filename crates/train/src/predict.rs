//! Running a trained tagger: batched decoding (optionally constrained to the tag scheme, with
//! n-best paths, entity confidences and token marginals), tags converted back to the files'
//! scheme, and conlleval scoring against gold tags.

use std::path::Path;
use std::sync::Mutex;

use burn::module::Module;
use burn::tensor::Device;
use nertrain_data::{
    Batch, BatchPlan, Corpus, Encoded, Report, Scorer, TagScheme, Vocabularies, convert_tags,
    parse_tag, spans,
};
use nertrain_model::crf::{host, host_emissions};
use nertrain_model::{BatchTensors, Constraints, Tagger, WordGates};

use crate::{ModelDir, ModelMeta, Result};

/// What to compute besides the best path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PredictOptions {
    /// Decode only well-formed tag sequences of the training scheme.
    pub constrained: bool,
    /// Each entity's probability under the model.
    pub confidence: bool,
    /// Each token's tag marginals.
    pub marginals: bool,
    /// How many best paths to return (1: just the best).
    pub nbest: usize,
    pub batch_size: usize,
}

impl Default for PredictOptions {
    fn default() -> Self {
        Self {
            constrained: true,
            confidence: false,
            marginals: false,
            nbest: 1,
            batch_size: 100,
        }
    }
}

/// One sentence's prediction; tags are in the files' scheme.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Prediction {
    pub tags: Vec<String>,
    /// The best path's score (unnormalised log-potential).
    pub score: f32,
    /// With `confidence`: for each entity of `spans(&tags)`, in order, the probability that
    /// exactly these tokens form an entity of this type.
    pub confidences: Vec<f64>,
    /// With `marginals`: `[token][tag]` in the order of the model's tag vocabulary.
    pub marginals: Vec<Vec<f64>>,
    /// With `nbest > 1`: the best paths, best first, with their probabilities.
    pub nbest: Vec<(Vec<String>, f64)>,
}

/// A decoding batch holds at most this many tokens, padding included, so that long sentences
/// (or long texts tagged in pieces) need no more memory than typical ones.
pub const MAX_BATCH_TOKENS: usize = 8192;

/// Everything `decode` needs about the model besides its weights.
pub struct Decoder<'a> {
    pub model: &'a Tagger,
    pub vocab: &'a Vocabularies,
    pub train_scheme: TagScheme,
    pub output_scheme: TagScheme,
    pub max_word_len: usize,
    pub device: &'a Device,
    /// Filled as words are met; the model does not change while a decoder holds it.
    pub word_gates: Mutex<WordGates>,
}

impl<'a> Decoder<'a> {
    pub fn new(
        model: &'a Tagger,
        vocab: &'a Vocabularies,
        meta: &ModelMeta,
        device: &'a Device,
    ) -> Self {
        Self {
            model,
            vocab,
            train_scheme: meta.train_scheme,
            output_scheme: meta.file_scheme,
            max_word_len: meta.max_word_len,
            device,
            word_gates: Mutex::default(),
        }
    }

    /// Decodes encoded sentences in length-sorted batches; predictions come back in input order.
    pub fn decode(&self, sentences: &[Encoded], options: PredictOptions) -> Vec<Prediction> {
        let constraints = options
            .constrained
            .then(|| Constraints::for_scheme(self.vocab.tags.items(), self.train_scheme));
        let potentials = self.model.crf.potentials(constraints.as_ref());
        // The best path alone is decoded on the host: at 9 tags it is cheaper than even one step
        // of the tensor recursion, whatever the backend. n-best paths come from the tensor version.
        let host_potentials = potentials.to_host();
        let k = self.vocab.tags.len();

        let lengths: Vec<usize> = sentences.iter().map(Encoded::len).collect();
        let mut predictions = vec![Prediction::default(); sentences.len()];
        for indices in BatchPlan::sorted(&lengths, options.batch_size, MAX_BATCH_TOKENS).batches {
            let nonempty: Vec<usize> = indices.into_iter().filter(|&i| lengths[i] > 0).collect();
            if nonempty.is_empty() {
                continue;
            }
            let batch = Batch::new(sentences, nonempty, self.max_word_len);
            let inputs = BatchTensors::new(&batch, self.device);
            let emissions = {
                let mut cache = self.word_gates.lock().expect("no panic while held");
                self.model.emissions_with_cache(&inputs, &mut cache)
            };
            let host_emissions = host_emissions(emissions.clone(), &inputs.lengths);
            let nbest = (options.nbest > 1).then(|| {
                potentials.nbest(
                    emissions,
                    inputs.mask.clone(),
                    &inputs.lengths,
                    options.nbest,
                )
            });
            let p = &host_potentials;
            for (row, (&i, emissions)) in batch.indices.iter().zip(&host_emissions).enumerate() {
                let (best_path, score) = host::viterbi(p, emissions);
                let tags = self.tags_of(&best_path);
                let mut prediction = Prediction {
                    tags: convert_tags(&tags, self.output_scheme),
                    score: score as f32,
                    ..Default::default()
                };
                if options.confidence || options.marginals || nbest.is_some() {
                    let fb = host::ForwardBackward::new(p, emissions);
                    if options.confidence {
                        prediction.confidences = spans(&tags)
                            .iter()
                            .map(|span| {
                                let continues = format!("I-{}", span.label);
                                let may_follow = |j: usize| {
                                    self.train_scheme == TagScheme::Iobes
                                        || self.vocab.tags.item(j) != continues
                                };
                                fb.segment_probability(
                                    p,
                                    emissions,
                                    span.start,
                                    &best_path[span.start..span.end],
                                    may_follow,
                                )
                            })
                            .collect();
                    }
                    if options.marginals {
                        prediction.marginals = (0..lengths[i])
                            .map(|t| (0..k).map(|tag| fb.marginal(t, tag)).collect())
                            .collect();
                    }
                    if let Some(nbest) = &nbest {
                        prediction.nbest = nbest[row]
                            .iter()
                            .map(|(path, score)| {
                                let tags = convert_tags(&self.tags_of(path), self.output_scheme);
                                (tags, (f64::from(*score) - fb.log_z).exp())
                            })
                            .collect();
                    }
                }
                predictions[i] = prediction;
            }
        }
        predictions
    }

    /// Decodes a tagged corpus and scores the predictions against its gold tags.
    pub fn score(&self, gold: &Corpus, encoded: &[Encoded], options: PredictOptions) -> Report {
        let predicted: Vec<Vec<String>> = self
            .decode(encoded, options)
            .into_iter()
            .map(|p| p.tags)
            .collect();
        score_corpus(gold, &predicted)
    }

    fn tags_of(&self, path: &[usize]) -> Vec<String> {
        path.iter()
            .map(|&id| self.vocab.tags.item(id).to_string())
            .collect()
    }
}

/// conlleval's counts of predictions against a corpus's gold tags.
pub fn score_corpus(gold: &Corpus, predicted: &[Vec<String>]) -> Report {
    let mut scorer = Scorer::new();
    for (sentence, tags) in gold.sentences.iter().zip(predicted) {
        scorer.add_sentence(&sentence.tags, tags);
    }
    scorer.report()
}

/// A reliability table: predicted entities binned by confidence, with the share that are correct.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CalibrationBin {
    pub from: f64,
    pub to: f64,
    pub entities: usize,
    pub mean_confidence: f64,
    /// Percent of the bin's entities that match a gold entity exactly.
    pub precision: f64,
}

/// Bins every predicted entity by its confidence into tenths and measures its precision.
pub fn calibration(gold: &Corpus, predictions: &[Prediction]) -> Vec<CalibrationBin> {
    let mut bins: Vec<(usize, f64, usize)> = vec![(0, 0.0, 0); 10];
    for (sentence, prediction) in gold.sentences.iter().zip(predictions) {
        let gold_spans = spans(&sentence.tags);
        for (span, &confidence) in spans(&prediction.tags).iter().zip(&prediction.confidences) {
            let bin = &mut bins[((confidence * 10.0) as usize).min(9)];
            bin.0 += 1;
            bin.1 += confidence;
            bin.2 += usize::from(gold_spans.contains(span));
        }
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

/// A trained model loaded for inference.
pub struct Predictor {
    pub meta: ModelMeta,
    pub vocab: Vocabularies,
    pub model: Tagger,
    pub device: Device,
}

impl Predictor {
    pub fn load(dir: &Path, device: &Device) -> Result<Self> {
        let (meta, vocab, model) = ModelDir::new(dir).load(device)?;
        Ok(Self {
            meta,
            vocab,
            model: model.valid(),
            device: device.clone(),
        })
    }

    /// Options as the model was trained to be decoded.
    pub fn default_options(&self) -> PredictOptions {
        PredictOptions {
            constrained: self.meta.crf.constrained_decoding,
            ..PredictOptions::default()
        }
    }

    pub fn predict<S: AsRef<str>>(
        &self,
        sentences: &[Vec<S>],
        options: PredictOptions,
    ) -> Vec<Prediction> {
        let encoded: Vec<Encoded> = sentences
            .iter()
            .map(|words| self.vocab.encode_words(words))
            .collect();
        self.decoder().decode(&encoded, options)
    }

    pub fn decoder(&self) -> Decoder<'_> {
        Decoder::new(&self.model, &self.vocab, &self.meta, &self.device)
    }
}

/// The entity types among a tag vocabulary.
pub fn entity_types(tags: &[String]) -> Vec<String> {
    let mut types: Vec<String> = tags
        .iter()
        .filter_map(|t| parse_tag(t).map(|(_, label)| label.to_string()))
        .collect();
    types.sort();
    types.dedup();
    types
}
