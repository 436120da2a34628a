//! Time as the tsdb layer sees it: an injected clock, so tests control it.
//!
//! The trait is the engine's, so one clock drives both TTL decisions and the tsdb layer.

use std::sync::atomic::{AtomicU64, Ordering};

pub use strata_engine::{Clock, SystemClock};

/// A clock that only moves when told to (tests, simulations).
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ms: AtomicU64,
}

impl ManualClock {
    /// A clock showing `now_ms`.
    pub fn new(now_ms: u64) -> ManualClock {
        ManualClock {
            now_ms: AtomicU64::new(now_ms),
        }
    }

    /// Sets the time.
    pub fn set_ms(&self, now_ms: u64) {
        self.now_ms.store(now_ms, Ordering::Relaxed);
    }

    /// Moves the time forward.
    pub fn advance_ms(&self, by_ms: u64) {
        self.now_ms.fetch_add(by_ms, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now_ms.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_when_told() {
        let c = ManualClock::new(10);
        c.advance_ms(5);
        assert_eq!(c.now_ms(), 15);
        c.set_ms(1);
        assert_eq!(c.now_ms(), 1);
    }
}
