//! `nertrain select`: the texts of an unlabelled pool most worth labelling next, written as tasks
//! an annotation tool imports with the model's entities as pre-annotations.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use nertrain_annotate::label_studio::{self, CHECK, LabelingConfig, TASK_DATA_KEYS, Target};
use nertrain_annotate::{PreAnnotated, doccano};
use nertrain_model::Backend;
use nertrain_select::{
    BudgetUnit, MAX_DIVERSITY, Regions, Selected, Selection, Selector, Strategy,
};
use nertrain_tagger::Tagger;

use crate::{Result, UsageError};

/// What the tokens outside a task's regions are, read back.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Rest {
    /// Unknown: partial labels.
    Unknown,
    /// As the model pre-annotated them.
    Model,
}

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
    /// How many texts to choose, or with `--budget-unit tokens`, how many tokens to decide.
    #[arg(long, value_parser = crate::count(1, 100_000_000))]
    budget: usize,
    /// What the budget counts: texts, or tokens to decide (as the model cuts the texts; with
    /// `--regions`, those of the regions only). A text that would overrun what is left is
    /// passed over for a shorter one.
    #[arg(long, default_value = "texts", value_parser = parse_unit)]
    budget_unit: BudgetUnit,
    /// What makes a text worth labelling: least-confidence (1 − p of the best path), margin
    /// (between the two best paths), entropy (of the token marginals, per token),
    /// expected-errors (among the predicted entities), mnlp (−ln p of the best path, per
    /// token), bald (the tags' mutual information with the weights, over passes with dropout
    /// on, per token), or random.
    #[arg(long, default_value = "margin", value_parser = parse_strategy)]
    strategy: Strategy,
    /// Skip a text whose words overlap a chosen one's by more than this (Jaccard similarity of
    /// their word sets, 0 to 1; 1: keep near-duplicates).
    #[arg(long, default_value_t = 0.7, value_parser = similarity)]
    max_similarity: f64,
    /// How much a text's likeness to those chosen before it (the cosine of the model's mean
    /// BiLSTM states over their words) counts against its place in the worth order, 0 to 100;
    /// 0: not at all.
    #[arg(long, default_value_t = 0.0, value_parser = diversity)]
    diversity: f64,
    /// Only each text's doubtful regions are to be decided: its runs of tokens whose most
    /// probable tag has a marginal below a cut, widened to whole entities. The cut is a
    /// threshold (`0.99`: above 0, at most 1), or with `budget`, the pool's least sure tokens
    /// first, as many as a budget of tokens takes (`budget:0.999`: none at or above 0.999).
    /// Label Studio tasks show them as regions of a `check` control; what the rest is read
    /// back as, `--rest` says.
    #[arg(long, value_parser = parse_regions)]
    regions: Option<Regions>,
    /// With `--regions`, what the tokens outside the regions are when an export of the tasks is
    /// read back: `unknown` (the tasks carry their regions as `known`: the regions and the
    /// entities are annotated, the rest trains as unknown), or `model` (the whole text as
    /// submitted: the model's pre-annotation is taken where it was not checked).
    #[arg(long, value_enum, default_value_t = Rest::Unknown, requires = "regions")]
    rest: Rest,
    /// The seed of the random strategy and of bald's dropout masks.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    encoder_cache: crate::common::EncoderCacheArgs,
    /// The annotation tool the tasks are for.
    #[arg(long, value_enum, default_value_t = TaskFormat::LabelStudio)]
    format: TaskFormat,
    /// The labeling config (XML) of the Label Studio project the tasks are for: they are
    /// written under its own names (its entity `<Labels>` control, the `<Text>` it labels and
    /// that text's data key), and entities of labels it lacks are left out. Without it, the
    /// names of Label Studio's default named-entity config (`label`, `text`, `$text`).
    #[arg(long)]
    label_config: Option<PathBuf>,
    /// Write the tasks here instead of stdout (neither the pool nor inside the model).
    #[arg(long)]
    output: Option<PathBuf>,
    /// Write the pool's texts that were not chosen here, one a line in pool order: the pool for
    /// the next round. Lines are the pool's as `select` numbers them (split at line feeds only).
    /// It may be `--input` itself, which is then replaced once the tasks are written.
    #[arg(long)]
    remaining: Option<PathBuf>,
}

/// `path` as the file system would find it: resolved through links, or for a file not written
/// yet, its directory resolved (`None` when that does not exist either).
fn resolved(path: &Path) -> Option<PathBuf> {
    if let Ok(path) = path.canonicalize() {
        return Some(path);
    }
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    Some(parent.canonicalize().ok()?.join(path.file_name()?))
}

/// Refuses outputs that would destroy an input: the tasks over the pool, or either output inside
/// the model directory.
fn check_outputs(args: &SelectArgs) -> Result<()> {
    let refuse = |message: String| Err(UsageError(message).into());
    let model = resolved(&args.model);
    let pool = (!crate::input::is_stdin(&args.input))
        .then(|| resolved(&args.input))
        .flatten();
    let outputs = [("--output", &args.output), ("--remaining", &args.remaining)];
    let mut written: Vec<(&str, PathBuf)> = Vec::new();
    for (flag, path) in outputs {
        let Some(path) = path else { continue };
        let Some(target) = resolved(path) else {
            continue;
        };
        if let Some(model) = &model
            && target.starts_with(model)
        {
            return refuse(format!(
                "{flag} {}: it is inside the model directory {}; write it elsewhere",
                path.display(),
                args.model.display()
            ));
        }
        if flag == "--output" && pool.as_ref() == Some(&target) {
            return refuse(format!(
                "--output {}: it is the pool (--input); the tasks would replace it",
                path.display()
            ));
        }
        if let Some((other, _)) = written.iter().find(|(_, t)| *t == target) {
            return refuse(format!(
                "{flag} {}: {other} writes the same file",
                path.display()
            ));
        }
        written.push((flag, target));
    }
    Ok(())
}

fn parse_strategy(name: &str) -> std::result::Result<Strategy, String> {
    name.parse()
}

fn parse_unit(name: &str) -> std::result::Result<BudgetUnit, String> {
    name.parse()
}

fn diversity(value: &str) -> std::result::Result<f64, String> {
    match value.parse::<f64>() {
        Ok(v) if (0.0..=MAX_DIVERSITY).contains(&v) => Ok(v),
        _ => Err(format!(
            "expected a number from 0 to {MAX_DIVERSITY}, found {value:?}"
        )),
    }
}

fn parse_regions(value: &str) -> std::result::Result<Regions, String> {
    value.parse()
}

fn similarity(value: &str) -> std::result::Result<f64, String> {
    match value.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("expected a number from 0 to 1, found {value:?}")),
    }
}

/// The chosen texts as tasks scored by `strategy`, their regions read back as the only parts
/// decided when `partial`, with the model's entities of the labels `target` has (all without
/// one); and how many entities were left out for want of their label.
fn pre_annotated(
    chosen: Vec<Selected>,
    strategy: Strategy,
    target: Option<&Target>,
    partial: bool,
) -> (Vec<PreAnnotated>, usize) {
    let mut left_out = 0;
    let tasks = chosen
        .into_iter()
        .map(|selected| {
            let line = selected.index + 1;
            let mut pre = selected.pre_annotation(strategy);
            left_out +=
                pre.keep_labels(|label| target.is_none_or(|t| t.labels.iter().any(|l| l == label)));
            pre.into_task(line, partial)
        })
        .collect();
    (tasks, left_out)
}

/// The target the tasks are written for: the entity control of `--label-config`, checked
/// against the model's labels and `--regions`, or Label Studio's default names.
fn target(args: &SelectArgs, tagger: &Tagger) -> Result<Option<Target>> {
    let Some(path) = &args.label_config else {
        return Ok(None);
    };
    if !matches!(args.format, TaskFormat::LabelStudio) {
        return Err(UsageError("--label-config: only Label Studio tasks have one".into()).into());
    }
    let refuse = |message: String| UsageError(format!("{}: {message}", path.display()));
    let xml = nertrain_data::read_text(path)?;
    let config = LabelingConfig::parse(&xml).map_err(refuse)?;
    let (target, check) = config.entity_target().map_err(refuse)?;
    if TASK_DATA_KEYS.contains(&target.data_key.as_str()) {
        return Err(refuse(format!(
            "<Text name=\"{}\"> reads its text from data.{}, which the tasks use for their {}; \
             name another key",
            target.to_name, target.data_key, target.data_key
        ))
        .into());
    }
    if args.regions.is_some() && !check {
        return Err(refuse(format!(
            "--regions shows the regions to decide as a `{CHECK}` control, which the config \
             lacks: add <Labels name=\"{CHECK}\" toName=\"{}\"><Label value=\"{CHECK}\"/></Labels>",
            target.to_name
        ))
        .into());
    }
    let labels = tagger.info().labels;
    target.check_labels(&labels).map_err(refuse)?;
    Ok(Some(target.clone()))
}

pub fn run(args: SelectArgs, backend: Backend) -> Result<()> {
    check_outputs(&args)?;
    let additions = crate::common::Additions {
        encoder_cache: Some((&args.encoder_cache, backend)),
        ..Default::default()
    };
    let tagger = crate::common::load_tagger(&args.model, &backend.device()?, None, additions)?;
    let target = target(&args, &tagger)?;
    let (pool, pool_name) = crate::input::read(&args.input)?;
    let texts: Vec<&str> = pool.lines().collect();
    let chosen = choose(&args, &tagger, &texts, &pool_name)?;
    crate::common::EncoderCacheArgs::report(&tagger);
    let mut left = vec![true; texts.len()];
    for selected in &chosen {
        left[selected.index] = false;
    }
    let cost: usize = chosen.iter().map(Selected::cost).sum();
    let worth = |selected: Option<&Selected>| selected.map_or(0.0, |s| s.worth);
    let (best, last) = (worth(chosen.first()), worth(chosen.last()));
    let partial = args.regions.is_some() && args.rest == Rest::Unknown;
    let (tasks, left_out) = pre_annotated(chosen, args.strategy, target.as_ref(), partial);
    write_tasks(&args, &tasks, target)?;
    if let Some(path) = &args.remaining {
        let mut remaining = String::new();
        for (text, _) in texts.iter().zip(&left).filter(|(_, left)| **left) {
            remaining.push_str(text);
            remaining.push('\n');
        }
        nertrain_data::write_output(path, remaining.as_bytes())?;
    }
    let decided = if args.regions.is_some() {
        "in their regions"
    } else {
        "in all"
    };
    eprintln!(
        "chose {} of {} texts by {} (worth {:.4} down to {:.4}), {cost} tokens to decide {decided}",
        tasks.len(),
        texts.len(),
        args.strategy.name(),
        best,
        last
    );
    if left_out > 0 {
        eprintln!(
            "left out {left_out} entities of labels the labeling config lacks (not pre-annotated in \
             the tasks)"
        );
    }
    Ok(())
}

/// What `args` choose of `texts` (the pool, read from `pool_name`); a line of too many words is
/// an error naming it.
fn choose(
    args: &SelectArgs,
    tagger: &Tagger,
    texts: &[&str],
    pool_name: &Path,
) -> Result<Vec<Selected>> {
    let selection = Selection {
        strategy: args.strategy,
        budget: args.budget,
        unit: args.budget_unit,
        max_similarity: args.max_similarity,
        diversity: args.diversity,
        regions: args.regions,
        seed: args.seed,
    };
    Selector::new(tagger)
        .select(texts, &selection)
        .map_err(|error| match error {
            nertrain_tagger::Error::TooManyWords { text, max } => format!(
                "{}:{}: more than {max} words in one line; split it",
                pool_name.display(),
                text + 1
            )
            .into(),
            error => Box::<dyn std::error::Error + Send + Sync>::from(error),
        })
}

/// Writes `tasks` in `args`' format, to `--output` or stdout: Label Studio's under `target`'s
/// names (its default ones without), with the model version `serve` answers with.
fn write_tasks(args: &SelectArgs, tasks: &[PreAnnotated], target: Option<Target>) -> Result<()> {
    let written = match args.format {
        TaskFormat::LabelStudio => {
            let target = target.unwrap_or_else(Target::default_ner);
            let model_version = nertrain_model::ModelFiles::new(&args.model).weights_id()?;
            label_studio::tasks(tasks, &model_version, &target)
        }
        TaskFormat::Doccano => doccano::lines(tasks),
    };
    match &args.output {
        Some(path) => nertrain_data::write_output(path, written.as_bytes())?,
        None => std::io::stdout().lock().write_all(written.as_bytes())?,
    }
    Ok(())
}
