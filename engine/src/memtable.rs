//! The memtable: recent writes, held in memory until they are flushed to an SST.
//!
//! Entries are grouped by table, then by row, so appending cells to a row already in the
//! memtable costs one lookup of the row plus a push onto that row's vector of entries. The
//! writer finds a row through a hash index (one hash and one comparison); a B-tree over the
//! same rows gives readers and flushes the key order. Only a new row touches the B-tree. Within a
//! row, entries are kept sorted exactly as [`InternalKey`]s sort (row tombstones first, then
//! columns ascending, newest sequence number first), so a row's entries can be handed to the SST
//! builder or a reader in internal-key order without re-sorting. Time-series writes append cells
//! in column order, so the common case is a push at the end; anything else is a binary search
//! and an insertion, except that a new version of a cell takes its older version's place and
//! the older one is set aside, to be merged back in by readers (see `Row::older`).
//!
//! Each entry's column and value are copied once, back to back, into the memtable's arena, and
//! the entry keeps only their chunk and offset: a write costs no allocation and no reference
//! count of its own. Readers get slices of the filled chunks without copying; only entries in
//! the chunk still being filled (at most [`ARENA_CHUNK`] bytes) are copied out.
//!
//! Several operations of one batch share a sequence number. Within a batch later operations win:
//! a put or cell delete replaces an entry of the same cell and seq, and a row delete drops the
//! row's cell entries of its own seq (the earlier operations of the batch).

use std::borrow::Cow;
use std::cmp::Ordering as CmpOrdering;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Bytes, BytesMut};
use parking_lot::RwLock;
use rustc_hash::FxHashMap;

use crate::batch::OpRef;
use crate::fold::{FlushFold, FoldEntry, FoldKind, FoldOut};
use crate::key::{Entry, EntryKind, Found, InternalKey};
use crate::sst::RowRange;

/// Bytes charged per entry on top of its column and value.
const ENTRY_OVERHEAD: u64 = 48;
/// Bytes charged per row on top of its key.
const ROW_OVERHEAD: u64 = 64;
/// Entries room made for a new row. Time-series rows take hundreds of cells, and growing a
/// row's vector from one entry cost about 6 % of a `Tsdb::write` in reallocations.
const ROW_INITIAL_ENTRIES: usize = 16;
/// Size of one arena chunk. Large enough that chunk allocations are rare next to the cells
/// they hold, small enough that a slice kept alive by a reader pins little memory.
const ARENA_CHUNK: usize = 64 << 10;

/// One entry of a row.
#[derive(Debug, Clone, Copy)]
struct MemEntry {
    /// Where column ‖ value start in the arena.
    at: ArenaPos,
    column_len: u32,
    value_len: u32,
    kind: EntryKind,
    /// The column's first bytes, zero-padded (see [`HEAD_LEN`]): in what would be padding.
    head: [u8; HEAD_LEN],
    seq: u64,
    write_ms: u64,
}

/// Bytes of a column kept in its entry. A row's last entry is compared with every cell
/// appended to the row, and its column in the arena was written long before among thousands
/// of other rows' cells, so reading it was a cache miss per write (about a tenth of the
/// server's CPU in the devops ingest). Columns this short (a time-series cell's is 3 bytes)
/// compare without the arena.
const HEAD_LEN: usize = 4;

const _: () = assert!(std::mem::size_of::<MemEntry>() == 40);

/// `column`'s first [`HEAD_LEN`] bytes, zero-padded.
#[inline]
fn column_head(column: &[u8]) -> [u8; HEAD_LEN] {
    // By cases rather than a copy of `min(len, 4)` bytes: that copy was a `memcpy` call, and
    // the 4-byte load after it cannot take its value from the call's byte stores in flight.
    match *column {
        [a, b, c, d, ..] => [a, b, c, d],
        [a, b, c] => [a, b, c, 0],
        [a, b] => [a, b, 0, 0],
        [a] => [a, 0, 0, 0],
        [] => [0; HEAD_LEN],
    }
}

impl MemEntry {
    /// 0 for a row tombstone, 1 for a cell entry: markers sort first.
    fn cell(&self) -> u8 {
        u8::from(self.kind != EntryKind::DeleteRow)
    }

    fn column<'a>(&self, arena: &'a Arena) -> &'a [u8] {
        arena.bytes(self.at, 0, self.column_len)
    }

    /// Orders the entry against the slot `(cell, column, seq)` like [`InternalKey`]s of one row.
    fn cmp_slot(&self, arena: &Arena, cell: u8, column: &[u8], seq: u64) -> CmpOrdering {
        self.cell()
            .cmp(&cell)
            .then_with(|| {
                if self.column_len as usize <= HEAD_LEN && column.len() <= HEAD_LEN {
                    // Zero-padded heads order like the columns, a tie going to the shorter.
                    u32::from_be_bytes(self.head)
                        .cmp(&u32::from_be_bytes(column_head(column)))
                        .then((self.column_len as usize).cmp(&column.len()))
                } else {
                    self.column(arena).cmp(column)
                }
            })
            .then_with(|| seq.cmp(&self.seq))
    }

    fn found(&self, arena: &Arena) -> Found {
        Found {
            kind: self.kind,
            seq: self.seq,
            write_ms: self.write_ms,
            value: arena.shared(self.at, self.column_len, self.value_len),
        }
    }

    fn entry(&self, row: &Bytes, arena: &Arena) -> Entry {
        Entry {
            key: InternalKey {
                row: row.clone(),
                column: arena.shared(self.at, 0, self.column_len),
                seq: self.seq,
                kind: self.kind,
            },
            write_ms: self.write_ms,
            value: arena.shared(self.at, self.column_len, self.value_len),
        }
    }
}

/// A position in the arena: chunk number and byte offset.
#[derive(Debug, Clone, Copy)]
struct ArenaPos {
    chunk: u32,
    offset: u32,
}

/// The memtable's copies of columns and values: filled chunks, frozen and shareable, and the
/// chunk being filled.
#[derive(Debug, Default)]
struct Arena {
    full: Vec<Bytes>,
    filling: BytesMut,
}

impl Arena {
    /// Copies `column ‖ value` in.
    fn alloc(&mut self, column: &[u8], value: &[u8]) -> ArenaPos {
        let n = column.len() + value.len();
        if self.filling.capacity() - self.filling.len() < n {
            let fresh = BytesMut::with_capacity(ARENA_CHUNK.max(n));
            let full = std::mem::replace(&mut self.filling, fresh);
            if !full.is_empty() {
                self.full.push(full.freeze());
            }
        }
        let at = ArenaPos {
            chunk: self.full.len() as u32,
            offset: self.filling.len() as u32,
        };
        self.filling.extend_from_slice(column);
        self.filling.extend_from_slice(value);
        at
    }

    /// `len` bytes at `skip` past `at`.
    fn bytes(&self, at: ArenaPos, skip: u32, len: u32) -> &[u8] {
        let chunk: &[u8] = match self.full.get(at.chunk as usize) {
            Some(c) => c,
            None => &self.filling,
        };
        let start = (at.offset + skip) as usize;
        &chunk[start..start + len as usize]
    }

    /// As [`Arena::bytes`], as a `Bytes` sharing a filled chunk (a copy from the chunk being
    /// filled, which cannot be shared while it is written).
    fn shared(&self, at: ArenaPos, skip: u32, len: u32) -> Bytes {
        let start = (at.offset + skip) as usize;
        match self.full.get(at.chunk as usize) {
            Some(c) => c.slice(start..start + len as usize),
            None => Bytes::copy_from_slice(&self.filling[start..start + len as usize]),
        }
    }
}

/// How many operations ahead [`Memtable::apply_all`] fetches a row's header.
const PREFETCH_AHEAD: usize = 8;

/// Asks the CPU to bring `p`'s cache line in, without waiting for it.
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code, reason = "measured in `Memtable::apply_all`")]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 CPU has; and a prefetch is a hint
    // that never faults and reads nothing the program sees, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The rows of one table.
#[derive(Debug, Default)]
struct TableRows {
    /// Row key → index into `rows`, in key order: for reads and flushes.
    order: BTreeMap<Bytes, usize>,
    /// Row key → index into `rows`: for writes. A B-tree descent over 40-byte time-series
    /// rowkeys costs a dozen memcmp calls; this is one hash and one comparison. (Measured:
    /// the B-tree lookup was about a quarter of `Tsdb::write`'s time.)
    index: FxHashMap<Bytes, usize>,
    /// Each row's entries, in internal-key order.
    rows: Vec<Row>,
}

/// One row's entries, and a copy of the last of them.
///
/// Every write to a row is compared with the row's last entry, which sits at the far end of a
/// vector of hundreds of entries: reading it there was a cache miss per write, on top of the
/// one for this header. The copy shares the header's cache line.
#[derive(Debug)]
#[repr(align(64))]
struct Row {
    entries: Vec<MemEntry>,
    /// `entries.last()`, kept in step by [`Row::sync_last`].
    last: Option<MemEntry>,
    /// Versions of cells that a newer version replaced in `entries`, in no order. A cell
    /// written again takes its older version's place instead of being inserted before it:
    /// an insertion shifts every later entry of the row, so a client that wrote the same
    /// points over and over spent most of its time moving entries (1.2 M rewrites of 100
    /// points over telnet took 0.63 s of server CPU that way, 0.21 s this way). Readers see
    /// `entries` and these merged (see [`Row::view`]).
    older: Vec<MemEntry>,
}

impl Row {
    fn sync_last(&mut self) {
        self.last = self.entries.last().copied();
    }

    /// All of the row's entries in internal-key order: `entries` itself when no version was
    /// set aside, else a sorted copy of both.
    fn view<'a>(&'a self, arena: &Arena) -> Cow<'a, [MemEntry]> {
        if self.older.is_empty() {
            return Cow::Borrowed(&self.entries);
        }
        let mut all: Vec<MemEntry> = Vec::with_capacity(self.entries.len() + self.older.len());
        all.extend_from_slice(&self.entries);
        all.extend_from_slice(&self.older);
        all.sort_by(|a, b| a.cmp_slot(arena, b.cell(), b.column(arena), b.seq));
        Cow::Owned(all)
    }
}

impl TableRows {
    fn get(&self, row: &[u8]) -> Option<&Row> {
        self.index.get(row).map(|&i| &self.rows[i])
    }

    /// Rows in key order, over `range` of row keys.
    fn range<'a>(
        &'a self,
        range: (Bound<Bytes>, Bound<Bytes>),
    ) -> impl Iterator<Item = (&'a Bytes, &'a Row)> + 'a {
        self.order
            .range(range)
            .map(|(row, &i)| (row, &self.rows[i]))
    }
}

#[derive(Debug, Default)]
struct Tables {
    tables: BTreeMap<u32, TableRows>,
    arena: Arena,
    /// Row keys, copied back to back into shared chunks: a new row's key costs no allocation
    /// of its own, and its two references (B-tree and hash index) share it.
    keys: BytesMut,
}

/// Size of one chunk of row keys.
const KEY_CHUNK: usize = 16 << 10;

impl Tables {
    /// A shared copy of a new row's key.
    fn copy_key(keys: &mut BytesMut, row: &[u8]) -> Bytes {
        if keys.capacity() - keys.len() < row.len() {
            *keys = BytesMut::with_capacity(KEY_CHUNK.max(row.len()));
        }
        keys.extend_from_slice(row);
        keys.split().freeze()
    }
}

/// An in-memory, sorted set of entries of every table.
#[derive(Debug, Default)]
pub(crate) struct Memtable {
    tables: RwLock<Tables>,
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
        self.tables.read().tables.is_empty()
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
        self.tables.read().tables.keys().copied().collect()
    }

    /// Adds one operation of the batch with sequence number `seq`.
    #[cfg(test)]
    pub(crate) fn apply(&self, op: &OpRef<'_>, seq: u64, write_ms: u64) {
        self.apply_all(std::slice::from_ref(op), seq, write_ms);
    }

    /// Adds the operations of the batch with sequence number `seq`, in order, under one lock.
    ///
    /// A batch's operations touch rows all over the memtable, and each touch was three cache
    /// misses in a row: the row's slot in the hash index, the row's header, and the end of its
    /// entries. So the rows that already exist are looked up first, in a loop of nothing else
    /// where the misses overlap; then, while an operation is applied, the header of the row
    /// [`PREFETCH_AHEAD`] operations on and the entries' end of the row half as far on are
    /// fetched.
    pub(crate) fn apply_all(&self, ops: &[OpRef<'_>], seq: u64, write_ms: u64) {
        let mut added = 0u64;
        let mut guard = self.tables.write();
        let t = &mut *guard;
        let found: Vec<Option<(u32, usize)>> = ops
            .iter()
            .map(|op| {
                let (table, row) = op.table_row();
                let i = t.tables.get(&table)?.index.get(row)?;
                Some((table, *i))
            })
            .collect();
        fn row_at<'t>(t: &'t Tables, found: &[Option<(u32, usize)>], k: usize) -> Option<&'t Row> {
            let (table, i) = found.get(k).copied().flatten()?;
            t.tables.get(&table)?.rows.get(i)
        }
        for (k, op) in ops.iter().enumerate() {
            if let Some(r) = row_at(t, &found, k + PREFETCH_AHEAD) {
                prefetch(r);
            }
            if let Some(r) = row_at(t, &found, k + PREFETCH_AHEAD / 2) {
                prefetch(r.entries.as_ptr().wrapping_add(r.entries.len()));
            }
            added += Self::apply_locked(t, op, seq, write_ms, found[k].map(|(_, i)| i));
        }
        drop(guard);
        self.bytes.fetch_add(added, Ordering::Relaxed);
        self.max_seq.fetch_max(seq, Ordering::Relaxed);
    }

    /// Adds one operation, `found` being its row's index if the row was there before the
    /// batch; returns the bytes to charge.
    fn apply_locked(
        t: &mut Tables,
        op: &OpRef<'_>,
        seq: u64,
        write_ms: u64,
        found: Option<usize>,
    ) -> u64 {
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
        let mut added = ENTRY_OVERHEAD + column.len() as u64 + value.len() as u64;
        let Tables {
            tables,
            arena,
            keys,
        } = t;
        let at = arena.alloc(column, value);
        let rows = tables.entry(table).or_default();
        let i = match found.or_else(|| rows.index.get(row).copied()) {
            Some(i) => i,
            None => {
                added += ROW_OVERHEAD + row.len() as u64;
                let key = Tables::copy_key(keys, row);
                let i = rows.rows.len();
                rows.rows.push(Row {
                    entries: Vec::with_capacity(ROW_INITIAL_ENTRIES),
                    last: None,
                    older: Vec::new(),
                });
                rows.order.insert(key.clone(), i);
                rows.index.insert(key, i);
                i
            }
        };
        let r = &mut rows.rows[i];
        if kind == EntryKind::DeleteRow {
            // Earlier operations of the same batch on this row are overridden.
            r.entries
                .retain(|e| e.kind == EntryKind::DeleteRow || e.seq != seq);
            r.older
                .retain(|e| e.kind == EntryKind::DeleteRow || e.seq != seq);
            r.sync_last();
        }
        let entry = MemEntry {
            at,
            column_len: column.len() as u32,
            value_len: value.len() as u32,
            kind,
            head: column_head(column),
            seq,
            write_ms,
        };
        let cell = entry.cell();
        let appends = r
            .last
            .is_none_or(|last| last.cmp_slot(arena, cell, column, seq).is_lt());
        if appends {
            r.entries.push(entry);
            r.last = Some(entry);
        } else {
            match r
                .entries
                .binary_search_by(|e| e.cmp_slot(arena, cell, column, seq))
            {
                Ok(i) => r.entries[i] = entry,
                // An older version of the same cell: set aside (see `Row::older`).
                Err(i)
                    if cell == 1
                        && r.entries.get(i).is_some_and(|old| {
                            old.cmp_slot(arena, cell, column, old.seq).is_eq()
                        }) =>
                {
                    let old = std::mem::replace(&mut r.entries[i], entry);
                    r.older.push(old);
                }
                Err(i) => r.entries.insert(i, entry),
            }
            r.sync_last();
        }
        added
    }

    /// The entry that decides `(row, column)` at `snapshot_seq`, with the same rules as
    /// `SstReader::lookup`: the newer of the newest visible cell entry and the newest visible
    /// row tombstone, the cell entry winning a tie. `None` means older data decides.
    pub(crate) fn get(
        &self,
        table: u32,
        row: &[u8],
        column: &[u8],
        snapshot_seq: u64,
    ) -> Option<Found> {
        let tables = self.tables.read();
        let arena = &tables.arena;
        let entries = tables.tables.get(&table)?.get(row)?.view(arena);
        let visible = |cell: u8, column: &[u8]| {
            let i =
                entries.partition_point(|e| e.cmp_slot(arena, cell, column, snapshot_seq).is_lt());
            entries
                .get(i)
                .filter(|e| e.cell() == cell && e.column(arena) == column)
                .map(|e| e.found(arena))
        };
        let marker = if entries.first().is_some_and(|e| e.cell() == 0) {
            visible(0, &[])
        } else {
            None
        };
        Found::newer(marker, visible(1, column))
    }

    /// Calls `f` with every entry of `table`, in internal-key order, stopping at its first
    /// error. Holds the memtable's read lock throughout: for frozen memtables.
    pub(crate) fn for_each(
        &self,
        table: u32,
        f: &mut dyn FnMut(&Entry) -> crate::error::Result<()>,
    ) -> crate::error::Result<()> {
        let tables = self.tables.read();
        let Some(rows) = tables.tables.get(&table) else {
            return Ok(());
        };
        for (row, r) in rows.range((Bound::Unbounded, Bound::Unbounded)) {
            for e in r.view(&tables.arena).iter() {
                f(&e.entry(row, &tables.arena))?;
            }
        }
        Ok(())
    }

    /// As [`Memtable::for_each`], with each row's entries first offered to `fold` (`fold.rs`).
    /// A row whose fold returns a replacement passes the replacement to `f` instead, and is
    /// counted in `folded_rows`; one whose replacement breaks the contract (an index out of
    /// range, a sequence number above the row's highest, keys out of order) is passed
    /// unfolded, and counted in `rejected`.
    pub(crate) fn for_each_folded(
        &self,
        table: u32,
        fold: &dyn FlushFold,
        folded_rows: &mut u64,
        rejected: &mut u64,
        f: &mut dyn FnMut(&Entry) -> crate::error::Result<()>,
    ) -> crate::error::Result<()> {
        let tables = self.tables.read();
        let Some(rows) = tables.tables.get(&table) else {
            return Ok(());
        };
        let arena = &tables.arena;
        let mut view: Vec<FoldEntry<'_>> = Vec::new();
        let mut out: Vec<Entry> = Vec::new();
        for (row, r) in rows.range((Bound::Unbounded, Bound::Unbounded)) {
            let entries = &*r.view(arena);
            view.clear();
            view.extend(entries.iter().map(|e| FoldEntry {
                column: e.column(arena),
                value: arena.bytes(e.at, e.column_len, e.value_len),
                seq: e.seq,
                kind: match e.kind {
                    EntryKind::Put => FoldKind::Put,
                    EntryKind::DeleteCell => FoldKind::DeleteCell,
                    EntryKind::DeleteRow => FoldKind::DeleteRow,
                },
            }));
            let folded = fold
                .fold(row, &view)
                .and_then(|r| Self::folded_entries(row, entries, arena, r, &mut out));
            match folded {
                Some(()) => {
                    *folded_rows += 1;
                    for e in &out {
                        f(e)?;
                    }
                }
                None => {
                    if !out.is_empty() {
                        *rejected += 1;
                    }
                    for e in entries {
                        f(&e.entry(row, arena))?;
                    }
                }
            }
            out.clear();
        }
        Ok(())
    }

    /// Turns a fold's output for `row` into entries in `out`; `None` if it breaks the
    /// contract (`out` then holds what was built so far, so the caller can tell).
    fn folded_entries(
        row: &Bytes,
        entries: &[MemEntry],
        arena: &Arena,
        folded: Vec<FoldOut>,
        out: &mut Vec<Entry>,
    ) -> Option<()> {
        let max_seq = entries.iter().map(|e| e.seq).max().unwrap_or(0);
        let write_ms = entries.iter().map(|e| e.write_ms).max().unwrap_or(0);
        // A marker entry so that a rejection is visible to the caller even when it comes first.
        let reject = |out: &mut Vec<Entry>| {
            if out.is_empty() {
                out.push(entries[0].entry(row, arena));
            }
            None
        };
        for o in folded {
            let e = match o {
                FoldOut::Keep(i) => match entries.get(i) {
                    Some(m) => m.entry(row, arena),
                    None => return reject(out),
                },
                FoldOut::Put { column, value, seq } => {
                    if seq > max_seq {
                        return reject(out);
                    }
                    Entry {
                        key: InternalKey {
                            row: row.clone(),
                            column: Bytes::from(column),
                            seq,
                            kind: EntryKind::Put,
                        },
                        write_ms,
                        value: Bytes::from(value),
                    }
                }
            };
            if out.last().is_some_and(|p| p.key >= e.key) {
                return reject(out);
            }
            out.push(e);
        }
        Some(())
    }

    /// True if the memtable holds any entry of `row` in `table`.
    pub(crate) fn has_row(&self, table: u32, row: &[u8]) -> bool {
        let tables = self.tables.read();
        tables
            .tables
            .get(&table)
            .is_some_and(|rows| rows.get(row).is_some())
    }

    /// Every entry of `table` in the rows of `range`, in internal-key order. Rows, columns
    /// and values are shared with the memtable, not copied.
    pub(crate) fn entries(&self, table: u32, range: &RowRange) -> Vec<Entry> {
        let tables = self.tables.read();
        let Some(rows) = tables.tables.get(&table) else {
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
        for (row, r) in rows.range((start, end)) {
            let entries = r.view(&tables.arena);
            out.extend(entries.iter().map(|e| e.entry(row, &tables.arena)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Entries stay in internal-key order whatever the columns' lengths, on both sides of
        /// the inline head's length.
        #[test]
        fn entries_stay_ordered_with_short_and_long_columns(
            cols in proptest::collection::vec(proptest::collection::vec(0u8..3, 0..7), 1..40),
        ) {
            let m = Memtable::new();
            for (seq, c) in cols.iter().enumerate() {
                m.apply(&put(b"r", c, b"v"), seq as u64 + 1, 0);
            }
            let keys: Vec<InternalKey> = m.entries(1, &RowRange::all()).into_iter().map(|e| e.key).collect();
            let mut sorted = keys.clone();
            sorted.sort();
            prop_assert_eq!(keys.len(), cols.len());
            prop_assert_eq!(keys, sorted);
        }
    }

    /// A version in the model of `every_version_reads_back_at_every_snapshot`: row, column,
    /// seq, kind, value; a row tombstone has an empty column.
    type ModelEntry = (Vec<u8>, Vec<u8>, u64, EntryKind, Vec<u8>);

    proptest! {
        /// Against a model that keeps every version: puts, cell deletes and row deletes on a
        /// few cells of two rows, several to a batch (one seq) at times, and cells written
        /// again and again. `entries` holds every version in internal-key order, and `get` at
        /// every snapshot finds the entry that decides.
        #[test]
        fn every_version_reads_back_at_every_snapshot(
            ops in proptest::collection::vec((0u8..2, 0u8..3, 0u8..5, any::<bool>()), 1..150),
        ) {
            let mut model: Vec<ModelEntry> = Vec::new();
            let m = Memtable::new();
            let mut seq = 1u64;
            for (i, &(r, c, kind, next_batch)) in ops.iter().enumerate() {
                if next_batch {
                    seq += 1;
                }
                let row = vec![b'r', r];
                let column = vec![b'c', c];
                let value = (i as u32).to_be_bytes().to_vec();
                let op = match kind {
                    0..=2 => OpRef::Put { table: 1, row: &row, column: &column, value: &value },
                    3 => OpRef::Delete { table: 1, row: &row, column: &column },
                    _ => OpRef::DeleteRow { table: 1, row: &row },
                };
                m.apply(&op, seq, 0);
                match kind {
                    4 => {
                        // Drops the row's cell entries of this batch; one marker per batch.
                        model.retain(|e| !(e.0 == row && e.2 == seq));
                        model.push((row, Vec::new(), seq, EntryKind::DeleteRow, Vec::new()));
                    }
                    _ => {
                        model.retain(|e| {
                            !(e.0 == row && e.1 == column && e.2 == seq && e.3 != EntryKind::DeleteRow)
                        });
                        let (kind, value) = if kind == 3 {
                            (EntryKind::DeleteCell, Vec::new())
                        } else {
                            (EntryKind::Put, value)
                        };
                        model.push((row, column, seq, kind, value));
                    }
                }
            }
            let key = |e: &ModelEntry| {
                InternalKey::new(e.0.clone(), e.1.clone(), e.2, e.3)
            };
            let mut want: Vec<(InternalKey, Vec<u8>)> =
                model.iter().map(|e| (key(e), e.4.clone())).collect();
            want.sort_by(|a, b| a.0.cmp(&b.0));
            let got: Vec<(InternalKey, Vec<u8>)> = m
                .entries(1, &RowRange::all())
                .into_iter()
                .map(|e| (e.key, e.value.to_vec()))
                .collect();
            prop_assert_eq!(got, want);
            for snapshot in 0..=seq + 1 {
                for r in 0..2u8 {
                    for c in 0..3u8 {
                        let (row, column) = (vec![b'r', r], vec![b'c', c]);
                        let newest = |marker: bool| {
                            model
                                .iter()
                                .filter(|e| e.0 == row && e.2 <= snapshot)
                                .filter(|e| (e.3 == EntryKind::DeleteRow) == marker)
                                .filter(|e| marker || e.1 == column)
                                .max_by_key(|e| e.2)
                                .map(|e| (e.3, e.2, e.4.clone()))
                        };
                        let want = match (newest(true), newest(false)) {
                            (Some(m), Some(c)) => Some(if m.1 > c.1 { m } else { c }),
                            (m, c) => c.or(m),
                        };
                        let got = m
                            .get(1, &row, &column, snapshot)
                            .map(|f| (f.kind, f.seq, f.value.to_vec()));
                        prop_assert_eq!(got, want, "row {} column {} at {}", r, c, snapshot);
                    }
                }
            }
        }
    }

    /// A client that writes the same cells again and again: each rewrite takes its older
    /// version's place, so the row's sorted vector keeps one entry per cell and no write
    /// shifts it (it used to grow by one entry per rewrite, each inserted near the front).
    #[test]
    fn rewriting_a_cell_does_not_grow_the_sorted_entries() {
        let m = Memtable::new();
        let columns: Vec<[u8; 2]> = (0..100u8).map(|c| [b'c', c]).collect();
        for round in 0..50u64 {
            for c in &columns {
                m.apply(&put(b"r", c, &round.to_be_bytes()), round + 1, 0);
            }
        }
        let tables = m.tables.read();
        let row = tables.tables.get(&1).and_then(|t| t.get(b"r"));
        assert_eq!(
            row.map(|r| (r.entries.len(), r.older.len())),
            Some((100, 4_900))
        );
        drop(tables);
        // Readers still see every version, in order, and the newest wins.
        let all = m.entries(1, &RowRange::all());
        assert_eq!(all.len(), 5_000);
        assert!(all.windows(2).all(|w| w[0].key < w[1].key));
        let newest = m.get(1, b"r", b"c\x07", 50).map(|f| f.value);
        assert_eq!(newest.as_deref(), Some(&49u64.to_be_bytes()[..]));
        let old = m.get(1, b"r", b"c\x07", 10).map(|f| f.value);
        assert_eq!(old.as_deref(), Some(&9u64.to_be_bytes()[..]));
    }

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
        let mut visited = Vec::new();
        m.for_each(1, &mut |e| {
            visited.push(e.clone());
            Ok(())
        })
        .expect("no error from the callback");
        assert_eq!(visited, all);
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
        let value = |snap| m.get(1, b"r", b"c", snap).map(|e| (e.kind, e.value));
        assert_eq!(value(0), None);
        assert_eq!(value(2), Some((EntryKind::Put, Bytes::from_static(b"v1"))));
        assert_eq!(value(4), Some((EntryKind::Put, Bytes::from_static(b"v2"))));
        assert_eq!(value(9).map(|v| v.0), Some(EntryKind::DeleteRow));
        assert_eq!(
            m.get(1, b"r", b"d", 9).map(|e| e.kind),
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
            m.get(1, b"r", b"c", 1).map(|e| e.kind),
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
            m.get(1, b"r", b"c", 2).map(|e| e.kind),
            Some(EntryKind::DeleteRow)
        );
        m.apply(&put(b"r", b"c", b"x"), 2, 0);
        assert_eq!(
            m.get(1, b"r", b"c", 2).map(|e| e.value),
            Some(Bytes::from_static(b"x"))
        );
    }
}
