//! The state every connection shares, and running storage writes from async workers.

use tokio::sync::watch;

use crate::config::Config;
use crate::metrics::Metrics;

/// State shared by every connection.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: Config,
    /// The storage.
    pub(crate) tsdb: strata_tsdb::Tsdb,
    /// How put lines and bodies are parsed.
    pub(crate) parse: strata_ingest::ParseConfig,
    /// Flips to true when the server starts shutting down.
    pub(crate) shutdown: watch::Receiver<bool>,
    /// Prometheus counters, shown at `/metrics` and in `/api/stats`.
    pub(crate) metrics: Metrics,
    /// The host name `/api/stats` and telnet `stats` tag their records with.
    pub(crate) host: String,
    /// The series remote write has resolved, by their encoded labels.
    pub(crate) remote_write_series: strata_ingest::KnownSeries,
    /// The series the line protocol has resolved, by series section and field key.
    pub(crate) influx_series: strata_ingest::KnownLines,
    /// The tokens clients must present; `None` = authentication off.
    pub(crate) auth: Option<crate::auth::AuthFile>,
    /// The TLS certificate and key; `None` = TLS off.
    pub(crate) tls: Option<crate::tls::Tls>,
}

#[cfg(test)]
impl Shared {
    /// The state of a server over `tsdb` with the default settings, for tests, and the sender
    /// that would shut it down (dropping it counts as a shutdown).
    pub(crate) fn for_test(
        tsdb: strata_tsdb::Tsdb,
    ) -> anyhow::Result<(std::sync::Arc<Shared>, watch::Sender<bool>)> {
        let (keep, shutdown) = watch::channel(false);
        let shared = std::sync::Arc::new(Shared {
            config: Config::resolve(&crate::config::ServeArgs::default())?,
            tsdb,
            parse: strata_ingest::ParseConfig::new(),
            shutdown,
            metrics: Metrics::new()?,
            host: "test".into(),
            remote_write_series: strata_ingest::KnownSeries::new(),
            influx_series: strata_ingest::KnownLines::new(),
            auth: None,
            tls: None,
        });
        Ok((shared, keep))
    }
}

/// Runs `work` as a task beside a probe task that counts its own turns, on a runtime with
/// one worker thread, and returns what `work` gave and how many turns the probe had while it
/// ran. Both are spawned, so they share the worker (a test's own body runs on another
/// thread): the count is 0 when `work` kept the worker throughout.
#[cfg(test)]
pub(crate) async fn turns_beside<T: Send + 'static>(
    work: impl std::future::Future<Output = T> + Send + 'static,
) -> anyhow::Result<(T, u64)> {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let (turns, done) = (
        std::sync::Arc::new(AtomicU64::new(0)),
        std::sync::Arc::new(AtomicBool::new(false)),
    );
    let probe = tokio::spawn({
        let (turns, done) = (turns.clone(), done.clone());
        async move {
            while !done.load(Ordering::Acquire) {
                turns.fetch_add(1, Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
        }
    });
    let work = tokio::spawn({
        let turns = turns.clone();
        async move {
            let before = turns.load(Ordering::Relaxed);
            let out = work.await;
            let during = turns.load(Ordering::Relaxed) - before;
            done.store(true, Ordering::Release);
            (out, during)
        }
    });
    let out = work.await?;
    probe.await?;
    Ok(out)
}

/// Runs the work of a heavy query (one that reads many series; see
/// `strata_query::handle_query`) and waits for it: off the async worker, so the worker's other
/// connections go on meanwhile, and on a thread of its own at the CPU priority of background
/// work. Dashboards poll such queries in a loop; at full priority they take the CPU that ingest
/// needs, while at background priority a busy server answers them a little later and keeps its
/// ingest rate. On an idle machine the priority changes nothing. Light queries (a few series,
/// which most panels are) never come here and keep full priority.
pub(crate) fn run_heavy_query(work: &mut (dyn FnMut() + Send)) {
    tokio::task::block_in_place(|| {
        let ran = std::thread::scope(|scope| {
            let spawned = std::thread::Builder::new()
                .name("strata-query".into())
                .spawn_scoped(scope, || {
                    strata_engine::priority::lower_current_thread();
                    work();
                });
            let Ok(thread) = spawned else {
                return false;
            };
            if let Err(panic) = thread.join() {
                std::panic::resume_unwind(panic);
            }
            true
        });
        // Out of threads: run it here, at the worker's priority.
        if !ran {
            work();
        }
    });
}

/// Runs `write`, a write to `tsdb`, on an async worker: in place, unless the write will wait
/// (an fsync, a write stall), when the worker's other connections are first handed to another
/// thread. Handing over costs CPU on every write, so it is kept for the writes that wait.
pub(crate) fn write_in_place<T>(tsdb: &strata_tsdb::Tsdb, write: impl FnOnce() -> T) -> T {
    if tsdb.write_may_block() {
        tokio::task::block_in_place(write)
    } else {
        write()
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::run_heavy_query;

    /// The calling thread's name and nice value, from `/proc`.
    fn thread_name_and_nice() -> (String, i64) {
        let name = std::thread::current().name().unwrap_or("").to_owned();
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
        // Fields after the command's closing parenthesis start at field 3 (state); nice is 19.
        let nice = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(16))
            .and_then(|n| n.parse().ok())
            .unwrap_or(i64::MIN);
        (name, nice)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn heavy_queries_run_at_background_priority_and_leave_the_worker_alone() {
        let (_, worker_nice) = thread_name_and_nice();
        let mut seen = None;
        run_heavy_query(&mut || seen = Some(thread_name_and_nice()));
        let (name, nice) = seen.expect("the work ran");
        assert_eq!(name, "strata-query");
        assert!(nice >= 10, "nice {nice}");
        assert_eq!(
            thread_name_and_nice().1,
            worker_nice,
            "the worker kept its priority"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_panicking_query_panics_in_the_caller() {
        let caught = std::panic::catch_unwind(|| run_heavy_query(&mut || panic!("boom")));
        let payload = caught.expect_err("the panic reached the caller");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
    }
}
