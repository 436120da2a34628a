//! Expiry by data time: a hook, supplied per table by the layer that knows its rowkey layout,
//! that tells compaction when a row's data is past its retention.
//!
//! The engine never decodes a rowkey itself. It asks the hook two things of a row: the newest
//! data time the row can hold (recorded per SST as `min_row_ms`/`max_row_ms`, see
//! `sst/properties.rs`), and when the whole row expires. Everything in a row shares its
//! expiry, so a compaction may drop a row's entries in any level without older versions of
//! the row coming back: those have expired too.

use std::fmt;
use std::sync::Arc;

/// When rows expire, by their key. Implementations must be cheap: a flush and a compaction
/// ask once per row.
pub trait RowExpiry: Send + Sync + fmt::Debug {
    /// The newest data time (ms since the Unix epoch) `row` can hold, or `None` when the row
    /// has no data time (it never expires).
    fn row_time_ms(&self, row: &[u8]) -> Option<u64>;

    /// When (ms since the Unix epoch) every cell of `row` is past its retention, or `None` if
    /// the row is kept forever.
    fn row_expires_ms(&self, row: &[u8]) -> Option<u64>;

    /// A data time before which every row is expired at `now_ms`, whatever its key (from the
    /// longest retention), or `None` if some rows are kept forever.
    fn all_expired_before(&self, now_ms: u64) -> Option<u64>;

    /// A data time before which some rows may be expired at `now_ms` (from the shortest
    /// retention), or `None` if no row ever expires.
    fn some_expired_before(&self, now_ms: u64) -> Option<u64>;
}

/// A table's [`RowExpiry`] hook, in [`crate::TableOptions::expiry`].
#[derive(Clone)]
pub struct RowExpirer(pub Arc<dyn RowExpiry>);

impl fmt::Debug for RowExpirer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RowExpirer(..)")
    }
}

impl PartialEq for RowExpirer {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for RowExpirer {}

/// What a file's rows say about expiry, gathered as a builder sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RowTimes {
    /// Oldest row time (`u64::MAX` when no row has one).
    pub(crate) min_row_ms: u64,
    /// Newest row time; `u64::MAX` when some row has none (or there is no hook).
    pub(crate) max_row_ms: u64,
    /// When the first row of the file expires under the rules in force now (`u64::MAX`: never).
    /// Kept in memory only: the rules may change across restarts.
    pub(crate) next_expiry_ms: u64,
}

impl RowTimes {
    /// Before any row.
    pub(crate) fn empty() -> RowTimes {
        RowTimes {
            min_row_ms: u64::MAX,
            max_row_ms: 0,
            next_expiry_ms: u64::MAX,
        }
    }

    /// Accounts for a new row.
    pub(crate) fn observe(&mut self, hook: Option<&RowExpirer>, row: &[u8]) {
        let Some(RowExpirer(h)) = hook else {
            self.max_row_ms = u64::MAX;
            return;
        };
        match h.row_time_ms(row) {
            Some(t) => {
                self.min_row_ms = self.min_row_ms.min(t);
                self.max_row_ms = self.max_row_ms.max(t);
            }
            None => self.max_row_ms = u64::MAX,
        }
        if let Some(at) = h.row_expires_ms(row) {
            self.next_expiry_ms = self.next_expiry_ms.min(at);
        }
    }
}

/// Whether every row of a file whose newest row time is `max_row_ms` has expired at `now_ms`.
pub(crate) fn file_expired(hook: &dyn RowExpiry, max_row_ms: u64, now_ms: u64) -> bool {
    max_row_ms != u64::MAX
        && hook
            .all_expired_before(now_ms)
            .is_some_and(|before| max_row_ms < before)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows are 8-byte big-endian times; each is kept for 10 ms, except time 0 (forever).
    #[derive(Debug)]
    struct TenMs;

    impl RowExpiry for TenMs {
        fn row_time_ms(&self, row: &[u8]) -> Option<u64> {
            let t = u64::from_be_bytes(row.try_into().ok()?);
            (t != 0).then_some(t)
        }
        fn row_expires_ms(&self, row: &[u8]) -> Option<u64> {
            self.row_time_ms(row).map(|t| t + 10)
        }
        fn all_expired_before(&self, now_ms: u64) -> Option<u64> {
            Some(now_ms.saturating_sub(10))
        }
        fn some_expired_before(&self, now_ms: u64) -> Option<u64> {
            Some(now_ms.saturating_sub(10))
        }
    }

    #[test]
    fn row_times_track_bounds_and_first_expiry() {
        let hook = RowExpirer(Arc::new(TenMs));
        let mut t = RowTimes::empty();
        t.observe(Some(&hook), &50u64.to_be_bytes());
        t.observe(Some(&hook), &20u64.to_be_bytes());
        assert_eq!((t.min_row_ms, t.max_row_ms, t.next_expiry_ms), (20, 50, 30));
        assert!(file_expired(&TenMs, t.max_row_ms, 61));
        assert!(!file_expired(&TenMs, t.max_row_ms, 60));
        t.observe(Some(&hook), &0u64.to_be_bytes());
        assert_eq!(t.max_row_ms, u64::MAX);
        assert!(!file_expired(&TenMs, t.max_row_ms, u64::MAX));
        let mut none = RowTimes::empty();
        none.observe(None, b"x");
        assert_eq!(none.max_row_ms, u64::MAX);
    }
}
