//! `nertrain eval`: scores a model on a gold file (through `nertrain-tagger`), or a file of
//! predictions, and prints conlleval's report, JSON, or confusion and reliability tables.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use burn::tensor::Device;
use clap::Args;
use nertrain_data::job::ScoreJob;
use nertrain_data::{LabelConfidences, OperatingPoint, THRESHOLD_GRID};
use nertrain_model::{Backend, LabelThreshold};
use nertrain_tagger::{FileEvaluation, MAX_CONSISTENCY, TagOptions, Tagger};
use serde::Serialize;

use crate::{Result, UsageError};

#[derive(Args)]
pub struct EvalArgs {
    /// A model directory written by `nertrain fit`.
    #[arg(long, requires = "data", conflicts_with = "predicted")]
    model: Option<PathBuf>,
    #[command(flatten)]
    dictionaries: crate::common::DictionaryArgs,
    #[command(flatten)]
    thresholds: crate::common::ThresholdArgs,
    #[command(flatten)]
    encoder_cache: crate::common::EncoderCacheArgs,
    /// A tagged CoNLL file to predict and score (read with the model's columns; `-`: stdin), or
    /// text with character spans (`.jsonl`: `{"text", "spans": [{"start", "end", "label"}]}` a
    /// line), tagged as `tag` tags text and scored as exact character spans.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Score a file whose last two columns are the gold and predicted tags, as conlleval does.
    #[arg(long, required_unless_present_any = ["model", "job"], conflicts_with = "encoder_cache")]
    predicted: Option<PathBuf>,
    /// Run a scoring job (JSON) another program wrote: a model on a held-out file, read and
    /// scored as `fit` chooses its epoch, its scores written to the job's file. The job says
    /// everything, so no other option is taken.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["model", "data", "predicted", "encoder_cache", "output", "json", "calibration", "confusion", "sweep", "unconstrained", "consistency"])]
    job: Option<PathBuf>,
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
    /// Print each label's precision and recall with its entities below a confidence threshold
    /// left out, at thresholds from 0 to 0.99 (with --json: at every threshold that changes
    /// them). Every entity is scored, whatever thresholds the model has.
    #[arg(long = "thresholds", conflicts_with_all = ["predicted", "thresholds", "biases", "all_entities"])]
    sweep: bool,
    /// Choose LABEL's threshold on this file: the highest that keeps its recall at PERCENT or
    /// more (an error when every entity kept falls short); repeatable.
    #[arg(long, value_name = "LABEL=PERCENT", value_parser = crate::common::label_number, requires = "sweep")]
    recall: Vec<(String, f64)>,
    /// Store the thresholds chosen with --recall in the model directory (thresholds.json),
    /// beside those of other labels: `tag`, `eval`, `serve` and Python then apply them.
    #[arg(long, requires = "recall")]
    store: bool,
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

pub fn run(args: EvalArgs, backend: Backend) -> Result<()> {
    let device = &backend.device()?;
    if let Some(job) = &args.job {
        return run_job(&ScoreJob::read(job)?, device);
    }
    let evaluation = match (&args.model, &args.data, &args.predicted) {
        (_, _, Some(path)) => FileEvaluation::of_predictions(path)?,
        (Some(model), Some(data), None) => {
            let additions = crate::common::Additions {
                dictionaries: Some(&args.dictionaries),
                thresholds: Some(&args.thresholds),
                encoder_cache: Some((&args.encoder_cache, backend)),
            };
            let tagger = crate::common::load_tagger(model, device, None, additions)?;
            let model = tagger.options();
            let options = TagOptions {
                constrained: model.constrained && !args.unconstrained,
                consistency: args.consistency.unwrap_or(model.consistency),
                confidence: args.calibration || args.json || args.sweep,
                batch_size: args.batch_size,
                thresholds: !args.sweep,
                ..model
            };
            let options = crate::tag_options(&tagger, options)?;
            let evaluation = if crate::input::is_stdin(data) {
                let (text, stdin) = crate::input::read(data)?;
                let gold = nertrain_data::parse_tagged(&text, &stdin, &tagger.meta().columns)?;
                tagger.evaluate_gold(gold, options)?
            } else {
                tagger.evaluate_file(data, options)?
            };
            crate::common::EncoderCacheArgs::report(&tagger);
            if args.sweep {
                return sweep(&args, tagger, &evaluation, data, options);
            }
            evaluation
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

/// `eval --job`: the job's model (with its dictionaries) on its data, read and scored as `fit`
/// chooses its epoch, its open labels left out; the scores written whole to the job's file.
fn run_job(job: &ScoreJob, device: &Device) -> Result<()> {
    let tagger = Tagger::load(&job.model, device)?
        .with_dictionaries(&job.dictionaries, job.replace_dictionary)?;
    let options = tagger.options();
    let evaluation = tagger.evaluate_as_fit(&job.data, options)?;
    for warning in &evaluation.warnings {
        eprintln!("warning: {warning}");
    }
    let scores = evaluation.report.without(&job.open_labels).scores();
    let json = nertrain_data::io::to_sorted_json(&scores, true)?;
    nertrain_data::io::write_atomic(&job.scores, json.as_bytes())?;
    Ok(())
}

/// Each label's precision, recall and F1 at each threshold of the grid, as JSON (with the
/// thresholds `chosen` for the asked recalls) or as a table a label.
fn print_curves(
    out: &mut impl Write,
    json: bool,
    labels: &BTreeMap<String, LabelConfidences>,
    chosen: Option<&BTreeMap<String, LabelThreshold>>,
) -> Result<()> {
    if json {
        let curves: BTreeMap<&String, ThresholdCurve> = labels
            .iter()
            .map(|(label, entities)| {
                let curve = ThresholdCurve {
                    gold: entities.gold,
                    all: entities.at(0.0),
                    curve: entities.curve(),
                };
                (label, curve)
            })
            .collect();
        let text = nertrain_data::io::to_sorted_json(
            &(SweepJson {
                labels: curves,
                chosen,
            }),
            true,
        )?;
        writeln!(out, "{text}")?;
    } else {
        for (label, entities) in labels {
            writeln!(out, "{label} ({} gold)", entities.gold)?;
            writeln!(out, "threshold      kept  precision     recall        F1")?;
            for threshold in THRESHOLD_GRID {
                let p = entities.at(threshold);
                writeln!(
                    out,
                    "{threshold:>9.2}  {:>8}  {:>8.2}%  {:>8.2}%  {:>8.2}",
                    p.kept, p.precision, p.recall, p.f1
                )?;
            }
            writeln!(out)?;
        }
    }
    Ok(())
}

/// `--thresholds`: each label's precision and recall by confidence threshold, and the thresholds
/// `--recall` chooses, stored with `--store`.
fn sweep(
    args: &EvalArgs,
    tagger: Tagger,
    evaluation: &FileEvaluation,
    data: &Path,
    options: TagOptions,
) -> Result<()> {
    for warning in &evaluation.warnings {
        eprintln!("warning: {warning}");
    }
    let empty = BTreeMap::new();
    let labels = evaluation.by_label.as_ref().unwrap_or(&empty);
    let (tagger, chosen) = if args.recall.is_empty() {
        (Some(tagger), Ok(BTreeMap::new()))
    } else if crate::input::is_stdin(data) {
        return Err(UsageError(
            "--recall: choosing reads the file again; give a file, not stdin".into(),
        )
        .into());
    } else {
        match tagger.choose_for_recall(data, labels, &args.recall, options) {
            Ok((tagger, chosen)) => (Some(tagger), Ok(chosen)),
            Err(e) => (None, Err(e)),
        }
    };
    let mut out = std::io::stdout().lock();
    print_curves(&mut out, args.json, labels, chosen.as_ref().ok())?;
    let chosen = chosen.map_err(|e| UsageError(format!("--{e}")))?;
    for (label, threshold) in &chosen {
        if let (Some(how), false) = (&threshold.chosen, args.json) {
            let how_far = if threshold.bias > 0.0 {
                format!("bias {:.4} raises", threshold.bias)
            } else {
                format!("threshold {:.6} keeps", threshold.threshold)
            };
            writeln!(
                out,
                "{label}: {how_far} recall to {:.2}% (asked {}%) at precision {:.2}%",
                how.recall, how.target_recall, how.precision
            )?;
        }
    }
    if let (true, Some(tagger)) = (args.store && !chosen.is_empty(), tagger) {
        tagger.store_thresholds(chosen)?;
        eprintln!(
            "stored in {}",
            tagger.dir().join("thresholds.json").display()
        );
    }
    Ok(())
}

/// One label's operating points in `eval --thresholds --json`.
#[derive(Serialize)]
struct ThresholdCurve {
    /// Its gold entities.
    gold: usize,
    /// Its scores with every entity kept.
    all: OperatingPoint,
    /// Its scores at each threshold that changes them, highest first.
    curve: Vec<OperatingPoint>,
}

/// What `eval --thresholds --json` prints.
#[derive(Serialize)]
struct SweepJson<'a> {
    labels: BTreeMap<&'a String, ThresholdCurve>,
    #[serde(skip_serializing_if = "Option::is_none")]
    chosen: Option<&'a BTreeMap<String, LabelThreshold>>,
}
