//! A directory's writer: one process at a time, by an advisory lock on a file in it that holds
//! the writer's process id. The system releases the lock when the process ends, however it
//! ends, so a crash never leaves a directory locked; a process refused is told who holds it.
//! A run directory (`fit`) and a server's versions directory (`serve --train-into`) are locked
//! through here.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::Path;

/// A lock held: released when dropped, or when the process ends.
#[derive(Debug)]
pub struct ProcessLock {
    file: File,
}

impl Drop for ProcessLock {
    /// Empties the file before the lock goes, so that no one reads this process's id as the
    /// holder's after it.
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
    }
}

/// Why a lock was not taken.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds it: its id, when it could be read and the process is alive.
    Held(Option<u32>),
    /// The lock file is a symbolic or hard link: locking writes into it, and through a link
    /// it would write into another's file.
    Linked,
    /// The file could not be opened, locked or written.
    Io {
        /// What was being done: "open", "lock", "write".
        action: &'static str,
        /// Why it failed.
        source: std::io::Error,
    },
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Held(Some(pid)) => write!(f, "process {pid} holds it"),
            Self::Held(None) => f.write_str("another process holds it"),
            Self::Linked => f.write_str(
                "is not a regular file of its own (a symbolic or hard link?); nertrain locks \
                 with a file of its own: remove it and try again",
            ),
            Self::Io { action, source } => write!(f, "cannot {action}: {source}"),
        }
    }
}

impl ProcessLock {
    /// Takes the lock of `path` (created when missing, kept afterwards: taking a lock on a file
    /// that another process may be deleting is a race) and writes this process's id in it.
    pub fn take(path: &Path) -> Result<Self, LockError> {
        if std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_file() || other_links(&m)) {
            return Err(LockError::Linked);
        }
        let io = |action| move |source| LockError::Io { action, source };
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io("open"))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(LockError::Held(holder(&mut file)));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io("lock")(e)),
        }
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "{}", std::process::id()))
            .map_err(io("write"))?;
        Ok(Self { file })
    }
}

/// Whether a file has other names (hard links) besides this one.
fn other_links(meta: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        meta.nlink() > 1
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        false
    }
}

/// The id the holder wrote, once it is written and names a live process (the holder may have
/// taken the lock and not yet written it).
fn holder(file: &mut File) -> Option<u32> {
    for _ in 0..50 {
        let mut text = String::new();
        let read = file.rewind().and_then(|()| file.read_to_string(&mut text));
        let pid = read.ok().and_then(|_| text.trim().parse::<u32>().ok());
        if let Some(pid) = pid
            && is_alive(pid)
        {
            return Some(pid);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    None
}

/// Whether process `pid` exists: a signal 0 to it is delivered, or refused only for want of
/// permission (another user's).
fn is_alive(pid: u32) -> bool {
    use rustix::process::{Pid, test_kill_process};
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    match test_kill_process(pid) {
        Ok(()) => true,
        Err(error) => error == rustix::io::Errno::PERM,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_named_when_refused() {
        let dir = std::env::temp_dir().join(format!("nertrain-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("lock");
        let held = ProcessLock::take(&path).unwrap();
        // A second open file description is refused, as another process would be.
        match ProcessLock::take(&path) {
            Err(LockError::Held(Some(pid))) => assert_eq!(pid, std::process::id()),
            other => panic!("{other:?}"),
        }
        drop(held);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
        let again = ProcessLock::take(&path).unwrap();
        drop(again);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
