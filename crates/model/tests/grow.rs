//! A model grown for larger vocabularies starts from the old one: on sentences of old words it
//! gives the old emission scores for the old tags, the old tags keep their transitions, and a
//! model that would shrink is refused. A module's weights copied whole are taken as a file's
//! are: the fresh module's own initialisation never runs.

use burn::tensor::Device;
use burn::tensor::{Distribution, Tensor};
use nertrain_data::{Batch, Casing, Encoded};
use nertrain_model::{
    BatchTensors, CharFeatures, NetworkConfig, VocabSizes, first_non_finite, grown_from,
    with_weights_of,
};

fn sentence(words: &[usize]) -> Encoded {
    Encoded {
        words: words.to_vec(),
        chars: words.iter().map(|&w| vec![2 + w % 4, 3]).collect(),
        casing: words.iter().map(|&w| w % Casing::COUNT).collect(),
        mentions: vec![1; words.len()],
        tags: Vec::new(),
        allowed: Vec::new(),
        dictionary: Vec::new(),
        features: Vec::new(),
        windows: Vec::new(),
        encoder_states: Vec::new(),
        teacher: None,
    }
}

/// Held by each test while it seeds the device's generator, which the tests share.
static SEEDING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Vocabularies of these sizes, without the optional inputs.
fn sizes(words: usize, chars: usize, tags: usize) -> VocabSizes {
    VocabSizes {
        words,
        chars,
        tags,
        lm_words: 0,
        dictionary_labels: 0,
        features: Vec::new(),
        encoder: None,
    }
}

fn values<const D: usize>(t: burn::tensor::Tensor<D>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

#[test]
fn a_grown_model_keeps_what_the_old_one_knew() {
    let _seeding = SEEDING.lock().unwrap_or_else(|e| e.into_inner());
    let device = Device::default();
    for features in [CharFeatures::Cnn, CharFeatures::Lstm, CharFeatures::None] {
        let config = NetworkConfig::new()
            .with_word_dim(6)
            .with_hidden(4)
            .with_char_features(features)
            .with_char_dim(3)
            .with_char_filters(4)
            .with_char_hidden(2)
            .with_casing_dim(2)
            .with_dropout(0.0);
        let old_sizes = sizes(10, 6, 3);
        let new_sizes = sizes(14, 9, 5);
        device.seed(1);
        let old = config.init(&old_sizes, &device);
        device.seed(2);
        let grown = grown_from(
            config.init(&new_sizes, &device),
            &new_sizes,
            &old,
            &old_sizes,
        )
        .expect("it grows");

        let sentences = [sentence(&[2, 5, 9, 3]), sentence(&[7, 8])];
        let batch = Batch::new(&sentences, vec![0, 1], 10);
        let inputs = BatchTensors::new(&batch, &device);
        let before = values(old.emissions(&inputs));
        let after = values(grown.emissions(&inputs));
        for slot in 0..before.len() / 3 {
            for tag in 0..3 {
                let (b, a) = (before[slot * 3 + tag], after[slot * 5 + tag]);
                assert!(
                    (a - b).abs() < 1e-5,
                    "{features:?}: slot {slot} tag {tag}: {a} vs {b}"
                );
            }
        }
        let old_transitions = values(old.crf.transitions.val());
        let new_transitions = values(grown.crf.transitions.val());
        for from in 0..3 {
            for to in 0..3 {
                assert_eq!(
                    new_transitions[from * 5 + to],
                    old_transitions[from * 3 + to]
                );
            }
        }
        assert_eq!(
            values(grown.words.weight.val())[..10 * 6],
            values(old.words.weight.val())[..],
            "the old words' rows"
        );

        let shrunk = grown_from(
            config.init(&old_sizes, &device),
            &old_sizes,
            &grown,
            &new_sizes,
        );
        assert_eq!(shrunk.unwrap_err().why, "it would shrink");
        let other = config.clone().with_hidden(5).init(&new_sizes, &device);
        let wider = grown_from(other, &new_sizes, &old, &old_sizes);
        assert_eq!(wider.unwrap_err().why, "another architecture");
    }
}

#[test]
fn weights_copied_whole_draw_nothing_from_the_generator() {
    let _seeding = SEEDING.lock().unwrap_or_else(|e| e.into_inner());
    let device = Device::default();
    let config = NetworkConfig::new()
        .with_word_dim(6)
        .with_hidden(4)
        .with_char_dim(3)
        .with_char_filters(4)
        .with_dropout(0.0);
    let sizes = sizes(10, 6, 3);
    device.seed(1);
    let loaded = config.init(&sizes, &device);
    // Every weight of it made now, as a module read from a file has them.
    assert_eq!(first_non_finite(&loaded), None);
    let next_draw = |copy: bool| {
        device.seed(2);
        let fresh = config.init(&sizes, &device);
        let fresh = if copy {
            with_weights_of(fresh, &loaded).expect("the same architecture")
        } else {
            fresh
        };
        let draw = values(Tensor::<1>::random([8], Distribution::Default, &device));
        (fresh, draw)
    };
    let (copied, after_copy) = next_draw(true);
    let (_, untouched) = next_draw(false);
    assert_eq!(after_copy, untouched, "the fresh weights were initialised");
    let sentences = [sentence(&[2, 5, 9, 3])];
    let inputs = BatchTensors::new(&Batch::new(&sentences, vec![0], 10), &device);
    assert_eq!(
        values(copied.emissions(&inputs)),
        values(loaded.emissions(&inputs))
    );
    let other = config.with_hidden(5).init(&sizes, &device);
    let error = with_weights_of(other, &loaded).unwrap_err();
    assert_eq!(error.why, "another architecture");
}
