//! `nertrain serve`: loads a model, binds the address, and runs `nertrain-serve` until Ctrl-C or
//! SIGTERM, printing a line per request on stderr.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use burn::tensor::Device;
use clap::Args;
use nertrain_serve::{Logger, RequestLog, ServeOptions};
use nertrain_tagger::Tagger;

use crate::Result;

#[derive(Args)]
pub struct ServeArgs {
    /// A model directory written by `nertrain fit`.
    #[arg(long)]
    model: PathBuf,
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
}

pub fn run(args: ServeArgs, device: &Device) -> Result<()> {
    let tagger = Tagger::load_with_threads(&args.model, device, args.threads)?;
    let threads = tagger.threads();
    // The async side only moves bytes; tagging runs on the tagger's threads.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let options = ServeOptions {
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
        ..ServeOptions::default()
    };
    let model = args.model.display().to_string();
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .map_err(|e| format!("{}: cannot listen: {e}", args.addr))?;
        eprintln!(
            "serving {model} on http://{} ({threads} tagging thread{}); Ctrl-C or SIGTERM stops",
            listener.local_addr()?,
            if threads == 1 { "" } else { "s" }
        );
        let log: Logger = Arc::new(|line: RequestLog| eprintln!("{}", log_line(&line)));
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
