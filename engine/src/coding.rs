//! Byte codecs shared by every format: unsigned LEB128 varints and big-endian fixed-width
//! integers (the conventions at the top of `FORMAT.md`).
//!
//! A varint holds 7 bits per byte, least significant group first, with the high bit set on
//! every byte but the last: at most 5 bytes for a u32 and 10 for a u64. Decoders reject a
//! varint that is truncated or does not fit in a u64, and never panic.

/// Appends `v` as an unsigned LEB128 varint.
#[inline]
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bytes [`put_varint`] writes for `v`.
#[inline]
pub(crate) fn varint_size(v: u64) -> usize {
    (64 - v.leading_zeros() as usize).max(1).div_ceil(7)
}

/// Reads a LEB128 varint from the front of `buf`, advancing it.
pub(crate) fn get_varint(buf: &mut &[u8]) -> Result<u64, &'static str> {
    let mut v: u64 = 0;
    for i in 0..10 {
        let (&b, rest) = buf.split_first().ok_or("truncated varint")?;
        *buf = rest;
        if i == 9 && b > 1 {
            return Err("varint overflows u64");
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("varint longer than 10 bytes")
}

/// Converts a decoded length to `usize`.
pub(crate) fn usize_len(v: u64) -> Result<usize, &'static str> {
    usize::try_from(v).map_err(|_| "length does not fit in memory")
}

/// Takes `n` bytes from the front of `buf`, advancing it.
pub(crate) fn take<'a>(buf: &mut &'a [u8], n: usize) -> Result<&'a [u8], &'static str> {
    if buf.len() < n {
        return Err("length runs past the end of its buffer");
    }
    let (head, rest) = buf.split_at(n);
    *buf = rest;
    Ok(head)
}

/// Reads a big-endian u32 from the first 4 bytes of `b` (which the caller sized).
#[inline]
pub(crate) fn be_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_be_bytes(a)
}

/// Reads a big-endian u64 from the first 8 bytes of `b` (which the caller sized).
#[inline]
pub(crate) fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// A reader over encoded bytes; every method returns `None` on truncated or malformed input.
#[derive(Debug)]
pub(crate) struct Cursor<'a>(pub(crate) &'a [u8]);

impl<'a> Cursor<'a> {
    #[inline]
    pub(crate) fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    #[inline]
    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }

    /// An unsigned LEB128 varint of at most 10 bytes that fits in a u64; rejects overlong
    /// encodings' overflow.
    // The one-byte case inlined into every caller: the lengths and ids of a batch's
    // operations and of block entries are nearly all below 128, and a call per varint took
    // as long as the decoding.
    #[inline(always)]
    pub(crate) fn varint(&mut self) -> Option<u64> {
        if let Some((&b, rest)) = self.0.split_first()
            && b < 0x80
        {
            self.0 = rest;
            return Some(u64::from(b));
        }
        self.varint_long()
    }

    #[inline(never)]
    fn varint_long(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.byte()?;
            let bits = u64::from(b & 0x7f);
            if i == 9 && bits > 1 {
                return None;
            }
            v |= bits << (7 * i);
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    #[inline]
    pub(crate) fn varint_u32(&mut self) -> Option<u32> {
        self.varint().and_then(|v| u32::try_from(v).ok())
    }

    #[inline]
    pub(crate) fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint()?).ok()?;
        self.take(n)
    }
}

/// Lowercase hex of `bytes`, for the frozen format fixtures of tests.
#[cfg(test)]
pub(crate) fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of a hex fixture.
#[cfg(test)]
pub(crate) fn from_hex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex fixture"))
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn varint_round_trips(v in any::<u64>()) {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            prop_assert_eq!(buf.len(), varint_size(v));
            let mut s = buf.as_slice();
            prop_assert_eq!(get_varint(&mut s), Ok(v));
            prop_assert!(s.is_empty());
        }

        #[test]
        fn cursor_varint_round_trips(v in any::<u64>()) {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            let mut c = Cursor(&out);
            prop_assert_eq!(c.varint(), Some(v));
            prop_assert!(c.0.is_empty());
        }

        #[test]
        fn cursor_and_get_varint_agree(bytes in proptest::collection::vec(any::<u8>(), 0..14)) {
            let mut s = bytes.as_slice();
            let mut c = Cursor(&bytes);
            prop_assert_eq!(get_varint(&mut s).ok(), c.varint());
        }
    }
}
