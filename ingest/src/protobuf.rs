//! A protobuf wire-format reader over a byte slice: fields come out borrowing the input, so a
//! message is walked without allocating (`prost` copies or reference-counts each string).
//!
//! Only what remote write needs: varint, 64-bit, length-delimited and 32-bit fields. Groups
//! (wire types 3 and 4, deprecated since proto2) are refused as malformed.

/// A malformed message, with what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WireError(pub(crate) &'static str);

/// One field's value as it is on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireValue<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 2.
    Bytes(&'a [u8]),
    /// Wire type 5.
    Fixed32(u32),
}

/// Reads the fields of one message in order.
#[derive(Debug, Clone)]
pub(crate) struct FieldReader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> FieldReader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        FieldReader { buf, at: 0 }
    }

    /// Where the next field starts.
    pub(crate) fn position(&self) -> usize {
        self.at
    }

    /// The next field's bytes if its key is the one byte `key` (a length-delimited field)
    /// and its length one byte too, as nearly every label and sample is; `None`, reading
    /// nothing, otherwise.
    #[inline(always)]
    pub(crate) fn short_bytes(&mut self, key: u8) -> Option<&'a [u8]> {
        let [k, len, ..] = *self.buf.get(self.at..)? else {
            return None;
        };
        if k != key || len >= 0x80 {
            return None;
        }
        let start = self.at + 2;
        let out = self.buf.get(start..start + usize::from(len))?;
        self.at = start + usize::from(len);
        Some(out)
    }

    /// The next field number and value, `None` at the end of the message.
    // Inlined into each message walk: returned through memory, the field costs a store and a
    // load that the caller waits on, several times a label.
    #[inline(always)]
    pub(crate) fn next_field(&mut self) -> Result<Option<(u32, WireValue<'a>)>, WireError> {
        if self.at == self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let field = u32::try_from(key >> 3).map_err(|_| WireError("field number too large"))?;
        if field == 0 {
            return Err(WireError("field number 0"));
        }
        let value = match key & 7 {
            0 => WireValue::Varint(self.varint()?),
            1 => WireValue::Fixed64(u64::from_le_bytes(self.take_array()?)),
            2 => {
                let len =
                    usize::try_from(self.varint()?).map_err(|_| WireError("length too large"))?;
                WireValue::Bytes(self.take(len)?)
            }
            5 => WireValue::Fixed32(u32::from_le_bytes(self.take_array()?)),
            _ => return Err(WireError("unsupported wire type")),
        };
        Ok(Some((field, value)))
    }

    #[inline(always)]
    fn take(&mut self, len: usize) -> Result<&'a [u8], WireError> {
        let end = self
            .at
            .checked_add(len)
            .filter(|&e| e <= self.buf.len())
            .ok_or(WireError("message truncated"))?;
        let out = &self.buf[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let b = self.take(N)?;
        let mut out = [0; N];
        out.copy_from_slice(b);
        Ok(out)
    }

    /// Reads a varint at the position.
    #[inline(always)]
    pub(crate) fn varint(&mut self) -> Result<u64, WireError> {
        // Field keys and the lengths of names and values are nearly always one byte.
        if let Some(&b) = self.buf.get(self.at)
            && b < 0x80
        {
            self.at += 1;
            return Ok(u64::from(b));
        }
        self.varint_long()
    }

    #[inline(never)]
    fn varint_long(&mut self) -> Result<u64, WireError> {
        let mut out = 0u64;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.at) else {
                return Err(WireError("message truncated"));
            };
            self.at += 1;
            if i == 9 && b > 1 {
                return Err(WireError("varint overflows 64 bits"));
            }
            out |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(out);
            }
        }
        Err(WireError("varint overflows 64 bits"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_bytes_reads_only_a_one_byte_key_and_length() {
        let msg = [0x0a, 2, b'h', b'i', 0x12, 1, b'x'];
        let mut r = FieldReader::new(&msg);
        assert_eq!(r.short_bytes(0x0a), Some(&b"hi"[..]));
        assert_eq!(r.position(), 4);
        // Another key, or the end, reads nothing.
        assert_eq!(r.short_bytes(0x0a), None);
        assert_eq!(r.position(), 4);
        assert_eq!(r.short_bytes(0x12), Some(&b"x"[..]));
        assert_eq!(r.short_bytes(0x12), None);
        // A two-byte length and a truncated field are left to the general walk.
        let long = [0x0a, 0x80, 0x01];
        assert_eq!(FieldReader::new(&long).short_bytes(0x0a), None);
        let truncated = [0x0a, 5, b'a'];
        let mut r = FieldReader::new(&truncated);
        assert_eq!(r.short_bytes(0x0a), None);
        assert_eq!(r.position(), 0);
        assert!(r.next_field().is_err());
    }

    #[test]
    fn reads_each_wire_type() {
        // 1: varint 300, 2: "hi", 3: fixed64 1, 4: fixed32 2.
        let msg = [
            0x08, 0xac, 0x02, 0x12, 2, b'h', b'i', 0x19, 1, 0, 0, 0, 0, 0, 0, 0, 0x25, 2, 0, 0, 0,
        ];
        let mut r = FieldReader::new(&msg);
        assert_eq!(r.next_field(), Ok(Some((1, WireValue::Varint(300)))));
        assert_eq!(r.next_field(), Ok(Some((2, WireValue::Bytes(b"hi")))));
        assert_eq!(r.next_field(), Ok(Some((3, WireValue::Fixed64(1)))));
        assert_eq!(r.next_field(), Ok(Some((4, WireValue::Fixed32(2)))));
        assert_eq!(r.next_field(), Ok(None));
    }

    #[test]
    fn malformed_input_is_an_error() {
        for bad in [
            &[0x12, 5, b'a'][..],
            &[0x08],
            &[0x00, 0x01],
            &[0x0b],
            &[
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02,
            ],
            &[0x19, 1, 2],
        ] {
            assert!(FieldReader::new(bad).next_field().is_err(), "{bad:?}");
        }
    }

    proptest! {
        /// Fields read back as prost wrote them.
        #[test]
        fn agrees_with_prost(v in any::<u64>(), s in prop::collection::vec(any::<u8>(), 0..300),
                             d in any::<f64>()) {
            let mut buf = Vec::new();
            prost::encoding::uint64::encode(7, &v, &mut buf);
            prost::encoding::bytes::encode(9, &s, &mut buf);
            prost::encoding::double::encode(1, &d, &mut buf);
            let mut r = FieldReader::new(&buf);
            prop_assert_eq!(r.next_field(), Ok(Some((7, WireValue::Varint(v)))));
            prop_assert_eq!(r.next_field(), Ok(Some((9, WireValue::Bytes(&s[..])))));
            prop_assert_eq!(r.next_field(), Ok(Some((1, WireValue::Fixed64(d.to_bits())))));
            prop_assert_eq!(r.next_field(), Ok(None));
        }
    }
}
