//! The queue of requests and the thread that tags them in batches on the tagger's threads.
//!
//! Each request carries the model version it was cut into words with, so that a version swapped
//! in while it waits does not tag it, and what makes its texts tagged a typed answer: requests
//! with the same version and options are tagged together, each answer is made on this thread and
//! sent to the handler waiting for it.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use nertrain_annotate::CharSpan;
use nertrain_tagger::{Layout, TagOptions, Tagged, Tagger, Token, lock};
use tokio::sync::oneshot;

use crate::ServeOptions;

/// The fewest sentences a decoding batch is cut to when a group is spread over the threads.
const MIN_BATCH: usize = 8;

/// Where a request's texts go once tagged: made into its answer and sent to its handler.
trait Reply: Send {
    /// Whether the handler has gone (its client with it).
    fn is_closed(&self) -> bool;
    /// Makes the answer from the texts tagged, with the tagger that tagged them, and sends it;
    /// or sends why tagging or answering failed.
    fn send(self: Box<Self>, tagged: Result<Vec<Tagged>, String>, tagger: &Tagger);
}

/// A reply whose answer is a `T`, made by `answer`.
struct Typed<T, F> {
    sender: oneshot::Sender<Result<T, String>>,
    answer: F,
}

impl<T, F> Reply for Typed<T, F>
where
    T: Send,
    F: FnOnce(Vec<Tagged>, &Tagger) -> T + Send,
{
    fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }

    fn send(self: Box<Self>, tagged: Result<Vec<Tagged>, String>, tagger: &Tagger) {
        let Self { sender, answer } = *self;
        let _ = sender.send(tagged.and_then(|tagged| caught(|| answer(tagged, tagger))));
    }
}

/// A request waiting to be tagged.
struct Job {
    /// The version the texts were cut into words with, which tags them.
    tagger: Arc<Tagger>,
    texts: Vec<String>,
    /// The texts cut into words, as the tagger cuts them.
    tokens: Vec<Vec<Token>>,
    options: TagOptions,
    words: usize,
    forced: Vec<Vec<CharSpan>>,
    reply: Box<dyn Reply>,
}

/// A request to tag.
pub(crate) struct Request {
    /// The version that cut the texts into words.
    pub tagger: Arc<Tagger>,
    pub texts: Vec<String>,
    /// The texts cut into words by `tagger`.
    pub tokens: Vec<Vec<Token>>,
    /// Words in all.
    pub words: usize,
    pub options: TagOptions,
    /// Entities forced on each text (an annotator's corrections; empty: none), as
    /// [`Tagger::tag_tokens_forced`] takes them. A request with some is tagged alone.
    pub forced: Vec<Vec<CharSpan>>,
}

/// Whether a request was queued.
pub(crate) enum Submitted<T> {
    /// Queued; its answer, or why there is none, comes here.
    Queued(oneshot::Receiver<Result<T, String>>),
    /// The queue holds as many texts as it may.
    Full,
}

/// The queue's sending end and the batching thread.
pub(crate) struct Batcher {
    sender: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    queued: Arc<AtomicUsize>,
    max_queued: usize,
}

impl Batcher {
    /// Starts the batching thread, which tags on each request's tagger's threads.
    pub(crate) fn start(options: ServeOptions) -> std::io::Result<Self> {
        let (sender, receiver) = mpsc::channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let max_queued = options.max_queued_texts;
        let thread = {
            let queued = queued.clone();
            std::thread::Builder::new()
                .name("nertrain-batcher".into())
                .spawn(move || run(&receiver, &options, &queued))?
        };
        Ok(Self {
            sender: Mutex::new(Some(sender)),
            thread: Mutex::new(Some(thread)),
            queued,
            max_queued,
        })
    }

    /// Queues `texts`, cut into `tokens` (`words` in all) by `tagger`, to be made into an
    /// answer by `answer` once tagged, unless that would put more texts in the queue than it may
    /// hold.
    pub(crate) fn submit<T, F>(&self, request: Request, answer: F) -> Submitted<T>
    where
        T: Send + 'static,
        F: FnOnce(Vec<Tagged>, &Tagger) -> T + Send + 'static,
    {
        let Request {
            tagger,
            texts,
            tokens,
            words,
            options,
            forced,
        } = request;
        let count = texts.len();
        let before = self.queued.fetch_add(count, Ordering::SeqCst);
        let refuse = || {
            self.queued.fetch_sub(count, Ordering::SeqCst);
            Submitted::Full
        };
        if before + count > self.max_queued {
            return refuse();
        }
        let (sender, receiver) = oneshot::channel();
        let job = Job {
            tagger,
            words,
            texts,
            tokens,
            options,
            forced,
            reply: Box::new(Typed { sender, answer }),
        };
        let sender = lock(&self.sender);
        match sender.as_ref().map(|s| s.send(job).is_ok()) {
            Some(true) => Submitted::Queued(receiver),
            _ => refuse(),
        }
    }

    /// Lets the batching thread finish what is queued, and waits for it.
    pub(crate) fn stop(&self) {
        lock(&self.sender).take();
        if let Some(thread) = lock(&self.thread).take() {
            let _ = thread.join();
        }
    }
}

/// Takes queued requests in batches until the queue's sending end is dropped and it is empty.
/// One thread: the tagger's calls are serialised anyway (see [`Tagger::tag_documents`]).
fn run(receiver: &mpsc::Receiver<Job>, options: &ServeOptions, queued: &AtomicUsize) {
    while let Ok(first) = receiver.recv() {
        let mut words = first.words;
        let mut jobs = vec![first];
        let deadline = Instant::now() + options.batch_wait;
        while words < options.batch_words {
            let next = match receiver.try_recv() {
                Ok(job) => Ok(job),
                Err(TryRecvError::Disconnected) => break,
                Err(TryRecvError::Empty) => match deadline.checked_duration_since(Instant::now()) {
                    Some(left) => receiver.recv_timeout(left),
                    None => Err(RecvTimeoutError::Timeout),
                },
            };
            match next {
                Ok(job) => {
                    words += job.words;
                    jobs.push(job);
                }
                Err(_) => break,
            }
        }
        queued.fetch_sub(jobs.iter().map(|j| j.texts.len()).sum(), Ordering::SeqCst);
        // A client that has gone costs nothing more.
        jobs.retain(|job| !job.reply.is_closed());
        while !jobs.is_empty() {
            let options = jobs[0].options;
            let tagger = jobs[0].tagger.clone();
            let (group, rest): (Vec<Job>, Vec<Job>) = if jobs[0].forced.is_empty() {
                jobs.into_iter().partition(|job| {
                    job.options == options
                        && Arc::ptr_eq(&job.tagger, &tagger)
                        && job.forced.is_empty()
                })
            } else {
                let rest = jobs.split_off(1);
                (jobs, rest)
            };
            jobs = rest;
            tag_group(group, &tagger, options);
        }
    }
}

/// Tags the texts of requests with the same options together and answers each. When that
/// fails, each request is tagged alone (its texts cut again: the tokens went to the failed
/// call), so that one request's failure is its own.
fn tag_group(mut group: Vec<Job>, tagger: &Tagger, options: TagOptions) {
    if let [job] = group.as_mut_slice() {
        let texts: Vec<&str> = job.texts.iter().map(String::as_str).collect();
        let tokens = Some(std::mem::take(&mut job.tokens));
        let tagged = tag_texts(&texts, tokens, &job.forced, tagger, options);
        group.remove(0).reply.send(tagged, tagger);
        return;
    }
    let tokens = group
        .iter_mut()
        .flat_map(|job| std::mem::take(&mut job.tokens))
        .collect();
    let texts: Vec<&str> = group
        .iter()
        .flat_map(|job| job.texts.iter().map(String::as_str))
        .collect();
    if let Ok(mut tagged) = tag_texts(&texts, Some(tokens), &[], tagger, options) {
        for job in group.into_iter().rev() {
            let mine = tagged.split_off(tagged.len() - job.texts.len());
            job.reply.send(Ok(mine), tagger);
        }
        return;
    }
    for job in group {
        let texts: Vec<&str> = job.texts.iter().map(String::as_str).collect();
        let tagged = tag_texts(&texts, None, &[], tagger, options);
        job.reply.send(tagged, tagger);
    }
}

/// Tags `texts` on the tagger's threads, from their `tokens` when given (with `forced`
/// entities, which need them), or says why tagging failed (a panic included).
fn tag_texts(
    texts: &[&str],
    tokens: Option<Vec<Vec<Token>>>,
    forced: &[Vec<CharSpan>],
    tagger: &Tagger,
    options: TagOptions,
) -> Result<Vec<Tagged>, String> {
    // Decoding batches go one to a thread: a group of single sentences from a few dozen clients
    // is cut into as many batches as there are threads, or it would run on one.
    let threads = tagger.threads().max(1);
    let options = TagOptions {
        batch_size: options
            .batch_size
            .min(texts.len().div_ceil(threads).max(MIN_BATCH)),
        ..options
    };
    caught(|| {
        if cfg!(feature = "failpoints")
            && std::env::var("NERTRAIN_FAILPOINT").is_ok_and(|f| f == "serve-panic")
            && texts.contains(&"panic")
        {
            panic!("failpoint serve-panic");
        }
        match tokens {
            Some(tokens) => tagger.tag_tokens_forced(texts, tokens, forced, options),
            None => tagger.tag(texts, Layout::Texts, options),
        }
        .map_err(|error| error.to_string())
    })?
}

/// What `work` returns, or the message of its panic.
fn caught<T>(work: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(AssertUnwindSafe(work)).map_err(|panic| {
        panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into())
    })
}
