//! Writes an SST file from entries in key order.

use std::sync::Arc;

use super::filter;
use super::footer::{BlockHandle, Footer};
use super::index::{self, IndexEntry};
use super::properties::Properties;
use crate::block::BlockBuilder;
use crate::block::trailer;
use crate::bloom::{BloomBuilder, cell_key};
use crate::error::{Error, Result};
use crate::expiry::{RowExpirer, RowTimes};
use crate::fs::WritableFile;
use crate::key::{Entry, EntryKind, InternalKey};
use crate::options::{Compression, FilterMode, TableOptions};

/// What a finished SST holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SstInfo {
    /// The file's size in bytes.
    pub(crate) file_bytes: u64,
    /// The file's properties block.
    pub(crate) properties: Properties,
    /// When its first row expires, by the table's hook (`u64::MAX`: never).
    pub(crate) next_expiry_ms: u64,
}

/// Writes one SST file. Feed it entries in strictly ascending [`InternalKey`] order, then call
/// [`SstBuilder::finish`]. Dropping a builder without finishing leaves a partial file that the
/// caller must delete.
#[derive(Debug)]
pub(crate) struct SstBuilder {
    file: Box<dyn WritableFile>,
    name: Arc<str>,
    block_bytes: usize,
    compression: Compression,
    filter_mode: FilterMode,
    block: BlockBuilder,
    last_key: Option<InternalKey>,
    pub(super) index: Vec<IndexEntry>,
    rows: BloomBuilder,
    cells: BloomBuilder,
    pub(super) props: Properties,
    expiry: Option<RowExpirer>,
    times: RowTimes,
    /// Bytes written so far.
    offset: u64,
    scratch: Vec<u8>,
}

impl SstBuilder {
    /// A builder writing to `file` (named `name` in errors) with a table's options.
    pub(crate) fn new(
        file: Box<dyn WritableFile>,
        name: &str,
        opts: &TableOptions,
        creation_ms: u64,
    ) -> SstBuilder {
        SstBuilder {
            file,
            name: Arc::from(name),
            block_bytes: opts.block_bytes.max(1),
            compression: opts.compression,
            filter_mode: opts.filter,
            block: BlockBuilder::new(),
            last_key: None,
            index: Vec::new(),
            rows: BloomBuilder::new(),
            cells: BloomBuilder::new(),
            props: Properties::empty(creation_ms),
            expiry: opts.expiry.clone(),
            times: RowTimes::empty(),
            offset: 0,
            scratch: Vec::new(),
        }
    }

    /// Appends an entry. Fails with [`Error::InvalidArgument`] if it does not sort after the
    /// previous one, or if a `DeleteRow` entry has a column.
    pub(crate) fn add(&mut self, entry: &Entry) -> Result<()> {
        let key = &entry.key;
        if self.last_key.as_ref().is_some_and(|last| last >= key) {
            return Err(Error::InvalidArgument(format!(
                "SST {}: entries out of order: {key:?} after {:?}",
                self.name, self.last_key
            )));
        }
        if key.kind == EntryKind::DeleteRow && !key.column.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "SST {}: row tombstone with a column: {key:?}",
                self.name
            )));
        }
        self.rows.add(&key.row);
        if self.filter_mode == FilterMode::RowsAndColumns {
            match key.kind {
                EntryKind::DeleteRow => self.cells.add(&filter::row_marker_key(&key.row)),
                _ => self.cells.add(&cell_key(&key.row, &key.column)),
            }
        }
        if self.props.entry_count == 0 || self.props.last_row != key.row {
            self.times.observe(self.expiry.as_ref(), &key.row);
        }
        self.props.observe(entry);
        self.block.add(entry);
        self.last_key = Some(key.clone());
        if self.block.estimated_len() >= self.block_bytes {
            self.flush_block()?;
        }
        Ok(())
    }

    /// Bytes written so far plus the open block (for cutting files at a target size).
    pub(crate) fn estimated_len(&self) -> u64 {
        self.offset + self.block.estimated_len() as u64
    }

    fn flush_block(&mut self) -> Result<()> {
        if self.block.is_empty() {
            return Ok(());
        }
        let raw = self.block.finish();
        let handle = self.write_block(&raw, self.compression)?;
        self.block.recycle(raw);
        // The index lives as long as the builder, and a compaction's keys come from its
        // inputs' blocks: a shared key would keep one input block per output block alive, a
        // whole file's worth of them by the end.
        let last_key = self
            .last_key
            .as_ref()
            .map(InternalKey::detached)
            .ok_or_else(|| {
                Error::InvalidArgument(format!("SST {}: flushing a block without a key", self.name))
            })?;
        self.index.push(IndexEntry { last_key, handle });
        Ok(())
    }

    fn write_block(&mut self, raw: &[u8], compression: Compression) -> Result<BlockHandle> {
        self.scratch.clear();
        let len = trailer::encode(raw, compression, &mut self.scratch)?;
        self.file.append(&self.scratch)?;
        let handle = BlockHandle {
            offset: self.offset,
            len: len as u64,
        };
        self.offset += self.scratch.len() as u64;
        Ok(handle)
    }

    /// Writes the last data block, index, filter, properties and footer, and syncs the file.
    pub(crate) fn finish(mut self) -> Result<SstInfo> {
        self.flush_block()?;
        self.props.data_block_count = self.index.len() as u64;
        self.props.min_row_ms = self.times.min_row_ms;
        self.props.max_row_ms = self.times.max_row_ms;
        let index = self.write_block(&index::encode(&self.index), Compression::None)?;
        let filter_raw = filter::encode(self.filter_mode, &mut self.rows, &mut self.cells);
        let filter = self.write_block(&filter_raw, Compression::None)?;
        let props = self.write_block(&self.props.encode(), Compression::None)?;
        let footer = Footer {
            index,
            filter,
            props,
            version: super::footer::FORMAT_VERSION,
        }
        .encode();
        self.file.append(&footer)?;
        self.offset += footer.len() as u64;
        self.file.finish()?;
        Ok(SstInfo {
            file_bytes: self.offset,
            properties: self.props,
            next_expiry_ms: self.times.next_expiry_ms,
        })
    }
}
