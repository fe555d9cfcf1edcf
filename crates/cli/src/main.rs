//! `nertrain`: train, evaluate and run BiLSTM-CRF sequence taggers from the command line. It
//! only wires: each command is a module that reads its arguments, calls the libraries and prints
//! what they return.
//!
//! Results go to stdout, progress and errors to stderr. Exit codes: 0 success, 1 a runtime
//! error (bad input, missing files, a failed run), 2 a usage error.

mod alloc;
mod convert;
mod eval;
mod fit;
mod progress;
mod report;
mod select;
mod serve;
mod signals;
mod tag;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use nertrain_data::TagScheme;
use nertrain_tagger::{TagOptions, TagSettings, Tagger};
use nertrain_train::Backend;

#[derive(Parser)]
#[command(
    name = "nertrain",
    version,
    about = "Train, evaluate and run BiLSTM-CRF named-entity taggers"
)]
struct Cli {
    /// The tensor backend: flex (CPU, the default), or ndarray / wgpu when built with that
    /// feature. For `fit` it overrides `train.backend`.
    #[arg(long, global = true)]
    backend: Option<Backend>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train a tagger as an experiment file describes; the best model on dev goes to train.output.
    Fit {
        /// The experiment (TOML): [data], [model] and [train] sections.
        #[arg(long)]
        config: PathBuf,
        /// Override a setting: `--set train.lr=0.01 --set model.hidden=200`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
        /// Continue the run in train.output from its last completed epoch.
        #[arg(long, conflicts_with = "overwrite")]
        resume: bool,
        /// Replace a previous run in train.output, once the new run's data have been read and
        /// checked. Only a run's own files are deleted.
        #[arg(long)]
        overwrite: bool,
        /// Start from this trained model's weights (a run directory) instead of fresh ones, as
        /// `train.start_from`: its words and tags are kept, the training data's new ones added.
        #[arg(long, value_name = "MODEL")]
        start_from: Option<PathBuf>,
    },
    /// Score predictions with conlleval's rules: a model on a tagged file, or a file of predictions.
    Eval(eval::EvalArgs),
    /// Tag raw text with a trained model.
    Tag(tag::TagArgs),
    /// Serve a model over HTTP: POST /tag, GET /model, GET /health, and a page at GET /.
    Serve(serve::ServeArgs),
    /// Choose the texts of an unlabelled pool most worth labelling next, and write them as tasks
    /// for an annotation tool, pre-annotated with the model's entities.
    Select(select::SelectArgs),
    /// Cut text into words and sentences as a model does before tagging: one sentence a line,
    /// words separated by spaces, a blank line after each text.
    Tokenize {
        /// A model directory written by `nertrain fit`.
        #[arg(long)]
        model: PathBuf,
        /// Texts to cut; without them, lines are read from stdin, each one a text.
        texts: Vec<String>,
    },
    /// Print a run's per-epoch metrics and the best epoch's per-type dev scores.
    Report {
        /// A run directory written by `nertrain fit`.
        dir: PathBuf,
    },
    /// Measure training and tagging speed (JSON on stdout), as the PyTorch reference's --bench.
    Bench {
        /// Tagged CoNLL file whose sentences the training steps use.
        #[arg(long)]
        train: PathBuf,
        /// Tagged CoNLL file that is tagged, whole, to measure tagging.
        #[arg(long)]
        dev: PathBuf,
        /// Sentences per training step.
        #[arg(long, default_value_t = 32, value_parser = count(1, MAX_BATCH))]
        batch_size: usize,
        /// Training steps measured.
        #[arg(long, default_value_t = 200, value_parser = count(1, 1_000_000))]
        steps: usize,
        /// Training steps run first and not measured.
        #[arg(long, default_value_t = 10, value_parser = count(0, 1_000_000))]
        warmup: usize,
        /// Sentences per tagging batch.
        #[arg(long, default_value_t = 100, value_parser = count(1, MAX_BATCH))]
        eval_batch_size: usize,
    },
    /// Rewrite the tag column of a CoNLL file in another tag scheme; other columns stay as they are.
    Convert {
        /// The file's scheme; its tags must be well formed in it. Without it, the tags are read
        /// leniently, as conlleval reads them.
        #[arg(long)]
        from: Option<TagScheme>,
        /// The scheme to write: iob1, iob2 (bio) or iobes (bioes).
        #[arg(long)]
        to: TagScheme,
        /// The tag column (negative counts from the end).
        #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
        tag_column: isize,
        /// The CoNLL file to convert (`-`: stdin), or span-annotated text (`.jsonl`), written as
        /// CoNLL columns cut into words by the treebank rules, as `fit` reads it.
        file: PathBuf,
        /// Write here instead of stdout.
        #[arg(long)]
        output: Option<PathBuf>,
    },
}

/// Any failure of a command: the library's typed errors, and the CLI's own (output, usage).
pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A count or size on the command line: from `min` to `max`, so that no number asks for more
/// than a machine has (or overflows).
pub fn count(min: u64, max: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(min..=max)
}

/// The most sentences a batch may hold.
pub const MAX_BATCH: u64 = nertrain_tagger::MAX_BATCH_SENTENCES as u64;

/// A mistake on the command line found after parsing it: exit code 2, as clap's own.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The options a command's flags make over the model's own; a setting the model cannot use is a
/// usage error naming its flag.
pub fn tag_options(tagger: &Tagger, settings: TagSettings) -> Result<TagOptions> {
    tagger.options_with(settings).map_err(|error| match error {
        nertrain_tagger::Error::InvalidOption { option, message } => {
            UsageError(format!("--{}: {message}", option.replace('_', "-"))).into()
        }
        other => other.into(),
    })
}

/// All of stdin as text; bytes that are not UTF-8 are an error naming their line.
pub fn read_stdin() -> Result<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .read_to_end(&mut bytes)
        .map_err(|e| format!("stdin: cannot read: {e}"))?;
    Ok(nertrain_data::text_from_bytes(
        bytes,
        std::path::Path::new("stdin"),
    )?)
}

fn run(cli: Cli) -> Result<()> {
    let backend = cli.backend;
    let device = || backend.unwrap_or_default().device();
    match cli.command {
        Command::Fit {
            config,
            overrides,
            resume,
            overwrite,
            start_from,
        } => fit::run(fit::FitArgs {
            config: &config,
            overrides: &overrides,
            resume,
            overwrite,
            backend,
            start_from,
        }),
        Command::Eval(args) => eval::run(args, &device()?),
        Command::Tag(args) => tag::run(args, &device()?),
        Command::Tokenize { model, texts } => tag::tokenize(&model, &texts),
        Command::Serve(args) => serve::run(args, &device()?),
        Command::Select(args) => select::run(args, &device()?),
        Command::Report { dir } => report::run(&dir),
        Command::Bench {
            train,
            dev,
            batch_size,
            steps,
            warmup,
            eval_batch_size,
        } => {
            let options = nertrain_train::BenchOptions {
                train,
                dev,
                batch_size,
                steps,
                warmup,
                eval_batch_size,
                seed: 1,
            };
            let result = nertrain_train::bench(&options, &device()?)?;
            // Through a JSON value, so the keys come out sorted.
            let json = serde_json::to_value(&result)?;
            writeln!(std::io::stdout(), "{}", serde_json::to_string(&json)?)?;
            Ok(())
        }
        Command::Convert {
            from,
            to,
            tag_column,
            file,
            output,
        } => convert::run(from, to, tag_column, &file, output.as_deref()),
    }
}

/// The exit code of a failed command: 2 for a usage error (a flag, or a `--set` override), 1
/// for anything else.
fn exit_code(error: &(dyn std::error::Error + 'static)) -> ExitCode {
    let config = match error.downcast_ref::<nertrain_train::Error>() {
        Some(nertrain_train::Error::Config(config)) => Some(config),
        _ => error.downcast_ref::<nertrain_train::ConfigError>(),
    };
    let usage = error.is::<UsageError>() || config.is_some_and(|c| c.is_usage());
    ExitCode::from(if usage { 2 } else { 1 })
}

fn main() -> ExitCode {
    alloc::keep_freed_memory();
    let cli = Cli::parse();
    // A command runs on one of the pool's threads: called from outside the pool, each
    // `rayon::join` (one per LSTM step, a direction on each side) puts the caller to sleep until
    // both halves are done, a sleep and a wake-up per step; from inside, the caller runs one half
    // itself. The server hands its work to a pool of its own from the async runtime's threads.
    let result = if matches!(cli.command, Command::Serve(_)) {
        run(cli)
    } else {
        nertrain_tagger::thread_pool(None)
            .map_err(Into::into)
            .and_then(|pool| pool.install(|| run(cli)))
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if tag::is_broken_pipe(error.as_ref()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            exit_code(error.as_ref())
        }
    }
}
