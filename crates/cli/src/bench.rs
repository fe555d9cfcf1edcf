//! `nertrain bench`: training and tagging speed, as JSON on stdout (as the PyTorch reference's
//! `--bench` prints it).

use std::io::Write;
use std::path::PathBuf;

use burn::tensor::Device;
use clap::Args;

use crate::{MAX_BATCH, Result, count};

#[derive(Args)]
pub struct BenchArgs {
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
    /// A dictionary (LABEL<TAB>phrase lines) whose phrases are features of the model measured:
    /// its compile time, and its cost to tagging (finding phrases included).
    #[arg(long, value_name = "FILE")]
    dictionary: Option<PathBuf>,
}

/// Measures, and prints the result as one JSON line.
pub fn run(args: BenchArgs, device: &Device) -> Result<()> {
    let options = nertrain_train::BenchOptions {
        train: args.train,
        dev: args.dev,
        batch_size: args.batch_size,
        steps: args.steps,
        warmup: args.warmup,
        eval_batch_size: args.eval_batch_size,
        seed: 1,
        dictionary: args.dictionary,
    };
    let result = nertrain_train::bench(&options, device)?;
    let json = nertrain_data::io::to_sorted_json(&result, false)?;
    writeln!(std::io::stdout(), "{json}")?;
    Ok(())
}
