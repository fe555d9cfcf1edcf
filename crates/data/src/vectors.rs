//! Pretrained word vectors in the text formats of GloVe (`word v1 … vd` per line) and word2vec
//! (the same after a `count dim` header line), plain or gzipped.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use crate::DataError;

/// Word vectors, all of one dimension.
#[derive(Debug, Clone, PartialEq)]
pub struct Vectors {
    /// The dimension of every vector.
    pub dim: usize,
    words: Vec<String>,
    values: Vec<f32>,
    index: HashMap<String, usize>,
}

impl Vectors {
    /// Words with a vector.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The words, in file order.
    pub fn words(&self) -> impl Iterator<Item = &str> {
        self.words.iter().map(String::as_str)
    }

    /// The vector of `word`, or else of its lowercase form (vectors are often lowercased).
    pub fn get(&self, word: &str) -> Option<&[f32]> {
        let id = self
            .index
            .get(word)
            .or_else(|| self.index.get(&word.to_lowercase()))?;
        Some(&self.values[id * self.dim..(id + 1) * self.dim])
    }
}

/// Reads a vector file. A first line of exactly two integers is a word2vec header; gzip is
/// recognised by its magic bytes. A line with the wrong number of values, or a value that is not
/// a number, is an error at its line; a word seen twice keeps its first vector.
pub fn read_vectors(path: &Path) -> Result<Vectors, DataError> {
    let raw =
        std::fs::read(path).map_err(|e| DataError::file(path, format!("cannot read: {e}")))?;
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(raw.as_slice())
            .read_to_end(&mut out)
            .map_err(|e| DataError::file(path, format!("not a readable gzip file: {e}")))?;
        out
    } else {
        raw
    };
    let text = String::from_utf8(bytes).map_err(|e| {
        let line = e.as_bytes()[..e.utf8_error().valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        DataError::at(path, line, "invalid UTF-8: expected a UTF-8 text file")
    })?;
    parse_vectors(&text, path)
}

/// Parses word vectors from text (GloVe or word2vec text); `path` names it in errors.
pub fn parse_vectors(text: &str, path: &Path) -> Result<Vectors, DataError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .peekable();
    let mut dim = None;
    if let Some((_, first)) = lines.peek() {
        let fields: Vec<&str> = first.split_whitespace().collect();
        if let [count, d] = fields[..]
            && let (Ok(_), Ok(d)) = (count.parse::<usize>(), d.parse::<usize>())
        {
            dim = Some(d);
            lines.next();
        }
    }
    let mut vectors = Vectors {
        dim: 0,
        words: Vec::new(),
        values: Vec::new(),
        index: HashMap::new(),
    };
    for (index, line) in lines {
        let fields: Vec<&str> = line.split([' ', '\t']).filter(|f| !f.is_empty()).collect();
        // The first data line fixes the dimension when there is no header; a word may itself
        // contain spaces, so the values are the last `dim` fields.
        let d = *dim.get_or_insert(fields.len().saturating_sub(1));
        if d == 0 || fields.len() < d + 1 {
            return Err(DataError::at(
                path,
                index + 1,
                format!(
                    "expected a word and {} values, found {} fields",
                    d.max(1),
                    fields.len()
                ),
            ));
        }
        let word = fields[..fields.len() - d].join(" ");
        let mut values = Vec::with_capacity(d);
        for field in &fields[fields.len() - d..] {
            // `nan`, `inf` and numbers beyond f32 parse, but would make the first loss NaN.
            let value = field.parse::<f32>().ok().filter(|v| v.is_finite());
            let value = value.ok_or_else(|| {
                DataError::at(
                    path,
                    index + 1,
                    format!("expected a finite number, found {field:?}"),
                )
            })?;
            values.push(value);
        }
        if !vectors.index.contains_key(&word) {
            vectors.index.insert(word.clone(), vectors.words.len());
            vectors.words.push(word);
            vectors.values.extend(values);
        }
    }
    vectors.dim = dim.unwrap_or(0);
    if vectors.is_empty() {
        return Err(DataError::file(
            path,
            "no vectors: expected lines of a word and its values",
        ));
    }
    Ok(vectors)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vectors, DataError> {
        parse_vectors(text, Path::new("v.txt"))
    }

    #[test]
    fn reads_glove_and_word2vec_text() {
        let glove = parse("the 0.1 0.2 0.3\nBerlin 1 2 3\n").unwrap();
        let word2vec = parse("2 3\nthe 0.1 0.2 0.3\nBerlin 1 2 3\n").unwrap();
        for v in [&glove, &word2vec] {
            assert_eq!(v.dim, 3);
            assert_eq!(v.len(), 2);
            assert_eq!(v.get("Berlin"), Some(&[1.0, 2.0, 3.0][..]));
        }
    }

    #[test]
    fn falls_back_to_lowercase_and_keeps_the_first_duplicate() {
        let v = parse("berlin 1 2\nberlin 5 5\nat&t 0 1\n").unwrap();
        assert_eq!(v.get("BERLIN"), Some(&[1.0, 2.0][..]));
        assert_eq!(v.get("AT&T"), Some(&[0.0, 1.0][..]));
        assert_eq!(v.get("Paris"), None);
        assert_eq!(v.len(), 2);
    }

    #[test]
    fn words_with_spaces_keep_them() {
        let v = parse("2 2\nnew york 1 2\nx 0 0\n").unwrap();
        assert_eq!(v.get("new york"), Some(&[1.0, 2.0][..]));
    }

    #[test]
    fn values_that_are_not_finite_name_the_line() {
        for bad in ["nan", "inf", "-inf", "1e39"] {
            let err = parse(&format!("a 1 2\nb 1 {bad}\n")).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("v.txt:2: expected a finite number, found {bad:?}")
            );
        }
    }

    #[test]
    fn malformed_lines_name_the_line() {
        let err = parse("a 1 2\nb 1\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "v.txt:2: expected a word and 2 values, found 2 fields"
        );
        let err = parse("a 1 2\nb 1 x\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "v.txt:2: expected a finite number, found \"x\""
        );
        assert!(
            parse("\n\n")
                .unwrap_err()
                .to_string()
                .contains("no vectors")
        );
    }

    #[test]
    fn reads_gzip() {
        use std::io::Write;
        let dir = std::env::temp_dir().join(format!("nertrain-vectors-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("v.txt.gz");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(b"1 2\nlamb 0.5 -0.5\n").unwrap();
        std::fs::write(&path, gz.finish().unwrap()).unwrap();
        let v = read_vectors(&path).unwrap();
        assert_eq!(v.get("lamb"), Some(&[0.5, -0.5][..]));
        std::fs::write(&path, [0x1f, 0x8b, 0, 1, 2]).unwrap();
        assert!(
            read_vectors(&path)
                .unwrap_err()
                .to_string()
                .contains("not a readable gzip file")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
