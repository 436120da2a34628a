//! Opens an SST file and answers point lookups.

use std::sync::Arc;

use bytes::Bytes;

use super::filter::{self, Filters};
use super::footer::{BlockHandle, FOOTER_LEN, Footer};
use super::index::{self, IndexEntry};
use super::iter::RowRange;
use super::properties::Properties;
use crate::block::{Block, KeyParts, RawEntry, trailer};
use crate::bloom::cell_key;
use crate::cache::{BlockCache, BlockKey};
use crate::error::{Error, Result};
use crate::fs::RandomAccessFile;
#[cfg(any(test, feature = "testing"))]
use crate::key::Entry;
use crate::key::{EntryKind, Found, InternalKey};

/// Bytes charged to the cache per index entry on top of the encoded index.
const INDEX_ENTRY_OVERHEAD: usize = 48;

/// An open SST file. Open verifies the footer and decodes the index, filter and properties
/// blocks. The properties stay in the reader; the decoded index and filters, like the data
/// blocks, live in the shared block cache and are re-read if evicted. Without a cache they are
/// pinned in the reader.
#[derive(Debug)]
pub(crate) struct SstReader {
    file: Arc<dyn RandomAccessFile>,
    name: Arc<str>,
    file_id: u64,
    cache: Option<Arc<BlockCache>>,
    footer: Footer,
    /// The index and filters when there is no cache.
    pinned: Option<(Arc<Vec<IndexEntry>>, Arc<Filters>)>,
    props: Properties,
    /// When the file's first row expires under the rules in force, if the file was written
    /// since the process started (`crate::expiry`); `None` when it was opened from disk.
    next_expiry_ms: Option<u64>,
}

impl SstReader {
    /// Opens `file`, checking its footer, index, filter and properties blocks. `file_id` keys
    /// the file's blocks in `cache` and must be unique among open files.
    pub(crate) fn open(
        file: Arc<dyn RandomAccessFile>,
        file_id: u64,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<SstReader> {
        let name: Arc<str> = Arc::from(file.name());
        let len = file.len();
        if len < FOOTER_LEN as u64 {
            return Err(Error::corruption(
                &*name,
                0,
                format!("file of {len} bytes is shorter than the {FOOTER_LEN}-byte footer"),
            ));
        }
        let footer_at = len - FOOTER_LEN as u64;
        let footer = Footer::decode(&file.read_at(footer_at, FOOTER_LEN)?, &name, len)?;
        let props_raw = read_meta(&*file, footer.props, "properties")?;
        let props = Properties::decode(&props_raw, footer.version)
            .map_err(|d| bad(&name, footer.props, "properties", d))?;
        let mut reader = SstReader {
            file,
            name,
            file_id,
            cache,
            footer,
            pinned: None,
            props,
            next_expiry_ms: None,
        };
        let (index, index_bytes) = reader.load_index()?;
        let (filters, filter_bytes) = reader.load_filters()?;
        if reader.props.data_block_count != index.len() as u64 {
            return Err(bad(
                &reader.name,
                footer.props,
                "properties",
                "data block count disagrees with the index",
            ));
        }
        let (index, filters) = (Arc::new(index), Arc::new(filters));
        match &reader.cache {
            Some(cache) => {
                cache.insert(reader.cache_key(footer.index), index, index_bytes);
                cache.insert(reader.cache_key(footer.filter), filters, filter_bytes);
            }
            None => reader.pinned = Some((index, filters)),
        }
        Ok(reader)
    }

    /// The file's name.
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "used by tests and leveled compaction")
    )]
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The id that keys the file's blocks in the cache.
    pub(crate) fn file_id(&self) -> u64 {
        self.file_id
    }

    /// The file's size in bytes.
    pub(crate) fn file_bytes(&self) -> u64 {
        self.file.len()
    }

    /// The file's properties.
    pub(crate) fn properties(&self) -> &Properties {
        &self.props
    }

    /// When the file's first row expires, if known (see [`SstReader::set_next_expiry`]).
    pub(crate) fn next_expiry_ms(&self) -> Option<u64> {
        self.next_expiry_ms
    }

    /// Records when the first row expires, as the builder found it.
    pub(crate) fn set_next_expiry(&mut self, at_ms: u64) {
        self.next_expiry_ms = Some(at_ms);
    }

    /// Where the index, filter and properties blocks are (for `check.rs`'s reports).
    pub(super) fn footer(&self) -> Footer {
        self.footer
    }

    /// False if no row of `range` lies in the file's row range (or the file is empty).
    pub(crate) fn overlaps(&self, range: &RowRange) -> bool {
        self.props.entry_count != 0
            && range
                .start
                .as_ref()
                .is_none_or(|s| s <= &self.props.last_row)
            && range.end.as_ref().is_none_or(|e| e > &self.props.first_row)
    }

    /// False if `row` lies outside the file's row range (or the file is empty).
    fn in_row_range(&self, row: &[u8]) -> bool {
        self.props.entry_count != 0
            && row >= &self.props.first_row[..]
            && row <= &self.props.last_row[..]
    }

    /// False if the file certainly holds no entry for `row`. Fails only if the filter block
    /// had been evicted from the cache and is damaged when re-read.
    pub(crate) fn may_contain_row(&self, row: &[u8]) -> Result<bool> {
        if !self.in_row_range(row) {
            return Ok(false);
        }
        let filters = self.filters()?;
        Ok(filters.rows.as_ref().is_none_or(|f| f.may_contain(row)))
    }

    /// False if the file certainly holds neither the cell nor a row tombstone of `row`.
    fn may_contain_cell(&self, row: &[u8], column: &[u8]) -> Result<bool> {
        if !self.in_row_range(row) {
            return Ok(false);
        }
        let filters = self.filters()?;
        if filters.rows.as_ref().is_some_and(|f| !f.may_contain(row)) {
            return Ok(false);
        }
        Ok(filters.cells.as_ref().is_none_or(|f| {
            f.may_contain(&cell_key(row, column)) || f.may_contain(&filter::row_marker_key(row))
        }))
    }

    /// The newest entry that decides `(row, column)` at `snapshot_seq`: the newest cell entry
    /// (`Put` or `DeleteCell`) with `seq <= snapshot_seq`, or the row's newest `DeleteRow`
    /// marker with `seq <= snapshot_seq` if that is newer. A marker and a cell entry with the
    /// same seq (one batch) resolve to the cell entry. `None` means the file says nothing about
    /// the cell, so older files decide.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn get(
        &self,
        row: &[u8],
        column: &[u8],
        snapshot_seq: u64,
    ) -> Result<Option<Entry>> {
        Ok(self
            .lookup(row, column, snapshot_seq)?
            .map(|f| f.into_entry(row, column)))
    }

    /// [`SstReader::get`] without building the entry's key: keys are compared in place in
    /// the cached index and block, and the value is a slice of the cached block.
    pub(crate) fn lookup(
        &self,
        row: &[u8],
        column: &[u8],
        snapshot_seq: u64,
    ) -> Result<Option<Found>> {
        if !self.may_contain_cell(row, column)? {
            return Ok(None);
        }
        let index = self.index()?;
        // Markers sort first within a row, newest first: the first entry at or after the
        // marker key at the snapshot is the newest visible marker, if the row has one.
        let marker = if self.props.row_tombstone_count > 0 {
            self.find(
                &index,
                (row, &[], snapshot_seq, EntryKind::DeleteRow),
                |raw, key| raw.kind == EntryKind::DeleteRow && &key[..raw.row_len] == row,
            )?
        } else {
            None
        };
        let cell = self.find(
            &index,
            (row, column, snapshot_seq, EntryKind::Put),
            |raw, key| {
                raw.kind != EntryKind::DeleteRow
                    && &key[..raw.row_len] == row
                    && &key[raw.row_len..] == column
            },
        )?;
        Ok(Found::newer(marker, cell))
    }

    /// The first entry `>= target`, if `accept` takes it.
    fn find(
        &self,
        index: &[IndexEntry],
        target: KeyParts<'_>,
        accept: impl Fn(&RawEntry, &[u8]) -> bool,
    ) -> Result<Option<Found>> {
        let i =
            index.partition_point(|e| InternalKey::cmp_parts(e.last_key.parts(), target).is_lt());
        let Some(entry) = index.get(i) else {
            return Ok(None);
        };
        let mut it = self.block(entry.handle, true)?.iter();
        it.seek_parts(target)?;
        Ok(it
            .peek_raw()
            .filter(|(raw, key)| accept(raw, key))
            .map(|(raw, _)| Found {
                kind: raw.kind,
                seq: raw.seq,
                write_ms: raw.write_ms,
                value: it.block().value(&raw),
            }))
    }

    fn cache_key(&self, h: BlockHandle) -> BlockKey {
        BlockKey {
            file_id: self.file_id,
            offset: h.offset,
            ns: 0,
        }
    }

    /// Reads and decodes the index block; also returns its cache charge.
    fn load_index(&self) -> Result<(Vec<IndexEntry>, usize)> {
        let h = self.footer.index;
        let raw = read_meta(&*self.file, h, "index")?;
        let index = index::decode(&raw, h.offset).map_err(|d| bad(&self.name, h, "index", d))?;
        let charge = raw.len() + INDEX_ENTRY_OVERHEAD * index.len();
        Ok((index, charge))
    }

    /// Reads and decodes the filter block; also returns its cache charge.
    fn load_filters(&self) -> Result<(Filters, usize)> {
        let h = self.footer.filter;
        let raw = read_meta(&*self.file, h, "filter")?;
        let charge = raw.len();
        let filters = filter::decode(raw).map_err(|d| bad(&self.name, h, "filter", d))?;
        Ok((filters, charge))
    }

    /// The value of type `T` cached for the block at `h`, loaded with `load` on a miss and
    /// added to the cache if `fill`.
    fn cached<T: Send + Sync + 'static>(
        &self,
        cache: &BlockCache,
        h: BlockHandle,
        fill: bool,
        load: impl FnOnce() -> Result<(T, usize)>,
    ) -> Result<Arc<T>> {
        let key = self.cache_key(h);
        if let Some(hit) = cache.get(&key).and_then(|v| v.downcast::<T>().ok()) {
            return Ok(hit);
        }
        let (value, charge) = load()?;
        let value = Arc::new(value);
        if fill {
            cache.insert(key, value.clone(), charge);
        }
        Ok(value)
    }

    /// The decoded index: one entry per data block, in file order.
    pub(super) fn index(&self) -> Result<Arc<Vec<IndexEntry>>> {
        match (&self.pinned, &self.cache) {
            (Some((index, _)), _) => Ok(index.clone()),
            (None, Some(cache)) => {
                self.cached(cache, self.footer.index, true, || self.load_index())
            }
            (None, None) => Ok(Arc::new(self.load_index()?.0)),
        }
    }

    fn filters(&self) -> Result<Arc<Filters>> {
        match (&self.pinned, &self.cache) {
            (Some((_, filters)), _) => Ok(filters.clone()),
            (None, Some(cache)) => {
                self.cached(cache, self.footer.filter, true, || self.load_filters())
            }
            (None, None) => Ok(Arc::new(self.load_filters()?.0)),
        }
    }

    /// Reads, verifies and decodes the data block at `handle`, through the cache; a block read
    /// from the file is added to the cache only if `fill_cache`.
    pub(super) fn block(&self, handle: BlockHandle, fill_cache: bool) -> Result<Block> {
        let load = || -> Result<(Block, usize)> {
            let stored = read_stored(&*self.file, handle)?;
            let raw = trailer::decode(&stored, &self.name, handle.offset, "data")?;
            let charge = raw.len();
            Ok((Block::new(raw, self.name.clone(), handle.offset)?, charge))
        };
        match &self.cache {
            Some(cache) => Ok(Block::clone(
                &*self.cached(cache, handle, fill_cache, load)?,
            )),
            None => Ok(load()?.0),
        }
    }
}

fn bad(file: &str, h: BlockHandle, what: &str, detail: &str) -> Error {
    Error::corruption(file, h.offset, format!("{what} block: {detail}"))
}

/// Reads and verifies a metadata block (never compressed, but decoded the same way).
fn read_meta(file: &dyn RandomAccessFile, h: BlockHandle, what: &str) -> Result<Bytes> {
    let stored = read_stored(file, h)?;
    trailer::decode(&stored, file.name(), h.offset, what)
}

/// Reads a block's payload plus trailer.
fn read_stored(file: &dyn RandomAccessFile, h: BlockHandle) -> Result<Bytes> {
    let len = usize::try_from(h.len)
        .ok()
        .and_then(|l| l.checked_add(trailer::TRAILER_LEN))
        .ok_or_else(|| {
            Error::corruption(file.name(), h.offset, "block length does not fit in memory")
        })?;
    file.read_at(h.offset, len)
}
