//! Sorted string tables: immutable, sorted files of entries.
//!
//! ## Format
//!
//! ```text
//! +--------------+-----+----------------+-------------+--------------+------------------+--------------+
//! | data block 0 | ... | data block n-1 | index block | filter block | properties block | footer (64B) |
//! +--------------+-----+----------------+-------------+--------------+------------------+--------------+
//! ```
//!
//! Every block is stored as `payload | compression u8 | checksum u64 BE` (see
//! [`crate::block::trailer`]); the checksum (xxh3_64 of payload and compression byte) is checked
//! before a block is decompressed or decoded. Data blocks use the table's compression; the
//! index, filter and properties blocks are stored uncompressed.
//!
//! - Data blocks: [`crate::block`] (prefix-compressed entries, restart points every 16 entries).
//! - Index block: [`index`] (last key and handle of each data block).
//! - Filter block: [`filter`] (row bloom filter, optionally a rowkey+column filter).
//! - Properties block: [`properties`] (row range, counts, sequence range, creation time).
//! - Footer: [`footer`] (block handles, format version 1, magic `STSB`, xxh3 checksum).
//!
//! Invariants:
//!
//! 1. Entries are in strictly ascending internal-key order across the whole file
//!    (see [`crate::key`]); a `DeleteRow` entry has an empty column and value.
//! 2. Data blocks are contiguous from offset 0; the index lists them in order; their last keys
//!    ascend strictly.
//! 3. The index, filter and properties blocks follow the data blocks in that order, and the
//!    footer is the last 64 bytes of the file.
//! 4. Every decode checks bounds and checksums and fails with `Error::Corruption` naming the file
//!    and the offset of the bad block (or of the footer); it never panics or returns wrong data.

mod builder;
mod check;
mod filter;
mod footer;
mod index;
mod iter;
mod properties;
mod reader;

// The SST layer's internal API, used by the flush and compaction code (`flush.rs`,
// `compact.rs`).
pub(crate) use builder::SstBuilder;
#[cfg(test)]
pub(crate) use builder::SstInfo;
pub(crate) use iter::RowRange;
pub(crate) use iter::SstIter;
#[cfg(test)]
pub(crate) use properties::Properties;
pub(crate) use reader::SstReader;

/// Fuzz entry point: opens `bytes` as an SST file and reads everything in it (both scan
/// directions, a get of every cell found and of a row after it), once with the index and
/// filters pinned and once through a block cache too small to keep anything, so every read
/// re-verifies. Returns the number of entries, or the first error, which a fuzz target should
/// require to be `Error::Corruption`.
#[cfg(feature = "testing")]
pub fn fuzz_read_sst(bytes: &[u8]) -> crate::Result<usize> {
    use std::sync::Arc;

    use crate::fs::FileSystem;

    let fs = crate::fs::MemFs::new();
    fs.put("fuzz.sst", bytes.to_vec());
    let mut count = 0;
    for cache in [None, Some(Arc::new(crate::cache::BlockCache::new(640)))] {
        let reader = Arc::new(reader::SstReader::open(fs.open("fuzz.sst")?, 1, cache)?);
        count = 0;
        for entry in reader.iter(iter::RowRange::default(), false) {
            let entry = entry?;
            reader.get(&entry.key.row, &entry.key.column, entry.key.seq)?;
            let mut after = entry.key.row.to_vec();
            after.push(0);
            reader.may_contain_row(&after)?;
            reader.get(&after, &entry.key.column, u64::MAX)?;
            count += 1;
        }
        for entry in reader.iter(iter::RowRange::default(), true) {
            entry?;
        }
    }
    Ok(count)
}

/// Fuzz helper: rewrites every checksum of `bytes` that its own structure locates (the
/// footer's, then the trailers of the index, filter and properties blocks, then those of the
/// data blocks the index lists), so that a mutated file reaches the decoders behind the
/// checksums. Whatever it cannot locate it leaves as it is.
#[cfg(feature = "testing")]
pub fn fuzz_fix_sst_checksums(bytes: &mut [u8]) {
    use xxhash_rust::xxh3::xxh3_64;

    let fix_block = |bytes: &mut [u8], offset: u64, len: u64| {
        let (Ok(offset), Ok(len)) = (usize::try_from(offset), usize::try_from(len)) else {
            return;
        };
        let Some(code_at) = offset.checked_add(len) else {
            return;
        };
        if code_at
            .checked_add(crate::block::trailer::TRAILER_LEN)
            .is_none_or(|end| end > bytes.len())
        {
            return;
        }
        let sum = xxh3_64(&bytes[offset..=code_at]);
        bytes[code_at + 1..code_at + 9].copy_from_slice(&sum.to_be_bytes());
    };
    let Some(at) = bytes.len().checked_sub(footer::FOOTER_LEN) else {
        return;
    };
    let field = |bytes: &[u8], i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[at + i * 8..at + i * 8 + 8]);
        u64::from_be_bytes(b)
    };
    // Inner checksums first, the footer's last: a damaged handle may point a trailer into the
    // footer.
    let (index_offset, index_len) = (field(bytes, 0), field(bytes, 1));
    // The index block is stored uncompressed: its payload is the encoded index.
    let data_blocks = usize::try_from(index_offset)
        .ok()
        .zip(usize::try_from(index_len).ok())
        .and_then(|(o, l)| bytes.get(o..o.checked_add(l)?))
        .and_then(|p| index::decode(p, index_offset).ok())
        .unwrap_or_default();
    for e in data_blocks {
        fix_block(bytes, e.handle.offset, e.handle.len);
    }
    for i in 0..3 {
        let (offset, len) = (field(bytes, 2 * i), field(bytes, 2 * i + 1));
        fix_block(bytes, offset, len);
    }
    let sum = xxh3_64(&bytes[at..at + 56]);
    bytes[at + 56..].copy_from_slice(&sum.to_be_bytes());
}

#[cfg(test)]
mod tests;
