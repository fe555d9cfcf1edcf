//! Continuing a trained model on more data: a model built for grown vocabularies (new words,
//! characters and tags appended after the old ones) starts from the old model's weights. Every
//! parameter the two share keeps the old values in the block they overlap — the old words'
//! rows, the old tags' emission columns and transitions — and only what is new keeps its fresh
//! initialisation.

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::{Tensor, TensorData};

use crate::{Network, VocabSizes};

/// Why an old model's weights do not fit a new one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "parameter {index} of the model is {new:?} here but {old:?} in the model started from: {why}"
)]
pub struct GrowError {
    /// Which parameter, in the modules' order.
    pub index: usize,
    /// Its shape in the old model.
    pub old: Vec<usize>,
    /// Its shape in the new one.
    pub new: Vec<usize>,
    /// What does not fit.
    pub why: &'static str,
}

/// `model` (fresh, for vocabularies of `new_sizes` that extend `old`'s of `old_sizes`) with
/// `old`'s weights in every block they share. The architectures must be the same: the same
/// parameters in the same order, differing only along axes sized by a vocabulary that grew.
pub fn grown_from(
    model: Network,
    new_sizes: &VocabSizes,
    old: &Network,
    old_sizes: &VocabSizes,
) -> Result<Network, GrowError> {
    let mut collector = Collector::default();
    old.visit(&mut collector);
    let sizes = |s: &VocabSizes| [s.words, s.chars, s.tags, s.lm_words];
    let mut grower = Grower {
        growth: sizes(old_sizes).into_iter().zip(sizes(new_sizes)).collect(),
        old: collector.values.into_iter(),
        index: 0,
        error: None,
    };
    let model = model.map(&mut grower);
    if let Some(error) = grower.error {
        return Err(error);
    }
    if let Some(extra) = grower.old.next() {
        return Err(GrowError {
            index: grower.index,
            old: extra.shape().to_vec(),
            new: Vec::new(),
            why: "the model started from has more parameters",
        });
    }
    Ok(model)
}

/// The first parameter of `model` (in the modules' order) holding a value that is not finite:
/// weights that no training could have written, damaged on disk.
pub fn first_non_finite(model: &Network) -> Option<usize> {
    let mut collector = Collector::default();
    model.visit(&mut collector);
    collector
        .values
        .iter()
        .position(|data| data.iter::<f64>().any(|v| !v.is_finite()))
}

#[derive(Default)]
struct Collector {
    values: Vec<TensorData>,
}

impl ModuleVisitor for Collector {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.values.push(param.val().into_data());
    }
}

struct Grower {
    /// How each vocabulary's size changed, `(old, new)`: the only changes an axis may show.
    growth: Vec<(usize, usize)>,
    old: std::vec::IntoIter<TensorData>,
    index: usize,
    error: Option<GrowError>,
}

impl ModuleMapper for Grower {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let index = self.index;
        self.index += 1;
        if self.error.is_some() {
            return param;
        }
        let new_shape = param.dims().to_vec();
        let fail = |old: Vec<usize>, why| GrowError {
            index,
            old,
            new: new_shape.clone(),
            why,
        };
        let Some(old) = self.old.next() else {
            self.error = Some(fail(
                Vec::new(),
                "the model started from has fewer parameters",
            ));
            return param;
        };
        let old_shape = old.shape().to_vec();
        if old_shape.len() != D {
            self.error = Some(fail(old_shape, "another number of axes"));
            return param;
        }
        if old_shape.iter().zip(&new_shape).any(|(o, n)| o > n) {
            self.error = Some(fail(old_shape, "it would shrink"));
            return param;
        }
        let grew = |(&o, &n): (&usize, &usize)| o == n || self.growth.contains(&(o, n));
        if !old_shape.iter().zip(&new_shape).all(grew) {
            self.error = Some(fail(old_shape, "another architecture"));
            return param;
        }
        param.map(|tensor| {
            let device = tensor.device();
            let tracked = tensor.is_require_grad();
            let ranges: Vec<std::ops::Range<usize>> = old_shape.iter().map(|&n| 0..n).collect();
            let grown = tensor
                .detach()
                .slice_assign(ranges.as_slice(), Tensor::from_data(old, &device));
            // A parameter is a leaf of the graph: the assignment must not be an operation on it.
            let leaf = Tensor::from_data(grown.into_data(), &device);
            if tracked { leaf.require_grad() } else { leaf }
        })
    }
}
