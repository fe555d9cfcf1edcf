//! `nertrain`: train, evaluate and run BiLSTM-CRF sequence taggers from the command line. It
//! only wires: each command is a module that reads its arguments, calls the libraries and prints
//! what they return.
//!
//! Results go to stdout, progress and errors to stderr. Exit codes: 0 success, 1 a runtime
//! error (bad input, missing files, a failed run), 2 a usage error.

mod alloc;
mod bench;
mod card;
mod common;
mod convert;
mod eval;
mod fit;
mod input;
mod progress;
mod report;
mod select;
mod serve;
mod signals;
mod tag;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use nertrain_model::Backend;

pub use common::{MAX_BATCH, Result, UsageError, count, tag_options};

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
    Fit(fit::FitArgs),
    /// Score predictions with conlleval's rules: a model on a tagged file, or a file of predictions.
    Eval(eval::EvalArgs),
    /// Tag raw text with a trained model.
    Tag(tag::TagArgs),
    /// Serve a model over HTTP: POST /tag, GET /model, GET /health, and a page at GET /.
    Serve(Box<serve::ServeArgs>),
    /// Choose the texts of an unlabelled pool most worth labelling next, and write them as tasks
    /// for an annotation tool, pre-annotated with the model's entities.
    Select(select::SelectArgs),
    /// Cut text into words and sentences as a model does before tagging: one sentence a line,
    /// words separated by spaces, a blank line after each text.
    Tokenize(tag::TokenizeArgs),
    /// Print a run's per-epoch metrics and the best epoch's per-type dev scores.
    Report(report::ReportArgs),
    /// Measure training and tagging speed (JSON on stdout), as the PyTorch reference's --bench.
    Bench(bench::BenchArgs),
    /// Rewrite the tag column of a CoNLL file in another tag scheme; other columns stay as they are.
    Convert(convert::ConvertArgs),
    /// Write a model's card: README.md with Hugging Face metadata, from its run directory.
    Card(card::CardArgs),
}

fn run(cli: Cli) -> Result<()> {
    let backend = cli.backend;
    let device = || backend.unwrap_or_default().device();
    match cli.command {
        Command::Fit(args) => fit::run(args, backend),
        Command::Eval(args) => eval::run(args, backend.unwrap_or_default()),
        Command::Tag(args) => tag::run(args, &device()?),
        Command::Tokenize(args) => tag::tokenize(args),
        Command::Serve(args) => serve::run(*args, &device()?),
        Command::Select(args) => select::run(args, backend.unwrap_or_default()),
        Command::Report(args) => report::run(args),
        Command::Bench(args) => bench::run(args, &device()?),
        Command::Convert(args) => convert::run(args),
        Command::Card(args) => card::run(args),
    }
}

fn main() -> ExitCode {
    alloc::keep_freed_memory();
    let cli = Cli::parse();
    // Training runs on one of a pool's threads: called from outside the pool, each
    // `rayon::join` (one per LSTM step, a direction on each side) puts the caller to sleep until
    // both halves are done, a sleep and a wake-up per step; from inside, the caller runs one half
    // itself. A loaded tagger runs its calls on its own threads.
    let result = if matches!(
        cli.command,
        Command::Fit(_) | Command::Report(_) | Command::Bench(_)
    ) {
        nertrain_tagger::thread_pool(None)
            .map_err(Into::into)
            .and_then(|pool| pool.install(|| run(cli)))
    } else {
        run(cli)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if tag::is_broken_pipe(error.as_ref()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            common::exit_code(error.as_ref())
        }
    }
}
