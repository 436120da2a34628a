//! The block cache shared by every open SST.
//!
//! Keyed by (file id, block offset), it holds verified, decoded blocks of any kind (data blocks,
//! and the decoded index and filters of each file) and is bounded by the bytes charged for them.
//! It is split into shards so that concurrent readers rarely contend. Several databases of one
//! process may share one bound ([`SharedBlockCache`]); each keys its blocks in a namespace of
//! its own.
//!
//! Eviction is least-recently-used, kept lazily so that a hit only takes a shard's read lock:
//! a hit stamps the entry with a tick from a global counter. Each shard keeps a recency map from
//! tick to key holding the tick each entry was last *recorded* under; eviction pops the oldest
//! record and, if the entry was used since (its stamp is newer), records it again under the
//! stamp instead of evicting it. The entry evicted is thus always the least recently used.

use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

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
    /// The namespace of the database the file belongs to, set by the cache: databases that
    /// share one have file ids in common.
    pub(crate) ns: u64,
}

/// A multiply-rotate hash for [`BlockKey`]s: they are not attacker-chosen, so SipHash's cost
/// buys nothing on this hot path.
#[derive(Debug, Default, Clone, Copy)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(26) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
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
    /// Bytes currently charged: of every database, when the cache is shared.
    pub(crate) used_bytes: u64,
}

/// A byte-bounded, sharded LRU cache of blocks.
#[derive(Debug)]
pub(crate) struct BlockCache {
    core: Arc<Core>,
    /// This database's share of the key space ([`BlockKey::ns`]), so the databases of one
    /// [`SharedBlockCache`] never see each other's blocks.
    ns: u64,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// The shards and the bound, which the handles of a [`SharedBlockCache`] share.
#[derive(Debug)]
struct Core {
    shards: Vec<RwLock<Shard>>,
    shard_capacity: usize,
    /// The recency clock: every hit and insertion takes the next tick.
    clock: AtomicU64,
    evictions: AtomicU64,
    /// The namespace the next database sharing the cache takes.
    next_ns: AtomicU64,
}

/// A block cache for several databases of one process, with one bound for all of them: a
/// read replica over partitioned writers opens one database per writer's tree, and each
/// would otherwise hold `block_cache_bytes` of its own (`DbOptions::shared_block_cache`).
#[derive(Debug, Clone)]
pub struct SharedBlockCache(Arc<Core>);

impl SharedBlockCache {
    /// A cache of about `capacity_bytes` for every database opened with it.
    pub fn new(capacity_bytes: usize) -> SharedBlockCache {
        SharedBlockCache(Arc::new(Core::new(capacity_bytes)))
    }
}

impl Core {
    fn new(capacity_bytes: usize) -> Core {
        Core {
            shards: (0..SHARDS).map(|_| RwLock::new(Shard::default())).collect(),
            shard_capacity: capacity_bytes / SHARDS,
            clock: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            // 0 is a private cache's.
            next_ns: AtomicU64::new(1),
        }
    }
}

#[derive(Debug)]
struct Slot {
    value: CacheValue,
    charge: usize,
    /// The tick of the last use.
    used: AtomicU64,
    /// The tick this slot is recorded under in the shard's recency map.
    recorded: u64,
}

#[derive(Debug, Default)]
struct Shard {
    map: HashMap<BlockKey, Slot, BuildHasherDefault<KeyHasher>>,
    /// Recorded tick → key; the smallest is the oldest record (possibly used since).
    lru: BTreeMap<u64, BlockKey>,
    used: usize,
}

impl BlockCache {
    /// A cache of its own that holds about `capacity_bytes` of blocks.
    pub(crate) fn new(capacity_bytes: usize) -> BlockCache {
        BlockCache::on(Arc::new(Core::new(capacity_bytes)), 0)
    }

    /// A database's handle on `shared`, with a namespace of its own.
    pub(crate) fn sharing(shared: &SharedBlockCache) -> BlockCache {
        let ns = shared.0.next_ns.fetch_add(1, Ordering::Relaxed);
        BlockCache::on(shared.0.clone(), ns)
    }

    fn on(core: Arc<Core>, ns: u64) -> BlockCache {
        BlockCache {
            core,
            ns,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// `key` in the shared key space.
    fn scoped(&self, key: &BlockKey) -> BlockKey {
        BlockKey {
            ns: self.ns,
            ..*key
        }
    }

    fn shard(&self, key: &BlockKey) -> &RwLock<Shard> {
        let mix = key
            .file_id
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .wrapping_add(key.offset >> 10);
        &self.core.shards[(mix % SHARDS as u64) as usize]
    }

    fn tick(&self) -> u64 {
        self.core.clock.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The cached block, marking it recently used.
    pub(crate) fn get(&self, key: &BlockKey) -> Option<CacheValue> {
        let key = &self.scoped(key);
        let shard = self.shard(key).read();
        let found = shard.map.get(key).map(|slot| {
            slot.used.store(self.tick(), Ordering::Relaxed);
            slot.value.clone()
        });
        drop(shard);
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Caches a value charged at `bytes`, evicting least recently used values to stay within
    /// the capacity. A value larger than a shard's capacity is not cached.
    pub(crate) fn insert(&self, key: BlockKey, value: CacheValue, bytes: usize) {
        let charge = bytes + ENTRY_OVERHEAD;
        if charge > self.core.shard_capacity {
            return;
        }
        let key = self.scoped(&key);
        let mut guard = self.shard(&key).write();
        let shard = &mut *guard;
        let tick = self.tick();
        let slot = Slot {
            value,
            charge,
            used: AtomicU64::new(tick),
            recorded: tick,
        };
        if let Some(old) = shard.map.insert(key, slot) {
            shard.lru.remove(&old.recorded);
            shard.used -= old.charge;
        }
        shard.lru.insert(tick, key);
        shard.used += charge;
        let mut evicted = 0;
        while shard.used > self.core.shard_capacity {
            let Some((recorded, victim)) = shard.lru.pop_first() else {
                break;
            };
            let Some(slot) = shard.map.get_mut(&victim) else {
                continue;
            };
            let last_use = slot.used.load(Ordering::Relaxed);
            if last_use > recorded {
                // Used since it was recorded: record it again, as of its last use.
                slot.recorded = last_use;
                shard.lru.insert(last_use, victim);
                continue;
            }
            if let Some(slot) = shard.map.remove(&victim) {
                shard.used -= slot.charge;
                evicted += 1;
            }
        }
        drop(guard);
        self.core.evictions.fetch_add(evicted, Ordering::Relaxed);
    }

    /// Drops every block of `file_id` (when the file is deleted).
    pub(crate) fn evict_file(&self, file_id: u64) {
        let ns = self.ns;
        self.evict_where(|k| k.ns == ns && k.file_id == file_id);
    }

    /// Drops every block of this database (an operator's `dropcaches`). Readers holding a
    /// block keep it; the next lookup reads it from its file again.
    pub(crate) fn clear(&self) {
        let ns = self.ns;
        self.evict_where(|k| k.ns == ns);
    }

    fn evict_where(&self, drop: impl Fn(&BlockKey) -> bool) {
        for shard in &self.core.shards {
            let mut shard = shard.write();
            let Shard { map, lru, used } = &mut *shard;
            map.retain(|k, slot| {
                let keep = !drop(k);
                if !keep {
                    lru.remove(&slot.recorded);
                    *used -= slot.charge;
                }
                keep
            });
        }
    }

    /// A snapshot of the counters.
    pub(crate) fn stats(&self) -> CacheStats {
        let used: usize = self.core.shards.iter().map(|s| s.read().used).sum();
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.core.evictions.load(Ordering::Relaxed),
            used_bytes: used as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(file_id: u64, offset: u64) -> BlockKey {
        BlockKey {
            file_id,
            offset,
            ns: 0,
        }
    }

    #[test]
    fn clear_drops_every_block() {
        let cache = BlockCache::new(16 * 1000);
        for i in 0..20 {
            cache.insert(key(i, 0), Arc::new(i), 10);
        }
        assert!(cache.stats().used_bytes > 0);
        cache.clear();
        assert_eq!(cache.stats().used_bytes, 0);
        assert!((0..20).all(|i| cache.get(&key(i, 0)).is_none()));
        cache.insert(key(1, 0), Arc::new(1u64), 10);
        assert!(cache.get(&key(1, 0)).is_some());
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

    #[test]
    fn a_hit_protects_a_block_from_eviction_until_it_is_the_oldest_use() {
        let cache = BlockCache::new(16 * 1000);
        let block: CacheValue = Arc::new(0u8);
        for off in 0..2 {
            cache.insert(key(1, off), block.clone(), 300);
        }
        // Use (1, 0) after (1, 1): (1, 1) goes first, then (1, 0) once (1, 2) is newer.
        assert!(cache.get(&key(1, 0)).is_some());
        cache.insert(key(1, 2), block.clone(), 300);
        assert!(cache.get(&key(1, 1)).is_none());
        cache.insert(key(1, 3), block.clone(), 300);
        assert!(cache.get(&key(1, 0)).is_none());
        assert!(cache.get(&key(1, 2)).is_some());
        assert!(cache.get(&key(1, 3)).is_some());
        // Re-inserting a key replaces it without double-charging.
        cache.insert(key(1, 3), block, 300);
        assert_eq!(cache.stats().used_bytes, 2 * 364);
    }

    #[test]
    fn databases_sharing_a_cache_keep_apart_and_share_its_bound() {
        let shared = SharedBlockCache::new(16 * 1000);
        let (a, b) = (BlockCache::sharing(&shared), BlockCache::sharing(&shared));
        let block: CacheValue = Arc::new(0u8);
        a.insert(key(1, 0), Arc::new(1u8), 300);
        b.insert(key(1, 0), Arc::new(2u8), 300);
        let value = |c: &BlockCache| c.get(&key(1, 0)).and_then(|v| v.downcast::<u8>().ok());
        assert_eq!(
            (value(&a).as_deref(), value(&b).as_deref()),
            (Some(&1), Some(&2))
        );
        // File ids of late epochs use high bits (`epoch << 40`): still apart.
        let c = BlockCache::sharing(&shared);
        c.insert(key(3 << 48 | 1, 0), Arc::new(3u8), 10);
        assert!(a.get(&key(3 << 48 | 1, 0)).is_none() && b.get(&key(1, 0)).is_some());
        c.clear();
        // One shard's bound for both: a third block evicts the least recently used, a's.
        b.insert(key(1, 1), block.clone(), 300);
        assert!(a.get(&key(1, 0)).is_none());
        assert_eq!(a.stats().used_bytes, 2 * 364);
        // Evicting a file or clearing touches only the caller's blocks.
        a.insert(key(2, 0), block.clone(), 10);
        b.evict_file(2);
        assert!(a.get(&key(2, 0)).is_some());
        b.clear();
        assert!(a.get(&key(2, 0)).is_some());
        assert!(b.get(&key(1, 1)).is_none());
    }
}
