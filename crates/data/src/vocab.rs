//! Vocabularies: words, characters and tags, each a bijection between strings and dense ids.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::{Casing, Corpus, DataError, MentionCasing, Sentence, TagColumn};

/// The padding item, id 0 of every vocabulary.
pub const PAD: &str = "<pad>";
/// The unknown item, id 1 of every vocabulary.
pub const UNK: &str = "<unk>";

/// A string ↔ id table. Word and character vocabularies reserve id 0 for `<pad>` and 1 for
/// `<unk>`; the tag vocabulary has neither (padded positions are masked, never scored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<String>", into = "Vec<String>")]
pub struct Vocab {
    items: Vec<String>,
    ids: HashMap<String, usize>,
}

impl From<Vec<String>> for Vocab {
    fn from(items: Vec<String>) -> Self {
        let ids = items
            .iter()
            .enumerate()
            .map(|(id, item)| (item.clone(), id))
            .collect();
        Self { items, ids }
    }
}

impl From<Vocab> for Vec<String> {
    fn from(vocab: Vocab) -> Self {
        vocab.items
    }
}

impl Vocab {
    /// [`PAD`]'s id.
    pub const PAD_ID: usize = 0;
    /// [`UNK`]'s id.
    pub const UNK_ID: usize = 1;

    /// Items seen at least `min_count` times, most frequent first (ties by string), after
    /// `<pad>` and `<unk>`.
    pub fn with_specials<'a>(items: impl IntoIterator<Item = &'a str>, min_count: usize) -> Self {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for item in items {
            *counts.entry(item).or_default() += 1;
        }
        let mut kept: Vec<(&str, usize)> = counts
            .into_iter()
            .filter(|&(item, count)| count >= min_count && item != PAD && item != UNK)
            .collect();
        kept.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let items = [PAD, UNK]
            .into_iter()
            .chain(kept.into_iter().map(|(item, _)| item));
        Self::from(items.map(String::from).collect::<Vec<_>>())
    }

    /// Items, `<pad>` and `<unk>` included.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Adds `item` at the end unless it is there already; returns its id.
    pub fn insert(&mut self, item: &str) -> usize {
        if let Some(id) = self.id(item) {
            return id;
        }
        self.ids.insert(item.to_string(), self.items.len());
        self.items.push(item.to_string());
        self.items.len() - 1
    }

    /// Whether it has no items.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The id of `item`, when it has one.
    pub fn id(&self, item: &str) -> Option<usize> {
        self.ids.get(item).copied()
    }

    /// The id of `item`, or `<unk>`'s.
    pub fn id_or_unk(&self, item: &str) -> usize {
        self.id(item).unwrap_or(Self::UNK_ID)
    }

    /// The item of `id`.
    pub fn item(&self, id: usize) -> &str {
        &self.items[id]
    }

    /// Every item, in id order.
    pub fn items(&self) -> &[String] {
        &self.items
    }
}

/// How words are normalised before lookup in the word vocabulary (characters always see the
/// raw word).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextNormalization {
    /// Words are lowercased.
    pub lowercase: bool,
    /// Every digit becomes `0`, so `1996` and `1997` share an embedding.
    pub digits_to_zero: bool,
}

impl TextNormalization {
    /// `word` as the word vocabulary looks it up.
    pub fn apply(&self, word: &str) -> String {
        let mut normalized = String::with_capacity(word.len());
        for c in word.chars() {
            let c = if self.digits_to_zero && c.is_ascii_digit() {
                '0'
            } else {
                c
            };
            if self.lowercase {
                normalized.extend(c.to_lowercase());
            } else {
                normalized.push(c);
            }
        }
        normalized
    }
}

/// Everything needed to turn sentences into ids and ids back into tags; saved with a model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vocabularies {
    /// How words are normalised before lookup.
    pub normalization: TextNormalization,
    /// Words (normalised).
    pub words: Vocab,
    /// Characters of the raw words.
    pub chars: Vocab,
    /// Tags.
    pub tags: Vocab,
    /// The values of each feature column ([`ColumnSpec::feature_columns`](crate::ColumnSpec)),
    /// with `<pad>` and `<unk>`; empty without feature columns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<Vocab>,
}

impl Vocabularies {
    /// Appends the words, characters and tags of `more` that these lack, after every id these
    /// have, so that each keeps its meaning (a model continued on new data); returns the tags
    /// added. Feature values are kept as they are: a value the model never saw reads as
    /// `<unk>`, as at tagging.
    pub fn extend(&mut self, more: &Vocabularies) -> Vec<String> {
        for word in more.words.items() {
            self.words.insert(word);
        }
        for char in more.chars.items() {
            self.chars.insert(char);
        }
        let mut added = Vec::new();
        for tag in more.tags.items() {
            if self.tags.id(tag).is_none() {
                self.tags.insert(tag);
                added.push(tag.clone());
            }
        }
        added
    }

    /// Builds the vocabularies of a training set whose tags are already in the training scheme.
    pub fn build<L: TagColumn>(
        sentences: &[Sentence<L>],
        normalization: TextNormalization,
        min_word_count: usize,
    ) -> Self {
        let normalized: Vec<String> = sentences
            .iter()
            .flat_map(|s| &s.words)
            .map(|w| normalization.apply(w))
            .collect();
        let words = Vocab::with_specials(normalized.iter().map(String::as_str), min_word_count);
        let chars: Vec<String> = sentences
            .iter()
            .flat_map(|s| &s.words)
            .flat_map(|w| w.chars())
            .map(String::from)
            .collect();
        let chars = Vocab::with_specials(chars.iter().map(String::as_str), 1);
        // Tags a partly labelled token may have count too: the model must be able to give them.
        let mut seen: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
        for label in sentences.iter().flat_map(|s| &s.tags) {
            match (label.tag(), label.open()) {
                (Some(tag), _) => _ = seen.insert(tag),
                (None, Some(crate::Allowed::OneOf(list))) => {
                    seen.extend(list.iter().map(String::as_str))
                }
                (None, _) => {}
            }
        }
        let mut tags: Vec<String> = seen.into_iter().map(String::from).collect();
        // `O` first keeps the tag table readable; the order is otherwise immaterial.
        tags.sort_by_key(|tag| tag != "O");
        let feature_count = sentences
            .iter()
            .find_map(|s| s.features.first())
            .map_or(0, Vec::len);
        let features = (0..feature_count)
            .map(|k| {
                let values = sentences
                    .iter()
                    .flat_map(|s| &s.features)
                    .map(|values| values[k].as_str());
                Vocab::with_specials(values, 1)
            })
            .collect();
        Self {
            normalization,
            words,
            chars,
            tags: Vocab::from(tags),
            features,
        }
    }

    /// Adds the `words` that `vectors` knows (so they are not `<unk>` though training never saw
    /// them); returns how many were added.
    pub fn extend_with_vectors<'a>(
        &mut self,
        words: impl IntoIterator<Item = &'a String>,
        vectors: &crate::Vectors,
    ) -> usize {
        let before = self.words.len();
        for word in words {
            if vectors.get(word).is_some() {
                self.words.insert(&self.normalization.apply(word));
            }
        }
        self.words.len() - before
    }

    /// The id of `word` (normalised), or `<unk>`'s.
    pub fn word_id(&self, word: &str) -> usize {
        self.words.id_or_unk(&self.normalization.apply(word))
    }

    /// The ids of `word`'s characters, `<unk>`'s for unknown ones.
    pub fn char_ids(&self, word: &str) -> Vec<usize> {
        word.chars()
            .map(|c| self.chars.id_or_unk(c.encode_utf8(&mut [0; 4])))
            .collect()
    }

    /// Ids of an untagged sentence.
    pub fn encode_words<S: AsRef<str>>(&self, words: &[S]) -> Encoded {
        Encoded {
            words: words.iter().map(|w| self.word_id(w.as_ref())).collect(),
            chars: words.iter().map(|w| self.char_ids(w.as_ref())).collect(),
            casing: words.iter().map(|w| Casing::of(w.as_ref()).id()).collect(),
            mentions: vec![MentionCasing::Unseen.id(); words.len()],
            tags: Vec::new(),
            allowed: Vec::new(),
            dictionary: Vec::new(),
            features: Vec::new(),
            windows: Vec::new(),
            encoder_states: Vec::new(),
            teacher: None,
        }
    }

    /// Ids of an untagged sentence and its feature values (`[words, features]`, as
    /// [`Sentence::features`]); an error message when the model reads feature columns and
    /// `features` has not one value of each per word.
    pub fn encode_with_features<S: AsRef<str>>(
        &self,
        words: &[S],
        features: &[Vec<String>],
    ) -> Result<Encoded, String> {
        let mut encoded = self.encode_words(words);
        if self.features.is_empty() {
            return Ok(encoded);
        }
        if features.len() != words.len() {
            return Err(self.missing_features());
        }
        encoded.features.reserve(words.len() * self.features.len());
        for values in features {
            if values.len() != self.features.len() {
                return Err(self.missing_features());
            }
            let ids = values
                .iter()
                .zip(&self.features)
                .map(|(v, vocab)| vocab.id_or_unk(v));
            encoded.features.extend(ids);
        }
        Ok(encoded)
    }

    /// For each feature column, how many of the values of `sentences` (each one's features,
    /// `[words, columns]`) the model never saw in training, with a few of them.
    pub fn feature_coverage<'a>(
        &self,
        sentences: impl IntoIterator<Item = &'a [Vec<String>]>,
    ) -> Vec<FeatureCoverage> {
        let mut coverage: Vec<FeatureCoverage> = (0..self.features.len())
            .map(|_| FeatureCoverage::default())
            .collect();
        for features in sentences {
            for values in features {
                for ((value, vocab), column) in values.iter().zip(&self.features).zip(&mut coverage)
                {
                    column.values += 1;
                    if vocab.id(value).is_none() {
                        column.unseen += 1;
                        if column.examples.len() < 3 && !column.examples.contains(value) {
                            column.examples.push(value.clone());
                        }
                    }
                }
            }
        }
        coverage
    }

    /// What is missing where a sentence has no (or too few) feature values.
    fn missing_features(&self) -> String {
        format!(
            "the model reads {} feature column{} beside the words, which this input does not \
             have: give CoNLL columns as the training data had them",
            self.features.len(),
            if self.features.len() == 1 { "" } else { "s" }
        )
    }
    /// Ids of every sentence of a tagged corpus; a tag outside the vocabulary is an error at its line.
    pub fn encode_corpus<L: TagColumn>(
        &self,
        corpus: &Corpus<L>,
    ) -> Result<Vec<Encoded>, DataError> {
        corpus
            .sentences
            .iter()
            .map(|s| self.encode_tagged(corpus, s))
            .collect()
    }

    /// Ids of every sentence's words and feature values, tags left out; a sentence without the
    /// model's feature values is an error at its line.
    pub fn encode_corpus_words<L: TagColumn>(
        &self,
        corpus: &Corpus<L>,
    ) -> Result<Vec<Encoded>, DataError> {
        corpus
            .sentences
            .iter()
            .map(|s| {
                self.encode_with_features(&s.words, &s.features)
                    .map_err(|message| corpus.error_at(s, 0, message))
            })
            .collect()
    }

    /// Ids of a tagged sentence of `corpus`; a tag outside the vocabulary is an error at its
    /// line. Where some label is open, every token gets the mask of the tags it may be.
    pub fn encode_tagged<L: TagColumn>(
        &self,
        corpus: &Corpus<L>,
        sentence: &Sentence<L>,
    ) -> Result<Encoded, DataError> {
        let partial = sentence.is_partial();
        let mut tags = Vec::with_capacity(sentence.len());
        let mut allowed = Vec::new();
        for (index, label) in sentence.tags.iter().enumerate() {
            let error = |message| corpus.error_at(sentence, index, message);
            let (id, mask) = match (label.tag(), label.open()) {
                (Some(tag), _) => {
                    let id = self.tags.id(tag).ok_or_else(|| {
                        error(format!(
                            "tag {tag:?} is not in the tag set {:?}",
                            self.tags.items()
                        ))
                    })?;
                    let mask = partial.then(|| (0..self.tags.len()).map(|t| t == id).collect());
                    (id, mask)
                }
                (None, open) => {
                    let open = open.unwrap_or(&crate::Allowed::Any);
                    let mask = open.mask(self.tags.items());
                    let Some(first) = mask.iter().position(|&a| a) else {
                        return Err(error(format!(
                            "none of the tags {open:?} is in the tag set {:?}",
                            self.tags.items()
                        )));
                    };
                    // The loss reads the mask; the id is only a tag the token may have.
                    (first, Some(mask))
                }
            };
            tags.push(id);
            allowed.extend(mask);
        }
        let encoded = self
            .encode_with_features(&sentence.words, &sentence.features)
            .map_err(|message| corpus.error_at(sentence, 0, message))?;
        Ok(Encoded {
            tags,
            allowed,
            ..encoded
        })
    }
}

/// A sentence as ids: words, each word's characters, [`Casing`] and [`MentionCasing`], and tags (empty when
/// untagged).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Encoded {
    /// Word ids.
    pub words: Vec<usize>,
    /// Each word's character ids.
    pub chars: Vec<Vec<usize>>,
    /// Each word's [`Casing`] id.
    pub casing: Vec<usize>,
    /// Each word's [`MentionCasing`]: `Unseen` unless set from its document
    /// ([`set_mention_casing`](crate::set_mention_casing)).
    pub mentions: Vec<usize>,
    /// Tag ids (empty when untagged; where a token's label is open, one of the tags it may be).
    pub tags: Vec<usize>,
    /// Where some tokens are unlabelled: for each token, whether each tag (by id) is allowed.
    /// Empty when every token is labelled.
    pub allowed: Vec<Vec<bool>>,
    /// Each word's place in the phrases of each dictionary label, `[words, labels]`
    /// ([`set_dictionary_places`](crate::set_dictionary_places)); empty without a dictionary.
    pub dictionary: Vec<u8>,
    /// Each word's feature value ids, `[words, features]` (ids of
    /// [`Vocabularies::features`]); empty without feature columns.
    pub features: Vec<usize>,
    /// The pretrained encoder's inputs for the sentence, in which each word is scored once
    /// ([`SubwordTokenizer::set_windows`](crate::SubwordTokenizer::set_windows)); empty without
    /// an encoder.
    pub windows: Vec<crate::Window>,
    /// A frozen encoder's layers at each word's first sub-token, `[words, layers + 1, hidden]`,
    /// computed once for training to reuse every epoch; empty when they are computed with
    /// each batch.
    pub encoder_states: Vec<f32>,
    /// The teachers' marginals over the sentence's tags, for a student distilled from them;
    /// `None` without teachers.
    pub teacher: Option<TeacherMarginals>,
}

/// A teacher's distribution over tag paths, as its marginals over tag ids (a student CRF's
/// loss against it needs no more: `Potentials::distillation_loss`), for one sentence (`rows`
/// 1, `time` its length) or a padded batch (zeros at padding).
#[derive(Debug, Clone, PartialEq)]
pub struct TeacherMarginals {
    /// Sentences.
    pub rows: usize,
    /// Tokens a row holds.
    pub time: usize,
    /// Tags.
    pub tags: usize,
    /// p(y_t = k), `[rows, time, tags]` row-major.
    pub unary: Vec<f32>,
    /// p(y_{t-1} = i, y_t = j) for t from 1, `[rows, time - 1, tags, tags]` row-major.
    pub pairwise: Vec<f32>,
}

impl TeacherMarginals {
    /// The marginals of an ensemble, the average of its teachers' (a mixture's marginals are
    /// the mean of its members'); `None` when there are none or their shapes differ.
    pub fn average(teachers: &[TeacherMarginals]) -> Option<Self> {
        let first = teachers.first()?;
        let shape = |t: &TeacherMarginals| (t.rows, t.time, t.tags);
        if teachers.iter().any(|t| shape(t) != shape(first)) {
            return None;
        }
        let n = teachers.len() as f32;
        let mean = |of: fn(&TeacherMarginals) -> &Vec<f32>| -> Vec<f32> {
            (0..of(first).len())
                .map(|i| teachers.iter().map(|t| of(t)[i]).sum::<f32>() / n)
                .collect()
        };
        Some(Self {
            unary: mean(|t| &t.unary),
            pairwise: mean(|t| &t.pairwise),
            ..first.clone()
        })
    }

    /// Sentences' marginals padded into a batch's rows of `max_len` tokens; `None` unless each
    /// has them, of one sentence whose values fill its shape, over the same tags.
    pub fn padded(sentences: &[Option<&TeacherMarginals>], max_len: usize) -> Option<Self> {
        let tags = sentences.first().copied().flatten()?.tags;
        let rows = sentences.len();
        let pairs = max_len.saturating_sub(1);
        let mut unary = vec![0.0; rows * max_len * tags];
        let mut pairwise = vec![0.0; rows * pairs * tags * tags];
        for (row, sentence) in sentences.iter().enumerate() {
            let sentence = (*sentence).filter(|s| {
                let pairs = s.time.saturating_sub(1);
                s.tags == tags
                    && s.rows == 1
                    && s.time <= max_len
                    && s.unary.len() == s.time * tags
                    && s.pairwise.len() == pairs * tags * tags
            })?;
            unary[row * max_len * tags..][..sentence.unary.len()].copy_from_slice(&sentence.unary);
            pairwise[row * pairs * tags * tags..][..sentence.pairwise.len()]
                .copy_from_slice(&sentence.pairwise);
        }
        Some(Self {
            rows,
            time: max_len,
            tags,
            unary,
            pairwise,
        })
    }
}

impl Encoded {
    /// Tokens in the sentence.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether it has no tokens.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }
}

/// A feature column's values in some input, against what training saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureCoverage {
    /// Values read.
    pub values: usize,
    /// Of them, values training never saw (read as `<unk>`).
    pub unseen: usize,
    /// Up to three of those, in order of first appearance.
    pub examples: Vec<String>,
}

impl FeatureCoverage {
    /// The share of values never seen, from 0 to 1.
    pub fn unseen_share(&self) -> f64 {
        if self.values == 0 {
            0.0
        } else {
            self.unseen as f64 / self.values as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sentence(words: &str, tags: &str) -> Sentence {
        Sentence {
            words: words.split_whitespace().map(String::from).collect(),
            tags: tags.split_whitespace().map(String::from).collect(),
            features: Vec::new(),
            first_line: 1,
            document: 0,
        }
    }

    #[test]
    fn feature_values_get_ids_per_column_and_unseen_ones_are_unknown() {
        let corpus = crate::parse_conll(
            "Orion NNP B-ORG\nsells VBZ O\nDutch JJ B-MISC\n\nOslo NNP B-LOC\n",
            std::path::Path::new("t"),
            &crate::ColumnSpec {
                feature_columns: vec![1],
                ..crate::ColumnSpec::default()
            },
        )
        .unwrap();
        let vocab = Vocabularies::build(&corpus.sentences, TextNormalization::default(), 1);
        // Most frequent first, after <pad> and <unk>.
        assert_eq!(vocab.features[0].items(), [PAD, UNK, "NNP", "JJ", "VBZ"]);
        let encoded = vocab.encode_corpus(&corpus).unwrap();
        assert_eq!(encoded[0].features, [2, 4, 3]);
        let unseen = vocab
            .encode_with_features(&["Paris"], &[vec!["NNPS".to_string()]])
            .unwrap();
        assert_eq!(unseen.features, [Vocab::UNK_ID]);
        let err = vocab.encode_with_features(&["Paris"], &[]).unwrap_err();
        assert!(
            err.contains("reads 1 feature column beside the words"),
            "{err}"
        );
        // A vocabulary without feature columns is stored as before them.
        let plain = Vocabularies::build(&[sentence("a", "O")], TextNormalization::default(), 1);
        assert!(!serde_json::to_string(&plain).unwrap().contains("features"));
    }

    #[test]
    fn builds_with_specials_and_min_count() {
        let data = [
            sentence("the cat the Dog", "O B-X O B-Y"),
            sentence("the 1996", "O O"),
        ];
        let vocab = Vocabularies::build(&data, TextNormalization::default(), 2);
        assert_eq!(vocab.words.items(), ["<pad>", "<unk>", "the"]);
        assert_eq!(vocab.word_id("cat"), Vocab::UNK_ID);
        assert_eq!(vocab.tags.items(), ["O", "B-X", "B-Y"]);
        assert_eq!(vocab.chars.id("t"), Some(2), "most frequent char first");
    }

    #[test]
    fn normalization_applies_to_lookups() {
        let norm = TextNormalization {
            lowercase: true,
            digits_to_zero: true,
        };
        assert_eq!(norm.apply("Born1996İ"), "born0000i̇");
        let data = [sentence("Paris 1996", "B-LOC O")];
        let vocab = Vocabularies::build(&data, norm, 1);
        assert_eq!(vocab.word_id("PARIS"), vocab.word_id("paris"));
        assert_eq!(vocab.word_id("2001"), vocab.word_id("1996"));
    }

    #[test]
    fn round_trips_through_json() {
        let data = [sentence("a b", "O B-X")];
        let vocab = Vocabularies::build(&data, TextNormalization::default(), 1);
        let json = serde_json::to_string(&vocab).unwrap();
        let back: Vocabularies = serde_json::from_str(&json).unwrap();
        assert_eq!(back, vocab);
    }
}
