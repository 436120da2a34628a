//! Encoding and decoding of one WAL segment: its header and its framed records.
//!
//! The byte layout is documented in the `wal` module's `## Format` section.

use std::ops::Range;

use xxhash_rust::xxh3::{Xxh3, xxh3_64};

use crate::coding::be_u64;

/// The magic at the start of every WAL segment.
pub(crate) const SEGMENT_MAGIC: [u8; 4] = *b"SWAL";
/// The segment format version this code writes: records checksummed with the segment's
/// number as the seed, so that a recycled file's old records fail in the new segment.
pub(crate) const FORMAT_VERSION: u16 = 2;
/// The first version, still read: its records' checksums have no seed.
pub(crate) const UNSEEDED_VERSION: u16 = 1;
/// Bytes of the segment header.
pub(crate) const HEADER_BYTES: usize = 24;
/// Bytes of a record's frame (length + checksum) before its payload.
pub(crate) const RECORD_HEADER_BYTES: usize = 12;
/// Largest payload a record may carry. A batch this large is a caller bug, and the cap keeps a
/// corrupt length from being trusted to allocate.
pub(crate) const MAX_PAYLOAD_BYTES: usize = 1 << 30;

/// The header of segment `number`.
pub(crate) fn encode_header(number: u64) -> [u8; HEADER_BYTES] {
    let mut h = [0u8; HEADER_BYTES];
    h[0..4].copy_from_slice(&SEGMENT_MAGIC);
    h[4..6].copy_from_slice(&FORMAT_VERSION.to_be_bytes());
    // h[6..8] reserved, zero.
    h[8..16].copy_from_slice(&number.to_be_bytes());
    let sum = xxh3_64(&h[0..16]);
    h[16..24].copy_from_slice(&sum.to_be_bytes());
    h
}

/// Why a segment header was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HeaderError {
    /// Short, wrong magic or bad checksum: possibly a header torn by a crash.
    Damaged(String),
    /// A valid header this code cannot read (another version, reserved bits set). Never
    /// treated as torn, so a newer WAL is not erased.
    Unsupported(String),
}

/// A checked segment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentHeader {
    /// The segment's number.
    pub(crate) number: u64,
    /// The seed of its records' checksums (see [`record_seed`]).
    pub(crate) seed: u64,
}

/// The seed of the record checksums of segment `number` at format `version`.
pub(crate) fn record_seed(version: u16, number: u64) -> u64 {
    if version == UNSEEDED_VERSION {
        0
    } else {
        number
    }
}

/// Checks a segment header and returns its segment number and record seed.
///
/// The checks run in order: length, magic, checksum, version, reserved bits.
pub(crate) fn decode_header(bytes: &[u8]) -> Result<SegmentHeader, HeaderError> {
    let Some(h) = bytes.get(..HEADER_BYTES) else {
        return Err(HeaderError::Damaged(format!(
            "segment header truncated: {} of {HEADER_BYTES} bytes",
            bytes.len()
        )));
    };
    if h[0..4] != SEGMENT_MAGIC {
        return Err(HeaderError::Damaged(format!(
            "bad segment magic {:02x?}",
            &h[0..4]
        )));
    }
    let stored = be_u64(&h[16..24]);
    let computed = xxh3_64(&h[0..16]);
    if stored != computed {
        return Err(HeaderError::Damaged(format!(
            "segment header checksum mismatch: stored {stored:016x}, computed {computed:016x}"
        )));
    }
    let version = u16::from_be_bytes([h[4], h[5]]);
    if version != FORMAT_VERSION && version != UNSEEDED_VERSION {
        return Err(HeaderError::Unsupported(format!(
            "unsupported segment version {version}, expected {UNSEEDED_VERSION} or {FORMAT_VERSION}"
        )));
    }
    if h[6..8] != [0, 0] {
        return Err(HeaderError::Unsupported(
            "reserved header bits are set".into(),
        ));
    }
    let number = be_u64(&h[8..16]);
    Ok(SegmentHeader {
        number,
        seed: record_seed(version, number),
    })
}

/// Appends a record frame around the payload that `write_payload` appends to `out`, sealed
/// with `seed`, and returns the payload's range in `out`.
pub(crate) fn frame_record(
    out: &mut Vec<u8>,
    seed: u64,
    write_payload: impl FnOnce(&mut Vec<u8>),
) -> Range<usize> {
    let start = out.len();
    out.extend_from_slice(&[0u8; RECORD_HEADER_BYTES]);
    write_payload(out);
    seal_record(&mut out[start..], seed);
    start + RECORD_HEADER_BYTES..out.len()
}

/// Fills in the frame of `record`, a frame's room then the payload, with checksum seed `seed`.
pub(crate) fn seal_record(record: &mut [u8], seed: u64) {
    let (frame, payload) = record.split_at_mut(RECORD_HEADER_BYTES);
    // Callers cap payloads at MAX_PAYLOAD_BYTES, so the length fits in a u32.
    let len = (payload.len() as u32).to_be_bytes();
    frame[..4].copy_from_slice(&len);
    frame[4..].copy_from_slice(&record_sum(&len, payload, seed).to_be_bytes());
}

/// The checksum of a record: xxh3-64 of its length bytes and payload, seeded.
fn record_sum(len: &[u8], payload: &[u8], seed: u64) -> u64 {
    let mut hasher = Xxh3::with_seed(seed);
    hasher.update(len);
    hasher.update(payload);
    hasher.digest()
}

/// Why a segment's records stopped before the end of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadRecord {
    /// Offset in the file of the first byte of the bad record.
    pub(crate) offset: u64,
    /// What was wrong.
    pub(crate) detail: String,
}

/// Iterates the records of a segment whose header has been checked, yielding each good
/// payload; stops at the end of the file or at the first torn or corrupt record.
#[derive(Debug)]
pub(crate) struct RecordIter<'a> {
    file: &'a [u8],
    seed: u64,
    pos: usize,
    bad: Option<BadRecord>,
}

impl<'a> RecordIter<'a> {
    /// Iterates the records of `file`, which starts with a segment header, checking their
    /// checksums with `seed`.
    pub(crate) fn new(file: &'a [u8], seed: u64) -> RecordIter<'a> {
        RecordIter {
            file,
            seed,
            pos: HEADER_BYTES.min(file.len()),
            bad: None,
        }
    }

    /// The end of the last good record read so far.
    pub(crate) fn good_len(&self) -> u64 {
        self.pos as u64
    }

    /// Set once the iteration stopped at a torn or corrupt record.
    pub(crate) fn bad(&self) -> Option<&BadRecord> {
        self.bad.as_ref()
    }

    fn fail(&mut self, detail: String) -> Option<&'a [u8]> {
        self.bad = Some(BadRecord {
            offset: self.pos as u64,
            detail,
        });
        None
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.bad.is_some() || self.pos >= self.file.len() {
            return None;
        }
        let rest = &self.file[self.pos..];
        let Some(head) = rest.get(..RECORD_HEADER_BYTES) else {
            return self.fail(format!(
                "torn record header: {} of {RECORD_HEADER_BYTES} bytes",
                rest.len()
            ));
        };
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        if len == 0 || len > MAX_PAYLOAD_BYTES {
            return self.fail(format!("bad record length {len}"));
        }
        let Some(payload) = rest.get(RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + len) else {
            return self.fail(format!(
                "torn record: length {len}, {} bytes present",
                rest.len() - RECORD_HEADER_BYTES
            ));
        };
        let stored = be_u64(&head[4..12]);
        let computed = record_sum(&head[0..4], payload, self.seed);
        if stored != computed {
            return self.fail(format!(
                "record checksum mismatch: stored {stored:016x}, computed {computed:016x}"
            ));
        }
        self.pos += RECORD_HEADER_BYTES + len;
        Some(payload)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn segment(payloads: &[Vec<u8>]) -> Vec<u8> {
        let mut file = encode_header(7).to_vec();
        for p in payloads {
            frame_record(&mut file, 7, |out| out.extend_from_slice(p));
        }
        file
    }

    /// A segment of the first format: version 1, checksums without a seed.
    fn unseeded_segment(number: u64, payloads: &[&[u8]]) -> Vec<u8> {
        let mut file = encode_header(number).to_vec();
        file[5] = 1;
        let sum = xxh3_64(&file[0..16]);
        file[16..24].copy_from_slice(&sum.to_be_bytes());
        for p in payloads {
            let len = (p.len() as u32).to_be_bytes();
            let mut hasher = Xxh3::new();
            hasher.update(&len);
            hasher.update(p);
            file.extend_from_slice(&len);
            file.extend_from_slice(&hasher.digest().to_be_bytes());
            file.extend_from_slice(p);
        }
        file
    }

    #[test]
    fn first_format_segments_are_still_read() {
        let file = unseeded_segment(9, &[b"ab", b"cde"]);
        let header = decode_header(&file).unwrap();
        assert_eq!(header, SegmentHeader { number: 9, seed: 0 });
        let mut it = RecordIter::new(&file, header.seed);
        let got: Vec<&[u8]> = it.by_ref().collect();
        assert_eq!(got, [&b"ab"[..], &b"cde"[..]]);
        assert!(it.bad().is_none());
    }

    #[test]
    fn records_of_another_segment_fail_their_checksum() {
        // A recycled file keeps the records of its earlier life past the new segment's end:
        // they must read as the end of the log, never as records.
        let old = segment(&[b"old".to_vec()]);
        let mut reused = encode_header(8).to_vec();
        reused.extend_from_slice(&old[HEADER_BYTES..]);
        let header = decode_header(&reused).unwrap();
        let mut it = RecordIter::new(&reused, header.seed);
        assert_eq!(it.next(), None);
        assert!(it.bad().unwrap().detail.contains("checksum"));
        // And so do the first format's.
        let v1 = unseeded_segment(3, &[b"old"]);
        let mut reused = encode_header(8).to_vec();
        reused.extend_from_slice(&v1[HEADER_BYTES..]);
        assert_eq!(RecordIter::new(&reused, 8).next(), None);
    }

    #[test]
    fn header_round_trips_and_rejects_damage() {
        let h = encode_header(42);
        assert_eq!(
            decode_header(&h),
            Ok(SegmentHeader {
                number: 42,
                seed: 42
            })
        );
        assert!(matches!(
            decode_header(&h[..10]),
            Err(HeaderError::Damaged(_))
        ));
        let mut v3 = h;
        v3[5] = 3;
        let sum = xxh3_64(&v3[0..16]);
        v3[16..24].copy_from_slice(&sum.to_be_bytes());
        assert!(matches!(
            decode_header(&v3),
            Err(HeaderError::Unsupported(_))
        ));
        for i in 0..HEADER_BYTES {
            let mut bad = h;
            bad[i] ^= 0x10;
            assert!(decode_header(&bad).is_err(), "flip at {i} accepted");
        }
    }

    proptest! {
        #[test]
        fn records_round_trip(payloads in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 1..100), 0..10)) {
            let file = segment(&payloads);
            let mut it = RecordIter::new(&file, 7);
            let got: Vec<Vec<u8>> = it.by_ref().map(<[u8]>::to_vec).collect();
            prop_assert_eq!(got, payloads);
            prop_assert!(it.bad().is_none());
            prop_assert_eq!(it.good_len(), file.len() as u64);
        }

        #[test]
        fn truncation_yields_a_prefix(payloads in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 1..50), 1..6), cut in any::<prop::sample::Index>()) {
            let file = segment(&payloads);
            let cut = HEADER_BYTES + cut.index(file.len() - HEADER_BYTES);
            let got: Vec<Vec<u8>> = RecordIter::new(&file[..cut], 7).map(<[u8]>::to_vec).collect();
            prop_assert!(got.len() <= payloads.len());
            prop_assert_eq!(&payloads[..got.len()], &got[..]);
        }

        #[test]
        fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_header(&data);
            let _ = RecordIter::new(&data, 0).count();
        }
    }
}
