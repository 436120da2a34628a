//! The rows of one table in a memtable: found by a hash index of their keys, and put in key
//! order only when a reader or a flush asks.

use std::hash::BuildHasher;

use bytes::Bytes;
use hashbrown::HashTable;
use parking_lot::Mutex;
use rustc_hash::FxBuildHasher;

use super::row::{Last, Row};

/// The rows of one table.
#[derive(Debug, Default)]
pub(super) struct TableRows {
    pub(super) rows: Vec<Row>,
    /// Row ids by the hash of their keys: one hash and one comparison finds a row.
    pub(super) index: HashTable<u32>,
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
            index: HashTable::with_capacity(rows),
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
        let rows = &self.rows;
        self.index
            .find(hash_key(row), |&i| rows[i as usize].key == row)
            .map(|&i| i as usize)
    }

    pub(super) fn get(&self, row: &[u8]) -> Option<&Row> {
        self.find(row).map(|i| &self.rows[i])
    }

    /// Adds a row; the caller made sure it is new.
    pub(super) fn insert(&mut self, key: Bytes) -> usize {
        let i = self.rows.len();
        let hash = hash_key(&key);
        self.rows.push(Row {
            key,
            log: Vec::with_capacity(self.row_hint),
            last: Last::default(),
            spill: None,
        });
        let rows = &self.rows;
        self.index
            .insert_unique(hash, i as u32, |&j| hash_key(&rows[j as usize].key));
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
