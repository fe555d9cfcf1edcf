//! Text no one labelled, for a student learning from its teachers alone: CoNLL columns whose
//! tags are all `-`, or raw text a line each, cut into words by a tokenizer.

use std::path::Path;

use crate::conll::{DOCSTART, parse_conll, read_text};
use crate::{ColumnSpec, Corpus, DataError, Label, Sentence, Tokenizer, check_tag};

/// Reads an unlabelled file, as CoNLL columns (`columns`' word and tag columns, each tag `-`)
/// when its first line is a token line of them, else as raw text whose lines are cut into
/// sentences of words by `tokenizer`, each run of non-blank lines a document. A labelled
/// CoNLL line, a JSON record or a file without words is an error naming its line.
pub fn read_unlabelled(
    path: &Path,
    columns: &ColumnSpec,
    tokenizer: &Tokenizer,
) -> Result<Corpus<Label>, DataError> {
    let text = read_text(path)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let mut lines = text.lines().enumerate();
    let mut documents = false;
    let Some((number, first)) = lines.find(|(_, line)| {
        let starts_document = line.split_whitespace().next() == Some(DOCSTART);
        documents |= starts_document;
        !line.trim().is_empty() && !starts_document
    }) else {
        return match documents {
            true => unlabelled_columns(text, path, columns),
            false => Err(DataError::file(
                path,
                "no text: expected unlabelled sentences",
            )),
        };
    };
    let number = number + 1;
    let fields: Vec<&str> = first.split_whitespace().collect();
    if tag_field(&fields, columns) == Some("-") {
        return unlabelled_columns(text, path, columns);
    }
    if let Some(tag) = tag_field(&fields, columns).filter(|tag| check_tag(tag).is_ok()) {
        return Err(DataError::at(
            path,
            number,
            format!(
                "a labelled CoNLL line (its tag column holds {tag:?}); expected CoNLL columns \
                 whose tags are all `-`, or raw text a line each (labelled sentences belong in \
                 data.train)"
            ),
        ));
    }
    if first.trim_start().starts_with('{') {
        return Err(DataError::at(
            path,
            number,
            "a JSON record; expected CoNLL columns whose tags are all `-`, or raw text a line \
             each (an annotation tool's export of labelled text belongs in data.train)",
        ));
    }
    Ok(raw_lines(text, path, tokenizer))
}

/// The field of the tag column, when a line of `fields` has one apart from its word.
fn tag_field<'a>(fields: &[&'a str], columns: &ColumnSpec) -> Option<&'a str> {
    let word = ColumnSpec::resolve(columns.word_column, fields.len())?;
    let tag = ColumnSpec::resolve(columns.tag_column, fields.len())?;
    (fields.len() >= 2 && word != tag).then(|| fields[tag])
}

/// CoNLL columns, each tag `-`.
fn unlabelled_columns(
    text: &str,
    path: &Path,
    columns: &ColumnSpec,
) -> Result<Corpus<Label>, DataError> {
    let corpus = parse_conll(text, path, columns)?;
    for sentence in &corpus.sentences {
        if let Some(i) = sentence.tags.iter().position(|t| !Label::is_unknown(t)) {
            return Err(DataError::at(
                path,
                sentence.first_line + i,
                format!(
                    "a tag ({:?}) in unlabelled text; expected `-` in every token's tag column",
                    sentence.tags[i]
                ),
            ));
        }
    }
    Ok(corpus.map_tags(|_| Label::UNKNOWN))
}

/// Raw text, each line cut into sentences by `tokenizer`; each run of non-blank lines is a
/// document.
fn raw_lines(text: &str, path: &Path, tokenizer: &Tokenizer) -> Corpus<Label> {
    let mut sentences = Vec::new();
    let mut document = 0;
    let mut previous_blank = true;
    for (index, line) in text.lines().enumerate() {
        let blank = line.trim().is_empty();
        if blank && !previous_blank {
            document += 1;
        }
        previous_blank = blank;
        let tokens = tokenizer.tokens(line);
        for range in tokenizer.sentences(line, &tokens) {
            let words: Vec<String> = tokens[range].iter().map(|t| t.text.clone()).collect();
            if words.is_empty() {
                continue;
            }
            sentences.push(Sentence {
                tags: vec![Label::UNKNOWN; words.len()],
                words,
                features: Vec::new(),
                first_line: index + 1,
                document,
            });
        }
    }
    Corpus {
        path: path.to_path_buf(),
        sentences,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TokenizerSpec;

    fn read(name: &str, text: &str) -> Result<Corpus<Label>, DataError> {
        let dir = std::env::temp_dir().join(format!("nertrain-unlabelled-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let tokenizer = Tokenizer::new(&TokenizerSpec::treebank()).unwrap();
        read_unlabelled(&path, &ColumnSpec::default(), &tokenizer)
    }

    fn words(corpus: &Corpus<Label>) -> Vec<Vec<&str>> {
        (corpus.sentences.iter())
            .map(|s| s.words.iter().map(String::as_str).collect())
            .collect()
    }

    #[test]
    fn raw_lines_are_cut_into_sentences_of_words_every_label_unknown() {
        let corpus = read(
            "raw.txt",
            "Peter lives in Berlin. He works at Siemens.\n\nAnna flew.\n",
        )
        .unwrap();
        assert_eq!(
            words(&corpus),
            [
                vec!["Peter", "lives", "in", "Berlin", "."],
                vec!["He", "works", "at", "Siemens", "."],
                vec!["Anna", "flew", "."],
            ]
        );
        let documents: Vec<usize> = corpus.sentences.iter().map(|s| s.document).collect();
        assert_eq!(documents, [0, 0, 1]);
        assert_eq!(corpus.sentences[2].first_line, 3);
        assert!(corpus.sentences.iter().all(|s| s.is_partial()));
        assert!(
            corpus.sentences[0]
                .tags
                .iter()
                .all(|t| *t == Label::UNKNOWN)
        );
    }

    #[test]
    fn conll_columns_with_dashes_are_read_as_columns() {
        let corpus = read("cols.txt", "-DOCSTART- -\n\nPeter -\nlives -\n\nAnna -\n").unwrap();
        assert_eq!(words(&corpus), [vec!["Peter", "lives"], vec!["Anna"]]);
        assert!(
            corpus.sentences[0]
                .tags
                .iter()
                .all(|t| *t == Label::UNKNOWN)
        );
    }

    #[test]
    fn a_tag_among_the_dashes_is_refused_at_its_line() {
        let error = read("mixed.txt", "Peter -\nlives -\nBerlin B-LOC\n").unwrap_err();
        assert_eq!(error.line, Some(3));
        assert!(error.message.contains("\"B-LOC\""), "{}", error.message);
    }

    #[test]
    fn labelled_conll_json_and_empty_files_are_refused() {
        let labelled = read("labelled.txt", "-DOCSTART- O\n\nPeter B-PER\nlives O\n").unwrap_err();
        assert_eq!(labelled.line, Some(3));
        assert!(
            labelled.message.contains("labelled CoNLL line"),
            "{labelled}"
        );
        let json = read("export.jsonl", "{\"text\": \"Peter lives.\"}\n").unwrap_err();
        assert_eq!(json.line, Some(1));
        assert!(json.message.contains("JSON"), "{json}");
        let empty = read("empty.txt", "\n  \n").unwrap_err();
        assert!(empty.message.contains("no text"), "{empty}");
    }
}
