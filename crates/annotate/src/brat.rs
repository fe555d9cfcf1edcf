//! brat standoff: a directory of `.txt` and `.ann` pairs, or one `.ann`. Each `.txt` is a text
//! and a document; its text-bound annotations (`T1<TAB>PER 0 11<TAB>Anna Kovacs`) are the spans,
//! in code points, checked against the text they name. Discontinuous ones are left out with a
//! warning; relations, events, attributes, normalisations and notes are ignored.

use std::path::{Path, PathBuf};

use nertrain_data::{DataError, read_text};

use crate::CharSpan;
use crate::exported::Exported;
use crate::tally::Tally;

/// Reads brat standoff: every `.ann` of a directory with its `.txt` (in name order), or one
/// `.ann` (or `.txt`) and its pair.
pub(crate) fn read(path: &Path, tally: &mut Tally) -> Result<Vec<Exported>, DataError> {
    let annotation_files: Vec<PathBuf> = if path.is_dir() {
        let entries = std::fs::read_dir(path)
            .map_err(|e| DataError::file(path, format!("cannot read the directory: {e}")))?;
        let entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        let with = |p: &PathBuf, extension: &str| p.extension().is_some_and(|e| e == extension);
        let sorted = |mut paths: Vec<PathBuf>| {
            paths.sort();
            paths
        };
        let files = sorted(entries.iter().filter(|p| with(p, "ann")).cloned().collect());
        if files.is_empty() {
            return Err(DataError::file(
                path,
                "no .ann files: expected brat standoff, a .txt and a .ann of the same name each",
            ));
        }
        tally.lone_texts = sorted(
            entries
                .iter()
                .filter(|p| with(p, "txt") && !p.with_extension("ann").exists())
                .cloned()
                .collect(),
        );
        tally.subdirectories = sorted(entries.iter().filter(|p| p.is_dir()).cloned().collect());
        files
    } else {
        vec![path.with_extension("ann")]
    };
    let mut exported = Vec::new();
    for ann in annotation_files {
        let txt = ann.with_extension("txt");
        let text = read_text(&txt)?;
        let spans = parse(&read_text(&ann)?, &text, &ann, &mut tally.discontinuous)?;
        exported.push(Exported {
            text,
            spans,
            line: 1,
            source: ann,
            doc: None,
            known: None,
        });
    }
    Ok(exported)
}

/// The text-bound annotations of a `.ann` file over `text`; discontinuous ones go to
/// `discontinuous` as `file:line`.
fn parse(
    ann: &str,
    text: &str,
    path: &Path,
    discontinuous: &mut Vec<String>,
) -> Result<Vec<CharSpan>, DataError> {
    let chars: Vec<char> = text.chars().collect();
    let mut spans = Vec::new();
    for (i, line) in ann.lines().enumerate() {
        let number = i + 1;
        let at = |message: String| DataError::at(path, number, message);
        let line = line.strip_suffix('\r').unwrap_or(line);
        match line.chars().next() {
            None => continue,
            Some('T') => {}
            Some('R' | 'E' | 'A' | 'M' | 'N' | '#' | '*') => continue,
            Some(_) => {
                return Err(at(
                    "expected a brat annotation: T (text-bound), R, E, A, M, N, # or * lines"
                        .into(),
                ));
            }
        }
        let fields: Vec<&str> = line.splitn(3, '\t').collect();
        let [_, middle, covered] = fields.as_slice() else {
            return Err(at("expected `T1<TAB>TYPE START END<TAB>TEXT`".into()));
        };
        let (label, offsets) = middle
            .split_once(' ')
            .ok_or_else(|| at(format!("expected `TYPE START END`, found {middle:?}")))?;
        if offsets.contains(';') {
            discontinuous.push(format!("{}:{number}", path.display()));
            continue;
        }
        let parse = |s: &str| {
            s.parse::<usize>()
                .map_err(|_| at(format!("expected `TYPE START END`, found {middle:?}")))
        };
        let (start, end) = match offsets.split_once(' ') {
            Some((start, end)) => (parse(start)?, parse(end)?),
            None => return Err(at(format!("expected `TYPE START END`, found {middle:?}"))),
        };
        if start < end && end <= chars.len() {
            let found: String = chars[start..end].iter().collect();
            if found != *covered {
                return Err(at(format!(
                    "offsets {start}..{end} cover {found:?} in the .txt, but the annotation \
                     says {covered:?}: offsets must count characters (code points) of the text"
                )));
            }
        }
        spans.push(CharSpan {
            start,
            end,
            label: label.to_string(),
        });
    }
    Ok(spans)
}

#[cfg(test)]
mod tests {
    use crate::read_annotated;

    #[test]
    fn brat_files_left_out_are_warned_of() {
        let dir = std::env::temp_dir().join(format!("nertrain-brat-left-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("more")).unwrap();
        std::fs::write(dir.join("a.txt"), "Anna").unwrap();
        std::fs::write(dir.join("a.ann"), "T1\tPER 0 4\tAnna\n").unwrap();
        std::fs::write(dir.join("b.txt"), "Bob").unwrap();
        let corpus = read_annotated(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let warnings = corpus.warnings.join("\n");
        assert!(
            warnings.contains("1 .txt file without a .ann"),
            "{warnings}"
        );
        assert!(warnings.contains("1 subdirectory not read"), "{warnings}");
    }
}
