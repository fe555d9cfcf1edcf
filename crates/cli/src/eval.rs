//! `nertrain eval`: scores a model on a gold file (through `nertrain-tagger`), or a file of
//! predictions, and prints conlleval's report, JSON, or confusion and reliability tables.

use std::io::Write;
use std::path::PathBuf;

use burn::tensor::Device;
use clap::Args;
use nertrain_tagger::{FileEvaluation, MAX_CONSISTENCY, TagSettings, Tagger};

use crate::Result;

#[derive(Args)]
pub struct EvalArgs {
    /// A model directory written by `nertrain fit`.
    #[arg(long, requires = "data", conflicts_with = "predicted")]
    model: Option<PathBuf>,
    #[command(flatten)]
    dictionaries: crate::common::DictionaryArgs,
    /// A tagged CoNLL file to predict and score (read with the model's columns; `-`: stdin), or
    /// text with character spans (`.jsonl`: `{"text", "spans": [{"start", "end", "label"}]}` a
    /// line), tagged as `tag` tags text and scored as exact character spans.
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
    #[arg(long, value_name = "WEIGHT", value_parser = consistency_weight, conflicts_with = "predicted")]
    consistency: Option<f64>,
    #[arg(long, default_value_t = 100, value_parser = crate::count(1, crate::MAX_BATCH),
          help = crate::common::batch_size_help())]
    batch_size: usize,
}

/// Parses `--consistency`: a weight from 0 to [`MAX_CONSISTENCY`].
pub fn consistency_weight(value: &str) -> std::result::Result<f64, String> {
    match value.parse::<f64>() {
        Ok(v) if (0.0..=MAX_CONSISTENCY).contains(&v) => Ok(v),
        _ => Err(format!(
            "expected a number from 0 to {MAX_CONSISTENCY}, found {value:?}"
        )),
    }
}

pub fn run(args: EvalArgs, device: &Device) -> Result<()> {
    let evaluation = match (&args.model, &args.data, &args.predicted) {
        (_, _, Some(path)) => FileEvaluation::of_predictions(path)?,
        (Some(model), Some(data), None) => {
            let tagger = args.dictionaries.apply(Tagger::load(model, device)?)?;
            let settings = TagSettings {
                unconstrained: args.unconstrained,
                consistency: args.consistency,
                confidence: args.calibration || args.json,
                batch_size: Some(args.batch_size),
                ..TagSettings::default()
            };
            let options = crate::tag_options(&tagger, settings)?;
            if crate::input::is_stdin(data) {
                let (text, stdin) = crate::input::read(data)?;
                let gold = nertrain_data::parse_tagged(&text, &stdin, &tagger.meta().columns)?;
                tagger.evaluate_gold(gold, options)?
            } else {
                tagger.evaluate_file(data, options)?
            }
        }
        _ => return Err("give --model DIR --data FILE, or --predicted FILE".into()),
    };
    for warning in &evaluation.warnings {
        eprintln!("warning: {warning}");
    }
    if let Some(path) = &args.output {
        nertrain_data::write_output(path, evaluation.columns().as_bytes())?;
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        let json = nertrain_data::io::to_sorted_json(&evaluation.scores(), true)?;
        writeln!(out, "{json}")?;
        return Ok(());
    }
    write!(out, "{}", evaluation.report)?;
    if let (true, Some(confusion)) = (args.confusion, evaluation.confusion()) {
        write!(out, "\n{}", confusion.table())?;
    }
    if let (true, Some(bins)) = (args.calibration, &evaluation.calibration) {
        writeln!(out, "\nconfidence    entities  mean conf.  precision")?;
        for bin in bins {
            writeln!(
                out,
                "{:.1}-{:.1}  {:>12}  {:>10.3}  {:>8.2}%",
                bin.from, bin.to, bin.entities, bin.mean_confidence, bin.precision
            )?;
        }
    }
    Ok(())
}
