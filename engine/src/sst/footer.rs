//! The fixed-size footer at the end of every SST file.
//!
//! ## Format
//!
//! ```text
//! offset  width  field
//!  0       8     index_offset   u64 BE
//!  8       8     index_len      u64 BE   (payload bytes; the 9-byte block trailer follows)
//! 16       8     filter_offset  u64 BE
//! 24       8     filter_len     u64 BE
//! 32       8     props_offset   u64 BE
//! 40       8     props_len      u64 BE
//! 48       4     format_version u32 BE   (3; versions 1 and 2 are still read)
//! 52       4     magic          b"STSB"
//! 56       8     checksum       u64 BE = xxh3_64(bytes 0..56)
//! ```
//!
//! The reader checks, in order: the file holds at least [`FOOTER_LEN`] bytes, the magic, the
//! version, the checksum, and then that the three blocks follow one another
//! (`index_end <= filter_offset`, `filter_end <= props_offset`) and that the properties block's
//! trailer ends exactly where the footer starts.

use xxhash_rust::xxh3::xxh3_64;

use crate::block::trailer::TRAILER_LEN;
use crate::coding::be_u64;
use crate::error::{Error, Result};

/// Size of the footer in bytes.
pub(crate) const FOOTER_LEN: usize = 64;
/// The magic number of SST files ("STrata Sorted taBle").
pub(crate) const MAGIC: [u8; 4] = *b"STSB";
/// The format version this code writes.
///
/// - 1: the first format.
/// - 2: same layout; data block entries never share column bytes with the previous entry
///   (`shared <= row_len`, see `crate::block`), so readers can hand out columns as slices of
///   the block. Readers do not rely on it: they check it per entry.
/// - 3: the properties block ends with the rows' data-time bounds (`min_row_ms`,
///   `max_row_ms`, see `super::properties`), so expired files are dropped unread.
pub(crate) const FORMAT_VERSION: u32 = 3;
/// The oldest format version this code reads.
pub(crate) const OLDEST_READABLE_VERSION: u32 = 1;

/// Where a block's payload lives in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BlockHandle {
    /// Offset of the payload.
    pub(crate) offset: u64,
    /// Length of the payload, without the trailer.
    pub(crate) len: u64,
}

impl BlockHandle {
    /// The offset just past the block's trailer.
    pub(crate) fn end(&self) -> Option<u64> {
        self.offset
            .checked_add(self.len)
            .and_then(|e| e.checked_add(TRAILER_LEN as u64))
    }
}

/// The decoded footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Footer {
    /// The index block.
    pub(crate) index: BlockHandle,
    /// The filter block.
    pub(crate) filter: BlockHandle,
    /// The properties block.
    pub(crate) props: BlockHandle,
    /// The format version the file was written in ([`Footer::encode`] writes
    /// [`FORMAT_VERSION`] whatever this says).
    pub(crate) version: u32,
}

impl Footer {
    /// Encodes the footer.
    pub(crate) fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut out = [0u8; FOOTER_LEN];
        let fields = [
            self.index.offset,
            self.index.len,
            self.filter.offset,
            self.filter.len,
            self.props.offset,
            self.props.len,
        ];
        for (i, v) in fields.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&v.to_be_bytes());
        }
        out[48..52].copy_from_slice(&FORMAT_VERSION.to_be_bytes());
        out[52..56].copy_from_slice(&MAGIC);
        let sum = xxh3_64(&out[..56]);
        out[56..].copy_from_slice(&sum.to_be_bytes());
        out
    }

    /// Decodes and checks the footer of a file of `file_len` bytes; `bytes` are its last
    /// [`FOOTER_LEN`] bytes.
    pub(crate) fn decode(bytes: &[u8], file: &str, file_len: u64) -> Result<Footer> {
        let at = file_len.saturating_sub(FOOTER_LEN as u64);
        let bad = |d: String| Error::corruption(file, at, format!("footer: {d}"));
        if bytes.len() != FOOTER_LEN {
            return Err(bad(format!(
                "expected {FOOTER_LEN} bytes, got {}",
                bytes.len()
            )));
        }
        if bytes[52..56] != MAGIC {
            return Err(bad(format!("bad magic {:02x?}", &bytes[52..56])));
        }
        let version = u32::from_be_bytes([bytes[48], bytes[49], bytes[50], bytes[51]]);
        if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(bad(format!("unsupported format version {version}")));
        }
        let want = be_u64(&bytes[56..64]);
        let got = xxh3_64(&bytes[..56]);
        if want != got {
            return Err(bad(format!(
                "checksum mismatch: stored {want:#018x}, computed {got:#018x}"
            )));
        }
        let h = |i: usize| BlockHandle {
            offset: be_u64(&bytes[i * 16..i * 16 + 8]),
            len: be_u64(&bytes[i * 16 + 8..i * 16 + 16]),
        };
        let footer = Footer {
            index: h(0),
            filter: h(1),
            props: h(2),
            version,
        };
        let ordered = footer
            .index
            .end()
            .is_some_and(|e| e <= footer.filter.offset)
            && footer
                .filter
                .end()
                .is_some_and(|e| e <= footer.props.offset)
            && footer.props.end() == Some(at);
        if !ordered {
            return Err(bad("block handles out of order or out of range".into()));
        }
        Ok(footer)
    }
}
