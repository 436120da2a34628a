//! Gorilla XOR float compression (Pelkonen et al., VLDB 2015), the fallback for floats that are
//! not short decimals.
//!
//! Layout (one MSB-first bit stream, zero-padded to a byte): the first value's 64 bits, then per
//! value `x = bits ^ prev_bits`: `0` if `x == 0`; `10` + the meaningful bits if `x` fits the
//! previous leading/trailing-zero window; else `11`, 5 bits of leading zeros (capped at 31),
//! 6 bits of `meaningful_bits - 1`, and the meaningful bits.

use super::BlockError;
use super::bits::{BitReader, BitWriter, Cursor};

/// Encodes `vals.len() >= 1` floats.
pub(crate) fn encode(vals: &[f64], out: &mut Vec<u8>) {
    let Some((first, rest)) = vals.split_first() else {
        return;
    };
    let mut w = BitWriter::new(out);
    let mut prev = first.to_bits();
    w.write(prev, 64);
    // No window yet: force the first non-zero XOR to write its own.
    let (mut lead, mut trail) = (u32::MAX, u32::MAX);
    for v in rest {
        let bits = v.to_bits();
        let x = bits ^ prev;
        prev = bits;
        if x == 0 {
            w.write(0, 1);
            continue;
        }
        let l = x.leading_zeros().min(31);
        let t = x.trailing_zeros();
        if lead != u32::MAX && l >= lead && t >= trail {
            w.write(0b10, 2);
            w.write(x >> trail, 64 - lead - trail);
        } else {
            let sig = 64 - l - t;
            w.write(0b11, 2);
            w.write(u64::from(l), 5);
            w.write(u64::from(sig - 1), 6);
            w.write(x >> t, sig);
            lead = l;
            trail = t;
        }
    }
    w.finish();
}

/// Decodes `dst.len() >= 1` floats, calling `set` on each slot.
pub(crate) fn decode<T>(
    cur: &mut Cursor<'_>,
    dst: &mut [T],
    set: impl Fn(&mut T, f64),
) -> Result<(), BlockError> {
    let base = cur.pos;
    let rest = cur.buf.get(cur.pos..).unwrap_or_default();
    let mut r = BitReader::new(rest, base);
    let Some((first, rest)) = dst.split_first_mut() else {
        return Ok(());
    };
    let mut prev = r.read(64)?;
    set(first, f64::from_bits(prev));
    let (mut lead, mut trail) = (u32::MAX, u32::MAX);
    for slot in rest.iter_mut() {
        if r.read(1)? == 1 {
            if r.read(1)? == 0 {
                if lead == u32::MAX {
                    return Err(BlockError::Corrupt {
                        offset: base + r.bytes_used(),
                        what: "gorilla window reused before one was set",
                    });
                }
            } else {
                lead = r.read(5)? as u32;
                let sig = r.read(6)? as u32 + 1;
                if lead + sig > 64 {
                    return Err(BlockError::Corrupt {
                        offset: base + r.bytes_used(),
                        what: "gorilla window wider than 64 bits",
                    });
                }
                trail = 64 - lead - sig;
            }
            prev ^= r.read(64 - lead - trail)? << trail;
        }
        set(slot, f64::from_bits(prev));
    }
    cur.pos += r.bytes_used();
    Ok(())
}
