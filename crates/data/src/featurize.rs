//! The inputs a model reads for its sentences, made in one place for training and for tagging:
//! each word's ids by the model's vocabularies (word, characters, casing, feature columns), its
//! mention casing over its document, its places in the dictionary's phrases, and each sentence's
//! windows of sub-word pieces for a pretrained encoder. `fit` and every interface that tags call
//! it, so that a feature is read alike wherever it is read.

use std::ops::Range;

use rayon::prelude::*;

use crate::{
    Corpus, DataError, Dictionary, Encoded, Mention, SubwordTokenizer, TagColumn, Vocabularies,
    set_mention_casing,
};

/// What makes a model's sentences its inputs: its vocabularies and, where it has them, its
/// dictionary and its encoder's tokenizer.
#[derive(Clone, Copy)]
pub struct Featurizer<'a> {
    vocab: &'a Vocabularies,
    dictionary: Option<&'a Dictionary>,
    /// The encoder's tokenizer, and the most sub-tokens the encoder reads at once.
    subwords: Option<(&'a SubwordTokenizer, usize)>,
}

impl<'a> Featurizer<'a> {
    /// The inputs of a model of `vocab` that reads words alone.
    pub fn new(vocab: &'a Vocabularies) -> Self {
        Self {
            vocab,
            dictionary: None,
            subwords: None,
        }
    }

    /// With the model's dictionary, where it has one.
    pub fn with_dictionary(self, dictionary: Option<&'a Dictionary>) -> Self {
        Self { dictionary, ..self }
    }

    /// With the model's encoder's tokenizer and the most sub-tokens the encoder reads at once,
    /// where it has an encoder.
    pub fn with_subwords(self, subwords: Option<(&'a SubwordTokenizer, usize)>) -> Self {
        Self { subwords, ..self }
    }

    /// The inputs of a sentence of `words`, with its feature `values` (`[words, columns]`, as
    /// [`Sentence::features`](crate::Sentence::features); none for text), as read alone:
    /// [`Self::complete`] adds what its document and the model's dictionary and encoder give.
    pub fn encode<S: AsRef<str>>(
        &self,
        words: &[S],
        values: &[Vec<String>],
    ) -> Result<Encoded, String> {
        self.vocab.encode_with_features(words, values)
    }

    /// The inputs of every sentence of `corpus` as read alone, with its tags when `tagged` (a
    /// tag outside the vocabulary is an error at its line); see [`Self::encode`].
    pub fn encode_corpus<L: TagColumn>(
        &self,
        corpus: &Corpus<L>,
        tagged: bool,
    ) -> Result<Vec<Encoded>, DataError> {
        if tagged {
            self.vocab.encode_corpus(corpus)
        } else {
            self.vocab.encode_corpus_words(corpus)
        }
    }

    /// Sets what `encoded`'s sentences get beyond their words: each word's mention casing over
    /// its document, its dictionary places, and the encoder's windows (with the neighbouring
    /// sentences' sub-words as context). `words[i]` are sentence `i`'s words as written;
    /// `documents`, the consecutive ranges of sentences read together (none when sentences are
    /// read alone). Returns each sentence's dictionary phrases, which training's dictionary
    /// dropout hides from; none without a dictionary.
    pub fn complete<S: AsRef<str> + Sync>(
        &self,
        encoded: &mut [Encoded],
        words: &[&[S]],
        documents: &[Range<usize>],
    ) -> Result<Vec<Vec<Mention>>, DataError> {
        set_mention_casing(encoded, words, documents);
        if let Some((tokenizer, max_len)) = self.subwords {
            tokenizer.set_windows(encoded, words, documents, max_len)?;
        }
        let Some(dictionary) = self.dictionary else {
            return Ok(Vec::new());
        };
        // Each sentence's phrases are its own: found on all the threads.
        Ok(encoded
            .par_iter_mut()
            .zip(words.par_iter())
            .map(|(encoded, words)| {
                let mentions = dictionary.mentions(words);
                encoded.dictionary = dictionary.places(&mentions, words.len());
                mentions
            })
            .collect())
    }
}
