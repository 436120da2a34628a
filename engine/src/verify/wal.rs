//! Checking the WAL's segments, and rewriting a damaged segment with its readable records.
//!
//! Where recovery (`wal::recovery`) stops at the first bad record, a check reads on past it
//! when it can: if the bad record's length field is plausible, the record lies inside the file,
//! and the record after it passes its checksum, the bad record was damaged in place and the
//! log goes on after it. A crash cannot leave that pattern (it only ever tears the end of the
//! last segment), so it is corruption of bytes that were already written, and recovery would
//! silently drop the good records after it.

use std::ops::Range;
use std::path::{Path, PathBuf};

use super::{MAX_GAP_FILL, Remedy, SegmentAction, Severity, VerifyReport};
use crate::error::Result;
use crate::file_name::segment_file_name;
use crate::fs::LocalFs;
use crate::wal::recovery::list_segments;
use crate::wal::segment::{
    FORMAT_VERSION, HEADER_BYTES, HeaderError, MAX_PAYLOAD_BYTES, RECORD_HEADER_BYTES, RecordIter,
    decode_header, encode_header, frame_record, record_seed,
};
use crate::wal::{DecodedEntry, decode_entry};

/// What is wrong with a segment's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum HeaderState {
    /// Good, and it names this segment.
    Good,
    /// Short, bad magic or bad checksum.
    Damaged(String),
    /// A valid header of a format this code does not read.
    Unsupported(String),
    /// A valid header that names another segment.
    WrongNumber(u64),
}

/// What a scan of one segment found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SegmentScan {
    pub(super) header: HeaderState,
    /// Byte ranges (frame included) of the records that pass their checksum and decode.
    pub(super) records: Vec<Range<usize>>,
    /// Damaged records with readable records after them, or records that pass their checksum
    /// but do not decode: offset and what is wrong.
    pub(super) bad: Vec<(u64, String)>,
    /// Where the readable records end before the end of the file, and why.
    pub(super) tail: Option<(u64, String)>,
}

/// The seed the records of `file`, segment `number`, are checked with: its header's, or the
/// current format's when the header cannot be read.
fn seed_of(file: &[u8], number: u64) -> u64 {
    match decode_header(file) {
        Ok(h) => h.seed,
        Err(_) => record_seed(FORMAT_VERSION, number),
    }
}

/// Reads the segment `file`, numbered `number`.
pub(super) fn scan(file: &[u8], number: u64) -> SegmentScan {
    let header = match decode_header(file) {
        Ok(h) if h.number == number => HeaderState::Good,
        Ok(h) => HeaderState::WrongNumber(h.number),
        Err(HeaderError::Damaged(d)) => HeaderState::Damaged(d),
        Err(HeaderError::Unsupported(d)) => HeaderState::Unsupported(d),
    };
    let mut out = SegmentScan {
        header,
        records: Vec::new(),
        bad: Vec::new(),
        tail: None,
    };
    if matches!(out.header, HeaderState::Unsupported(_)) || file.len() < HEADER_BYTES {
        return out;
    }
    // `RecordIter` starts `HEADER_BYTES` into the slice it is given, so a slice that starts
    // that far before `start` reads records from `start` on.
    let seed = seed_of(file, number);
    let mut start = HEADER_BYTES;
    'segment: loop {
        let base = start - HEADER_BYTES;
        let mut it = RecordIter::new(&file[base..], seed);
        loop {
            let at = base + it.good_len() as usize;
            let Some(payload) = it.next() else { break };
            let end = at + RECORD_HEADER_BYTES + payload.len();
            match decode_entry(payload) {
                // A recycled file's earlier records follow: not part of the segment.
                Ok(DecodedEntry::End) => break 'segment,
                Ok(_) => out.records.push(at..end),
                Err(e) => out
                    .bad
                    .push((at as u64, format!("record does not decode: {e}"))),
            }
        }
        let Some(bad) = it.bad() else { break };
        let at = base + bad.offset as usize;
        match resync(file, at, seed) {
            Some(next) => {
                out.bad.push((at as u64, bad.detail.clone()));
                start = next;
            }
            None => {
                out.tail = Some((at as u64, bad.detail.clone()));
                break;
            }
        }
    }
    out
}

/// The offset of the record after the bad one at `at`, if its length field is plausible, it
/// lies inside the file with something after it, and the record there passes its checksum.
fn resync(file: &[u8], at: usize, seed: u64) -> Option<usize> {
    let len = file.get(at..at + 4)?;
    let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
    if len == 0 || len > MAX_PAYLOAD_BYTES {
        return None;
    }
    let next = at + RECORD_HEADER_BYTES + len;
    if next >= file.len() {
        return None;
    }
    RecordIter::new(&file[next - HEADER_BYTES..], seed)
        .next()
        .map(|_| next)
}

/// Segment `number` rewritten: a fresh header, then the readable records of `file` in order,
/// sealed for the current format.
pub(super) fn rewrite(file: &[u8], number: u64, scan: &SegmentScan) -> Vec<u8> {
    let mut out = encode_header(number).to_vec();
    for r in &scan.records {
        let payload = &file[r.start + RECORD_HEADER_BYTES..r.end];
        frame_record(&mut out, number, |o| o.extend_from_slice(payload));
    }
    out
}

/// An empty segment `number`: its header only.
pub(super) fn empty(number: u64) -> Vec<u8> {
    encode_header(number).to_vec()
}

/// Checks the WAL segments after `flushed` (the earlier ones the next open deletes).
/// `numbered` says whether `flushed` is known (the manifest was read or is absent).
pub(super) fn check_wal(
    dir: &Path,
    flushed: u64,
    numbered: bool,
    report: &mut VerifyReport,
) -> Result<()> {
    let segments: Vec<(u64, PathBuf)> = list_segments(&LocalFs::new(dir)?)?
        .into_iter()
        .filter(|(n, _)| *n > flushed)
        .map(|(n, name)| (n, dir.join(name)))
        .collect();
    if let Some((first, _)) = segments.first()
        && numbered
        && *first > flushed + 1
    {
        report.add(
            Severity::Warning,
            &segment_file_name(*first),
            None,
            None,
            format!(
                "WAL segments {} to {} are missing; any writes in them were lost",
                flushed + 1,
                first - 1
            ),
            Remedy::None,
        );
    }
    let mut prev: Option<u64> = None;
    for (i, (number, path)) in segments.iter().enumerate() {
        let name = segment_file_name(*number);
        if let Some(p) = prev
            && *number > p + 1
        {
            let remedy = if number - p - 1 <= MAX_GAP_FILL {
                for missing in p + 1..*number {
                    report.segments.insert(missing, SegmentAction::Create);
                }
                Remedy::CreateSegment
            } else {
                Remedy::None
            };
            report.add(
                Severity::Error,
                &name,
                None,
                None,
                format!(
                    "WAL segments {} to {} are missing before it: recovery refuses the log",
                    p + 1,
                    number - 1
                ),
                remedy,
            );
        }
        prev = Some(*number);
        let last = i + 1 == segments.len();
        let action = match std::fs::read(path) {
            Ok(file) => check_segment(&name, *number, &file, last, report),
            Err(e) => {
                report.add(
                    Severity::Error,
                    &name,
                    None,
                    None,
                    format!("cannot read the segment: {e}"),
                    Remedy::RewriteSegment,
                );
                SegmentAction::Rewrite
            }
        };
        report.segments.insert(*number, action);
    }
    Ok(())
}

/// Checks one segment's bytes; returns what repair does with it.
fn check_segment(
    name: &str,
    number: u64,
    file: &[u8],
    last: bool,
    report: &mut VerifyReport,
) -> SegmentAction {
    let scan = scan(file, number);
    report.counts.wal_segments += 1;
    report.counts.wal_records += scan.records.len() as u64;
    let mut rewrite = false;
    let mut error = |report: &mut VerifyReport, offset: u64, detail: String| {
        rewrite = true;
        report.add(
            Severity::Error,
            name,
            Some(offset),
            None,
            detail,
            Remedy::RewriteSegment,
        );
    };
    match &scan.header {
        HeaderState::Good => {}
        HeaderState::Unsupported(d) => {
            report.add(
                Severity::Error,
                name,
                Some(0),
                None,
                d.clone(),
                Remedy::None,
            );
            return SegmentAction::Keep;
        }
        HeaderState::WrongNumber(n) => {
            error(report, 0, format!("the header says segment {n}"));
        }
        HeaderState::Damaged(d) => {
            if last && scan.records.is_empty() && scan.bad.is_empty() {
                report.add(
                    Severity::Warning,
                    name,
                    Some(0),
                    None,
                    format!(
                        "{d}: a crash hit the segment's creation; the next open starts it afresh"
                    ),
                    Remedy::None,
                );
            } else {
                error(report, 0, d.clone());
            }
        }
    }
    for (offset, detail) in &scan.bad {
        let detail = if detail.starts_with("record does not decode") {
            detail.clone()
        } else {
            format!("{detail}, with good records after it")
        };
        error(report, *offset, detail);
    }
    if let Some((offset, detail)) = &scan.tail {
        let dropped = file.len() as u64 - offset;
        if last {
            report.add(
                Severity::Warning,
                name,
                Some(*offset),
                None,
                format!(
                    "torn end of the log ({detail}): the next open drops these {dropped} bytes, \
                     which only writes never acknowledged as durable can be in"
                ),
                Remedy::None,
            );
        } else {
            error(
                report,
                *offset,
                format!("{detail}; {dropped} bytes cannot be read, and later segments follow"),
            );
        }
    }
    if rewrite {
        SegmentAction::Rewrite
    } else {
        SegmentAction::Keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment of table-creation records (the smallest payload that decodes).
    fn segment(number: u64, n: usize) -> Vec<u8> {
        let mut file = encode_header(number).to_vec();
        for i in 0..n {
            frame_record(&mut file, number, |out| {
                out.push(1);
                out.push(i as u8);
                out.extend_from_slice(format!("table{i}").as_bytes());
            });
        }
        file
    }

    /// Offset of record `i` of a [`segment`].
    fn record_at(file: &[u8], i: usize) -> usize {
        scan(file, 3).records[i].start
    }

    #[test]
    fn a_good_segment_scans_clean_and_rewrites_to_itself() {
        let file = segment(3, 4);
        let s = scan(&file, 3);
        assert_eq!(s.header, HeaderState::Good);
        assert_eq!(s.records.len(), 4);
        assert_eq!((s.bad.len(), s.tail.clone()), (0, None));
        assert_eq!(rewrite(&file, 3, &s), file);
        assert_eq!(scan(&file, 4).header, HeaderState::WrongNumber(3));
    }

    #[test]
    fn a_torn_end_is_a_tail_and_a_damaged_middle_is_read_past() {
        let file = segment(3, 4);
        let cut = file.len() - 3;
        let s = scan(&file[..cut], 3);
        assert_eq!(s.records.len(), 3);
        assert!(s.bad.is_empty());
        assert_eq!(
            s.tail.as_ref().map(|t| t.0),
            Some(record_at(&file, 3) as u64)
        );

        let mut damaged = file.clone();
        let second = record_at(&file, 1);
        damaged[second + RECORD_HEADER_BYTES + 1] ^= 0x01;
        let s = scan(&damaged, 3);
        assert_eq!(s.records.len(), 3);
        assert_eq!(s.bad.len(), 1);
        assert_eq!(s.bad[0].0, second as u64);
        assert!(s.bad[0].1.contains("checksum"), "{:?}", s.bad);
        assert_eq!(s.tail, None);
        let fixed = rewrite(&damaged, 3, &s);
        let again = scan(&fixed, 3);
        assert_eq!(again.records.len(), 3);
        assert!(again.bad.is_empty() && again.tail.is_none());

        // The last record damaged: nothing follows it, so it reads as a torn tail.
        let mut last = file.clone();
        let n = last.len();
        last[n - 1] ^= 0x01;
        let s = scan(&last, 3);
        assert_eq!((s.records.len(), s.bad.len()), (3, 0));
        assert!(s.tail.is_some());
    }

    #[test]
    fn a_record_that_does_not_decode_is_bad() {
        let mut file = encode_header(3).to_vec();
        frame_record(&mut file, 3, |out| out.push(9));
        frame_record(&mut file, 3, |out| out.extend_from_slice(&[1, 1, b'x']));
        let s = scan(&file, 3);
        assert_eq!(s.records.len(), 1);
        assert_eq!(s.bad.len(), 1);
        assert_eq!(s.bad[0].0, HEADER_BYTES as u64);
    }

    #[test]
    fn a_damaged_header_still_lets_records_be_read() {
        let mut file = segment(3, 2);
        file[0] ^= 0xff;
        let s = scan(&file, 3);
        assert!(matches!(s.header, HeaderState::Damaged(_)));
        assert_eq!(s.records.len(), 2);
        assert_eq!(scan(&rewrite(&file, 3, &s), 3).header, HeaderState::Good);
        assert_eq!(scan(&empty(5), 5).records.len(), 0);
        assert!(matches!(scan(&[], 5).header, HeaderState::Damaged(_)));
    }
}
