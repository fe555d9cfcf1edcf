//! The weights file: a module saved atomically and loaded in Burn's burnpack format (a file that
//! does not fit the module described is an error naming it), and the SHA-256 the files' ids are
//! made of.

use std::path::Path;

use burn::module::Module;
use sha2::{Digest, Sha256};

use crate::FileError;

/// Saves a module's weights (`model.bpk`, or a checkpoint's) as every model file is written:
/// beside their place, synced, and renamed over it, so that a reader finds the old weights or
/// the new, never a torn file.
pub fn save_weights<M: Module>(module: &M, path: &Path) -> Result<(), FileError> {
    let partial = nertrain_data::io::with_suffix(path, nertrain_data::io::PARTIAL);
    let io = |action, e: std::io::Error| FileError::Io {
        path: path.to_path_buf(),
        action,
        source: e,
    };
    let saved = match std::fs::remove_file(&partial) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("write", e)),
        _ => Ok(()),
    }
    .and_then(|()| {
        module
            .clone()
            .save_file(&partial)
            .map_err(|e| io("save weights", std::io::Error::other(e.to_string())))?;
        std::fs::File::open(&partial)
            .and_then(|f| f.sync_all())
            .and_then(|()| std::fs::rename(&partial, path))
            .map_err(|e| io("write", e))
    });
    if saved.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    saved
}

/// Loads weights into a module of the right architecture; a damaged file, or one for another
/// shape, is an error that says which.
///
/// The file is read whole, from one open, before any of it is used: read by path, tensor by
/// tensor, a model replaced while it loads (as `fit` replaces the best one each better epoch)
/// gave weights of both, or a missing file halfway.
pub fn load_weights<M: Module>(module: M, path: &Path) -> Result<M, FileError> {
    use burn::store::{ModuleRecord, RecordError};
    let bytes = std::fs::read(path).map_err(|e| {
        let message = if e.kind() == std::io::ErrorKind::NotFound {
            format!("cannot read: the file is missing ({e})")
        } else {
            format!("cannot read: {e}")
        };
        FileError::invalid(path, message)
    })?;
    let record = ModuleRecord::from_bytes(burn::tensor::Bytes::from_bytes_vec(bytes));
    record
        .and_then(|record| module.try_load_record(record))
        .map_err(|e| {
            let message = match e {
                RecordError::Io(detail) if !path.exists() => {
                    format!("cannot read: the file is missing ({detail})")
                }
                RecordError::Io(detail) => format!(
                    "not a readable weights file: it is truncated or damaged ({detail}); \
                 restore it or train again"
                ),
                RecordError::Validation(detail) => {
                    format!("weights do not fit this model (as model.json describes it): {detail}")
                }
            };
            FileError::invalid(path, message)
        })
}

/// The SHA-256 of `bytes`, in lower-case hex.
pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// `bytes` in lower-case hex.
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
