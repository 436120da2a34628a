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

// The SST layer's internal API, used by the flush and compaction code in `db.rs`.
pub(crate) use builder::SstBuilder;
#[cfg(test)]
pub(crate) use builder::SstInfo;
pub(crate) use iter::RowRange;
pub(crate) use iter::SstIter;
#[cfg(test)]
pub(crate) use properties::Properties;
pub(crate) use reader::SstReader;

/// Fuzz entry point: opens `bytes` as an SST file and reads everything in it (both scan
/// directions, and a get of every cell found). Returns the number of entries, or the first error,
/// which a fuzz target should require to be `Error::Corruption`.
#[cfg(feature = "testing")]
pub fn fuzz_read_sst(bytes: &[u8]) -> crate::Result<usize> {
    use crate::fs::FileSystem;

    let fs = crate::fs::MemFs::new();
    fs.put("fuzz.sst", bytes.to_vec());
    let reader = std::sync::Arc::new(reader::SstReader::open(fs.open("fuzz.sst")?, 1, None)?);
    let mut count = 0;
    for entry in reader.iter(iter::RowRange::default(), false) {
        let entry = entry?;
        reader.get(&entry.key.row, &entry.key.column, entry.key.seq)?;
        count += 1;
    }
    for entry in reader.iter(iter::RowRange::default(), true) {
        entry?;
    }
    Ok(count)
}

#[cfg(test)]
mod tests;
