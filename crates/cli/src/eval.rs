use std::io::Write;
use std::path::{Path, PathBuf};

use burn::tensor::Device;
use clap::Args;
use nertrain_data::{ColumnSpec, Corpus, TagScheme, is_annotated, read_annotated, read_conll};
use nertrain_tagger::{TagOptions, Tagger};
use nertrain_train::{CalibrationBin, entity_types, score_corpus};

use crate::Result;

#[derive(Args)]
pub struct EvalArgs {
    /// A model directory written by `nertrain fit`.
    #[arg(long, requires = "data", conflicts_with = "predicted")]
    model: Option<PathBuf>,
    /// A tagged CoNLL file to predict and score (read with the model's columns), or text with
    /// character spans (`.jsonl`: `{"text", "spans": [{"start", "end", "label"}]}` a line),
    /// tagged as `tag` tags text and scored as exact character spans.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Score a file whose last two columns are the gold and predicted tags, as conlleval does.
    #[arg(long, required_unless_present = "model")]
    predicted: Option<PathBuf>,
    /// Write `word gold predicted` lines here.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Print the scores as JSON instead of conlleval's report.
    #[arg(long)]
    json: bool,
    /// Print a reliability table: predicted entities binned by confidence, with their precision
    /// (always included with --json when a model is given).
    #[arg(long, conflicts_with = "predicted")]
    calibration: bool,
    /// Print a confusion table of entity types, with missed and spurious entities.
    #[arg(long)]
    confusion: bool,
    /// Decode without the tag scheme's constraints.
    #[arg(long)]
    unconstrained: bool,
    /// How strongly a word's other mentions in its document pull its prediction (a
    /// document-level model's own weight, chosen on dev, by default; 0 decodes each sentence on
    /// its own). Documents are the file's `-DOCSTART-` blocks.
    #[arg(long, value_name = "WEIGHT", value_parser = non_negative, conflicts_with = "predicted")]
    consistency: Option<f64>,
    /// Sentences per batch when the model tags (fewer when they are long: a batch holds at
    /// most 8,192 tokens).
    #[arg(long, default_value_t = 100, value_parser = crate::at_least_one())]
    batch_size: usize,
}

pub fn non_negative(value: &str) -> std::result::Result<f64, String> {
    match value.parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("expected a number of at least 0, found {value:?}")),
    }
}

pub fn run(args: EvalArgs, device: &Device) -> Result<()> {
    let mut bins: Option<Vec<CalibrationBin>> = None;
    let (gold, predicted) = match (&args.model, &args.data, &args.predicted) {
        (_, _, Some(path)) => read_predicted(path)?,
        (Some(model), Some(data), None) => {
            let tagger = Tagger::load(model, device)?;
            let defaults = tagger.options();
            let options = TagOptions {
                constrained: defaults.constrained && !args.unconstrained,
                confidence: args.calibration || args.json,
                batch_size: args.batch_size,
                consistency: args.consistency.unwrap_or(defaults.consistency),
                ..TagOptions::default()
            };
            if is_annotated(data) {
                return eval_spans(&args, &tagger, data, options);
            }
            let gold = nertrain_train::read_tagged(data, tagger.meta().columns)?;
            warn_malformed_iobes(&gold);
            warn_unseen_tags(data, &gold, &tagger);
            let evaluation = tagger.evaluate(&gold, options)?;
            bins = evaluation.calibration;
            (gold, evaluation.predicted)
        }
        _ => return Err("give --model DIR --data FILE, or --predicted FILE".into()),
    };

    if let Some(path) = &args.output {
        write_columns(path, &gold, &predicted)?;
    }
    let report = score_corpus(&gold, &predicted);
    let mut out = std::io::stdout().lock();
    if args.json {
        let mut json = report.to_json();
        if let Some(bins) = &bins {
            json["calibration"] = serde_json::to_value(bins)?;
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&json)?)?;
    } else {
        write!(out, "{report}")?;
        if args.confusion {
            let mut confusion = nertrain_data::Confusion::default();
            for (sentence, tags) in gold.sentences.iter().zip(&predicted) {
                confusion.add_sentence(&sentence.tags, tags);
            }
            write!(out, "\n{}", confusion.table())?;
        }
        if let (true, Some(bins)) = (args.calibration, &bins) {
            writeln!(out, "\nconfidence    entities  mean conf.  precision")?;
            for bin in bins {
                writeln!(
                    out,
                    "{:.1}-{:.1}  {:>12}  {:>10.3}  {:>8.2}%",
                    bin.from, bin.to, bin.entities, bin.mean_confidence, bin.precision
                )?;
            }
        }
    }
    Ok(())
}

/// The gold and predicted tag columns of a conlleval-style file, checked to line up.
fn read_predicted(path: &std::path::Path) -> Result<(Corpus, Vec<Vec<String>>)> {
    let gold = nertrain_train::read_tagged(
        path,
        ColumnSpec {
            word_column: 0,
            tag_column: -2,
        },
    )?;
    warn_malformed_iobes(&gold);
    let predicted = read_conll(
        path,
        ColumnSpec {
            word_column: 0,
            tag_column: -1,
        },
    )?;
    for sentence in &predicted.sentences {
        for (i, tag) in sentence.tags.iter().enumerate() {
            nertrain_data::check_tag(tag).map_err(|m| predicted.error_at(sentence, i, m))?;
        }
    }
    warn_malformed_iobes(&predicted);
    Ok((
        gold,
        predicted.sentences.into_iter().map(|s| s.tags).collect(),
    ))
}

/// IOBES tags that break the scheme's rules are read as everywhere in nertrain (an `S-` or `E-`
/// closes its entity, so `S-PER I-PER` is two), but other tools may read them otherwise: say where.
pub fn warn_malformed_iobes(corpus: &Corpus) {
    let tags = corpus.sentences.iter().map(|s| s.tags.as_slice());
    if TagScheme::detect(tags) != TagScheme::Iobes {
        return;
    }
    if let Some((first, sentences)) = corpus.malformed(TagScheme::Iobes) {
        eprintln!(
            "warning: {first} ({sentences} sentence{} in all); read with conlleval's rules, where \
             an S- or E- tag ends its entity",
            if sentences == 1 { "" } else { "s" }
        );
    }
}

/// Warns of entity types of the gold tags that the model never saw in training.
fn warn_unseen_tags(data: &Path, gold: &Corpus, tagger: &Tagger) {
    let known = entity_types(tagger.labels());
    let gold_tags: Vec<String> = gold
        .sentences
        .iter()
        .flat_map(|s| s.tags.iter().cloned())
        .collect();
    let unseen: Vec<String> = entity_types(&gold_tags)
        .into_iter()
        .filter(|label| !known.contains(label))
        .collect();
    if !unseen.is_empty() {
        eprintln!(
            "warning: {}: tags the model never saw in training (it cannot predict them): {}",
            data.display(),
            unseen.join(", ")
        );
    }
}

/// `eval` of span-annotated text: the texts tagged as `tag` tags them, entities scored as exact
/// character spans.
fn eval_spans(args: &EvalArgs, tagger: &Tagger, data: &Path, options: TagOptions) -> Result<()> {
    let gold = read_annotated(data)?;
    let evaluation = tagger.evaluate_spans(&gold, options)?;
    if let Some(first) = evaluation.misaligned.first() {
        eprintln!(
            "warning: {first} ({} span{} in all fall between the model's tokens; scored as missed)",
            evaluation.misaligned.len(),
            if evaluation.misaligned.len() == 1 {
                ""
            } else {
                "s"
            }
        );
    }
    if let Some(path) = &args.output {
        let mut text = String::new();
        for (tagged, gold) in evaluation.tagged.iter().zip(&evaluation.gold_tags) {
            for ((token, gold), predicted) in tagged.tokens.iter().zip(gold).zip(&tagged.tags) {
                text.push_str(&format!("{} {gold} {predicted}\n", token.text));
            }
            text.push('\n');
        }
        nertrain_train::write_atomic(path, text.as_bytes())?;
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&evaluation.report.to_json())?
        )?;
    } else {
        write!(out, "{}", evaluation.report)?;
    }
    Ok(())
}

fn write_columns(path: &std::path::Path, gold: &Corpus, predicted: &[Vec<String>]) -> Result<()> {
    let mut text = String::new();
    for (sentence, tags) in gold.sentences.iter().zip(predicted) {
        for ((word, gold), predicted) in sentence.words.iter().zip(&sentence.tags).zip(tags) {
            text.push_str(&format!("{word} {gold} {predicted}\n"));
        }
        text.push('\n');
    }
    std::fs::write(path, text).map_err(|e| format!("{}: cannot write: {e}", path.display()).into())
}
