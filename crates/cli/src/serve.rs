//! `nertrain serve`: loads a model, binds the address, and runs `nertrain-serve` until Ctrl-C or
//! SIGTERM, printing a line per request on stderr.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use burn::tensor::Device;
use clap::Args;
use nertrain_annotate::LabelledFile;
use nertrain_select::{Regions, Strategy};
use nertrain_serve::auth::{Auth, Credentials, Guarded};
use nertrain_serve::{LogLine, Logger, RequestLog, ServeOptions};
use nertrain_studio::{Connection, LearnSettings, RefreshSettings, StudioEvent, StudioOptions};
use nertrain_tagger::Tagger;

use crate::Result;

#[derive(Args)]
pub struct ServeArgs {
    /// A model directory written by `nertrain fit`.
    #[arg(long)]
    model: PathBuf,
    #[command(flatten)]
    dictionaries: crate::common::DictionaryArgs,
    #[command(flatten)]
    thresholds: crate::common::ThresholdArgs,
    /// Where to listen (port 0: any free port, printed when listening).
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Threads that tag (default: one per core, or RAYON_NUM_THREADS).
    #[arg(long, value_parser = crate::count(1, 1024))]
    threads: Option<usize>,
    /// Most texts waiting to be tagged, all requests together; past it, requests get 503.
    #[arg(long, default_value_t = 10_000, value_parser = crate::count(1, 10_000_000))]
    max_queued: usize,
    /// Most texts in one request.
    #[arg(long, default_value_t = 1_000, value_parser = crate::count(1, 1_000_000))]
    max_texts: usize,
    /// Largest request body, in bytes; past it, requests get 413.
    #[arg(long, default_value_t = 1 << 20, value_parser = crate::count(1, 1 << 30))]
    max_body: usize,
    /// How long to wait for more requests to tag together, in milliseconds (by default none:
    /// the requests that come while a batch is tagged make the next).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1000))]
    batch_wait_ms: u64,
    /// Largest answer to one request, in bytes, as bounded before tagging (probabilities and
    /// n-best paths make answers larger than their texts); past it, requests get 413.
    #[arg(long, default_value_t = 128 << 20, value_parser = crate::count(1 << 10, 1 << 34))]
    max_answer: usize,
    /// Bytes of answers made at once, all requests together; past it, requests get 503.
    #[arg(long, default_value_t = 512 << 20, value_parser = crate::count(1 << 10, 1 << 36))]
    answers_in_flight: usize,
    /// Most connections open at once; more wait to be accepted.
    #[arg(long, default_value_t = 512, value_parser = crate::count(1, 1_000_000))]
    max_connections: usize,
    /// Seconds a client may take to send a request's head, and an idle connection may wait for
    /// its next request.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    header_timeout: u64,
    /// Seconds a client may take to send a request's body; past it, 408.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    body_timeout: u64,
    /// Seconds the requests in flight may take to finish after Ctrl-C or SIGTERM.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=3600))]
    shutdown_grace: u64,
    /// As Label Studio's ML backend: the selection strategy whose worth makes a task's
    /// prediction score (the model's certainty: lowest first is most worth labelling).
    #[arg(long, default_value = "margin", value_parser = parse_strategy)]
    task_score: Strategy,
    /// As Label Studio's ML backend, for a project whose labeling config has a `check`
    /// control beside the entity labels: where each task's regions to decide are cut, as
    /// `select --regions` cuts them. A threshold (`0.99`), or `budget[:FLOOR]` (the floor
    /// 0.99 without one): a task's tokens below the floor, or the cut that the tasks not yet
    /// annotated need to hold --region-budget tokens when they hold fewer below it.
    #[arg(long, default_value = "budget", value_parser = parse_regions)]
    regions: Regions,
    /// With `--regions budget`: the tokens to decide that the regions of the tasks not yet
    /// annotated should hold (about what annotators decide between two versions).
    #[arg(long, default_value_t = 2000, value_parser = crate::count(1, 100_000_000))]
    region_budget: usize,
    /// When a version is served, Label Studio's tasks without an annotation get its
    /// predictions (and the project its model version), read and posted this many tasks a
    /// request. Label Studio recounts every task of the project after each import of
    /// predictions, so fewer, larger pages are much faster on a large project.
    #[arg(long, default_value_t = 500, value_parser = crate::count(1, 10_000))]
    refresh_page: usize,
    /// Requests a second at most to Label Studio while refreshing its predictions.
    #[arg(long, default_value_t = 5.0, value_parser = per_second)]
    refresh_rate: f64,
    /// Learn from the Label Studio project's annotations into versions DIR/v1, DIR/v2, ...,
    /// serving each that does no worse on held-out tasks; a restart serves the newest
    /// accepted. Label Studio's address and key come from LABEL_STUDIO_URL and
    /// LABEL_STUDIO_API_KEY, or from its setup request.
    #[arg(long, value_name = "DIR")]
    train_into: Option<PathBuf>,
    /// Epochs of continued training per version at most.
    #[arg(long, default_value_t = 10, value_parser = crate::count(1, 10_000))]
    train_epochs: usize,
    /// Threads a training takes (tagging keeps the others).
    #[arg(long, default_value_t = 1, value_parser = crate::count(1, 1024))]
    train_threads: usize,
    /// Annotations submitted or updated before they start a training (Start Training in Label
    /// Studio always does): fewer versions, each learning from more.
    #[arg(long, default_value_t = 10, value_parser = crate::count(1, 1_000_000))]
    train_every: usize,
    /// The share of annotated tasks held out to judge versions, in percent, chosen by task id.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=90))]
    heldout_percent: u64,
    /// A gold file (CoNLL columns, or an export `eval` reads) that chooses each version's epoch
    /// and judges it against the served model in place of held-out tasks, so that every
    /// annotated task is trained on: where the user has a dev set.
    #[arg(
        long,
        value_name = "FILE",
        requires = "train_into",
        conflicts_with = "heldout_percent"
    )]
    dev: Option<PathBuf>,
    /// The least seconds between the starts of two trainings; one asked for sooner waits.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(0..=86_400))]
    train_interval: u64,
    /// Versions kept on disk besides the one served and the one served before it; older ones
    /// are removed (versions.json keeps their records).
    #[arg(long, default_value_t = 3, value_parser = crate::count(0, 1_000))]
    keep_versions: usize,
    /// The largest export of Label Studio's read to learn from, in bytes (streamed to disk).
    #[arg(long, default_value_t = 256 << 20, value_parser = crate::count(1 << 10, 1 << 40))]
    max_export: usize,
    /// F1 points (on the held-out tasks) a new version may lose on any one label and still be
    /// served.
    #[arg(long, default_value_t = 5.0)]
    label_margin: f64,
    /// A file whose first line is `user:password`: the HTTP Basic credentials that /setup,
    /// /predict, /webhook and /versions ask for (Label Studio sends them when the model's
    /// authentication is Basic). Without it, BASIC_AUTH_USER and BASIC_AUTH_PASS give them.
    #[arg(long, value_name = "FILE")]
    auth_file: Option<PathBuf>,
    /// Ask every route but /health for the credentials: /tag, /model and the page too.
    #[arg(long)]
    auth_all: bool,
    /// A host name clients may reach the server by (repeatable), besides loopback names, IP
    /// addresses: a request naming any other Host is refused, as a page on a
    /// rebound name of its own would send (Label Studio in Docker reaching `http://nertrain:9090`
    /// needs `--allowed-host nertrain`).
    #[arg(long, value_name = "NAME", value_parser = parse_host)]
    allowed_host: Vec<String>,
}

/// A host name as `Host` carries it, without a port.
fn parse_host(value: &str) -> std::result::Result<String, String> {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'.';
    if value.is_empty() || !value.bytes().all(plain) {
        return Err("expected a host name (letters, digits, `-` and `.`), without a port".into());
    }
    Ok(value.to_string())
}

fn per_second(value: &str) -> std::result::Result<f64, String> {
    match value.parse::<f64>() {
        Ok(v) if (0.01..=1000.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "expected requests a second, 0.01 to 1000, found {value:?}"
        )),
    }
}

fn parse_regions(value: &str) -> std::result::Result<Regions, String> {
    value.parse()
}

fn parse_strategy(name: &str) -> std::result::Result<Strategy, String> {
    match name.parse::<Strategy>()? {
        Strategy::Random => Err("random has no task score; choose another strategy".into()),
        strategy => Ok(strategy),
    }
}

/// A variable of the environment, when it is set and not empty.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Label Studio's address and key from the environment, when both are set.
fn connection_from_env() -> Result<Option<Connection>> {
    let (Some(url), Some(key)) = (env("LABEL_STUDIO_URL"), env("LABEL_STUDIO_API_KEY")) else {
        return Ok(None);
    };
    Ok(Some(
        Connection::new(&url, &key).map_err(|e| format!("LABEL_STUDIO_URL: {e}"))?,
    ))
}

/// The credentials clients must give: from `--auth-file`, else BASIC_AUTH_USER and
/// BASIC_AUTH_PASS (the names Label Studio's example backends read); refused when the server
/// learns on an address others can reach and has none.
fn auth(args: &ServeArgs) -> Result<Option<Auth>> {
    let credentials = match (
        &args.auth_file,
        env("BASIC_AUTH_USER"),
        env("BASIC_AUTH_PASS"),
    ) {
        (Some(file), _, _) => Some(Credentials::read(file)?),
        (None, Some(user), Some(password)) => Some(
            Credentials::new(&user, &password)
                .map_err(|e| format!("BASIC_AUTH_USER and BASIC_AUTH_PASS: {e}"))?,
        ),
        (None, Some(_), None) | (None, None, Some(_)) => {
            return Err("set both BASIC_AUTH_USER and BASIC_AUTH_PASS, or neither".into());
        }
        (None, None, None) => None,
    };
    if credentials.is_none() {
        if args.auth_all {
            return Err("--auth-all: no credentials; give --auth-file FILE, or set \
                        BASIC_AUTH_USER and BASIC_AUTH_PASS"
                .into());
        }
        if args.train_into.is_some() && !args.addr.ip().is_loopback() {
            return Err(format!(
                "--train-into on {}: anyone who reaches it could replace the served model; give \
                 credentials (--auth-file FILE, or BASIC_AUTH_USER and BASIC_AUTH_PASS) and the \
                 same to Label Studio (the model's Authentication: Basic), or listen on \
                 127.0.0.1",
                args.addr
            )
            .into());
        }
    }
    Ok(credentials.map(|credentials| Auth {
        credentials,
        guarded: if args.auth_all {
            Guarded::Every
        } else {
            Guarded::Studio
        },
    }))
}

/// The dev file versions are judged on, checked before serving (gold tags on every token of a
/// CoNLL file, or an export that reads), by an absolute path: the trainings run elsewhere.
fn judging_file(file: &Path, tagger: &Tagger) -> Result<PathBuf> {
    let what = "judging versions (--dev)";
    match nertrain_annotate::read_labelled(file, &tagger.meta().columns)? {
        LabelledFile::Columns(gold) => {
            let gold = gold.complete(what)?;
            if gold.sentences.is_empty() {
                return Err(format!("{}: no sentence to judge versions on", file.display()).into());
            }
        }
        LabelledFile::Spans(annotated) if annotated.texts.is_empty() => {
            return Err(format!("{}: no text to judge versions on", file.display()).into());
        }
        LabelledFile::Spans(_) => {}
    }
    Ok(std::fs::canonicalize(file).map_err(|e| format!("{}: {e}", file.display()))?)
}

/// The model to serve, with the dictionaries and operating points given, checked for serving.
/// A server that learns takes no operating points: its new versions have other weights.
fn load(args: &ServeArgs, model: &Path, device: &Device) -> Result<Tagger> {
    let given = &args.thresholds;
    if args.train_into.is_some() && !(given.thresholds.is_empty() && given.biases.is_empty()) {
        return Err(crate::UsageError(
            "--threshold, --bias: a server that learns serves new weights, which thresholds \
             chosen for these are not: choose each version's with `eval --thresholds --store`"
                .into(),
        )
        .into());
    }
    let additions = crate::common::Additions {
        dictionaries: Some(&args.dictionaries),
        thresholds: Some(&args.thresholds),
        encoder_cache: None,
    };
    let tagger = crate::common::load_tagger(model, device, args.threads, additions)?;
    nertrain_serve::check_servable(&tagger)?;
    Ok(tagger)
}

pub fn run(args: ServeArgs, device: &Device) -> Result<()> {
    if !(args.label_margin >= 0.0 && args.label_margin <= 100.0) {
        return Err("--label-margin: expected F1 points from 0 to 100".into());
    }
    let auth = auth(&args)?;
    let connection = connection_from_env()?;
    let model = match &args.train_into {
        Some(dir) => nertrain_studio::model_to_serve(dir, &args.model)?,
        None => args.model.clone(),
    };
    let tagger = load(&args, &model, device)?;
    let dev = args
        .dev
        .as_deref()
        .map(|file| judging_file(file, &tagger))
        .transpose()?;
    let threads = tagger.threads();
    // The async side only moves bytes; tagging runs on the tagger's threads.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let options = serve_options(&args, auth, connection, dev)?;
    let model = model.display().to_string();
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .map_err(|e| format!("{}: cannot listen: {e}", args.addr))?;
        // Said once the server is ready (a versions directory another server holds is refused
        // before), so that whoever reads the first line may send requests.
        let log: Logger = Arc::new(move |line: LogLine| match line {
            LogLine::Listening(address) => eprintln!(
                "serving {model} on http://{address} ({threads} tagging thread{}); Ctrl-C or \
                 SIGTERM stops",
                if threads == 1 { "" } else { "s" }
            ),
            LogLine::Request(line) => eprintln!("{}", log_line(&line)),
            LogLine::Studio(event) => eprintln!("{}", studio_line(&event)),
        });
        let grace = options.shutdown_grace;
        let stopped = nertrain_serve::serve(listener, tagger, options, log, stop_signal()).await?;
        if stopped.every_request_answered {
            eprintln!("stopped: every request answered");
        } else {
            eprintln!(
                "stopped: connections still open after {} s were closed",
                grace.as_secs()
            );
        }
        Ok(())
    })
}

/// The server's settings, from the command line, the access rules, Label Studio's connection
/// from the environment and the judging file.
fn serve_options(
    args: &ServeArgs,
    auth: Option<Auth>,
    connection: Option<Connection>,
    dev: Option<PathBuf>,
) -> Result<ServeOptions> {
    Ok(ServeOptions {
        max_body_bytes: args.max_body,
        max_queued_texts: args.max_queued,
        max_texts: args.max_texts,
        batch_wait: Duration::from_millis(args.batch_wait_ms),
        max_answer_bytes: args.max_answer,
        answers_in_flight_bytes: args.answers_in_flight,
        max_connections: args.max_connections,
        header_timeout: Duration::from_secs(args.header_timeout),
        body_timeout: Duration::from_secs(args.body_timeout),
        shutdown_grace: Duration::from_secs(args.shutdown_grace),
        studio: StudioOptions {
            strategy: args.task_score,
            regions: args.regions,
            train_into: args.train_into.clone(),
            connection,
            learn: LearnSettings {
                trainer: std::env::current_exe()?,
                epochs: args.train_epochs,
                threads: args.train_threads,
                tag_threads: args.threads,
                heldout_percent: args.heldout_percent,
                dev,
                every: args.train_every,
                dictionaries: args.dictionaries.files.clone(),
                replace_dictionary: args.dictionaries.replace_dictionary,
                min_interval: Duration::from_secs(args.train_interval),
                keep_versions: args.keep_versions,
                max_export_bytes: args.max_export as u64,
                label_margin: args.label_margin,
                base_model: args.model.clone(),
                refresh: RefreshSettings {
                    page_size: args.refresh_page,
                    per_second: args.refresh_rate,
                    budget: args.region_budget,
                    ..RefreshSettings::default()
                },
            },
        },
        auth,
        allowed_hosts: args.allowed_host.clone(),
        ..ServeOptions::default()
    })
}

fn log_line(line: &RequestLog) -> String {
    let mut text = format!(
        "{} {} {} {} texts={} tokens={} {:.1}ms",
        line.id, line.method, line.path, line.status, line.texts, line.tokens, line.millis
    );
    if let Some(error) = &line.error {
        text.push_str(&format!(" error={error:?}"));
    }
    text
}

fn studio_line(event: &StudioEvent) -> String {
    match event {
        StudioEvent::Started {
            version,
            project,
            train_tasks,
            heldout_tasks,
            dev,
        } => match dev {
            Some(dev) => format!(
                "learning: training {version} on project {project}'s annotations ({train_tasks} \
                 tasks; judged on {})",
                dev.display()
            ),
            None => format!(
                "learning: training {version} on project {project}'s annotations ({train_tasks} \
                 tasks, {heldout_tasks} held out)"
            ),
        },
        StudioEvent::Finished(record) => format!(
            "learning: {} ({}) {}: {} ({:.1} s)",
            record.name,
            record.id.as_deref().unwrap_or("?"),
            if record.served {
                "served"
            } else {
                "kept, not served"
            },
            record.reason,
            record.seconds
        ),
        StudioEvent::Failed { message } => format!("learning failed: {message}"),
        StudioEvent::Switched { name, id } => format!("serving {name} ({id}), chosen by hand"),
        StudioEvent::Refreshed(status) => format!(
            "Label Studio in step: project {}'s {} tasks without an annotation have version {}'s \
             predictions ({} posted, {} standing from before; {} annotated, {} unreadable; \
             regions below {:.6}; {:.1} s)",
            status.project,
            status.predicted + status.stood,
            status.version,
            status.predicted,
            status.stood,
            status.annotated,
            status.unreadable,
            status.cut.unwrap_or(f64::NAN),
            status.seconds
        ),
    }
}

/// Ctrl-C or SIGTERM.
async fn stop_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
    eprintln!("stopping: no new connections; finishing the requests in flight");
}
