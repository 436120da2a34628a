//! Series a protocol has resolved, remembered by the bytes that named them on the wire (a
//! remote write series' encoded labels), so a series seen before skips the name decoding,
//! the escaping and the storage layer's name lookup.
//!
//! Shared by every connection: a collector spreads its series over several connections (and
//! Prometheus' shards), and one request carries each series once, so a cache per request or
//! per connection would seldom hit.

use parking_lot::{RwLock, RwLockReadGuard};
use rustc_hash::FxHashMap;
use strata_tsdb::{SeriesHandle, Tsdb};

/// Series remembered at most. An entry costs its key (the encoded labels, about 100 bytes for
/// a Prometheus series) plus a hash slot and a handle, about 200 bytes, so this bounds the
/// cache near 200 MB; past it the cache starts again empty, and a million active series
/// are each resolved the full way once per round.
const MAX_SERIES: usize = 1 << 20;

/// Series handles by the bytes that named them; see the module docs.
#[derive(Debug, Default)]
pub struct KnownSeries {
    inner: RwLock<Known>,
}

#[derive(Debug, Default)]
struct Known {
    /// The [`Tsdb::series_epoch`] the handles were made in.
    epoch: u64,
    handles: FxHashMap<Box<[u8]>, SeriesHandle>,
}

/// A read view of a [`KnownSeries`], for the lookups of one request.
#[derive(Debug)]
pub(crate) struct KnownReader<'a> {
    guard: RwLockReadGuard<'a, Known>,
    epoch: u64,
}

impl KnownReader<'_> {
    /// The handle of the series named by `key`, if known and still right.
    pub(crate) fn get(&self, key: &[u8]) -> Option<&SeriesHandle> {
        if self.guard.epoch != self.epoch {
            return None;
        }
        self.guard.handles.get(key)
    }
}

impl KnownSeries {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// A view for lookups against `tsdb`'s current series epoch.
    pub(crate) fn reader(&self, tsdb: &Tsdb) -> KnownReader<'_> {
        KnownReader {
            epoch: tsdb.series_epoch(),
            guard: self.inner.read(),
        }
    }

    /// Remembers the series of each key.
    pub(crate) fn insert(&self, entries: impl IntoIterator<Item = (Box<[u8]>, SeriesHandle)>) {
        let mut entries = entries.into_iter().peekable();
        // Once every series is known, a request has nothing to add, and taking the write lock
        // anyway would stop every other connection's lookups.
        if entries.peek().is_none() {
            return;
        }
        let mut known = self.inner.write();
        for (key, handle) in entries {
            if handle.epoch() != known.epoch {
                // Handles of another epoch may no longer be right (a rename or a delete);
                // an older handle than the cache's is dropped, a newer one starts it afresh.
                if handle.epoch() < known.epoch {
                    continue;
                }
                known.handles.clear();
                known.epoch = handle.epoch();
            }
            if known.handles.len() >= MAX_SERIES {
                known.handles.clear();
            }
            known.handles.insert(key, handle);
        }
    }

    /// How many series are remembered.
    pub fn len(&self) -> usize {
        self.inner.read().handles.len()
    }

    /// Whether no series is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// Requests whose series are all known insert nothing; they must not wait for the write
    /// lock, which every other connection's lookups would then wait behind.
    #[test]
    fn inserting_nothing_leaves_the_lock_alone() {
        let dir = tempfile::tempdir().unwrap();
        let tsdb = Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default()).unwrap();
        let known = KnownSeries::new();
        let reading = known.reader(&tsdb);
        let (done, finished) = mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                known.insert(Vec::new());
                let _ = done.send(());
            });
            let waited = finished.recv_timeout(Duration::from_secs(5));
            drop(reading);
            assert!(waited.is_ok(), "an empty insert waited for the readers");
        });
    }
}
