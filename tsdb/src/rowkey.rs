//! Data rowkeys (table `tsdb`) and TSUIDs.
//!
//! ## Format
//!
//! ```text
//! rowkey = salt (1) | metric uid (3) | base_time (4, BE u32 seconds) | (tagk uid (3), tagv uid
//! (3))+ tsuid  =            metric uid (3) |                                  (tagk uid (3), tagv
//! uid (3))+
//! ```
//!
//! 1. Every UID is 3 big-endian bytes; UID 0 is never assigned.
//! 2. `base_time = ts_s - ts_s % 3600`: one row holds one series for one UTC hour.
//! 3. Tag pairs are sorted by tag-key UID bytes, and a tag key appears once.
//! 4. `salt = xxh3_64(tsuid) % buckets`. The bucket count is fixed when the database is created
//!    (stored in table `meta`), so a series never changes bucket.
//! 5. Every field has a fixed width, so rowkey byte order equals the order of
//!    `(salt, metric, base_time, tag pairs)`; a metric's rows for a time range are one contiguous
//!    range per salt bucket.

use xxhash_rust::xxh3::xxh3_64;

use crate::error::{Error, Result, hex_upper};
use crate::uid::{UID_LEN, Uid};

/// Bytes of the salt prefix.
pub(crate) const SALT_LEN: usize = 1;
/// Bytes of the base time.
pub(crate) const TIME_LEN: usize = 4;
/// Seconds covered by one row.
pub const ROW_SPAN_SECS: u32 = 3600;
/// Bytes before the tag pairs of a rowkey.
pub(crate) const ROWKEY_HEAD_LEN: usize = SALT_LEN + UID_LEN + TIME_LEN;

/// A series identifier: metric UID followed by the sorted tag pairs (OpenTSDB docs:
/// `user_guide/uids`). No salt and no time.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tsuid(Box<[u8]>);

impl Tsuid {
    /// Builds a TSUID; `tags` are sorted by tag key here. Fails on a repeated tag key.
    pub fn new(metric: Uid, tags: &mut [(Uid, Uid)]) -> Result<Tsuid> {
        tags.sort_unstable_by_key(|&(k, _)| k);
        let mut b = Vec::with_capacity(UID_LEN * (1 + 2 * tags.len()));
        b.extend_from_slice(&metric.to_bytes());
        for (i, (k, v)) in tags.iter().enumerate() {
            if i > 0 && tags[i - 1].0 == *k {
                return Err(Error::InvalidArgument(format!(
                    "tag key UID {k} appears twice in a series"
                )));
            }
            b.extend_from_slice(&k.to_bytes());
            b.extend_from_slice(&v.to_bytes());
        }
        Ok(Tsuid(b.into()))
    }

    /// Decodes and checks TSUID bytes (length, non-zero UIDs, sorted unique tag keys).
    pub fn from_bytes(bytes: &[u8]) -> Result<Tsuid> {
        check_tsuid(bytes).map_err(|d| Error::corruption("tsuid", bytes, d))?;
        Ok(Tsuid(bytes.into()))
    }

    /// Parses OpenTSDB's hex form (case-insensitive).
    pub fn parse_hex(s: &str) -> Result<Tsuid> {
        let bad = |detail: &str| Error::InvalidTsuid {
            tsuid: s.to_string(),
            detail: detail.to_string(),
        };
        if !s.len().is_multiple_of(2) {
            return Err(bad("odd number of hex digits"));
        }
        let mut bytes = Vec::with_capacity(s.len() / 2);
        for pair in s.as_bytes().chunks(2) {
            let hi = hex_digit(pair[0]).ok_or_else(|| bad("not a hex digit"))?;
            let lo = hex_digit(pair[1]).ok_or_else(|| bad("not a hex digit"))?;
            bytes.push(hi << 4 | lo);
        }
        check_tsuid(&bytes).map_err(|d| bad(&d))?;
        Ok(Tsuid(bytes.into()))
    }

    /// Upper-case hex, as OpenTSDB prints TSUIDs.
    pub fn to_hex(&self) -> String {
        hex_upper(&self.0)
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The metric UID.
    pub fn metric(&self) -> Uid {
        Uid::from_array([self.0[0], self.0[1], self.0[2]])
    }

    /// The tag pairs `(tagk, tagv)`, sorted by tag key UID.
    pub fn tags(&self) -> impl Iterator<Item = (Uid, Uid)> + '_ {
        self.0[UID_LEN..].chunks_exact(2 * UID_LEN).map(|c| {
            (
                Uid::from_array([c[0], c[1], c[2]]),
                Uid::from_array([c[3], c[4], c[5]]),
            )
        })
    }

    /// The tag-pair bytes (what follows the base time in a rowkey).
    pub(crate) fn tag_bytes(&self) -> &[u8] {
        &self.0[UID_LEN..]
    }
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

fn check_tsuid(b: &[u8]) -> std::result::Result<(), String> {
    if b.len() < UID_LEN + 2 * UID_LEN || !(b.len() - UID_LEN).is_multiple_of(2 * UID_LEN) {
        return Err(format!("length {} is not 3 + 6n with n >= 1", b.len()));
    }
    if b[..UID_LEN] == [0; UID_LEN] {
        return Err("metric UID is 0".into());
    }
    let mut prev: Option<&[u8]> = None;
    for pair in b[UID_LEN..].chunks_exact(2 * UID_LEN) {
        let (k, v) = pair.split_at(UID_LEN);
        if k == [0; UID_LEN] || v == [0; UID_LEN] {
            return Err("tag UID is 0".into());
        }
        if prev.is_some_and(|p| p >= k) {
            return Err("tag keys are not sorted and unique".into());
        }
        prev = Some(k);
    }
    Ok(())
}

/// The salt bucket of a series.
pub fn salt_of(tsuid: &Tsuid, buckets: u8) -> u8 {
    (xxh3_64(tsuid.as_bytes()) % u64::from(buckets.max(1))) as u8
}

/// The base time (row hour, seconds) of a millisecond timestamp. `ts_ms` must be a validated
/// write timestamp (0 ..= u32::MAX seconds).
pub(crate) fn base_time_of(ts_ms: i64) -> u32 {
    let s = ts_ms.div_euclid(1000).clamp(0, i64::from(u32::MAX)) as u32;
    s - s % ROW_SPAN_SECS
}

/// A decoded data rowkey.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowKey {
    /// Salt bucket.
    pub salt: u8,
    /// Hour of the row, in seconds.
    pub base_time: u32,
    /// The series.
    pub tsuid: Tsuid,
}

impl RowKey {
    /// Encodes the rowkey.
    pub fn encode(&self) -> Vec<u8> {
        encode_rowkey(self.salt, &self.tsuid, self.base_time)
    }

    /// Decodes and checks rowkey bytes.
    pub fn decode(key: &[u8]) -> Result<RowKey> {
        if key.len() < ROWKEY_HEAD_LEN {
            return Err(Error::corruption("rowkey", key, "shorter than 8 bytes"));
        }
        let salt = key[0];
        let t = &key[SALT_LEN + UID_LEN..ROWKEY_HEAD_LEN];
        let base_time = u32::from_be_bytes([t[0], t[1], t[2], t[3]]);
        if !base_time.is_multiple_of(ROW_SPAN_SECS) {
            return Err(Error::corruption(
                "rowkey",
                key,
                "base time is not hour-aligned",
            ));
        }
        let mut ts = Vec::with_capacity(key.len() - SALT_LEN - TIME_LEN);
        ts.extend_from_slice(&key[SALT_LEN..SALT_LEN + UID_LEN]);
        ts.extend_from_slice(&key[ROWKEY_HEAD_LEN..]);
        check_tsuid(&ts).map_err(|d| Error::corruption("rowkey", key, d))?;
        Ok(RowKey {
            salt,
            base_time,
            tsuid: Tsuid(ts.into()),
        })
    }
}

/// Encodes `salt | metric | base_time | tag pairs`.
pub(crate) fn encode_rowkey(salt: u8, tsuid: &Tsuid, base_time: u32) -> Vec<u8> {
    let mut k = Vec::with_capacity(SALT_LEN + TIME_LEN + tsuid.as_bytes().len());
    encode_rowkey_into(salt, tsuid, base_time, &mut k);
    k
}

/// As [`encode_rowkey`], into `out` (cleared first).
pub(crate) fn encode_rowkey_into(salt: u8, tsuid: &Tsuid, base_time: u32, out: &mut Vec<u8>) {
    let t = tsuid.as_bytes();
    out.clear();
    out.push(salt);
    out.extend_from_slice(&t[..UID_LEN]);
    out.extend_from_slice(&base_time.to_be_bytes());
    out.extend_from_slice(&t[UID_LEN..]);
}

/// The rowkey of [`encode_rowkey_into`] as its four pieces, for `WriteBatch::put_pieces`:
/// salt, metric UID, base time (`base_time`, big-endian) and tags.
pub(crate) fn rowkey_pieces<'a>(
    salt: &'a u8,
    tsuid: &'a Tsuid,
    base_time: &'a [u8; 4],
) -> [&'a [u8]; 4] {
    let t = tsuid.as_bytes();
    [
        std::slice::from_ref(salt),
        &t[..UID_LEN],
        base_time,
        &t[UID_LEN..],
    ]
}

/// The rowkey range `[start, stop)` holding every row of `metric` in bucket `salt` whose base
/// time lies in `[first_base, last_base]`.
pub(crate) fn scan_range(
    salt: u8,
    metric: Uid,
    first_base: u32,
    last_base: u32,
) -> (Vec<u8>, Vec<u8>) {
    let head = |base: u64| -> Vec<u8> {
        let v = (u64::from(salt) << 56) | (u64::from(metric.get()) << 32) | base;
        v.to_be_bytes().to_vec()
    };
    // The salt is below 255, so adding one to the 8-byte head never overflows.
    let stop = (u64::from(salt) << 56) | (u64::from(metric.get()) << 32) | u64::from(last_base);
    (
        head(u64::from(first_base)),
        (stop + 1).to_be_bytes().to_vec(),
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn uid(n: u32) -> Uid {
        Uid::from_u32(n).unwrap_or(Uid::from_array([0, 0, 1]))
    }

    fn arb_tsuid() -> impl Strategy<Value = Tsuid> {
        (
            1u32..(1 << 24),
            proptest::collection::btree_map(1u32..(1 << 24), 1u32..(1 << 24), 1..6),
        )
            .prop_map(|(m, tags)| {
                let mut t: Vec<(Uid, Uid)> =
                    tags.into_iter().map(|(k, v)| (uid(k), uid(v))).collect();
                Tsuid::new(uid(m), &mut t).unwrap_or_else(|_| unreachable!())
            })
    }

    #[test]
    fn opentsdb_example_layout() -> Result<()> {
        let t = Tsuid::new(uid(1), &mut [(uid(1), uid(1))])?;
        assert_eq!(t.to_hex(), "000001000001000001");
        let k = encode_rowkey(7, &t, 1356998400);
        assert_eq!(hex_upper(&k), "0700000150E22700000001000001");
        assert_eq!(Tsuid::parse_hex("000001000001000001")?, t);
        assert!(Tsuid::parse_hex("0000010000010000").is_err());
        assert!(Tsuid::parse_hex("00000100000100000G").is_err());
        assert!(RowKey::decode(&[1, 2, 3]).is_err());
        Ok(())
    }

    #[test]
    fn base_time_truncates_to_hour() {
        assert_eq!(base_time_of(1356998400500), 1356998400);
        assert_eq!(base_time_of(1356998400000 + 3_599_999), 1356998400);
        assert_eq!(base_time_of(4294967296), 4294800);
    }

    #[test]
    fn scan_range_covers_hours() {
        let (a, b) = scan_range(3, uid(5), 3600, 7200);
        assert_eq!(a, vec![3, 0, 0, 5, 0, 0, 0x0e, 0x10]);
        assert_eq!(b, vec![3, 0, 0, 5, 0, 0, 0x1c, 0x21]);
        let (_, b) = scan_range(3, uid(5), 0, u32::MAX);
        assert_eq!(b, vec![3, 0, 0, 6, 0, 0, 0, 0]);
    }

    proptest! {
        #[test]
        fn rowkey_round_trips(t in arb_tsuid(), salt in 0u8..255, hour in 0u32..1_193_046) {
            let rk = RowKey { salt, base_time: hour * 3600, tsuid: t.clone() };
            let back = RowKey::decode(&rk.encode()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&back, &rk);
            prop_assert_eq!(Tsuid::parse_hex(&t.to_hex()).ok(), Some(t.clone()));
            prop_assert_eq!(Tsuid::from_bytes(t.as_bytes()).ok(), Some(t));
        }

        /// The pieces the write path puts make the same rowkey as `encode_rowkey_into`.
        #[test]
        fn rowkey_pieces_make_the_rowkey(t in arb_tsuid(), salt in 0u8..255, base in any::<u32>()) {
            let mut whole = Vec::new();
            encode_rowkey_into(salt, &t, base, &mut whole);
            prop_assert_eq!(rowkey_pieces(&salt, &t, &base.to_be_bytes()).concat(), whole);
        }

        #[test]
        fn rowkey_order_is_logical_order(
            a in arb_tsuid(), b in arb_tsuid(),
            sa in 0u8..20, sb in 0u8..20,
            ha in 0u32..1_193_046, hb in 0u32..1_193_046,
        ) {
            let ka = encode_rowkey(sa, &a, ha * 3600);
            let kb = encode_rowkey(sb, &b, hb * 3600);
            let la = (sa, a.metric(), ha, a.tags().collect::<Vec<_>>());
            let lb = (sb, b.metric(), hb, b.tags().collect::<Vec<_>>());
            prop_assert_eq!(ka.cmp(&kb), la.cmp(&lb));
        }

        #[test]
        fn rowkey_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(rk) = RowKey::decode(&bytes) {
                prop_assert_eq!(rk.encode(), bytes);
            }
        }
    }

    #[test]
    fn salt_spreads_evenly() {
        use rand::{Rng, SeedableRng};
        let seed = 0x5eed_u64;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut counts = [0u32; 20];
        let n = 100_000;
        for _ in 0..n {
            let mut tags = vec![
                (uid(1), uid(rng.gen_range(1..1 << 24))),
                (uid(2), uid(rng.gen_range(1..1 << 24))),
            ];
            let t = Tsuid::new(uid(rng.gen_range(1..1000)), &mut tags)
                .unwrap_or_else(|_| unreachable!());
            counts[usize::from(salt_of(&t, 20))] += 1;
        }
        let mean = n as f64 / 20.0;
        for (b, c) in counts.iter().enumerate() {
            let dev = (f64::from(*c) - mean).abs() / mean;
            assert!(dev < 0.10, "seed {seed}: bucket {b} holds {c}, mean {mean}");
        }
    }
}
