//! `nertrain select`: the texts of an unlabelled pool most worth labelling next, written as tasks
//! an annotation tool imports with the model's entities as pre-annotations.

use std::io::Write;
use std::path::PathBuf;

use burn::tensor::Device;
use clap::{Args, ValueEnum};
use nertrain_data::{CharSpan, PreAnnotated, doccano_lines, label_studio_tasks};
use nertrain_tagger::{Selection, Strategy, Tagger};

use crate::Result;

/// The tool the tasks are for.
#[derive(Clone, Copy, ValueEnum)]
enum TaskFormat {
    /// Label Studio: a JSON array of tasks, each with the model's entities as a prediction
    /// (scores per entity and per task).
    LabelStudio,
    /// doccano: JSON lines, the model's entities under `label`.
    Doccano,
}

#[derive(Args)]
pub struct SelectArgs {
    /// A model directory written by `nertrain fit`.
    #[arg(long)]
    model: PathBuf,
    /// The unlabelled pool: one text a line (`-`: stdin). Blank lines are never chosen.
    #[arg(long)]
    input: PathBuf,
    /// How many texts to choose.
    #[arg(long, value_parser = crate::count(1, 100_000_000))]
    budget: usize,
    /// What makes a text worth labelling: least-confidence (1 − p of the best path), margin
    /// (between the two best paths), entropy (of the token marginals, per token),
    /// expected-errors (among the predicted entities), or random.
    #[arg(long, default_value = "margin", value_parser = parse_strategy)]
    strategy: Strategy,
    /// Skip a text whose words overlap a chosen one's by more than this (Jaccard similarity of
    /// their word sets, 0 to 1; 1: keep near-duplicates).
    #[arg(long, default_value_t = 0.7, value_parser = similarity)]
    max_similarity: f64,
    /// The seed of the random strategy.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The annotation tool the tasks are for.
    #[arg(long, value_enum, default_value_t = TaskFormat::LabelStudio)]
    format: TaskFormat,
    /// Write the tasks here instead of stdout.
    #[arg(long)]
    output: Option<PathBuf>,
}

fn parse_strategy(name: &str) -> std::result::Result<Strategy, String> {
    name.parse()
}

fn similarity(value: &str) -> std::result::Result<f64, String> {
    match value.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("expected a number from 0 to 1, found {value:?}")),
    }
}

pub fn run(args: SelectArgs, device: &Device) -> Result<()> {
    let tagger = Tagger::load(&args.model, device)?;
    let pool = if args.input.as_os_str() == "-" {
        crate::read_stdin()?
    } else {
        nertrain_data::read_text(&args.input)?
    };
    let texts: Vec<&str> = pool.lines().collect();
    let selection = Selection {
        strategy: args.strategy,
        budget: args.budget,
        max_similarity: args.max_similarity,
        seed: args.seed,
    };
    let chosen = tagger.select(&texts, &selection)?;
    let tasks: Vec<PreAnnotated> = chosen
        .into_iter()
        .map(|selected| PreAnnotated {
            spans: selected
                .tagged
                .entities
                .iter()
                .map(|e| {
                    let span = CharSpan {
                        start: e.start,
                        end: e.end,
                        label: e.label.clone(),
                    };
                    (span, e.confidence.unwrap_or(1.0))
                })
                .collect(),
            text: selected.tagged.text,
            score: selected.score,
            line: selected.index + 1,
        })
        .collect();
    let model_version = format!(
        "nertrain {} {}",
        env!("CARGO_PKG_VERSION"),
        args.model.display()
    );
    let written = match args.format {
        TaskFormat::LabelStudio => label_studio_tasks(&tasks, &model_version),
        TaskFormat::Doccano => doccano_lines(&tasks),
    };
    match &args.output {
        Some(path) => nertrain_train::write_output(path, written.as_bytes())?,
        None => std::io::stdout().lock().write_all(written.as_bytes())?,
    }
    let worth = |task: Option<&PreAnnotated>| task.map_or(0.0, |t| t.score);
    eprintln!(
        "chose {} of {} texts by {} (worth {:.4} down to {:.4})",
        tasks.len(),
        texts.len(),
        args.strategy.name(),
        worth(tasks.first()),
        worth(tasks.last())
    );
    Ok(())
}
