//! Each encoder family computes what `transformers` computes for the same checkpoint: tiny random
//! checkpoints and their hidden states, made by `scripts/encoders/make_fixtures.py`, loaded here
//! and compared on every real position of a padded batch, layer by layer. Checkpoints that are
//! not what their `config.json` says are refused with a message naming the file.

use std::path::{Path, PathBuf};

use burn::store::ModuleSnapshot;
use burn::tensor::{DType, Device, Int, Tensor, TensorData};
use nertrain_data::SubwordTokenizer;
use nertrain_model::encoder::{EncoderConfig, check_tokenizer, load_checkpoint};
use serde::Deserialize;
use tempfile::TempDir;

/// Within what each value must agree.
const TOLERANCE: f32 = 1e-5;

#[derive(Deserialize)]
struct Expected {
    sentences: Vec<Sentence>,
}

#[derive(Deserialize)]
struct Sentence {
    ids: Vec<i64>,
    /// `[layers + 1][sub-tokens][hidden]`
    hidden_states: Vec<Vec<Vec<f32>>>,
}

fn fixture(family: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/encoders")
        .join(family)
}

fn expected(dir: &Path) -> Expected {
    let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The largest difference between what the encoder computes and what `transformers` recorded
/// for each sentence on its own (nertrain computes no padding): each sentence a batch of one,
/// and all sentences packed into one call.
fn largest_difference(family: &str) -> f32 {
    largest_difference_from(&fixture(family), &expected(&fixture(family)))
}

/// [`largest_difference`] for the checkpoint in `dir`, against `expected`.
fn largest_difference_from(dir: &Path, expected: &Expected) -> f32 {
    let device = Device::default();
    let config = EncoderConfig::read(dir).unwrap();
    let encoder = load_checkpoint(config.init(&device), &config, dir).unwrap();
    let ids = |values: Vec<i64>| {
        let n = values.len();
        Tensor::<1, Int>::from_data(TensorData::new(values, [n]), &device)
    };
    // `[layers + 1][rows × hidden]` against the sentences' rows laid end to end.
    let largest_of = |states: Vec<Vec<f32>>, sentences: &[Sentence]| {
        assert_eq!(states.len(), config.layers + 1);
        let mut largest = 0f32;
        for (layer, values) in states.iter().enumerate() {
            let want = sentences
                .iter()
                .flat_map(|s| s.hidden_states[layer].iter().flatten());
            assert_eq!(want.clone().count(), values.len());
            for (g, w) in values.iter().zip(want) {
                largest = largest.max((g - w).abs());
            }
        }
        largest
    };
    let mut largest = 0f32;
    for sentence in &expected.sentences {
        let len = sentence.ids.len();
        let batch = ids(sentence.ids.clone()).reshape([1, len]);
        let states = encoder
            .hidden_states(batch)
            .into_iter()
            .map(nertrain_model::host_values);
        largest = largest.max(largest_of(states.collect(), std::slice::from_ref(sentence)));
    }
    if nertrain_model::encoder::fused::has_fused(&device) {
        let all: Vec<i64> = expected
            .sentences
            .iter()
            .flat_map(|s| s.ids.clone())
            .collect();
        let lengths: Vec<usize> = expected.sentences.iter().map(|s| s.ids.len()).collect();
        let words = encoder.word_embeddings(&[ids(all)]).remove(0);
        let states = encoder.packed_hidden_states(words, &lengths);
        let states = states
            .into_iter()
            .map(nertrain_model::host_values)
            .collect();
        largest = largest.max(largest_of(states, &expected.sentences));
    }
    largest
}

#[test]
fn bert_matches_transformers() {
    let difference = largest_difference("bert");
    assert!(difference < TOLERANCE, "largest difference {difference}");
}

#[test]
fn bert_from_pytorchs_own_file_matches_transformers() {
    let dir = fixture("bert-bin");
    assert!(dir.join("pytorch_model.bin").is_file());
    assert!(!dir.join("model.safetensors").exists());
    let difference = largest_difference_from(&dir, &expected(&fixture("bert")));
    assert!(difference < TOLERANCE, "largest difference {difference}");
}

/// A `pytorch_model.bin` in half or double precision (`scripts/encoders/cast_bin.py` made
/// them from `bert-bin`) is read as f32, which is what a model file stores and its loader reads,
/// and computes what the f32 file does within the precision it was stored in.
#[test]
fn pytorch_files_in_every_precision_are_read_as_f32() {
    for (name, tolerance) in [
        ("bert-bin-f16", 2e-2),
        ("bert-bin-bf16", 1e-1),
        ("bert-bin-f64", TOLERANCE),
    ] {
        let dir = fixture(name);
        let config = EncoderConfig::read(&dir).unwrap();
        let encoder = load_checkpoint(config.init(&Device::default()), &config, &dir).unwrap();
        for tensor in encoder.collect(None, None, false) {
            assert_eq!(
                tensor.dtype,
                DType::F32,
                "{name}: {} is {:?}",
                tensor.name,
                tensor.dtype
            );
        }
        let difference = largest_difference_from(&dir, &expected(&fixture("bert")));
        assert!(
            difference < tolerance,
            "{name}: largest difference {difference}"
        );
    }
}

#[test]
fn distilbert_matches_transformers() {
    let difference = largest_difference("distilbert");
    assert!(difference < TOLERANCE, "largest difference {difference}");
}

#[test]
fn roberta_matches_transformers() {
    let difference = largest_difference("roberta");
    assert!(difference < TOLERANCE, "largest difference {difference}");
}

/// The BERT fixture's tokenizer, its `tokenizer.json` changed by `edit`, in `dir`.
fn edited_tokenizer(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) -> SubwordTokenizer {
    let text = std::fs::read_to_string(fixture("bert").join("tokenizer.json")).unwrap();
    let mut file: serde_json::Value = serde_json::from_str(&text).unwrap();
    edit(&mut file);
    let path = dir.join("tokenizer.json");
    std::fs::write(&path, file.to_string()).unwrap();
    SubwordTokenizer::from_file(&path).unwrap()
}

/// Special sub-tokens that the post-processor puts around each input, with ids past the
/// encoder's embeddings, are refused naming the sub-token, as a vocabulary past them is.
#[test]
fn special_sub_tokens_past_the_embeddings_are_refused() {
    let config = EncoderConfig::read(&fixture("bert")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tokenizer = edited_tokenizer(dir.path(), |file| {
        file["post_processor"]["special_tokens"]["[CLS]"]["ids"] = serde_json::json!([99999]);
    });
    let message = check_tokenizer(&config, &tokenizer).unwrap_err();
    assert!(message.contains("\"[CLS]\" id 99999"), "{message}");
    assert!(message.contains("ids 0–119"), "{message}");
    let tokenizer = edited_tokenizer(dir.path(), |_| {});
    assert_eq!(check_tokenizer(&config, &tokenizer), Ok(()));
}

/// An encoder with no more positions than the special sub-tokens around each input has no room
/// for a word: refused with the arithmetic, where windows would not fit.
#[test]
fn positions_that_leave_no_room_for_a_word_are_refused() {
    let tokenizer = SubwordTokenizer::from_file(&fixture("bert").join("tokenizer.json")).unwrap();
    let mut config = EncoderConfig::read(&fixture("bert")).unwrap();
    for positions in [1, 2] {
        config.max_positions = positions;
        let message = check_tokenizer(&config, &tokenizer).unwrap_err();
        assert!(message.contains("2 special sub-tokens"), "{message}");
        assert!(
            message.contains(&format!("reads {positions} positions")),
            "{message}"
        );
        assert!(message.contains("at least 3"), "{message}");
    }
    config.max_positions = 3;
    assert_eq!(check_tokenizer(&config, &tokenizer), Ok(()));
}

/// A copy of the BERT fixture in a fresh directory, its `config.json` changed by `edit`.
fn edited_checkpoint(name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> TempDir {
    let dir = tempfile::Builder::new()
        .prefix(&format!("nertrain-encoder-{name}-"))
        .tempdir()
        .unwrap();
    let source = fixture("bert");
    for file in ["model.safetensors", "tokenizer.json"] {
        std::fs::copy(source.join(file), dir.path().join(file)).unwrap();
    }
    let text = std::fs::read_to_string(source.join("config.json")).unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&text).unwrap();
    edit(&mut config);
    std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
    dir
}

/// What loading checkpoint `dir` says, which must be an error.
fn refusal(dir: &Path) -> String {
    let device = Device::default();
    let config = match EncoderConfig::read(dir) {
        Ok(config) => config,
        Err(e) => return e.to_string(),
    };
    match load_checkpoint(config.init(&device), &config, dir) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_family_nertrain_does_not_read_is_refused() {
    let dir = edited_checkpoint("gpt2", |c| c["model_type"] = "gpt2".into());
    let message = refusal(dir.path());
    assert!(message.contains("config.json"), "{message}");
    assert!(message.contains("\"gpt2\""), "{message}");
}

#[test]
fn a_tensor_of_another_shape_is_refused() {
    let dir = edited_checkpoint("shape", |c| c["intermediate_size"] = 38.into());
    let message = refusal(dir.path());
    assert!(message.contains("model.safetensors"), "{message}");
    assert!(message.contains("linear_inner"), "{message}");
    assert!(message.contains("do not fit"), "{message}");
}

#[test]
fn a_missing_tensor_is_refused() {
    let dir = edited_checkpoint("missing", |c| c["num_hidden_layers"] = 3.into());
    let message = refusal(dir.path());
    assert!(message.contains("model.safetensors"), "{message}");
    assert!(message.contains("missing"), "{message}");
    assert!(message.contains("encoder.layers.2."), "{message}");
}

#[test]
fn a_damaged_weights_file_is_refused() {
    let dir = edited_checkpoint("damaged", |_| {});
    let weights = dir.path().join("model.safetensors");
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    let message = refusal(dir.path());
    assert!(message.contains("model.safetensors"), "{message}");
    assert!(message.contains("not a readable weights file"), "{message}");
}

#[test]
fn a_checkpoint_without_weights_is_refused() {
    let dir = edited_checkpoint("none", |_| {});
    std::fs::remove_file(dir.path().join("model.safetensors")).unwrap();
    let message = refusal(dir.path());
    assert!(message.contains("no weights"), "{message}");
    assert!(message.contains("pytorch_model.bin"), "{message}");
}

#[test]
fn absurd_sizes_are_refused_before_anything_is_allocated() {
    for (field, value) in [("hidden_size", 1u64 << 40), ("vocab_size", 0)] {
        let dir = edited_checkpoint(field, |c| c[field] = value.into());
        let message = refusal(dir.path());
        assert!(message.contains(field), "{message}");
    }
    let dir = edited_checkpoint("huge", |c| {
        c["vocab_size"] = (1u64 << 20).into();
        c["hidden_size"] = (1u64 << 16).into();
    });
    let message = refusal(dir.path());
    assert!(message.contains("parameters"), "{message}");
}

/// Sizes within bounds but far beyond the weights file (a two-layer checkpoint said to have a
/// hundred thousand layers, or more positions than it has) are refused from the file's tensor
/// names and shapes, before an encoder of those sizes is built.
#[test]
fn sizes_beyond_the_weights_are_refused_before_the_encoder_is_built() {
    let cases = [
        (
            "num_hidden_layers",
            100_000,
            "describes 100000 layers, the weights hold 2",
        ),
        (
            "max_position_embeddings",
            4096,
            "position_embeddings.weight is [64, 32] in the file, [4096, 32] by config.json",
        ),
        (
            "vocab_size",
            50_000,
            "word_embeddings.weight is [120, 32] in the file, [50000, 32] by config.json",
        ),
    ];
    for (field, value, expected) in cases {
        let dir = edited_checkpoint(field, |c| c[field] = value.into());
        let started = std::time::Instant::now();
        let message = EncoderConfig::read(dir.path()).unwrap_err().to_string();
        assert!(message.contains(expected), "{message}");
        assert!(message.contains("model.safetensors"), "{message}");
        assert!(
            started.elapsed().as_secs_f64() < 1.0,
            "{:?}",
            started.elapsed()
        );
    }
}

/// A pickle whose state dict holds a call of `posix.system` where a tensor should be: refused
/// naming the call, which is never run.
#[test]
fn a_pickle_holding_a_call_is_refused_naming_it() {
    let dir = edited_checkpoint("call", |_| {});
    std::fs::remove_file(dir.path().join("model.safetensors")).unwrap();
    let witness = dir.path().join("ran");
    let command = format!("touch {}", witness.display());
    let string = |text: &str| {
        let mut bytes = vec![b'X'];
        bytes.extend((text.len() as u32).to_le_bytes());
        bytes.extend(text.as_bytes());
        bytes
    };
    // protocol 2: {"bert.embeddings.word_embeddings.weight": posix.system(command)}
    let mut pickle = b"\x80\x02}".to_vec();
    pickle.extend(string("bert.embeddings.word_embeddings.weight"));
    pickle.extend(b"cposix\nsystem\n");
    pickle.extend(string(&command));
    pickle.extend(b"\x85Rs.");
    std::fs::write(dir.path().join("pytorch_model.bin"), pickle).unwrap();
    let message = refusal(dir.path());
    assert!(message.contains("pytorch_model.bin"), "{message}");
    assert!(
        message.contains("something other than tensors: posix.system"),
        "{message}"
    );
    assert!(!witness.exists());
}
