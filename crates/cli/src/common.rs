//! What the commands share: their error type, usage errors (exit code 2), ranged counts for
//! flags, the tagger a command's flags load and the tagging options they make.

use std::process::ExitCode;

use nertrain_model::Backend;
use nertrain_tagger::{TagOptions, Tagger};

/// Any failure of a command: the library's typed errors, and the CLI's own (output, usage).
pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A count or size on the command line: from `min` to `max`, so that no number asks for more
/// than a machine has (or overflows).
pub fn count(min: u64, max: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(min..=max)
}

/// The most sentences a batch may hold.
pub const MAX_BATCH: u64 = nertrain_tagger::MAX_BATCH_SENTENCES as u64;

/// `--batch-size`'s help, with the tagger's bound on a batch's tokens.
pub fn batch_size_help() -> String {
    let tokens = nertrain_tagger::MAX_BATCH_TOKENS.to_string();
    // Thousands separated, as the rest of the help writes numbers.
    let digits: Vec<char> = tokens.chars().collect();
    let mut grouped = String::new();
    for (i, digit) in digits.iter().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(*digit);
    }
    format!(
        "Sentences per batch (fewer when they are long: a batch holds at most {grouped} tokens)"
    )
}

/// A mistake on the command line found after parsing it: exit code 2, as clap's own.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// `options`, made by a command's flags over the model's own, checked: one out of range or that
/// the model cannot use is a usage error naming its flag.
pub fn tag_options(tagger: &Tagger, options: TagOptions) -> Result<TagOptions> {
    tagger.checked(options).map_err(|error| match error {
        nertrain_tagger::Error::InvalidOption { option, message } => {
            UsageError(format!("--{}: {message}", option.replace('_', "-"))).into()
        }
        other => other.into(),
    })
}

/// The exit code of a failed command: 2 for a usage error (a flag, or a `--set` override), 1
/// for anything else.
pub fn exit_code(error: &(dyn std::error::Error + 'static)) -> ExitCode {
    let usage = error.is::<UsageError>() || crate::fit::is_usage(error);
    ExitCode::from(if usage { 2 } else { 1 })
}

/// What a command's flags add to the model it loads; `None` where the command has no such flags.
#[derive(Default)]
pub struct Additions<'a> {
    /// `--dictionary`, `--replace-dictionary`.
    pub dictionaries: Option<&'a DictionaryArgs>,
    /// `--threshold`, `--bias`, `--all-entities`.
    pub thresholds: Option<&'a ThresholdArgs>,
    /// `--encoder-cache`, with the backend its store is read on.
    pub encoder_cache: Option<(&'a EncoderCacheArgs, Backend)>,
}

/// The model at `dir`, on `device` with `threads` threads to tag on, and what `additions` add
/// to it: every command loads its tagger here.
pub fn load_tagger(
    dir: &std::path::Path,
    device: &burn::tensor::Device,
    threads: Option<usize>,
    additions: Additions<'_>,
) -> Result<Tagger> {
    let mut tagger = Tagger::load_with_threads(dir, device, threads)?;
    if let Some(dictionaries) = additions.dictionaries {
        tagger = dictionaries.apply(tagger)?;
    }
    if let Some(thresholds) = additions.thresholds {
        tagger = thresholds.apply(tagger)?;
    }
    if let Some((cache, backend)) = additions.encoder_cache {
        tagger = cache.apply(tagger, backend)?;
    }
    Ok(tagger)
}

/// Dictionaries given when a model is loaded, beside those stored in it.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct DictionaryArgs {
    /// A dictionary file (LABEL<TAB>phrase lines) whose entries are added to the model's for
    /// labels it has dictionary features for, without retraining; repeatable. Entries match case
    /// unless their line says ignore-case.
    #[arg(long = "dictionary", value_name = "FILE")]
    pub files: Vec<std::path::PathBuf>,
    /// The --dictionary files replace the model's entries of every label they give, instead of
    /// adding to them.
    #[arg(long, requires = "files")]
    pub replace_dictionary: bool,
}

impl DictionaryArgs {
    /// `tagger` with these dictionaries, saying on stderr what each file held, as `fit` does.
    fn apply(&self, tagger: Tagger) -> Result<Tagger> {
        let (tagger, reads) =
            tagger.with_dictionaries_read(&self.files, self.replace_dictionary)?;
        for read in reads {
            eprintln!("dictionary {read}");
        }
        Ok(tagger)
    }
}

/// Where a frozen encoder's layers are kept between commands, as `fit --encoder-cache` keeps them.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct EncoderCacheArgs {
    /// Keep a frozen encoder's layers of each sentence in this directory: those an earlier
    /// command of the same encoder computed (`fit --encoder-cache`, `select` or `eval` with it)
    /// are read, the others computed and written there (the annotation loop's rounds choose
    /// from the same pool). A model without a frozen encoder has none to keep.
    #[arg(long, value_name = "DIR")]
    pub encoder_cache: Option<std::path::PathBuf>,
}

impl EncoderCacheArgs {
    /// `tagger` reading and writing the store, when one is given.
    fn apply(&self, tagger: Tagger, backend: Backend) -> Result<Tagger> {
        match &self.encoder_cache {
            Some(root) => Ok(tagger.with_encoder_cache(root, backend)?),
            None => Ok(tagger),
        }
    }

    /// Says on stderr what `tagger`'s store gave, as `fit` does, and what it could not use.
    pub fn report(tagger: &Tagger) {
        if let Some(note) = tagger.encoder_cache_note() {
            eprintln!("note: {note}");
        }
        let Some((dir, tally)) = tagger.encoder_cache_tally() else {
            return;
        };
        for problem in &tally.problems {
            eprintln!("warning: {problem}");
        }
        eprintln!(
            "the frozen encoder's layers of {} sentences: {} read from {}, {} computed",
            tally.read + tally.computed,
            tally.read,
            dir.display(),
            tally.computed
        );
    }
}

/// Confidence thresholds and biases given when a model is loaded, in place of those stored
/// with it (`thresholds.json`, which `eval --thresholds --store` writes).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ThresholdArgs {
    /// Leave out entities of LABEL whose confidence is below T (0 to 1), their words tagged O;
    /// repeatable. Given (or --bias), these replace the thresholds stored with the model.
    #[arg(long = "threshold", value_name = "LABEL=T", value_parser = label_number)]
    pub thresholds: Vec<(String, f64)>,
    /// Add B to the emission scores of LABEL's tags when the best path is chosen: above 0 more
    /// of its entities are found (recall bought with precision), below 0 fewer; repeatable.
    #[arg(long = "bias", value_name = "LABEL=B", value_parser = label_number)]
    pub biases: Vec<(String, f64)>,
    /// Keep every entity as the model decodes it, whatever thresholds and biases are stored
    /// with it.
    #[arg(long, conflicts_with_all = ["thresholds", "biases"])]
    pub all_entities: bool,
}

impl ThresholdArgs {
    /// `tagger` with these thresholds and biases (none with --all-entities), or as it is when
    /// none are given; a label the model lacks or a number out of range is a usage error.
    fn apply(&self, tagger: Tagger) -> Result<Tagger> {
        if self.thresholds.is_empty() && self.biases.is_empty() && !self.all_entities {
            return Ok(tagger);
        }
        let usage = |e: nertrain_tagger::Error| -> Box<dyn std::error::Error + Send + Sync> {
            match e {
                nertrain_tagger::Error::InvalidOption { option, message } => {
                    UsageError(format!("--{option} {message}")).into()
                }
                other => other.into(),
            }
        };
        tagger
            .with_thresholds(self.thresholds.iter().cloned().collect())
            .and_then(|t| t.with_biases(self.biases.iter().cloned().collect()))
            .map_err(usage)
    }
}

/// Parses `LABEL=NUMBER` (`--threshold PER=0.8`, `--recall PER=95`).
pub fn label_number(value: &str) -> std::result::Result<(String, f64), String> {
    let parsed = value
        .split_once('=')
        .and_then(|(label, number)| Some((label.trim(), number.trim().parse::<f64>().ok()?)));
    match parsed {
        Some((label, number)) if !label.is_empty() && number.is_finite() => {
            Ok((label.to_string(), number))
        }
        _ => Err(format!("expected LABEL=NUMBER (PER=0.8), found {value:?}")),
    }
}
