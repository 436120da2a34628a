//! Table `meta`: database settings, series ids, last points and dirty-row markers.
//!
//! ## Format
//!
//! ```text
//! row "c"                        column "salt_buckets"  value = bucket count (1 byte)
//! row "c"                        column "uid_widths"    value = metric, tagk, tagv UID widths (3 × 1 byte)
//! row "d" | rowkey               column "t"             value = write time, ms (8 bytes BE u64)
//! row "s" | tsuid                column "id"            value = series id (4 bytes BE u32)
//! row "i" | series id (4, BE)    column "tsuid"         value = tsuid bytes
//! row "l" | series id (4, BE)    column "last"          value = ts_ms (8 bytes BE i64) | raw cell value
//! ```
//!
//! 1. The bucket count and the UID widths are written once, when the database is created (the
//!    widths also on the first open of a directory made before they were stored, whose UIDs are
//!    all 3 bytes), and never change.
//! 2. A data write puts, in the same engine batch as its points: a `d` marker for every data row
//!    it touches (the row compactor's work list, so it survives a crash), the `s` and `i` rows of
//!    every series it creates, and the `l` row of every series whose last point it moves.
//! 3. Series ids are dense from 0: an id is taken only when the batch that records it commits.
//! 4. The `l` value's tail uses the raw cell value encoding (`cell.rs`).

use crate::cell::{decode_value, encode_value};
use crate::error::{Error, Result};
use crate::value::Value;

pub(crate) const CONFIG_ROW: &[u8] = b"c";
pub(crate) const SALT_BUCKETS_COLUMN: &[u8] = b"salt_buckets";
pub(crate) const UID_WIDTHS_COLUMN: &[u8] = b"uid_widths";
pub(crate) const DIRTY_PREFIX: u8 = b'd';
pub(crate) const DIRTY_COLUMN: &[u8] = b"t";
pub(crate) const SERIES_BY_TSUID_PREFIX: u8 = b's';
pub(crate) const SERIES_ID_COLUMN: &[u8] = b"id";
pub(crate) const SERIES_BY_ID_PREFIX: u8 = b'i';
pub(crate) const SERIES_TSUID_COLUMN: &[u8] = b"tsuid";
pub(crate) const LAST_PREFIX: u8 = b'l';
pub(crate) const LAST_COLUMN: &[u8] = b"last";

/// `prefix | bytes`.
pub(crate) fn key(prefix: u8, bytes: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + bytes.len());
    k.push(prefix);
    k.extend_from_slice(bytes);
    k
}

/// The series id in an `i` or `l` row key.
pub(crate) fn decode_id_key(row: &[u8]) -> Result<u32> {
    match row {
        [_, a, b, c, d] => Ok(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => Err(Error::corruption(
            "meta row",
            row,
            "series id key is not 5 bytes",
        )),
    }
}

pub(crate) fn encode_last(ts_ms: i64, v: Value) -> Vec<u8> {
    let mut out = ts_ms.to_be_bytes().to_vec();
    out.extend_from_slice(encode_value(v).as_bytes());
    out
}

pub(crate) fn decode_last(row: &[u8], value: &[u8]) -> Result<(i64, Value)> {
    if value.len() < 8 {
        return Err(Error::corruption(
            "meta row",
            row,
            "last point shorter than 8 bytes",
        ));
    }
    let (ts, v) = value.split_at(8);
    let ts = i64::from_be_bytes(
        ts.try_into()
            .map_err(|_| Error::corruption("meta row", row, "bad last point timestamp"))?,
    );
    Ok((ts, decode_value(row, v)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_point_round_trips() -> Result<()> {
        let b = encode_last(1_356_998_400_500, Value::Float(42.1));
        assert_eq!(
            decode_last(b"l", &b)?,
            (1_356_998_400_500, Value::Float(42.1))
        );
        assert!(decode_last(b"l", &b[..7]).is_err());
        assert_eq!(decode_id_key(&key(LAST_PREFIX, &7u32.to_be_bytes()))?, 7);
        assert!(decode_id_key(b"l12").is_err());
        Ok(())
    }
}
