//! The Strata block: the value of a compacted row cell, holding one series' points of one hour.
//!
//! ## Format
//!
//! ```text
//! +---------+--------------+------------------+--------------+-------------------+
//! | version | count        | timestamp column | value column | checksum          |
//! | u8 = 1  | LEB128 varint| (count >= 1 only)| (count >= 1) | u32 big-endian    |
//! +---------+--------------+------------------+--------------+-------------------+
//! ```
//!
//! Every multi-byte fixed field is big-endian; varints are unsigned LEB128 (at most 10 bytes),
//! and signed numbers go through zigzag first. "Packed" means `n` values of one `width`
//! (0..=64) bits, MSB first, padded with zero bits to a whole byte; width 0 takes no bytes.
//!
//! **Timestamp column** (milliseconds, any `i64`):
//! `zigzag varint t0`; if `count >= 2`: `varint min_delta`, `u8 width`, then `count - 1` packed
//! `delta_i - min_delta` where `delta_i = t_i - t_(i-1)`. A regular interval has width 0 and
//! costs nothing per point. (This is frame-of-reference on the deltas: the packed residual is
//! the delta-of-delta measured against the smallest delta, which needs one bit less than a
//! zigzag delta-of-delta at a fixed width.)
//!
//! **Value column**: `u8 layout`: `0` all integers → one integer column; `1` all floats → one
//! float column; `2` mixed → a type bitmap of `ceil(count / 8)` bytes (bit `i`, MSB first, set
//! when point `i` is a float), then an integer column over the integer points, then a float
//! column over the float points.
//!
//! **Integer column** (`u8 kind`, arithmetic modulo 2^64):
//! * `0` frame of reference: `zigzag varint min`, `u8 width`, `n` packed `v - min`
//!   (a constant column has width 0);
//! * `1` delta: `zigzag varint v0`; if `n >= 2`: `zigzag varint min_delta`, `u8 width`,
//!   `n - 1` packed `(v_i - v_(i-1)) - min_delta` (a steady counter has width 0).
//!
//! **Float column** (`u8 kind`):
//! * `0` constant: the 8 bytes of the value's bits;
//! * `1` decimal: `u8 k` (0..=15), then an integer column of mantissas `m_i`; the value is
//!   `m_i as f64 / 10^k`, one correctly rounded IEEE division;
//! * `2` Gorilla XOR: a bit stream, see `block/gorilla.rs`.
//!
//! **Checksum**: the low 32 bits of `xxh3_64` over every byte before it.
//!
//! Invariants:
//! 1. Timestamps strictly increase; `1 <= min_delta` and the decoder rejects any overflow.
//! 2. `count <= MAX_POINTS` (2^22, above the 3,600,000 milliseconds of one row).
//! 3. Decoding is exact: integers and float bit patterns (`-0.0`, NaN payloads, subnormals)
//!    come back unchanged. The encoder picks decimal only when every value divides back to its
//!    own bits, and every mantissa has `|m| <= 2^53`.
//! 4. The encoder picks, per column, the smaller of frame-of-reference and delta; for floats,
//!    constant, else decimal (compared with Gorilla when it needs more than 14 bits a value),
//!    else Gorilla.
//! 5. The block is consumed exactly: trailing bytes are an error.

mod bits;
mod gorilla;
mod timestamps;
mod values;

use crate::error::BlockError;
use crate::point_columns::{ColumnKind, PointColumns};
use crate::value::Value;
use bits::{Cursor, put_varint};

/// Format version written in byte 0.
pub const BLOCK_VERSION: u8 = 1;

/// Most points one block may hold (2^22; one row holds at most 3,600,000 distinct milliseconds).
/// It bounds what a decoder allocates for a block that claims many zero-width points.
pub const MAX_POINTS: usize = 1 << 22;

/// Size of the trailing checksum.
const CHECKSUM_LEN: usize = 4;

/// Appends the block encoding of `points` to `out`.
///
/// Timestamps (milliseconds) must strictly increase; at most [`MAX_POINTS`] points. On error
/// `out` is left unchanged.
pub fn encode_block(points: &[(i64, Value)], out: &mut Vec<u8>) -> Result<(), BlockError> {
    if points.len() > MAX_POINTS {
        return Err(BlockError::TooManyPoints {
            count: points.len() as u64,
            max: MAX_POINTS,
        });
    }
    let start = out.len();
    out.push(BLOCK_VERSION);
    put_varint(out, points.len() as u64);
    if !points.is_empty() {
        if let Err(index) = timestamps::encode(points, |p| p.0, out) {
            out.truncate(start);
            let prev = points.get(index.wrapping_sub(1)).map_or(0, |p| p.0);
            let ts = points.get(index).map_or(0, |p| p.0);
            return Err(BlockError::NotIncreasing { index, prev, ts });
        }
        values::encode(points, out);
    }
    let sum = checksum(&out[start..]);
    out.extend_from_slice(&sum.to_be_bytes());
    Ok(())
}

/// Decodes a block, appending its points to `out`. On error `out` is left unchanged.
pub fn decode_block(bytes: &[u8], out: &mut Vec<(i64, Value)>) -> Result<(), BlockError> {
    let body = verify_checksum(bytes)?;
    let mut cur = Cursor::new(body);
    let n = read_header(&mut cur)?;
    let start = out.len();
    out.reserve(n);
    // The timestamps create the points (no placeholder pass); the values fill them in.
    let res = timestamps::decode_extend(&mut cur, n, out, |t| (t, Value::Int(0)))
        .and_then(|()| decode_values(&mut cur, &mut out[start..], |p, v| p.1 = v));
    if res.is_err() {
        out.truncate(start);
    }
    res
}

/// Decodes a block, appending its points to `cols` (whose values move to the mixed column when
/// the block's kind differs from theirs). On error `cols` keeps its points (perhaps moved to
/// the mixed column).
pub(crate) fn decode_block_into_columns(
    bytes: &[u8],
    cols: &mut PointColumns,
) -> Result<(), BlockError> {
    let body = verify_checksum(bytes)?;
    let mut cur = Cursor::new(body);
    let n = read_header(&mut cur)?;
    let start = cols.ts.len();
    let res = timestamps::decode_extend(&mut cur, n, &mut cols.ts, |t| t).and_then(|()| {
        if n == 0 {
            return Ok(());
        }
        let layout_at = cur.pos;
        let want = match cur.u8()? {
            values::LAYOUT_INT => ColumnKind::Ints,
            values::LAYOUT_FLOAT => ColumnKind::Floats,
            _ => ColumnKind::Mixed,
        };
        cols.prepare(want, n);
        match cols.kind {
            ColumnKind::Ints => {
                cols.ints.resize(start + n, 0);
                values::decode_ints(&mut cur, &mut cols.ints[start..], |d, i| *d = i)?;
            }
            ColumnKind::Floats => {
                cur.pos = layout_at;
                cols.floats.resize(start + n, 0.0);
                values::decode_f64s(&mut cur, &mut cols.floats[start..])?;
            }
            ColumnKind::Mixed => {
                cur.pos = layout_at;
                cols.mixed.resize(start + n, Value::Int(0));
                values::decode(&mut cur, &mut cols.mixed[start..], |d, v| *d = v)?;
            }
        }
        check_consumed(&cur)
    });
    if res.is_err() {
        cols.truncate(start);
    }
    res
}

/// Decodes a block into separate timestamp and value columns (appending to both), which is
/// faster than [`decode_block`]. On error both are left unchanged.
pub fn decode_block_columns(
    bytes: &[u8],
    ts: &mut Vec<i64>,
    vals: &mut Vec<Value>,
) -> Result<(), BlockError> {
    let body = verify_checksum(bytes)?;
    let mut cur = Cursor::new(body);
    let n = read_header(&mut cur)?;
    let (ts_start, vals_start) = (ts.len(), vals.len());
    ts.resize(ts_start + n, 0);
    vals.resize(vals_start + n, Value::Int(0));
    let res = decode_columns_split(&mut cur, &mut ts[ts_start..], &mut vals[vals_start..]);
    if res.is_err() {
        ts.truncate(ts_start);
        vals.truncate(vals_start);
    }
    res
}

/// Decodes a block into caller-provided slices without allocating: the block's `n` points go
/// to `ts[..n]` and `vals[..n]`, and `n` is returned. Both slices must hold at least
/// [`block_len`] slots ([`BlockError::BufferTooSmall`] otherwise). On error the slices may hold
/// partial output.
pub fn decode_block_into(
    bytes: &[u8],
    ts: &mut [i64],
    vals: &mut [Value],
) -> Result<usize, BlockError> {
    let body = verify_checksum(bytes)?;
    let mut cur = Cursor::new(body);
    let n = read_header(&mut cur)?;
    let (Some(ts), Some(vals)) = (ts.get_mut(..n), vals.get_mut(..n)) else {
        return Err(BlockError::BufferTooSmall {
            needed: n,
            available: ts.len().min(vals.len()),
        });
    };
    decode_columns_split(&mut cur, ts, vals)?;
    Ok(n)
}

/// Checks the trailing checksum and returns the bytes it covers.
fn verify_checksum(bytes: &[u8]) -> Result<&[u8], BlockError> {
    let Some(body_len) = bytes.len().checked_sub(CHECKSUM_LEN) else {
        return Err(BlockError::Truncated {
            offset: 0,
            needed: CHECKSUM_LEN + 2,
            available: bytes.len(),
        });
    };
    let (body, sum) = bytes.split_at(body_len);
    let stored = u32::from_be_bytes([sum[0], sum[1], sum[2], sum[3]]);
    let computed = checksum(body);
    if stored != computed {
        return Err(BlockError::ChecksumMismatch { stored, computed });
    }
    Ok(body)
}

/// Decodes the value column of `dst.len()` points (after the timestamps), then checks nothing
/// is left.
fn decode_values<T>(
    cur: &mut Cursor<'_>,
    dst: &mut [T],
    set_val: impl Fn(&mut T, Value),
) -> Result<(), BlockError> {
    if !dst.is_empty() {
        values::decode(cur, dst, set_val)?;
    }
    check_consumed(cur)
}

/// [`decode_columns`] into separate slices of equal length.
fn decode_columns_split(
    cur: &mut Cursor<'_>,
    ts: &mut [i64],
    vals: &mut [Value],
) -> Result<(), BlockError> {
    if !ts.is_empty() {
        timestamps::decode(cur, ts, |d, t| *d = t)?;
        values::decode(cur, vals, |d, v| *d = v)?;
    }
    check_consumed(cur)
}

fn check_consumed(cur: &Cursor<'_>) -> Result<(), BlockError> {
    if cur.pos != cur.buf.len() {
        return Err(BlockError::TrailingBytes {
            offset: cur.pos,
            extra: cur.buf.len() - cur.pos,
        });
    }
    Ok(())
}

/// Number of points a block holds, read from its header without decoding it (the checksum is
/// not verified).
pub fn block_len(bytes: &[u8]) -> Result<usize, BlockError> {
    let mut cur = Cursor::new(bytes);
    read_header(&mut cur)
}

fn read_header(cur: &mut Cursor<'_>) -> Result<usize, BlockError> {
    let version = cur.u8()?;
    if version != BLOCK_VERSION {
        return Err(BlockError::BadVersion {
            got: version,
            expected: BLOCK_VERSION,
        });
    }
    let count = cur.varint()?;
    if count > MAX_POINTS as u64 {
        return Err(BlockError::TooManyPoints {
            count,
            max: MAX_POINTS,
        });
    }
    Ok(count as usize)
}

/// Decodes the bytes before the checksum (tests use it to exercise the parser on bytes the
/// checksum would reject).
#[cfg(test)]
fn decode_body(body: &[u8], ts: &mut Vec<i64>, vals: &mut Vec<Value>) -> Result<(), BlockError> {
    let mut cur = Cursor::new(body);
    let n = read_header(&mut cur)?;
    ts.resize(n, 0);
    vals.resize(n, Value::Int(0));
    decode_columns_split(&mut cur, ts, vals)
}

fn checksum(bytes: &[u8]) -> u32 {
    xxhash_rust::xxh3::xxh3_64(bytes) as u32
}

#[cfg(test)]
mod tests;
