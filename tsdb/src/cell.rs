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
//!    3 bytes, so it sorts first. Any other column length is corruption.

use strata_engine::Cell;

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
#[derive(Debug, Clone, Copy)]
pub(crate) struct EncodedValue {
    buf: [u8; 9],
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
    let mut buf = [0u8; 9];
    let n = match v {
        Value::Int(i) => {
            if let Ok(x) = i8::try_from(i) {
                buf[1..2].copy_from_slice(&x.to_be_bytes());
                1
            } else if let Ok(x) = i16::try_from(i) {
                buf[1..3].copy_from_slice(&x.to_be_bytes());
                2
            } else if let Ok(x) = i32::try_from(i) {
                buf[1..5].copy_from_slice(&x.to_be_bytes());
                4
            } else {
                buf[1..9].copy_from_slice(&i.to_be_bytes());
                8
            }
        }
        Value::Float(f) => {
            let narrow = f as f32;
            if f64::from(narrow).to_bits() == f.to_bits() {
                buf[1..5].copy_from_slice(&narrow.to_be_bytes());
                4
            } else {
                buf[1..9].copy_from_slice(&f.to_be_bytes());
                8
            }
        }
    };
    buf[0] = (if v.is_float() { FLAG_FLOAT } else { 0 }) | (n as u8 - 1);
    EncodedValue { buf, len: n + 1 }
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
/// `cells` must be sorted by column, as the engine returns them. The empty column holds the
/// row's compacted block once row compaction exists; the row-compaction issue adds its decode
/// and the merge (a raw cell wins over a block point at the same instant). Until then no
/// writer produces it, and it is skipped here.
pub(crate) fn decode_row(base_time: u32, cells: &[Cell]) -> Result<Vec<(i64, Value)>> {
    let base_ms = i64::from(base_time) * 1000;
    let mut out = Vec::with_capacity(cells.len());
    for cell in cells {
        if cell.column.is_empty() {
            continue;
        }
        let off = decode_column(&cell.column)?;
        out.push((
            base_ms + i64::from(off),
            decode_value(&cell.column, &cell.value)?,
        ));
    }
    Ok(out)
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
        assert_eq!(encode_value(Value::Int(-1)).describe(), "[-1]/0");
        assert_eq!(encode_column(3_599_999), [0x36, 0xee, 0x7f]);
        assert!(decode_column(&[0x36, 0xee, 0x80]).is_err());
        assert!(decode_value(b"c", &[0x10, 1]).is_err());
        assert!(decode_value(b"c", &[0x02, 1, 2, 3]).is_err());
        assert!(decode_value(b"c", &[0x09, 1, 2]).is_err());
        assert!(decode_value(b"c", &[]).is_err());
    }

    #[test]
    fn decode_row_skips_the_block_column() -> Result<()> {
        let cells = vec![
            Cell {
                column: Bytes::new(),
                value: Bytes::from_static(b"block"),
            },
            Cell {
                column: Bytes::copy_from_slice(&encode_column(500)),
                value: Bytes::copy_from_slice(encode_value(Value::Int(7)).as_bytes()),
            },
        ];
        assert_eq!(decode_row(3600, &cells)?, vec![(3_600_500, Value::Int(7))]);
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
