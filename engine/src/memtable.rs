//! The memtable: recent writes, held in memory until they are flushed to an SST.
//!
//! Entries are grouped by table, then by row. A row's entries live in a packed log of its own,
//! in internal-key order (row tombstones first, then columns ascending, newest sequence number
//! first), so a row's entries reach the SST builder or a reader in order without re-sorting.
//! Time-series writes append cells to a row in column order, so the common case appends a few
//! bytes to the row's log. An entry that does not sort after the row's last one (an older
//! version, a tombstone, a column out of order) is *spilled*: kept beside the log in the order
//! it came, and merged in by readers.
//!
//! ## The log
//!
//! One entry of a row's log, in bytes:
//!
//! ```text
//! tag (1) | [column length - 63 (varint), when the tag says 63] | seq - base (zigzag varint)
//!         | column | value length (varint) | value
//! ```
//!
//! The tag's low two bits are the kind (0 put, 1 cell delete, 2 row tombstone) and its high six
//! the column's length, 63 meaning "63 or more, the rest follows". `base` is the memtable's first
//! sequence number. A write time is kept once per batch (all entries of a batch share it), not
//! per entry. A time-series point (a 3-byte column and a value of a few bytes) takes about a
//! dozen bytes, so a memtable of a given size holds many points per row, and each flush writes
//! fewer, longer rows.
//!
//! Rows are found by a hash index of row ids (four bytes a row), and their key order is sorted
//! only when a reader or a flush asks for it, and then only for the rows added since: a write
//! never touches a tree.
//!
//! Several operations of one batch share a sequence number. Within a batch later operations
//! win: a put or cell delete replaces an entry of the same cell and seq, and a row delete drops
//! the row's cell entries of its own seq (the earlier operations of the batch).

mod arena;
mod index;
mod log;
mod pool;
mod row;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Bytes, BytesMut};
use parking_lot::RwLock;

use self::arena::Arena;
use self::index::TableRows;
use self::log::{View, cell_of, cmp_slot, entry_len};
use self::pool::LogPool;
use self::row::{Row, SPILL_OVERHEAD, Spilled};
use crate::batch::OpRef;
use crate::fold::{FlushFold, FoldEntry, FoldKind, FoldOut};
use crate::hint::prefetch;
use crate::key::{Entry, EntryKind, Found, InternalKey};
use crate::sst::RowRange;

/// Bytes charged per row on top of its key and log: the row itself, its slot in the hash
/// index (eight bytes, with the index's spare capacity) and in the sorted order.
const ROW_OVERHEAD: u64 = std::mem::size_of::<Row>() as u64 + 16 + 4;
/// Bytes charged per batch (its sequence number and write time).
const BATCH_OVERHEAD: u64 = 16;
/// Size of one chunk of row keys.
const KEY_CHUNK: usize = 16 << 10;

#[derive(Debug, Default)]
struct Tables {
    tables: BTreeMap<u32, TableRows>,
    /// Spilled entries' columns and values.
    arena: Arena,
    /// Row keys, copied back to back into shared chunks: a new row's key costs no allocation
    /// of its own.
    keys: BytesMut,
    /// The first sequence number applied: logs keep sequence numbers relative to it.
    base: Option<u64>,
    /// `(seq, write time)` of every batch applied, ascending by seq.
    batches: Vec<(u64, u64)>,
}

impl Tables {
    /// A shared copy of a new row's key.
    fn copy_key(keys: &mut BytesMut, row: &[u8]) -> Bytes {
        if keys.capacity() - keys.len() < row.len() {
            *keys = BytesMut::with_capacity(KEY_CHUNK.max(row.len()));
        }
        keys.extend_from_slice(row);
        keys.split().freeze()
    }

    fn base(&self) -> u64 {
        self.base.unwrap_or(0)
    }

    /// The write time of the batch `seq`.
    ///
    /// A flush asks this of every row, in key order, so of batches in no order: a binary
    /// search was a dozen dependent loads each time. Batches are of similar sizes, so the batch
    /// of `seq` is found from where it would be were they all alike, in a step or two; the
    /// binary search is left for batches of very different sizes.
    fn write_ms(&self, seq: u64) -> u64 {
        let b = &self.batches;
        let (Some(&(first, _)), Some(&(last, last_ms))) = (b.first(), b.last()) else {
            return 0;
        };
        if seq < first {
            return 0;
        }
        if seq >= last {
            return last_ms;
        }
        // Here first <= seq < last: so b[0].0 <= seq (a step down never passes 0) and
        // b[n - 1].0 > seq (a step up never passes n - 1).
        let n = b.len();
        let spread = u128::from(last - first) + 1;
        let guess = u128::from(seq - first) * n as u128 / spread;
        let mut i = usize::try_from(guess).unwrap_or(n - 1).min(n - 1);
        for _ in 0..4 {
            if b[i].0 > seq {
                i -= 1;
            } else if b[i + 1].0 <= seq {
                i += 1;
            } else {
                return b[i].1;
            }
        }
        self.write_ms_searched(seq)
    }

    /// [`Tables::write_ms`] by a binary search over the batches.
    fn write_ms_searched(&self, seq: u64) -> u64 {
        let b = &self.batches;
        match b.binary_search_by_key(&seq, |b| b.0) {
            Ok(i) => b[i].1,
            Err(i) => i.checked_sub(1).map_or(0, |i| b[i].1),
        }
    }

    /// Records a batch; returns the bytes to charge.
    fn note_batch(&mut self, seq: u64, write_ms: u64) -> u64 {
        if self.base.is_none() {
            self.base = Some(seq);
        }
        match self.batches.last() {
            Some(&(s, _)) if s == seq => 0,
            Some(&(s, _)) if s > seq => match self.batches.binary_search_by_key(&seq, |b| b.0) {
                Ok(_) => 0,
                Err(i) => {
                    self.batches.insert(i, (seq, write_ms));
                    BATCH_OVERHEAD
                }
            },
            _ => {
                self.batches.push((seq, write_ms));
                BATCH_OVERHEAD
            }
        }
    }

    /// Every entry of a row as [`Entry`]s, appended to `out` (`views` is scratch space).
    /// Entries of the log share one copy of it.
    fn row_entries<'a>(&'a self, r: &'a Row, views: &mut Vec<View<'a>>, out: &mut Vec<Entry>) {
        r.view(self.base(), &self.arena, views);
        let log = if r.log.is_empty() {
            Bytes::new()
        } else {
            Bytes::copy_from_slice(&r.log)
        };
        let start = r.log.as_ptr() as usize;
        let shared = |s: &[u8]| {
            let at = s.as_ptr() as usize - start;
            log.slice(at..at + s.len())
        };
        for v in views.iter() {
            let (column, value) = match v.spilled {
                Some(at) => {
                    let c = v.column.len() as u32;
                    (
                        self.arena.shared(at, 0, c),
                        self.arena.shared(at, c, v.value.len() as u32),
                    )
                }
                None => (shared(v.column), shared(v.value)),
            };
            out.push(Entry {
                key: InternalKey {
                    row: r.key.clone(),
                    column,
                    seq: v.seq,
                    kind: v.kind,
                },
                write_ms: self.write_ms(v.seq),
                value,
            });
        }
    }
}

/// An in-memory, sorted set of entries of every table.
#[derive(Debug, Default)]
pub(crate) struct Memtable {
    tables: RwLock<Tables>,
    bytes: AtomicU64,
    max_seq: AtomicU64,
    /// Bytes charged for the rows of tables whose rows grow (see [`Memtable::row_bytes`]).
    row_bytes: AtomicU64,
    /// Bit `t` set: the rows of table `t` do not grow (`TableOptions::rows_grow`). Tables from
    /// 64 on always count as growing. Shared by a memtable and the ones after it.
    flat_tables: Arc<AtomicU64>,
    /// For each table in the memtable before this one: how many rows it held, the room a table
    /// starts with, so that its row vector and index do not grow by doubling, each time copying
    /// and rehashing every row; and the log capacity its new rows start with, what its rows
    /// held on average, so that most rows grow their log once or not at all. Per table, as
    /// tables differ: a time series' row gains a point every few seconds, an index entry is
    /// written once.
    table_hint: Vec<TableHint>,
    /// The row logs of dropped memtables, for new rows. Shared by a memtable and the ones after
    /// it.
    logs: Arc<LogPool>,
    /// This memtable's place in its chain: the first is 0, the one after it 1.
    generation: u64,
}

impl Drop for Memtable {
    fn drop(&mut self) {
        let generation = self.generation;
        let tables = &mut self.tables.get_mut().tables;
        let logs = tables
            .values_mut()
            .flat_map(|t| t.rows.iter_mut().map(|r| std::mem::take(&mut r.log)));
        self.logs.refill(generation, logs);
    }
}

/// See [`Memtable::table_hint`].
#[derive(Debug, Clone, Copy)]
struct TableHint {
    table: u32,
    rows: usize,
    row_hint: usize,
}

/// How many operations ahead [`Memtable::apply_all`] fetches a row's header (and how many rows
/// ahead a flush does).
const PREFETCH_AHEAD: usize = 8;

/// How many lookups [`find_all`] takes through each of its passes at a time: enough for their
/// misses to overlap, few enough that what the first pass fetches is still in cache for the
/// last.
const FIND_CHUNK: usize = 256;

/// The row of each operation that is in the memtable already: its table and index.
///
/// One lookup is three dependent misses with many rows (the index slot, the row's header, its
/// key). Done one after another, a batch pays them all in sequence; here a chunk of lookups
/// goes through one pass per miss, each pass fetching what the next needs for the whole
/// chunk, so a chunk's misses of one kind overlap.
fn find_all(t: &Tables, ops: &[OpRef<'_>]) -> Vec<Option<(u32, usize)>> {
    struct Lookup<'t, 'o> {
        table: u32,
        rows: Option<&'t TableRows>,
        row: &'o [u8],
        hash: u64,
        candidate: Option<u32>,
    }
    let mut found = Vec::with_capacity(ops.len());
    let mut lookups: Vec<Lookup<'_, '_>> = Vec::with_capacity(FIND_CHUNK.min(ops.len()));
    for chunk in ops.chunks(FIND_CHUNK) {
        lookups.clear();
        for op in chunk {
            let (table, row) = op.table_row();
            let rows = t.tables.get(&table);
            let hash = index::hash_key(row);
            if let Some(slot) = rows.and_then(|r| r.index.slot_of(hash)) {
                prefetch(slot);
            }
            lookups.push(Lookup {
                table,
                rows,
                row,
                hash,
                candidate: None,
            });
        }
        for l in &mut lookups {
            l.candidate = l.rows.and_then(|r| r.index.candidate(l.hash));
            if let (Some(rows), Some(i)) = (l.rows, l.candidate) {
                prefetch(&rows.rows[i as usize]);
            }
        }
        for l in &lookups {
            if let (Some(rows), Some(i)) = (l.rows, l.candidate) {
                prefetch(rows.rows[i as usize].key.as_ptr());
            }
        }
        found.extend(lookups.iter().map(|l| {
            let rows = l.rows?;
            let i = l.candidate?;
            let i = if rows.rows[i as usize].key == l.row {
                i as usize
            } else {
                // Another key with the same tag came first in the probe.
                rows.find_hashed(l.hash, l.row)?
            };
            Some((l.table, i))
        }));
    }
    found
}

impl Memtable {
    /// An empty memtable.
    pub(crate) fn new() -> Memtable {
        Memtable::default()
    }

    /// An empty memtable to follow `previous`, sized by what its tables held (see
    /// [`Memtable::table_hint`]).
    pub(crate) fn after(previous: &Memtable) -> Memtable {
        let table_hint = previous
            .tables
            .read()
            .tables
            .iter()
            .map(|(&table, t)| TableHint {
                table,
                rows: t.rows.len(),
                row_hint: t.next_row_hint(),
            })
            .collect();
        previous.logs.started(previous.generation + 1);
        Memtable {
            tables: RwLock::default(),
            bytes: AtomicU64::new(0),
            max_seq: AtomicU64::new(0),
            row_bytes: AtomicU64::new(0),
            flat_tables: Arc::clone(&previous.flat_tables),
            table_hint,
            logs: Arc::clone(&previous.logs),
            generation: previous.generation + 1,
        }
    }

    /// Records whether the rows of `table` gain entries over time (`TableOptions::rows_grow`),
    /// for this memtable and the ones after it.
    pub(crate) fn set_rows_grow(&self, table: u32, grow: bool) {
        if table < 64 {
            let bit = 1u64 << table;
            if grow {
                self.flat_tables.fetch_and(!bit, Ordering::Relaxed);
            } else {
                self.flat_tables.fetch_or(bit, Ordering::Relaxed);
            }
        }
    }

    /// Approximate bytes held.
    pub(crate) fn approximate_bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The part of [`Memtable::approximate_bytes`] that the rows of tables whose rows grow cost
    /// whatever they hold: their keys, headers and index slots. The rows of other tables (an
    /// index written once per series) are left out: they gain nothing if the memtable waits.
    pub(crate) fn row_bytes(&self) -> u64 {
        self.row_bytes.load(Ordering::Relaxed)
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
    /// A batch's operations touch rows all over the memtable, and each touch would be four
    /// cache misses in a row: the row's slot in the hash index, the row's header, its key and
    /// the end of its log. So the rows that already exist are looked up first, all together
    /// (see [`find_all`]); then, while an operation is applied, the header of the row
    /// [`PREFETCH_AHEAD`] operations on and the log's end of the row half as far on are
    /// fetched.
    pub(crate) fn apply_all(&self, ops: &[OpRef<'_>], seq: u64, write_ms: u64) {
        let mut guard = self.tables.write();
        let t = &mut *guard;
        let mut added = t.note_batch(seq, write_ms) as i64;
        let found = find_all(t, ops);
        fn row_at<'t>(t: &'t Tables, found: &[Option<(u32, usize)>], k: usize) -> Option<&'t Row> {
            let (table, i) = found.get(k).copied().flatten()?;
            t.tables.get(&table)?.rows.get(i)
        }
        let mut row_bytes = 0u64;
        let flat = self.flat_tables.load(Ordering::Relaxed);
        for (k, op) in ops.iter().enumerate() {
            if let Some(r) = row_at(t, &found, k + PREFETCH_AHEAD) {
                prefetch(r);
            }
            if let Some(r) = row_at(t, &found, k + PREFETCH_AHEAD / 2) {
                prefetch(r.log.as_ptr().wrapping_add(r.log.len()));
            }
            let (bytes, new) = self.apply_locked(t, op, seq, found[k].map(|(_, i)| i));
            added += bytes;
            let (table, row) = op.table_row();
            if new && (table >= 64 || flat & (1 << table) == 0) {
                row_bytes += ROW_OVERHEAD + row.len() as u64;
            }
        }
        drop(guard);
        self.bytes
            .fetch_add(u64::try_from(added.max(0)).unwrap_or(0), Ordering::Relaxed);
        self.row_bytes.fetch_add(row_bytes, Ordering::Relaxed);
        self.max_seq.fetch_max(seq, Ordering::Relaxed);
    }

    /// Adds one operation, `found` being its row's index if the row was there before the
    /// batch. Returns the bytes to charge, and whether the row is new.
    fn apply_locked(
        &self,
        t: &mut Tables,
        op: &OpRef<'_>,
        seq: u64,
        found: Option<usize>,
    ) -> (i64, bool) {
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
        let base = t.base();
        let Tables {
            tables,
            arena,
            keys,
            ..
        } = t;
        let rows = tables.entry(table).or_insert_with(|| {
            match self.table_hint.iter().find(|h| h.table == table) {
                Some(h) => TableRows::with_capacity(h.rows, h.row_hint),
                None => TableRows::with_capacity(0, 0),
            }
        });
        let mut added = 0i64;
        let mut new = false;
        let i = match found.or_else(|| rows.find(row)) {
            Some(i) => i,
            None => {
                new = true;
                let key = Tables::copy_key(keys, row);
                let log = self.logs.take(rows.row_hint);
                added += (ROW_OVERHEAD + row.len() as u64 + log.capacity() as u64) as i64;
                rows.insert(key, log)
            }
        };
        let r = &mut rows.rows[i];
        if kind == EntryKind::DeleteRow {
            added += r.drop_cells_of(seq, base);
        }
        let cell = cell_of(kind);
        if r.appends(cell, column, seq, base) {
            let cap = r.log.capacity();
            let len = r.log.len();
            let need = entry_len(seq.wrapping_sub(base) as i64, column, value);
            if cap - len < need {
                // Grown as a `Vec` grows, by doubling, but into a kept log. The outgrown one is
                // freed, not kept: the rows of this memtable exist by now, so nothing would
                // take it before the next refill, while the allocator hands it straight to the
                // next allocation of its size on this thread.
                let mut grown = self.logs.take((2 * cap).max(len + need));
                grown.extend_from_slice(&r.log);
                r.log = grown;
            }
            r.append(kind, seq, base, column, value);
            added += r.log.capacity() as i64 - cap as i64;
            rows.log_bytes += (r.log.len() - len) as u64;
            return (added, new);
        }
        let at = arena.alloc(column, value);
        r.spill.get_or_insert_default().push(Spilled {
            at,
            column_len: column.len() as u32,
            value_len: value.len() as u32,
            kind,
            seq,
        });
        added += (SPILL_OVERHEAD + column.len() as u64 + value.len() as u64) as i64;
        (added, new)
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
        let r = tables.tables.get(&table)?.get(row)?;
        let mut entries = Vec::new();
        r.view(tables.base(), &tables.arena, &mut entries);
        let visible = |cell: u8, column: &[u8]| {
            let i = entries
                .partition_point(|e| cmp_slot(e.slot(), (cell, column, snapshot_seq)).is_lt());
            entries
                .get(i)
                .filter(|e| cell_of(e.kind) == cell && e.column == column)
                .map(|e| Found {
                    kind: e.kind,
                    seq: e.seq,
                    write_ms: tables.write_ms(e.seq),
                    value: Bytes::copy_from_slice(e.value),
                })
        };
        let marker = if entries.first().is_some_and(|e| cell_of(e.kind) == 0) {
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
        let order = rows.order();
        let (mut views, mut out) = (Vec::new(), Vec::new());
        let mut result = Ok(());
        order.walk(&rows.rows, None, |i| {
            out.clear();
            tables.row_entries(&rows.rows[i as usize], &mut views, &mut out);
            result = out.iter().try_for_each(&mut *f);
            result.is_ok()
        });
        result
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
        let order = rows.order();
        let mut ids = Vec::with_capacity(rows.rows.len());
        order.walk(&rows.rows, None, |i| {
            ids.push(i);
            true
        });
        drop(order);
        let mut views: Vec<View<'_>> = Vec::new();
        let mut fold_view: Vec<FoldEntry<'_>> = Vec::new();
        let mut out: Vec<Entry> = Vec::new();
        // Rows are visited in key order but stored in arrival order: with many rows each one
        // is a miss (and a TLB miss), so headers are fetched twice as far ahead as an apply
        // fetches them, and keys and logs half as far as headers.
        let row_of = |k: usize| ids.get(k).and_then(|&i| rows.rows.get(i as usize));
        for (k, &i) in ids.iter().enumerate() {
            if let Some(r) = row_of(k + 2 * PREFETCH_AHEAD) {
                prefetch(r);
            }
            if let Some(r) = row_of(k + PREFETCH_AHEAD) {
                prefetch(r.key.as_ptr());
                prefetch(r.log.as_ptr());
            }
            let r = &rows.rows[i as usize];
            r.view(tables.base(), &tables.arena, &mut views);
            fold_view.clear();
            fold_view.extend(views.iter().map(|e| FoldEntry {
                column: e.column,
                value: e.value,
                seq: e.seq,
                kind: match e.kind {
                    EntryKind::Put => FoldKind::Put,
                    EntryKind::DeleteCell => FoldKind::DeleteCell,
                    EntryKind::DeleteRow => FoldKind::DeleteRow,
                },
            }));
            let folded = fold
                .fold(&r.key, &fold_view)
                .and_then(|folded| Self::folded_entries(&tables, &r.key, &views, folded, &mut out));
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
                    out.clear();
                    let mut scratch = Vec::new();
                    tables.row_entries(r, &mut scratch, &mut out);
                    for e in &out {
                        f(e)?;
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
        tables: &Tables,
        row: &Bytes,
        entries: &[View<'_>],
        folded: Vec<FoldOut>,
        out: &mut Vec<Entry>,
    ) -> Option<()> {
        let max_seq = entries.iter().map(|e| e.seq).max().unwrap_or(0);
        let write_ms = entries
            .iter()
            .map(|e| tables.write_ms(e.seq))
            .max()
            .unwrap_or(0);
        let copy = |v: &View<'_>| Entry {
            key: InternalKey {
                row: row.clone(),
                column: Bytes::copy_from_slice(v.column),
                seq: v.seq,
                kind: v.kind,
            },
            write_ms: tables.write_ms(v.seq),
            value: Bytes::copy_from_slice(v.value),
        };
        // A marker entry so that a rejection is visible to the caller even when it comes first.
        let reject = |out: &mut Vec<Entry>| {
            if out.is_empty()
                && let Some(first) = entries.first()
            {
                out.push(copy(first));
            }
            None
        };
        for o in folded {
            let e = match o {
                FoldOut::Keep(i) => match entries.get(i) {
                    Some(v) => copy(v),
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

    /// Every entry of `table` in the rows of `range`, in internal-key order. Rows are shared
    /// with the memtable; columns and values share one copy of each row's log.
    #[cfg(test)]
    pub(crate) fn entries(&self, table: u32, range: &RowRange) -> Vec<Entry> {
        let mut out = Vec::new();
        self.entries_from(
            table,
            range.start.as_deref(),
            range.end.as_ref(),
            usize::MAX,
            &mut out,
        );
        out
    }

    /// Appends to `out` the entries of `table` in the rows from `start` (inclusive) to `end`
    /// (exclusive), in internal-key order, whole rows at a time until `out` holds at least
    /// `max` entries. Returns the key of the first row left out when it stopped there, to
    /// start the next call at.
    pub(crate) fn entries_from(
        &self,
        table: u32,
        start: Option<&[u8]>,
        end: Option<&Bytes>,
        max: usize,
        out: &mut Vec<Entry>,
    ) -> Option<Bytes> {
        let tables = self.tables.read();
        let rows = tables.tables.get(&table)?;
        if let (Some(s), Some(e)) = (start, end)
            && s >= &e[..]
        {
            return None;
        }
        let order = rows.order();
        let mut views = Vec::new();
        let mut resume = None;
        order.walk(&rows.rows, start, |i| {
            let r = &rows.rows[i as usize];
            if end.is_some_and(|e| r.key >= e) {
                return false;
            }
            if out.len() >= max {
                resume = Some(r.key.clone());
                return false;
            }
            tables.row_entries(r, &mut views, out);
            true
        });
        resume
    }
}

/// The entries of one table's rows in a range of a memtable, in internal-key order, read a
/// few thousand at a time: a scan of a million rows, of which its reader may take only the
/// first few, holds one chunk of them, not a copy of them all.
pub(crate) struct MemScan {
    mem: Arc<Memtable>,
    table: u32,
    /// Where the next chunk starts; `None` once the last is read.
    next: Option<Bytes>,
    end: Option<Bytes>,
    chunk: std::vec::IntoIter<Entry>,
}

impl MemScan {
    /// Entries taken per chunk (a little more, as rows are taken whole).
    const CHUNK: usize = 4096;

    /// A scan of `table` over `range`, with its first chunk read; `None` when the range
    /// holds nothing.
    pub(crate) fn new(mem: Arc<Memtable>, table: u32, range: &RowRange) -> Option<MemScan> {
        let mut first = Vec::new();
        let next = mem.entries_from(
            table,
            range.start.as_deref(),
            range.end.as_ref(),
            MemScan::CHUNK,
            &mut first,
        );
        if first.is_empty() {
            return None;
        }
        Some(MemScan {
            mem,
            table,
            next,
            end: range.end.clone(),
            chunk: first.into_iter(),
        })
    }
}

impl Iterator for MemScan {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        loop {
            if let Some(e) = self.chunk.next() {
                return Some(e);
            }
            // Rows added after the previous chunk and before `next` hold only entries newer
            // than any snapshot this scan serves, which the reader drops anyway.
            let start = self.next.take()?;
            let mut out = Vec::with_capacity(MemScan::CHUNK);
            self.next = self.mem.entries_from(
                self.table,
                Some(&start),
                self.end.as_ref(),
                MemScan::CHUNK,
                &mut out,
            );
            self.chunk = out.into_iter();
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// A batch's write time is the one a binary search over the batches finds, for batches
        /// of alike and of wildly different sizes, and for sequence numbers outside them.
        #[test]
        fn write_times_match_a_binary_search(
            sizes in proptest::collection::vec(
                prop_oneof![1u64..5, 1u64..100_000],
                0..300,
            ),
            start in 0u64..1000,
            probes in proptest::collection::vec(any::<prop::sample::Index>(), 1..50),
        ) {
            let mut t = Tables::default();
            let mut seq = start;
            for (i, size) in sizes.iter().enumerate() {
                t.batches.push((seq, 1000 + i as u64));
                seq += size;
            }
            let model = |s: u64| t.write_ms_searched(s);
            let end = seq + 10;
            for p in &probes {
                let s = p.index(usize::try_from(end).unwrap_or(usize::MAX)) as u64;
                prop_assert_eq!(t.write_ms(s), model(s), "seq {}", s);
            }
            for &(s, _) in &t.batches {
                prop_assert_eq!(t.write_ms(s), model(s));
                prop_assert_eq!(t.write_ms(s + 1), model(s + 1));
            }
        }

        /// Entries stay in internal-key order whatever the columns' lengths, on both sides of
        /// the inline head's length.
        #[test]
        fn entries_stay_ordered_with_short_and_long_columns(
            cols in proptest::collection::vec(
                (proptest::collection::vec(0u8..3, 0..90), proptest::collection::vec(any::<u8>(), 0..300)),
                1..40,
            ),
            gap in 1u64..100_000,
        ) {
            let m = Memtable::new();
            // Columns on both sides of the inline head and of the tag's length field, values
            // of every length class, and sequence numbers far apart.
            for (i, (c, v)) in cols.iter().enumerate() {
                m.apply(&put(b"r", c, v), 7 + i as u64 * gap, i as u64);
            }
            let entries = m.entries(1, &RowRange::all());
            let keys: Vec<InternalKey> = entries.iter().map(|e| e.key.clone()).collect();
            let mut sorted = keys.clone();
            sorted.sort();
            prop_assert_eq!(keys.len(), cols.len());
            prop_assert_eq!(&keys, &sorted);
            for e in &entries {
                let i = usize::try_from((e.key.seq - 7) / gap).unwrap_or(usize::MAX);
                prop_assert_eq!(&e.key.column[..], &cols[i].0[..]);
                prop_assert_eq!(&e.value[..], &cols[i].1[..]);
                prop_assert_eq!(e.write_ms, i as u64);
            }
        }
    }

    proptest! {
        /// Rows added between reads (which take them into the key order in two runs) are
        /// read back in key order over any range, like a sorted set of the keys.
        #[test]
        fn rows_read_in_key_order_while_rows_are_added(
            rounds in proptest::collection::vec(
                (proptest::collection::vec(any::<u16>(), 0..60), any::<u16>(), any::<u16>()),
                1..30,
            ),
        ) {
            let m = Memtable::new();
            let mut model = std::collections::BTreeSet::new();
            let mut seq = 1;
            for (rows, a, b) in rounds {
                for r in rows {
                    let key = format!("r{r:05}").into_bytes();
                    m.apply(&put(&key, b"c", b"v"), seq, 0);
                    seq += 1;
                    model.insert(key);
                }
                let (lo, hi) = (a.min(b), a.max(b));
                let (start, end) = (format!("r{lo:05}").into_bytes(), format!("r{hi:05}").into_bytes());
                // A row written twice has two versions: one key per row.
                let rows_of = |range: &RowRange| {
                    let mut rows: Vec<Vec<u8>> =
                        m.entries(1, range).into_iter().map(|e| e.key.row.to_vec()).collect();
                    rows.dedup();
                    rows
                };
                let want: Vec<Vec<u8>> = model.range(start.clone()..end.clone()).cloned().collect();
                prop_assert_eq!(rows_of(&RowRange::new(&start, &end)), want);
                prop_assert_eq!(rows_of(&RowRange::all()), model.iter().cloned().collect::<Vec<_>>());
            }
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

    /// A client that writes the same cells again and again: each rewrite is spilled, so the
    /// row's log keeps the first version of each cell and no write moves it.
    #[test]
    fn rewriting_a_cell_does_not_grow_the_log() {
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
            row.map(|r| (
                r.log_iter(tables.base(), 0).count(),
                r.spill.as_ref().map_or(0, |s| s.len())
            )),
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

    /// The next memtable takes the logs of a dropped one for its rows, emptied: it sees none
    /// of the old entries, its own survive growing past the reused capacity, and its charge
    /// is what its logs hold.
    #[test]
    fn a_dropped_memtables_logs_serve_the_next_one_empty() {
        let first = Memtable::new();
        let columns: Vec<[u8; 4]> = (0..400u32).map(|c| c.to_be_bytes()).collect();
        for (r, row) in [b"r1", b"r2", b"r3"].into_iter().enumerate() {
            for c in &columns {
                first.apply(&put(row, c, b"old value"), 1 + r as u64, 0);
            }
        }
        let second = Memtable::after(&first);
        drop(first);
        let mut kept = second.logs.kept_bytes();
        assert!(kept > 0, "the dropped memtable's logs are kept");
        // More entries per row than before: each log grows past what it was given.
        let mut seq = 10;
        for row in [b"r2", b"r4"] {
            for round in 0..3u32 {
                for c in 0..columns.len() as u32 {
                    let column = (round * 1000 + c).to_be_bytes();
                    second.apply(&put(row, &column, b"new"), seq, 0);
                    if round == 0 && c == 0 {
                        let now = second.logs.kept_bytes();
                        assert!(now < kept, "the new row took a kept log");
                        kept = now;
                    }
                }
                seq += 1;
            }
        }
        let all = second.entries(1, &RowRange::all());
        assert_eq!(all.len(), 2 * 3 * columns.len());
        assert!(all.iter().all(|e| &e.value[..] == b"new"));
        assert!(all.windows(2).all(|w| w[0].key < w[1].key));
        let tables = second.tables.read();
        assert!(
            tables
                .tables
                .values()
                .flat_map(|t| t.rows.iter())
                .all(|r| r.spill.is_none()),
            "every entry was appended"
        );
        let held: u64 = tables
            .tables
            .values()
            .flat_map(|t| t.rows.iter())
            .map(|r| ROW_OVERHEAD + r.key.len() as u64 + r.log.capacity() as u64)
            .sum::<u64>()
            + tables.batches.len() as u64 * BATCH_OVERHEAD;
        assert_eq!(second.approximate_bytes(), held);
    }

    /// A memtable dropped once two have followed it (its flush took longer than the next
    /// one's writes) leaves nothing kept: the newest one has made its rows.
    #[test]
    fn a_memtable_dropped_late_leaves_no_logs_kept() {
        let first = Memtable::new();
        first.apply(&put(b"r1", b"c", b"value"), 1, 0);
        let second = Memtable::after(&first);
        for c in 0..400u32 {
            second.apply(&put(b"r1", &c.to_be_bytes(), b"value"), 2, 0);
        }
        let third = Memtable::after(&second);
        drop(first);
        assert_eq!(third.logs.kept_bytes(), 0);
        drop(second);
        assert!(third.logs.kept_bytes() > 0);
    }

    fn put<'a>(row: &'a [u8], column: &'a [u8], value: &'a [u8]) -> OpRef<'a> {
        OpRef::Put {
            table: 1,
            row,
            column,
            value,
        }
    }

    /// A chunked scan yields what one pass over the memtable does, from any start to any end,
    /// and holds one chunk at a time.
    #[test]
    fn a_chunked_scan_matches_the_whole_walk() {
        let m = Arc::new(Memtable::new());
        let mut seq = 0;
        for r in 0..3_000u32 {
            for c in 0..(1 + r % 3) {
                seq += 1;
                let row = format!("row{r:05}");
                m.apply(&put(row.as_bytes(), &[c as u8], b"v"), seq, 10);
            }
        }
        let ranges = [
            RowRange::all(),
            RowRange::new(b"row00100", b"row02950"),
            RowRange::new(b"row01000", b"row01001"),
            RowRange::new(b"row02000", b"row01000"),
            RowRange::new(b"zzz", b"zzzz"),
        ];
        for range in &ranges {
            let whole = m.entries(1, range);
            let scan = MemScan::new(m.clone(), 1, range);
            if let Some(scan) = &scan {
                assert!(scan.chunk.len() < MemScan::CHUNK + 3);
            }
            let chunked: Vec<Entry> = scan.into_iter().flatten().collect();
            assert_eq!(chunked.len(), whole.len());
            assert!(chunked.iter().zip(&whole).all(|(a, b)| a.key == b.key));
        }
        assert_eq!(m.entries(1, &RowRange::all()).len(), 6_000);
    }

    /// Rows written between two chunks of a scan come out in key order if they sort after
    /// where the scan is, and not at all if before; nothing repeats.
    #[test]
    fn a_chunked_scan_stays_sorted_while_rows_are_added() {
        let m = Arc::new(Memtable::new());
        for r in 0..10_000u32 {
            let row = format!("row{:05}", r * 2);
            m.apply(&put(row.as_bytes(), b"c", b"v"), u64::from(r) + 1, 10);
        }
        let mut scan = MemScan::new(m.clone(), 1, &RowRange::all()).expect("rows");
        let mut seen = vec![scan.next().expect("an entry")];
        for r in 0..10_000u32 {
            let row = format!("row{:05}", r * 2 + 1);
            m.apply(&put(row.as_bytes(), b"c", b"v"), 20_000 + u64::from(r), 10);
        }
        seen.extend(scan);
        assert!(seen.windows(2).all(|w| w[0].key < w[1].key));
        let old = seen.iter().filter(|e| e.key.seq <= 10_000).count();
        assert_eq!(old, 10_000);
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

    fn put_in<'a>(table: u32, row: &'a [u8], column: &'a [u8]) -> OpRef<'a> {
        OpRef::Put {
            table,
            row,
            column,
            value: b"v",
        }
    }

    /// The rows of a table whose rows do not grow are left out of the bytes that let a
    /// memtable grow past its size, for this memtable and the ones after it.
    #[test]
    fn rows_of_flat_tables_do_not_count_towards_growth() {
        let m = Memtable::new();
        m.set_rows_grow(2, false);
        m.apply(&put_in(1, b"series", b"c"), 1, 0);
        m.apply(&put_in(2, b"index-entry", b"c"), 2, 0);
        assert_eq!(m.row_bytes(), ROW_OVERHEAD + b"series".len() as u64);
        let next = Memtable::after(&m);
        next.apply(&put_in(2, b"another-entry", b"c"), 3, 0);
        assert_eq!(next.row_bytes(), 0);
        next.set_rows_grow(2, true);
        next.apply(&put_in(2, b"third-entry", b"c"), 4, 0);
        assert_eq!(next.row_bytes(), ROW_OVERHEAD + b"third-entry".len() as u64);
    }

    /// A new row starts with the log its own table's rows held on average in the memtable
    /// before (or a kept log from half that size), not the average over every table.
    #[test]
    fn new_rows_start_with_their_tables_log_size() {
        let m = Memtable::new();
        let columns: Vec<[u8; 2]> = (0..60u8).map(|c| [b'c', c]).collect();
        for (seq, c) in (1..).zip(&columns) {
            m.apply(&put_in(1, b"wide", c), seq, 0);
        }
        for i in 0..20u8 {
            m.apply(&put_in(2, &[b'k', i], b"c"), 100 + u64::from(i), 0);
        }
        let (wide, narrow) = {
            let tables = m.tables.read();
            let log = |table: u32| tables.tables.get(&table).map_or(0, |t| t.log_bytes);
            (log(1), log(2) / 20)
        };
        let next = Memtable::after(&m);
        next.apply(&put_in(1, b"wide-2", b"c0"), 200, 0);
        next.apply(&put_in(2, b"k-new", b"c"), 201, 0);
        let tables = next.tables.read();
        let capacity = |table: u32, row: &[u8]| {
            tables
                .tables
                .get(&table)
                .and_then(|t| t.get(row))
                .map_or(0, |r| r.log.capacity() as u64)
        };
        assert!(
            capacity(1, b"wide-2") * 2 > wide,
            "{} is not half of {wide}",
            capacity(1, b"wide-2")
        );
        assert!(
            capacity(2, b"k-new") < wide / 4,
            "{}",
            capacity(2, b"k-new")
        );
        assert!(capacity(2, b"k-new") >= narrow);
    }
}
