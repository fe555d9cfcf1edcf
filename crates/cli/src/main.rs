//! `nertrain`: train, evaluate and run BiLSTM-CRF sequence taggers from the command line.
//!
//! Results go to stdout, progress and errors to stderr. Exit codes: 0 success, 1 a runtime
//! error (bad input, missing files, a failed run), 2 a usage error.

mod eval;
mod tag;

use std::path::PathBuf;
use std::process::ExitCode;

use burn::tensor::Device;
use clap::{Parser, Subcommand};
use nertrain_train::{Experiment, FitOptions, Result};

#[derive(Parser)]
#[command(
    name = "nertrain",
    version,
    about = "Train, evaluate and run BiLSTM-CRF named-entity taggers"
)]
struct Cli {
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
        /// Delete a previous run in train.output first.
        #[arg(long)]
        overwrite: bool,
    },
    /// Score predictions with conlleval's rules: a model on a tagged file, or a file of predictions.
    Eval(eval::EvalArgs),
    /// Tag raw text with a trained model.
    Tag(tag::TagArgs),
}

fn run(cli: Cli) -> Result<()> {
    let device = Device::default();
    match cli.command {
        Command::Fit {
            config,
            overrides,
            resume,
        } => {
            let experiment = Experiment::load(&config, &overrides)?;
            eprintln!("{}", experiment.to_toml());
            nertrain_train::fit(&experiment, FitOptions { resume }, &device)?;
            Ok(())
        }
        Command::Eval(args) => eval::run(args, &device),
        Command::Tag(args) => tag::run(args, &device),
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            if tag::is_broken_pipe(error.as_ref()) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {error}");
            ExitCode::from(1)
        }
    }
}
