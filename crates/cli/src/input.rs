//! Where a command reads its input: a file, or stdin when the path is `-`.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use crate::Result;

/// Whether `path` means stdin.
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// All of `path` (`-`: stdin) as text, and the name its messages give it (`stdin` for stdin);
/// bytes that are not UTF-8 are an error naming their line.
pub fn read(path: &Path) -> Result<(String, PathBuf)> {
    if !is_stdin(path) {
        return Ok((nertrain_data::read_text(path)?, path.to_path_buf()));
    }
    use std::io::Read;
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .read_to_end(&mut bytes)
        .map_err(|e| format!("stdin: cannot read: {e}"))?;
    let name = PathBuf::from("stdin");
    Ok((nertrain_data::text_from_bytes(bytes, &name)?, name))
}

/// `path` (`-`: stdin) to be read a line at a time.
pub fn lines(path: &Path) -> Result<Box<dyn BufRead>> {
    if is_stdin(path) {
        return Ok(Box::new(std::io::stdin().lock()));
    }
    let file =
        std::fs::File::open(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    Ok(Box::new(std::io::BufReader::new(file)))
}
