//! Bit-level helpers for the block codec: a word-at-a-time MSB-first bit writer and reader,
//! fixed-width unpacking, LEB128 varints and zigzag.

use super::BlockError;

/// Number of bits needed to hold `x` (0 for 0).
#[inline]
pub(crate) fn bit_width(x: u64) -> u32 {
    64 - x.leading_zeros()
}

/// Zigzag-maps a signed integer so small magnitudes become small unsigned numbers.
#[inline]
pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline]
pub(crate) fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// Appends `v` as an unsigned LEB128 varint (1..=10 bytes).
#[inline]
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Number of bytes `v` takes as a varint.
#[inline]
pub(crate) fn varint_len(v: u64) -> usize {
    (bit_width(v).max(1) as usize).div_ceil(7)
}

/// A cursor over the block's bytes that reports the absolute offset of any failure.
#[derive(Debug)]
pub(crate) struct Cursor<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    fn truncated(&self, needed: usize) -> BlockError {
        BlockError::Truncated {
            offset: self.pos,
            needed,
            available: self.buf.len() - self.pos,
        }
    }

    pub(crate) fn u8(&mut self) -> Result<u8, BlockError> {
        let b = *self.buf.get(self.pos).ok_or_else(|| self.truncated(1))?;
        self.pos += 1;
        Ok(b)
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], BlockError> {
        let end = self.pos.checked_add(n).ok_or_else(|| self.truncated(n))?;
        let s = self
            .buf
            .get(self.pos..end)
            .ok_or_else(|| self.truncated(n))?;
        self.pos = end;
        Ok(s)
    }

    pub(crate) fn u64_be(&mut self) -> Result<u64, BlockError> {
        let s = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_be_bytes(a))
    }

    pub(crate) fn varint(&mut self) -> Result<u64, BlockError> {
        let start = self.pos;
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.u8()?;
            let part = u64::from(b & 0x7f);
            if i == 9 && b > 1 {
                return Err(BlockError::BadVarint { offset: start });
            }
            v |= part << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(BlockError::BadVarint { offset: start })
    }

    pub(crate) fn width(&mut self) -> Result<u32, BlockError> {
        let offset = self.pos;
        let w = self.u8()?;
        if w > 64 {
            return Err(BlockError::BadWidth { offset, width: w });
        }
        Ok(u32::from(w))
    }

    /// Takes the `ceil(n * width / 8)` bytes of a fixed-width packed run.
    pub(crate) fn packed(&mut self, n: usize, width: u32) -> Result<&'a [u8], BlockError> {
        // n <= MAX_POINTS and width <= 64, so this cannot overflow.
        let bytes = (n * width as usize).div_ceil(8);
        self.bytes(bytes)
    }
}

/// MSB-first bit writer that flushes whole 64-bit words.
#[derive(Debug)]
pub(crate) struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    acc: u128,
    nbits: u32,
}

impl<'a> BitWriter<'a> {
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Self {
        BitWriter {
            out,
            acc: 0,
            nbits: 0,
        }
    }

    /// Writes the low `width` bits of `v` (`width <= 64`; the higher bits of `v` must be zero).
    #[inline]
    pub(crate) fn write(&mut self, v: u64, width: u32) {
        debug_assert!(width <= 64 && (width == 64 || v >> width == 0));
        if width == 0 {
            return;
        }
        // nbits < 64 here, so the accumulator never holds more than 127 bits.
        self.acc = (self.acc << width) | u128::from(v);
        self.nbits += width;
        if self.nbits >= 64 {
            self.nbits -= 64;
            let word = (self.acc >> self.nbits) as u64;
            self.out.extend_from_slice(&word.to_be_bytes());
            self.acc &= (1u128 << self.nbits) - 1;
        }
    }

    /// Flushes the last partial word, padding with zero bits to a byte boundary.
    pub(crate) fn finish(self) {
        if self.nbits > 0 {
            let word = ((self.acc << (64 - self.nbits)) as u64).to_be_bytes();
            self.out
                .extend_from_slice(&word[..(self.nbits as usize).div_ceil(8)]);
        }
    }
}

/// Appends `vals` packed MSB-first at a fixed `width`, padded to a byte boundary.
///
/// Every value must be below `2^width`. Uses a 64-bit accumulator that is left-aligned: the
/// next value goes right after the `filled` bits already in it.
pub(crate) fn pack(out: &mut Vec<u8>, vals: impl ExactSizeIterator<Item = u64>, width: u32) {
    if width == 0 {
        return;
    }
    debug_assert!(width <= 64);
    out.reserve((vals.len() * width as usize).div_ceil(8) + 8);
    let mut acc = 0u64;
    let mut filled = 0u32;
    for v in vals {
        debug_assert!(width == 64 || v >> width == 0);
        if filled + width < 64 {
            acc |= v << (64 - filled - width);
            filled += width;
        } else {
            // Fill the word (1..=64 bits of `v` fit), flush it, keep the rest of `v`.
            let fit = 64 - filled;
            let rest = width - fit;
            acc |= if fit == 64 { v } else { v >> rest };
            out.extend_from_slice(&acc.to_be_bytes());
            filled = rest;
            acc = if rest == 0 { 0 } else { v << (64 - rest) };
        }
    }
    if filled > 0 {
        out.extend_from_slice(&acc.to_be_bytes()[..(filled as usize).div_ceil(8)]);
    }
}

/// Loads 8 bytes big-endian at `byte`, zero-padding past the end of `buf`.
#[inline]
fn load_u64(buf: &[u8], byte: usize) -> u64 {
    match buf.get(byte..byte + 8) {
        Some(s) => {
            let mut a = [0u8; 8];
            a.copy_from_slice(s);
            u64::from_be_bytes(a)
        }
        None => {
            let mut a = [0u8; 8];
            let tail = buf.get(byte..).unwrap_or(&[]);
            a[..tail.len()].copy_from_slice(tail);
            u64::from_be_bytes(a)
        }
    }
}

/// Loads 16 bytes big-endian at `byte`, zero-padding past the end of `buf`.
#[inline]
fn load_u128(buf: &[u8], byte: usize) -> u128 {
    (u128::from(load_u64(buf, byte)) << 64) | u128::from(load_u64(buf, byte + 8))
}

/// Calls `f(slot, v)` for each slot of `dst` and each value packed at `width` in `buf`, in order.
///
/// `buf` must hold at least `ceil(dst.len() * width / 8)` bytes ([`Cursor::packed`] checks
/// that); reads past its end see zeros, so a short buffer yields wrong values, never a panic.
// Always inlined, so the callers' running sums (timestamps, integer deltas) stay in registers.
#[inline(always)]
pub(crate) fn unpack<T>(buf: &[u8], width: u32, dst: &mut [T], mut f: impl FnMut(&mut T, u64)) {
    if width == 0 {
        for d in dst.iter_mut() {
            f(d, 0);
        }
    } else if width <= 56 {
        let w = width as usize;
        // Fast path: every 8-byte load stays inside the buffer.
        let fast = if buf.len() >= 8 {
            ((buf.len() - 8) * 8 / w + 1).min(dst.len())
        } else {
            0
        };
        let (head, tail) = dst.split_at_mut(fast);
        let shift = 64 - width;
        let mut bit = 0usize;
        for d in head.iter_mut() {
            let word = match buf.get(bit >> 3..(bit >> 3) + 8) {
                Some(s) => {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(s);
                    u64::from_be_bytes(a)
                }
                None => 0,
            };
            f(d, (word << (bit & 7)) >> shift);
            bit += w;
        }
        for d in tail.iter_mut() {
            let word = load_u64(buf, bit >> 3);
            f(d, (word << (bit & 7)) >> shift);
            bit += w;
        }
    } else {
        let mut bit = 0usize;
        for d in dst.iter_mut() {
            let word = load_u128(buf, bit >> 3);
            f(d, ((word << (bit & 7)) >> (128 - width)) as u64);
            bit += width as usize;
        }
    }
}

/// Sequential MSB-first bit reader over a byte slice, for variable-length codes (Gorilla).
#[derive(Debug)]
pub(crate) struct BitReader<'a> {
    buf: &'a [u8],
    /// Absolute byte offset of `buf` in the block, for error messages.
    base: usize,
    pos: usize,
}

impl<'a> BitReader<'a> {
    pub(crate) fn new(buf: &'a [u8], base: usize) -> Self {
        BitReader { buf, base, pos: 0 }
    }

    /// Reads `width <= 64` bits.
    #[inline]
    pub(crate) fn read(&mut self, width: u32) -> Result<u64, BlockError> {
        if width == 0 {
            return Ok(0);
        }
        let end = self.pos + width as usize;
        if end > self.buf.len() * 8 {
            return Err(BlockError::Truncated {
                offset: self.base + self.pos / 8,
                needed: (width as usize).div_ceil(8),
                available: self.buf.len() - self.pos / 8,
            });
        }
        let word = load_u128(self.buf, self.pos >> 3);
        let v = ((word << (self.pos & 7)) >> (128 - width)) as u64;
        self.pos = end;
        Ok(v)
    }

    /// Bytes consumed so far, counting a partial last byte.
    pub(crate) fn bytes_used(&self) -> usize {
        self.pos.div_ceil(8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_and_zigzag_round_trip() {
        for v in [0i64, 1, -1, 63, -64, 64, i64::MIN, i64::MAX, 1 << 40] {
            assert_eq!(unzigzag(zigzag(v)), v);
            let mut out = Vec::new();
            put_varint(&mut out, zigzag(v));
            assert_eq!(out.len(), varint_len(zigzag(v)));
            let mut c = Cursor::new(&out);
            assert_eq!(c.varint().unwrap(), zigzag(v));
            assert_eq!(c.pos, out.len());
        }
    }

    #[test]
    fn pack_unpack_every_width() {
        for width in 0..=64u32 {
            let mask = if width == 64 {
                u64::MAX
            } else {
                (1u64 << width) - 1
            };
            let vals: Vec<u64> = (0..37u64)
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & mask)
                .collect();
            let mut out = Vec::new();
            pack(&mut out, vals.iter().copied(), width);
            assert_eq!(out.len(), (vals.len() * width as usize).div_ceil(8));
            let mut got = vec![0u64; vals.len()];
            unpack(&out, width, &mut got, |d, v| *d = v);
            assert_eq!(got, vals, "width {width}");
            let mut r = BitReader::new(&out, 0);
            for &v in &vals {
                assert_eq!(r.read(width).unwrap(), v);
            }
        }
    }
}
