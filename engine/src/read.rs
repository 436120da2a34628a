//! Merging entries of several sources (memtables and SSTs) into visible rows.
//!
//! Every source yields entries in internal-key order (or its exact reverse for a reverse scan).
//! The merge interleaves them into one stream in that order, then each row's entries are
//! resolved at the snapshot sequence number: a cell is visible if its newest entry with
//! `seq <= snapshot` is a put that is not older than the row's newest visible row tombstone (a
//! tombstone and a cell of one batch share a seq; the memtable already resolved those, so a tie
//! means the cell was written after the tombstone).

use std::sync::Arc;

use bytes::Bytes;

use crate::error::Result;
use crate::key::{Entry, EntryKind};
use crate::scan::{Cell, Row, ScanOptions};
use crate::sst::{RowRange, SstIter, SstReader};

/// A source of entries in (possibly reversed) internal-key order.
pub(crate) type Source = Box<dyn Iterator<Item = Result<Entry>> + Send>;

/// Merges sources by internal key.
pub(crate) struct Merge {
    sources: Vec<Source>,
    heads: Vec<Option<Entry>>,
    reverse: bool,
    started: bool,
    failed: bool,
}

impl std::fmt::Debug for Merge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Merge")
            .field("sources", &self.sources.len())
            .field("reverse", &self.reverse)
            .finish_non_exhaustive()
    }
}

impl Merge {
    /// A merge of `sources`, all ascending, or all descending if `reverse`.
    pub(crate) fn new(sources: Vec<Source>, reverse: bool) -> Merge {
        let heads = sources.iter().map(|_| None).collect();
        Merge {
            sources,
            heads,
            reverse,
            started: false,
            failed: false,
        }
    }

    fn refill(&mut self, i: usize) -> Result<()> {
        self.heads[i] = self.sources[i].next().transpose()?;
        Ok(())
    }
}

impl Iterator for Merge {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if self.failed {
            return None;
        }
        if !self.started && self.sources.len() > 1 {
            self.started = true;
            for i in 0..self.sources.len() {
                if let Err(e) = self.refill(i) {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
        if self.sources.len() == 1 {
            // One source needs no merging.
            let next = self.sources[0].next();
            self.failed = matches!(next, Some(Err(_)));
            return next;
        }
        let mut best: Option<usize> = None;
        for (i, head) in self.heads.iter().enumerate() {
            let Some(h) = head else { continue };
            let better = match best.and_then(|b| self.heads[b].as_ref()) {
                None => true,
                Some(b) if self.reverse => h.key > b.key,
                Some(b) => h.key < b.key,
            };
            if better {
                best = Some(i);
            }
        }
        let i = best?;
        let entry = self.heads[i].take();
        if let Err(e) = self.refill(i) {
            self.failed = true;
            return Some(Err(e));
        }
        entry.map(Ok)
    }
}

/// The visible puts of one row at `snapshot_seq`, given the row's entries in ascending
/// internal-key order. Each returned entry is the cell's deciding put. Works in place.
pub(crate) fn resolve_row(mut entries: Vec<Entry>, snapshot_seq: u64) -> Vec<Entry> {
    let row_deleted = entries
        .iter()
        .filter(|e| e.key.kind == EntryKind::DeleteRow && e.key.seq <= snapshot_seq)
        .map(|e| e.key.seq)
        .max();
    entries.retain(|e| e.key.kind != EntryKind::DeleteRow && e.key.seq <= snapshot_seq);
    // The first (newest) visible entry of a column decides it; older versions go.
    entries.dedup_by(|later, kept| later.key.column == kept.key.column);
    entries.retain(|e| e.key.kind == EntryKind::Put && row_deleted.is_none_or(|d| e.key.seq >= d));
    entries
}

/// True if `a` and `b` hold the same bytes; cheap when they share one buffer.
fn same_bytes(a: &Bytes, b: &Bytes) -> bool {
    (a.as_ptr() == b.as_ptr() && a.len() == b.len()) || a == b
}

/// Groups a merged stream into rows and resolves each, skipping rows with no visible cell.
pub(crate) struct Rows {
    merge: Merge,
    pending: Option<Entry>,
    snapshot_seq: u64,
    reverse: bool,
    done: bool,
    /// Entries of the previous row, to size the next row's vector.
    last_len: usize,
}

impl std::fmt::Debug for Rows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rows")
            .field("merge", &self.merge)
            .field("snapshot_seq", &self.snapshot_seq)
            .finish_non_exhaustive()
    }
}

impl Rows {
    /// Rows of the merged `sources` visible at `snapshot_seq`.
    pub(crate) fn new(sources: Vec<Source>, reverse: bool, snapshot_seq: u64) -> Rows {
        Rows {
            merge: Merge::new(sources, reverse),
            pending: None,
            snapshot_seq,
            reverse,
            done: false,
            last_len: 0,
        }
    }

    /// The next row's key and every entry of it (ascending), without resolving it.
    pub(crate) fn next_raw(&mut self) -> Option<Result<(Bytes, Vec<Entry>)>> {
        if self.done {
            return None;
        }
        let first = match self.pending.take() {
            Some(e) => e,
            None => match self.merge.next()? {
                Ok(e) => e,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            },
        };
        let row = first.key.row.clone();
        let mut entries = Vec::with_capacity(self.last_len.max(1));
        entries.push(first);
        loop {
            match self.merge.next() {
                None => break,
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Some(Ok(e)) if same_bytes(&e.key.row, &row) => entries.push(e),
                Some(Ok(e)) => {
                    self.pending = Some(e);
                    break;
                }
            }
        }
        if self.reverse {
            entries.reverse();
        }
        self.last_len = entries.len();
        Some(Ok((row, entries)))
    }
}

impl Iterator for Rows {
    /// A row key and its visible cells (deciding puts), ascending by column.
    type Item = Result<(Bytes, Vec<Entry>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (row, entries) = match self.next_raw()? {
                Ok(r) => r,
                Err(e) => return Some(Err(e)),
            };
            let cells = resolve_row(entries, self.snapshot_seq);
            if !cells.is_empty() {
                return Some(Ok((row, cells)));
            }
        }
    }
}

/// The decision made on the last column seen in a row.
enum LastColumn {
    /// No column yet.
    None,
    /// The last cell pushed to the row's output has it.
    Pushed,
    /// Decided (hidden) without output.
    Held(Bytes),
}

/// Rows of a forward scan: merges the sources and resolves each row as its entries stream in,
/// straight into the [`Row`] a scan returns, with the scan's row and column filters, TTL and
/// `keys_only` applied. Equivalent to [`Rows`] followed by those filters, without collecting
/// each row's entries first: in ascending order a row's tombstones come before its cells
/// (newest first), and each cell's versions come newest first.
pub(crate) struct RowStream {
    merge: Merge,
    pending: Option<Entry>,
    snapshot_seq: u64,
    expired_before: Option<u64>,
    opts: ScanOptions,
    done: bool,
    /// Cells of the previous row, to size the next row's vector.
    last_len: usize,
}

impl std::fmt::Debug for RowStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowStream")
            .field("merge", &self.merge)
            .field("snapshot_seq", &self.snapshot_seq)
            .finish_non_exhaustive()
    }
}

impl RowStream {
    /// Rows of the merged ascending `sources` visible at `snapshot_seq`, filtered by `opts`
    /// (all but `reverse` and `limit`); puts written before `expired_before` are expired.
    pub(crate) fn new(
        sources: Vec<Source>,
        snapshot_seq: u64,
        expired_before: Option<u64>,
        opts: ScanOptions,
    ) -> RowStream {
        RowStream {
            merge: Merge::new(sources, false),
            pending: None,
            snapshot_seq,
            expired_before,
            opts,
            done: false,
            last_len: 0,
        }
    }

    fn wants_row(&self, row: &[u8]) -> bool {
        wants_row(&self.opts, row)
    }

    fn wants_cell(&self, e: &Entry) -> bool {
        self.expired_before.is_none_or(|t| e.write_ms >= t)
            && self
                .opts
                .columns
                .as_ref()
                .is_none_or(|cs| cs.iter().any(|x| x[..] == e.key.column[..]))
    }
}

impl Iterator for RowStream {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        while !self.done {
            let first = match self.pending.take() {
                Some(e) => e,
                None => match self.merge.next() {
                    None => {
                        self.done = true;
                        return None;
                    }
                    Some(Ok(e)) => e,
                    Some(Err(e)) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                },
            };
            let row = first.key.row.clone();
            let wanted = self.wants_row(&row);
            let mut cells: Vec<Cell> = Vec::with_capacity(if wanted { self.last_len } else { 0 });
            let mut row_deleted: Option<u64> = None;
            let mut last = LastColumn::None;
            let mut next = Some(first);
            while let Some(e) = next.take() {
                if wanted && e.key.seq <= self.snapshot_seq {
                    if e.key.kind == EntryKind::DeleteRow {
                        // Markers come first, newest first: the first visible one decides.
                        row_deleted = row_deleted.or(Some(e.key.seq));
                    } else {
                        let decided = match &last {
                            LastColumn::None => false,
                            LastColumn::Pushed => {
                                cells.last().is_some_and(|c| c.column == e.key.column)
                            }
                            LastColumn::Held(c) => *c == e.key.column,
                        };
                        if !decided {
                            let shown = e.key.kind == EntryKind::Put
                                && row_deleted.is_none_or(|d| e.key.seq >= d)
                                && self.wants_cell(&e);
                            if shown {
                                let value = if self.opts.keys_only {
                                    Bytes::new()
                                } else {
                                    e.value
                                };
                                cells.push(Cell {
                                    column: e.key.column,
                                    value,
                                });
                                last = LastColumn::Pushed;
                            } else {
                                last = LastColumn::Held(e.key.column);
                            }
                        }
                    }
                }
                match self.merge.next() {
                    None => self.done = true,
                    Some(Err(err)) => {
                        self.done = true;
                        return Some(Err(err));
                    }
                    Some(Ok(n)) if same_bytes(&n.key.row, &row) => next = Some(n),
                    Some(Ok(n)) => self.pending = Some(n),
                }
            }
            if !cells.is_empty() {
                self.last_len = cells.len();
                return Some(Ok(Row { key: row, cells }));
            }
        }
        None
    }
}

/// True if a scan with `opts` returns `row`.
fn wants_row(opts: &ScanOptions, row: &[u8]) -> bool {
    opts.contains(row) && opts.row_filter.as_ref().is_none_or(|f| f(row))
}

/// A forward scan whose only source is a run of SST files with disjoint, ascending row ranges
/// (one file, or the files of one level below 0): the same rows as [`RowStream`], built
/// straight from entries decoded in place in the cached blocks. No entry is materialized;
/// each returned cell's column and value are slices of a block.
pub(crate) struct FileRows {
    files: std::vec::IntoIter<Arc<SstReader>>,
    cur: Option<SstIter>,
    range: RowRange,
    snapshot_seq: u64,
    expired_before: Option<u64>,
    opts: ScanOptions,
    done: bool,
    /// The row being assembled, and whether the scan wants it.
    row: Option<Bytes>,
    wanted: bool,
    cells: Vec<Cell>,
    /// The newest visible row tombstone of the row.
    row_deleted: Option<u64>,
    /// The last column decided in the row, if any.
    last_column: Vec<u8>,
    has_last_column: bool,
    /// Cells of the previous row, to size the next row's vector.
    last_len: usize,
}

impl std::fmt::Debug for FileRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileRows")
            .field("range", &self.range)
            .field("snapshot_seq", &self.snapshot_seq)
            .finish_non_exhaustive()
    }
}

impl FileRows {
    /// Rows of `files` (disjoint, ascending) in `range` visible at `snapshot_seq`, filtered
    /// by `opts` (all but `reverse` and `limit`), with puts written before `expired_before`
    /// expired.
    pub(crate) fn new(
        files: Vec<Arc<SstReader>>,
        range: RowRange,
        snapshot_seq: u64,
        expired_before: Option<u64>,
        opts: ScanOptions,
    ) -> FileRows {
        FileRows {
            files: files.into_iter(),
            cur: None,
            range,
            snapshot_seq,
            expired_before,
            opts,
            done: false,
            row: None,
            wanted: false,
            cells: Vec::new(),
            row_deleted: None,
            last_column: Vec::new(),
            has_last_column: false,
            last_len: 0,
        }
    }

    /// Moves on to `range`, which must start past every row this scan has returned or looked
    /// at (a batched get's next row), reusing the position in the current file. False, having
    /// done nothing, when there is no current file to reuse: the caller starts a new scan.
    pub(crate) fn retarget(&mut self, range: RowRange) -> Result<bool> {
        let Some(cur) = self.cur.as_mut() else {
            return Ok(false);
        };
        if let Err(e) = cur.reseek_forward(range.clone()) {
            self.cur = None;
            return Err(e);
        }
        self.range = range;
        self.done = false;
        self.row = None;
        self.wanted = false;
        self.cells.clear();
        self.row_deleted = None;
        self.has_last_column = false;
        Ok(true)
    }
}

/// The row being assembled (`row`, `cells`), if it has a cell to return.
fn take_row(row: &mut Option<Bytes>, cells: &mut Vec<Cell>, last_len: &mut usize) -> Option<Row> {
    let key = row.take()?;
    if cells.is_empty() {
        return None;
    }
    *last_len = cells.len();
    Some(Row {
        key,
        cells: std::mem::take(cells),
    })
}

impl Iterator for FileRows {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        loop {
            if self.done {
                return take_row(&mut self.row, &mut self.cells, &mut self.last_len).map(Ok);
            }
            if self.cur.is_none() {
                match self.files.next() {
                    Some(r) => {
                        let fill = !self.opts.skip_cache_fill;
                        self.cur = Some(r.iter_filling(self.range.clone(), false, fill));
                    }
                    None => {
                        self.done = true;
                        continue;
                    }
                }
            }
            let Some(it) = self.cur.as_mut() else {
                continue;
            };
            let (raw, key, same_row, block) = match it.next_raw() {
                Err(e) => {
                    self.done = true;
                    self.row = None;
                    return Some(Err(e));
                }
                Ok(None) => {
                    self.cur = None;
                    continue;
                }
                Ok(Some(x)) => x,
            };
            let row_bytes = &key[..raw.row_len];
            let new_row = match &self.row {
                Some(r) => !same_row && r[..] != *row_bytes,
                None => true,
            };
            let mut finished = None;
            if new_row {
                if self.range.end.as_ref().is_some_and(|e| row_bytes >= &e[..]) {
                    // The cursor stays for `retarget`.
                    self.done = true;
                    continue;
                }
                let row = block.row(&raw, key);
                finished = take_row(&mut self.row, &mut self.cells, &mut self.last_len);
                self.wanted = wants_row(&self.opts, &row);
                self.row = Some(row);
                self.row_deleted = None;
                self.has_last_column = false;
                if self.wanted && self.cells.capacity() == 0 {
                    self.cells = Vec::with_capacity(self.last_len);
                }
                self.cells.clear();
            }
            if self.wanted && raw.seq <= self.snapshot_seq {
                if raw.kind == EntryKind::DeleteRow {
                    // Markers come first, newest first: the first visible one decides.
                    self.row_deleted = self.row_deleted.or(Some(raw.seq));
                } else {
                    let column = &key[raw.row_len..];
                    if !(self.has_last_column && self.last_column[..] == *column) {
                        self.last_column.clear();
                        self.last_column.extend_from_slice(column);
                        self.has_last_column = true;
                        let shown = raw.kind == EntryKind::Put
                            && self.row_deleted.is_none_or(|d| raw.seq >= d)
                            && self.expired_before.is_none_or(|t| raw.write_ms >= t)
                            && self
                                .opts
                                .columns
                                .as_ref()
                                .is_none_or(|cs| cs.iter().any(|x| x[..] == *column));
                        if shown {
                            let value = if self.opts.keys_only {
                                Bytes::new()
                            } else {
                                block.value(&raw)
                            };
                            self.cells.push(Cell {
                                column: block.column(&raw, key),
                                value,
                            });
                        }
                    }
                }
            }
            if let Some(r) = finished {
                return Some(Ok(r));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::InternalKey;

    fn e(row: &str, col: &str, seq: u64, kind: EntryKind, v: &str) -> Entry {
        Entry::new(
            InternalKey::new(
                Bytes::copy_from_slice(row.as_bytes()),
                Bytes::copy_from_slice(col.as_bytes()),
                seq,
                kind,
            ),
            0,
            Bytes::copy_from_slice(v.as_bytes()),
        )
    }

    fn source(mut v: Vec<Entry>, reverse: bool) -> Source {
        v.sort_by(|a, b| a.key.cmp(&b.key));
        if reverse {
            v.reverse();
        }
        Box::new(v.into_iter().map(Ok))
    }

    fn collect(reverse: bool, snap: u64) -> Vec<(String, Vec<(String, String)>)> {
        let newer = vec![
            e("a", "x", 5, EntryKind::DeleteRow, ""),
            e("a", "y", 6, EntryKind::Put, "ay6"),
            e("b", "x", 7, EntryKind::DeleteCell, ""),
        ];
        let older = vec![
            e("a", "x", 1, EntryKind::Put, "ax1"),
            e("b", "x", 2, EntryKind::Put, "bx2"),
            e("b", "y", 3, EntryKind::Put, "by3"),
            e("c", "z", 4, EntryKind::Put, "cz4"),
        ];
        Rows::new(
            vec![source(newer, reverse), source(older, reverse)],
            reverse,
            snap,
        )
        .map(|r| {
            let (row, cells) = r.expect("in-memory sources");
            (
                String::from_utf8_lossy(&row).into_owned(),
                cells
                    .iter()
                    .map(|c| {
                        (
                            String::from_utf8_lossy(&c.key.column).into_owned(),
                            String::from_utf8_lossy(&c.value).into_owned(),
                        )
                    })
                    .collect(),
            )
        })
        .collect()
    }

    fn s(row: &str, cells: &[(&str, &str)]) -> (String, Vec<(String, String)>) {
        (
            row.to_owned(),
            cells
                .iter()
                .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                .collect(),
        )
    }

    fn sample_sources() -> Vec<Source> {
        let newer = vec![
            e("a", "x", 5, EntryKind::DeleteRow, ""),
            e("a", "y", 6, EntryKind::Put, "ay6"),
            e("b", "x", 7, EntryKind::DeleteCell, ""),
        ];
        let older = vec![
            e("a", "x", 1, EntryKind::Put, "ax1"),
            e("b", "x", 2, EntryKind::Put, "bx2"),
            e("b", "y", 3, EntryKind::Put, "by3"),
            e("c", "z", 4, EntryKind::Put, "cz4"),
        ];
        vec![source(newer, false), source(older, false)]
    }

    #[test]
    fn row_stream_matches_rows_then_filters() {
        for snap in [0, 1, 2, 4, 5, 6, 7, 100] {
            let want: Vec<Row> = Rows::new(sample_sources(), false, snap)
                .map(|r| {
                    let (key, cells) = r.expect("in-memory sources");
                    Row {
                        key,
                        cells: cells
                            .into_iter()
                            .map(|c| Cell {
                                column: c.key.column,
                                value: c.value,
                            })
                            .collect(),
                    }
                })
                .collect();
            let got: Vec<Row> =
                RowStream::new(sample_sources(), snap, None, ScanOptions::default())
                    .collect::<Result<_>>()
                    .expect("in-memory sources");
            assert_eq!(got, want, "snapshot {snap}");
        }
        // Filters: rows from "b", column "y" only, keys only.
        let opts = ScanOptions {
            start: Some(b"b".to_vec()),
            columns: Some(vec![b"y".to_vec()]),
            keys_only: true,
            ..ScanOptions::default()
        };
        let got: Vec<Row> = RowStream::new(sample_sources(), 100, None, opts)
            .collect::<Result<_>>()
            .expect("in-memory sources");
        assert_eq!(
            got,
            vec![Row {
                key: Bytes::from_static(b"b"),
                cells: vec![Cell {
                    column: Bytes::from_static(b"y"),
                    value: Bytes::new(),
                }],
            }]
        );
    }

    #[test]
    fn merges_and_resolves_at_snapshots() {
        let latest = vec![
            s("a", &[("y", "ay6")]),
            s("b", &[("y", "by3")]),
            s("c", &[("z", "cz4")]),
        ];
        assert_eq!(collect(false, 100), latest);
        let mut rev = latest.clone();
        rev.reverse();
        assert_eq!(collect(true, 100), rev);
        assert_eq!(
            collect(false, 4),
            vec![
                s("a", &[("x", "ax1")]),
                s("b", &[("x", "bx2"), ("y", "by3")]),
                s("c", &[("z", "cz4")]),
            ]
        );
        assert_eq!(collect(false, 0), vec![]);
    }
}
