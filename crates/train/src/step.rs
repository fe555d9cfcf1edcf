//! One training step, the same for `fit` and `bench`: forward, backward, global-norm clipping,
//! and SGD with momentum or Adam: Burn's optimiser for every parameter but the word embedding,
//! whose update is row-sparse on the host ([`RowSparse`]).
use burn::module::Param;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer, SgdConfig};
use burn::tensor::{Device, Tensor, TensorData};
use nertrain_data::Batch;
use nertrain_model::{BatchTensors, Constraints, Network, Reduction, host_values};

use crate::config::{Optimizer, UpdateRule};
use crate::model_dir::TrainerFiles;
use crate::optim::clip::{clip_factor, scale, squared_norm};
use crate::optim::{EncoderAdamW, RowGradient, RowSparse, SparseAdam, SparseMomentum};
use crate::{Error, Result};

/// One training step's machinery: Burn's optimiser for the dense parameters, and the word table's row-sparse update, which holds the table as trained.
pub struct Trainer {
    optimizer: ModuleOptimizer,
    /// The word table's update, of the same rule as the other parameters'; it holds the table
    /// as trained.
    words: Box<dyn RowSparse>,
    dim: usize,
    clip_norm: f64,
    reduction: Reduction,
    constraints: Option<Constraints>,
    /// The fine-tuned pretrained encoder's own update (AdamW) and its learning rate; `None`
    /// without an encoder, or with a frozen one.
    encoder: Option<EncoderUpdate>,
    /// The teachers' share of the loss of batches that have their marginals.
    teacher_weight: f64,
}

/// The fine-tuned pretrained encoder's update.
struct EncoderUpdate {
    optimizer: ModuleOptimizer,
    lr: f64,
}

impl EncoderUpdate {
    /// AdamW with `weight_decay`, Burn's other defaults.
    fn new(weight_decay: f64) -> Self {
        Self {
            optimizer: ModuleOptimizer::from(EncoderAdamW::new(weight_decay as f32)),
            lr: 0.0,
        }
    }
}

impl Trainer {
    /// Takes `model`'s word table, which the trainer then owns: the model it returns has an
    /// empty one (no rows) until [`with_trained_words`](Self::with_trained_words) makes a copy
    /// of it with the table as trained, to evaluate or save.
    pub fn new(
        mut model: Network,
        rule: UpdateRule,
        clip_norm: f64,
        reduction: Reduction,
        constraints: Option<Constraints>,
    ) -> (Self, Network) {
        let [_, dim] = model.words.weight.dims();
        let table: Vec<f32> = model.words.weight.val().into_data().iter::<f32>().collect();
        let device = model.words.weight.device();
        let id = model.words.weight.id;
        model.words.weight = Param::initialized(id, Tensor::zeros([0, dim], &device));
        let (optimizer, words): (_, Box<dyn RowSparse>) = match rule.optimizer {
            Optimizer::Sgd => (
                SgdConfig::new()
                    .with_momentum(Some(
                        MomentumConfig::new()
                            .with_momentum(rule.momentum)
                            .with_dampening(0.0),
                    ))
                    .init(),
                Box::new(SparseMomentum::new(table, dim, rule.momentum)),
            ),
            Optimizer::Adam => (
                AdamConfig::new()
                    .with_beta_1(rule.betas.0 as f32)
                    .with_beta_2(rule.betas.1 as f32)
                    .with_epsilon(rule.epsilon as f32)
                    .init(),
                Box::new(SparseAdam::new(table, dim, rule.betas, rule.epsilon)),
            ),
        };
        let trainer = Self {
            optimizer,
            words,
            dim,
            clip_norm,
            reduction,
            constraints,
            encoder: None,
            teacher_weight: 0.0,
        };
        (trainer, model)
    }

    /// Fine-tunes the model's pretrained encoder with its own update, AdamW with `weight_decay`,
    /// at the rate [`set_encoder_lr`](Self::set_encoder_lr) sets.
    pub fn with_encoder_update(mut self, weight_decay: f64) -> Self {
        self.encoder = Some(EncoderUpdate::new(weight_decay));
        self
    }

    /// Weighs the loss against the teachers' marginals, where a batch has them, by `weight`
    /// and the gold labels' by `1 - weight` (`[distill] weight`).
    pub fn with_teacher_weight(mut self, weight: f64) -> Self {
        self.teacher_weight = weight;
        self
    }

    /// The fine-tuned encoder's learning rate for the steps that follow.
    pub fn set_encoder_lr(&mut self, lr: f64) {
        if let Some(encoder) = &mut self.encoder {
            encoder.lr = lr;
        }
    }

    /// Trains on `batch` at learning rate `lr`, on `device` (an autodiff device); returns the
    /// model and the loss. A loss that is not finite is returned with the model unchanged.
    pub fn step(
        &mut self,
        model: Network,
        batch: &Batch,
        lr: f64,
        device: &Device,
    ) -> Result<(Network, f64)> {
        let inputs = BatchTensors::new(batch, device);
        let dim = self.dim;
        self.words.set_learning_rate(lr);
        let looked_up = self.words.lookup(&batch.words);
        let word_vectors = Tensor::<3>::from_data(
            TensorData::new(looked_up, [batch.size(), batch.max_len, dim]),
            device,
        )
        .require_grad();
        let loss = model.loss(
            &inputs,
            word_vectors.clone(),
            self.reduction,
            self.constraints.as_ref(),
            self.teacher_weight,
        )?;
        let value = loss.clone().into_scalar::<f64>();
        if !value.is_finite() {
            return Ok((model, value));
        }
        let mut grads = loss.backward();
        let slot_gradients = host_values(
            word_vectors
                .grad_remove(&mut grads)
                .expect("the word vectors take part in the loss"),
        );
        let word_gradient = RowGradient::new(&batch.words, &slot_gradients, dim);
        // The fine-tuned encoder's gradients apart, for its own update.
        let mut encoder_grads = match (&self.encoder, &model.pretrained) {
            (Some(_), Some(pretrained)) => Some(GradientsParams::from_module(
                &mut grads,
                &pretrained.encoder,
            )),
            _ => None,
        };
        let mut grads = GradientsParams::from_grads(grads, &model);
        let norm = (squared_norm(&model, &grads) + word_gradient.squared_norm()).sqrt();
        let factor = clip_factor(norm, self.clip_norm);
        if factor < 1.0 {
            scale(&model, &mut grads, factor);
        }
        // Clipped on its own: the encoder's gradients, many times the head's, would otherwise
        // scale the head's updates down to nothing.
        if let Some(encoder_grads) = &mut encoder_grads {
            let norm = squared_norm(&model, encoder_grads).sqrt();
            let factor = clip_factor(norm, self.clip_norm);
            if factor < 1.0 {
                scale(&model, encoder_grads, factor);
            }
        }
        self.words.step(&word_gradient, factor);
        let mut model = self.optimizer.step(lr, model, grads);
        if let (Some(encoder), Some(encoder_grads)) = (&mut self.encoder, encoder_grads) {
            model = encoder.optimizer.step(encoder.lr, model, encoder_grads);
        }
        Ok((model, value))
    }

    /// A copy of the model being trained with the word table as trained so far (every row up to
    /// date), for evaluating or saving it.
    pub fn with_trained_words(&self, model: &Network) -> Network {
        let mut model = model.clone();
        let table = self.words.table();
        let rows = table.len() / self.dim;
        let table = TensorData::new(table, [rows, self.dim]);
        let device = model.words.weight.device();
        let id = model.words.weight.id;
        model.words.weight = Param::initialized(id, Tensor::from_data(table, &device));
        model
    }

    /// Writes the optimiser's state into checkpoint directory `dir`.
    pub fn save(&self, files: &TrainerFiles) -> Result<()> {
        save_optimizer(&self.optimizer, &files.optimizer)?;
        if let Some(encoder) = &self.encoder {
            save_optimizer(&encoder.optimizer, &files.encoder_optimizer)?;
        }
        self.words.save(&files.words)
    }

    /// Reads the optimiser's state back from a checkpoint.
    pub fn load(&mut self, files: &TrainerFiles) -> Result<()> {
        load_optimizer(&mut self.optimizer, &files.optimizer)?;
        if let Some(encoder) = &mut self.encoder {
            load_optimizer(&mut encoder.optimizer, &files.encoder_optimizer)?;
        }
        self.words.load(&files.words)
    }
}

/// Reads `optimizer`'s state back from `path`.
fn load_optimizer(optimizer: &mut ModuleOptimizer, path: &std::path::Path) -> Result<()> {
    let taken = std::mem::replace(optimizer, SgdConfig::new().init());
    *optimizer = taken
        .load(path)
        .map_err(|e| Error::model(path, format!("cannot load optimiser state: {e:?}")))?;
    Ok(())
}

/// Writes `optimizer`'s state to `path`.
fn save_optimizer(optimizer: &ModuleOptimizer, path: &std::path::Path) -> Result<()> {
    optimizer.save(path).map_err(|e| {
        let detail = std::io::Error::other(format!("{e:?}"));
        Error::io(path, "save optimiser state", detail)
    })
}

#[cfg(test)]
mod tests {
    use nertrain_data::{Casing, Encoded};
    use nertrain_model::{CharFeatures, NetworkConfig, VocabSizes};

    use super::*;

    fn sentence(words: &[usize], tags: &[usize]) -> Encoded {
        Encoded {
            words: words.to_vec(),
            chars: words.iter().map(|&w| vec![w % 5; 2]).collect(),
            casing: words.iter().map(|&w| w % Casing::COUNT).collect(),
            mentions: vec![1; words.len()],
            tags: tags.to_vec(),
            allowed: Vec::new(),
            dictionary: Vec::new(),
            features: Vec::new(),
            windows: Vec::new(),
            encoder_states: Vec::new(),
            teacher: None,
        }
    }

    /// 12 words, 6 characters and 3 tags, and `encoder` when given.
    fn small_sizes(encoder: Option<nertrain_model::encoder::EncoderConfig>) -> VocabSizes {
        VocabSizes {
            words: 12,
            chars: 6,
            tags: 3,
            lm_words: 0,
            dictionary_labels: 0,
            features: Vec::new(),
            encoder,
        }
    }

    fn values(t: Tensor<2>) -> Vec<f32> {
        t.into_data().iter::<f32>().collect()
    }

    /// The row-sparse word update trains the same model as Burn's dense optimiser over all
    /// parameters (a casing embedding among them), momentum and clipping included.
    #[test]
    fn steps_equal_the_dense_optimiser() {
        let device = Device::default().autodiff();
        device.seed(3);
        let sizes = small_sizes(None);
        let model = NetworkConfig::new()
            .with_word_dim(4)
            .with_hidden(3)
            .with_char_features(CharFeatures::None)
            .with_casing_dim(2)
            .with_dropout(0.0)
            .init(&sizes, &device);
        let sentences = [
            sentence(&[2, 3, 2, 5], &[0, 1, 2, 0]),
            sentence(&[4, 2], &[1, 0]),
            sentence(&[7, 8, 9], &[0, 0, 1]),
            sentence(&[10, 3], &[2, 0]),
        ];
        let batches = [vec![0, 1], vec![2, 3], vec![1, 3], vec![0, 2], vec![1, 2]];
        // A small limit, so that clipping acts.
        let clip = 0.5;
        let (mut trainer, mut sparse) = Trainer::new(
            model.clone(),
            UpdateRule::sgd(0.9),
            clip,
            Reduction::Sum,
            None,
        );
        let mut dense_optimizer = SgdConfig::new()
            .with_momentum(Some(
                MomentumConfig::new().with_momentum(0.9).with_dampening(0.0),
            ))
            .init();
        let mut dense = model;
        let mut clipped_steps = 0;
        for (step, indices) in batches.iter().enumerate() {
            let lr = if step < 3 { 0.1 } else { 0.05 };
            let batch = Batch::new(&sentences, indices.clone(), 10);
            sparse = trainer
                .step(sparse, &batch, lr, &device)
                .expect("a training batch")
                .0;

            let inputs = BatchTensors::new(&batch, &device);
            let loss = dense
                .loss(
                    &inputs,
                    dense.words.forward(inputs.words.clone()),
                    Reduction::Sum,
                    None,
                    0.0,
                )
                .expect("a training batch");
            let mut grads = GradientsParams::from_grads(loss.backward(), &dense);
            let factor = clip_factor(squared_norm(&dense, &grads).sqrt(), clip);
            clipped_steps += usize::from(factor < 1.0);
            scale(&dense, &mut grads, factor);
            dense = dense_optimizer.step(lr, dense, grads);
        }
        assert!(clipped_steps > 0, "clipping acted");
        let sparse = trainer.with_trained_words(&sparse);
        let batch = Batch::new(&sentences, vec![0, 1, 2, 3], 10);
        let inputs = BatchTensors::new(&batch, &device);
        for (name, a, b) in [
            (
                "word table",
                values(sparse.words.weight.val()),
                values(dense.words.weight.val()),
            ),
            (
                "emissions",
                values(sparse.emissions(&inputs).reshape([4 * 4, 3])),
                values(dense.emissions(&inputs).reshape([4 * 4, 3])),
            ),
        ] {
            for (x, y) in a.iter().zip(&b) {
                assert!((x - y).abs() < 1e-5, "{name}: {a:?} vs {b:?}");
            }
        }
    }

    /// A frozen encoder's weights stay as the checkpoint has them while its layers' mix learns;
    /// a fine-tuned one's move, at its own rate.
    #[test]
    fn a_frozen_encoder_stays_and_a_fine_tuned_one_learns() {
        use nertrain_data::SubwordTokenizer;
        use nertrain_model::encoder::{EncoderConfig, Tuning, load_checkpoint};

        let checkpoint =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/encoders/bert");
        let encoder = EncoderConfig::read(&checkpoint).unwrap();
        let tokenizer = SubwordTokenizer::from_file(&checkpoint.join("tokenizer.json")).unwrap();
        let words: [&[&str]; 2] = [
            &["Peter", "lives", "in", "Berlin"],
            &["EU", "rejects", "it"],
        ];
        let mut sentences = vec![
            sentence(&[2, 3, 4, 5], &[1, 0, 0, 2]),
            sentence(&[6, 7, 8], &[2, 0, 0]),
        ];
        tokenizer
            .set_windows(&mut sentences, &words, &[], encoder.max_positions)
            .unwrap();
        let batch = Batch::new(&sentences, vec![0, 1], 10);
        let sizes = small_sizes(Some(encoder.clone()));
        let embeddings = |model: &Network| {
            values(
                model
                    .pretrained
                    .as_ref()
                    .unwrap()
                    .encoder
                    .embeddings
                    .word_embeddings
                    .weight
                    .val(),
            )
        };
        let mix = |model: &Network| {
            model
                .pretrained
                .as_ref()
                .unwrap()
                .mix
                .val()
                .into_data()
                .iter::<f32>()
                .collect::<Vec<_>>()
        };
        for tuning in [Tuning::Frozen, Tuning::FineTune] {
            let device = Device::default().autodiff();
            device.seed(5);
            let mut model = NetworkConfig::new()
                .with_word_dim(4)
                .with_hidden(3)
                .with_char_features(CharFeatures::None)
                .with_pretrained_tuning(tuning)
                .init(&sizes, &device);
            let mut pretrained = model.pretrained.take().unwrap();
            pretrained.encoder =
                load_checkpoint(pretrained.encoder, &encoder, &checkpoint).unwrap();
            model.pretrained = Some(pretrained);
            let (before, mix_before) = (embeddings(&model), mix(&model));
            let (mut trainer, mut model) =
                Trainer::new(model, UpdateRule::sgd(0.9), 5.0, Reduction::Sum, None);
            if tuning == Tuning::FineTune {
                trainer = trainer.with_encoder_update(0.01);
                trainer.set_encoder_lr(1e-3);
            }
            for _ in 0..3 {
                model = trainer.step(model, &batch, 0.1, &device).unwrap().0;
            }
            assert_ne!(mix(&model), mix_before, "{tuning:?}: the mix learns");
            match tuning {
                Tuning::Frozen => assert_eq!(embeddings(&model), before),
                Tuning::FineTune => assert_ne!(embeddings(&model), before),
            }
        }
    }
}
