//! Raw data cells: one point per cell in its hour's row.
//!
//! ## Format
//!
//! ```text
//! column = offset_ms (3 bytes, BE u24)        offset from the row's base time, 0 ..= 3_599_999
//! value  = flags (1 byte) | number (1, 2, 4 or 8 bytes, BE)
//! flags  = 0b0000_FLLL    F = 1 for a float, LLL = byte length - 1 (0, 1, 3 or 7)
//! ```
//!
//! 1. Integers use the fewest of 1, 2, 4, 8 bytes that hold them (two's complement).
//! 2. Floats are IEEE 754: 4 bytes when the value converts to f32 and back bit-exactly, else 8.
//! 3. Seconds and milliseconds are normalized to ms before the column is computed, so the same
//!    instant always lands on the same cell and the later write wins.
//! 4. The empty column is the row's compacted block (see `FORMAT.md`); raw columns are exactly
//!    3 bytes, so it sorts first. A 9-byte column `0xFF | seq (u64 BE)` is a partial block
//!    written by a flush (`fold.rs`), sorting after every raw column. Any other column is
//!    corruption.

use strata_engine::Cell;

use crate::block::decode_block;
use crate::error::{Error, Result};
use crate::value::Value;

/// Bytes of a raw column.
pub(crate) const COLUMN_LEN: usize = 3;
/// Milliseconds covered by one row.
const ROW_SPAN_MS: u32 = 3_600_000;
const FLAG_FLOAT: u8 = 0x08;
const FLAG_LEN_MASK: u8 = 0x07;

/// The column of a point `offset_ms` after its row's base time.
pub(crate) fn encode_column(offset_ms: u32) -> [u8; COLUMN_LEN] {
    let b = offset_ms.to_be_bytes();
    [b[1], b[2], b[3]]
}

/// Decodes a raw column to its ms offset.
pub(crate) fn decode_column(col: &[u8]) -> Result<u32> {
    let [a, b, c] = col else {
        return Err(Error::corruption("cell", col, "raw column is not 3 bytes"));
    };
    let off = u32::from_be_bytes([0, *a, *b, *c]);
    if off >= ROW_SPAN_MS {
        return Err(Error::corruption("cell", col, "offset past the row's hour"));
    }
    Ok(off)
}

/// An encoded value: at most 9 bytes, on the stack.
///
/// Sixteen bytes built in one integer, not nine written piecewise: the ingest loop moves each
/// point's value on as a whole, and a wide load over several narrow stores cannot take their
/// bytes from the store buffer, a stall per point.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EncodedValue {
    buf: [u8; 16],
    len: usize,
}

impl EncodedValue {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// OpenTSDB's `[bytes]/flags` rendering for error messages (signed bytes, as Java prints).
    pub(crate) fn describe(&self) -> String {
        let body: Vec<String> = self.buf[1..self.len]
            .iter()
            .map(|b| (*b as i8).to_string())
            .collect();
        format!("[{}]/{}", body.join(", "), self.buf[0])
    }
}

/// Encodes a value in the fewest bytes that hold it exactly.
pub(crate) fn encode_value(v: Value) -> EncodedValue {
    // The value's big-endian bytes follow the flags byte: as a little-endian integer, the
    // byte-swapped value shifted past the flags.
    let (body, n): (u64, usize) = match v {
        Value::Int(i) => {
            if let Ok(x) = i8::try_from(i) {
                (u64::from(x as u8), 1)
            } else if let Ok(x) = i16::try_from(i) {
                (u64::from((x as u16).swap_bytes()), 2)
            } else if let Ok(x) = i32::try_from(i) {
                (u64::from((x as u32).swap_bytes()), 4)
            } else {
                ((i as u64).swap_bytes(), 8)
            }
        }
        Value::Float(f) => {
            let narrow = f as f32;
            if f64::from(narrow).to_bits() == f.to_bits() {
                (u64::from(narrow.to_bits().swap_bytes()), 4)
            } else {
                (f.to_bits().swap_bytes(), 8)
            }
        }
    };
    let flags = (if v.is_float() { FLAG_FLOAT } else { 0 }) | (n as u8 - 1);
    let word = u128::from(flags) | u128::from(body) << 8;
    EncodedValue {
        buf: word.to_le_bytes(),
        len: n + 1,
    }
}

/// Decodes a raw cell value. `col` only names the cell in errors.
pub(crate) fn decode_value(col: &[u8], v: &[u8]) -> Result<Value> {
    let Some((&flags, body)) = v.split_first() else {
        return Err(Error::corruption("cell", col, "empty value"));
    };
    if flags & !(FLAG_FLOAT | FLAG_LEN_MASK) != 0 {
        return Err(Error::corruption(
            "cell",
            col,
            format!("unknown flags {flags:#04x}"),
        ));
    }
    let len = usize::from(flags & FLAG_LEN_MASK) + 1;
    if body.len() != len {
        return Err(Error::corruption(
            "cell",
            col,
            format!("flags say {len} value bytes, cell holds {}", body.len()),
        ));
    }
    let bad_len = || Error::corruption("cell", col, format!("bad value length {len}"));
    if flags & FLAG_FLOAT != 0 {
        match body {
            [a, b, c, d] => Ok(Value::Float(f64::from(f32::from_be_bytes([
                *a, *b, *c, *d,
            ])))),
            _ => body
                .try_into()
                .map(|b| Value::Float(f64::from_be_bytes(b)))
                .map_err(|_| bad_len()),
        }
    } else {
        match body {
            [a] => Ok(Value::Int(i64::from(*a as i8))),
            [a, b] => Ok(Value::Int(i64::from(i16::from_be_bytes([*a, *b])))),
            [a, b, c, d] => Ok(Value::Int(i64::from(i32::from_be_bytes([*a, *b, *c, *d])))),
            _ => body
                .try_into()
                .map(|b| Value::Int(i64::from_be_bytes(b)))
                .map_err(|_| bad_len()),
        }
    }
}

/// Decodes the points of one data row, in time order, as `(timestamp_ms, value)`.
///
/// `cells` must be sorted by column, as the engine returns them. The row's blocks (the main
/// block at the empty column, then the partial blocks of flushes, oldest first) and its raw
/// cells are merged, a later part winning at an instant two hold: partial blocks over the main
/// block and over older partial blocks, raw cells over every block (raw cells are always
/// written later: see `RowParts`). A block that does not decode, or holds a point outside the
/// row's hour, is an error.
pub(crate) fn decode_row(base_time: u32, cells: &[Cell]) -> Result<Vec<(i64, Value)>> {
    let parts = RowParts::split(cells)?;
    let base_ms = i64::from(base_time) * 1000;
    let mut raw_points = Vec::with_capacity(parts.raw.len());
    for cell in parts.raw {
        let off = decode_column(&cell.column)?;
        raw_points.push((
            base_ms + i64::from(off),
            decode_value(&cell.column, &cell.value)?,
        ));
    }
    let mut merged: Option<Vec<(i64, Value)>> = None;
    for block in parts.blocks() {
        let points = decode_row_block(base_time, block)?;
        merged = Some(match merged {
            None => points,
            Some(older) => merge_newer(older, &points),
        });
    }
    Ok(match merged {
        None => raw_points,
        Some(blocks) if raw_points.is_empty() => blocks,
        Some(blocks) => merge_newer(blocks, &raw_points),
    })
}

/// [`merge_points`], appending in place when every newer point is later than every older one.
/// An open hour's row holds a partial block per flush, each usually after the one before, and
/// merging each into a fresh copy of everything before it would copy the row once per block.
fn merge_newer(mut older: Vec<(i64, Value)>, newer: &[(i64, Value)]) -> Vec<(i64, Value)> {
    match (older.last(), newer.first()) {
        (Some(last), Some(first)) if last.0 < first.0 => {
            older.extend_from_slice(newer);
            older
        }
        (_, None) => older,
        _ => merge_points(&older, newer),
    }
}

/// First byte of a partial block's column. Raw columns start with at most `0x36`
/// (3,599,999 >> 16), so partial blocks sort after every raw cell.
pub(crate) const PARTIAL_TAG: u8 = 0xFF;
/// Bytes of a partial block's column: the tag and the flush's sequence number.
pub(crate) const PARTIAL_COLUMN_LEN: usize = 9;

/// The column of a partial block written by the flush fold (`fold.rs`): the tag, then the
/// highest engine sequence number among the cells it folded, big-endian, so a row's partial
/// blocks sort oldest first.
pub(crate) fn partial_column(seq: u64) -> [u8; PARTIAL_COLUMN_LEN] {
    let mut c = [PARTIAL_TAG; PARTIAL_COLUMN_LEN];
    c[1..].copy_from_slice(&seq.to_be_bytes());
    c
}

/// A data row's cells by kind, each part in column order.
///
/// Raw cells always postdate the row's blocks: the row compactor and deletes write the main
/// block behind a row tombstone, which hides every older cell, and a flush folds every raw cell
/// of its memtable into a partial block, so a raw cell that is still raw was written after the
/// last flush, later than any partial block.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowParts<'a> {
    /// The main block (the empty column).
    pub(crate) main: Option<&'a [u8]>,
    /// The raw cells.
    pub(crate) raw: &'a [Cell],
    /// The partial blocks, oldest first.
    pub(crate) partials: &'a [Cell],
}

impl<'a> RowParts<'a> {
    /// Splits `cells` (sorted by column). A column that is neither empty, raw (3 bytes) nor a
    /// partial block's is corruption.
    pub(crate) fn split(cells: &'a [Cell]) -> Result<RowParts<'a>> {
        let (main, rest) = match cells.split_first() {
            Some((first, rest)) if first.column.is_empty() => (Some(&first.value[..]), rest),
            _ => (None, cells),
        };
        let n_raw = rest
            .iter()
            .take_while(|c| c.column.first() != Some(&PARTIAL_TAG))
            .count();
        let (raw, partials) = rest.split_at(n_raw);
        if let Some(bad) = partials
            .iter()
            .find(|c| c.column.len() != PARTIAL_COLUMN_LEN)
        {
            return Err(Error::corruption(
                "cell",
                &bad.column,
                "partial block column is not 9 bytes",
            ));
        }
        Ok(RowParts {
            main,
            raw,
            partials,
        })
    }

    /// The blocks, oldest first: the main block, then the partial blocks.
    pub(crate) fn blocks(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.main
            .into_iter()
            .chain(self.partials.iter().map(|c| &c.value[..]))
    }

    /// The number of blocks.
    pub(crate) fn block_count(&self) -> usize {
        usize::from(self.main.is_some()) + self.partials.len()
    }

    /// The row's one block when it has no other part: the common case after row compaction,
    /// or after a flush folded the row.
    pub(crate) fn lone_block(&self) -> Option<&'a [u8]> {
        if self.block_count() == 1 && self.raw.is_empty() {
            self.blocks().next()
        } else {
            None
        }
    }
}

/// Decodes a row's compacted block and checks every point lies in the row's hour.
pub(crate) fn decode_row_block(base_time: u32, block: &[u8]) -> Result<Vec<(i64, Value)>> {
    let mut points = Vec::new();
    decode_block(block, &mut points)?;
    let start = i64::from(base_time) * 1000;
    let end = start + i64::from(ROW_SPAN_MS);
    if let Some(p) = points.iter().find(|p| p.0 < start || p.0 >= end) {
        return Err(Error::corruption(
            "block",
            &base_time.to_be_bytes(),
            format!("point at {} ms lies outside the row's hour", p.0),
        ));
    }
    Ok(points)
}

/// Merges two time-ordered point lists; `newer` wins at an instant both hold.
pub(crate) fn merge_points(older: &[(i64, Value)], newer: &[(i64, Value)]) -> Vec<(i64, Value)> {
    let mut out = Vec::with_capacity(older.len() + newer.len());
    let (mut i, mut j) = (0, 0);
    while i < older.len() && j < newer.len() {
        let (a, b) = (older[i], newer[j]);
        if a.0 < b.0 {
            out.push(a);
            i += 1;
        } else {
            if a.0 == b.0 {
                i += 1;
            }
            out.push(b);
            j += 1;
        }
    }
    out.extend_from_slice(&older[i..]);
    out.extend_from_slice(&newer[j..]);
    out
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use proptest::prelude::*;

    use super::*;

    fn enc(v: Value) -> Vec<u8> {
        encode_value(v).as_bytes().to_vec()
    }

    #[test]
    fn widths_follow_opentsdb() {
        assert_eq!(enc(Value::Int(42)), vec![0x00, 42]);
        assert_eq!(enc(Value::Int(300)), vec![0x01, 1, 44]);
        assert_eq!(enc(Value::Int(70_000)).len(), 5);
        assert_eq!(enc(Value::Int(4_294_967_296))[0], 0x07);
        assert_eq!(enc(Value::Float(42.5))[0], 0x0b);
        assert_eq!(enc(Value::Float(42.1))[0], 0x0f);
        // Big-endian bytes after the flags, at every width.
        assert_eq!(enc(Value::Int(-2)), vec![0x00, 0xfe]);
        assert_eq!(enc(Value::Int(-300)), vec![0x01, 0xfe, 0xd4]);
        assert_eq!(enc(Value::Int(0x0102_0304)), vec![0x03, 1, 2, 3, 4]);
        assert_eq!(
            enc(Value::Int(0x0102_0304_0506_0708)),
            vec![0x07, 1, 2, 3, 4, 5, 6, 7, 8]
        );
        assert_eq!(enc(Value::Float(42.5)), vec![0x0b, 0x42, 0x2a, 0, 0]);
        let mut wide = vec![0x0f];
        wide.extend_from_slice(&42.1f64.to_be_bytes());
        assert_eq!(enc(Value::Float(42.1)), wide);
        assert_eq!(encode_value(Value::Int(-1)).describe(), "[-1]/0");
        assert_eq!(encode_column(3_599_999), [0x36, 0xee, 0x7f]);
        assert!(decode_column(&[0x36, 0xee, 0x80]).is_err());
        assert!(decode_value(b"c", &[0x10, 1]).is_err());
        assert!(decode_value(b"c", &[0x02, 1, 2, 3]).is_err());
        assert!(decode_value(b"c", &[0x09, 1, 2]).is_err());
        assert!(decode_value(b"c", &[]).is_err());
    }

    fn raw(off: u32, v: Value) -> Cell {
        Cell {
            column: Bytes::copy_from_slice(&encode_column(off)),
            value: Bytes::copy_from_slice(encode_value(v).as_bytes()),
        }
    }

    fn block_cell(points: &[(i64, Value)]) -> Result<Cell> {
        let mut b = Vec::new();
        crate::block::encode_block(points, &mut b)?;
        Ok(Cell {
            column: Bytes::new(),
            value: Bytes::from(b),
        })
    }

    #[test]
    fn decode_row_merges_block_and_raw_cells() -> Result<()> {
        let cells = vec![
            block_cell(&[
                (3_600_100, Value::Int(1)),
                (3_600_500, Value::Int(2)),
                (3_601_000, Value::Float(2.5)),
            ])?,
            raw(0, Value::Int(9)),
            raw(500, Value::Int(7)),
            raw(3_599_999, Value::Float(0.5)),
        ];
        assert_eq!(
            decode_row(3600, &cells)?,
            vec![
                (3_600_000, Value::Int(9)),
                (3_600_100, Value::Int(1)),
                (3_600_500, Value::Int(7)),
                (3_601_000, Value::Float(2.5)),
                (7_199_999, Value::Float(0.5)),
            ]
        );
        Ok(())
    }

    #[test]
    fn bad_blocks_are_errors() -> Result<()> {
        let garbage = Cell {
            column: Bytes::new(),
            value: Bytes::from_static(b"block"),
        };
        let e = decode_row(3600, &[garbage, raw(500, Value::Int(7))]);
        assert!(matches!(e, Err(Error::Block(_))));
        // A valid block whose points lie outside the row's hour.
        let outside = block_cell(&[(100, Value::Int(1))])?;
        assert!(decode_row(3600, &[outside]).is_err());
        Ok(())
    }

    fn arb_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i64>().prop_map(Value::Int),
            (-1000i64..1000).prop_map(Value::Int),
            any::<f64>().prop_map(Value::Float),
            any::<f32>().prop_map(|f| Value::Float(f64::from(f))),
        ]
    }

    proptest! {
        #[test]
        fn merge_prefers_newer(
            a in proptest::collection::btree_map(0i64..200, any::<i64>(), 0..50),
            b in proptest::collection::btree_map(0i64..200, any::<i64>(), 0..50),
            // Shifts the newer points from overlapping the older ones to wholly after them,
            // where `merge_newer` appends in place.
            shift in 0i64..250,
        ) {
            let b: std::collections::BTreeMap<i64, i64> =
                b.into_iter().map(|(t, v)| (t + shift, v)).collect();
            let older: Vec<(i64, Value)> = a.iter().map(|(t, v)| (*t, Value::Int(*v))).collect();
            let newer: Vec<(i64, Value)> = b.iter().map(|(t, v)| (*t, Value::Int(*v))).collect();
            let mut want = a.clone();
            want.extend(b.iter().map(|(t, v)| (*t, *v)));
            let want: Vec<(i64, Value)> = want.into_iter().map(|(t, v)| (t, Value::Int(v))).collect();
            prop_assert_eq!(merge_newer(older.clone(), &newer), want.clone());
            prop_assert_eq!(merge_points(&older, &newer), want);
        }

        #[test]
        fn value_round_trips(v in arb_value()) {
            let e = encode_value(v);
            let back = decode_value(b"c", e.as_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(back, v);
        }

        #[test]
        fn column_round_trips(off in 0u32..3_600_000) {
            prop_assert_eq!(decode_column(&encode_column(off)).ok(), Some(off));
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..12)) {
            if let Ok(v) = decode_value(b"c", &bytes) {
                // Re-encoding a decoded value may pick a narrower width, never a different value.
                let again = decode_value(b"c", encode_value(v).as_bytes()).ok();
                prop_assert_eq!(again, Some(v));
            }
        }
    }
}
