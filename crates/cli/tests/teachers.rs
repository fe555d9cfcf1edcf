//! A trained model as a teacher: each sentence's distribution over tag paths, as the unary and
//! pairwise marginals a student is distilled from, read as the model reads a file, at a
//! temperature.

mod common;

use burn::tensor::Device;
use common::{sample_model, workspace};
use nertrain_data::{ColumnSpec, TeacherMarginals, read_tagged};
use nertrain_tagger::{Error, TagOptions, Tagger};

/// Σ −p ln p over every token's tag marginals.
fn entropy(teachers: &[TeacherMarginals]) -> f64 {
    let terms = teachers.iter().flat_map(|t| &t.unary);
    terms
        .map(|&p| f64::from(p))
        .filter(|&p| p > 0.0)
        .map(|p| -p * p.ln())
        .sum()
}

#[test]
fn a_models_marginals_are_consistent_and_sharpen_into_its_best_path() {
    let tagger = Tagger::load(&sample_model("sentence"), &Device::flex()).unwrap();
    let dev = read_tagged(
        &workspace().join("data/sample/dev.txt"),
        &ColumnSpec::default(),
    )
    .unwrap();
    let teachers = tagger.teacher_marginals(&dev, 1.0, &[]).unwrap();
    let k = tagger.vocab().tags.len();
    assert_eq!(teachers.len(), dev.sentences.len());
    for (teacher, sentence) in teachers.iter().zip(&dev.sentences) {
        let len = sentence.words.len();
        assert_eq!((teacher.rows, teacher.time, teacher.tags), (1, len, k));
        assert_eq!(teacher.unary.len(), len * k);
        assert_eq!(teacher.pairwise.len(), len.saturating_sub(1) * k * k);
        let unary = |t: usize, y: usize| f64::from(teacher.unary[t * k + y]);
        let pair =
            |t: usize, i: usize, j: usize| f64::from(teacher.pairwise[((t - 1) * k + i) * k + j]);
        for t in 0..len {
            let total: f64 = (0..k).map(|y| unary(t, y)).sum();
            assert!((total - 1.0).abs() < 1e-4, "token {t}: {total}");
        }
        // Each pair's marginals sum to its two tokens' own.
        for t in 1..len {
            for y in 0..k {
                let from: f64 = (0..k).map(|j| pair(t, y, j)).sum();
                let to: f64 = (0..k).map(|i| pair(t, i, y)).sum();
                assert!(
                    (from - unary(t - 1, y)).abs() < 1e-4,
                    "{from} vs {}",
                    unary(t - 1, y)
                );
                assert!((to - unary(t, y)).abs() < 1e-4, "{to} vs {}", unary(t, y));
            }
        }
    }
    // Warmer is flatter; cold enough, each token's marginals are its best path's tag.
    let warm = tagger.teacher_marginals(&dev, 3.0, &[]).unwrap();
    assert!(entropy(&warm) > entropy(&teachers) + 1.0);
    let cold = tagger.teacher_marginals(&dev, 0.001, &[]).unwrap();
    let options = TagOptions {
        thresholds: false,
        ..tagger.options()
    };
    let predicted = tagger.evaluate(&dev, options).unwrap().predicted;
    for (teacher, tags) in cold.iter().zip(&predicted) {
        for (t, tag) in tags.iter().enumerate() {
            let row = &teacher.unary[t * k..][..k];
            let best = (0..k).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap();
            assert_eq!(tagger.vocab().tags.item(best), tag, "{row:?}");
            assert!(row[best] > 0.9, "{row:?}");
        }
    }
    for temperature in [0.0, -1.0, f64::NAN, 1e6] {
        match tagger.teacher_marginals(&dev, temperature, &[]) {
            Err(Error::InvalidOption { option, .. }) => assert_eq!(option, "temperature"),
            other => panic!("temperature {temperature}: {other:?}"),
        }
    }
}

/// Tags given for some tokens (a partially labelled sentence's) condition the distribution:
/// each given token's marginal is its tag's, and the others follow from the paths through it.
#[test]
fn allowed_tags_condition_the_marginals() {
    let tagger = Tagger::load(&sample_model("sentence"), &Device::flex()).unwrap();
    let dev = read_tagged(
        &workspace().join("data/sample/dev.txt"),
        &ColumnSpec::default(),
    )
    .unwrap();
    let free = tagger.teacher_marginals(&dev, 1.0, &[]).unwrap();
    let tags = &tagger.vocab().tags;
    let k = tags.len();
    let first_b = (0..k).find(|&y| tags.item(y).starts_with("B-")).unwrap();
    let o = (0..k).find(|&y| tags.item(y) == "O").unwrap();
    // In the first sentence, its first token is given the tag the model least expects of O
    // and a B- tag; every other token may have any.
    let len = dev.sentences[0].words.len();
    let row = &free[0].unary[..k];
    let given = if row[o] < row[first_b] { o } else { first_b };
    let mut mask = vec![true; len * k];
    (0..k).for_each(|y| mask[y] = y == given);
    let allowed = vec![Some(mask), None];
    let conditioned = tagger.teacher_marginals(&dev, 1.0, &allowed).unwrap();
    assert!((conditioned[0].unary[given] - 1.0).abs() < 1e-5);
    assert!(free[0].unary[given] < 0.5, "{row:?}");
    // Sentences given no tags are as they were.
    assert_eq!(conditioned[1..], free[1..]);
}
