//! The memtable: recent writes, held in memory until they are flushed to an SST.
//!
//! Entries are grouped by table, then by row, so appending cells to a row already in the
//! memtable costs one lookup of the row plus an insertion into that row's small map. Within a
//! row, entries sort exactly as [`InternalKey`]s do (row tombstones first, then columns
//! ascending, newest sequence number first), so a row's entries can be handed to the SST builder
//! or a reader in internal-key order without re-sorting.
//!
//! Several operations of one batch share a sequence number. Within a batch later operations win:
//! a put or cell delete replaces an entry of the same cell and seq, and a row delete drops the
//! row's cell entries of its own seq (the earlier operations of the batch).

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use parking_lot::RwLock;

use crate::batch::OpRef;
use crate::key::{Entry, EntryKind, InternalKey};
use crate::sst::RowRange;

/// Bytes charged per entry on top of its column and value.
const ENTRY_OVERHEAD: u64 = 48;
/// Bytes charged per row on top of its key.
const ROW_OVERHEAD: u64 = 64;

/// The position of an entry within its row, ordered like [`InternalKey`]s of one row.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Slot {
    /// 0 for a row tombstone, 1 for a cell entry: markers sort first.
    cell: u8,
    column: Bytes,
    seq: Reverse<u64>,
}

#[derive(Debug, Clone)]
struct Value {
    kind: EntryKind,
    write_ms: u64,
    value: Bytes,
}

type RowMap = BTreeMap<Slot, Value>;
type TableMap = BTreeMap<Bytes, RowMap>;

/// An in-memory, sorted set of entries of every table.
#[derive(Debug, Default)]
pub(crate) struct Memtable {
    tables: RwLock<BTreeMap<u32, TableMap>>,
    bytes: AtomicU64,
    max_seq: AtomicU64,
}

impl Memtable {
    /// An empty memtable.
    pub(crate) fn new() -> Memtable {
        Memtable::default()
    }

    /// Approximate bytes held.
    pub(crate) fn approximate_bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// True if no entry was ever added.
    pub(crate) fn is_empty(&self) -> bool {
        self.tables.read().is_empty()
    }

    /// The highest sequence number added (0 if none).
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "for leveled compaction and recovery checks")
    )]
    pub(crate) fn max_seq(&self) -> u64 {
        self.max_seq.load(Ordering::Relaxed)
    }

    /// The ids of the tables with entries, ascending.
    pub(crate) fn table_ids(&self) -> Vec<u32> {
        self.tables.read().keys().copied().collect()
    }

    /// Adds one operation of the batch with sequence number `seq`.
    pub(crate) fn apply(&self, op: &OpRef<'_>, seq: u64, write_ms: u64) {
        let (table, row, column, kind, value): (u32, &[u8], &[u8], EntryKind, &[u8]) = match *op {
            OpRef::Put {
                table,
                row,
                column,
                value,
            } => (table, row, column, EntryKind::Put, value),
            OpRef::Delete { table, row, column } => {
                (table, row, column, EntryKind::DeleteCell, &[])
            }
            OpRef::DeleteRow { table, row } => (table, row, &[], EntryKind::DeleteRow, &[]),
        };
        let mut tables = self.tables.write();
        let rows = tables.entry(table).or_default();
        let mut added = 0u64;
        let entries = match rows.get_mut(row) {
            Some(r) => r,
            None => {
                added += ROW_OVERHEAD + row.len() as u64;
                rows.entry(Bytes::copy_from_slice(row)).or_default()
            }
        };
        if kind == EntryKind::DeleteRow {
            // Earlier operations of the same batch on this row are overridden.
            entries.retain(|slot, _| slot.cell == 0 || slot.seq.0 != seq);
        }
        let slot = Slot {
            cell: u8::from(kind != EntryKind::DeleteRow),
            column: Bytes::copy_from_slice(column),
            seq: Reverse(seq),
        };
        added += ENTRY_OVERHEAD + column.len() as u64 + value.len() as u64;
        entries.insert(
            slot,
            Value {
                kind,
                write_ms,
                value: Bytes::copy_from_slice(value),
            },
        );
        drop(tables);
        self.bytes.fetch_add(added, Ordering::Relaxed);
        self.max_seq.fetch_max(seq, Ordering::Relaxed);
    }

    /// The entry that decides `(row, column)` at `snapshot_seq`, with the same rules as
    /// `SstReader::get`: the newer of the newest visible cell entry and the newest visible row
    /// tombstone, the cell entry winning a tie. `None` means older data decides.
    pub(crate) fn get(
        &self,
        table: u32,
        row: &[u8],
        column: &[u8],
        snapshot_seq: u64,
    ) -> Option<Entry> {
        let tables = self.tables.read();
        let entries = tables.get(&table)?.get(row)?;
        let visible = |cell: u8, column: &[u8]| {
            let from = Slot {
                cell,
                column: Bytes::copy_from_slice(column),
                seq: Reverse(snapshot_seq),
            };
            entries
                .range(from..)
                .next()
                .filter(|(s, _)| s.cell == cell && s.column == column)
                .map(|(s, v)| to_entry(row, s, v))
        };
        let marker = visible(0, &[]);
        let cell = visible(1, column);
        match (marker, cell) {
            (Some(m), Some(c)) => Some(if m.key.seq > c.key.seq { m } else { c }),
            (m, c) => c.or(m),
        }
    }

    /// Every entry of `table` in the rows of `range`, in internal-key order.
    pub(crate) fn entries(&self, table: u32, range: &RowRange) -> Vec<Entry> {
        let tables = self.tables.read();
        let Some(rows) = tables.get(&table) else {
            return Vec::new();
        };
        let start = match &range.start {
            Some(s) => Bound::Included(s.clone()),
            None => Bound::Unbounded,
        };
        let end = match &range.end {
            Some(e) => Bound::Excluded(e.clone()),
            None => Bound::Unbounded,
        };
        if let (Bound::Included(s), Bound::Excluded(e)) = (&start, &end)
            && s >= e
        {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (row, entries) in rows.range((start, end)) {
            out.extend(entries.iter().map(|(s, v)| to_entry(row, s, v)));
        }
        out
    }
}

fn to_entry(row: &[u8], slot: &Slot, value: &Value) -> Entry {
    Entry::new(
        InternalKey::new(
            Bytes::copy_from_slice(row),
            slot.column.clone(),
            slot.seq.0,
            value.kind,
        ),
        value.write_ms,
        value.value.clone(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put<'a>(row: &'a [u8], column: &'a [u8], value: &'a [u8]) -> OpRef<'a> {
        OpRef::Put {
            table: 1,
            row,
            column,
            value,
        }
    }

    #[test]
    fn entries_come_in_internal_key_order() {
        let m = Memtable::new();
        m.apply(&put(b"r2", b"a", b"1"), 1, 10);
        m.apply(&put(b"r1", b"b", b"2"), 2, 10);
        m.apply(&put(b"r1", b"a", b"3"), 3, 10);
        m.apply(&put(b"r1", b"a", b"4"), 4, 10);
        m.apply(
            &OpRef::DeleteRow {
                table: 1,
                row: b"r1",
            },
            5,
            10,
        );
        m.apply(&put(b"r1", b"", b"5"), 5, 10);
        let all = m.entries(1, &RowRange::all());
        let keys: Vec<InternalKey> = all.iter().map(|e| e.key.clone()).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        assert_eq!(all.len(), 6);
        assert_eq!(all[0].key.kind, EntryKind::DeleteRow);
        let r2 = m.entries(1, &RowRange::new(b"r2", b"r3"));
        assert_eq!(r2.len(), 1);
        assert!(m.entries(2, &RowRange::all()).is_empty());
        assert_eq!(m.max_seq(), 5);
        assert!(m.approximate_bytes() > 0);
    }

    #[test]
    fn get_honours_snapshots_and_tombstones() {
        let m = Memtable::new();
        m.apply(&put(b"r", b"c", b"v1"), 1, 0);
        m.apply(&put(b"r", b"c", b"v2"), 3, 0);
        m.apply(
            &OpRef::DeleteRow {
                table: 1,
                row: b"r",
            },
            5,
            0,
        );
        m.apply(
            &OpRef::Delete {
                table: 1,
                row: b"r",
                column: b"d",
            },
            6,
            0,
        );
        let value = |snap| m.get(1, b"r", b"c", snap).map(|e| (e.key.kind, e.value));
        assert_eq!(value(0), None);
        assert_eq!(value(2), Some((EntryKind::Put, Bytes::from_static(b"v1"))));
        assert_eq!(value(4), Some((EntryKind::Put, Bytes::from_static(b"v2"))));
        assert_eq!(value(9).map(|v| v.0), Some(EntryKind::DeleteRow));
        assert_eq!(
            m.get(1, b"r", b"d", 9).map(|e| e.key.kind),
            Some(EntryKind::DeleteCell)
        );
        assert_eq!(m.get(1, b"x", b"c", 9), None);
    }

    #[test]
    fn later_operations_of_a_batch_win() {
        let m = Memtable::new();
        m.apply(&put(b"r", b"c", b"v"), 1, 0);
        m.apply(
            &OpRef::Delete {
                table: 1,
                row: b"r",
                column: b"c",
            },
            1,
            0,
        );
        assert_eq!(
            m.get(1, b"r", b"c", 1).map(|e| e.key.kind),
            Some(EntryKind::DeleteCell)
        );
        m.apply(&put(b"r", b"c", b"w"), 2, 0);
        m.apply(
            &OpRef::DeleteRow {
                table: 1,
                row: b"r",
            },
            2,
            0,
        );
        assert_eq!(
            m.get(1, b"r", b"c", 2).map(|e| e.key.kind),
            Some(EntryKind::DeleteRow)
        );
        m.apply(&put(b"r", b"c", b"x"), 2, 0);
        assert_eq!(
            m.get(1, b"r", b"c", 2).map(|e| e.value),
            Some(Bytes::from_static(b"x"))
        );
    }
}
