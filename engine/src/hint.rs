//! Hints to the CPU that change no result, only how long memory takes to arrive.

/// Starts fetching the cache line at `p` into the cache, without waiting for it.
///
/// For loops over structures far larger than the cache (a memtable's rows, a million series):
/// each item's first touch is a miss to memory, and fetching an item several iterations before
/// it is used lets those misses overlap instead of following one another.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    #[allow(
        unsafe_code,
        reason = "measured in `Memtable::apply_all` and a flush's row walk"
    )]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 CPU has; and a prefetch is a hint
    // that never faults and reads nothing the program sees, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
