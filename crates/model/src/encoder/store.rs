//! A frozen encoder's layers kept on disk between commands: each sentence's layers at its words
//! ([`Encoded::encoder_states`]) in a file named by what they are computed from, so that runs
//! reading the same encoder over the same sentences (an experiment's seeds, the model trained on
//! train and dev after its selection run, the rounds of the annotation loop) compute each
//! sentence once.
//!
//! A store is a directory per encoder, named by a digest of its weights, its shape and the
//! backend that computes it (another backend may differ in the last digits); in it, one file
//! per sentence, named by a digest of its windows (sub-token ids, scored words and where each
//! word's first sub-token is). A file carries its key, its shape and a digest of its values
//! with the encoder and the key, and is read only if they, its length and the digest agree and
//! every value is finite: one cut short, of another sentence or encoder, edited, or not a
//! regular file is computed again, never read.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;
use nertrain_data::Encoded;
use sha2::{Digest, Sha256};

use super::PretrainedFeatures;
use crate::{Backend, FileError};

/// The start of every file of the store, before its format's version.
const MAGIC: &[u8; 8] = b"NTLAYERS";
/// The layout of a file (and of the digests that name it); another version is never read.
const VERSION: u32 = 2;
/// Magic, version, words, width, key, the values' digest.
const HEADER: usize = 8 + 4 + 4 + 4 + 32 + 32;

/// The files of one encoder's layers on one backend.
#[derive(Debug, Clone)]
pub struct LayerStore {
    dir: PathBuf,
    /// The digest of the encoder's weights, shape and backend, which names `dir`.
    encoder: [u8; 32],
    /// Values at each word: `(layers + 1) * hidden`.
    width: usize,
}

/// What is said when a store is named for a model whose encoder is fine-tuned, which it does not
/// serve: such an encoder's layers are the model's own and change as it trains.
pub fn fine_tuned_note(root: &Path) -> String {
    format!(
        "{}: the encoder is fine-tuned, so its layers change as it trains and none are kept \
         there; a layer store keeps a frozen encoder's (model.pretrained_tuning = \"frozen\")",
        root.display()
    )
}

/// What [`LayerStore::fill`] did.
#[derive(Debug, Default)]
pub struct Filled {
    /// How many sentences' layers were read from the store.
    pub read: usize,
    /// How many were computed (and written to it).
    pub computed: usize,
    /// The files that were there but could not be read, and why: they were computed again.
    pub unreadable: Vec<String>,
    /// Why the layers computed could not all be written, if so: the rest were not kept.
    pub unwritten: Option<FileError>,
}

impl Filled {
    /// What went wrong, as said to the user: each file computed again, and layers not kept.
    pub fn problems(self) -> Vec<String> {
        let unreadable = self.unreadable.into_iter();
        let mut problems: Vec<String> = unreadable
            .map(|why| format!("{why}; computed again"))
            .collect();
        if let Some(error) = self.unwritten {
            problems.push(format!("{error}: the encoder's layers are not kept"));
        }
        problems
    }
}

/// What [`LayerStore::load`] found.
#[derive(Debug, Default)]
struct Loaded {
    /// The sentences (by index) that had no file, or a file that could not be read.
    missing: Vec<usize>,
    /// The files that were there but could not be read, and why: they are computed again.
    unreadable: Vec<String>,
}

impl LayerStore {
    /// The store under `root` for `features`' encoder computed on `backend`; the directory is
    /// created when missing.
    pub fn open(
        root: &Path,
        features: &PretrainedFeatures,
        backend: Backend,
    ) -> Result<Self, FileError> {
        let width = features.layers() * features.hidden();
        let mut digest = Sha256::new();
        digest.update(VERSION.to_le_bytes());
        digest.update(backend.name().as_bytes());
        digest.update((width as u64).to_le_bytes());
        let mut weights = WeightDigest(digest);
        features.encoder.visit(&mut weights);
        let encoder: [u8; 32] = weights.0.finalize().into();
        let dir = root.join(hex(&encoder[..16]));
        std::fs::create_dir_all(&dir).map_err(|source| FileError::Io {
            path: dir.clone(),
            action: "create the encoder's layer store",
            source,
        })?;
        Ok(Self {
            dir,
            encoder,
            width,
        })
    }

    /// The directory of this encoder's files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Sets the layers at each word of `sentences`: read where the store has them, computed by
    /// `features` (its encoder, the one the store was opened for) and written where not.
    pub fn fill(
        &self,
        features: &PretrainedFeatures,
        sentences: &mut [Encoded],
        max_word_len: usize,
    ) -> Filled {
        let Loaded {
            missing,
            unreadable,
        } = self.load(sentences);
        features.cache_states(sentences, &missing, max_word_len);
        Filled {
            read: sentences.len() - missing.len(),
            computed: missing.len(),
            unreadable,
            unwritten: self.save(sentences, &missing).err(),
        }
    }

    /// Sets the layers of each of `sentences` that has a readable file.
    fn load(&self, sentences: &mut [Encoded]) -> Loaded {
        let mut loaded = Loaded::default();
        for (i, sentence) in sentences.iter_mut().enumerate() {
            let key = sentence_key(sentence);
            let path = self.path(&key);
            // Never more than the file's own length is read, and never from a FIFO or device.
            let length = (HEADER + sentence.len() * self.width * 4) as u64;
            match nertrain_data::io::read_regular(&path, length) {
                Ok(bytes) => match self.values(&bytes, &key, sentence.len()) {
                    Ok(values) => sentence.encoder_states = values,
                    Err(why) => {
                        loaded.unreadable.push(format!("{}: {why}", path.display()));
                        loaded.missing.push(i);
                    }
                },
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => loaded.missing.push(i),
                Err(e) => {
                    loaded.unreadable.push(format!("{}: {e}", path.display()));
                    loaded.missing.push(i);
                }
            }
        }
        loaded
    }

    /// Writes the layers of `sentences` at `indices`; the first file that cannot be written
    /// ends it, with the error (the files written are whole).
    fn save(&self, sentences: &[Encoded], indices: &[usize]) -> Result<(), FileError> {
        for &i in indices {
            let sentence = &sentences[i];
            debug_assert_eq!(sentence.encoder_states.len(), sentence.len() * self.width);
            let key = sentence_key(sentence);
            let mut bytes = Vec::with_capacity(HEADER + sentence.encoder_states.len() * 4);
            bytes.extend_from_slice(MAGIC);
            bytes.extend_from_slice(&VERSION.to_le_bytes());
            bytes.extend_from_slice(&(sentence.len() as u32).to_le_bytes());
            bytes.extend_from_slice(&(self.width as u32).to_le_bytes());
            bytes.extend_from_slice(&key);
            let values: Vec<u8> = (sentence.encoder_states.iter())
                .flat_map(|value| value.to_le_bytes())
                .collect();
            bytes.extend_from_slice(&self.values_digest(&key, &values));
            bytes.extend_from_slice(&values);
            let path = self.path(&key);
            write_renamed(&path, &bytes).map_err(|source| FileError::Io {
                path,
                action: "write",
                source,
            })?;
        }
        Ok(())
    }

    /// What binds a file's values to its sentence and this encoder.
    fn values_digest(&self, key: &[u8; 32], values: &[u8]) -> [u8; 32] {
        let mut digest = Sha256::new();
        digest.update(self.encoder);
        digest.update(key);
        digest.update(values);
        digest.finalize().into()
    }

    fn path(&self, key: &[u8; 32]) -> PathBuf {
        let name = hex(&key[..16]);
        self.dir.join(&name[..2]).join(&name[2..])
    }

    /// The values of a file read whole, or what is wrong with it.
    fn values(&self, bytes: &[u8], key: &[u8; 32], words: usize) -> Result<Vec<f32>, String> {
        let field = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        if bytes.len() < HEADER || &bytes[..8] != MAGIC {
            return Err("not a file of nertrain's encoder layers".into());
        }
        if field(8) != VERSION as usize {
            return Err(format!("format version {}, expected {VERSION}", field(8)));
        }
        if field(12) != words || field(16) != self.width || bytes[20..52] != key[..] {
            return Err(format!(
                "the layers of another sentence ({} words of {} values, expected {words} of {})",
                field(12),
                field(16),
                self.width
            ));
        }
        let expected = HEADER + words * self.width * 4;
        if bytes.len() != expected {
            return Err(format!("{} bytes, expected {expected}", bytes.len()));
        }
        if bytes[52..HEADER] != self.values_digest(key, &bytes[HEADER..]) {
            return Err(
                "values that are not the ones written for this sentence and encoder \
                        (their digest differs)"
                    .into(),
            );
        }
        let values: Vec<f32> = bytes[HEADER..]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        if let Some(at) = values.iter().position(|v| !v.is_finite()) {
            return Err(format!(
                "value {at} is {}: expected finite values",
                values[at]
            ));
        }
        Ok(values)
    }
}

/// What a sentence's layers are computed from: its windows.
fn sentence_key(sentence: &Encoded) -> [u8; 32] {
    let mut digest = Sha256::new();
    digest.update((sentence.len() as u64).to_le_bytes());
    for window in &sentence.windows {
        digest.update((window.ids.len() as u64).to_le_bytes());
        let ids: Vec<u8> = window.ids.iter().flat_map(|id| id.to_le_bytes()).collect();
        digest.update(&ids);
        digest.update((window.scored.start as u64).to_le_bytes());
        digest.update((window.scored.end as u64).to_le_bytes());
        for &first in &window.first_pieces {
            digest.update((first as u64).to_le_bytes());
        }
    }
    digest.finalize().into()
}

/// Hashes every float parameter's shape and values, in the modules' order.
struct WeightDigest(Sha256);

impl ModuleVisitor for WeightDigest {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        for dim in param.dims() {
            self.0.update((dim as u64).to_le_bytes());
        }
        let values = crate::host_values(param.val());
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.0.update(&bytes);
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `bytes` to a file of this process's own beside `path` and renames it over `path`:
/// several runs may fill a store at once. It is not synced: a file a crash cut short is found
/// by its length and computed again.
fn write_renamed(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static WRITTEN: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().expect("a store file is in a directory");
    std::fs::create_dir_all(dir)?;
    let partial = dir.join(format!(
        ".partial-{}-{}",
        std::process::id(),
        WRITTEN.fetch_add(1, Ordering::Relaxed)
    ));
    let written = std::fs::File::create(&partial)
        .and_then(|mut file| file.write_all(bytes))
        .and_then(|()| std::fs::rename(&partial, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    written
}
