//! The retention policy: how long each metric's points are kept, resolved per metric UID.
//!
//! The [`Policy`] answers, per metric UID (cached: a rule lookup needs the metric's name),
//! how long points are kept. Writes refuse points already past it, reads start no earlier
//! than it, and it is the engine's [`RowExpiry`] hook for the data table, so compaction drops
//! rows whose whole hour has expired and files holding only such rows (see
//! `strata_engine::RowExpiry`). A row expires as a whole, once its newest possible point
//! (the end of its hour) is past the retention; until then a query still hides its older
//! points.

use std::sync::{Arc, OnceLock, Weak};

use parking_lot::RwLock;
use rustc_hash::FxHashMap;
use strata_engine::RowExpiry;

use crate::clock::Clock;
use crate::retention::Retention;
use crate::rowkey::{ROW_SPAN_SECS, SALT_LEN, TIME_LEN};
use crate::uid::{UID_LEN, Uid, UidKind, UidTable};

/// Retention rules resolved per metric UID.
#[derive(Debug)]
pub(crate) struct Policy {
    retention: Retention,
    clock: Arc<dyn Clock>,
    /// Set once the UID table is open (the engine opens the data table, with this hook,
    /// before it). Weak: the table holds the engine, which holds this hook.
    uids: OnceLock<Weak<UidTable>>,
    /// Milliseconds each metric's points are kept (`None`: forever).
    keep: RwLock<FxHashMap<Uid, Option<u64>>>,
    longest_ms: Option<u64>,
    shortest_ms: Option<u64>,
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Policy {
    pub(crate) fn new(retention: Retention, clock: Arc<dyn Clock>) -> Policy {
        Policy {
            longest_ms: retention.longest().map(millis),
            shortest_ms: retention.shortest().map(millis),
            retention,
            clock,
            uids: OnceLock::new(),
            keep: RwLock::new(FxHashMap::default()),
        }
    }

    /// Gives the policy the names of metric UIDs.
    pub(crate) fn set_uids(&self, uids: &Arc<UidTable>) {
        // Set once, at open; a second call would hand the same table.
        let _ = self.uids.set(Arc::downgrade(uids));
    }

    /// The settings.
    pub(crate) fn retention(&self) -> &Retention {
        &self.retention
    }

    /// Whether nothing ever expires.
    pub(crate) fn is_forever(&self) -> bool {
        self.shortest_ms.is_none()
    }

    /// Forgets the per-metric answers, after a metric's name changed.
    pub(crate) fn forget(&self) {
        self.keep.write().clear();
    }

    /// How long `metric`'s points are kept, in ms (`None`: forever, also for a UID with no
    /// name yet).
    pub(crate) fn keep_ms(&self, metric: Uid) -> Option<u64> {
        if self.is_forever() {
            return None;
        }
        if self.retention.rules.is_empty() {
            return self.retention.global.map(millis);
        }
        if let Some(&k) = self.keep.read().get(&metric) {
            return k;
        }
        let name = self
            .uids
            .get()?
            .upgrade()?
            .name(UidKind::Metric, metric)
            .ok()?;
        let keep = self.retention.for_metric(&name).map(millis);
        self.keep.write().insert(metric, keep);
        keep
    }

    /// The oldest data time (ms) of `metric` kept now, if its points expire.
    pub(crate) fn floor_ms(&self, metric: Uid) -> Option<i64> {
        let keep = self.keep_ms(metric)?;
        Some(floor_at(self.clock.now_ms(), keep))
    }

    /// The oldest data time (ms) any metric keeps now, if every metric's points expire.
    pub(crate) fn oldest_kept_ms(&self) -> Option<i64> {
        let floor = self.all_expired_before(self.clock.now_ms())?;
        Some(i64::try_from(floor).unwrap_or(i64::MAX))
    }
}

fn floor_at(now_ms: u64, keep_ms: u64) -> i64 {
    i64::try_from(now_ms.saturating_sub(keep_ms)).unwrap_or(i64::MAX)
}

/// The retention floors of one batch of writes: the clock is read once per batch, and a run
/// of points of one metric looks its retention up once.
#[derive(Debug)]
pub(crate) struct BatchFloors<'a> {
    policy: &'a Policy,
    now_ms: Option<u64>,
    last: Option<(Uid, Option<i64>)>,
}

impl<'a> BatchFloors<'a> {
    pub(crate) fn new(policy: &'a Policy) -> BatchFloors<'a> {
        BatchFloors {
            policy,
            now_ms: None,
            last: None,
        }
    }

    /// As [`Policy::floor_ms`], at the batch's time.
    pub(crate) fn floor_ms(&mut self, metric: Uid) -> Option<i64> {
        if self.policy.is_forever() {
            return None;
        }
        if let Some((m, floor)) = self.last
            && m == metric
        {
            return floor;
        }
        let policy = self.policy;
        let floor = policy.keep_ms(metric).map(|keep| {
            let now = *self.now_ms.get_or_insert_with(|| policy.clock.now_ms());
            floor_at(now, keep)
        });
        self.last = Some((metric, floor));
        floor
    }
}

/// The metric UID and hour of a data rowkey, if it is one.
fn row_head(row: &[u8]) -> Option<(Uid, u32)> {
    let metric = Uid::from_bytes(row.get(SALT_LEN..SALT_LEN + UID_LEN)?)?;
    let at = SALT_LEN + UID_LEN;
    let base: [u8; TIME_LEN] = row.get(at..at + TIME_LEN)?.try_into().ok()?;
    Some((metric, u32::from_be_bytes(base)))
}

/// The newest data time (ms) a row of hour `base` can hold.
pub(crate) fn row_end_ms(base: u32) -> u64 {
    (u64::from(base) + u64::from(ROW_SPAN_SECS)) * 1000 - 1
}

impl RowExpiry for Policy {
    fn row_time_ms(&self, row: &[u8]) -> Option<u64> {
        row_head(row).map(|(_, base)| row_end_ms(base))
    }

    fn row_expires_ms(&self, row: &[u8]) -> Option<u64> {
        let (metric, base) = row_head(row)?;
        let keep = self.keep_ms(metric)?;
        Some(row_end_ms(base).saturating_add(keep).saturating_add(1))
    }

    fn all_expired_before(&self, now_ms: u64) -> Option<u64> {
        self.longest_ms.map(|k| now_ms.saturating_sub(k))
    }

    fn some_expired_before(&self, now_ms: u64) -> Option<u64> {
        self.shortest_ms.map(|k| now_ms.saturating_sub(k))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::ManualClock;
    use crate::retention::RetentionRule;

    #[test]
    fn a_row_expires_when_its_whole_hour_is_past_the_retention() {
        let clock = Arc::new(ManualClock::new(0));
        let p = Policy::new(
            Retention {
                global: Some(Duration::from_secs(3600)),
                rules: Vec::new(),
            },
            clock,
        );
        let mut row = vec![0u8, 0, 0, 1];
        row.extend_from_slice(&7200u32.to_be_bytes());
        row.extend_from_slice(&[0, 0, 1, 0, 0, 1]);
        assert_eq!(p.row_time_ms(&row), Some(10_800_000 - 1));
        assert_eq!(p.row_expires_ms(&row), Some(10_800_000 + 3_600_000));
        assert_eq!(p.all_expired_before(5_000_000), Some(1_400_000));
        assert_eq!(p.row_time_ms(b"short"), None);
        let uid = Uid::from_u32(1).map(|u| p.keep_ms(u));
        assert_eq!(uid, Some(Some(3_600_000)));
    }

    #[test]
    fn rules_need_the_metric_name_and_keep_forever_without_it() {
        let p = Policy::new(
            Retention {
                global: Some(Duration::from_secs(60)),
                rules: vec![RetentionRule {
                    metric: "a.*".into(),
                    keep: None,
                }],
            },
            Arc::new(ManualClock::new(0)),
        );
        // No UID table yet: no name, kept.
        assert_eq!(Uid::from_u32(1).and_then(|u| p.keep_ms(u)), None);
        assert_eq!(p.all_expired_before(100_000), None);
        assert_eq!(p.some_expired_before(100_000), Some(40_000));
    }
}
