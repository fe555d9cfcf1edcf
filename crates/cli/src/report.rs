//! `nertrain report`: a run's per-epoch metrics and its best epoch's per-type dev scores.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use nertrain_train::ModelDir;

use crate::Result;

#[derive(Args)]
pub struct ReportArgs {
    /// A run directory written by `nertrain fit`.
    dir: PathBuf,
}

/// Prints the run in `args.dir`.
pub fn run(args: ReportArgs) -> Result<()> {
    let run = ModelDir::new(&args.dir);
    let metrics = run.read_metrics()?;
    let mut out = std::io::stdout().lock();
    if run.read_meta()?.trained_on_dev {
        writeln!(
            out,
            "trained on train and dev (train.with_dev): the dev scores below are not held out\n"
        )?;
    }
    writeln!(
        out,
        "epoch      loss        lr   dev P   dev R  dev F1   sent/s  train s"
    )?;
    for m in &metrics {
        writeln!(
            out,
            "{:>5} {:>9.4} {:>9.5} {:>7.2} {:>7.2} {:>7.2}{} {:>7.0} {:>8.1}",
            m.epoch,
            m.loss,
            m.lr,
            m.dev_precision,
            m.dev_recall,
            m.dev_f1,
            if m.best { "*" } else { " " },
            m.sentences_per_second,
            m.train_seconds
        )?;
    }
    let Some(best) = metrics.iter().rfind(|m| m.best) else {
        return Ok(());
    };
    writeln!(
        out,
        "\nbest epoch {}: dev F1 {:.2}",
        best.epoch, best.dev_f1
    )?;
    let dev = run.read_dev_scores()?;
    if let Some(epoch) = dev.epoch
        && epoch != best.epoch
    {
        return Err(format!(
            "{}: the dev scores are of epoch {epoch} but metrics.jsonl marks epoch {} best; the \
             run was interrupted while saving: `nertrain fit --resume` completes it",
            run.path.display(),
            best.epoch
        )
        .into());
    }
    writeln!(out, "{:>17}  precision  recall     F1  gold  found", "type")?;
    for (label, s) in &dev.scores.types {
        writeln!(
            out,
            "{label:>17}  {:>9.2} {:>7.2} {:>6.2} {:>5} {:>6}",
            s.precision, s.recall, s.f1, s.gold, s.found
        )?;
    }
    Ok(())
}
