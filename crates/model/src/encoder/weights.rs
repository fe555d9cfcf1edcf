//! A checkpoint's weights into a [`PretrainedEncoder`]: Hugging Face's names mapped to the
//! module's, PyTorch's layouts to Burn's (linear weights transposed, layer norms' `weight` and
//! `bias` as `gamma` and `beta`), half precision cast to f32. A tensor the encoder needs that
//! the file lacks, or has in another shape, is an error naming it; what the encoder does not use
//! (a pooler, `position_ids`, a task head) is left.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use burn::store::{
    ApplyResult, FloatCastAdapter, KeyRemapper, ModuleAdapter, ModuleSnapshot, ModuleStore,
    PyTorchToBurnAdapter, PytorchStore, SafetensorsStore,
};
use burn::tensor::DType;

use super::{EncoderConfig, Family, PretrainedEncoder};
use crate::FileError;

/// The weight files a checkpoint may hold, in the order they are looked for.
const WEIGHT_FILES: [&str; 2] = ["model.safetensors", "pytorch_model.bin"];

/// How many names of tensors an error lists before it says how many more there are.
const LISTED: usize = 5;

/// The weights file of checkpoint `dir`, the first of [`WEIGHT_FILES`] it holds.
pub fn weights_file(dir: &Path) -> Result<PathBuf, FileError> {
    WEIGHT_FILES
        .iter()
        .map(|name| dir.join(name))
        .find(|path| path.is_file())
        .ok_or_else(|| {
            FileError::invalid(
                dir,
                format!(
                    "no weights: expected {} in the checkpoint directory",
                    WEIGHT_FILES.join(" or ")
                ),
            )
        })
}

/// Whether the weights file of checkpoint `dir` holds an encoder of the sizes `config` gives
/// (its embeddings, its number of layers and their feed-forward width), read from the file's
/// tensor names and shapes alone: checked before an encoder of those sizes is built, which a
/// `config.json` far beyond its weights would make cost gigabytes first.
pub(super) fn check_sizes(config: &EncoderConfig, dir: &Path) -> Result<(), FileError> {
    let path = weights_file(dir)?;
    let shapes = tensor_shapes(&path, config.family)?;
    let invalid = |message: String| FileError::invalid(&path, message);
    let (hidden, offset) = (config.hidden, config.position_offset());
    let expected = [
        (
            "embeddings.word_embeddings.weight",
            [config.vocab_size, hidden],
        ),
        (
            "embeddings.position_embeddings.weight",
            [config.max_positions + offset, hidden],
        ),
        // PyTorch's layout: [out, in].
        (
            "encoder.layers.0.pwff.linear_inner.weight",
            [config.intermediate, hidden],
        ),
    ];
    for (name, shape) in expected {
        match shapes.get(name) {
            Some(found) if found[..] == shape[..] => {}
            Some(found) => {
                return Err(invalid(format!(
                    "weights that do not fit the encoder config.json describes: {name} is \
                     {found:?} in the file, {shape:?} by config.json"
                )));
            }
            None => {
                return Err(invalid(tensors_missing(name, &path)));
            }
        }
    }
    let layers = shapes
        .keys()
        .filter_map(|name| {
            name.strip_prefix("encoder.layers.")?
                .split('.')
                .next()?
                .parse()
                .ok()
        })
        .max()
        .map_or(0, |last: usize| last + 1);
    let counted = format!(
        "config.json describes {} layers, the weights hold {layers}",
        config.layers
    );
    if config.layers > layers {
        return Err(invalid(tensors_missing(
            &format!("encoder.layers.{layers}. and on ({counted})"),
            &path,
        )));
    }
    if config.layers < layers {
        return Err(invalid(format!(
            "weights that do not fit the encoder config.json describes: {counted}"
        )));
    }
    Ok(())
}

/// The shape of every tensor of the weights file at `path`, by Burn's names; no values read.
fn tensor_shapes(path: &Path, family: Family) -> Result<BTreeMap<String, Vec<usize>>, FileError> {
    let remapper = key_remapper(family);
    if path.extension().is_some_and(|e| e == "bin") {
        shapes_in(&mut PytorchStore::from_file(path).remap(remapper), path)
    } else {
        shapes_in(&mut SafetensorsStore::from_file(path).remap(remapper), path)
    }
}

fn shapes_in<S: ModuleStore>(
    store: &mut S,
    path: &Path,
) -> Result<BTreeMap<String, Vec<usize>>, FileError> {
    let tensors = store
        .get_all_tensors()
        .map_err(|e| FileError::invalid(path, format!("not a readable weights file: {e}")))?;
    Ok((tensors.iter())
        .map(|(name, tensor)| (name.clone(), tensor.shape.as_slice().to_vec()))
        .collect())
}

/// `encoder` (built from `config`) with the weights of checkpoint `dir`.
pub fn load_checkpoint(
    mut encoder: PretrainedEncoder,
    config: &EncoderConfig,
    dir: &Path,
) -> Result<PretrainedEncoder, FileError> {
    let path = weights_file(dir)?;
    let remapper = key_remapper(config.family);
    let result = if path.extension().is_some_and(|e| e == "bin") {
        // Burn's PyTorch store maps the layouts but keeps each tensor's precision, so its
        // tensors are applied here, through the same adapters as a safetensors file's.
        let mut store = PytorchStore::from_file(&path).remap(remapper);
        let tensors = store
            .get_all_tensors()
            .map_err(|e| FileError::invalid(&path, format!("not a readable weights file: {e}")))?
            .values()
            .cloned()
            .collect();
        encoder.apply(tensors, None, Some(Box::new(to_f32())), false)
    } else {
        let mut store = SafetensorsStore::from_file(&path)
            .remap(remapper)
            .with_from_adapter(to_f32())
            .validate(false)
            .allow_partial(true);
        apply(&mut encoder, &mut store).map_err(|message| FileError::invalid(&path, message))?
    };
    check(&result, &path).map_err(|message| FileError::invalid(&path, message))?;
    Ok(encoder)
}

/// The refusal of weights file `path` that lacks the tensors `missing` names.
fn tensors_missing(missing: &str, path: &Path) -> String {
    format!(
        "tensors missing for the encoder config.json describes (by Burn's names): {missing}{}",
        not_tensors(path)
    )
}

/// Where a PyTorch pickle lacks tensors, what it holds in their place that is not one (a call
/// such as `os.system`, or another Python object: read as its name, never run), as a note to
/// the refusal; empty for a safetensors file, or a pickle of plain data and tensors.
fn not_tensors(path: &Path) -> String {
    use burn::store::pytorch_reader::{PickleValue, PytorchReader};
    fn walk(value: &PickleValue, found: &mut BTreeSet<String>) {
        match value {
            PickleValue::Unsupported(name) if !TENSOR_TYPES.contains(&name.as_str()) => {
                found.insert(name.clone());
            }
            PickleValue::List(items) => items.iter().for_each(|v| walk(v, found)),
            PickleValue::Dict(entries) => entries.values().for_each(|v| walk(v, found)),
            _ => {}
        }
    }
    if path.extension().is_none_or(|e| e != "bin") {
        return String::new();
    }
    let Ok(root) = PytorchReader::read_pickle_data(path, None) else {
        return String::new();
    };
    let mut found = BTreeSet::new();
    walk(&root, &mut found);
    if found.is_empty() {
        return String::new();
    }
    let names: Vec<&str> = found.iter().take(LISTED).map(String::as_str).collect();
    format!(
        "; the file holds something other than tensors: {} (a Python call or object, read by \
         its name and never run; a weights file is a state dict of tensors)",
        names.join(", ")
    )
}

/// The Python types the reader names tensors and their storages by.
const TENSOR_TYPES: [&str; 4] = [
    "torch.Tensor",
    "torch.TypedStorage",
    "torch.UntypedStorage",
    "torch.nn.Parameter",
];

/// PyTorch's layouts to Burn's, and every precision a checkpoint may hold (f16, bf16, f64) to
/// f32, which is what the model file stores and its loader reads.
fn to_f32() -> impl ModuleAdapter {
    PyTorchToBurnAdapter.chain(FloatCastAdapter::to(DType::F32))
}

fn apply<S: ModuleStore>(
    encoder: &mut PretrainedEncoder,
    store: &mut S,
) -> Result<ApplyResult, String> {
    encoder
        .load_from(store)
        .map_err(|e| format!("not a readable weights file: {e}"))
}

/// Whether every tensor the encoder needs came, in its shape.
fn check(result: &ApplyResult, path: &Path) -> Result<(), String> {
    if let Some(error) = result.errors.first() {
        let more = result.errors.len() - 1;
        let more = if more > 0 {
            format!(" (and {more} more)")
        } else {
            String::new()
        };
        return Err(format!(
            "weights that do not fit the encoder config.json describes: {error}{more}"
        ));
    }
    if !result.missing.is_empty() {
        let names: Vec<&str> = result
            .missing
            .iter()
            .take(LISTED)
            .map(|(name, _)| name.as_str())
            .collect();
        let more = result.missing.len().saturating_sub(LISTED);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        return Err(tensors_missing(
            &format!("{}{more}", names.join(", ")),
            path,
        ));
    }
    Ok(())
}

/// Hugging Face's tensor names to the module's, for `family`; patterns apply in order.
fn key_remapper(family: Family) -> KeyRemapper {
    let prefix = (r"^(bert|roberta|distilbert|xlm_roberta|xlm-roberta)\.", "");
    let patterns: Vec<(&str, &str)> = match family {
        Family::Distilbert => vec![
            prefix,
            (r"^transformer\.layer\.(\d+)\.", "encoder.layers.$1."),
            (r"\.attention\.q_lin\.", ".mha.query."),
            (r"\.attention\.k_lin\.", ".mha.key."),
            (r"\.attention\.v_lin\.", ".mha.value."),
            (r"\.attention\.out_lin\.", ".mha.output."),
            (r"\.sa_layer_norm\.", ".norm_1."),
            (r"\.ffn\.lin1\.", ".pwff.linear_inner."),
            (r"\.ffn\.lin2\.", ".pwff.linear_outer."),
            (r"\.output_layer_norm\.", ".norm_2."),
            (r"^embeddings\.LayerNorm\.", "embeddings.layer_norm."),
        ],
        Family::Bert | Family::Roberta | Family::XlmRoberta => vec![
            prefix,
            (r"^encoder\.layer\.(\d+)\.", "encoder.layers.$1."),
            (r"\.attention\.self\.(query|key|value)\.", ".mha.$1."),
            (r"\.attention\.output\.dense\.", ".mha.output."),
            (r"\.attention\.output\.LayerNorm\.", ".norm_1."),
            (r"\.intermediate\.dense\.", ".pwff.linear_inner."),
            (r"\.output\.dense\.", ".pwff.linear_outer."),
            (r"\.output\.LayerNorm\.", ".norm_2."),
            (r"^embeddings\.LayerNorm\.", "embeddings.layer_norm."),
        ],
    };
    KeyRemapper::from_patterns(patterns).expect("the key patterns are valid regexes")
}
