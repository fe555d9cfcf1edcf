//! `nertrain`: train, evaluate and run BiLSTM-CRF sequence taggers from the command line.
//!
//! Results go to stdout, progress and errors to stderr. Exit codes: 0 success, 1 a runtime
//! error (bad input, missing files, a failed run), 2 a usage error.

/// Training and tagging allocate and free large buffers every step; the system allocator returns
/// them to the kernel and page-faults them back in each time. So does mimalloc unless told not to
/// ([`keep_freed_memory`]).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Stops mimalloc from handing freed memory back to the kernel ("purging", by default 10 ms after
/// a free). A decoding batch or a training step takes longer than that, so each one's buffers
/// were faulted back in and zeroed by the kernel: 28% of tagging time under perf, 20% of a
/// training epoch. `MIMALLOC_PURGE_DELAY` still overrides it. [`release_freed_memory`] gives
/// memory back where a phase of different buffers begins.
fn keep_freed_memory() {
    /// `mi_option_purge_delay` in mimalloc v3's `include/mimalloc.h`; -1: never purge.
    const MI_OPTION_PURGE_DELAY: c_int = 15;
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mimalloc (linked through the `mimalloc` crate) defines this function; options
        // may be set at any time.
        unsafe { mimalloc_ffi::mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
    }
}

/// Returns freed memory to the kernel now. Called between training and evaluation: kept across
/// that boundary, training's buffers and then evaluation's (on every thread) added up to 100 MiB
/// more peak memory in a CoNLL epoch than with mimalloc's default purging.
fn release_freed_memory() {
    // SAFETY: as above; `mi_collect` may be called from any thread at any time.
    unsafe { mimalloc_ffi::mi_collect(true) }
}

use std::ffi::{c_int, c_long};

mod mimalloc_ffi {
    use super::{c_int, c_long};
    unsafe extern "C" {
        pub fn mi_option_set(option: c_int, value: c_long);
        pub fn mi_collect(force: bool);
    }
}

mod eval;
mod progress;
mod serve;
mod tag;

use std::path::PathBuf;
use std::process::ExitCode;

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use clap::{Parser, Subcommand};
use nertrain_data::{ColumnSpec, TagScheme, convert_tag_column};
use nertrain_train::{Backend, Experiment, FitEvent, FitOptions};

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
    },
    /// Score predictions with conlleval's rules: a model on a tagged file, or a file of predictions.
    Eval(eval::EvalArgs),
    /// Tag raw text with a trained model.
    Tag(tag::TagArgs),
    /// Serve a model over HTTP: POST /tag, GET /model, GET /health, and a page at GET /.
    Serve(serve::ServeArgs),
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

/// `--consistency` weighs a word's other mentions in its document: a model that reads
/// sentences alone has none to weigh, so asking for it is a mistake rather than a no-op.
pub fn check_consistency(weight: Option<f64>, tagger: &nertrain_tagger::Tagger) -> Result<()> {
    if weight.is_some() && !tagger.reads_documents() {
        return Err(UsageError(
            "--consistency: this model reads each sentence alone (data.context = \"sentence\"); \
             the weight applies to models that read documents"
                .into(),
        )
        .into());
    }
    Ok(())
}

/// The most sentences a batch may hold.
pub const MAX_BATCH: u64 = 100_000;

/// A mistake on the command line found after parsing it: exit code 2, as clap's own.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

fn run(cli: Cli) -> Result<()> {
    let backend = cli.backend;
    let device = || backend.unwrap_or_default().device();
    match cli.command {
        Command::Fit {
            config,
            overrides,
            resume,
            overwrite,
        } => {
            let mut experiment = Experiment::load(&config, &overrides)?;
            if let Some(backend) = backend {
                experiment.train.backend = backend;
            }
            let device = experiment.train.backend.device()?;
            eprintln!("{}", experiment.to_toml());
            let interrupt = Arc::new(AtomicBool::new(false));
            let stopped_by = stop_on_signals(interrupt.clone())?;
            let mut reporter = progress::FitReporter::new(interrupt.clone());
            let outcome = nertrain_train::fit(
                &experiment,
                FitOptions {
                    resume,
                    overwrite,
                    interrupt: Some(interrupt),
                },
                &device,
                &mut |event| {
                    if matches!(event, FitEvent::EpochTrained | FitEvent::EpochEnded(_)) {
                        release_freed_memory();
                    }
                    reporter.show(event)
                },
            )?;
            if let Some(error) = reporter.stdout_error {
                // A closed pipe (`fit | head`) ends quietly, as it does `tag`; the run is saved.
                if error.kind() == std::io::ErrorKind::BrokenPipe {
                    return Ok(());
                }
                return Err(format!(
                    "cannot write to stdout: {error}; the run stopped and was saved (continue it \
                     with --resume)"
                )
                .into());
            }
            if outcome.interrupted {
                // 128 + the signal, as a shell reports a process the signal ended.
                std::process::exit(128 + stopped_by.load(Ordering::SeqCst));
            }
            Ok(())
        }
        Command::Eval(args) => eval::run(args, &device()?),
        Command::Tag(args) => tag::run(args, &device()?),
        Command::Tokenize { model, texts } => tag::tokenize(&model, &texts),
        Command::Serve(args) => serve::run(args, &device()?),
        Command::Report { dir } => report(&dir),
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
            writeln!(std::io::stdout(), "{}", serde_json::to_string(&result)?)?;
            Ok(())
        }
        Command::Convert {
            from,
            to,
            tag_column,
            file,
            output,
        } => {
            if nertrain_data::is_annotated(&file) {
                let converted = annotated_to_conll(&file, to)?;
                return match output {
                    Some(path) => Ok(nertrain_train::write_output(&path, converted.as_bytes())?),
                    None => Ok(std::io::stdout().lock().write_all(converted.as_bytes())?),
                };
            }
            let (text, file) = if file.as_os_str() == "-" {
                (read_stdin()?, PathBuf::from("stdin"))
            } else {
                (nertrain_data::read_text(&file)?, file)
            };
            let columns = ColumnSpec {
                word_column: 0,
                tag_column,
            };
            if from.is_none() {
                let corpus = nertrain_data::parse_conll(&text, &file, columns)?;
                if let Some(warning) = corpus.iobes_warning() {
                    eprintln!("warning: {warning}");
                }
            }
            let converted = convert_tag_column(&text, &file, columns, from, to)?;
            match output {
                Some(path) => nertrain_train::write_output(&path, converted.as_bytes())?,
                None => std::io::stdout().lock().write_all(converted.as_bytes())?,
            }
            Ok(())
        }
    }
}

/// On Ctrl-C (SIGINT) or SIGTERM (what `kill`, systemd, Docker and Slurm send), sets
/// `interrupt`: training stops after the current batch and saves. A second signal ends the
/// process at once. Returns where the signal's number is kept.
fn stop_on_signals(interrupt: Arc<AtomicBool>) -> Result<Arc<AtomicI32>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let received = Arc::new(AtomicI32::new(SIGINT));
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .map_err(|e| format!("cannot handle signals: {e}"))?;
    let stopped_by = received.clone();
    std::thread::spawn(move || {
        for signal in signals.forever() {
            if interrupt.swap(true, Ordering::SeqCst) {
                // A second signal: the user does not want to wait for the save.
                std::process::exit(128 + signal);
            }
            stopped_by.store(signal, Ordering::SeqCst);
            eprintln!(
                "\n{}: finishing the current batch and saving (again to quit now)",
                if signal == SIGTERM {
                    "terminated"
                } else {
                    "interrupt"
                }
            );
        }
    });
    Ok(received)
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

/// Span-annotated text as a CoNLL file of `word tag` lines in `scheme`, cut by the treebank rules
/// as `fit` cuts it, documents after `-DOCSTART-` lines.
fn annotated_to_conll(file: &std::path::Path, scheme: TagScheme) -> Result<String> {
    let tokenizer = nertrain_data::Tokenizer::new(&nertrain_data::TokenizerSpec::treebank())?;
    let (corpus, misaligned) = nertrain_data::read_annotated(file)?.tokenize(&tokenizer);
    for span in &misaligned {
        eprintln!("warning: {span}");
    }
    let mut text = String::new();
    let mut document = None;
    for sentence in &corpus.sentences {
        if document != Some(sentence.document) {
            text.push_str("-DOCSTART- O\n\n");
            document = Some(sentence.document);
        }
        let tags = nertrain_data::convert_tags(&sentence.tags, scheme);
        for (word, tag) in sentence.words.iter().zip(tags) {
            text.push_str(&format!("{word} {tag}\n"));
        }
        text.push('\n');
    }
    Ok(text)
}

fn report(dir: &std::path::Path) -> Result<()> {
    let run = nertrain_train::ModelDir::new(dir);
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
    let dev = run.read_dev_report()?;
    if let Some(epoch) = dev["epoch"].as_u64()
        && epoch != best.epoch as u64
    {
        return Err(format!(
            "{}: the dev scores are of epoch {epoch} but metrics.jsonl marks epoch {} best; the \
             run was interrupted while saving: `nertrain fit --resume` completes it",
            run.path.display(),
            best.epoch
        )
        .into());
    }
    if let Some(types) = dev["types"].as_object() {
        writeln!(out, "{:>17}  precision  recall     F1  gold  found", "type")?;
        for (label, s) in types {
            writeln!(
                out,
                "{label:>17}  {:>9.2} {:>7.2} {:>6.2} {:>5} {:>6}",
                s["precision"].as_f64().unwrap_or(0.0),
                s["recall"].as_f64().unwrap_or(0.0),
                s["f1"].as_f64().unwrap_or(0.0),
                s["gold"],
                s["found"]
            )?;
        }
    }
    Ok(())
}

/// Runs `command` on one of rayon's threads. Called from outside the pool, each `rayon::join`
/// (one per LSTM step, a direction on each side) hands both halves to the pool and puts the
/// caller to sleep until they are done: a sleep and a wake-up per step, and on two cores three
/// threads taking turns on two (100k involuntary context switches in a 300-step benchmark).
/// From inside, the caller runs one half itself while another thread may take the other.
/// Training went from 62k to 81k tokens/s on one thread (batch 32), and from 39k to 63–68k on two
/// (batch 10); outputs are the same bits.
fn on_the_thread_pool(command: impl FnOnce() -> Result<()> + Send) -> Result<()> {
    let pool = rayon::ThreadPoolBuilder::new()
        // What the main thread it stands in for has.
        .stack_size(8 << 20)
        .build()
        .map_err(|error| format!("cannot start the worker threads: {error}"))?;
    pool.install(command)
}

fn main() -> ExitCode {
    keep_freed_memory();
    let cli = Cli::parse();
    // The server hands its work to a pool of its own from the async runtime's threads.
    let result = if matches!(cli.command, Command::Serve(_)) {
        run(cli)
    } else {
        on_the_thread_pool(|| run(cli))
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            if tag::is_broken_pipe(error.as_ref()) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {error}");
            let config = match error.downcast_ref::<nertrain_train::Error>() {
                Some(nertrain_train::Error::Config(config)) => Some(config),
                _ => error.downcast_ref::<nertrain_train::ConfigError>(),
            };
            let usage = error.is::<UsageError>() || config.is_some_and(|c| c.is_usage());
            ExitCode::from(if usage { 2 } else { 1 })
        }
    }
}
