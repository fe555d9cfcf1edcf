//! Emissions computed with the word-gate cache equal those computed from the embeddings, with and
//! without character and casing features, for cached words, words met again, and words beyond the
//! cache.

use burn::tensor::{Device, Tensor};
use nertrain_data::{Batch, Casing, Encoded};
use nertrain_model::{BatchTensors, CharFeatures, TaggerConfig, VocabSizes, WordGates};

fn sentence(words: &[usize]) -> Encoded {
    Encoded {
        words: words.to_vec(),
        chars: words.iter().map(|&w| vec![2 + w % 5, 3]).collect(),
        casing: words.iter().map(|&w| 1 + w % (Casing::COUNT - 1)).collect(),
        mentions: words.iter().map(|&w| 1 + w % 4).collect(),
        tags: Vec::new(),
    }
}

fn values(t: Tensor<3>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

#[test]
fn cached_word_gates_give_the_same_emissions() {
    let device = Device::default();
    let rare = WordGates::CACHED_WORDS + 5;
    let sizes = VocabSizes {
        words: WordGates::CACHED_WORDS + 10,
        chars: 8,
        tags: 5,
        lm_words: 0,
    };
    let batches = [
        vec![sentence(&[2, 3, rare, 2]), sentence(&[7, rare])],
        vec![sentence(&[3, 2, 9]), sentence(&[rare + 1, 7, 3])],
    ];
    for (features, casing_dim) in [
        (CharFeatures::None, 0),
        (CharFeatures::Cnn, 0),
        (CharFeatures::Lstm, 0),
        (CharFeatures::None, 2),
        (CharFeatures::Cnn, 2),
    ] {
        let model = TaggerConfig::new()
            .with_word_dim(4)
            .with_hidden(3)
            .with_char_dim(3)
            .with_char_filters(2)
            .with_char_hidden(2)
            .with_char_features(features)
            .with_casing_dim(casing_dim)
            .init(sizes, &device);
        let cache = WordGates::default();
        for sentences in &batches {
            let batch = Batch::new(sentences, (0..sentences.len()).collect(), 10);
            let inputs = BatchTensors::new(&batch, &device);
            let want = values(model.emissions(&inputs));
            let got = values(model.emissions_with_cache(&inputs, &cache));
            assert_eq!(want.len(), got.len());
            for (a, b) in want.iter().zip(&got) {
                assert!(
                    (a - b).abs() < 1e-5,
                    "{features:?}, casing {casing_dim}: {want:?} vs {got:?}"
                );
            }
        }
    }
}
