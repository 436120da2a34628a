//! Iterates the entries of an SST over a row range, forward or in reverse.

use std::sync::Arc;

use bytes::Bytes;

use super::index::IndexEntry;
use super::reader::SstReader;
use crate::block::{BlockIter, BlockRevIter, RawNext};
use crate::error::Result;
use crate::key::{Entry, InternalKey};

/// A range of rows: `start` inclusive, `end` exclusive; `None` is unbounded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RowRange {
    /// The first row in the range.
    pub(crate) start: Option<Bytes>,
    /// The first row past the range.
    pub(crate) end: Option<Bytes>,
}

impl RowRange {
    /// Every row.
    pub(crate) fn all() -> RowRange {
        RowRange::default()
    }

    /// Rows in `[start, end)`.
    #[cfg_attr(not(test), expect(dead_code, reason = "used by tests"))]
    pub(crate) fn new(start: &[u8], end: &[u8]) -> RowRange {
        RowRange {
            start: Some(Bytes::copy_from_slice(start)),
            end: Some(Bytes::copy_from_slice(end)),
        }
    }

    fn after_end(&self, row: &[u8]) -> bool {
        self.end.as_ref().is_some_and(|end| row >= &end[..])
    }

    fn before_start(&self, row: &[u8]) -> bool {
        self.start.as_ref().is_some_and(|start| row < &start[..])
    }
}

#[derive(Debug)]
enum Cursor {
    Fwd(Box<BlockIter>),
    Rev(BlockRevIter),
}

/// Every entry (all kinds and versions) of the rows in a [`RowRange`], in internal-key order or
/// its reverse. Visibility (snapshots, tombstones) is the caller's job. After an error the
/// iterator ends.
#[derive(Debug)]
pub(crate) struct SstIter {
    reader: Arc<SstReader>,
    /// The reader's index, fetched when the iteration starts.
    index: Arc<Vec<IndexEntry>>,
    range: RowRange,
    reverse: bool,
    /// The index of the block the cursor is in.
    block: usize,
    cursor: Option<Cursor>,
    done: bool,
    /// Whether blocks read on a cache miss are added to the cache.
    fill_cache: bool,
}

impl SstReader {
    /// An iterator over `range`, descending if `reverse`.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn iter(self: &Arc<Self>, range: RowRange, reverse: bool) -> SstIter {
        self.iter_filling(range, reverse, true)
    }

    /// As [`SstReader::iter`]; blocks read from the file go into the cache only if
    /// `fill_cache`.
    pub(crate) fn iter_filling(
        self: &Arc<Self>,
        range: RowRange,
        reverse: bool,
        fill_cache: bool,
    ) -> SstIter {
        SstIter {
            reader: self.clone(),
            index: Arc::new(Vec::new()),
            range,
            reverse,
            block: 0,
            cursor: None,
            done: false,
            fill_cache,
        }
    }

    /// A forward iterator over the whole file that leaves the block cache as it is: for
    /// compaction, whose inputs are read once and then deleted, and would otherwise push the
    /// blocks that queries use out of the cache (and grow the process by the cache's size
    /// during a bulk load).
    pub(crate) fn compaction_iter(self: &Arc<Self>) -> SstIter {
        self.iter_filling(RowRange::all(), false, false)
    }
}

impl SstIter {
    /// Positions the cursor in the first block to read.
    fn start(&mut self) -> Result<()> {
        self.index = self.reader.index()?;
        let index = &self.index;
        if !self.reverse {
            let target = self.range.start.as_deref().map(InternalKey::seek_row);
            self.block = match &target {
                Some(t) => index.partition_point(|e| e.last_key < *t),
                None => 0,
            };
            let Some(entry) = index.get(self.block) else {
                self.done = true;
                return Ok(());
            };
            let mut it = self.reader.block(entry.handle, self.fill_cache)?.iter();
            if let Some(t) = &target {
                it.seek(t)?;
            }
            self.cursor = Some(Cursor::Fwd(Box::new(it)));
        } else {
            if index.is_empty() {
                self.done = true;
                return Ok(());
            }
            let target = self.range.end.as_deref().map(InternalKey::seek_row);
            self.block = match &target {
                Some(t) => index
                    .partition_point(|e| e.last_key < *t)
                    .min(index.len() - 1),
                None => index.len() - 1,
            };
            let mut it = self
                .reader
                .block(index[self.block].handle, self.fill_cache)?
                .rev_iter();
            if let Some(t) = &target {
                it.seek_before(t, false)?;
            }
            self.cursor = Some(Cursor::Rev(it));
        }
        Ok(())
    }

    /// Forward iterators only: moves on to `range`, whose start must not precede any entry
    /// this iterator has already returned (a batched get's next row). The current block is
    /// kept when the new start is not past its last key, and the index is searched only from
    /// the next block otherwise.
    pub(crate) fn reseek_forward(&mut self, range: RowRange) -> Result<()> {
        self.range = range;
        let target = self.range.start.as_deref().map(InternalKey::seek_row);
        let (Some(target), false, true) = (target, self.reverse, self.cursor.is_some()) else {
            // Not started, no start, or reverse (which batched gets never use): `start`
            // seeks afresh.
            self.cursor = None;
            self.done = false;
            return Ok(());
        };
        // Every entry before the current position is below the new start (see the doc), so
        // the first entry `>= target` is in the current block or a later one.
        let stay = self
            .index
            .get(self.block)
            .is_some_and(|e| e.last_key >= target);
        if !stay {
            let from = self.block + 1;
            let skip = self
                .index
                .get(from..)
                .map_or(0, |rest| rest.partition_point(|e| e.last_key < target));
            self.block = from + skip;
            let Some(entry) = self.index.get(self.block) else {
                self.done = true;
                self.cursor = None;
                return Ok(());
            };
            let it = self.reader.block(entry.handle, self.fill_cache)?.iter();
            self.cursor = Some(Cursor::Fwd(Box::new(it)));
        }
        self.done = false;
        if let Some(Cursor::Fwd(it)) = &mut self.cursor {
            it.seek(&target)?;
        }
        Ok(())
    }

    /// Forward iterators only: the next entry decoded in place, as [`BlockIter::next_raw`]
    /// returns it (the row flag is false at block boundaries). Unlike [`Iterator::next`] it
    /// does not check the end of the range: the caller does, once per row.
    pub(crate) fn next_raw(&mut self) -> Result<Option<RawNext<'_>>> {
        if self.done || self.reverse {
            return Ok(None);
        }
        if self.cursor.is_none() {
            self.start()?;
        }
        loop {
            match &self.cursor {
                Some(Cursor::Fwd(it)) if it.exhausted() => {
                    self.block += 1;
                    let Some(entry) = self.index.get(self.block) else {
                        self.done = true;
                        return Ok(None);
                    };
                    let it = self.reader.block(entry.handle, self.fill_cache)?.iter();
                    self.cursor = Some(Cursor::Fwd(Box::new(it)));
                }
                Some(Cursor::Fwd(_)) => break,
                _ => return Ok(None),
            }
        }
        match &mut self.cursor {
            Some(Cursor::Fwd(it)) => it.next_raw(),
            _ => Ok(None),
        }
    }

    fn advance(&mut self) -> Result<Option<Entry>> {
        if self.cursor.is_none() {
            self.start()?;
        }
        loop {
            let next = match &mut self.cursor {
                None => return Ok(None),
                Some(Cursor::Fwd(it)) => it.next_entry()?,
                Some(Cursor::Rev(it)) => it.prev_entry()?,
            };
            if let Some(e) = next {
                let out_of_range = if self.reverse {
                    self.range.before_start(&e.key.row)
                } else {
                    self.range.after_end(&e.key.row)
                };
                return Ok((!out_of_range).then_some(e));
            }
            // The block is exhausted: move to the neighbouring one.
            let index = &self.index;
            if self.reverse {
                if self.block == 0 {
                    return Ok(None);
                }
                self.block -= 1;
                let it = self
                    .reader
                    .block(index[self.block].handle, self.fill_cache)?
                    .rev_iter();
                self.cursor = Some(Cursor::Rev(it));
            } else {
                self.block += 1;
                let Some(entry) = index.get(self.block) else {
                    return Ok(None);
                };
                let it = self.reader.block(entry.handle, self.fill_cache)?.iter();
                self.cursor = Some(Cursor::Fwd(Box::new(it)));
            }
        }
    }
}

impl Iterator for SstIter {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.advance() {
            Ok(Some(e)) => Some(Ok(e)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
