//! Counters of the tsdb layer: plain atomics, read through a snapshot.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::error::{Error, Rejection};
use crate::uid_kind::UidKind;

/// Live counters, shared by every thread of a [`crate::Tsdb`].
#[derive(Debug, Default)]
pub(crate) struct Stats {
    points_written: AtomicU64,
    write_batches: AtomicU64,
    rejected_invalid_name: AtomicU64,
    rejected_bad_tags: AtomicU64,
    rejected_bad_timestamp: AtomicU64,
    rejected_not_finite: AtomicU64,
    rejected_unknown_name: AtomicU64,
    rejected_storage: AtomicU64,
    rejected_other: AtomicU64,
    rejected_expired: AtomicU64,
    uids_metrics: AtomicU64,
    uids_tagk: AtomicU64,
    uids_tagv: AtomicU64,
    series_created: AtomicU64,
    points_read: AtomicU64,
    rows_read: AtomicU64,
    rows_compacted: AtomicU64,
    rowcompact_cells_folded: AtomicU64,
    rowcompact_failures: AtomicU64,
    rowcompact_errors: AtomicU64,
}

/// The counters at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TsdbStats {
    /// Points stored.
    pub points_written: u64,
    /// Engine write batches committed by the write path.
    pub write_batches: u64,
    /// Points rejected for an empty name or an illegal character.
    pub rejected_invalid_name: u64,
    /// Points rejected for no tag, too many tags or a duplicate tag key.
    pub rejected_bad_tags: u64,
    /// Points rejected for a negative or out-of-range timestamp.
    pub rejected_bad_timestamp: u64,
    /// Points rejected for a NaN or infinite value.
    pub rejected_not_finite: u64,
    /// Points rejected because a name had no UID and auto-creation was off.
    pub rejected_unknown_name: u64,
    /// Points rejected because the engine failed to commit them.
    pub rejected_storage: u64,
    /// Points rejected for any other reason (UID exhaustion, ...).
    pub rejected_other: u64,
    /// Points rejected because they were older than their metric's retention.
    pub rejected_expired: u64,
    /// Metric UIDs assigned since open.
    pub uids_assigned_metrics: u64,
    /// Tag-key UIDs assigned since open.
    pub uids_assigned_tagk: u64,
    /// Tag-value UIDs assigned since open.
    pub uids_assigned_tagv: u64,
    /// Series created since open.
    pub series_created: u64,
    /// Series in the index (a gauge, filled by [`crate::Tsdb::stats`]).
    pub series_count: u64,
    /// Points returned by reads.
    pub points_read: u64,
    /// Data rows read.
    pub rows_read: u64,
    /// Data rows the row compactor rewrote as one block.
    pub rows_compacted: u64,
    /// Raw cells the row compactor folded into blocks.
    pub rowcompact_cells_folded: u64,
    /// Data rows the row compactor could not decode (left dirty).
    pub rowcompact_failures: u64,
    /// Background row-compaction passes that failed in the engine (a full disk, a failed
    /// WAL) and were retried later.
    pub rowcompact_errors: u64,
}

impl Stats {
    pub(crate) fn points_written(&self, n: u64) {
        self.points_written.fetch_add(n, Relaxed);
        self.write_batches.fetch_add(1, Relaxed);
    }

    pub(crate) fn rejected(&self, e: &Error) {
        let c = match e.rejection() {
            Rejection::Name => &self.rejected_invalid_name,
            Rejection::Tags => &self.rejected_bad_tags,
            Rejection::Timestamp => &self.rejected_bad_timestamp,
            Rejection::Value => &self.rejected_not_finite,
            Rejection::UnknownName => &self.rejected_unknown_name,
            Rejection::Storage => &self.rejected_storage,
            Rejection::Expired => &self.rejected_expired,
            _ => &self.rejected_other,
        };
        c.fetch_add(1, Relaxed);
    }

    pub(crate) fn uid_assigned(&self, kind: UidKind) {
        match kind {
            UidKind::Metric => &self.uids_metrics,
            UidKind::Tagk => &self.uids_tagk,
            UidKind::Tagv => &self.uids_tagv,
        }
        .fetch_add(1, Relaxed);
    }

    pub(crate) fn series_created(&self, n: u64) {
        self.series_created.fetch_add(n, Relaxed);
    }

    pub(crate) fn read(&self, rows: u64, points: u64) {
        self.rows_read.fetch_add(rows, Relaxed);
        self.points_read.fetch_add(points, Relaxed);
    }

    pub(crate) fn rowcompact_error(&self) {
        self.rowcompact_errors.fetch_add(1, Relaxed);
    }

    pub(crate) fn rowcompacted(&self, rows: u64, cells: u64, failures: u64) {
        self.rows_compacted.fetch_add(rows, Relaxed);
        self.rowcompact_cells_folded.fetch_add(cells, Relaxed);
        self.rowcompact_failures.fetch_add(failures, Relaxed);
    }

    /// The counters now; `series_count` is left at 0 for the caller to fill.
    pub(crate) fn snapshot(&self) -> TsdbStats {
        TsdbStats {
            points_written: self.points_written.load(Relaxed),
            write_batches: self.write_batches.load(Relaxed),
            rejected_invalid_name: self.rejected_invalid_name.load(Relaxed),
            rejected_bad_tags: self.rejected_bad_tags.load(Relaxed),
            rejected_bad_timestamp: self.rejected_bad_timestamp.load(Relaxed),
            rejected_not_finite: self.rejected_not_finite.load(Relaxed),
            rejected_unknown_name: self.rejected_unknown_name.load(Relaxed),
            rejected_storage: self.rejected_storage.load(Relaxed),
            rejected_other: self.rejected_other.load(Relaxed),
            rejected_expired: self.rejected_expired.load(Relaxed),
            uids_assigned_metrics: self.uids_metrics.load(Relaxed),
            uids_assigned_tagk: self.uids_tagk.load(Relaxed),
            uids_assigned_tagv: self.uids_tagv.load(Relaxed),
            series_created: self.series_created.load(Relaxed),
            series_count: 0,
            points_read: self.points_read.load(Relaxed),
            rows_read: self.rows_read.load(Relaxed),
            rows_compacted: self.rows_compacted.load(Relaxed),
            rowcompact_cells_folded: self.rowcompact_cells_folded.load(Relaxed),
            rowcompact_failures: self.rowcompact_failures.load(Relaxed),
            rowcompact_errors: self.rowcompact_errors.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::PointError;

    #[test]
    fn rejections_are_counted_by_reason() {
        let s = Stats::default();
        s.rejected(&PointError::NoTags { metric: "m".into() }.into());
        s.rejected(
            &PointError::NotFinite {
                value: f64::NAN,
                metric: "m".into(),
                timestamp: 1,
            }
            .into(),
        );
        s.points_written(3);
        s.uid_assigned(UidKind::Tagv);
        let snap = s.snapshot();
        assert_eq!(snap.rejected_bad_tags, 1);
        assert_eq!(snap.rejected_not_finite, 1);
        assert_eq!(snap.points_written, 3);
        assert_eq!(snap.write_batches, 1);
        assert_eq!(snap.uids_assigned_tagv, 1);
    }
}
