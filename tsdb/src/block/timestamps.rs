//! The timestamp column: first timestamp, minimum delta, and the per-point excess over that
//! minimum, bit-packed at one width per block.

use super::BlockError;
use super::bits::{Cursor, bit_width, pack, put_varint, unpack, unzigzag, zigzag};

/// Encodes the timestamps of `items` (`len >= 1`), read by `ts`, or returns the index of the
/// first one that does not increase (then `out` may hold a partial column).
///
/// Layout: `zigzag varint t0`, then for `n >= 2`: `varint min_delta`, `u8 width`,
/// `(n - 1)` packed `delta - min_delta`.
pub(crate) fn encode<T>(
    items: &[T],
    ts: impl Fn(&T) -> i64,
    out: &mut Vec<u8>,
) -> Result<(), usize> {
    let Some(first) = items.first() else {
        return Ok(());
    };
    put_varint(out, zigzag(ts(first)));
    if items.len() < 2 {
        return Ok(());
    }
    // Once ordering is checked, deltas are positive and, as u64, exact for any two i64s.
    let delta = |w: &[T]| ts(&w[1]).wrapping_sub(ts(&w[0])) as u64;
    let (mut min, mut max) = (u64::MAX, 0u64);
    let mut increasing = true;
    for w in items.windows(2) {
        increasing &= ts(&w[1]) > ts(&w[0]);
        let d = delta(w);
        min = min.min(d);
        max = max.max(d);
    }
    if !increasing {
        let bad = items.windows(2).position(|w| ts(&w[1]) <= ts(&w[0]));
        return Err(bad.map_or(0, |i| i + 1));
    }
    let width = bit_width(max - min);
    put_varint(out, min);
    out.push(width as u8);
    pack(out, items.windows(2).map(|w| delta(w) - min), width);
    Ok(())
}

/// Decodes `dst.len() >= 1` timestamps, calling `set` on each slot, and checks they strictly
/// increase.
pub(crate) fn decode<T>(
    cur: &mut Cursor<'_>,
    dst: &mut [T],
    set: impl Fn(&mut T, i64),
) -> Result<(), BlockError> {
    let start = cur.pos;
    let t0 = unzigzag(cur.varint()?);
    let Some((first, rest)) = dst.split_first_mut() else {
        return Ok(());
    };
    set(first, t0);
    if rest.is_empty() {
        return Ok(());
    }
    let min_offset = cur.pos;
    let min = cur.varint()?;
    if min == 0 {
        return Err(BlockError::Corrupt {
            offset: min_offset,
            what: "timestamp minimum delta is zero",
        });
    }
    let width = cur.width()?;
    let packed = cur.packed(rest.len(), width)?;
    let not_increasing = || BlockError::Corrupt {
        offset: start,
        what: "timestamps overflow i64 or do not increase",
    };
    let mut t = t0;
    if width == 0 {
        // Constant interval: check the last timestamp fits once, then no per-point checks.
        let last = i128::from(t0) + i128::from(min) * rest.len() as i128;
        if last > i128::from(i64::MAX) {
            return Err(not_increasing());
        }
        for slot in rest.iter_mut() {
            t = t.wrapping_add(min as i64);
            set(slot, t);
        }
        return Ok(());
    }
    let mut ok = true;
    unpack(packed, width, rest, |slot, r| {
        let d = min.wrapping_add(r);
        let next = t.wrapping_add(d as i64);
        // A delta below `min` (u64 wrap) or a sum past i64::MAX shows as a non-increase.
        ok &= (next > t) & (d >= min);
        t = next;
        set(slot, t);
    });
    if ok { Ok(()) } else { Err(not_increasing()) }
}

/// Decodes `n >= 1` timestamps and appends `make(t)` for each to `out`, checking they strictly
/// increase. A regular column (width 0, the common case) is written in one pass with no
/// placeholder values; on error `out` may hold extra elements for the caller to truncate.
pub(crate) fn decode_extend<T>(
    cur: &mut Cursor<'_>,
    n: usize,
    out: &mut Vec<T>,
    make: impl Fn(i64) -> T,
) -> Result<(), BlockError> {
    if n == 0 {
        return Ok(());
    }
    let start = cur.pos;
    let t0 = unzigzag(cur.varint()?);
    if n == 1 {
        out.push(make(t0));
        return Ok(());
    }
    let min_offset = cur.pos;
    let min = cur.varint()?;
    if min == 0 {
        return Err(BlockError::Corrupt {
            offset: min_offset,
            what: "timestamp minimum delta is zero",
        });
    }
    let width = cur.width()?;
    let packed = cur.packed(n - 1, width)?;
    let not_increasing = || BlockError::Corrupt {
        offset: start,
        what: "timestamps overflow i64 or do not increase",
    };
    if width == 0 {
        // Constant interval: check the last timestamp fits once; then `t0 + i * min` is exact
        // for every `i` (computed wrapping, as the sum stays in range).
        let last = i128::from(t0) + i128::from(min) * (n - 1) as i128;
        if last > i128::from(i64::MAX) {
            return Err(not_increasing());
        }
        let step = min as i64;
        out.extend((0..n as i64).map(|i| make(t0.wrapping_add(i.wrapping_mul(step)))));
        return Ok(());
    }
    let first = out.len();
    out.resize_with(first + n, || make(t0));
    let mut t = t0;
    let mut ok = true;
    unpack(packed, width, &mut out[first + 1..], |slot, r| {
        let d = min.wrapping_add(r);
        let next = t.wrapping_add(d as i64);
        // A delta below `min` (u64 wrap) or a sum past i64::MAX shows as a non-increase.
        ok &= (next > t) & (d >= min);
        t = next;
        *slot = make(t);
    });
    if ok { Ok(()) } else { Err(not_increasing()) }
}
