//! Series a protocol has resolved, remembered by the bytes that named them on the wire (a
//! remote write series' encoded labels), so a series seen before skips the name decoding,
//! the escaping and the storage layer's name lookup.
//!
//! Shared by every connection: a collector spreads its series over several connections (and
//! Prometheus' shards), and one request carries each series once, so a cache per request or
//! per connection would seldom hit.

use std::hash::BuildHasher;

use hashbrown::HashTable;
use parking_lot::{RwLock, RwLockReadGuard};
use rustc_hash::FxBuildHasher;
use strata_tsdb::hint::prefetch;
use strata_tsdb::{SeriesHandle, Tsdb};

/// Series remembered at most. An entry costs its key (the encoded labels, about 100 bytes for
/// a Prometheus series) plus a hash slot and a handle, about 200 bytes, so this bounds the
/// cache near 200 MB; past it the cache starts again empty, and a million active series
/// are each resolved the full way once per round.
const MAX_SERIES: usize = 1 << 20;

/// Lookups of [`KnownReader::get_all`] taken through each of its passes at a time: enough
/// for their misses to overlap, few enough that what the first pass fetches is still in cache
/// for the second.
const LOOKUP_CHUNK: usize = 32;

/// Series handles by the bytes that named them; see the module docs.
#[derive(Debug, Default)]
pub struct KnownSeries {
    inner: RwLock<Known>,
}

#[derive(Debug, Default)]
struct Known {
    /// The [`Tsdb::series_epoch`] the handles were made in.
    epoch: u64,
    table: HashTable<KnownEntry>,
}

#[derive(Debug)]
struct KnownEntry {
    /// The hash of `key`: compared before the key, whose first read is a cache miss.
    hash: u64,
    key: Box<[u8]>,
    handle: SeriesHandle,
}

fn hash_of(key: &[u8]) -> u64 {
    FxBuildHasher.hash_one(key)
}

impl Known {
    fn find(&self, hash: u64, key: &[u8]) -> Option<&KnownEntry> {
        self.table.find(hash, |e| e.hash == hash && *e.key == *key)
    }
}

/// A read view of a [`KnownSeries`], for the lookups of one request.
#[derive(Debug)]
pub(crate) struct KnownReader<'a> {
    guard: RwLockReadGuard<'a, Known>,
    epoch: u64,
}

impl KnownReader<'_> {
    /// The handle of the series named by `key`, if known and still right.
    #[cfg(test)]
    pub(crate) fn get(&self, key: &[u8]) -> Option<&SeriesHandle> {
        if self.guard.epoch != self.epoch {
            return None;
        }
        self.guard.find(hash_of(key), key).map(|e| &e.handle)
    }

    /// Calls `found(i, handle)` for each `keys[i]` known and still right, in order.
    ///
    /// Each lookup misses the cache on a large cache: at the table's slot, then at the key
    /// it compares. Done one after another, a request pays those misses in sequence; here a
    /// chunk of lookups first finds each key's likely entry by its full hash and fetches its
    /// key, then compares the keys, so the chunk's misses overlap.
    pub(crate) fn get_all<'k>(
        &self,
        keys: impl ExactSizeIterator<Item = &'k [u8]> + Clone,
        mut found: impl FnMut(usize, &SeriesHandle),
    ) {
        if self.guard.epoch != self.epoch {
            return;
        }
        let known = &*self.guard;
        let mut likely: Vec<(u64, Option<&KnownEntry>)> = Vec::with_capacity(LOOKUP_CHUNK);
        let mut keys = keys.enumerate().peekable();
        while keys.peek().is_some() {
            let chunk = keys.clone().take(LOOKUP_CHUNK);
            likely.clear();
            likely.extend(chunk.map(|(_, key)| {
                let hash = hash_of(key);
                let entry = known.table.find(hash, |e| e.hash == hash);
                if let Some(e) = entry {
                    // A Prometheus series' labels take two or three lines.
                    for line in e.key.chunks(64).take(4) {
                        prefetch(line.as_ptr());
                    }
                    e.handle.prefetch();
                }
                (hash, entry)
            }));
            for (&(hash, entry), (i, key)) in likely.iter().zip(keys.by_ref()) {
                // Another key of the same hash is all but impossible, but then look properly.
                let entry = match entry {
                    Some(e) if *e.key == *key => Some(e),
                    Some(_) => known.find(hash, key),
                    None => None,
                };
                if let Some(e) = entry {
                    found(i, &e.handle);
                }
            }
        }
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
                known.table.clear();
                known.epoch = handle.epoch();
            }
            if known.table.len() >= MAX_SERIES {
                known.table.clear();
            }
            let hash = hash_of(&key);
            let entry = KnownEntry { hash, key, handle };
            match known
                .table
                .find_entry(hash, |e| e.hash == hash && e.key == entry.key)
            {
                Ok(mut present) => *present.get_mut() = entry,
                Err(_) => {
                    known.table.insert_unique(hash, entry, |e| e.hash);
                }
            }
        }
    }

    /// How many series are remembered.
    pub fn len(&self) -> usize {
        self.inner.read().table.len()
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

    /// Lookups in chunks find exactly the keys inserted, each with its own handle, across
    /// chunk boundaries and with unknown keys between.
    #[test]
    fn lookups_in_chunks_find_each_known_key() {
        let dir = tempfile::tempdir().unwrap();
        let tsdb = Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default()).unwrap();
        let known = KnownSeries::new();
        let key = |i: usize| format!("labels of series {i}").into_bytes();
        let handle = |i: usize| {
            let host = i.to_string();
            tsdb.series_handle("m", &[("host", host.as_str())]).unwrap()
        };
        known.insert(
            (0..200)
                .filter(|i| i % 3 != 0)
                .map(|i| (key(i).into(), handle(i))),
        );
        let keys: Vec<Vec<u8>> = (0..200).map(key).collect();
        let mut found = Vec::new();
        known
            .reader(&tsdb)
            .get_all(keys.iter().map(Vec::as_slice), |i, h| {
                found.push((i, format!("{h:?}")))
            });
        let want: Vec<(usize, String)> = (0..200)
            .filter(|i| i % 3 != 0)
            .map(|i| (i, format!("{:?}", handle(i))))
            .collect();
        assert_eq!(found, want);
        let reader = known.reader(&tsdb);
        assert!(reader.get(&key(3)).is_none());
        assert_eq!(format!("{:?}", reader.get(&key(4)).unwrap()), want[2].1);
    }
}
