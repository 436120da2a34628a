//! With `--store`, acknowledged points live only in the local WAL until a flush uploads them.
//! The flusher flushes every `--store-flush-interval-ms`, which bounds how long that lasts.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

/// A thread that flushes a database every interval; stopped and joined when dropped.
#[derive(Debug)]
pub(crate) struct Flusher {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Flusher {
    /// Starts flushing `tsdb` every `interval`.
    pub(crate) fn spawn(tsdb: strata_tsdb::Tsdb, interval: Duration) -> anyhow::Result<Flusher> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("strata-store-flush".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                    match tsdb.flush() {
                        Ok(()) => {}
                        // A newer writer holds the prefix for good: nothing this one flushes
                        // can land any more, and the engine said so already.
                        Err(strata_tsdb::Error::Engine(strata_engine::Error::Fenced {
                            ..
                        })) => {
                            return;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "periodic flush to the object store failed");
                        }
                    }
                }
            })?;
        Ok(Flusher {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        // Dropping the sender ends the wait at once.
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
