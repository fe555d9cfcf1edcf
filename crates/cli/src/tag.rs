//! `nertrain tag`: raw text in, entities out. Words are split by the `tokenizers` crate's BERT
//! pre-tokenizer (whitespace, then each punctuation character alone), keeping character offsets.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use burn::tensor::Device;
use clap::{Args, ValueEnum};
use std::collections::BTreeMap;

use nertrain_data::spans;
use nertrain_train::{PredictOptions, Prediction, Predictor, Result};
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
    /// Add every token's tag probabilities (marginals) to the JSON output.
    #[arg(long)]
    probs: bool,
    /// Also print the K best tag sequences with their probabilities.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=100))]
    nbest: u16,
    /// Decode without the tag scheme's constraints.
    #[arg(long)]
    unconstrained: bool,
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
    /// The probability that exactly these words form an entity of this type.
    #[serde(skip_serializing_if = "Option::is_none")]
    confidence: Option<f64>,
}

#[derive(Serialize)]
struct Token<'a> {
    text: &'a str,
    start: usize,
    end: usize,
    tag: &'a str,
    /// p(tag | text) for every tag of the model.
    probs: BTreeMap<&'a str, f64>,
}

#[derive(Serialize)]
struct Alternative<'a> {
    probability: f64,
    entities: Vec<Entity<'a>>,
}

#[derive(Serialize)]
struct Tagged<'a> {
    text: &'a str,
    entities: Vec<Entity<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tokens: Vec<Token<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    nbest: Vec<Alternative<'a>>,
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
    let options = PredictOptions {
        constrained: predictor.meta.crf.constrained_decoding && !args.unconstrained,
        confidence: matches!(args.format, Format::Json),
        marginals: args.probs,
        nbest: usize::from(args.nbest),
        batch_size: args.batch_size,
    };
    let tag_names = predictor.vocab.tags.items();
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
        let predictions = predictor.predict(&strings, options);
        for ((text, words), prediction) in texts.iter().zip(&words).zip(&predictions) {
            write_one(&mut out, args.format, text, words, prediction, tag_names)?;
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

/// The entities of `tags` over `text`, with confidences when given.
fn entities<'a>(
    text: &[char],
    words: &[Word],
    tags: &'a [String],
    confidences: &[f64],
) -> Vec<Entity<'a>> {
    spans(tags)
        .into_iter()
        .enumerate()
        .map(|(i, span)| {
            let (start, end) = (words[span.start].start, words[span.end - 1].end);
            let label = &tags[span.start][2..];
            Entity {
                label,
                start,
                end,
                text: text[start..end].iter().collect(),
                confidence: confidences.get(i).copied(),
            }
        })
        .collect()
}

/// The text with entities marked inline: `[Berlin]LOC`.
fn inline(text: &[char], words: &[Word], tags: &[String]) -> String {
    let mut line = String::new();
    let mut at = 0;
    for entity in entities(text, words, tags, &[]) {
        line.extend(&text[at..entity.start]);
        line.push('[');
        line.push_str(&entity.text);
        line.push(']');
        line.push_str(entity.label);
        at = entity.end;
    }
    line.extend(&text[at..]);
    line
}

fn write_one(
    out: &mut impl Write,
    format: Format,
    text: &str,
    words: &[Word],
    prediction: &Prediction,
    tag_names: &[String],
) -> Result<()> {
    let chars: Vec<char> = text.chars().collect();
    match format {
        Format::Conll => {
            for (t, word) in words.iter().enumerate() {
                write!(out, "{}", word.text)?;
                if prediction.nbest.is_empty() {
                    write!(out, " {}", prediction.tags[t])?;
                }
                for (tags, _) in &prediction.nbest {
                    write!(out, " {}", tags[t])?;
                }
                writeln!(out)?;
            }
            writeln!(out)?;
        }
        Format::Text => {
            writeln!(out, "{}", inline(&chars, words, &prediction.tags))?;
            for (rank, (tags, probability)) in prediction.nbest.iter().enumerate() {
                writeln!(
                    out,
                    "  #{} p={probability:.4}  {}",
                    rank + 1,
                    inline(&chars, words, tags)
                )?;
            }
        }
        Format::Json => {
            let tokens = prediction
                .marginals
                .iter()
                .zip(words)
                .zip(&prediction.tags)
                .map(|((probs, word), tag)| Token {
                    text: &word.text,
                    start: word.start,
                    end: word.end,
                    tag,
                    probs: tag_names
                        .iter()
                        .map(String::as_str)
                        .zip(probs.iter().copied())
                        .collect(),
                })
                .collect();
            let nbest = prediction
                .nbest
                .iter()
                .map(|(tags, probability)| Alternative {
                    probability: *probability,
                    entities: entities(&chars, words, tags, &[]),
                })
                .collect();
            let tagged = Tagged {
                text,
                entities: entities(&chars, words, &prediction.tags, &prediction.confidences),
                tokens,
                nbest,
            };
            writeln!(out, "{}", serde_json::to_string(&tagged)?)?;
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
