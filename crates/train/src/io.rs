//! Files written so that a crash leaves the old one or the new one, never a torn one: each is
//! written under a temporary name beside its place, synced, and renamed into place.

use std::path::{Path, PathBuf};

use burn::module::Module;

use crate::{Error, Result};

/// The suffix of a file being written, before it is renamed into place.
pub const PARTIAL: &str = "partial";

/// Writes `bytes` to a sibling temporary file, syncs it, and renames it over `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let partial = with_suffix(path, PARTIAL);
    write_synced(&partial, bytes)
        .and_then(|()| std::fs::rename(&partial, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&partial);
            Error::io(path, "write", e)
        })
}

pub fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// `name.suffix` beside `name`.
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".");
    name.push(suffix);
    path.with_file_name(name)
}

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

/// Loads weights into a module of the right architecture; a damaged file, or one for another
/// shape, is an error that says which.
pub fn load_module<M: Module>(module: M, path: &Path) -> Result<M> {
    use burn::store::RecordError;
    module.try_load_file(path).map_err(|e| {
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
        Error::model(path, message)
    })
}
