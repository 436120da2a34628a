//! Applying retention without new writes: the engine's expiry pass, and the series index's
//! sweep of series with no data left (see `policy.rs` for what expires when).

use std::time::Duration;

use roaring::RoaringBitmap;

use crate::background::Background;
use crate::error::Result;
use crate::policy::{Policy, row_end_ms};
use crate::rowkey::base_time_of;
use crate::series_index::SeriesIndex;
use crate::tsdb::Tsdb;

impl Tsdb {
    /// Applies the retention now, as the server does every hour (nothing new is written
    /// meanwhile, so no compaction would): the engine drops the files whose data has all
    /// expired and rewrites those holding expired rows, and series whose newest point has
    /// expired leave lookups and suggestions (their UIDs stay, as OpenTSDB never deletes
    /// one). Returns how many series left.
    pub fn expire(&self) -> Result<u64> {
        let policy = self.policy();
        if policy.is_forever() {
            return Ok(0);
        }
        self.store().db.expire()?;
        let dead = dead_series(&self.index().read(), policy, None);
        if dead.is_empty() {
            return Ok(0);
        }
        // Under the writers' lock, a write cannot move a newest point meanwhile.
        let _state = self.store().writes.lock();
        let mut index = self.index().write();
        let dead = dead_series(&index, policy, Some(&dead));
        index.retire(&dead);
        tracing::info!(series = dead.len(), "series expired");
        Ok(dead.len())
    }

    /// Starts a thread that runs [`Tsdb::expire`] now and then every `interval` (the clock's
    /// time decides what has expired), until the returned handle is dropped. A failed pass is
    /// logged and tried again at the next interval.
    pub fn spawn_expirer(&self, interval: Duration) -> Result<Expirer> {
        let db = self.clone();
        let thread = Background::spawn("expire", move |stop| {
            loop {
                if let Err(e) = db.expire() {
                    tracing::warn!(error = %e, "expiry pass failed");
                }
                if stop.wait(interval) {
                    return;
                }
            }
        })?;
        Ok(Expirer { _thread: thread })
    }
}

/// The thread started by [`Tsdb::spawn_expirer`]; dropping it stops the thread (after its
/// current pass) and waits for it.
#[derive(Debug)]
pub struct Expirer {
    _thread: Background,
}

/// The series (of `among`, or all) not yet retired whose newest point has expired.
fn dead_series(
    index: &SeriesIndex,
    policy: &Policy,
    among: Option<&RoaringBitmap>,
) -> RoaringBitmap {
    let is_dead = |id: u32| {
        let Some(s) = index.series.get(id as usize) else {
            return false;
        };
        let (Some((ts, _)), Some(floor)) = (s.last, policy.floor_ms(s.tsuid.metric())) else {
            return false;
        };
        // When `last` is not exact, the newest point is in its row: the row's end bounds it.
        let row_end = i64::try_from(row_end_ms(base_time_of(ts))).unwrap_or(i64::MAX);
        !index.retired.contains(id) && row_end < floor
    };
    match among {
        Some(ids) => ids.iter().filter(|&id| is_dead(id)).collect(),
        None => (0..index.series.len() as u32)
            .filter(|&id| is_dead(id))
            .collect(),
    }
}
