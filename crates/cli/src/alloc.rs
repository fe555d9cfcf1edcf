//! The process's allocator: mimalloc, told to keep the memory it frees.
//!
//! Training and tagging allocate and free large buffers every step; the system allocator returns
//! them to the kernel and page-faults them back in each time. So does mimalloc unless told not to
//! ([`keep_freed_memory`]).

use std::ffi::{c_int, c_long};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod ffi {
    use super::{c_int, c_long};
    unsafe extern "C" {
        pub fn mi_option_set(option: c_int, value: c_long);
        pub fn mi_collect(force: bool);
    }
}

/// Stops mimalloc from handing freed memory back to the kernel ("purging", by default shortly
/// after a free). A decoding batch or a training step takes longer than that delay, so each one's
/// buffers were faulted back in and zeroed by the kernel, a large share of tagging and training
/// time under perf. `MIMALLOC_PURGE_DELAY` still overrides it. [`release_freed_memory`] gives
/// memory back where a phase of different buffers begins.
pub fn keep_freed_memory() {
    /// `mi_option_purge_delay` in mimalloc v3's `include/mimalloc.h`; -1: never purge.
    const MI_OPTION_PURGE_DELAY: c_int = 15;
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mimalloc (linked through the `mimalloc` crate) defines this function; options
        // may be set at any time.
        unsafe { ffi::mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
    }
}

/// Returns freed memory to the kernel now. Called between training and evaluation: kept across
/// that boundary, training's buffers and then evaluation's (on every thread) add up to a higher
/// peak than with mimalloc's default purging.
pub fn release_freed_memory() {
    // SAFETY: as above; `mi_collect` may be called from any thread at any time.
    unsafe { ffi::mi_collect(true) }
}
