//! The `nertrain` processes the learner starts: they go with the server, whatever ends it.

use std::process::Command;

/// Makes a `nertrain` child go with the server: in a process group of its own (a terminal's
/// Ctrl-C reaches the server, which stops it), and on Linux killed when the server dies however
/// it dies (`kill -9` included), so that no training outlives it.
pub(crate) fn dies_with_server(command: &mut Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let server = rustix::process::getpid();
        // SAFETY: between fork and exec the closure makes only system calls (prctl, getppid),
        // which are async-signal-safe, and allocates nothing but an error on failure.
        unsafe {
            command.pre_exec(move || {
                use rustix::process::{Signal, getppid, set_parent_process_death_signal};
                set_parent_process_death_signal(Some(Signal::KILL))?;
                // The server may have died before the signal was asked for.
                if getppid() != Some(server) {
                    return Err(std::io::Error::other("the server is gone"));
                }
                Ok(())
            });
        }
    }
}

/// Kills a child's process group (the child and whatever it started).
pub(crate) fn kill_group(child: &std::process::Child) {
    #[cfg(unix)]
    if let Some(pid) = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    #[cfg(not(unix))]
    let _ = child;
}
