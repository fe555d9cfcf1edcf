//! Padded, masked batches, and the plan that groups sentences of similar length into them.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use crate::{Casing, Encoded, MentionCasing, TeacherMarginals, Vocab};

/// Character ids of every word slot of a batch, `[batch * max_len, max_word_len]` row-major,
/// padded with `<pad>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CharIds {
    /// The ids, row by row.
    pub ids: Vec<i64>,
    /// The longest word's characters (the row width).
    pub max_word_len: usize,
    /// Characters in each word slot (after cutting to `max_word_len`), 0 for padding slots.
    pub lengths: Vec<usize>,
}

/// Each sentence's characters as one sequence, for a character-level language model over the
/// whole sentence (Liu et al., 2018): a separator (`<pad>`'s id, which no word contains) before
/// every word and after the last, so a sentence of `n` words and `c` characters is `c + n + 1`
/// long. Rows are `[batch, max_chars]`, padded with `<pad>` past each row's length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentenceChars {
    /// The ids, row by row.
    pub ids: Vec<i64>,
    /// The longest row (the row width).
    pub max_chars: usize,
    /// Each row's length.
    pub lengths: Vec<usize>,
    /// `[batch, max_len]`: where the separator after each word is, 0 for padding slots.
    pub word_ends: Vec<i64>,
    /// `[batch, max_len]`: where the separator before each word is, 0 for padding slots.
    pub word_starts: Vec<i64>,
}

impl SentenceChars {
    /// Words longer than `max_word_len` characters keep their first `max_word_len`, as in
    /// [`CharIds`].
    fn new(sentences: &[&Encoded], max_len: usize, max_word_len: usize) -> Self {
        const SEPARATOR: i64 = Vocab::PAD_ID as i64;
        let rows: Vec<Vec<i64>> = sentences
            .iter()
            .map(|sentence| {
                let mut row = vec![SEPARATOR];
                for word in &sentence.chars {
                    row.extend(word.iter().take(max_word_len).map(|&c| c as i64));
                    row.push(SEPARATOR);
                }
                row
            })
            .collect();
        let lengths: Vec<usize> = rows.iter().map(Vec::len).collect();
        let max_chars = lengths.iter().copied().max().unwrap_or(0);
        let mut ids = vec![SEPARATOR; sentences.len() * max_chars];
        let mut word_ends = vec![0; sentences.len() * max_len];
        let mut word_starts = vec![0; sentences.len() * max_len];
        for (b, (row, sentence)) in rows.iter().zip(sentences).enumerate() {
            ids[b * max_chars..b * max_chars + row.len()].copy_from_slice(row);
            let mut start = 0;
            for (t, word) in sentence.chars.iter().enumerate() {
                let end = start + word.len().min(max_word_len) + 1;
                word_starts[b * max_len + t] = start as i64;
                word_ends[b * max_len + t] = end as i64;
                start = end;
            }
        }
        Self {
            ids,
            max_chars,
            lengths,
            word_ends,
            word_starts,
        }
    }
}

/// The pretrained encoder's inputs of a batch: every window of its sentences
/// ([`Encoded::windows`]) as a row, and where each word slot's emission is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubwordIds {
    /// The sub-token ids, `[windows, width]` row-major, padded with 0.
    pub ids: Vec<i64>,
    /// Windows (rows).
    pub windows: usize,
    /// The longest window (the row width).
    pub width: usize,
    /// Each window's sub-tokens.
    pub lengths: Vec<usize>,
    /// For each word slot (`[batch * max_len]`), where its first sub-token is in `ids`; 0 at
    /// padding slots.
    pub first: Vec<i64>,
}

impl SubwordIds {
    /// The windows of `sentences`, or none when they have none.
    fn new(sentences: &[&Encoded], max_len: usize) -> Option<Self> {
        let windows: Vec<&crate::Window> = sentences.iter().flat_map(|s| &s.windows).collect();
        if windows.is_empty() {
            return None;
        }
        let width = windows
            .iter()
            .map(|w| w.ids.len())
            .max()
            .unwrap_or(0)
            .max(1);
        let mut ids = vec![0; windows.len() * width];
        let mut first = vec![0; sentences.len() * max_len];
        let mut row = 0;
        for (b, sentence) in sentences.iter().enumerate() {
            for window in &sentence.windows {
                let ids = &mut ids[row * width..][..window.ids.len()];
                ids.iter_mut()
                    .zip(&window.ids)
                    .for_each(|(to, &id)| *to = i64::from(id));
                for (w, &at) in window.scored.clone().zip(&window.first_pieces) {
                    first[b * max_len + w] = (row * width + at) as i64;
                }
                row += 1;
            }
        }
        Some(Self {
            ids,
            windows: windows.len(),
            width,
            lengths: windows.iter().map(|w| w.ids.len()).collect(),
            first,
        })
    }
}

/// Sentences as padded id matrices. Matrices are `[batch, max_len]`, row-major; positions at or
/// beyond a sentence's length hold `<pad>` (words) or 0 (tags) and are masked everywhere.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// Which sentences these are, as indices into the slice the batch was made from.
    pub indices: Vec<usize>,
    /// Each sentence's tokens.
    pub lengths: Vec<usize>,
    /// The longest sentence's tokens (the row width).
    pub max_len: usize,
    /// Word ids `[batch, max_len]`, `<pad>` at padding slots.
    pub words: Vec<i64>,
    /// Each word's [`Casing`](crate::Casing) id, `Casing::Padding`'s at padding slots.
    pub casing: Vec<i64>,
    /// Each word's [`MentionCasing`](crate::MentionCasing) id, `Padding`'s at padding slots.
    pub mentions: Vec<i64>,
    /// Each word slot's characters.
    pub chars: CharIds,
    /// Each sentence's characters as one sequence.
    pub sentence_chars: SentenceChars,
    /// Empty when the sentences are untagged.
    pub tags: Vec<i64>,
    /// Where some sentence has unlabelled tokens: whether each token may carry each tag, `[batch, max_len, tags]` (a labelled token allows its own tag alone, padding
    /// every tag). Empty when every token of the batch is labelled.
    pub allowed: Vec<bool>,
    /// Tags a row of `allowed` holds (0 when it is empty).
    pub num_tags: usize,
    /// Each word's place in each dictionary label's phrases, as the id `label *
    /// place::COUNT + place`, `[batch, max_len, dictionary_labels]`; padding is in no phrase.
    /// Empty without a dictionary.
    pub dictionary: Vec<i64>,
    /// Dictionary labels (0 without a dictionary).
    pub dictionary_labels: usize,
    /// Each feature column's value ids (see [`Encoded::features`]), `[features][batch *
    /// max_len]`; padding is `<pad>`. Empty without feature columns.
    pub features: Vec<Vec<i64>>,
    /// The pretrained encoder's inputs; `None` without an encoder.
    pub subwords: Option<SubwordIds>,
    /// The frozen encoder's layers at each word slot's first sub-token, `[batch, max_len,
    /// layers + 1, hidden]`, zeros at padding, when every sentence of the batch has them
    /// cached ([`Encoded::encoder_states`]); empty otherwise.
    pub encoder_states: Vec<f32>,
    /// The teachers' marginals, `rows` the batch's sentences and `time` its `max_len`, when
    /// every sentence has them ([`Encoded::teacher`], of its own length); `None` otherwise.
    pub teacher: Option<TeacherMarginals>,
}

impl Batch {
    /// Pads `sentences[i]` for each `i` in `indices`; words longer than `max_word_len`
    /// characters keep their first `max_word_len`.
    pub fn new(sentences: &[Encoded], indices: Vec<usize>, max_word_len: usize) -> Self {
        let lengths: Vec<usize> = indices.iter().map(|&i| sentences[i].len()).collect();
        let max_len = lengths.iter().copied().max().unwrap_or(0);
        let word_len = indices
            .iter()
            .flat_map(|&i| sentences[i].chars.iter().map(Vec::len))
            .max()
            .unwrap_or(0)
            .clamp(1, max_word_len.max(1));
        let tagged = indices
            .iter()
            .all(|&i| sentences[i].tags.len() == sentences[i].len());

        let slots = indices.len() * max_len;
        let mut words = vec![Vocab::PAD_ID as i64; slots];
        let mut casing = vec![Casing::Padding.id() as i64; slots];
        let mut mentions = vec![MentionCasing::Padding.id() as i64; slots];
        let mut tags = if tagged { vec![0; slots] } else { Vec::new() };
        let mut chars = vec![Vocab::PAD_ID as i64; slots * word_len];
        let mut char_lengths = vec![0; slots];
        for (row, &i) in indices.iter().enumerate() {
            let sentence = &sentences[i];
            for t in 0..sentence.len() {
                let slot = row * max_len + t;
                words[slot] = sentence.words[t] as i64;
                casing[slot] = sentence.casing[t] as i64;
                mentions[slot] = sentence.mentions[t] as i64;
                if tagged {
                    tags[slot] = sentence.tags[t] as i64;
                }
                for (c, &id) in sentence.chars[t].iter().take(word_len).enumerate() {
                    chars[slot * word_len + c] = id as i64;
                }
                char_lengths[slot] = sentence.chars[t].len().min(word_len);
            }
        }
        let members: Vec<&Encoded> = indices.iter().map(|&i| &sentences[i]).collect();
        let (dictionary, dictionary_labels) = dictionary_ids(&members, max_len);
        let features = feature_ids(&members, max_len);
        let sentence_chars = SentenceChars::new(&members, max_len, word_len);
        let subwords = SubwordIds::new(&members, max_len);
        let encoder_states = encoder_states(&members, max_len);
        let teachers: Vec<Option<&TeacherMarginals>> = (members.iter())
            .map(|s| s.teacher.as_ref().filter(|t| t.time == s.len()))
            .collect();
        let teacher = TeacherMarginals::padded(&teachers, max_len);
        let (allowed, num_tags) = if tagged {
            allowed_masks(&members, max_len)
        } else {
            (Vec::new(), 0)
        };
        Self {
            indices,
            lengths,
            max_len,
            words,
            casing,
            mentions,
            chars: CharIds {
                ids: chars,
                max_word_len: word_len,
                lengths: char_lengths,
            },
            sentence_chars,
            tags,
            allowed,
            num_tags,
            dictionary,
            dictionary_labels,
            features,
            subwords,
            encoder_states,
            teacher,
        }
    }

    /// Sentences in the batch.
    pub fn size(&self) -> usize {
        self.indices.len()
    }

    /// Sets the dictionary places ([`Encoded::dictionary`]'s layout) of the batch's sentence
    /// `row`: to hide some of its phrases from a training step.
    pub fn set_dictionary_places(&mut self, row: usize, places: &[u8]) {
        let (max_len, labels) = (self.max_len, self.dictionary_labels);
        write_places(&mut self.dictionary, row, max_len, labels, places);
    }

    /// Tokens in the batch, padding left out.
    pub fn token_count(&self) -> usize {
        self.lengths.iter().sum()
    }
}

/// The dictionary place ids of `sentences`, `[batch, max_len, labels]`, and the number of
/// labels; empty when the sentences have no places.
fn dictionary_ids(sentences: &[&Encoded], max_len: usize) -> (Vec<i64>, usize) {
    let Some(labels) = sentences
        .iter()
        .find(|s| !s.dictionary.is_empty())
        .map(|s| s.dictionary.len() / s.len())
    else {
        return (Vec::new(), 0);
    };
    let count = crate::place::COUNT as i64;
    let none: Vec<i64> = (0..labels as i64)
        .map(|k| k * count + i64::from(crate::place::NONE))
        .collect();
    let mut ids = none.repeat(sentences.len() * max_len);
    for (row, sentence) in sentences.iter().enumerate() {
        write_places(&mut ids, row, max_len, labels, &sentence.dictionary);
    }
    (ids, labels)
}

/// The feature value ids of `sentences`, `[features][batch * max_len]`; empty when the
/// sentences have none.
fn feature_ids(sentences: &[&Encoded], max_len: usize) -> Vec<Vec<i64>> {
    let Some(count) = sentences
        .iter()
        .find(|s| !s.features.is_empty())
        .map(|s| s.features.len() / s.len())
    else {
        return Vec::new();
    };
    let mut ids = vec![vec![Vocab::PAD_ID as i64; sentences.len() * max_len]; count];
    for (row, sentence) in sentences.iter().enumerate() {
        for (i, &id) in sentence.features.iter().enumerate() {
            ids[i % count][row * max_len + i / count] = id as i64;
        }
    }
    ids
}

/// The sentences' cached encoder states laid out `[batch, max_len, ...]`, when all have them.
fn encoder_states(sentences: &[&Encoded], max_len: usize) -> Vec<f32> {
    let cached = |s: &&&Encoded| !s.encoder_states.is_empty() || s.is_empty();
    let Some(width) = sentences
        .iter()
        .find(|s| !s.encoder_states.is_empty())
        .map(|s| s.encoder_states.len() / s.len())
    else {
        return Vec::new();
    };
    if !sentences.iter().all(|s| cached(&s)) {
        return Vec::new();
    }
    let mut states = vec![0.0; sentences.len() * max_len * width];
    for (row, sentence) in sentences.iter().enumerate() {
        states[row * max_len * width..][..sentence.encoder_states.len()]
            .copy_from_slice(&sentence.encoder_states);
    }
    states
}

/// Writes a sentence's places (`[words, labels]`) as row `row` of dictionary ids.
fn write_places(ids: &mut [i64], row: usize, max_len: usize, labels: usize, places: &[u8]) {
    if labels == 0 {
        return;
    }
    let count = crate::place::COUNT as i64;
    let row_ids = ids[row * max_len * labels..].chunks_exact_mut(labels);
    for (word_ids, word_places) in row_ids.zip(places.chunks_exact(labels)) {
        for (k, (id, &place)) in word_ids.iter_mut().zip(word_places).enumerate() {
            *id = k as i64 * count + i64::from(place);
        }
    }
}

/// The tags each token of `sentences` may carry, `[batch, max_len, tags]`, and the number of
/// tags; empty when every token is labelled.
fn allowed_masks(sentences: &[&Encoded], max_len: usize) -> (Vec<bool>, usize) {
    let Some(k) = sentences
        .iter()
        .find_map(|s| s.allowed.first().map(Vec::len))
    else {
        return (Vec::new(), 0);
    };
    let mut allowed = vec![true; sentences.len() * max_len * k];
    for (row, sentence) in sentences.iter().enumerate() {
        for t in 0..sentence.len() {
            let slot = &mut allowed[(row * max_len + t) * k..][..k];
            match sentence.allowed.get(t) {
                Some(mask) => slot.copy_from_slice(mask),
                None => {
                    slot.fill(false);
                    slot[sentence.tags[t]] = true;
                }
            }
        }
    }
    (allowed, k)
}

/// Groups sentence indices into batches of similar length, so little of a batch is padding.
#[derive(Debug, Clone)]
pub struct BatchPlan {
    /// Each batch's sentence indices.
    pub batches: Vec<Vec<usize>>,
}

impl BatchPlan {
    /// In length order, for evaluation and tagging: `batch_size` sentences a batch, fewer where
    /// that many padded to the batch's longest would pass `max_tokens` (one sentence at least),
    /// so that a batch of long sentences needs no more memory than one of typical ones.
    pub fn sorted(lengths: &[usize], batch_size: usize, max_tokens: usize) -> Self {
        let mut order: Vec<usize> = (0..lengths.len()).collect();
        order.sort_by_key(|&i| lengths[i]);
        let mut batches: Vec<Vec<usize>> = Vec::new();
        for i in order {
            match batches.last_mut() {
                // Sorted by length, so this sentence is the batch's longest.
                Some(batch)
                    if batch.len() < batch_size && (batch.len() + 1) * lengths[i] <= max_tokens =>
                {
                    batch.push(i)
                }
                _ => batches.push(vec![i]),
            }
        }
        Self { batches }
    }

    /// For one training epoch: ties in length broken at random, and batches in random order,
    /// both drawn from `seed`.
    pub fn shuffled(lengths: &[usize], batch_size: usize, seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut order: Vec<usize> = (0..lengths.len()).collect();
        order.shuffle(&mut rng);
        order.sort_by_key(|&i| lengths[i]);
        let mut plan = Self::chunked(order, batch_size);
        plan.batches.shuffle(&mut rng);
        plan
    }

    fn chunked(order: Vec<usize>, batch_size: usize) -> Self {
        Self {
            batches: order
                .chunks(batch_size.max(1))
                .map(<[usize]>::to_vec)
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(words: &[usize], tags: &[usize]) -> Encoded {
        Encoded {
            words: words.to_vec(),
            chars: words.iter().map(|&w| vec![w + 10; w]).collect(),
            casing: words.iter().map(|&w| w % Casing::COUNT).collect(),
            mentions: words.iter().map(|&w| w % MentionCasing::COUNT).collect(),
            tags: tags.to_vec(),
            allowed: Vec::new(),
            dictionary: Vec::new(),
            features: Vec::new(),
            windows: Vec::new(),
            encoder_states: Vec::new(),
            teacher: None,
        }
    }

    #[test]
    fn feature_ids_are_laid_out_per_column_and_padding_is_pad() {
        let mut sentences = vec![encoded(&[3, 4, 5], &[]), encoded(&[6], &[])];
        sentences[0].features = vec![2, 7, 3, 8, 4, 9];
        sentences[1].features = vec![5, 6];
        let batch = Batch::new(&sentences, vec![0, 1], 10);
        let pad = Vocab::PAD_ID as i64;
        assert_eq!(
            batch.features,
            vec![vec![2, 3, 4, 5, pad, pad], vec![7, 8, 9, 6, pad, pad]]
        );
        let plain = Batch::new(&[encoded(&[3], &[])], vec![0], 10);
        assert!(plain.features.is_empty());
    }

    #[test]
    fn dictionary_places_are_ids_per_label_and_padding_is_in_no_phrase() {
        use crate::place::{BEGIN, END, NONE, SINGLE};
        let mut sentences = [encoded(&[2, 3], &[1, 2]), encoded(&[4], &[3])];
        // Two labels: word 0 begins a phrase of the first and is a phrase of the second.
        sentences[0].dictionary = vec![BEGIN, SINGLE, END, NONE];
        sentences[1].dictionary = vec![NONE, SINGLE];
        let batch = Batch::new(&sentences, vec![1, 0], 3);
        assert_eq!(batch.dictionary_labels, 2);
        let count = crate::place::COUNT as i64;
        let id = |label: i64, place: u8| label * count + i64::from(place);
        assert_eq!(
            batch.dictionary,
            [
                id(0, NONE),
                id(1, SINGLE),
                id(0, NONE),
                id(1, NONE),
                id(0, BEGIN),
                id(1, SINGLE),
                id(0, END),
                id(1, NONE)
            ]
        );
        let plain = Batch::new(&[encoded(&[2], &[1])], vec![0], 3);
        assert!(plain.dictionary.is_empty() && plain.dictionary_labels == 0);
    }

    #[test]
    fn pads_words_tags_and_chars() {
        let sentences = [encoded(&[2, 3], &[1, 2]), encoded(&[4], &[3])];
        let batch = Batch::new(&sentences, vec![1, 0], 3);
        assert_eq!(batch.lengths, vec![1, 2]);
        assert_eq!(batch.max_len, 2);
        assert_eq!(batch.words, vec![4, 0, 2, 3]);
        assert_eq!(batch.casing, vec![4, 0, 2, 3]);
        assert_eq!(batch.mentions, vec![4, 0, 2, 3]);
        assert_eq!(batch.tags, vec![3, 0, 1, 2]);
        assert_eq!(
            batch.chars.max_word_len, 3,
            "longest word (4 chars) cut to 3"
        );
        assert_eq!(
            batch.chars.ids,
            vec![14, 14, 14, 0, 0, 0, 12, 12, 0, 13, 13, 13]
        );
        assert_eq!(batch.chars.lengths, vec![3, 0, 2, 3]);
    }

    #[test]
    fn lays_out_sentence_characters_with_separators() {
        let sentences = [encoded(&[2, 3], &[1, 2]), encoded(&[4], &[3])];
        let batch = Batch::new(&sentences, vec![1, 0], 3);
        let chars = &batch.sentence_chars;
        // Row 0: | 14 14 14 |, the 4-character word cut to 3; row 1: | 12 12 | 13 13 13 |.
        assert_eq!(chars.max_chars, 8);
        assert_eq!(chars.lengths, vec![5, 8]);
        assert_eq!(
            chars.ids,
            vec![0, 14, 14, 14, 0, 0, 0, 0, 0, 12, 12, 0, 13, 13, 13, 0]
        );
        assert_eq!(chars.word_starts, vec![0, 0, 0, 3]);
        assert_eq!(chars.word_ends, vec![4, 0, 3, 7]);
    }

    #[test]
    fn partly_labelled_batches_say_which_tags_each_token_allows() {
        let mut partial = encoded(&[2, 3], &[1, 0]);
        partial.allowed = vec![vec![false, true, false], vec![true, false, true]];
        let sentences = [encoded(&[4], &[2]), partial];
        assert!(Batch::new(&sentences, vec![0], 3).allowed.is_empty());
        let batch = Batch::new(&sentences, vec![0, 1], 3);
        assert_eq!(batch.num_tags, 3);
        let (o, x) = (false, true);
        #[rustfmt::skip]
        assert_eq!(batch.allowed, [
            o, o, x,  x, x, x, // the labelled sentence: its tag; then padding
            o, x, o,  x, o, x,
        ]);
    }

    #[test]
    fn untagged_sentences_have_no_tags() {
        let sentences = [encoded(&[2, 3], &[])];
        assert!(Batch::new(&sentences, vec![0], 20).tags.is_empty());
    }

    #[test]
    fn plans_cover_every_sentence_once_and_bucket_by_length() {
        let lengths: Vec<usize> = (0..103).map(|i| (i * 37) % 50 + 1).collect();
        for plan in [
            BatchPlan::sorted(&lengths, 10, usize::MAX),
            BatchPlan::shuffled(&lengths, 10, 7),
        ] {
            let mut all: Vec<usize> = plan.batches.iter().flatten().copied().collect();
            all.sort();
            assert_eq!(all, (0..103).collect::<Vec<_>>());
            for batch in &plan.batches {
                let spread = batch.iter().map(|&i| lengths[i]).max().unwrap()
                    - batch.iter().map(|&i| lengths[i]).min().unwrap();
                assert!(spread <= 5, "batch spread {spread}");
            }
        }
        let a = BatchPlan::shuffled(&lengths, 10, 7).batches;
        assert_eq!(
            a,
            BatchPlan::shuffled(&lengths, 10, 7).batches,
            "same seed, same plan"
        );
        assert_ne!(
            a,
            BatchPlan::shuffled(&lengths, 10, 8).batches,
            "another seed, another plan"
        );
    }

    #[test]
    fn sorted_batches_of_long_sentences_stay_under_the_token_limit() {
        let lengths = [3, 250, 250, 250, 5, 4, 120, 2];
        let plan = BatchPlan::sorted(&lengths, 3, 500);
        assert_eq!(
            plan.batches,
            vec![vec![7, 0, 5], vec![4, 6], vec![1, 2], vec![3]]
        );
        // One sentence past the limit still gets a batch of its own.
        assert_eq!(BatchPlan::sorted(&[900], 3, 500).batches, vec![vec![0]]);
    }
}
