//! The block cache shared by every open SST.
//!
//! Keyed by (file id, block offset), it holds verified, decoded blocks of any kind (data blocks,
//! and the decoded index and filters of each file) and is bounded by the bytes charged for them. It is split into shards, each a mutex around a small LRU (a hash map plus a
//! recency-ordered map), so concurrent readers rarely contend.

use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Number of shards. 16 keeps contention low on the few cores a node has while each shard of a
/// small cache still holds many 64 KiB blocks.
const SHARDS: usize = 16;

/// Bookkeeping bytes charged per entry on top of the block itself.
const ENTRY_OVERHEAD: usize = 64;

/// A cached value: a decoded block, downcast by the reader that inserted it.
pub(crate) type CacheValue = Arc<dyn Any + Send + Sync>;

/// Identifies a cached block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct BlockKey {
    /// The file's id (its file number), unique for the life of the process.
    pub(crate) file_id: u64,
    /// The block's offset in the file.
    pub(crate) offset: u64,
}

/// Counters of a [`BlockCache`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CacheStats {
    /// Lookups that found their block.
    pub(crate) hits: u64,
    /// Lookups that did not.
    pub(crate) misses: u64,
    /// Blocks evicted to make room.
    pub(crate) evictions: u64,
    /// Bytes currently charged.
    pub(crate) used_bytes: u64,
}

/// A byte-bounded, sharded LRU cache of blocks.
#[derive(Debug)]
pub(crate) struct BlockCache {
    shards: Vec<Mutex<Shard>>,
    shard_capacity: usize,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

#[derive(Debug, Default)]
struct Shard {
    /// Key → (value, charge, recency tick).
    map: HashMap<BlockKey, (CacheValue, usize, u64)>,
    /// Recency tick → key; the smallest tick is the least recently used.
    lru: BTreeMap<u64, BlockKey>,
    tick: u64,
    used: usize,
}

impl BlockCache {
    /// A cache that holds about `capacity_bytes` of blocks.
    pub(crate) fn new(capacity_bytes: usize) -> BlockCache {
        BlockCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            shard_capacity: capacity_bytes / SHARDS,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    fn shard(&self, key: &BlockKey) -> &Mutex<Shard> {
        let mix = key
            .file_id
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .wrapping_add(key.offset >> 10);
        &self.shards[(mix % SHARDS as u64) as usize]
    }

    /// The cached block, marking it recently used.
    pub(crate) fn get(&self, key: &BlockKey) -> Option<CacheValue> {
        let mut shard = self.shard(key).lock();
        shard.tick += 1;
        let tick = shard.tick;
        let found = shard.map.get_mut(key).map(|(value, _, t)| {
            let old = std::mem::replace(t, tick);
            (value.clone(), old)
        });
        match found {
            Some((value, old)) => {
                shard.lru.remove(&old);
                shard.lru.insert(tick, *key);
                drop(shard);
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(value)
            }
            None => {
                drop(shard);
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Caches a value charged at `bytes`, evicting least recently used values to stay within
    /// the capacity. A value larger than a shard's capacity is not cached.
    pub(crate) fn insert(&self, key: BlockKey, value: CacheValue, bytes: usize) {
        let charge = bytes + ENTRY_OVERHEAD;
        if charge > self.shard_capacity {
            return;
        }
        let mut shard = self.shard(&key).lock();
        shard.tick += 1;
        let tick = shard.tick;
        if let Some((_, old_charge, old_tick)) = shard.map.insert(key, (value, charge, tick)) {
            shard.lru.remove(&old_tick);
            shard.used -= old_charge;
        }
        shard.lru.insert(tick, key);
        shard.used += charge;
        let mut evicted = 0;
        while shard.used > self.shard_capacity {
            let Some((_, victim)) = shard.lru.pop_first() else {
                break;
            };
            if let Some((_, charge, _)) = shard.map.remove(&victim) {
                shard.used -= charge;
                evicted += 1;
            }
        }
        drop(shard);
        self.evictions.fetch_add(evicted, Ordering::Relaxed);
    }

    /// Drops every block of `file_id` (when the file is deleted).
    pub(crate) fn evict_file(&self, file_id: u64) {
        for shard in &self.shards {
            let mut shard = shard.lock();
            let Shard { map, lru, used, .. } = &mut *shard;
            map.retain(|k, (_, charge, tick)| {
                let keep = k.file_id != file_id;
                if !keep {
                    lru.remove(tick);
                    *used -= *charge;
                }
                keep
            });
        }
    }

    /// A snapshot of the counters.
    pub(crate) fn stats(&self) -> CacheStats {
        let used: usize = self.shards.iter().map(|s| s.lock().used).sum();
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            used_bytes: used as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(file_id: u64, offset: u64) -> BlockKey {
        BlockKey { file_id, offset }
    }

    #[test]
    fn hits_misses_and_lru_eviction() {
        // One shard's worth: 16 shards × 1000 bytes.
        let cache = BlockCache::new(16 * 1000);
        let block: CacheValue = Arc::new(vec![0u8; 300]);
        // Same file, offsets within one 1 KiB window land in one shard.
        cache.insert(key(1, 0), block.clone(), 300);
        cache.insert(key(1, 1), block.clone(), 300);
        assert!(cache.get(&key(1, 0)).is_some());
        assert!(cache.get(&key(1, 5)).is_none());
        // 3 × 364 > 1000: inserting a third evicts the least recently used, (1, 1).
        cache.insert(key(1, 2), block.clone(), 300);
        assert!(cache.get(&key(1, 1)).is_none());
        let hit = cache
            .get(&key(1, 0))
            .and_then(|v| v.downcast::<Vec<u8>>().ok());
        assert_eq!(hit.map(|v| v.len()), Some(300));
        assert!(cache.get(&key(1, 2)).is_some());
        let s = cache.stats();
        assert_eq!((s.hits, s.misses, s.evictions), (3, 2, 1));
        assert_eq!(s.used_bytes, 2 * 364);

        cache.evict_file(1);
        assert_eq!(cache.stats().used_bytes, 0);
        assert!(cache.get(&key(1, 0)).is_none());

        // Too large for a shard: not cached.
        cache.insert(key(2, 0), block, 2000);
        assert!(cache.get(&key(2, 0)).is_none());
    }
}
