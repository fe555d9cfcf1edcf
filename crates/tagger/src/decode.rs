//! Decoding tokenized sentences with a trained model: batched emissions, the CRF's best path
//! (optionally constrained to the tag scheme), n-best paths, entity confidences and token
//! marginals, document consistency, tags converted back to the files' scheme, and conlleval
//! scoring against gold tags. Training's dev and test evaluation decodes here too.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use burn::tensor::Device;
use burn::tensor::{Tensor, TensorData};
use nertrain_data::{
    Batch, BatchPlan, Casing, Corpus, DEFAULT_DOCUMENT_TOKENS, Encoded, Featurizer, Report, Scorer,
    Span, TagScheme, Vocabularies, document_pieces, ends_before, parse_tag, render_spans, spans,
};
use nertrain_model::crf::{ForwardBackward, Potentials, host_emissions};
use nertrain_model::{BatchTensors, Constraints, CrfError, Dropped, ModelMeta, Network, WordGates};
use rayon::prelude::*;

use crate::encoder_cache::EncoderCache;
use crate::{Error, Result, Tagger};

/// How to decode, and what to compute besides the best path. A model's own settings come from
/// [`TagOptions::of_model`] (or [`Tagger::options`](crate::Tagger::options)); a caller's changes
/// to them are checked by [`TagOptions::check`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TagOptions {
    /// Decode only well-formed tag sequences of the training scheme.
    pub constrained: bool,
    /// Each entity's probability under the model.
    pub confidence: bool,
    /// Each token's tag marginals.
    pub marginals: bool,
    /// Each pair of neighbouring tokens' joint tag marginals, and each token's (what a student
    /// is distilled from).
    pub pair_marginals: bool,
    /// The scores are divided by it before confidences, marginals and n-best probabilities
    /// are taken (1: the model's own); the best path is the same at any temperature.
    pub temperature: f64,
    /// How many best paths to return (1: just the best).
    pub nbest: usize,
    /// Sentences per decoding batch (fewer when they are long: see [`MAX_BATCH_TOKENS`]).
    pub batch_size: usize,
    /// How strongly other mentions in the document pull a word's prediction
    /// ([`DocumentContext::consistency`](nertrain_model::DocumentContext)); 0: not at all.
    pub consistency: f64,
    /// Each sentence's representation: the mean of the BiLSTM's output over its words.
    pub representation: bool,
    /// When more than 0: each token's mutual information between its tag and the model's
    /// weights (BALD), from this many passes with dropout on (Monte Carlo dropout).
    pub dropout_samples: usize,
    /// The seed of those passes' dropout masks.
    pub dropout_seed: u64,
    /// Decode with the tagger's operating points: its biases when the best path is chosen
    /// ([`Tagger::biases`](crate::Tagger::biases)), then the best path's entities below its
    /// confidence thresholds left out, their words tagged `O`
    /// ([`Tagger::thresholds`](crate::Tagger::thresholds)). The n best paths and the marginals
    /// are the model's own.
    pub thresholds: bool,
}

impl TagOptions {
    /// The model's own decoding: constrained to its tag scheme when it was trained so, with its
    /// document consistency weight, entity confidences and the tagger's operating points, in
    /// batches of 100 sentences; nothing else computed.
    pub fn of_model(meta: &ModelMeta) -> Self {
        Self {
            confidence: true,
            consistency: meta.document.map_or(0.0, |d| d.consistency),
            thresholds: true,
            ..Self::best_path(meta.crf.constrained_decoding, 100)
        }
    }

    /// The best path alone, `constrained` or not, in batches of `batch_size` sentences: the
    /// network's own prediction, as training's dev evaluation and the benchmark decode.
    pub fn best_path(constrained: bool, batch_size: usize) -> Self {
        Self {
            constrained,
            confidence: false,
            marginals: false,
            pair_marginals: false,
            temperature: 1.0,
            nbest: 1,
            batch_size,
            consistency: 0.0,
            representation: false,
            dropout_samples: 0,
            dropout_seed: 0,
            thresholds: false,
        }
    }
}

/// One sentence's prediction; tags are in the files' scheme.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Prediction {
    /// The best path's tags.
    pub tags: Vec<String>,
    /// The best path's entities, found once from the decoded path.
    pub spans: Vec<Span>,
    /// The best path's score (unnormalised log-potential).
    pub score: f32,
    /// With `confidence`: for each of `spans`, in order, the probability that exactly these
    /// tokens form an entity of this type.
    pub confidences: Vec<f64>,
    /// With `marginals` (or `pair_marginals`): `[token][tag]` in the order of the model's tag
    /// vocabulary.
    pub marginals: Vec<Vec<f64>>,
    /// With `pair_marginals`: for each token after the first, p(previous token's tag `i`, its
    /// tag `j`) at `[token - 1][i * tags + j]`.
    pub pair_marginals: Vec<Vec<f64>>,
    /// With `nbest > 1`: the best paths, best first, with their probabilities.
    pub nbest: Vec<RankedPath>,
    /// With `confidence`, `marginals` or `nbest > 1`: ln p(best path | sentence).
    pub log_probability: Option<f64>,
    /// With `representation`: the mean of the BiLSTM's output over the sentence's words.
    pub representation: Vec<f32>,
    /// With `dropout_samples`: each token's mutual information between its tag and the
    /// weights, in nats.
    pub mutual_information: Vec<f64>,
}

impl Prediction {
    /// The best path's tags made again from its entities, in `scheme`: after entities were
    /// left out or pieces of a sentence joined, so that the tags never break an entity.
    pub(crate) fn retag(&mut self, scheme: TagScheme) {
        self.tags = render_spans(&self.spans, self.tags.len(), scheme);
    }
}

/// One of a sentence's n best tag paths.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RankedPath {
    /// Its tags, in the files' scheme.
    pub tags: Vec<String>,
    /// Its entities.
    pub spans: Vec<Span>,
    /// p(path | sentence).
    pub probability: f64,
}

/// With document consistency, documents are decoded in groups of about this many tokens.
const DECODE_GROUP_TOKENS: usize = 1 << 16;

/// The share of a feature column's values never seen in training past which tagging refuses:
/// the column is not the one the model learned from.
const ALMOST_ALL_UNSEEN: f64 = 0.9;

/// A capitalised word of a document: its sentence, its position, its lower-cased form and the
/// probability of each class (`O`, then each entity type) at it.
type CapitalizedMention = (usize, usize, String, Vec<f64>);

/// Consecutive documents in groups of at least `max_tokens` tokens, except the last.
fn document_groups(
    documents: &[Range<usize>],
    lengths: &[usize],
    max_tokens: usize,
) -> Vec<Vec<Range<usize>>> {
    let mut groups = vec![Vec::new()];
    let mut tokens = 0;
    for document in documents {
        if tokens >= max_tokens {
            groups.push(Vec::new());
            tokens = 0;
        }
        tokens += lengths[document.clone()].iter().sum::<usize>();
        groups.last_mut().expect("a group").push(document.clone());
    }
    groups
}

/// A decoding batch holds at most this many tokens, padding included, so that long sentences
/// (or long texts tagged in pieces) need no more memory than typical ones.
pub const MAX_BATCH_TOKENS: usize = 8192;

/// A model's weights and everything decoding needs about them: training decodes its dev and
/// test sets with one over the weights of the moment, a [`Tagger`] with its loaded model.
pub struct Decoder<'a> {
    /// The network (its inference version).
    model: &'a Network,
    /// Its vocabularies.
    vocab: &'a Vocabularies,
    /// How its input is read and its tags written.
    spec: DecodeSpec,
    /// Where its tensors are.
    device: &'a Device,
    /// Filled with the words of what is decoded: valid while the model does not change.
    word_gates: &'a WordGates,
    /// Added to each tag's emission scores when the best path is chosen (by tag id), so that a
    /// label's entities are found more (or less) often; confidences, marginals and n-best paths
    /// stay the model's. Empty: none.
    bias: Vec<f64>,
    /// Where a frozen encoder's layers of each batch are read from (or computed and written
    /// to), batch by batch, so that no more of them than a batch's is held at once.
    encoder_cache: Option<&'a EncoderCache>,
}

/// What of a model's description decoding needs: how words are read and tags written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeSpec {
    /// The scheme its tags are in.
    pub train_scheme: TagScheme,
    /// The scheme predictions are written in (the training files').
    pub output_scheme: TagScheme,
    /// Longer words keep their first characters for character features.
    pub max_word_len: usize,
}

impl From<&ModelMeta> for DecodeSpec {
    fn from(meta: &ModelMeta) -> Self {
        Self {
            train_scheme: meta.train_scheme,
            output_scheme: meta.file_scheme,
            max_word_len: meta.max_word_len,
        }
    }
}

impl<'a> Decoder<'a> {
    /// A decoder of `model` as `meta` describes it, filling `word_gates` as it goes.
    pub fn new(
        model: &'a Network,
        vocab: &'a Vocabularies,
        meta: &ModelMeta,
        device: &'a Device,
        word_gates: &'a WordGates,
    ) -> Self {
        Self::with_spec(model, vocab, meta.into(), device, word_gates)
    }

    /// A decoder of a model that has no description (yet): `spec` says what decoding needs
    /// of one.
    pub fn with_spec(
        model: &'a Network,
        vocab: &'a Vocabularies,
        spec: DecodeSpec,
        device: &'a Device,
        word_gates: &'a WordGates,
    ) -> Self {
        Self {
            model,
            vocab,
            spec,
            device,
            word_gates,
            bias: Vec::new(),
            encoder_cache: None,
        }
    }

    /// The decoder reading its frozen encoder's layers through `cache`, when given.
    pub(crate) fn with_encoder_cache(mut self, cache: Option<&'a EncoderCache>) -> Self {
        self.encoder_cache = cache;
        self
    }

    /// The batch of `sentences` at `indices`, with the frozen encoder's layers of each from the
    /// encoder cache when the decoder has one.
    fn batch(&self, sentences: &[Encoded], indices: &[usize]) -> Batch {
        let max_word_len = self.spec.max_word_len;
        let Some(cache) = self.encoder_cache else {
            return Batch::new(sentences, indices.to_vec(), max_word_len);
        };
        let mut members: Vec<Encoded> = indices.iter().map(|&i| sentences[i].clone()).collect();
        cache.fill(self.model, &mut members, max_word_len);
        Batch::new(&members, (0..members.len()).collect(), max_word_len)
    }

    /// The decoder with `bias` (by label) added to the emission scores of each of the label's
    /// tags when the best path is chosen: a well-formed path with more of the label's entities
    /// (or fewer, below 0).
    pub fn with_bias(mut self, bias: &BTreeMap<String, f64>) -> Self {
        self.bias = self
            .vocab
            .tags
            .items()
            .iter()
            .map(|tag| {
                parse_tag(tag)
                    .and_then(|(_, label)| bias.get(label))
                    .copied()
                    .unwrap_or(0.0)
            })
            .collect();
        if self.bias.iter().all(|&b| b == 0.0) {
            self.bias.clear();
        }
        self
    }

    /// Decodes encoded sentences in length-sorted batches; predictions come back in input order.
    /// `documents` are consecutive ranges of `sentences` read together, used when
    /// `options.consistency` is not 0: a capitalised word's emission scores are then pulled
    /// towards the class the model gives its other mentions in the document.
    pub fn decode(
        &self,
        sentences: &[Encoded],
        documents: &[Range<usize>],
        options: TagOptions,
    ) -> Result<Vec<Prediction>> {
        self.decode_within(sentences, documents, &[], options)
    }

    /// [`Self::decode`] with the tags each sentence may have: `allowed[i]`, where given, is
    /// `[len * tags]` for sentence `i` (missing or `None`: any tag), and its prediction is the
    /// best path through allowed tags, with confidences, marginals and n-best paths conditioned
    /// on them ([`Potentials::restrict`]).
    pub fn decode_within(
        &self,
        sentences: &[Encoded],
        documents: &[Range<usize>],
        allowed: &[Option<Vec<bool>>],
        options: TagOptions,
    ) -> Result<Vec<Prediction>> {
        let constraints = options
            .constrained
            .then(|| Constraints::for_scheme(self.vocab.tags.items(), self.spec.train_scheme));
        let potentials = self.model.crf.potentials(constraints.as_ref());
        // The best path alone is decoded on the host: over a tagger's few tags that is cheaper
        // than even one step of the tensor recursion, whatever the backend. n-best paths come
        // from the tensor version.
        let lengths: Vec<usize> = sentences.iter().map(Encoded::len).collect();
        self.word_gates
            .fill(self.model, sentences, self.spec.max_word_len);
        // Batches are independent: they are decoded on all of rayon's threads, each taking whole
        // batches (finer-grained parallelism inside a batch costs more than it gains).
        let decode_batch = |indices: &Vec<usize>, emissions: &[Vec<f64>]| {
            let restricted = restricted(&potentials, indices, emissions, allowed)?;
            let emissions = restricted.as_deref().unwrap_or(emissions);
            self.predictions(
                &potentials,
                indices.iter().map(|&i| lengths[i]).collect(),
                emissions,
                options,
            )
        };
        let mut predictions = self.with_extras(&potentials, sentences, &lengths, options)?;
        let mut place = |batches: &[Vec<usize>], decoded: Vec<Vec<Prediction>>| {
            for (indices, batch) in batches.iter().zip(decoded) {
                for (&i, prediction) in indices.iter().zip(batch) {
                    let extras = std::mem::take(&mut predictions[i]);
                    predictions[i] = Prediction {
                        representation: extras.representation,
                        mutual_information: extras.mutual_information,
                        ..prediction
                    };
                }
            }
        };
        if options.consistency == 0.0 {
            let batches = self.batches(&lengths, (0..sentences.len()).collect(), options);
            let decoded = batches
                .par_iter()
                .map(|indices| decode_batch(indices, &self.emissions(sentences, indices)))
                .collect::<Result<_>>()?;
            place(&batches, decoded);
            return Ok(predictions);
        }
        // Documents are decoded in groups of bounded size: every emission of a group is held
        // until its documents have been seen whole.
        for group in document_groups(documents, &lengths, DECODE_GROUP_TOKENS) {
            let members: Vec<usize> = group.iter().flat_map(|d| d.clone()).collect();
            let batches = self.batches(&lengths, members, options);
            let emissions =
                self.consistent_emissions(&potentials, sentences, &group, &batches, options)?;
            let decoded = batches
                .par_iter()
                .zip(&emissions)
                .map(|(indices, emissions)| decode_batch(indices, emissions))
                .collect::<Result<_>>()?;
            place(&batches, decoded);
        }
        Ok(predictions)
    }

    /// The emissions of `batches` (of the sentences of the documents `group`), each word's
    /// pulled towards the class of its other mentions in its document by
    /// `options.consistency`.
    fn consistent_emissions(
        &self,
        potentials: &Potentials,
        sentences: &[Encoded],
        group: &[Range<usize>],
        batches: &[Vec<usize>],
        options: TagOptions,
    ) -> Result<Vec<Vec<Vec<f64>>>> {
        let mut emissions: HashMap<usize, Vec<f64>> = batches
            .par_iter()
            .map(|indices| {
                let emissions = self.emissions(sentences, indices);
                indices.iter().copied().zip(emissions).collect::<Vec<_>>()
            })
            .flatten()
            .collect();
        for document in group {
            self.pull_towards_other_mentions(
                potentials,
                sentences,
                document.clone(),
                &mut emissions,
                options.consistency,
            )?;
        }
        Ok(batches
            .iter()
            .map(|indices| {
                indices
                    .iter()
                    .map(|i| emissions.remove(i).expect("every member decoded"))
                    .collect()
            })
            .collect())
    }

    /// A prediction per sentence holding only what `options` asks beyond decoding (each
    /// sentence's representation and per-token mutual information), or nothing.
    fn with_extras(
        &self,
        potentials: &Potentials,
        sentences: &[Encoded],
        lengths: &[usize],
        options: TagOptions,
    ) -> Result<Vec<Prediction>> {
        let mut predictions = vec![Prediction::default(); sentences.len()];
        if options.representation || options.dropout_samples > 0 {
            let batches = self.batches(lengths, (0..sentences.len()).collect(), options);
            let extras = batches
                .par_iter()
                .map(|indices| self.extras(potentials, sentences, indices, options))
                .collect::<Result<Vec<_>>>()?;
            for (indices, batch) in batches.iter().zip(extras) {
                for (&i, (representation, information)) in indices.iter().zip(batch) {
                    predictions[i].representation = representation;
                    predictions[i].mutual_information = information;
                }
            }
        }
        Ok(predictions)
    }

    /// The decoding batches of the sentences `members`, empty ones left out.
    fn batches(
        &self,
        lengths: &[usize],
        members: Vec<usize>,
        options: TagOptions,
    ) -> Vec<Vec<usize>> {
        let member_lengths: Vec<usize> = members.iter().map(|&i| lengths[i]).collect();
        BatchPlan::sorted(&member_lengths, options.batch_size, MAX_BATCH_TOKENS)
            .batches
            .into_iter()
            .map(|batch| {
                batch
                    .into_iter()
                    .map(|j| members[j])
                    .filter(|&i| lengths[i] > 0)
                    .collect::<Vec<usize>>()
            })
            .filter(|batch| !batch.is_empty())
            .collect()
    }

    /// For each of `indices`, what `options` asks for besides decoding: `sentences[i]`'s
    /// representation and its tokens' mutual information.
    fn extras(
        &self,
        p: &Potentials,
        sentences: &[Encoded],
        indices: &[usize],
        options: TagOptions,
    ) -> Result<Vec<(Vec<f32>, Vec<f64>)>> {
        let batch = self.batch(sentences, indices);
        let mut extras = vec![(Vec::new(), Vec::new()); indices.len()];
        if options.representation {
            let states = self.model.states_with_cache(&batch, self.word_gates);
            let [_, time, d] = states.dims();
            let values = nertrain_model::host_values(states);
            for (row, &length) in batch.lengths.iter().enumerate() {
                let mut mean = vec![0.0f32; d];
                for t in 0..length {
                    let state = &values[(row * time + t) * d..][..d];
                    mean.iter_mut().zip(state).for_each(|(m, v)| *m += v);
                }
                mean.iter_mut().for_each(|m| *m /= length.max(1) as f32);
                extras[row].0 = mean;
            }
        }
        if options.dropout_samples > 0 {
            let informations = self.mutual_information(p, sentences, indices, &batch, options)?;
            for (extra, information) in extras.iter_mut().zip(informations) {
                extra.1 = information;
            }
        }
        Ok(extras)
    }

    /// Each token's mutual information between its tag and the model's weights (BALD: the
    /// entropy of the mean of the tag marginals over passes with dropout on, less the mean of
    /// their entropies), for the sentences `indices` in `batch`. Each sentence's dropout masks
    /// are drawn from its own words and `options.dropout_seed`, so they do not depend on the
    /// sentences it is batched with.
    fn mutual_information(
        &self,
        p: &Potentials,
        sentences: &[Encoded],
        indices: &[usize],
        batch: &Batch,
        options: TagOptions,
    ) -> Result<Vec<Vec<f64>>> {
        use rand::{Rng, SeedableRng};
        let k = self.vocab.tags.len();
        let samples = options.dropout_samples;
        let keep = 1.0 - self.model.dropout.prob;
        let seeds: Vec<u64> = indices
            .iter()
            .map(|&i| sentence_seed(&sentences[i], options.dropout_seed))
            .collect();
        let inputs = BatchTensors::new(batch, self.device);
        let mut mean: Vec<Vec<f64>> = batch.lengths.iter().map(|&n| vec![0.0; n * k]).collect();
        let mut mean_entropy: Vec<Vec<f64>> = batch.lengths.iter().map(|&n| vec![0.0; n]).collect();
        for sample in 0..samples {
            let mask = |shape: [usize; 3], place: Dropped| {
                let [rows, time, d] = shape;
                let mut factors = Vec::with_capacity(rows * time * d);
                for &seed in &seeds {
                    let stream = seed ^ ((sample as u64) << 1 | (place == Dropped::Output) as u64);
                    let mut rng = rand::rngs::StdRng::seed_from_u64(stream);
                    factors.extend((0..time * d).map(|_| {
                        if keep >= 1.0 || rng.random::<f64>() < keep {
                            (1.0 / keep) as f32
                        } else {
                            0.0
                        }
                    }));
                }
                Tensor::<3>::from_data(TensorData::new(factors, shape), self.device)
            };
            let emissions = self.model.emissions_with_masks(&inputs, &mask);
            let emissions = host_emissions(emissions, &batch.lengths);
            for (row, emissions) in emissions.iter().enumerate() {
                let fb = p.forward_backward(emissions)?;
                for t in 0..batch.lengths[row] {
                    let mut entropy = 0.0;
                    for tag in 0..k {
                        let q = fb.marginal(t, tag);
                        mean[row][t * k + tag] += q / samples as f64;
                        if q > 0.0 {
                            entropy -= q * q.ln();
                        }
                    }
                    mean_entropy[row][t] += entropy / samples as f64;
                }
            }
        }
        Ok(mean
            .iter()
            .zip(&mean_entropy)
            .map(|(mean, mean_entropy)| {
                mean.chunks(k)
                    .zip(mean_entropy)
                    .map(|(q, &expected)| {
                        let entropy: f64 =
                            q.iter().filter(|&&q| q > 0.0).map(|&q| -q * q.ln()).sum();
                        (entropy - expected).max(0.0)
                    })
                    .collect()
            })
            .collect())
    }

    /// The emissions of `sentences[i]` for each of `indices`, on the host, `[length * tags]` each.
    fn emissions(&self, sentences: &[Encoded], indices: &[usize]) -> Vec<Vec<f64>> {
        let batch = self.batch(sentences, indices);
        let emissions = self.model.emissions_with_cache(&batch, self.word_gates);
        host_emissions(emissions, &batch.lengths)
    }

    /// Best paths, and what `options` asks for besides, from each sentence's emissions.
    fn predictions(
        &self,
        p: &Potentials,
        lengths: Vec<usize>,
        emissions: &[Vec<f64>],
        options: TagOptions,
    ) -> Result<Vec<Prediction>> {
        let nbest = (options.nbest > 1)
            .then(|| p.nbest_of_rows(emissions, &lengths, options.nbest, self.device));
        let nbest = nbest.transpose()?;
        // Probabilities are read at the temperature, the best path at the model's own scores.
        let temperature = options.temperature;
        let tempered = (temperature != 1.0).then(|| p.tempered(temperature));
        let at_temperature = tempered.as_ref().unwrap_or(p);
        let mut predictions = Vec::with_capacity(lengths.len());
        for (row, emissions) in emissions.iter().enumerate() {
            let (best_path, score) = self.best_path(p, emissions)?;
            let (tags, best_spans) = self.path_tags(&best_path);
            let mut prediction = Prediction {
                tags,
                spans: best_spans,
                score: score as f32,
                ..Default::default()
            };
            if options.confidence || options.marginals || options.pair_marginals || nbest.is_some()
            {
                let scaled: Vec<f64>;
                let emissions = if tempered.is_some() {
                    scaled = emissions.iter().map(|e| e / temperature).collect();
                    &scaled
                } else {
                    emissions
                };
                let fb = at_temperature.forward_backward(emissions)?;
                prediction.log_probability = Some(score / temperature - fb.log_z);
                self.add_probabilities(&mut prediction, &fb, &best_path, options)?;
                if let Some(nbest) = &nbest {
                    prediction.nbest = nbest[row]
                        .iter()
                        .map(|(path, _)| {
                            // The path's score again in f64, in the precision of log Z.
                            let score = at_temperature.row_score(emissions, path)?;
                            let (tags, spans) = self.path_tags(path);
                            Ok(RankedPath {
                                tags,
                                spans,
                                probability: (score - fb.log_z).exp(),
                            })
                        })
                        .collect::<std::result::Result<_, CrfError>>()?;
                }
            }
            predictions.push(prediction);
        }
        Ok(predictions)
    }

    /// A sentence's best path, with the decoder's bias when it has one, and the path's score
    /// without it.
    fn best_path(&self, p: &Potentials, emissions: &[f64]) -> Result<(Vec<usize>, f64)> {
        if self.bias.is_empty() {
            return Ok(p.row_viterbi(emissions)?);
        }
        let k = self.vocab.tags.len();
        let biased: Vec<f64> = emissions
            .chunks(k)
            .flat_map(|scores| scores.iter().zip(&self.bias).map(|(e, b)| e + b))
            .collect();
        let (path, _) = p.row_viterbi(&biased)?;
        let score = p.row_score(emissions, &path)?;
        Ok((path, score))
    }

    /// The entities' confidences, the marginals and the pair marginals that `options` ask for,
    /// read from the sentence's forward-backward `fb`.
    fn add_probabilities(
        &self,
        prediction: &mut Prediction,
        fb: &ForwardBackward,
        best_path: &[usize],
        options: TagOptions,
    ) -> Result<()> {
        let (k, len) = (self.vocab.tags.len(), fb.len());
        if options.confidence {
            prediction.confidences = prediction
                .spans
                .iter()
                .map(|span| {
                    let last = self.vocab.tags.item(best_path[span.end - 1]);
                    let may_follow = |j: usize| ends_before(last, self.vocab.tags.item(j));
                    fb.segment_probability(span.start, &best_path[span.start..span.end], may_follow)
                })
                .collect::<std::result::Result<_, _>>()?;
        }
        if options.marginals || options.pair_marginals {
            prediction.marginals = (0..len)
                .map(|t| (0..k).map(|tag| fb.marginal(t, tag)).collect())
                .collect();
        }
        if options.pair_marginals {
            let pairs = |t| (0..k * k).map(move |ij| fb.pair_marginal(t, ij / k, ij % k));
            prediction.pair_marginals = (1..len).map(|t| pairs(t).collect()).collect();
        }
        Ok(())
    }

    /// Adds to the emission scores of each capitalised word mentioned more than once in
    /// `document` `weight` times the class probabilities (O or an entity type, from the
    /// marginals) of all its mentions, averaged with more weight to the more confident ones, so
    /// that "Kovacs" alone leans to the type that "Anna Kovacs" has.
    fn pull_towards_other_mentions(
        &self,
        p: &Potentials,
        sentences: &[Encoded],
        document: Range<usize>,
        emissions: &mut HashMap<usize, Vec<f64>>,
        weight: f64,
    ) -> Result<()> {
        let k = self.vocab.tags.len();
        let (class_of, classes) = self.tag_classes();
        let classes_of = (&class_of[..], classes);
        let mentions = self.capitalized_mentions(p, sentences, document, emissions, classes_of)?;
        // Per word: its mentions' class probabilities summed, each weighted by its confidence
        // (its most probable class's probability), so that a clear mention outweighs unclear
        // ones and two mentions do not merely swap their classes.
        let mut totals: HashMap<&str, (Vec<f64>, f64, usize)> = HashMap::new();
        for (_, _, key, probabilities) in &mentions {
            let (sum, weights, count) = totals
                .entry(key.as_str())
                .or_insert_with(|| (vec![0.0; classes], 0.0, 0));
            let confidence = probabilities.iter().copied().fold(0.0, f64::max);
            sum.iter_mut()
                .zip(probabilities)
                .for_each(|(s, q)| *s += confidence * q);
            *weights += confidence;
            *count += 1;
        }
        let pulls: Vec<(usize, usize, Vec<f64>)> = mentions
            .iter()
            .filter_map(|(i, t, key, _)| {
                let (sum, weights, count) = &totals[key.as_str()];
                (*count > 1).then(|| (*i, *t, sum.iter().map(|s| weight * s / weights).collect()))
            })
            .collect();
        for (i, t, pull) in pulls {
            let values = emissions.get_mut(&i).expect("a decoded sentence");
            for tag in 0..k {
                values[t * k + tag] += pull[class_of[tag]];
            }
        }
        Ok(())
    }

    /// Each tag's class (0: `O`, then one per entity type, in the tags' order), and how many
    /// classes there are.
    fn tag_classes(&self) -> (Vec<usize>, usize) {
        let tags = self.vocab.tags.items();
        let types = entity_types(tags);
        let class_of = tags
            .iter()
            .map(|tag| {
                parse_tag(tag).map_or(0, |(_, label)| {
                    1 + types
                        .iter()
                        .position(|t| t == label)
                        .expect("a type of the tags")
                })
            })
            .collect();
        (class_of, 1 + types.len())
    }

    /// Each capitalised word of `document`'s sentences that have `emissions`: its sentence,
    /// position, lower-cased form and class probabilities (`class_of` each tag's class, of
    /// `classes`).
    fn capitalized_mentions(
        &self,
        p: &Potentials,
        sentences: &[Encoded],
        document: Range<usize>,
        emissions: &HashMap<usize, Vec<f64>>,
        (class_of, classes): (&[usize], usize),
    ) -> Result<Vec<CapitalizedMention>> {
        let capitalized = [Casing::InitialUpper.id(), Casing::AllUpper.id()];
        let mut mentions = Vec::new();
        for i in document {
            let Some(values) = emissions.get(&i) else {
                continue;
            };
            let sentence = &sentences[i];
            if !sentence.casing.iter().any(|c| capitalized.contains(c)) {
                continue;
            }
            let fb = p.forward_backward(values)?;
            for t in 0..sentence.len() {
                if !capitalized.contains(&sentence.casing[t]) {
                    continue;
                }
                let mut probabilities = vec![0.0; classes];
                for (tag, &class) in class_of.iter().enumerate() {
                    probabilities[class] += fb.marginal(t, tag);
                }
                let key: String = sentence.chars[t]
                    .iter()
                    .map(|&c| self.vocab.chars.item(c))
                    .collect::<String>()
                    .to_lowercase();
                mentions.push((i, t, key, probabilities));
            }
        }
        Ok(mentions)
    }

    /// Decodes a tagged corpus and scores the predictions against its gold tags.
    pub fn score(
        &self,
        gold: &Corpus,
        encoded: &[Encoded],
        documents: &[Range<usize>],
        options: TagOptions,
    ) -> Result<Report> {
        let predicted: Vec<Vec<String>> = self
            .decode(encoded, documents, options)?
            .into_iter()
            .map(|p| p.tags)
            .collect();
        Ok(Scorer::score_corpus(gold, &predicted))
    }

    /// A decoded path's tags in the files' scheme and its entities, read once from the model's
    /// own tags (the entities are the same in either scheme).
    fn path_tags(&self, path: &[usize]) -> (Vec<String>, Vec<Span>) {
        let tags: Vec<&str> = path.iter().map(|&id| self.vocab.tags.item(id)).collect();
        let spans = spans(&tags);
        (
            render_spans(&spans, tags.len(), self.spec.output_scheme),
            spans,
        )
    }
}

/// The emissions of the sentences `indices` with each one's tags restricted to those
/// `allowed[i]` allows ([`Potentials::restrict`]); `None` when no sentence of them has any.
fn restricted(
    potentials: &Potentials,
    indices: &[usize],
    emissions: &[Vec<f64>],
    allowed: &[Option<Vec<bool>>],
) -> Result<Option<Vec<Vec<f64>>>> {
    let of = |i: usize| allowed.get(i).and_then(Option::as_ref);
    if !indices.iter().any(|&i| of(i).is_some()) {
        return Ok(None);
    }
    let rows = indices
        .iter()
        .zip(emissions)
        .map(|(&i, row)| match of(i) {
            Some(allowed) => potentials.restrict(row, allowed),
            None => Ok(row.clone()),
        })
        .collect::<std::result::Result<_, CrfError>>()?;
    Ok(Some(rows))
}

/// Every predicted entity's confidence and whether it matches a gold entity exactly, for a
/// reliability table ([`nertrain_data::calibration`]).
pub fn entity_confidences<'a>(
    gold: &'a Corpus,
    predictions: &'a [Prediction],
) -> impl Iterator<Item = (f64, bool)> + 'a {
    gold.sentences
        .iter()
        .zip(predictions)
        .flat_map(|(sentence, prediction)| {
            let gold_spans = spans(&sentence.tags);
            prediction
                .spans
                .iter()
                .zip(&prediction.confidences)
                .map(move |(span, &confidence)| (confidence, gold_spans.contains(span)))
        })
}

/// Decoding with a loaded model: sentences of words to predictions.
impl Tagger {
    /// The columns of its training data whose values the model reads beside the words (empty
    /// for a model that reads words alone, and so text).
    pub fn feature_columns(&self) -> &[isize] {
        &self.meta.columns.feature_columns
    }

    /// Checks a CoNLL corpus's feature columns against what the model saw in training: a
    /// warning for each column some of whose values it never saw (read as unknown), naming the
    /// share; an error where almost all are (another tag set for the column, or another column),
    /// since the model would then tag without what it learned from it.
    pub fn check_features<L>(&self, corpus: &nertrain_data::Corpus<L>) -> Result<Vec<String>> {
        let coverage = self
            .vocab
            .feature_coverage(corpus.sentences.iter().map(|s| s.features.as_slice()));
        let mut warnings = Vec::new();
        for (column, seen) in self.feature_columns().iter().zip(coverage) {
            if seen.unseen == 0 {
                continue;
            }
            let share = 100.0 * seen.unseen_share();
            let what = format!(
                "{}: feature column {column}: {share:.1}% of its values ({} of {}) were never \
                 seen in training (such as {}) and are read as unknown",
                corpus.path.display(),
                seen.unseen,
                seen.values,
                seen.examples.join(", ")
            );
            if seen.unseen_share() >= ALMOST_ALL_UNSEEN && seen.values >= 20 {
                return Err(Error::UnseenFeatures(format!(
                    "{what}: is it the tag set the model was trained with (the same POS tagger, \
                     the same column)?"
                )));
            }
            warnings.push(what);
        }
        Ok(warnings)
    }

    /// Whether the model reads documents, not sentences alone.
    pub fn reads_documents(&self) -> bool {
        self.meta.document.is_some()
    }

    /// Predicts `sentences`, with each one's feature values (`[words, columns]`, as
    /// [`nertrain_data::Sentence::features`]; none for text) when the model reads feature
    /// columns; `documents` are consecutive ranges of them read together (one range per
    /// sentence, or none, for a sentence-level reading). A document-level model reads them in
    /// pieces of at most its `max_tokens`. `allowed[i]`, where given, are the tags sentence `i`
    /// may have (`[len * tags]`), as [`Decoder::decode_within`] reads them.
    pub(crate) fn predict<S: AsRef<str> + Sync>(
        &self,
        sentences: &[Vec<S>],
        features: &[&[Vec<String>]],
        documents: &[Range<usize>],
        allowed: &[Option<Vec<bool>>],
        options: TagOptions,
    ) -> Result<Vec<Prediction>> {
        options.check(self.reads_documents())?;
        let (encoded, pieces) = self.inputs(sentences, features, documents)?;
        let thresholds = options.thresholds && !self.thresholds.is_empty();
        let decoding = TagOptions {
            confidence: options.confidence || thresholds,
            ..options
        };
        let mut decoder = self.decoder();
        if options.thresholds && !self.biases.is_empty() {
            decoder = decoder.with_bias(&self.biases);
        }
        let mut predictions = decoder.decode_within(&encoded, &pieces, allowed, decoding)?;
        if thresholds {
            let scheme = self.meta.file_scheme;
            for prediction in &mut predictions {
                leave_out_below(prediction, &self.thresholds, scheme);
                if !options.confidence {
                    prediction.confidences.clear();
                }
            }
        }
        Ok(predictions)
    }

    /// The inputs the model reads for `sentences` (with their feature values, read in
    /// `documents`, as [`Self::predict`] takes them), and the pieces of documents it reads them
    /// in.
    pub(crate) fn inputs<S: AsRef<str> + Sync>(
        &self,
        sentences: &[Vec<S>],
        features: &[&[Vec<String>]],
        documents: &[Range<usize>],
    ) -> Result<(Vec<Encoded>, Vec<Range<usize>>)> {
        let needs_columns = || Error::NeedsColumns {
            columns: self.feature_columns().to_vec(),
        };
        if !self.feature_columns().is_empty() && features.len() != sentences.len() {
            return Err(needs_columns());
        }
        let featurizer = self.featurizer();
        let mut encoded: Vec<Encoded> = sentences
            .iter()
            .enumerate()
            .map(|(i, words)| {
                let values = features.get(i).copied().unwrap_or_default();
                featurizer
                    .encode(words, values)
                    .map_err(|_| needs_columns())
            })
            .collect::<Result<_>>()?;
        let pieces = self.document_pieces(sentences, documents);
        let words: Vec<&[S]> = sentences.iter().map(Vec::as_slice).collect();
        let read_together: &[Range<usize>] = if self.reads_documents() { &pieces } else { &[] };
        featurizer.complete(&mut encoded, &words, read_together)?;
        Ok((encoded, pieces))
    }

    /// `documents` cut into the pieces the model reads.
    fn document_pieces<S>(
        &self,
        sentences: &[Vec<S>],
        documents: &[Range<usize>],
    ) -> Vec<Range<usize>> {
        let max_tokens = self
            .meta
            .document
            .map_or(DEFAULT_DOCUMENT_TOKENS, |d| d.max_tokens);
        let mut document_of = vec![usize::MAX; sentences.len()];
        for (d, range) in documents.iter().enumerate() {
            document_of[range.clone()].fill(d);
        }
        // Sentences outside every range are documents alone.
        let mut next = documents.len();
        for d in &mut document_of {
            if *d == usize::MAX {
                *d = next;
                next += 1;
            }
        }
        let lengths: Vec<usize> = sentences.iter().map(Vec::len).collect();
        document_pieces(&document_of, &lengths, max_tokens)
    }

    /// What makes the model's inputs, as its training made them.
    pub(crate) fn featurizer(&self) -> Featurizer<'_> {
        let encoder = self.meta.sizes.encoder.as_ref();
        let subwords = self.subwords.as_ref().zip(encoder.map(|e| e.max_positions));
        Featurizer::new(&self.vocab)
            .with_dictionary(self.dictionary.as_ref())
            .with_subwords(subwords)
    }

    /// A decoder of the loaded model, which keeps its word cache across calls.
    pub(crate) fn decoder(&self) -> Decoder<'_> {
        Decoder::new(
            &self.network,
            &self.vocab,
            &self.meta,
            &self.device,
            &self.word_gates,
        )
        .with_encoder_cache(self.encoder_cache.as_ref())
    }
}

/// Leaves out `prediction`'s entities below their label's threshold, its tags written again
/// from the entities kept so that none is broken.
fn leave_out_below(
    prediction: &mut Prediction,
    thresholds: &BTreeMap<String, f64>,
    scheme: TagScheme,
) {
    let keep: Vec<bool> = prediction
        .spans
        .iter()
        .zip(&prediction.confidences)
        .map(|(span, confidence)| thresholds.get(&span.label).is_none_or(|t| confidence >= t))
        .collect();
    if keep.iter().all(|&k| k) {
        return;
    }
    let mut kept = keep.iter();
    prediction.spans.retain(|_| *kept.next().unwrap_or(&true));
    let mut kept = keep.iter();
    prediction
        .confidences
        .retain(|_| *kept.next().unwrap_or(&true));
    prediction.retag(scheme);
}

/// The seed of a sentence's dropout masks: its words and characters, and `seed`.
fn sentence_seed(sentence: &Encoded, seed: u64) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    (seed, &sentence.words, &sentence.chars).hash(&mut hasher);
    hasher.finish()
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
