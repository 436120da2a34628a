//! A consistent read view: a sequence number plus references to the memtables and the files
//! of the moment, so it stays consistent while flushes and compactions replace them. Reads
//! merge the active memtable, the frozen ones and the files, newest first.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::Result;
use crate::key::{Entry, EntryKind, Found};
use crate::memtable::{MemScan, Memtable};
use crate::read::{FileRows, RowStream, Rows, Source};
use crate::scan::{Cell, Row, RowIter, ScanOptions};
use crate::sst::{RowRange, SstReader};
use crate::state::Files;
use crate::table::Table;

/// Reads one cell at `seq` from `mems` (newest first) and then `files`; cells written before
/// `expired_before` are expired.
pub(crate) fn read_cell(
    seq: u64,
    mems: &[Arc<Memtable>],
    files: &Files,
    expired_before: Option<u64>,
    table: u32,
    row: &[u8],
    column: &[u8],
) -> Result<Option<Bytes>> {
    let decide = |f: Found| {
        (f.kind == EntryKind::Put && expired_before.is_none_or(|t| f.write_ms >= t))
            .then_some(f.value)
    };
    for m in mems {
        if let Some(f) = m.get(table, row, column, seq) {
            return Ok(decide(f));
        }
    }
    if let Some(levels) = files.tables.get(&table) {
        for reader in levels.iter().flatten() {
            if let Some(f) = reader.lookup(row, column, seq)? {
                return Ok(decide(f));
            }
        }
    }
    Ok(None)
}

/// A consistent read view.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub(crate) seq: u64,
    /// The active memtable and the frozen ones, newest first.
    pub(crate) mems: Vec<Arc<Memtable>>,
    pub(crate) files: Arc<Files>,
    /// Tables' TTLs in milliseconds.
    pub(crate) ttls: Arc<HashMap<u32, u64>>,
    /// The time the snapshot was taken, for TTLs.
    pub(crate) now_ms: u64,
}

impl Snapshot {
    /// Cells of `table` written before this time are expired.
    fn expired_before(&self, table: &Table) -> Option<u64> {
        self.ttls
            .get(&table.id)
            .map(|ttl| self.now_ms.saturating_sub(*ttl))
    }

    /// Reads one cell.
    pub fn get(&self, table: &Table, row: &[u8], column: &[u8]) -> Result<Option<Bytes>> {
        read_cell(
            self.seq,
            &self.mems,
            &self.files,
            self.expired_before(table),
            table.id,
            row,
            column,
        )
    }

    /// Reads one row.
    pub fn get_row(&self, table: &Table, row: &[u8]) -> Result<Option<Row>> {
        self.get_row_with(table, row, false)
    }

    /// [`Snapshot::get_row`], leaving the block cache as it is if `skip_cache_fill` (see
    /// [`ScanOptions::skip_cache_fill`]).
    pub fn get_row_with(
        &self,
        table: &Table,
        row: &[u8],
        skip_cache_fill: bool,
    ) -> Result<Option<Row>> {
        let mut stop = row.to_vec();
        stop.push(0);
        let opts = ScanOptions {
            start: Some(row.to_vec()),
            stop: Some(stop),
            limit: Some(1),
            skip_cache_fill,
            ..ScanOptions::default()
        };
        self.scan(table, &opts)?.next().transpose()
    }

    /// Reads the rows `rows` of `table`, as [`Snapshot::get_row_with`] reads each one, and
    /// hands each row found to `found` with its index in `rows`, in order.
    ///
    /// When `rows` ascend, a row that no memtable holds and that one file alone may hold (by
    /// the files' row ranges and row filters) is read through a cursor kept open in that file
    /// from the row before: the file's index is searched only from the cursor's block on, and
    /// a row in the same block as the one before reuses it. A series' hours in a metric's salt
    /// bucket lie a few KiB apart, so a long read of one series finds several rows per block.
    /// Any other row is read by [`Snapshot::get_row_with`].
    pub fn get_rows_with(
        &self,
        table: &Table,
        rows: &[impl AsRef<[u8]>],
        skip_cache_fill: bool,
        mut found: impl FnMut(usize, Row),
    ) -> Result<()> {
        let ascending = rows.windows(2).all(|w| w[0].as_ref() < w[1].as_ref());
        let levels = self.files.tables.get(&table.id).filter(|_| ascending);
        let expired = self.expired_before(table);
        // One cursor per file read so far (few: a batch usually stays in one file).
        let mut cursors: Vec<(Arc<SstReader>, FileRows)> = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let row = row.as_ref();
            let file = match levels {
                Some(levels) if !self.mems.iter().any(|m| m.has_row(table.id, row)) => {
                    single_file_for(levels, row)?
                }
                _ => Lone::Several,
            };
            let file = match file {
                Lone::None => continue,
                Lone::One(file) => file,
                Lone::Several => {
                    if let Some(r) = self.get_row_with(table, row, skip_cache_fill)? {
                        found(i, r);
                    }
                    continue;
                }
            };
            let mut stop = row.to_vec();
            stop.push(0);
            let range = RowRange {
                start: Some(Bytes::copy_from_slice(row)),
                end: Some(Bytes::from(stop)),
            };
            // The file's cursor moved on to this row, or a new one.
            let at = cursors.iter().position(|(f, _)| Arc::ptr_eq(f, file));
            let reused = match at {
                Some(at) => cursors[at].1.retarget(range.clone())?,
                None => false,
            };
            if !reused {
                let opts = ScanOptions {
                    skip_cache_fill,
                    ..ScanOptions::default()
                };
                let fresh = FileRows::new(vec![file.clone()], range, self.seq, expired, opts);
                match at {
                    Some(at) => cursors[at].1 = fresh,
                    None => cursors.push((file.clone(), fresh)),
                }
            }
            let at = at.unwrap_or(cursors.len().saturating_sub(1));
            let rows = cursors.get_mut(at).map(|c| &mut c.1);
            if let Some(r) = rows.and_then(|r| r.next()).transpose()? {
                found(i, r);
            }
        }
        Ok(())
    }

    /// Scans rows of `table`.
    pub fn scan(&self, table: &Table, opts: &ScanOptions) -> Result<RowIter> {
        let range = RowRange {
            start: opts.start.as_deref().map(Bytes::copy_from_slice),
            end: opts.stop.as_deref().map(Bytes::copy_from_slice),
        };
        let mut sources: Vec<Source> = Vec::new();
        // Runs of files read one after the other: each level-0 file alone, and the files of a
        // deeper level (disjoint row ranges, sorted) together.
        let mut runs: Vec<Vec<Arc<SstReader>>> = Vec::new();
        let empty = matches!((&range.start, &range.end), (Some(s), Some(e)) if s >= e);
        if !empty {
            for m in &self.mems {
                let Some(scan) = MemScan::new(m.clone(), table.id, &range) else {
                    continue;
                };
                if opts.reverse {
                    let mut entries: Vec<Entry> = scan.collect();
                    entries.reverse();
                    sources.push(Box::new(entries.into_iter().map(Ok)));
                } else {
                    sources.push(Box::new(scan.map(Ok)));
                }
            }
            if let Some(levels) = self.files.tables.get(&table.id) {
                for (i, level) in levels.iter().enumerate() {
                    let files: Vec<Arc<SstReader>> = level
                        .iter()
                        .filter(|r| r.overlaps(&range))
                        .cloned()
                        .collect();
                    let disjoint = files
                        .windows(2)
                        .all(|w| w[0].properties().last_row < w[1].properties().first_row);
                    if i == 0 || !disjoint {
                        runs.extend(files.into_iter().map(|f| vec![f]));
                    } else if !files.is_empty() {
                        runs.push(files);
                    }
                }
            }
        }
        let expired = self.expired_before(table);
        if !opts.reverse && sources.is_empty() && runs.len() == 1 {
            // One run of files and nothing in memory: rows are built from the blocks in place.
            let files = runs.pop().unwrap_or_default();
            let rows = FileRows::new(files, range, self.seq, expired, opts.clone());
            let inner: Box<dyn Iterator<Item = Result<Row>> + Send> = match opts.limit {
                Some(l) => Box::new(rows.take(l)),
                None => Box::new(rows),
            };
            return Ok(RowIter { inner });
        }
        for files in runs {
            let (range, reverse, fill) = (range.clone(), opts.reverse, !opts.skip_cache_fill);
            let ordered: Box<dyn Iterator<Item = Arc<SstReader>> + Send> = if reverse {
                Box::new(files.into_iter().rev())
            } else {
                Box::new(files.into_iter())
            };
            sources.push(Box::new(
                ordered.flat_map(move |r| r.iter_filling(range.clone(), reverse, fill)),
            ));
        }
        let limit = opts.limit;
        let opts = opts.clone();
        if !opts.reverse {
            // Forward scans resolve each row as its entries stream in.
            let rows = RowStream::new(sources, self.seq, expired, opts);
            let inner: Box<dyn Iterator<Item = Result<Row>> + Send> = match limit {
                Some(l) => Box::new(rows.take(l)),
                None => Box::new(rows),
            };
            return Ok(RowIter { inner });
        }
        let rows = Rows::new(sources, opts.reverse, self.seq).filter_map(move |r| {
            let (key, cells) = match r {
                Ok(r) => r,
                Err(e) => return Some(Err(e)),
            };
            if !opts.contains(&key) || opts.row_filter.as_ref().is_some_and(|f| !f(&key)) {
                return None;
            }
            let cells: Vec<Cell> = cells
                .into_iter()
                .filter(|c| {
                    expired.is_none_or(|t| c.write_ms >= t)
                        && opts
                            .columns
                            .as_ref()
                            .is_none_or(|cs| cs.iter().any(|x| x[..] == c.key.column[..]))
                })
                .map(|c| Cell {
                    column: c.key.column,
                    value: if opts.keys_only {
                        Bytes::new()
                    } else {
                        c.value
                    },
                })
                .collect();
            (!cells.is_empty()).then_some(Ok(Row { key, cells }))
        });
        let inner: Box<dyn Iterator<Item = Result<Row>> + Send> = match limit {
            Some(l) => Box::new(rows.take(l)),
            None => Box::new(rows),
        };
        Ok(RowIter { inner })
    }
}

/// Which files of a table may hold a row, for a batched get.
enum Lone<'a> {
    /// None: the row is not stored.
    None,
    /// Exactly this file.
    One(&'a Arc<SstReader>),
    /// More than one.
    Several,
}

/// The one file of `levels` that may hold `row`, by row range and row filter.
fn single_file_for<'a>(levels: &'a [Vec<Arc<SstReader>>], row: &[u8]) -> Result<Lone<'a>> {
    let mut lone = Lone::None;
    for file in levels.iter().flatten() {
        if file.may_contain_row(row)? {
            if matches!(lone, Lone::One(_)) {
                return Ok(Lone::Several);
            }
            lone = Lone::One(file);
        }
    }
    Ok(lone)
}
