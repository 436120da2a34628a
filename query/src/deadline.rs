//! The query timeout (`QueryLimits::timeout`, OpenTSDB's `tsd.query.timeout`): a clock started
//! when execution starts, checked between stages and series (never per point), failing with
//! `Error::Timeout` (HTTP 408).

use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// When a query must have finished.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    started: Instant,
    limit: Option<Duration>,
}

impl Deadline {
    /// Starts the clock; `None` never expires.
    pub(crate) fn start(limit: Option<Duration>) -> Deadline {
        Deadline {
            started: Instant::now(),
            limit,
        }
    }

    /// `Err(Error::Timeout)` once the limit has passed (a zero limit has always passed).
    pub(crate) fn check(&self) -> Result<()> {
        let Some(limit) = self.limit else {
            return Ok(());
        };
        let elapsed = self.started.elapsed();
        if elapsed >= limit {
            return Err(Error::Timeout {
                limit_ms: u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
                elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_never_expires_and_zero_always_has() {
        assert!(Deadline::start(None).check().is_ok());
        assert!(
            Deadline::start(Some(Duration::from_secs(3600)))
                .check()
                .is_ok()
        );
        let e = Deadline::start(Some(Duration::ZERO)).check().unwrap_err();
        assert_eq!(e.status(), 408);
        assert!(matches!(e, Error::Timeout { limit_ms: 0, .. }));
    }
}
