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
            let _ = remove_stale(&partial);
            Error::io(path, "write", e)
        })
}

/// Writes a file the user named (`--output`) as `cp` would: through a symbolic link to where it
/// points, straight into a device or pipe, and otherwise atomically ([`write_atomic`]).
pub fn write_output(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut target = path.to_path_buf();
    // A chain of links ends at a file, something else, or nothing (a dangling link).
    for _ in 0..40 {
        match std::fs::symlink_metadata(&target) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link =
                    std::fs::read_link(&target).map_err(|e| Error::io(&target, "read", e))?;
                target = target.parent().unwrap_or(Path::new("")).join(link);
            }
            Ok(meta) if meta.is_dir() => {
                return Err(Error::io(
                    path,
                    "write",
                    std::io::Error::other("it is a directory"),
                ));
            }
            Ok(meta) if !meta.is_file() => {
                use std::io::Write;
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&target)
                    .map_err(|e| Error::io(path, "write", e))?;
                return file
                    .write_all(bytes)
                    .map_err(|e| Error::io(path, "write", e));
            }
            _ => return write_atomic(&target, bytes),
        }
    }
    Err(Error::io(
        path,
        "write",
        std::io::Error::other("too many levels of symbolic links"),
    ))
}

/// Creates `path` afresh (never through a link planted there: a stale file or link is removed
/// first, and the new file is created exclusively), writes `bytes` and syncs them.
pub fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    remove_stale(path)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Removes a temporary file left by an earlier write, or a link in its place; anything else
/// there is not nertrain's and is an error.
fn remove_stale(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(meta) if meta.is_file() || meta.file_type().is_symlink() => std::fs::remove_file(path),
        Ok(_) => Err(std::io::Error::other(format!(
            "{} is in the way of the temporary file and is not nertrain's",
            path.display()
        ))),
    }
}

/// `name.suffix` beside `name`.
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".");
    name.push(suffix);
    path.with_file_name(name)
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
