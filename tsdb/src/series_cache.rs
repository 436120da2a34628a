//! The write path's series cache: a point's metric and tags, exactly as sent, map to its
//! validated, UID-resolved series.
//!
//! A hit skips name validation, the seven or so UID map lookups and the TSUID allocation, which
//! were most of the per-point cost of a write. Entries are only made for series that passed
//! validation, so a hit needs no re-check. The cache is cleared when a UID is renamed (a name
//! may then resolve differently) and when it grows past its bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use parking_lot::RwLock;
use rustc_hash::FxHashMap;

use crate::rowkey::Tsuid;

/// No series id known yet.
const NO_ID: u32 = u32::MAX;

/// A resolved series, shared by the cache and the points of a batch being written.
#[derive(Debug)]
pub(crate) struct CachedSeries {
    pub(crate) tsuid: Tsuid,
    pub(crate) salt: u8,
    /// The dense series id once the series is in the index.
    id: AtomicU32,
    /// `base_time << 32 | marker epoch` of the last dirty marker this entry wrote; see
    /// `Tsdb::write_inner`.
    marked: AtomicU64,
}

impl CachedSeries {
    /// The series id, once known.
    pub(crate) fn id(&self) -> Option<u32> {
        match self.id.load(Ordering::Relaxed) {
            NO_ID => None,
            id => Some(id),
        }
    }

    pub(crate) fn set_id(&self, id: u32) {
        self.id.store(id, Ordering::Relaxed);
    }

    /// The `(base_time, marker epoch)` of the last marker written for this entry.
    pub(crate) fn marked(&self) -> (u32, u32) {
        let m = self.marked.load(Ordering::Relaxed);
        ((m >> 32) as u32, m as u32)
    }

    pub(crate) fn set_marked(&self, base_time: u32, epoch: u32) {
        self.marked.store(
            u64::from(base_time) << 32 | u64::from(epoch),
            Ordering::Relaxed,
        );
    }
}

/// The cache. Lookups take a read lock; inserts a write lock. Keyed by the raw key itself
/// (see [`raw_key`]): one Fx hash of the key and one comparison per lookup.
#[derive(Debug)]
pub(crate) struct SeriesCache {
    map: RwLock<FxHashMap<Box<[u8]>, Arc<CachedSeries>>>,
    max_entries: usize,
    /// Counts [`SeriesCache::clear`]s: entries handed out before one may be wrong. (Dropping
    /// entries at the bound does not count; those entries stay right.)
    epoch: AtomicU64,
}

impl SeriesCache {
    pub(crate) fn new(max_entries: usize) -> SeriesCache {
        SeriesCache {
            map: RwLock::new(FxHashMap::default()),
            max_entries,
            epoch: AtomicU64::new(0),
        }
    }

    /// The entry of `key` (built by [`raw_key`]).
    #[cfg(test)]
    pub(crate) fn get(&self, key: &[u8]) -> Option<Arc<CachedSeries>> {
        self.map.read().get(key).cloned()
    }

    /// A read view for many lookups under one lock acquisition. Drop it before [`insert`].
    ///
    /// [`insert`]: SeriesCache::insert
    pub(crate) fn reader(&self) -> SeriesCacheReader<'_> {
        SeriesCacheReader(self.map.read())
    }

    /// Adds an entry for `key`, or returns the one another writer added first.
    pub(crate) fn insert(&self, key: &[u8], tsuid: Tsuid, salt: u8) -> Arc<CachedSeries> {
        let mut map = self.map.write();
        if let Some(e) = map.get(key) {
            return e.clone();
        }
        if map.len() >= self.max_entries {
            map.clear();
        }
        let e = Arc::new(CachedSeries {
            tsuid,
            salt,
            id: AtomicU32::new(NO_ID),
            marked: AtomicU64::new(0),
        });
        map.insert(key.into(), e.clone());
        e
    }

    /// Drops every entry, as they may now be wrong, and starts a new epoch.
    pub(crate) fn clear(&self) {
        let mut map = self.map.write();
        map.clear();
        self.epoch.fetch_add(1, Ordering::Release);
    }

    /// The number of [`SeriesCache::clear`]s so far.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }
}

/// Lookups in the cache under one read lock (see [`SeriesCache::reader`]).
pub(crate) struct SeriesCacheReader<'a>(
    parking_lot::RwLockReadGuard<'a, FxHashMap<Box<[u8]>, Arc<CachedSeries>>>,
);

impl SeriesCacheReader<'_> {
    /// The entry of `key` (built by [`raw_key`]).
    pub(crate) fn get(&self, key: &[u8]) -> Option<Arc<CachedSeries>> {
        self.0.get(key).cloned()
    }
}

impl std::fmt::Debug for SeriesCacheReader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeriesCacheReader")
            .field("entries", &self.0.len())
            .finish()
    }
}

/// Builds the raw key of a point's metric and tags, as sent, into `out`: each string prefixed
/// by its length, so no two different inputs share a key.
pub(crate) fn raw_key<S: AsRef<str>>(metric: &str, tags: &[(S, S)], out: &mut Vec<u8>) {
    fn push(out: &mut Vec<u8>, s: &str) {
        let n = s.len();
        if n < 0xFF {
            out.push(n as u8);
        } else {
            out.push(0xFF);
            out.extend_from_slice(&(n as u64).to_le_bytes());
        }
        out.extend_from_slice(s.as_bytes());
    }
    out.clear();
    push(out, metric);
    for (k, v) in tags {
        push(out, k.as_ref());
        push(out, v.as_ref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uid::Uid;

    fn tsuid(n: u32) -> Tsuid {
        let u = |x| Uid::from_u32(x).expect("uid");
        Tsuid::new(u(n), &mut [(u(1), u(2))]).expect("tsuid")
    }

    #[test]
    fn raw_keys_of_different_inputs_differ() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        raw_key("ab", &[("c", "d")], &mut a);
        raw_key("a", &[("bc", "d")], &mut b);
        assert_ne!(a, b);
        raw_key("m", &[("k", "v"), ("x", "y")], &mut a);
        raw_key("m", &[("x", "y"), ("k", "v")], &mut b);
        assert_ne!(a, b, "tag order is part of the raw key");
        let long = "x".repeat(300);
        raw_key(&long, &[("k", "v")], &mut a);
        raw_key(&long, &[("k", "v")], &mut b);
        assert_eq!(a, b);
    }

    #[test]
    fn insert_get_and_bound() {
        let cache = SeriesCache::new(2);
        let mut k = Vec::new();
        raw_key("m", &[("k", "v")], &mut k);
        assert!(cache.get(&k).is_none());
        let e = cache.insert(&k, tsuid(1), 3);
        assert_eq!(e.id(), None);
        e.set_id(7);
        let again = cache.insert(&k, tsuid(9), 0);
        assert_eq!(again.tsuid, tsuid(1), "the first entry wins");
        assert_eq!(cache.get(&k).and_then(|e| e.id()), Some(7));
        e.set_marked(3600, 5);
        assert_eq!(e.marked(), (3600, 5));
        let mut k2 = Vec::new();
        raw_key("m2", &[("k", "v")], &mut k2);
        cache.insert(&k2, tsuid(2), 0);
        let mut k3 = Vec::new();
        raw_key("m3", &[("k", "v")], &mut k3);
        cache.insert(&k3, tsuid(3), 0);
        assert!(cache.get(&k).is_none(), "cleared at the bound");
        assert!(cache.get(&k3).is_some());
        assert_eq!(
            cache.epoch(),
            0,
            "dropping entries at the bound keeps the epoch"
        );
        cache.clear();
        assert!(cache.get(&k3).is_none());
        assert_eq!(cache.epoch(), 1);
    }
}
