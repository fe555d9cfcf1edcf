//! The threads a tagger works on, and the one policy for calls from several threads: each call
//! waits for the one before it, taking the lock on its own thread, then runs on the tagger's
//! pool.
//!
//! The lock is taken before entering the pool because the model's word cache is locked inside
//! work spread over the pool's threads: a worker that waits for a lock runs other queued work
//! meanwhile, and a second call queued on the pool could then wait on a lock its own thread
//! holds. A call made from the tagger's own threads is part of a call already running, and runs
//! there directly.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::{Result, thread_pool};

/// A tagger's pool and its turn-taking.
pub(crate) struct Threads {
    /// The pool, and the process that started it: a process forked from that one has the pool
    /// but none of its threads (Python's `multiprocessing` forks), and starts its own.
    pool: Mutex<(u32, Arc<rayon::ThreadPool>)>,
    threads: Option<usize>,
    one_call: Mutex<()>,
}

impl Threads {
    /// A pool of `threads` (by default `RAYON_NUM_THREADS`, or one per core).
    pub(crate) fn new(threads: Option<usize>) -> Result<Self> {
        Ok(Self {
            pool: Mutex::new((std::process::id(), Arc::new(thread_pool(threads)?))),
            threads,
            one_call: Mutex::new(()),
        })
    }

    /// Threads in the pool.
    pub(crate) fn count(&self) -> usize {
        self.pool().map_or(1, |pool| pool.current_num_threads())
    }

    /// Runs `work` on the pool once the calls before it have ended.
    pub(crate) fn install<T: Send>(&self, work: impl FnOnce() -> T + Send) -> Result<T> {
        let pool = self.pool()?;
        if pool.current_thread_index().is_some() {
            return Ok(work());
        }
        let _turn = lock(&self.one_call);
        Ok(pool.install(work))
    }

    /// Runs `work` on the pool without waiting for the call running there, and returns at once:
    /// for work that shares nothing with tagging (cutting texts into words).
    pub(crate) fn spawn(&self, work: impl FnOnce() + Send + 'static) -> Result<()> {
        self.pool()?.spawn(work);
        Ok(())
    }

    /// The pool, started again in a process forked from the one that started it.
    fn pool(&self) -> Result<Arc<rayon::ThreadPool>> {
        let mut pool = lock(&self.pool);
        if pool.0 != std::process::id() {
            *pool = (std::process::id(), Arc::new(thread_pool(self.threads)?));
        }
        Ok(pool.1.clone())
    }
}

/// Locks `mutex`, also after a thread panicked holding it: nertrain's locks guard no data that a
/// panic leaves half-changed (whose turn it is, a queue's sending end), so one failed call must
/// not fail every later one. The one policy for a poisoned lock, in every crate.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
