//! Ctrl-C and SIGTERM while `fit` runs: training stops after the current batch and saves.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use crate::Result;

/// On Ctrl-C (SIGINT) or SIGTERM (what `kill`, systemd, Docker and Slurm send), sets
/// `interrupt`: training stops after the current batch and saves. A second signal ends the
/// process at once. Returns where the signal's number is kept.
pub fn stop_on_signals(interrupt: Arc<AtomicBool>) -> Result<Arc<AtomicI32>> {
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
