//! Row logs of dropped memtables, kept for the rows of the next ones.
//!
//! Under steady writes a memtable is frozen every fraction of a second, and each one allocates
//! a log for each of its rows, thousands of buffers of a few KiB. Freed when the flushed
//! memtable is dropped (on the flush thread or a reader's) and allocated again on the apply
//! thread, each buffer went through the allocator's cross-thread free list, and the freed pages
//! were returned to the OS before the next memtable asked for them, so each page of every log
//! was faulted in and zeroed again. Kept here instead, the logs of one memtable are what the
//! next one takes: the same rows, the same sizes. A log a row outgrows is freed, not kept:
//! by then the rows of its memtable exist, and the allocator gives the freed memory to the
//! next allocation of its size on the same thread.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Logs smaller than this are neither kept nor taken. With many series each row's log is a
/// few hundred bytes: the allocator serves those from small-object pages that the next
/// allocations reuse at once, while keeping them here would hold a hundred thousand of them
/// between one memtable and the next.
const MIN_KEPT: usize = 1 << 10;

/// Buffers are kept by capacity class, `floor(log2(capacity))`: a class holds capacities from
/// `2^k` up to, not including, `2^(k+1)`.
const CLASSES: usize = 25;

/// The kept logs, emptied, by capacity class.
#[derive(Debug)]
pub(super) struct LogPool {
    classes: Mutex<Vec<Vec<Vec<u8>>>>,
    /// The generation of the newest memtable of the chain (the first is 0).
    newest: AtomicU64,
}

impl Default for LogPool {
    fn default() -> LogPool {
        LogPool {
            classes: Mutex::new(empty_classes()),
            newest: AtomicU64::new(0),
        }
    }
}

fn empty_classes() -> Vec<Vec<Vec<u8>>> {
    (0..CLASSES).map(|_| Vec::new()).collect()
}

fn class_of(capacity: usize) -> usize {
    capacity.max(1).ilog2() as usize
}

impl LogPool {
    /// An empty log with room for exactly `capacity` bytes: a kept one of the same class or
    /// the next, resized (the allocator's block usually has the room, so this moves nothing),
    /// else a new one.
    ///
    /// Resized, as a log is charged to its memtable by its capacity: memtables of many small
    /// rows, charged for larger logs than they asked for, would be flushed more often, each
    /// flush paying per row.
    pub(super) fn take(&self, capacity: usize) -> Vec<u8> {
        if capacity < MIN_KEPT {
            return Vec::with_capacity(capacity);
        }
        let k = class_of(capacity);
        let kept = {
            let mut classes = self.classes.lock();
            [k, k + 1]
                .into_iter()
                .find_map(|class| classes.get_mut(class).and_then(Vec::pop))
        };
        match kept {
            Some(mut log) => {
                if log.capacity() < capacity {
                    log.reserve_exact(capacity);
                } else {
                    log.shrink_to(capacity);
                }
                log
            }
            None => Vec::with_capacity(capacity),
        }
    }

    /// Notes that the memtable of generation `generation` is the newest.
    pub(super) fn started(&self, generation: u64) {
        self.newest.fetch_max(generation, Ordering::Relaxed);
    }

    /// Keeps the logs of a memtable of generation `generation` being dropped, and frees what
    /// the memtables since the last refill did not take: at most one memtable's logs are kept.
    ///
    /// They are kept only while the memtable after it is the newest: the one that comes next
    /// takes them for its rows, which it creates as it starts. Once that one has started (a
    /// flush slower than the writes), what it did not take would stay unused through its
    /// whole life, on top of three memtables in memory.
    pub(super) fn refill(&self, generation: u64, logs: impl Iterator<Item = Vec<u8>>) {
        let mut fresh = empty_classes();
        if self.newest.load(Ordering::Relaxed) > generation + 1 {
            let _left = std::mem::replace(&mut *self.classes.lock(), fresh);
            return;
        }
        for mut log in logs {
            let k = class_of(log.capacity());
            if log.capacity() < MIN_KEPT || k >= CLASSES {
                continue;
            }
            log.clear();
            fresh[k].push(log);
        }
        // The old buffers are freed after the lock is let go.
        let _left = std::mem::replace(&mut *self.classes.lock(), fresh);
    }

    /// Bytes of capacity kept.
    #[cfg(test)]
    pub(super) fn kept_bytes(&self) -> usize {
        self.classes
            .lock()
            .iter()
            .flatten()
            .map(Vec::capacity)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::LogPool;

    #[test]
    fn a_kept_log_of_the_asked_size_comes_back_empty() {
        let pool = LogPool::default();
        let mut log = Vec::with_capacity(3000);
        log.extend_from_slice(b"old entries");
        let ptr = log.as_ptr();
        pool.refill(0, [log].into_iter());
        let again = pool.take(3000);
        assert_eq!(again.as_ptr(), ptr);
        assert!(again.is_empty());
        assert!(again.capacity() >= 3000);
        assert_eq!(pool.kept_bytes(), 0);
    }

    #[test]
    fn a_log_of_the_same_or_the_next_class_is_given_the_asked_capacity() {
        let pool = LogPool::default();
        pool.refill(
            0,
            [Vec::with_capacity(2100), Vec::with_capacity(3900)].into_iter(),
        );
        // Both in the class of 2048..4096; each is made exactly as large as asked.
        assert_eq!(pool.take(3000).capacity(), 3000);
        assert_eq!(pool.take(2500).capacity(), 2500);
        assert_eq!(pool.kept_bytes(), 0);
        pool.refill(0, [Vec::with_capacity(5000)].into_iter());
        assert_eq!(pool.take(3000).capacity(), 3000);
        assert_eq!(pool.kept_bytes(), 0);
        // Two classes up, or one down, is not taken: a new log.
        pool.refill(
            0,
            [Vec::with_capacity(9000), Vec::with_capacity(1500)].into_iter(),
        );
        assert_eq!(pool.take(3000).capacity(), 3000);
        assert_eq!(pool.kept_bytes(), 10_500);
    }

    #[test]
    fn the_logs_of_a_memtable_two_behind_the_newest_are_freed() {
        let pool = LogPool::default();
        pool.started(1);
        pool.refill(0, (0..3).map(|_| Vec::with_capacity(1024)));
        assert_eq!(pool.kept_bytes(), 3 * 1024);
        pool.started(2);
        pool.refill(0, (0..3).map(|_| Vec::with_capacity(1024)));
        assert_eq!(pool.kept_bytes(), 0, "what was kept is freed too");
        pool.refill(1, (0..2).map(|_| Vec::with_capacity(1024)));
        assert_eq!(pool.kept_bytes(), 2 * 1024);
    }

    #[test]
    fn a_refill_frees_what_was_not_taken() {
        let pool = LogPool::default();
        pool.refill(0, (0..10).map(|_| Vec::with_capacity(1024)));
        assert_eq!(pool.kept_bytes(), 10 * 1024);
        pool.refill(0, (0..3).map(|_| Vec::with_capacity(1024)));
        assert_eq!(pool.kept_bytes(), 3 * 1024);
        assert!(
            pool.take(0).capacity() == 0,
            "an empty ask allocates nothing"
        );
        assert_eq!(pool.kept_bytes(), 3 * 1024);
    }
}
