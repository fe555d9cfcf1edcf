//! Running a trained tagger: batched decoding, tags converted back to the files' scheme, and
//! conlleval scoring against gold tags.

use std::path::Path;

use burn::module::Module;
use burn::tensor::Device;
use nertrain_data::{
    Batch, BatchPlan, Corpus, Encoded, Report, Scorer, TagScheme, Vocabularies, convert_tags,
};
use nertrain_model::{BatchTensors, Tagger};

use crate::{ModelDir, ModelMeta, Result};

/// One sentence's predicted tags (in the files' scheme) and its Viterbi path score.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    pub tags: Vec<String>,
    pub score: f32,
}

/// Decodes encoded sentences in length-sorted batches, returning predictions in input order.
pub fn decode(
    model: &Tagger,
    vocab: &Vocabularies,
    sentences: &[Encoded],
    output_scheme: TagScheme,
    batch_size: usize,
    max_word_len: usize,
    device: &Device,
) -> Vec<Prediction> {
    let lengths: Vec<usize> = sentences.iter().map(Encoded::len).collect();
    let mut predictions = vec![
        Prediction {
            tags: Vec::new(),
            score: 0.0
        };
        sentences.len()
    ];
    for indices in BatchPlan::sorted(&lengths, batch_size).batches {
        let nonempty: Vec<usize> = indices.into_iter().filter(|&i| lengths[i] > 0).collect();
        if nonempty.is_empty() {
            continue;
        }
        let batch = Batch::new(sentences, nonempty, max_word_len);
        let decoded = model.decode(&BatchTensors::new(&batch, device));
        for (&i, (path, score)) in batch.indices.iter().zip(decoded) {
            let tags: Vec<&str> = path.iter().map(|&id| vocab.tags.item(id)).collect();
            predictions[i] = Prediction {
                tags: convert_tags(&tags, output_scheme),
                score,
            };
        }
    }
    predictions
}

/// conlleval's counts of predictions against a corpus's gold tags.
pub fn score_corpus(gold: &Corpus, predicted: &[Vec<String>]) -> Report {
    let mut scorer = Scorer::new();
    for (sentence, tags) in gold.sentences.iter().zip(predicted) {
        scorer.add_sentence(&sentence.tags, tags);
    }
    scorer.report()
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

    pub fn predict<S: AsRef<str>>(
        &self,
        sentences: &[Vec<S>],
        batch_size: usize,
    ) -> Vec<Prediction> {
        let encoded: Vec<Encoded> = sentences
            .iter()
            .map(|words| self.vocab.encode_words(words))
            .collect();
        decode(
            &self.model,
            &self.vocab,
            &encoded,
            self.meta.file_scheme,
            batch_size,
            self.meta.max_word_len,
            &self.device,
        )
    }
}
