//! The database's background threads: the flush thread, the compaction thread and the apply
//! thread. Each waits on its [`Signal`], runs its work, and retries a failed run after a wait
//! that doubles with each failure in a row.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::inner::{Inner, Signal};

/// Starts the thread that flushes frozen memtables while the database is open, waking the
/// compaction thread after each flush.
fn spawn_flusher(db: Weak<Inner>, signal: Arc<Signal>) -> Result<()> {
    spawn_worker(
        "strata-flush",
        "memtable flush",
        Priority::Background,
        db,
        signal,
        |inner| {
            while inner.flush_oldest()? {
                inner.compact_signal.wake();
            }
            Ok(())
        },
    )
}

/// Starts the thread that runs due compactions while the database is open, apart from the
/// flush thread: a compaction of a large level takes seconds, and flushes must go on meanwhile.
fn spawn_compactor(db: Weak<Inner>, signal: Arc<Signal>) -> Result<()> {
    spawn_worker(
        "strata-compact",
        "compaction",
        Priority::Background,
        db,
        signal,
        |inner| {
            let compacted = inner.compact_due();
            if compacted.is_err() {
                inner
                    .counters
                    .compaction_errors
                    .fetch_add(1, Ordering::Relaxed);
            }
            compacted
        },
    )
}

/// Whether a worker thread serves writers that wait for it or works in the background.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Priority {
    Foreground,
    Background,
}

/// The first wait before a failed background job runs again. Each failure in a row doubles
/// it, up to [`RETRY_MAX`]; a success resets it. A disk that was full is used again within
/// seconds of having space, and a lasting failure is retried (and logged) every 10 s rather
/// than in a tight loop.
const RETRY_FIRST: Duration = Duration::from_millis(100);
/// The longest wait between retries of a failing background job.
const RETRY_MAX: Duration = Duration::from_secs(10);

/// Starts thread `name`, which runs `work` whenever `signal` wakes it (and every 100 ms) until
/// the database is dropped. After a failure it logs it as `what` and waits before the next
/// run, from [`RETRY_FIRST`] doubling to [`RETRY_MAX`]. A failed flush or compaction leaves
/// the files and the manifest as they were, so running it again is safe.
fn spawn_worker(
    name: &str,
    what: &'static str,
    priority: Priority,
    db: Weak<Inner>,
    signal: Arc<Signal>,
    work: impl Fn(&Inner) -> Result<()> + Send + 'static,
) -> Result<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            if priority == Priority::Background {
                crate::priority::lower_current_thread();
            }
            let mut retry: Option<Duration> = None;
            loop {
                signal.wait();
                let Some(inner) = db.upgrade() else { break };
                let result = work(&inner);
                drop(inner);
                match result {
                    Ok(()) => retry = None,
                    Err(e) => {
                        let wait = retry.map_or(RETRY_FIRST, |w| (w * 2).min(RETRY_MAX));
                        retry = Some(wait);
                        tracing::error!(
                            error = %e,
                            retry_in_ms = wait.as_millis() as u64,
                            "{what} failed; retrying"
                        );
                        std::thread::sleep(wait);
                    }
                }
            }
        })
        .map_err(|e| Error::io(format!("spawning thread {name}"), e))?;
    Ok(())
}

/// Starts the database's background threads: the apply thread (batches queued with no commit
/// leader, see `Db::write_queued`), the flush thread and the compaction thread.
pub(crate) fn spawn_all(inner: &Arc<Inner>) -> Result<()> {
    spawn_worker(
        "strata-apply",
        "applying queued writes",
        Priority::Foreground,
        Arc::downgrade(inner),
        inner.applier.clone(),
        |inner| {
            inner
                .wal
                .lead_queued(&mut |payloads| inner.apply_group(payloads));
            Ok(())
        },
    )?;
    if inner.follower {
        return Ok(());
    }
    spawn_flusher(Arc::downgrade(inner), inner.signal.clone())?;
    spawn_compactor(Arc::downgrade(inner), inner.compact_signal.clone())
}
