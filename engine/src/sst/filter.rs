//! The filter block: bloom filters that let a get skip a file.
//!
//! ## Format
//!
//! The (uncompressed) payload of the filter block:
//!
//! ```text
//! mode u8 | row_filter_len u32 BE | row filter | cell filter (the rest)
//! ```
//!
//! 1. `mode` 0 = no filter (nothing follows), 1 = a row filter only (the cell filter part is
//!    empty), 2 = row and cell filters.
//! 2. The row filter holds every rowkey of the file. The cell filter holds
//!    `bloom::cell_key(row, column)` of every cell entry and [`row_marker_key`] of every row that
//!    has a `DeleteRow` marker, so a get that the cell filter rejects has neither its cell nor a
//!    row tombstone in the file.
//! 3. Filters are encoded as described in [`crate::bloom`].

use bytes::Bytes;

use crate::bloom::{BITS_PER_KEY, Bloom, BloomBuilder};
use crate::options::FilterMode;

/// The key the cell filter holds for a row that has a `DeleteRow` marker. A collision with a
/// cell key only costs a false positive.
pub(crate) fn row_marker_key(row: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(row.len() + 1);
    out.push(0xff);
    out.extend_from_slice(row);
    out
}

/// Encodes the filter block payload.
pub(crate) fn encode(
    mode: FilterMode,
    rows: &mut BloomBuilder,
    cells: &mut BloomBuilder,
) -> Vec<u8> {
    let mut out = Vec::new();
    match mode {
        FilterMode::None => out.push(0),
        FilterMode::Rows | FilterMode::RowsAndColumns => {
            let row_filter = rows.finish(BITS_PER_KEY);
            out.push(if mode == FilterMode::Rows { 1 } else { 2 });
            out.extend_from_slice(&(row_filter.len() as u32).to_be_bytes());
            out.extend_from_slice(&row_filter);
            if mode == FilterMode::RowsAndColumns {
                out.extend_from_slice(&cells.finish(BITS_PER_KEY));
            }
        }
    }
    out
}

/// The decoded filters of one file.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filters {
    /// The row filter, if the file has one.
    pub(crate) rows: Option<Bloom>,
    /// The cell filter, if the file has one.
    pub(crate) cells: Option<Bloom>,
}

/// Decodes the filter block payload; the error says what was wrong.
pub(crate) fn decode(data: Bytes) -> Result<Filters, &'static str> {
    let Some(&mode) = data.first() else {
        return Err("empty filter block");
    };
    match mode {
        0 if data.len() == 1 => Ok(Filters::default()),
        1 | 2 => {
            let len = data
                .get(1..5)
                .ok_or("filter block shorter than its header")?;
            let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
            let end = len
                .checked_add(5)
                .filter(|&e| e <= data.len())
                .ok_or("row filter runs past the block")?;
            let rows = Some(Bloom::decode(data.slice(5..end))?);
            let cells = if mode == 2 {
                Some(Bloom::decode(data.slice(end..))?)
            } else if end != data.len() {
                return Err("trailing bytes after the row filter");
            } else {
                None
            };
            Ok(Filters { rows, cells })
        }
        _ => Err("unknown filter mode"),
    }
}
