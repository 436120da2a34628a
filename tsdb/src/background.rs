//! A background thread of the tsdb layer (the row compactor, the expiry pass) that runs until
//! its handle is dropped.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};

/// The stop flag a background thread waits on.
#[derive(Debug, Default)]
pub(crate) struct Stop {
    stopped: Mutex<bool>,
    cv: Condvar,
}

impl Stop {
    /// Waits `d`, or less if stopped meanwhile; returns whether the thread should stop.
    pub(crate) fn wait(&self, d: Duration) -> bool {
        let mut stopped = self.stopped.lock();
        if !*stopped {
            self.cv.wait_for(&mut stopped, d);
        }
        *stopped
    }

    /// Whether the thread should stop.
    pub(crate) fn is_stopped(&self) -> bool {
        *self.stopped.lock()
    }
}

/// A running background thread; dropping it stops the thread (after its current pass) and
/// waits for it.
#[derive(Debug)]
pub(crate) struct Background {
    name: &'static str,
    stop: Arc<Stop>,
    thread: Option<JoinHandle<()>>,
}

impl Background {
    /// Starts thread `name` at low priority running `body` until it returns.
    pub(crate) fn spawn(
        name: &'static str,
        body: impl FnOnce(&Stop) + Send + 'static,
    ) -> Result<Background> {
        let stop = Arc::new(Stop::default());
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                strata_engine::priority::lower_current_thread();
                body(&s)
            })
            .map_err(|e| Error::InvalidArgument(format!("cannot start {name} thread: {e}")))?;
        Ok(Background {
            name,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        *self.stop.stopped.lock() = true;
        self.stop.cv.notify_all();
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::warn!(thread = self.name, "background thread panicked");
        }
    }
}
