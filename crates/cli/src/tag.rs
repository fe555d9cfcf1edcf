//! `nertrain tag`: raw text in, entities out. Words are split by the `tokenizers` crate's BERT
//! pre-tokenizer (whitespace, then each punctuation character alone), keeping character offsets.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use burn::tensor::Device;
use clap::{Args, ValueEnum};
use std::collections::BTreeMap;

use std::ops::Range;

use nertrain_data::{Span, TagScheme, render_spans, spans};
use nertrain_train::{PredictOptions, Prediction, Predictor};
use serde::Serialize;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::{OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};

use crate::Result;

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
    /// Texts to tag; each is one input (and one document, for a model that reads documents).
    /// Without texts or --input, lines are read from stdin when it is not a terminal.
    #[arg(conflicts_with = "input")]
    texts: Vec<String>,
    /// Read one text per line from this file, or from stdin with `-`. For a model that reads
    /// documents, lines up to a blank one are one document.
    #[arg(long)]
    input: Option<PathBuf>,
    /// How each input and its entities are printed on stdout.
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
    /// How strongly a word's other mentions in its document pull its prediction (a
    /// document-level model's own weight, chosen on dev, by default; 0 tags each sentence on its
    /// own).
    #[arg(long, value_name = "WEIGHT", value_parser = crate::eval::non_negative)]
    consistency: Option<f64>,
    /// Sentences per batch (fewer when they are long: a batch holds at most 8,192 tokens).
    #[arg(long, default_value_t = 100, value_parser = crate::at_least_one())]
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

/// The pre-tokenizer keeps per-byte alignments for what it splits, several times the text's size:
/// long texts go to it in parts of about this many bytes, cut at whitespace (where it splits
/// anyway, so the words are the same).
const SPLIT_BYTES: usize = 1 << 14;

fn split_words(text: &str) -> Result<Vec<Word>> {
    let mut words = Vec::new();
    let mut chars_before = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let cut = if rest.len() <= SPLIT_BYTES {
            rest.len()
        } else {
            let from = rest.floor_char_boundary(SPLIT_BYTES);
            rest[from..]
                .find(char::is_whitespace)
                .map_or(rest.len(), |i| from + i)
        };
        let (part, after) = rest.split_at(cut);
        let mut pre = PreTokenizedString::from(part);
        BertPreTokenizer.pre_tokenize(&mut pre)?;
        words.extend(
            pre.get_splits(OffsetReferential::Original, OffsetType::Char)
                .into_iter()
                .map(|(word, (start, end), _)| Word {
                    text: word.to_string(),
                    start: chars_before + start,
                    end: chars_before + end,
                }),
        );
        chars_before += part.chars().count();
        rest = after;
    }
    Ok(words)
}

/// Texts are tagged this many, or this many bytes of them, at a time, so input of any size runs
/// in bounded memory.
const CHUNK: usize = 1000;
const CHUNK_BYTES: usize = 1 << 20;

/// A longer text is tagged in pieces of at most this many words, each cut after the last sentence
/// end (`.`, `!`, `?`) within it when there is one, so that one long line also runs in bounded
/// memory and time.
const MAX_WORDS: usize = 250;

/// The pieces a text's words are tagged in: one, unless there are more than [`MAX_WORDS`]; or,
/// for a model that reads documents (`sentences`), one per sentence (ended by `.`, `!` or `?`,
/// a space and a word that does not start in lower case), as it was trained.
fn pieces(words: &[Word], sentences: bool) -> Vec<Range<usize>> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let ends_sentence = |w: &Word| matches!(w.text.as_str(), "." | "!" | "?");
    if sentences {
        for (i, word) in words.iter().enumerate() {
            // A stop, then a space and no lower-case letter: not the dots of `U.S. in` or `3.5`.
            let spaced = words.get(i + 1).is_none_or(|next| {
                next.start > word.end && !next.text.starts_with(char::is_lowercase)
            });
            if (ends_sentence(word) && spaced) || i + 1 - start == MAX_WORDS {
                pieces.push(start..i + 1);
                start = i + 1;
            }
        }
        if start < words.len() || pieces.is_empty() {
            pieces.push(start..words.len());
        }
        return pieces;
    }
    while words.len() - start > MAX_WORDS {
        let window = &words[start..start + MAX_WORDS];
        let sentence_end = window
            .iter()
            .rposition(|w| matches!(w.text.as_str(), "." | "!" | "?"));
        let end = start + sentence_end.map_or(MAX_WORDS, |i| i + 1);
        pieces.push(start..end);
        start = end;
    }
    pieces.push(start..words.len());
    pieces
}

/// One text's prediction from its pieces': the entities of each, in the file's scheme, so none
/// runs into the next; marginals side by side; the best path's probability is the product of
/// the pieces', and only it is kept of the n best.
fn join(pieces: Vec<Prediction>, scheme: TagScheme) -> Prediction {
    if pieces.len() == 1 {
        return pieces.into_iter().next().expect("one piece");
    }
    let mut entities = Vec::new();
    let mut joined = Prediction {
        tags: Vec::new(),
        score: 0.0,
        confidences: Vec::new(),
        marginals: Vec::new(),
        nbest: Vec::new(),
    };
    let mut best_probability = pieces.iter().all(|p| !p.nbest.is_empty()).then_some(1.0);
    for piece in pieces {
        let offset = joined.tags.len();
        entities.extend(spans(&piece.tags).into_iter().map(|span| Span {
            start: span.start + offset,
            end: span.end + offset,
            label: span.label,
        }));
        joined.tags.extend(piece.tags);
        joined.score += piece.score;
        joined.confidences.extend(piece.confidences);
        joined.marginals.extend(piece.marginals);
        if let (Some(p), Some((_, q))) = (best_probability.as_mut(), piece.nbest.first()) {
            *p *= q;
        }
    }
    joined.tags = render_spans(&entities, joined.tags.len(), scheme);
    if let Some(probability) = best_probability {
        joined.nbest = vec![(joined.tags.clone(), probability)];
    }
    joined
}

pub fn run(mut args: TagArgs, device: &Device) -> Result<()> {
    if args.texts.is_empty() && args.input.is_none() {
        if std::io::stdin().is_terminal() {
            return Err(crate::UsageError(
                "nothing to tag: give texts as arguments, --input FILE, or pipe text on stdin"
                    .into(),
            )
            .into());
        }
        args.input = Some(PathBuf::from("-"));
    }
    let predictor = Predictor::load(&args.model, device)?;
    let options = PredictOptions {
        constrained: predictor.meta.crf.constrained_decoding && !args.unconstrained,
        confidence: matches!(args.format, Format::Json),
        marginals: args.probs,
        nbest: usize::from(args.nbest),
        batch_size: args.batch_size,
        consistency: args
            .consistency
            .unwrap_or(predictor.default_options().consistency),
    };
    let tag_names = predictor.vocab.tags.items();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let reads_documents = predictor.reads_documents();
    // `lines`: the texts are lines of a file, and a run of lines without a blank one is a
    // document; otherwise each text is one.
    let mut tag_chunk = |texts: &[String], lines: bool| -> Result<()> {
        let words: Vec<Vec<Word>> = texts
            .iter()
            .map(|t| split_words(t))
            .collect::<Result<_>>()?;
        let cuts: Vec<Vec<Range<usize>>> =
            words.iter().map(|ws| pieces(ws, reads_documents)).collect();
        let mut documents: Vec<Range<usize>> = Vec::new();
        let mut piece = 0;
        let mut previous_blank = true;
        for (text, cuts) in texts.iter().zip(&cuts) {
            let blank = text.trim().is_empty();
            let continues = lines && !previous_blank && !blank;
            match documents.last_mut() {
                Some(document) if continues => document.end += cuts.len(),
                _ => documents.push(piece..piece + cuts.len()),
            }
            piece += cuts.len();
            previous_blank = blank;
        }
        let strings: Vec<Vec<&str>> = words
            .iter()
            .zip(&cuts)
            .flat_map(|(ws, cuts)| {
                cuts.iter()
                    .map(|cut| ws[cut.clone()].iter().map(|w| w.text.as_str()).collect())
            })
            .collect();
        let mut predictions = predictor
            .predict(&strings, &documents, options)?
            .into_iter();
        for ((text, words), cuts) in texts.iter().zip(&words).zip(&cuts) {
            let prediction = join(
                predictions.by_ref().take(cuts.len()).collect(),
                predictor.meta.file_scheme,
            );
            write_one(&mut out, args.format, text, words, &prediction, tag_names)?;
        }
        out.flush()?;
        Ok(())
    };
    match &args.input {
        None => tag_chunk(&args.texts, false),
        Some(path) => {
            let reader: Box<dyn BufRead> = if path.as_os_str() == "-" {
                Box::new(std::io::stdin().lock())
            } else {
                let file = std::fs::File::open(path)
                    .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
                Box::new(std::io::BufReader::new(file))
            };
            let mut chunk = Vec::with_capacity(CHUNK);
            let mut bytes = 0;
            for (number, line) in reader.lines().enumerate() {
                let line = line
                    .map_err(|e| format!("{}:{}: cannot read: {e}", path.display(), number + 1))?;
                bytes += line.len();
                let blank = line.trim().is_empty();
                chunk.push(line);
                // A chunk ends at a blank line, between documents; a document longer than
                // several chunks is cut (its pieces are read apart, as a long one is anyway).
                let full = chunk.len() >= CHUNK || bytes >= CHUNK_BYTES;
                let overfull = chunk.len() >= 8 * CHUNK || bytes >= 8 * CHUNK_BYTES;
                if (full && (blank || !reads_documents)) || overfull {
                    tag_chunk(&chunk, true)?;
                    chunk.clear();
                    bytes = 0;
                }
            }
            tag_chunk(&chunk, true)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn piece_texts(text: &str, sentences: bool) -> Vec<String> {
        let words = split_words(text).unwrap();
        pieces(&words, sentences)
            .into_iter()
            .map(|piece| {
                let texts: Vec<&str> = words[piece].iter().map(|w| w.text.as_str()).collect();
                texts.join(" ")
            })
            .collect()
    }

    #[test]
    fn a_document_is_read_sentence_by_sentence() {
        let text = "Kovacs moved to the U.S. in 2001, paid $3.5 million. Kovacs said so! Why?";
        assert_eq!(
            piece_texts(text, true),
            [
                "Kovacs moved to the U . S . in 2001 , paid $ 3 . 5 million .",
                "Kovacs said so !",
                "Why ?"
            ]
        );
        assert_eq!(
            piece_texts(text, false).len(),
            1,
            "a short text is one piece"
        );
        assert_eq!(
            piece_texts("", true),
            [""],
            "an empty text is one empty piece"
        );
    }
}
