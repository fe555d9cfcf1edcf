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
    let sizes = |s: &VocabSizes| [s.words, s.chars, s.tags, s.lm_words];
    let growth = sizes(old_sizes).into_iter().zip(sizes(new_sizes)).collect();
    take_weights(model, old, Some(growth))
}

/// `fresh` with the weights of `loaded`, a module built alike (read on another device, say),
/// as if they had been read into it from a file: each parameter keeps its id, device and whether
/// it is tracked, and its own random initialisation never runs (so draws nothing from the
/// seeded generator the rest of the model initialises from).
pub fn with_weights_of<M: Module>(fresh: M, loaded: &M) -> Result<M, GrowError> {
    take_weights(fresh, loaded, None)
}

/// `model` with the weights of `old`: grown into `model`'s where `growth` is given (see
/// [`Taker::growth`]), taken whole where not.
fn take_weights<M: Module>(
    model: M,
    old: &M,
    growth: Option<Vec<(usize, usize)>>,
) -> Result<M, GrowError> {
    let mut collector = Collector::default();
    old.visit(&mut collector);
    let mut taker = Taker {
        growth,
        old: collector.values.into_iter(),
        index: 0,
        error: None,
    };
    let model = model.map(&mut taker);
    if let Some(error) = taker.error {
        return Err(error);
    }
    if let Some(extra) = taker.old.next() {
        return Err(GrowError {
            index: taker.index,
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

/// Gives each parameter, in the modules' order, the next of `old`'s values.
struct Taker {
    /// How each vocabulary's size changed, `(old, new)`: the only changes an axis may show, the
    /// old values written over the fresh ones where they overlap. `None`: every shape the same,
    /// and the old values taken in place of the fresh ones, never initialised.
    growth: Option<Vec<(usize, usize)>>,
    old: std::vec::IntoIter<TensorData>,
    index: usize,
    error: Option<GrowError>,
}

impl Taker {
    /// Why `old` cannot be grown into a parameter of `new` shape, if it cannot.
    fn misfit(&self, old: &[usize], new: &[usize]) -> Option<&'static str> {
        let Some(growth) = &self.growth else {
            return (old != new).then_some("another architecture");
        };
        if old.len() != new.len() {
            return Some("another number of axes");
        }
        if old.iter().zip(new).any(|(o, n)| o > n) {
            return Some("it would shrink");
        }
        let grew = |(&o, &n): (&usize, &usize)| o == n || growth.contains(&(o, n));
        (!old.iter().zip(new).all(grew)).then_some("another architecture")
    }
}

impl ModuleMapper for Taker {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let index = self.index;
        self.index += 1;
        if self.error.is_some() {
            return param;
        }
        let new_shape = match self.growth {
            Some(_) => param.dims().to_vec(),
            None => param.lazy_shape().to_vec(),
        };
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
        if let Some(why) = self.misfit(&old_shape, &new_shape) {
            self.error = Some(fail(old_shape, why));
            return param;
        }
        if self.growth.is_none() {
            let (id, device) = (param.id, param.lazy_device());
            return param.transform_for_load(Tensor::from_data(old, &device), id);
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
