//! Files written so that a crash leaves the old one or the new one, never a torn one: each is
//! written under a temporary name beside its place, synced, and renamed into place. Every command
//! that writes a file a user named (`--output`), and the run directory, write through here. And
//! files read whole that a user hands over (a checkpoint's), read only when they are regular
//! files within a bound.

use std::fmt;
use std::path::{Path, PathBuf};

/// A file that could not be written: its temporary file created, written, synced or renamed.
#[derive(Debug)]
pub struct WriteError {
    /// The file.
    pub path: PathBuf,
    /// What was being done: "write", "read", ...
    pub action: &'static str,
    /// Why it failed.
    pub source: std::io::Error,
}

impl WriteError {
    fn new(path: impl Into<PathBuf>, action: &'static str, source: std::io::Error) -> Self {
        Self {
            path: path.into(),
            action,
            source,
        }
    }
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: cannot {}: {}",
            self.path.display(),
            self.action,
            self.source
        )
    }
}

impl std::error::Error for WriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// The suffix of a file being written, before it is renamed into place.
pub const PARTIAL: &str = "partial";

/// Writes `bytes` to a sibling temporary file, syncs it, and renames it over `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let partial = with_suffix(path, PARTIAL);
    write_synced(&partial, bytes)
        .and_then(|()| std::fs::rename(&partial, path))
        .map_err(|e| {
            let _ = remove_stale(&partial);
            WriteError::new(path, "write", e)
        })
}

/// Writes a file the user named (`--output`) as `cp` would: through a symbolic link to where it
/// points, straight into a device or pipe, and otherwise atomically ([`write_atomic`]).
pub fn write_output(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let mut target = path.to_path_buf();
    // A chain of links ends at a file, something else, or nothing (a dangling link).
    for _ in 0..40 {
        match std::fs::symlink_metadata(&target) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link =
                    std::fs::read_link(&target).map_err(|e| WriteError::new(&target, "read", e))?;
                target = target.parent().unwrap_or(Path::new("")).join(link);
            }
            Ok(meta) if meta.is_dir() => {
                return Err(WriteError::new(
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
                    .map_err(|e| WriteError::new(path, "write", e))?;
                return file
                    .write_all(bytes)
                    .map_err(|e| WriteError::new(path, "write", e));
            }
            _ => return write_atomic(&target, bytes),
        }
    }
    Err(WriteError::new(
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

/// `value` as JSON with every object's keys sorted (pretty: indented), as the files and reports
/// nertrain writes have always had them: through a JSON value, whose maps are sorted.
pub fn to_sorted_json<T: serde::Serialize>(value: &T, pretty: bool) -> serde_json::Result<String> {
    let value = serde_json::to_value(value)?;
    if pretty {
        serde_json::to_string_pretty(&value)
    } else {
        serde_json::to_string(&value)
    }
}

/// Reads `path` whole when it is a regular file (or a symbolic link to one, as a Hugging Face
/// snapshot's files are) of at most `max_bytes`. A FIFO, a device or a directory is refused
/// before anything is read from it, so that nothing waits for a writer or reads without end,
/// and a file past the bound is refused by its length.
pub fn read_regular(path: &Path, max_bytes: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Error, ErrorKind, Read};
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    // A FIFO opened for reading waits for a writer unless it is opened without blocking.
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    }
    let file = options.open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("expected a regular file, found {}", file_kind(&metadata)),
        ));
    }
    let too_long = |length: u64| {
        Error::new(
            ErrorKind::InvalidData,
            format!("{length} bytes or more: at most {max_bytes} are read of this file"),
        )
    };
    if metadata.len() > max_bytes {
        return Err(too_long(metadata.len()));
    }
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    file.take(max_bytes + 1).read_to_end(&mut bytes)?;
    // It grew while it was read.
    if bytes.len() as u64 > max_bytes {
        return Err(too_long(bytes.len() as u64));
    }
    Ok(bytes)
}

/// What a file that is not a regular one is, for a message.
fn file_kind(metadata: &std::fs::Metadata) -> &'static str {
    let kind = metadata.file_type();
    if kind.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    "neither a file nor a directory"
}
