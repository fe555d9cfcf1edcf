//! `nertrain convert`: a CoNLL file's tag column in another scheme, or annotated text (JSON lines,
//! Label Studio's export, brat) as CoNLL columns.

use std::io::Write;
use std::path::{Path, PathBuf};

use nertrain_data::{ColumnSpec, TagScheme, Tokenizer, TokenizerSpec, convert_tag_column};

use crate::Result;

/// Converts `file` (`-`: stdin) to `to`, reading its tags in `from` (leniently, as conlleval,
/// without it), and writes it to `output` or stdout.
pub fn run(
    from: Option<TagScheme>,
    to: TagScheme,
    tag_column: isize,
    file: &Path,
    output: Option<&Path>,
) -> Result<()> {
    let converted = if nertrain_data::is_annotated(file) {
        annotated_to_conll(file, to)?
    } else {
        let (text, file) = if file.as_os_str() == "-" {
            (crate::read_stdin()?, PathBuf::from("stdin"))
        } else {
            (nertrain_data::read_text(file)?, file.to_path_buf())
        };
        let columns = ColumnSpec {
            word_column: 0,
            tag_column,
        };
        if from.is_none() {
            let corpus = nertrain_data::parse_conll(&text, &file, columns)?;
            if let Some(warning) = corpus.iobes_warning() {
                eprintln!("warning: {warning}");
            }
        }
        convert_tag_column(&text, &file, columns, from, to)?
    };
    match output {
        Some(path) => nertrain_train::write_output(path, converted.as_bytes())?,
        None => std::io::stdout().lock().write_all(converted.as_bytes())?,
    }
    Ok(())
}

/// Span-annotated text as a CoNLL file of `word tag` lines in `scheme`, cut by the treebank rules
/// as `fit` cuts it.
fn annotated_to_conll(file: &Path, scheme: TagScheme) -> Result<String> {
    let tokenizer = Tokenizer::new(&TokenizerSpec::treebank())?;
    let annotated = nertrain_data::read_annotated(file)?;
    for warning in &annotated.warnings {
        eprintln!("warning: {warning}");
    }
    let (corpus, misaligned) = annotated.tokenize(&tokenizer);
    for span in &misaligned {
        eprintln!("warning: {span}");
    }
    Ok(corpus.to_conll(scheme))
}
