//! CPU priority of background work.
//!
//! Flush, compaction and row compaction can always wait a little; a query and the writes a
//! client is waiting on cannot. On a machine that ingest keeps busy, the scheduler shares the
//! CPU evenly between runnable threads, so a handful of background threads would take as much
//! as the threads that answer queries. Background threads therefore lower their own priority
//! (Unix `nice`) when they start. They still run whenever the CPU has room, and a memtable
//! that cannot be flushed makes writers wait (see the write stall), so background work is never
//! starved for long: it slows ingest, not reads.

/// The nice value of background threads: low enough that a busy foreground gets about nine
/// tenths of a contended CPU, not so low that background work stops.
const BACKGROUND_NICE: i32 = 10;

/// Lowers the calling thread's CPU priority to that of background work, unless it is lower
/// already (a server started under `nice` keeps its own setting). Errors are ignored: a thread
/// that keeps its priority still works, only less politely.
pub fn lower_current_thread() {
    #[cfg(target_os = "linux")]
    {
        // On Linux, a thread id in PRIO_PROCESS addresses that one thread.
        let tid = rustix::thread::gettid();
        let current = rustix::process::getpriority_process(Some(tid)).unwrap_or(0);
        if current >= BACKGROUND_NICE {
            return;
        }
        if let Err(e) = rustix::process::setpriority_process(Some(tid), BACKGROUND_NICE) {
            tracing::debug!(error = %e, "could not lower a background thread's priority");
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use rustix::process::getpriority_process;
    use rustix::thread::gettid;

    #[test]
    fn lowers_the_calling_thread_only() -> std::io::Result<()> {
        let before = getpriority_process(Some(gettid()))?;
        let (inside, outside) = std::thread::spawn(move || -> std::io::Result<(i32, i32)> {
            let me = gettid();
            super::lower_current_thread();
            Ok((getpriority_process(Some(me))?, before))
        })
        .join()
        .map_err(|_| std::io::Error::other("the thread panicked"))??;
        assert_eq!(inside, super::BACKGROUND_NICE.max(outside));
        assert_eq!(getpriority_process(Some(gettid()))?, before);
        Ok(())
    }
}
