//! The run directory's files, written through data's atomic writes ([`nertrain_data::io`]);
//! the model's own files are written by their owner, [`nertrain_model::ModelFiles`].

use std::path::Path;

pub use nertrain_data::io::{PARTIAL, with_suffix, write_synced};

use crate::{Error, Result};

/// Writes `bytes` to a sibling temporary file, syncs it, and renames it over `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    Ok(nertrain_data::io::write_atomic(path, bytes)?)
}

/// Deletes a file or directory, when it is there.
pub fn remove_if_present(path: &Path) -> Result<()> {
    let removed = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => Err(e),
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
    };
    removed.map_err(|e| Error::io(path, "delete", e))
}
