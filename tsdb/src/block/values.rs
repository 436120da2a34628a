//! The value column: integer columns (frame of reference or delta), float columns (constant,
//! decimal-scaled integers, or Gorilla XOR) and the per-point type bitmap of mixed rows.

use super::bits::{Cursor, bit_width, pack, put_varint, unpack, unzigzag, varint_len, zigzag};
use super::{BlockError, gorilla};
use crate::Value;

/// Value column layout tags.
pub(crate) const LAYOUT_INT: u8 = 0;
pub(crate) const LAYOUT_FLOAT: u8 = 1;
pub(crate) const LAYOUT_MIXED: u8 = 2;

/// Integer column encodings.
const INT_FOR: u8 = 0;
const INT_DELTA: u8 = 1;

/// Float column encodings.
const FLOAT_CONST: u8 = 0;
const FLOAT_DECIMAL: u8 = 1;
const FLOAT_GORILLA: u8 = 2;

/// Largest decimal scale tried. 10^15 is exact in an f64, and with |m| <= 2^53 the decoder's
/// `m as f64 / 10^k` is then one correctly rounded division.
pub(crate) const MAX_SCALE: u32 = 15;

/// Largest mantissa magnitude: beyond 2^53 `m as f64` would itself round.
const MAX_MANTISSA: f64 = 9_007_199_254_740_992.0;

/// Above this many bits per value a decimal column is compared with a trial Gorilla encoding.
/// Below it the trial is skipped: on decimal data Gorilla's XORs are wide (about 50 bits a value
/// on the one-decimal gauge of `bytes_per_point_by_shape`), so it practically never wins there.
const DECIMAL_COMPARE_BITS: u32 = 14;

const POW10: [f64; MAX_SCALE as usize + 1] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// Appends the value column for the values of `points` (`len >= 1`).
pub(crate) fn encode(points: &[(i64, Value)], out: &mut Vec<u8>) {
    // Most rows hold one type: count first, then collect just that column in one tight pass.
    let floats = points.iter().filter(|p| p.1.is_float()).count();
    if floats == 0 {
        out.push(LAYOUT_INT);
        let ints: Vec<i64> = points.iter().map(|p| int_bits(p.1)).collect();
        encode_ints(&ints, out);
    } else if floats == points.len() {
        out.push(LAYOUT_FLOAT);
        let fs: Vec<f64> = points.iter().map(|p| p.1.as_f64()).collect();
        encode_floats(&fs, out);
    } else {
        out.push(LAYOUT_MIXED);
        let mut bitmap = vec![0u8; points.len().div_ceil(8)];
        let mut ints = Vec::with_capacity(points.len() - floats);
        let mut fs = Vec::with_capacity(floats);
        for (i, p) in points.iter().enumerate() {
            match p.1 {
                Value::Int(v) => ints.push(v),
                Value::Float(f) => {
                    fs.push(f);
                    bitmap[i / 8] |= 0x80 >> (i % 8);
                }
            }
        }
        out.extend_from_slice(&bitmap);
        encode_ints(&ints, out);
        encode_floats(&fs, out);
    }
}

/// The integer of an integer value (callers only pass integers; a float maps to its bits).
#[inline]
fn int_bits(v: Value) -> i64 {
    match v {
        Value::Int(i) => i,
        Value::Float(f) => f.to_bits() as i64,
    }
}

/// Decodes `dst.len() >= 1` values, calling `set` on each slot.
pub(crate) fn decode<T>(
    cur: &mut Cursor<'_>,
    dst: &mut [T],
    set: impl Fn(&mut T, Value),
) -> Result<(), BlockError> {
    let offset = cur.pos;
    let n = dst.len();
    match cur.u8()? {
        LAYOUT_INT => decode_ints(cur, dst, |d, v| set(d, Value::Int(v)))?,
        LAYOUT_FLOAT => decode_floats(cur, dst, |d, v| set(d, Value::Float(v)))?,
        LAYOUT_MIXED => {
            let bitmap = cur.bytes(n.div_ceil(8))?;
            let is_float = |i: usize| bitmap[i / 8] & (0x80 >> (i % 8)) != 0;
            let floats = (0..n).filter(|&i| is_float(i)).count();
            let mut ints = vec![0i64; n - floats];
            let mut fs = vec![0f64; floats];
            decode_ints(cur, &mut ints, |d, v| *d = v)?;
            decode_floats(cur, &mut fs, |d, v| *d = v)?;
            let (mut ii, mut fi) = (ints.into_iter(), fs.into_iter());
            for (i, slot) in dst.iter_mut().enumerate() {
                let v = if is_float(i) {
                    fi.next().map(Value::Float)
                } else {
                    ii.next().map(Value::Int)
                };
                // The counts above match the bitmap, so `None` cannot happen.
                set(slot, v.unwrap_or(Value::Int(0)));
            }
        }
        tag => {
            return Err(BlockError::BadTag {
                offset,
                what: "value layout",
                tag,
            });
        }
    }
    Ok(())
}

/// A decimal column's scale `k`, and 10^k.
fn decimal_scale(cur: &mut Cursor<'_>) -> Result<(u8, f64), BlockError> {
    let offset = cur.pos;
    let k = cur.u8()?;
    match POW10.get(usize::from(k)) {
        Some(&p) => Ok((k, p)),
        None => Err(BlockError::BadTag {
            offset,
            what: "decimal scale",
            tag: k,
        }),
    }
}

/// [`decode`] into f64s. A decimal column is decoded in two passes, mantissas then one
/// division each, so that the divisions, the slow part, run in vector registers.
pub(crate) fn decode_f64s(cur: &mut Cursor<'_>, dst: &mut [f64]) -> Result<(), BlockError> {
    let offset = cur.pos;
    if dst.is_empty() || cur.u8()? != LAYOUT_FLOAT || cur.u8()? != FLOAT_DECIMAL {
        cur.pos = offset;
        return decode(cur, dst, |d, v| *d = v.as_f64());
    }
    let (k, p) = decimal_scale(cur)?;
    decode_ints(cur, dst, |slot, m| *slot = m as f64)?;
    if k > 0 {
        // The same `m as f64 / p` as `decode_floats`, bit for bit.
        for d in dst.iter_mut() {
            *d /= p;
        }
    }
    Ok(())
}

/// Appends an integer column for `ints` (any length; nothing is written for 0 values).
///
/// Layout: `u8 kind`, then for `INT_FOR`: `zigzag varint min`, `u8 width`, `n` packed `v - min`;
/// for `INT_DELTA`: `zigzag varint v0`, and for `n >= 2`: `zigzag varint min_delta`, `u8 width`,
/// `n - 1` packed `delta - min_delta`. All arithmetic wraps modulo 2^64.
pub(crate) fn encode_ints(ints: &[i64], out: &mut Vec<u8>) {
    let Some(&first) = ints.first() else {
        return;
    };
    let (mut min, mut max) = (first, first);
    // Deltas are taken over the pairs only; with one value they are unused.
    let (mut dmin, mut dmax) = (i64::MAX, i64::MIN);
    let mut prev = first;
    for &v in &ints[1..] {
        min = min.min(v);
        max = max.max(v);
        let d = v.wrapping_sub(prev);
        dmin = dmin.min(d);
        dmax = dmax.max(d);
        prev = v;
    }
    let for_width = bit_width(max.wrapping_sub(min) as u64);
    let for_bits = varint_len(zigzag(min)) * 8 + ints.len() * for_width as usize;
    let delta_width = bit_width(dmax.wrapping_sub(dmin) as u64);
    let delta_bits = (varint_len(zigzag(first)) + varint_len(zigzag(dmin))) * 8
        + (ints.len() - 1) * delta_width as usize;
    if ints.len() >= 2 && delta_bits < for_bits {
        out.push(INT_DELTA);
        put_varint(out, zigzag(first));
        put_varint(out, zigzag(dmin));
        out.push(delta_width as u8);
        pack(
            out,
            ints.windows(2)
                .map(|w| w[1].wrapping_sub(w[0]).wrapping_sub(dmin) as u64),
            delta_width,
        );
    } else {
        out.push(INT_FOR);
        put_varint(out, zigzag(min));
        out.push(for_width as u8);
        pack(
            out,
            ints.iter().map(|v| v.wrapping_sub(min) as u64),
            for_width,
        );
    }
}

/// Decodes an integer column of `dst.len()` values (nothing is read for 0), calling `set` on
/// each slot.
pub(crate) fn decode_ints<T>(
    cur: &mut Cursor<'_>,
    dst: &mut [T],
    set: impl Fn(&mut T, i64),
) -> Result<(), BlockError> {
    if dst.is_empty() {
        return Ok(());
    }
    let offset = cur.pos;
    match cur.u8()? {
        INT_FOR => {
            let min = unzigzag(cur.varint()?);
            let width = cur.width()?;
            let packed = cur.packed(dst.len(), width)?;
            if width == 0 {
                for slot in dst.iter_mut() {
                    set(slot, min);
                }
            } else {
                unpack(packed, width, dst, |slot, r| {
                    set(slot, min.wrapping_add(r as i64))
                });
            }
        }
        INT_DELTA => {
            let mut v = unzigzag(cur.varint()?);
            let Some((first, rest)) = dst.split_first_mut() else {
                return Ok(());
            };
            set(first, v);
            if !rest.is_empty() {
                let dmin = unzigzag(cur.varint()?);
                let width = cur.width()?;
                let packed = cur.packed(rest.len(), width)?;
                unpack(packed, width, rest, |slot, r| {
                    v = v.wrapping_add(dmin.wrapping_add(r as i64));
                    set(slot, v);
                });
            }
        }
        tag => {
            return Err(BlockError::BadTag {
                offset,
                what: "integer column kind",
                tag,
            });
        }
    }
    Ok(())
}

/// The smallest scale `k >= from` at which `v` is exactly `m / 10^k`, and that `m`.
#[inline]
fn decimal_at(v: f64, from: u32) -> Option<(u32, i64)> {
    let bits = v.to_bits();
    for k in from..=MAX_SCALE {
        let p = POW10[k as usize];
        let x = v * p;
        // `is_nan` also rules out NaN; infinities fail the bound. Larger scales only grow the
        // mantissa, so stop here.
        if x.is_nan() || x.abs() >= MAX_MANTISSA {
            return None;
        }
        // Round half away from zero without `f64::round`, which is a libm call on baseline
        // x86-64. The check below decides; a wrong guess only costs compression.
        let m = (x + 0.5f64.copysign(x)) as i64;
        if ((m as f64) / p).to_bits() == bits {
            return Some((k, m));
        }
    }
    None
}

/// `1.5 * 2^52`: adding and subtracting it rounds an f64 below 2^51 in magnitude to an integer
/// (ties to even) with plain additions, which vectorize, unlike a float-to-int conversion.
const ROUNDER: f64 = 6_755_399_441_055_744.0;
/// Magnitude below which [`ROUNDER`] rounds exactly (2^51).
const ROUNDER_LIMIT: f64 = 2_251_799_813_685_248.0;
/// Values whose scale is searched one by one before the rest are checked at that scale.
const SCALE_PROBE: usize = 32;

/// Finds one scale `k` and mantissas with `m_i as f64 / 10^k == vals[i]` bit for bit.
///
/// The scale the first values need is usually the scale of them all (a gauge keeps its number
/// of decimals), so it is found on a probe of [`SCALE_PROBE`] values and then checked on every
/// value in one branch-free pass; only when that fails does the value-by-value search run.
fn decimal_mantissas(vals: &[f64]) -> Option<(u32, Vec<i64>)> {
    let probe = &vals[..vals.len().min(SCALE_PROBE)];
    // A value that fails on its own fails in any company, so a failed probe ends the search.
    let (k, probe_ms) = decimal_search(probe)?;
    if probe.len() == vals.len() {
        return Some((k, probe_ms));
    }
    match mantissas_at(vals, k) {
        Some(ms) => Some((k, ms)),
        None => decimal_search(vals),
    }
}

/// The mantissas of `vals` at scale `k` if every value is exactly `m / 10^k` with
/// `|m| < 2^51`. Rounds half to even where `decimal_at` rounds half away from zero, which only
/// matters at a tie, and a value at a tie is never exact at that scale.
fn mantissas_at(vals: &[f64], k: u32) -> Option<Vec<i64>> {
    let p = POW10[k as usize];
    let mut exact = true;
    for &v in vals {
        let x = v * p;
        let r = (x + ROUNDER) - ROUNDER;
        // `abs() < limit` is false for NaN and infinities; the bit comparison keeps -0.0 apart.
        exact &= (x.abs() < ROUNDER_LIMIT) & ((r / p).to_bits() == v.to_bits());
    }
    if !exact {
        return None;
    }
    // `v * p + ROUNDER` lies in [2^52, 2^53), where the f64's bits count in steps of one: its
    // bits minus those of ROUNDER are the rounded mantissa (no float-to-int conversion).
    let base = ROUNDER.to_bits() as i64;
    Some(
        vals.iter()
            .map(|&v| ((v * p + ROUNDER).to_bits() as i64).wrapping_sub(base))
            .collect(),
    )
}

/// The value-by-value search for [`decimal_mantissas`]: raises the scale as values need it.
fn decimal_search(vals: &[f64]) -> Option<(u32, Vec<i64>)> {
    let mut k = 0u32;
    let mut p = 1.0f64;
    let mut ms: Vec<i64> = Vec::with_capacity(vals.len());
    for &v in vals {
        // Fast path: the value fits the current scale (the common case once `k` is found).
        let x = v * p;
        if x.abs() < MAX_MANTISSA {
            let m = (x + 0.5f64.copysign(x)) as i64;
            if ((m as f64) / p).to_bits() == v.to_bits() {
                ms.push(m);
                continue;
            }
        }
        let (kv, m) = decimal_at(v, k + 1)?;
        if kv > k {
            // Rescale the earlier mantissas: the same reals at a finer scale, so the decoder's
            // correctly rounded division still gives the same f64, as long as they stay exact.
            let f = 10i64.pow(kv - k);
            for prev in ms.iter_mut() {
                let scaled = prev.checked_mul(f)?;
                if scaled.unsigned_abs() > MAX_MANTISSA as u64 {
                    return None;
                }
                *prev = scaled;
            }
            k = kv;
            p = POW10[k as usize];
        }
        ms.push(m);
    }
    Some((k, ms))
}

/// Appends a float column for `vals` (any length; nothing is written for 0 values).
///
/// Layout: `u8 kind`, then for `FLOAT_CONST`: the value's 8 bytes big-endian; for
/// `FLOAT_DECIMAL`: `u8 scale k`, then an integer column of mantissas; for `FLOAT_GORILLA`: the
/// Gorilla bit stream.
pub(crate) fn encode_floats(vals: &[f64], out: &mut Vec<u8>) {
    let Some(first) = vals.first() else {
        return;
    };
    let first_bits = first.to_bits();
    if vals.iter().all(|v| v.to_bits() == first_bits) {
        out.push(FLOAT_CONST);
        out.extend_from_slice(&first_bits.to_be_bytes());
        return;
    }
    if let Some((k, ms)) = decimal_mantissas(vals) {
        let start = out.len();
        out.push(FLOAT_DECIMAL);
        out.push(k as u8);
        encode_ints(&ms, out);
        let decimal_len = out.len() - start;
        if decimal_len * 8 <= DECIMAL_COMPARE_BITS as usize * vals.len() {
            return;
        }
        let mut trial = vec![FLOAT_GORILLA];
        gorilla::encode(vals, &mut trial);
        if trial.len() < decimal_len {
            out.truncate(start);
            out.extend_from_slice(&trial);
        }
        return;
    }
    out.push(FLOAT_GORILLA);
    gorilla::encode(vals, out);
}

/// Decodes a float column of `dst.len()` values (nothing is read for 0), calling `set` on each
/// slot.
pub(crate) fn decode_floats<T>(
    cur: &mut Cursor<'_>,
    dst: &mut [T],
    set: impl Fn(&mut T, f64),
) -> Result<(), BlockError> {
    if dst.is_empty() {
        return Ok(());
    }
    let offset = cur.pos;
    match cur.u8()? {
        FLOAT_CONST => {
            let v = f64::from_bits(cur.u64_be()?);
            for slot in dst.iter_mut() {
                set(slot, v);
            }
        }
        FLOAT_DECIMAL => {
            let (k, p) = decimal_scale(cur)?;
            if k == 0 {
                // Integral floats: the division by 1 is exact, so skip it.
                decode_ints(cur, dst, |slot, m| set(slot, m as f64))?;
            } else {
                decode_ints(cur, dst, |slot, m| set(slot, m as f64 / p))?;
            }
        }
        FLOAT_GORILLA => gorilla::decode(cur, dst, set)?,
        tag => {
            return Err(BlockError::BadTag {
                offset,
                what: "float column kind",
                tag,
            });
        }
    }
    Ok(())
}
