//! `nertrain tag`: reads texts (arguments, a file or stdin), tags them with `nertrain-tagger`,
//! and prints them as inline text, CoNLL columns or JSON.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use burn::tensor::Device;
use clap::{Args, ValueEnum};
use nertrain_tagger::{Entity, Layout, MAX_NBEST, Record, TagOptions, Tagged, Tagger, html_page};

use crate::Result;

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// The text with entities marked inline: `[Berlin]LOC`.
    Text,
    /// One `word tag` line per word, a blank line after each input.
    Conll,
    /// One JSON object per input: its entities with label and character offsets.
    Json,
    /// One self-contained HTML page showing every input with its entities highlighted
    /// (confidence on hover, n-best paths below), as `nertrain serve` shows them.
    Html,
}

#[derive(Args)]
pub struct TagArgs {
    /// A model directory written by `nertrain fit`.
    #[arg(long)]
    model: PathBuf,
    #[command(flatten)]
    dictionaries: crate::common::DictionaryArgs,
    #[command(flatten)]
    thresholds: crate::common::ThresholdArgs,
    /// Texts to tag; each is one input (and one document, for a model that reads documents).
    /// Without texts or --input, lines are read from stdin when it is not a terminal.
    #[arg(conflicts_with = "input")]
    texts: Vec<String>,
    /// Read one text per line from this file, or from stdin with `-`. For a model that reads
    /// documents, lines up to a blank one are one document.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Read --input as CoNLL columns laid out as the model's training files (blank lines
    /// between sentences, `-DOCSTART-` documents) instead of text: the words are taken as
    /// they are, with the feature columns a model trained on `data.features` reads. The tag
    /// column must be there but is not read (`O` will do).
    #[arg(long, requires = "input")]
    columns: bool,
    /// How each input and its entities are printed on stdout.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Add every token's tag probabilities (marginals) to the JSON output.
    #[arg(long)]
    probs: bool,
    /// Also print the K best tag sequences with their probabilities.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = crate::count(1, MAX_NBEST as u64))]
    nbest: usize,
    /// Decode without the tag scheme's constraints.
    #[arg(long)]
    unconstrained: bool,
    /// How strongly a word's other mentions in its document pull its prediction (a
    /// document-level model's own weight, chosen on dev, by default; 0 tags each sentence on its
    /// own).
    #[arg(long, value_name = "WEIGHT", value_parser = crate::eval::consistency_weight)]
    consistency: Option<f64>,
    #[arg(long, default_value_t = 100, value_parser = crate::count(1, crate::MAX_BATCH),
          help = crate::common::batch_size_help())]
    batch_size: usize,
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
    let additions = crate::common::Additions {
        dictionaries: Some(&args.dictionaries),
        thresholds: Some(&args.thresholds),
        encoder_cache: None,
    };
    let tagger = crate::common::load_tagger(&args.model, device, None, additions)?;
    let model = tagger.options();
    let options = TagOptions {
        constrained: model.constrained && !args.unconstrained,
        consistency: args.consistency.unwrap_or(model.consistency),
        confidence: matches!(args.format, Format::Json | Format::Html),
        marginals: args.probs,
        nbest: args.nbest,
        batch_size: args.batch_size,
        ..model
    };
    let options = crate::tag_options(&tagger, options)?;
    if !args.columns && !tagger.feature_columns().is_empty() {
        return Err(crate::UsageError(format!(
            "{}: the model reads feature columns {:?} of its training data beside the words, \
             which text does not have: give --input FILE --columns, FILE in CoNLL columns as \
             the training files were",
            args.model.display(),
            tagger.feature_columns()
        ))
        .into());
    }
    // Reading, tagging and writing stay on the tagger's threads, as one call.
    tagger.install(|| write_tagged(&tagger, &args, options))?
}

/// Tags `args`'s texts or input and writes them to stdout in `args.format`.
fn write_tagged(tagger: &Tagger, args: &TagArgs, options: TagOptions) -> Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    // The page is written once every input is tagged.
    let mut page: Vec<Record> = Vec::new();
    let mut write_chunk = |tagged: Vec<Tagged>| -> Result<()> {
        for tagged in tagged {
            match args.format {
                Format::Html => page.push(tagged.into_record(tagger.tags())),
                Format::Json => {
                    let record = tagged.into_record(tagger.tags());
                    // Straight to the output: a long text's JSON is never held whole.
                    serde_json::to_writer(&mut out, &record)?;
                    writeln!(out)?;
                }
                format => write_one(&mut out, format, &tagged)?,
            }
        }
        out.flush()?;
        Ok(())
    };
    match &args.input {
        None => write_chunk(tagger.tag(&args.texts, Layout::Texts, options)?)?,
        Some(path) if args.columns => {
            let (text, file) = crate::input::read(path)?;
            let corpus = nertrain_data::parse_conll(&text, &file, &tagger.meta().columns)?;
            for warning in tagger.check_features(&corpus)? {
                eprintln!("warning: {warning}");
            }
            write_chunk(tagger.tag_corpus(&corpus, options)?)?;
        }
        Some(path) => {
            let reader = crate::input::lines(path)?;
            let lines = reader.lines().enumerate().map(|(number, line)| {
                line.map_err(|e| {
                    nertrain_data::DataError::at(path, number + 1, format!("cannot read: {e}"))
                        .into()
                })
            });
            for tagged in tagger.tag_stream(lines, Layout::Lines, options) {
                let tagged = tagged.map_err(|error| match error {
                    nertrain_tagger::Error::TooManyWords { text, max } => {
                        nertrain_data::DataError::at(
                            path,
                            text + 1,
                            format!("more than {max} words in one line; split it"),
                        )
                        .into()
                    }
                    error => Box::<dyn std::error::Error + Send + Sync>::from(error),
                })?;
                write_chunk(tagged)?;
            }
        }
    }
    if matches!(args.format, Format::Html) {
        out.write_all(html_page(Some(&page)).as_bytes())?;
        out.flush()?;
    }
    Ok(())
}

/// `nertrain tokenize`: each text's sentences, one a line, words joined by spaces.
#[derive(Args)]
pub struct TokenizeArgs {
    /// A model directory written by `nertrain fit`.
    #[arg(long)]
    model: PathBuf,
    /// Texts to cut; without them, lines are read from stdin, each one a text.
    texts: Vec<String>,
}

pub fn tokenize(args: TokenizeArgs) -> Result<()> {
    let (model, texts) = (&args.model, &args.texts);
    let files = nertrain_model::ModelFiles::new(model);
    let tokenizer = files.tokenizer(&files.read_meta()?)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut write = |text: &str| -> Result<()> {
        let tokens = tokenizer.tokens(text);
        for sentence in tokenizer.sentences(text, &tokens) {
            let words: Vec<&str> = tokens[sentence].iter().map(|t| t.text.as_str()).collect();
            writeln!(out, "{}", words.join(" "))?;
        }
        writeln!(out)?;
        Ok(())
    };
    if texts.is_empty() {
        for line in std::io::stdin().lock().lines() {
            write(&line?)?;
        }
    } else {
        for text in texts {
            write(text)?;
        }
    }
    out.flush()?;
    Ok(())
}

/// The text with entities marked inline: `[Berlin]LOC`.
fn inline(text: &str, entities: &[Entity]) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut line = String::new();
    let mut at = 0;
    for entity in entities {
        line.extend(&chars[at..entity.start]);
        line.push('[');
        line.push_str(&entity.text);
        line.push(']');
        line.push_str(&entity.label);
        at = entity.end;
    }
    line.extend(&chars[at..]);
    line
}

/// One text as inline text or CoNLL lines (JSON and the page are written from its record).
fn write_one(out: &mut impl Write, format: Format, tagged: &Tagged) -> Result<()> {
    match format {
        Format::Conll => {
            for (t, token) in tagged.tokens.iter().enumerate() {
                write!(out, "{}", token.text)?;
                if tagged.nbest.is_empty() {
                    write!(out, " {}", tagged.tags[t])?;
                }
                for path in &tagged.nbest {
                    write!(out, " {}", path.tags[t])?;
                }
                writeln!(out)?;
            }
            writeln!(out)?;
        }
        Format::Text => {
            writeln!(out, "{}", inline(&tagged.text, &tagged.entities))?;
            for (rank, path) in tagged.nbest.iter().enumerate() {
                writeln!(
                    out,
                    "  #{} p={:.4}  {}",
                    rank + 1,
                    path.probability,
                    inline(&tagged.text, &path.entities)
                )?;
            }
        }
        Format::Json | Format::Html => unreachable!("written from the text's record"),
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
