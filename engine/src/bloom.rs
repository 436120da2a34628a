//! Bloom filters over rowkeys (and optionally rowkey+column).
//!
//! ## Format
//!
//! ```text
//! +-------------------------------+------------------+
//! | bit array (m bytes, m >= 8)    | probes (k) u8    |
//! +-------------------------------+------------------+
//! ```
//!
//! 1. A key is hashed once, `h = xxh3_64(key)`; probe `i` (0-based, `i < k`) sets bit
//!    `(h1 + i·h2) mod (8·m)` where `h1 = h mod 2^32`, `h2 = (h >> 32) | 1` (double hashing).
//! 2. Bit `b` is bit `b mod 8` (least significant first) of byte `b / 8`.
//! 3. `1 <= k <= 30`. The filter is stored inside an SST filter block, which carries the
//!    checksum.
//! 4. A rowkey+column filter hashes `varint(row_len) ‖ row ‖ column` (see [`cell_key`]) so that
//!    `("ab", "c")` and `("a", "bc")` differ.
#![cfg_attr(
    not(test),
    expect(dead_code, reason = "wired into Db by the LSM issue")
)]

use bytes::Bytes;
use xxhash_rust::xxh3::xxh3_64;

use crate::coding::put_varint;

/// Bits per key. 10 gives about a 1% false-positive rate with 7 probes, which costs 1.25 bytes
/// per distinct row and saves a block read for most gets of absent rows.
pub(crate) const BITS_PER_KEY: usize = 10;

/// The hash a filter uses for `key`.
pub(crate) fn hash(key: &[u8]) -> u64 {
    xxh3_64(key)
}

/// The bytes a rowkey+column filter hashes for `(row, column)`.
pub(crate) fn cell_key(row: &[u8], column: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(row.len() + column.len() + 2);
    put_varint(&mut out, row.len() as u64);
    out.extend_from_slice(row);
    out.extend_from_slice(column);
    out
}

/// Collects key hashes and builds a filter.
#[derive(Debug, Default)]
pub(crate) struct BloomBuilder {
    hashes: Vec<u64>,
}

impl BloomBuilder {
    /// An empty builder.
    pub(crate) fn new() -> BloomBuilder {
        BloomBuilder::default()
    }

    /// Adds a key. Adding the same key twice in a row is cheap (sorted input repeats rows).
    pub(crate) fn add(&mut self, key: &[u8]) {
        let h = hash(key);
        if self.hashes.last() != Some(&h) {
            self.hashes.push(h);
        }
    }

    /// The number of distinct (consecutive) hashes added.
    pub(crate) fn len(&self) -> usize {
        self.hashes.len()
    }

    /// Encodes the filter with `bits_per_key` bits per added key.
    pub(crate) fn finish(&mut self, bits_per_key: usize) -> Vec<u8> {
        self.hashes.sort_unstable();
        self.hashes.dedup();
        let bits = (self.hashes.len() * bits_per_key).max(64);
        let bytes = bits.div_ceil(8);
        let nbits = (bytes * 8) as u64;
        // k = bits_per_key · ln 2 minimises the false-positive rate.
        let k = ((bits_per_key as f64) * std::f64::consts::LN_2).round() as u64;
        let k = k.clamp(1, 30);
        let mut out = vec![0u8; bytes + 1];
        for &h in &self.hashes {
            let (mut x, step) = (h & 0xffff_ffff, (h >> 32) | 1);
            for _ in 0..k {
                let bit = x % nbits;
                out[(bit / 8) as usize] |= 1 << (bit % 8);
                x = x.wrapping_add(step);
            }
        }
        out[bytes] = k as u8;
        self.hashes.clear();
        out
    }
}

/// A decoded filter.
#[derive(Debug, Clone)]
pub(crate) struct Bloom {
    bits: Bytes,
    k: u64,
}

impl Bloom {
    /// Decodes a filter; the error says what was wrong.
    pub(crate) fn decode(data: Bytes) -> Result<Bloom, &'static str> {
        let Some((&k, _)) = data.split_last() else {
            return Err("empty bloom filter");
        };
        if data.len() < 9 {
            return Err("bloom filter shorter than 8 bytes of bits");
        }
        if !(1..=30).contains(&k) {
            return Err("bloom filter probe count out of range");
        }
        Ok(Bloom {
            bits: data.slice(..data.len() - 1),
            k: u64::from(k),
        })
    }

    /// False if `key` was certainly not added.
    pub(crate) fn may_contain(&self, key: &[u8]) -> bool {
        self.may_contain_hash(hash(key))
    }

    /// [`Bloom::may_contain`] for a precomputed [`hash`].
    pub(crate) fn may_contain_hash(&self, h: u64) -> bool {
        let nbits = (self.bits.len() * 8) as u64;
        let (mut x, step) = (h & 0xffff_ffff, (h >> 32) | 1);
        for _ in 0..self.k {
            let bit = x % nbits;
            if self.bits[(bit / 8) as usize] & (1 << (bit % 8)) == 0 {
                return false;
            }
            x = x.wrapping_add(step);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_few_false_positives() -> Result<(), &'static str> {
        let mut b = BloomBuilder::new();
        for i in 0..10_000u32 {
            b.add(&i.to_be_bytes());
            b.add(&i.to_be_bytes());
        }
        assert_eq!(b.len(), 10_000);
        let bloom = Bloom::decode(Bytes::from(b.finish(BITS_PER_KEY)))?;
        for i in 0..10_000u32 {
            assert!(bloom.may_contain(&i.to_be_bytes()));
        }
        let fp = (10_000..110_000u32)
            .filter(|i| bloom.may_contain(&i.to_be_bytes()))
            .count();
        assert!(fp < 2_000, "false-positive rate too high: {fp} / 100000");
        Ok(())
    }

    #[test]
    fn empty_filter_and_bad_encodings() -> Result<(), &'static str> {
        let bloom = Bloom::decode(Bytes::from(BloomBuilder::new().finish(BITS_PER_KEY)))?;
        assert!(!bloom.may_contain(b"x"));
        assert!(Bloom::decode(Bytes::new()).is_err());
        assert!(Bloom::decode(Bytes::from_static(&[0; 5])).is_err());
        assert!(Bloom::decode(Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0, 31])).is_err());
        assert_ne!(cell_key(b"ab", b"c"), cell_key(b"a", b"bc"));
        Ok(())
    }
}
