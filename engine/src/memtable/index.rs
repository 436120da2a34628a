//! The rows of one table in a memtable: found by a hash index of their keys, and put in key
//! order only when a reader or a flush asks.

use std::hash::BuildHasher;

use bytes::Bytes;
use parking_lot::Mutex;
use rustc_hash::FxBuildHasher;

use super::row::{Last, Row};

/// The rows of one table.
#[derive(Debug, Default)]
pub(super) struct TableRows {
    pub(super) rows: Vec<Row>,
    /// Row ids by the hash of their keys: one hash and one comparison finds a row.
    pub(super) index: RowIndex,
    /// The rows' key order, kept up to date only when asked (see [`TableRows::order`]).
    pub(super) order: Mutex<Order>,
    /// Log capacity a new row starts with.
    pub(super) row_hint: usize,
    /// Bytes of the rows' logs, for the next memtable's hint.
    pub(super) log_bytes: u64,
}

/// The rows' key order, in two runs so that a reader during heavy writes does not re-merge
/// every row to take in the few added since the last reader: `recent` holds the rows added
/// since `sorted` was last rebuilt, and is merged into it once it is an eighth of its size.
#[derive(Debug, Default)]
pub(super) struct Order {
    pub(super) sorted: Vec<u32>,
    pub(super) recent: Vec<u32>,
    /// Rows below this are in one of the runs.
    pub(super) upto: usize,
}

impl Order {
    /// Calls `f` with each row id in key order, from the first row at or after `start`, while
    /// `f` returns true.
    pub(super) fn walk(&self, rows: &[Row], start: Option<&[u8]>, mut f: impl FnMut(u32) -> bool) {
        let key = |i: u32| &rows[i as usize].key[..];
        let from = |run: &[u32]| match start {
            Some(s) => run.partition_point(|&i| key(i) < s),
            None => 0,
        };
        let (mut a, mut b) = (
            self.sorted[from(&self.sorted)..].iter().peekable(),
            self.recent[from(&self.recent)..].iter().peekable(),
        );
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(&&x), Some(&&y)) => {
                    if key(x) <= key(y) {
                        a.next()
                    } else {
                        b.next()
                    }
                }
                (Some(_), None) => a.next(),
                (None, Some(_)) => b.next(),
                (None, None) => return,
            };
            if let Some(&i) = next
                && !f(i)
            {
                return;
            }
        }
    }
}

/// Merges two runs of row ids in key order.
pub(super) fn merge_runs(rows: &[Row], a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if rows[a[i] as usize].key <= rows[b[j] as usize].key {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

/// A key's first 16 bytes as a number, zero-padded: keys whose prefixes differ order as their
/// prefixes do, so most comparisons of a sort need no look at the keys themselves.
pub(super) fn key_prefix(key: &[u8]) -> u128 {
    let mut p = [0u8; 16];
    let n = key.len().min(16);
    p[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(p)
}

pub(super) fn hash_key(key: &[u8]) -> u64 {
    FxBuildHasher.hash_one(key)
}

impl TableRows {
    /// Rows with room for `rows` of them, each new one with `row_hint` bytes of log.
    pub(super) fn with_capacity(rows: usize, row_hint: usize) -> TableRows {
        TableRows {
            rows: Vec::with_capacity(rows),
            index: RowIndex::with_capacity(rows),
            order: Mutex::default(),
            row_hint,
            log_bytes: 0,
        }
    }

    /// What a row of this table held in its log on average, as the next memtable's
    /// [`TableRows::row_hint`].
    pub(super) fn next_row_hint(&self) -> usize {
        let per_row = self.log_bytes / (self.rows.len().max(1) as u64);
        usize::try_from(per_row.next_multiple_of(8).min(4096)).unwrap_or(0)
    }

    pub(super) fn find(&self, row: &[u8]) -> Option<usize> {
        self.find_hashed(hash_key(row), row)
    }

    /// [`TableRows::find`], given the key's [`hash_key`].
    pub(super) fn find_hashed(&self, hash: u64, row: &[u8]) -> Option<usize> {
        let rows = &self.rows;
        self.index
            .find(hash, |i| rows[i as usize].key == row)
            .map(|i| i as usize)
    }

    pub(super) fn get(&self, row: &[u8]) -> Option<&Row> {
        self.find(row).map(|i| &self.rows[i])
    }

    /// Adds a row with an empty `log`; the caller made sure it is new.
    pub(super) fn insert(&mut self, key: Bytes, log: Vec<u8>) -> usize {
        debug_assert!(log.is_empty());
        let i = self.rows.len();
        let hash = hash_key(&key);
        self.rows.push(Row {
            key,
            log,
            last: Last::default(),
            spill: None,
        });
        let rows = &self.rows;
        self.index
            .insert_unique(hash, i as u32, |j| hash_key(&rows[j as usize].key));
        i
    }

    /// The rows in key order, with the rows added since the last call taken in.
    pub(super) fn order(&self) -> parking_lot::MutexGuard<'_, Order> {
        let mut order = self.order.lock();
        let rows = &self.rows;
        if order.upto < rows.len() {
            let mut fresh: Vec<(u128, u32)> = (order.upto as u32..rows.len() as u32)
                .map(|i| (key_prefix(&rows[i as usize].key), i))
                .collect();
            fresh.sort_unstable_by(|a, b| {
                a.0.cmp(&b.0)
                    .then_with(|| rows[a.1 as usize].key.cmp(&rows[b.1 as usize].key))
            });
            let fresh: Vec<u32> = fresh.into_iter().map(|(_, i)| i).collect();
            order.recent = merge_runs(rows, &order.recent, &fresh);
            order.upto = rows.len();
            if order.recent.len() * 8 >= order.sorted.len() {
                order.sorted = merge_runs(rows, &order.sorted, &order.recent);
                order.recent.clear();
            }
        }
        order
    }
}

/// Row ids by the hash of their keys, in open addressing with linear probing. Each slot holds
/// a row id and the upper half of its key's hash, so a probe looks at a key only when the tags
/// match, which for a row that is there is nearly always its own. Unlike a general hash table,
/// it tells where a hash's probe starts ([`RowIndex::slot_of`]) and the first row a probe would
/// compare ([`RowIndex::candidate`]): a batch of lookups fetches those ahead, so that with
/// millions of rows, where each is a cache miss, the misses of many lookups overlap.
#[derive(Debug, Default)]
pub(super) struct RowIndex {
    /// A power of two of them, or none.
    slots: Vec<Slot>,
    len: usize,
}

/// One slot of a [`RowIndex`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    tag: u32,
    /// [`EMPTY`] in a free slot.
    id: u32,
}

const EMPTY: u32 = u32::MAX;
const FREE: Slot = Slot { tag: 0, id: EMPTY };

impl RowIndex {
    /// Room for `n` rows before it grows.
    pub(super) fn with_capacity(n: usize) -> RowIndex {
        RowIndex {
            slots: vec![FREE; Self::slots_for(n)],
            len: 0,
        }
    }

    /// Slots for `n` rows at a load of at most three quarters.
    fn slots_for(n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (n + n / 3 + 1).next_power_of_two().max(16)
        }
    }

    fn tag(hash: u64) -> u32 {
        (hash >> 32) as u32
    }

    /// Where the probe of `hash` starts; `None` while the index is empty.
    pub(super) fn slot_of(&self, hash: u64) -> Option<&Slot> {
        let mask = self.slots.len().checked_sub(1)?;
        self.slots.get(hash as usize & mask)
    }

    /// The first row whose tag matches `hash`'s in its probe: the row sought, unless the
    /// tags collide; `None` if the probe ends before, when no row has the key.
    pub(super) fn candidate(&self, hash: u64) -> Option<u32> {
        self.find(hash, |_| true)
    }

    /// The row of `hash` for which `eq` holds.
    pub(super) fn find(&self, hash: u64, mut eq: impl FnMut(u32) -> bool) -> Option<u32> {
        let mask = self.slots.len().checked_sub(1)?;
        let tag = Self::tag(hash);
        let mut i = hash as usize & mask;
        loop {
            let slot = self.slots[i];
            if slot.id == EMPTY {
                return None;
            }
            if slot.tag == tag && eq(slot.id) {
                return Some(slot.id);
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds row `id` of `hash`, which the caller made sure is not there; `rehash` gives the
    /// hash of any row already in, for growing.
    pub(super) fn insert_unique(&mut self, hash: u64, id: u32, rehash: impl Fn(u32) -> u64) {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            let grown = Self::slots_for(self.len + 1).max(self.slots.len() * 2);
            let old = std::mem::replace(&mut self.slots, vec![FREE; grown]);
            for slot in old.into_iter().filter(|s| s.id != EMPTY) {
                self.place(rehash(slot.id), slot.id);
            }
        }
        self.place(hash, id);
        self.len += 1;
    }

    fn place(&mut self, hash: u64, id: u32) {
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        while self.slots[i].id != EMPTY {
            i = (i + 1) & mask;
        }
        self.slots[i] = Slot {
            tag: Self::tag(hash),
            id,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hash whose probe starts at slot 0 in any index of up to 2^40 slots: `n` sits above
    /// the slot bits, in the tag. Equal `n`, equal tags; different `n`, one probe but
    /// different tags.
    fn colliding(n: u32) -> u64 {
        u64::from(n) << 40
    }

    #[test]
    fn rows_are_found_across_growth_and_misses_are_not() {
        let mut index = RowIndex::default();
        let keys: Vec<Vec<u8>> = (0..5000u32).map(|i| i.to_be_bytes().repeat(5)).collect();
        for (id, key) in keys.iter().enumerate() {
            assert_eq!(index.find(hash_key(key), |_| true), None);
            index.insert_unique(hash_key(key), id as u32, |j| hash_key(&keys[j as usize]));
        }
        for (id, key) in keys.iter().enumerate() {
            let found = index.find(hash_key(key), |j| keys[j as usize] == *key);
            assert_eq!(found, Some(id as u32));
        }
        assert_eq!(
            index.find(hash_key(b"absent"), |j| keys[j as usize] == b"absent"),
            None
        );
        assert!(index.slots.len() >= 5000 * 4 / 3);
    }

    #[test]
    fn colliding_tags_are_told_apart_by_their_keys() {
        let mut index = RowIndex::with_capacity(4);
        // The same slot and the same tag for all of them.
        let hash = |_: u32| colliding(1);
        for id in 0..40 {
            index.insert_unique(hash(id), id, hash);
        }
        for id in 0..40 {
            assert_eq!(index.find(hash(id), |j| j == id), Some(id));
        }
        assert_eq!(
            index.candidate(hash(7)),
            Some(0),
            "the first of the tag's probe"
        );
        assert_eq!(index.find(hash(0), |_| false), None);
        assert_eq!(index.candidate(colliding(2)), None);
    }

    #[test]
    fn an_empty_index_finds_nothing() {
        let index = RowIndex::with_capacity(0);
        assert!(index.slot_of(1).is_none());
        assert_eq!(index.candidate(1), None);
        assert_eq!(index.find(1, |_| true), None);
    }
}
