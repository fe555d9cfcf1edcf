//! `nertrain tag`: raw text in, entities out. Words are split by the `tokenizers` crate's BERT
//! pre-tokenizer (whitespace, then each punctuation character alone), keeping character offsets.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use burn::tensor::Device;
use clap::{Args, ValueEnum};
use nertrain_data::spans;
use nertrain_train::{Predictor, Result};
use serde::Serialize;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::{OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// The text with entities marked inline: `[Berlin]LOC`.
    Text,
    /// One `word tag` line per word, a blank line after each input.
    Conll,
    /// One JSON object per input: its entities with label and character offsets.
    Json,
}

#[derive(Args)]
pub struct TagArgs {
    /// A model directory written by `nertrain fit`.
    #[arg(long)]
    model: PathBuf,
    /// Texts to tag; each is one input.
    #[arg(conflicts_with = "input")]
    texts: Vec<String>,
    /// Read one text per line from this file, or from stdin with `-`.
    #[arg(long)]
    input: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    #[arg(long, default_value_t = 100)]
    batch_size: usize,
}

/// A word of the input with its character offsets.
struct Word {
    text: String,
    start: usize,
    end: usize,
}

#[derive(Serialize)]
struct Entity<'a> {
    label: &'a str,
    /// Character (not byte) offsets into the input text, end exclusive.
    start: usize,
    end: usize,
    text: String,
}

#[derive(Serialize)]
struct Tagged<'a> {
    text: &'a str,
    entities: Vec<Entity<'a>>,
}

fn split_words(text: &str) -> Result<Vec<Word>> {
    let mut pre = PreTokenizedString::from(text);
    BertPreTokenizer.pre_tokenize(&mut pre)?;
    Ok(pre
        .get_splits(OffsetReferential::Original, OffsetType::Char)
        .into_iter()
        .map(|(word, (start, end), _)| Word {
            text: word.to_string(),
            start,
            end,
        })
        .collect())
}

/// Texts are tagged this many at a time, so input of any size runs in bounded memory.
const CHUNK: usize = 1000;

pub fn run(args: TagArgs, device: &Device) -> Result<()> {
    let predictor = Predictor::load(&args.model, device)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut tag_chunk = |texts: &[String]| -> Result<()> {
        let words: Vec<Vec<Word>> = texts
            .iter()
            .map(|t| split_words(t))
            .collect::<Result<_>>()?;
        let strings: Vec<Vec<&str>> = words
            .iter()
            .map(|ws| ws.iter().map(|w| w.text.as_str()).collect())
            .collect();
        let predictions = predictor.predict(&strings, args.batch_size);
        for ((text, words), prediction) in texts.iter().zip(&words).zip(&predictions) {
            write_one(&mut out, args.format, text, words, &prediction.tags)?;
        }
        out.flush()?;
        Ok(())
    };
    match &args.input {
        None => tag_chunk(&args.texts),
        Some(path) => {
            let reader: Box<dyn BufRead> = if path.as_os_str() == "-" {
                Box::new(std::io::stdin().lock())
            } else {
                let file = std::fs::File::open(path)
                    .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
                Box::new(std::io::BufReader::new(file))
            };
            let mut chunk = Vec::with_capacity(CHUNK);
            for (number, line) in reader.lines().enumerate() {
                let line = line
                    .map_err(|e| format!("{}:{}: cannot read: {e}", path.display(), number + 1))?;
                chunk.push(line);
                if chunk.len() == CHUNK {
                    tag_chunk(&chunk)?;
                    chunk.clear();
                }
            }
            tag_chunk(&chunk)
        }
    }
}

fn write_one(
    out: &mut impl Write,
    format: Format,
    text: &str,
    words: &[Word],
    tags: &[String],
) -> Result<()> {
    let found = spans(tags);
    match format {
        Format::Conll => {
            for (word, tag) in words.iter().zip(tags) {
                writeln!(out, "{} {tag}", word.text)?;
            }
            writeln!(out)?;
        }
        Format::Text => {
            let chars: Vec<char> = text.chars().collect();
            let mut line = String::new();
            let mut at = 0;
            for span in &found {
                let (start, end) = (words[span.start].start, words[span.end - 1].end);
                line.extend(&chars[at..start]);
                line.push('[');
                line.extend(&chars[start..end]);
                line.push(']');
                line.push_str(&span.label);
                at = end;
            }
            line.extend(&chars[at..]);
            writeln!(out, "{line}")?;
        }
        Format::Json => {
            let chars: Vec<char> = text.chars().collect();
            let entities = found
                .iter()
                .map(|span| {
                    let (start, end) = (words[span.start].start, words[span.end - 1].end);
                    Entity {
                        label: &span.label,
                        start,
                        end,
                        text: chars[start..end].iter().collect(),
                    }
                })
                .collect();
            writeln!(
                out,
                "{}",
                serde_json::to_string(&Tagged { text, entities })?
            )?;
        }
    }
    Ok(())
}

/// Whether an error is a closed output pipe (`nertrain tag ... | head`), which is not a failure.
pub fn is_broken_pipe(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::BrokenPipe;
        }
        current = e.source();
    }
    false
}
