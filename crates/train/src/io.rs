//! The run directory's files, written through data's atomic writes ([`nertrain_data::io`]), and
//! a module's weights saved the same way.

use std::path::Path;

use burn::module::Module;
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

/// Saves a module's weights atomically.
pub fn save_module<M: Module>(module: &M, path: &Path) -> Result<()> {
    let partial = with_suffix(path, PARTIAL);
    let saved = remove_if_present(&partial).and_then(|()| {
        module
            .clone()
            .save_file(&partial)
            .map_err(|e| Error::io(path, "save weights", std::io::Error::other(e.to_string())))?;
        std::fs::File::open(&partial)
            .and_then(|f| f.sync_all())
            .and_then(|()| std::fs::rename(&partial, path))
            .map_err(|e| Error::io(path, "write", e))
    });
    if saved.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    saved
}
