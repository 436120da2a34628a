//! The index block: one entry per data block, in file order.
//!
//! ## Format
//!
//! The (uncompressed) payload of the index block:
//!
//! ```text
//! count u32 BE | count × ( last_key | offset varint | len varint )
//! ```
//!
//! `last_key` is the block's last internal key, encoded by `InternalKey::encode_to`
//! (`row_len varint | row | column_len varint | column | seq u64 BE | kind u8`).
//!
//! 1. `last_key`s are strictly ascending.
//! 2. Blocks are contiguous and in order: block 0 starts at offset 0 and each block starts where
//!    the previous one's trailer ends; the last one's trailer ends where the index block starts.
//! 3. Nothing follows the last entry.

use super::footer::BlockHandle;
use crate::coding::{get_varint, put_varint, take};
use crate::key::InternalKey;

/// One index entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexEntry {
    /// The last key of the block.
    pub(crate) last_key: InternalKey,
    /// Where the block is.
    pub(crate) handle: BlockHandle,
}

/// Encodes the index payload.
pub(crate) fn encode(entries: &[IndexEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    for e in entries {
        e.last_key.encode_to(&mut out);
        put_varint(&mut out, e.handle.offset);
        put_varint(&mut out, e.handle.len);
    }
    out
}

/// Decodes and checks the index payload; `data_end` is where the data region ends.
pub(crate) fn decode(mut buf: &[u8], data_end: u64) -> Result<Vec<IndexEntry>, &'static str> {
    let count = take(&mut buf, 4)?;
    let count = u32::from_be_bytes([count[0], count[1], count[2], count[3]]) as usize;
    // Each entry takes at least 13 bytes, which bounds the allocation.
    if count > buf.len() / 13 {
        return Err("entry count larger than the index block");
    }
    let mut out: Vec<IndexEntry> = Vec::with_capacity(count);
    let mut next_offset = 0u64;
    for _ in 0..count {
        let last_key = InternalKey::decode_from(&mut buf)?;
        let handle = BlockHandle {
            offset: get_varint(&mut buf)?,
            len: get_varint(&mut buf)?,
        };
        if handle.offset != next_offset {
            return Err("data blocks are not contiguous");
        }
        next_offset = handle.end().ok_or("block handle overflows")?;
        if next_offset > data_end || handle.len == 0 {
            return Err("block handle out of range");
        }
        if out.last().is_some_and(|p| p.last_key >= last_key) {
            return Err("index keys out of order");
        }
        out.push(IndexEntry { last_key, handle });
    }
    if !buf.is_empty() {
        return Err("trailing bytes after the index entries");
    }
    if next_offset != data_end {
        return Err("data blocks do not end where the index block starts");
    }
    Ok(out)
}
