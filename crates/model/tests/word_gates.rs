//! Emissions computed with the word-gate cache equal those computed from the embeddings, with and
//! without character, casing, mention, language-model, dictionary and column features, for words met for
//! the first time, words met again, and words beyond the cache's capacity.

use burn::tensor::Device;
use nertrain_data::{Batch, Casing, Encoded};
use nertrain_model::crf::host_emissions;
use nertrain_model::{BatchTensors, CharFeatures, NetworkConfig, VocabSizes, WordGates};

/// A word's characters and casing vary with its position as well as its id, as they do when words
/// are lowercased for their ids: the cache must tell these apart.
fn sentence(words: &[usize]) -> Encoded {
    let position = || words.iter().enumerate();
    Encoded {
        words: words.to_vec(),
        chars: position().map(|(t, &w)| vec![2 + (w + t) % 5, 3]).collect(),
        casing: position()
            .map(|(t, &w)| 1 + (w + t / 2) % (Casing::COUNT - 1))
            .collect(),
        mentions: words.iter().map(|&w| 1 + w % 4).collect(),
        tags: Vec::new(),
        allowed: Vec::new(),
        // Two dictionary labels: each word's place in their phrases.
        dictionary: position()
            .flat_map(|(t, &w)| [((w + t) % 5) as u8, (w % 3) as u8])
            .collect(),
        // Two feature columns of 6 and 4 values (padding and unknown among them).
        features: position()
            .flat_map(|(t, &w)| [1 + (w + t) % 5, 1 + w % 3])
            .collect(),
        windows: Vec::new(),
        encoder_states: Vec::new(),
        teacher: None,
    }
}

#[test]
fn cached_word_gates_give_the_same_emissions() {
    let device = Device::default();
    let sizes = VocabSizes {
        words: 40,
        chars: 8,
        tags: 5,
        lm_words: 6,
        dictionary_labels: 2,
        features: vec![6, 4],
        encoder: None,
    };
    let batches = [
        vec![sentence(&[2, 3, 35, 2]), sentence(&[7, 35])],
        vec![sentence(&[3, 2, 9]), sentence(&[36, 7, 3, 12, 13, 14])],
        vec![sentence(&[2, 9, 36, 35, 12])],
    ];
    for (features, casing_dim, mention_dim, char_lm, dictionary_dim, feature_dims) in [
        (CharFeatures::None, 0, 0, false, 0, vec![]),
        (CharFeatures::Cnn, 0, 0, false, 0, vec![]),
        (CharFeatures::Lstm, 0, 0, false, 0, vec![]),
        (CharFeatures::None, 2, 0, false, 0, vec![]),
        (CharFeatures::Cnn, 2, 0, false, 0, vec![]),
        (CharFeatures::Cnn, 2, 3, false, 0, vec![]),
        (CharFeatures::None, 0, 0, true, 0, vec![]),
        (CharFeatures::Cnn, 2, 3, true, 0, vec![]),
        (CharFeatures::None, 0, 0, false, 2, vec![]),
        (CharFeatures::Cnn, 2, 3, false, 2, vec![]),
        (CharFeatures::None, 0, 0, false, 0, vec![3, 2]),
        (CharFeatures::Cnn, 2, 0, false, 2, vec![3, 2]),
        (CharFeatures::Cnn, 2, 3, false, 2, vec![3, 2]),
    ] {
        let model = NetworkConfig::new()
            .with_word_dim(4)
            .with_hidden(3)
            .with_char_dim(3)
            .with_char_filters(2)
            .with_char_hidden(2)
            .with_char_features(features)
            .with_casing_dim(casing_dim)
            .with_mention_dim(mention_dim)
            .with_char_lm(char_lm)
            .with_char_lm_hidden(2)
            .with_dictionary_dim(dictionary_dim)
            .with_feature_dims(feature_dims.clone())
            .init(&sizes, &device);
        // Room for every word, room for four rows (8 * hidden floats each) only, and a cache
        // never filled, where every row is computed with its batch.
        for (cache, filled) in [
            (WordGates::default(), true),
            (WordGates::with_capacity(4 * 8 * 3 * 4), true),
            (WordGates::default(), false),
        ] {
            for sentences in &batches {
                if filled {
                    cache.fill(&model, sentences, 10);
                }
                let batch = Batch::new(sentences, (0..sentences.len()).collect(), 10);
                // Real tokens only: padding slots are unspecified.
                let want = host_emissions(
                    model.emissions(&BatchTensors::new(&batch, &device)),
                    &batch.lengths,
                )
                .concat();
                let got =
                    host_emissions(model.emissions_with_cache(&batch, &cache), &batch.lengths)
                        .concat();
                assert_eq!(want.len(), got.len());
                for (a, b) in want.iter().zip(&got) {
                    assert!(
                        (a - b).abs() < 1e-5,
                        "{features:?}, casing {casing_dim}, mentions {mention_dim}, \
                         char_lm {char_lm}, dictionary {dictionary_dim}, columns \
                         {feature_dims:?}: {want:?} vs {got:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn dictionary_places_reach_the_emissions() {
    let device = Device::default();
    let sizes = VocabSizes {
        words: 40,
        chars: 8,
        tags: 5,
        lm_words: 0,
        dictionary_labels: 2,
        features: Vec::new(),
        encoder: None,
    };
    let model = NetworkConfig::new()
        .with_word_dim(4)
        .with_hidden(3)
        .with_char_features(CharFeatures::None)
        .with_dictionary_dim(2)
        .init(&sizes, &device);
    let with = vec![sentence(&[2, 3, 35, 2])];
    let silent: Vec<Encoded> = with
        .iter()
        .map(|s| Encoded {
            dictionary: vec![0; s.dictionary.len()],
            ..s.clone()
        })
        .collect();
    let without: Vec<Encoded> = with
        .iter()
        .map(|s| Encoded {
            dictionary: Vec::new(),
            ..s.clone()
        })
        .collect();
    let emissions = |sentences: &[Encoded]| {
        let batch = Batch::new(sentences, vec![0], 10);
        host_emissions(
            model.emissions(&BatchTensors::new(&batch, &device)),
            &batch.lengths,
        )
        .concat()
    };
    assert_ne!(emissions(&with), emissions(&silent));
    // No places at all reads as a dictionary that found nothing.
    assert_eq!(emissions(&silent), emissions(&without));
    // And so through the word-gate cache, whose rows hold what a word in no phrase brings.
    let cache = WordGates::default();
    for sentences in [&with, &silent, &without] {
        let batch = Batch::new(sentences, vec![0], 10);
        let got = host_emissions(model.emissions_with_cache(&batch, &cache), &batch.lengths);
        for (a, b) in emissions(sentences).iter().zip(&got.concat()) {
            assert!(
                (a - b).abs() < 1e-5,
                "{:?} vs {got:?}",
                emissions(sentences)
            );
        }
    }
}
