//! A network's loss against teachers' marginals carried by its batch: the teachers' part is the
//! CRF's distillation loss on the padded batch, mixed with the gold labels' by its weight, and a
//! network taught by itself is at a fixed point.

use burn::tensor::{Device, Tensor};
use nertrain_data::{Batch, Encoded, TeacherMarginals};
use nertrain_model::{BatchTensors, Network, NetworkConfig, Reduction, VocabSizes};

const TAGS: usize = 5;

fn sentence(words: &[usize]) -> Encoded {
    Encoded {
        words: words.to_vec(),
        chars: words.iter().map(|&w| vec![2 + w % 5, 3]).collect(),
        casing: vec![1; words.len()],
        mentions: vec![1; words.len()],
        tags: words.iter().map(|&w| w % TAGS).collect(),
        ..Encoded::default()
    }
}

fn network(device: &Device) -> Network {
    let sizes = VocabSizes {
        words: 20,
        chars: 8,
        tags: TAGS,
        lm_words: 0,
        dictionary_labels: 0,
        features: vec![],
        encoder: None,
    };
    NetworkConfig::new()
        .with_word_dim(4)
        .with_hidden(3)
        .with_char_dim(3)
        .with_char_filters(2)
        .with_dropout(0.0)
        .init(&sizes, device)
}

/// `teacher`'s marginals of each of `sentences`, read alone, set as the sentence's teacher.
fn taught(teacher: &Network, sentences: &[Encoded], device: &Device) -> Vec<Encoded> {
    let values = |t: Tensor<3>| t.into_data().iter::<f32>().collect::<Vec<_>>();
    (0..sentences.len())
        .map(|i| {
            let batch = Batch::new(sentences, vec![i], 10);
            let inputs = BatchTensors::new(&batch, device);
            let emissions = teacher.emissions(&inputs);
            let marginals = (teacher.crf.potentials(None))
                .marginals(emissions, inputs.mask)
                .unwrap();
            let len = sentences[i].len();
            let pairwise = marginals
                .pairwise
                .reshape([1, len.saturating_sub(1) * TAGS, TAGS]);
            Encoded {
                teacher: Some(TeacherMarginals {
                    rows: 1,
                    time: len,
                    tags: TAGS,
                    unary: values(marginals.unary),
                    pairwise: values(pairwise),
                }),
                ..sentences[i].clone()
            }
        })
        .collect()
}

fn loss(student: &Network, inputs: &BatchTensors, teacher_weight: f64) -> Tensor<1> {
    let vectors = student.words.forward(inputs.words.clone());
    (student.loss(inputs, vectors, Reduction::Sum, None, teacher_weight)).unwrap()
}

fn scalar(t: Tensor<1>) -> f64 {
    t.into_scalar::<f64>()
}

#[test]
fn the_teachers_part_of_the_loss_is_the_crfs_distillation_loss_mixed_by_its_weight() {
    let device = Device::default();
    let (student, teacher) = (network(&device), network(&device));
    let sentences = [
        sentence(&[2, 3, 7, 2, 9]),
        sentence(&[4, 11]),
        sentence(&[5]),
    ];
    let sentences = taught(&teacher, &sentences, &device);
    let batch = Batch::new(&sentences, vec![0, 1, 2], 10);
    let padded = batch
        .teacher
        .as_ref()
        .expect("every sentence has a teacher");
    assert_eq!((padded.rows, padded.time), (3, 5));
    let inputs = BatchTensors::new(&batch, &device);
    // The teacher's marginals of the padded batch at once: what each sentence's, padded, are.
    let whole = (teacher.crf.potentials(None))
        .marginals(teacher.emissions(&inputs), inputs.mask.clone())
        .unwrap();
    let want = (student.crf.potentials(None))
        .distillation_loss(
            student.emissions(&inputs),
            &whole,
            inputs.mask.clone(),
            &inputs.lengths,
            Reduction::Sum,
        )
        .unwrap();
    let (gold, distilled) = (
        scalar(loss(&student, &inputs, 0.0)),
        scalar(loss(&student, &inputs, 1.0)),
    );
    assert!((distilled - scalar(want)).abs() < 1e-4, "{distilled}");
    assert!(
        (gold - distilled).abs() > 1e-3,
        "the gold tags are not the teacher's"
    );
    let mixed = scalar(loss(&student, &inputs, 0.3));
    assert!(
        (mixed - (0.7 * gold + 0.3 * distilled)).abs() < 1e-4,
        "{mixed}"
    );
    // A batch with a sentence the teachers did not read is the gold labels' alone.
    let mut untaught = sentences.clone();
    untaught[1].teacher = None;
    let batch = Batch::new(&untaught, vec![0, 1, 2], 10);
    assert!(batch.teacher.is_none());
    let inputs = BatchTensors::new(&batch, &device);
    assert_eq!(scalar(loss(&student, &inputs, 1.0)), gold);
    // Nor is one whose values do not fill its shape read into another row.
    let mut short = sentences.clone();
    short[0].teacher.as_mut().unwrap().unary.pop();
    assert!(Batch::new(&short, vec![0, 1, 2], 10).teacher.is_none());
}

#[test]
fn a_network_taught_by_itself_is_at_a_fixed_point() {
    let device = Device::default().autodiff();
    let model = network(&device);
    let sentences = [sentence(&[2, 3, 7, 2, 9]), sentence(&[4, 11, 6])];
    let sentences = taught(&model, &sentences, &device);
    let batch = Batch::new(&sentences, vec![0, 1], 10);
    let inputs = BatchTensors::new(&batch, &device);
    let vectors = (model.words.forward(inputs.words.clone()))
        .detach()
        .require_grad();
    let grads = (model.loss(&inputs, vectors.clone(), Reduction::Sum, None, 1.0))
        .unwrap()
        .backward();
    let gradient: Vec<f32> = vectors.grad(&grads).unwrap().into_data().iter().collect();
    let transitions: Vec<f32> = (model.crf.transitions.val().grad(&grads).unwrap())
        .into_data()
        .iter()
        .collect();
    for g in gradient.into_iter().chain(transitions) {
        assert!(g.abs() < 1e-5, "gradient {g} at the fixed point");
    }
}

#[test]
fn an_ensembles_marginals_are_its_teachers_mean() {
    let one = TeacherMarginals {
        rows: 1,
        time: 2,
        tags: 2,
        unary: vec![0.25, 0.75, 0.5, 0.5],
        pairwise: vec![0.125, 0.125, 0.375, 0.375],
    };
    let other = TeacherMarginals {
        unary: vec![0.75, 0.25, 1.0, 0.0],
        pairwise: vec![0.75, 0.0, 0.25, 0.0],
        ..one.clone()
    };
    // The same teacher twice is that teacher, to the last bit.
    assert_eq!(
        TeacherMarginals::average(&[one.clone(), one.clone()]),
        Some(one.clone())
    );
    let mean = TeacherMarginals::average(&[one.clone(), other]).unwrap();
    assert_eq!(mean.unary, [0.5, 0.5, 0.75, 0.25]);
    assert_eq!(mean.pairwise, [0.4375, 0.0625, 0.3125, 0.1875]);
    let longer = TeacherMarginals {
        time: 3,
        ..one.clone()
    };
    assert_eq!(TeacherMarginals::average(&[one, longer]), None);
    assert_eq!(TeacherMarginals::average(&[]), None);
}
