//! `nertrain convert`: a CoNLL file's tag column in another scheme, or annotated text (JSON lines,
//! Label Studio's export, brat) as CoNLL columns.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use nertrain_data::{ColumnSpec, TagScheme, Tokenizer, TokenizerSpec, convert_tag_column};

use crate::Result;

#[derive(Args)]
pub struct ConvertArgs {
    /// The file's scheme; its tags must be well formed in it. Without it, the tags are read
    /// leniently, as conlleval reads them.
    #[arg(long)]
    from: Option<TagScheme>,
    /// The scheme to write: iob1, iob2 (bio) or iobes (bioes).
    #[arg(long)]
    to: TagScheme,
    /// The tag column (negative counts from the end).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    tag_column: isize,
    /// The CoNLL file to convert (`-`: stdin), or span-annotated text (`.jsonl`), written as
    /// CoNLL columns cut into words by the treebank rules, as `fit` reads it.
    file: PathBuf,
    /// Write here instead of stdout.
    #[arg(long)]
    output: Option<PathBuf>,
}

/// Converts `args.file` (`-`: stdin) to `args.to`, reading its tags in `args.from` (leniently,
/// as conlleval, without it), and writes it to `args.output` or stdout.
pub fn run(args: ConvertArgs) -> Result<()> {
    let converted = if nertrain_annotate::is_annotated(&args.file) {
        annotated_to_conll(&args.file, args.to)?
    } else {
        let (text, file) = crate::input::read(&args.file)?;
        let columns = ColumnSpec {
            word_column: 0,
            tag_column: args.tag_column,
            ..ColumnSpec::default()
        };
        if args.from.is_none() {
            let corpus = nertrain_data::parse_partially_tagged(&text, &file, &columns)?;
            if let Some(warning) = corpus.iobes_warning() {
                eprintln!("warning: {warning}");
            }
        }
        convert_tag_column(&text, &file, &columns, args.from, args.to)?
    };
    match &args.output {
        Some(path) => nertrain_data::write_output(path, converted.as_bytes())?,
        None => std::io::stdout().lock().write_all(converted.as_bytes())?,
    }
    Ok(())
}

/// An annotation tool's export as a CoNLL file of `word tag` lines in `scheme`, read and cut
/// by the treebank rules as `fit` reads it.
fn annotated_to_conll(file: &Path, scheme: TagScheme) -> Result<String> {
    let tokenizer = Tokenizer::new(&TokenizerSpec::treebank())?;
    let (corpus, warnings) = nertrain_annotate::read_labelled(file, &ColumnSpec::default())?
        .into_sentences(&tokenizer)?;
    for warning in &warnings {
        eprintln!("warning: {warning}");
    }
    Ok(corpus.to_conll(scheme))
}
