//! Element-wise loops compiled for the CPU they run on.
//!
//! The project builds for the baseline x86-64 target (SSE2, 4 floats at a time), so that one
//! binary runs everywhere. The gate arithmetic of the LSTM recurrence is a large part of tagging
//! and training time, and on a CPU with AVX-512 or AVX2 it runs much faster when compiled for
//! them. [`vectorized`] inlines a closure into a function compiled with those
//! instructions enabled and picks it at run time. Results are identical bit for bit whichever
//! runs: each element sees the same operations (no multiply-add contraction), only more at once.

/// Runs `f` compiled for the widest vector instructions this CPU has (AVX-512, else AVX2 with
/// FMA, else the baseline). `f` should be `#[inline(always)]` and call only inlined functions,
/// so that its loops are compiled inside the chosen function.
#[inline(always)]
pub(crate) fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F, which is all `avx512` is compiled to use.
            return unsafe { avx512(f) };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has AVX2 and FMA, which is all `avx2` is compiled to use.
            return unsafe { avx2(f) };
        }
    }
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// `f` run once compiled for each instruction set this CPU has, the baseline first.
#[cfg(test)]
pub(crate) fn at_every_level<R>(f: impl Fn() -> R) -> Vec<R> {
    let mut results = vec![f()];
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: checked just above.
            results.push(unsafe { avx2(&f) });
        }
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: checked just above.
            results.push(unsafe { avx512(&f) });
        }
    }
    results
}
