//! The properties block: facts about an SST that planners read without touching data blocks.
//!
//! ## Format
//!
//! The (uncompressed) payload of the properties block:
//!
//! ```text
//! entry_count u64 BE | tombstone_count u64 BE | row_tombstone_count u64 BE |
//! min_seq u64 BE | max_seq u64 BE | creation_ms u64 BE | data_block_count u64 BE |
//! min_write_ms u64 BE | max_write_ms u64 BE |
//! first_row_len varint | first_row | last_row_len varint | last_row |
//! min_row_ms u64 BE | max_row_ms u64 BE          (since format version 3)
//! ```
//!
//! 1. For an empty table the counts are 0, `min_seq = min_write_ms = u64::MAX`,
//!    `max_seq = max_write_ms = 0` and both rows are empty.
//! 4. `min_write_ms`/`max_write_ms` bound the entries' write times, so TTL compaction can drop
//!    or skip a whole file without reading it.
//! 2. `tombstone_count` counts both kinds of tombstone; `row_tombstone_count` only
//!    `DeleteRow` markers.
//! 3. Nothing may follow `last_row` in versions 1 and 2, and nothing may follow `max_row_ms` in
//!    version 3.
//! 5. `min_row_ms`/`max_row_ms` bound the data times of the file's rows as the table's
//!    [`crate::RowExpiry`] hook reports them (`crate::expiry`), so compaction can drop a
//!    whole file of expired data without reading it. `max_row_ms = u64::MAX` when some row has
//!    no data time or the table has no hook; `min_row_ms = u64::MAX` when no row has one.
//!    Files of versions 1 and 2 read as `min_row_ms = 0`, `max_row_ms = u64::MAX` (unknown).

use bytes::Bytes;

use crate::coding::{be_u64, get_varint, put_varint, take, usize_len};
use crate::key::{Entry, EntryKind};

/// The first format version whose properties carry row times.
pub(crate) const ROW_TIMES_VERSION: u32 = 3;

/// Facts about one SST file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Properties {
    /// Number of entries (all kinds).
    pub(crate) entry_count: u64,
    /// Number of `DeleteCell` and `DeleteRow` entries.
    pub(crate) tombstone_count: u64,
    /// Number of `DeleteRow` entries.
    pub(crate) row_tombstone_count: u64,
    /// Smallest sequence number (`u64::MAX` if empty).
    pub(crate) min_seq: u64,
    /// Largest sequence number (0 if empty).
    pub(crate) max_seq: u64,
    /// When the file was written, in ms since the Unix epoch.
    pub(crate) creation_ms: u64,
    /// Number of data blocks.
    pub(crate) data_block_count: u64,
    /// Oldest write time in ms (`u64::MAX` if empty).
    pub(crate) min_write_ms: u64,
    /// Newest write time in ms (0 if empty).
    pub(crate) max_write_ms: u64,
    /// The first rowkey (empty if the table is empty).
    pub(crate) first_row: Bytes,
    /// The last rowkey (empty if the table is empty).
    pub(crate) last_row: Bytes,
    /// Oldest data time of a row, from the table's expiry hook (`u64::MAX`: none).
    pub(crate) min_row_ms: u64,
    /// Newest data time of a row (`u64::MAX`: unbounded or unknown).
    pub(crate) max_row_ms: u64,
}

impl Properties {
    /// The properties of an empty table created at `creation_ms`.
    pub(crate) fn empty(creation_ms: u64) -> Properties {
        Properties {
            entry_count: 0,
            tombstone_count: 0,
            row_tombstone_count: 0,
            min_seq: u64::MAX,
            max_seq: 0,
            creation_ms,
            data_block_count: 0,
            min_write_ms: u64::MAX,
            max_write_ms: 0,
            first_row: Bytes::new(),
            last_row: Bytes::new(),
            min_row_ms: u64::MAX,
            max_row_ms: 0,
        }
    }

    /// Accounts for one more entry (entries arrive in key order).
    pub(crate) fn observe(&mut self, entry: &Entry) {
        let key = &entry.key;
        if self.entry_count == 0 {
            // Kept for the builder's life: not the block buffer it may share.
            self.first_row = Bytes::copy_from_slice(&key.row);
        }
        if self.last_row != key.row {
            self.last_row = key.row.clone();
        }
        self.entry_count += 1;
        if key.kind.is_tombstone() {
            self.tombstone_count += 1;
        }
        if key.kind == EntryKind::DeleteRow {
            self.row_tombstone_count += 1;
        }
        self.min_seq = self.min_seq.min(key.seq);
        self.max_seq = self.max_seq.max(key.seq);
        self.min_write_ms = self.min_write_ms.min(entry.write_ms);
        self.max_write_ms = self.max_write_ms.max(entry.write_ms);
    }

    /// Encodes the payload.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(80 + self.first_row.len() + self.last_row.len());
        for v in [
            self.entry_count,
            self.tombstone_count,
            self.row_tombstone_count,
            self.min_seq,
            self.max_seq,
            self.creation_ms,
            self.data_block_count,
            self.min_write_ms,
            self.max_write_ms,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        put_varint(&mut out, self.first_row.len() as u64);
        out.extend_from_slice(&self.first_row);
        put_varint(&mut out, self.last_row.len() as u64);
        out.extend_from_slice(&self.last_row);
        out.extend_from_slice(&self.min_row_ms.to_be_bytes());
        out.extend_from_slice(&self.max_row_ms.to_be_bytes());
        out
    }

    /// Decodes the payload of a file of format `version`; the error says what was wrong.
    pub(crate) fn decode(mut buf: &[u8], version: u32) -> Result<Properties, &'static str> {
        let mut fixed = [0u64; 9];
        for v in &mut fixed {
            *v = be_u64(take(&mut buf, 8)?);
        }
        let len = usize_len(get_varint(&mut buf)?)?;
        let first_row = Bytes::copy_from_slice(take(&mut buf, len)?);
        let len = usize_len(get_varint(&mut buf)?)?;
        let last_row = Bytes::copy_from_slice(take(&mut buf, len)?);
        let (min_row_ms, max_row_ms) = if version >= ROW_TIMES_VERSION {
            (be_u64(take(&mut buf, 8)?), be_u64(take(&mut buf, 8)?))
        } else {
            (0, u64::MAX)
        };
        if !buf.is_empty() {
            return Err("trailing bytes after the properties");
        }
        let [
            entry_count,
            tombstone_count,
            row_tombstone_count,
            min_seq,
            max_seq,
            creation_ms,
            data_block_count,
            min_write_ms,
            max_write_ms,
        ] = fixed;
        if tombstone_count > entry_count || row_tombstone_count > tombstone_count {
            return Err("tombstone counts exceed the entry count");
        }
        Ok(Properties {
            entry_count,
            tombstone_count,
            row_tombstone_count,
            min_seq,
            max_seq,
            creation_ms,
            data_block_count,
            min_write_ms,
            max_write_ms,
            first_row,
            last_row,
            min_row_ms,
            max_row_ms,
        })
    }
}
