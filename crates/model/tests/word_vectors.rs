//! Pretrained vectors become the embeddings of the words that have them; the rest keep theirs.

use std::path::Path;

use burn::tensor::Device;
use nertrain_data::{Vocab, parse_vectors};
use nertrain_model::{CharFeatures, NetworkConfig, VocabSizes};

#[test]
fn embedding_rows_take_the_vectors_of_known_words() {
    let device = Device::default();
    let words = Vocab::from(
        vec!["<pad>", "<unk>", "Berlin", "lamb", "zzz"]
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>(),
    );
    let vectors = parse_vectors("berlin 1 2 3\nlamb 4 5 6\n<unk> 9 9 9\n", Path::new("v")).unwrap();
    let config = NetworkConfig::new()
        .with_word_dim(3)
        .with_char_features(CharFeatures::None);
    let model = config.init(
        &VocabSizes {
            words: 5,
            chars: 2,
            tags: 3,
            lm_words: 0,
            dictionary_labels: 0,
            features: Vec::new(),
            encoder: None,
        },
        &device,
    );
    let before: Vec<f32> = model.words.weight.val().into_data().iter::<f32>().collect();
    let (model, found) = model.with_word_vectors(&words, &vectors);
    let after: Vec<f32> = model.words.weight.val().into_data().iter::<f32>().collect();
    assert_eq!(
        found, 2,
        "Berlin (through its lowercase form) and lamb; never <pad> or <unk>"
    );
    assert_eq!(&after[6..9], &[1.0, 2.0, 3.0]);
    assert_eq!(&after[9..12], &[4.0, 5.0, 6.0]);
    assert_eq!(
        &after[..6],
        &before[..6],
        "<pad> and <unk> keep their initialisation"
    );
    assert_eq!(
        &after[12..],
        &before[12..],
        "a word without a vector keeps its initialisation"
    );
}
