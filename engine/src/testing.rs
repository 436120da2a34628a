//! Entry points for the fuzz targets in `fuzz/` and their proptest stand-ins (feature
//! `testing`): WAL replay over arbitrary segment bytes. The SST ones live in `sst.rs`, beside
//! the reader's internals.

use std::path::Path;

use xxhash_rust::xxh3::{Xxh3, xxh3_64};

use crate::coding::be_u64;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, LocalFs};
use crate::memtable::Memtable;
use crate::wal::segment::record_seed;
use crate::wal::{DecodedEntry, decode_entry, recovery};

/// The file name the fuzz segment is replayed from: segment 1, so a header must say 1.
const SEGMENT_NAME: &str = "wal-0000000000000001.log";
/// Bytes of a segment header and of a record's frame (see the `wal` module's format).
const HEADER_BYTES: usize = 24;
const RECORD_HEADER_BYTES: usize = 12;

/// What replaying one segment yielded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalReplay {
    /// The payload of each replayed record, in order.
    pub payloads: Vec<Vec<u8>>,
    /// Operations in the replayed batch records.
    pub ops: usize,
    /// Where appending would resume: the end of the last good record, or 0 when the header
    /// is torn and the segment would be rewritten.
    pub good_len: u64,
    /// Whether the bytes past `good_len` would be cut off.
    pub truncate: bool,
}

/// Replays `segment` as the only WAL segment of `dir` (a directory the caller owns: its WAL
/// segments are replaced), exactly as `Db::open` does: every good record is decoded and its
/// batch applied to a memtable. Returns what was replayed, or the first error, which a fuzz
/// target should require to be `Error::Corruption`. Nothing is truncated on disk.
pub fn fuzz_replay_wal(dir: &Path, segment: &[u8]) -> Result<WalReplay> {
    let fs = LocalFs::new(dir)?;
    for (_, name) in recovery::list_segments(&fs)? {
        fs.delete(&name)?;
    }
    let path = dir.join(SEGMENT_NAME);
    std::fs::write(&path, segment)
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    let mem = Memtable::new();
    let mut payloads = Vec::new();
    let mut ops = 0;
    let mut seq = 0;
    let mut apply = |payload: &[u8], file: &str, offset: u64| -> Result<()> {
        match decode_entry(payload) {
            Ok(DecodedEntry::Table { .. } | DecodedEntry::End) => {}
            Ok(DecodedEntry::Batch(batch)) => {
                seq += 1;
                ops += batch.len();
                mem.apply_all(&batch, seq, 0);
            }
            Err(detail) => {
                return Err(Error::corruption(file.to_owned(), offset, detail));
            }
        }
        payloads.push(payload.to_vec());
        Ok(())
    };
    let tail = recovery::recover(&fs, &mut apply)?;
    let (good_len, truncate) = tail.map_or((0, false), |t| (t.good_len, t.truncate));
    Ok(WalReplay {
        payloads,
        ops,
        good_len,
        truncate,
    })
}

/// Fuzz helper: rewrites the checksums of a WAL segment (the header's, then each record's
/// while the lengths lead from one record to the next inside the bytes), so that a mutated
/// segment reaches the payload decoder behind them.
pub fn fuzz_fix_wal_checksums(segment: &mut [u8]) {
    if segment.len() < HEADER_BYTES {
        return;
    }
    let sum = xxh3_64(&segment[..16]);
    segment[16..HEADER_BYTES].copy_from_slice(&sum.to_be_bytes());
    let version = u16::from_be_bytes([segment[4], segment[5]]);
    let seed = record_seed(version, be_u64(&segment[8..16]));
    let mut pos = HEADER_BYTES;
    while let Some(head) = segment.get(pos..pos + RECORD_HEADER_BYTES) {
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let end = pos + RECORD_HEADER_BYTES + len;
        if len == 0 || end > segment.len() {
            return;
        }
        let mut hasher = Xxh3::with_seed(seed);
        hasher.update(&segment[pos..pos + 4]);
        hasher.update(&segment[pos + RECORD_HEADER_BYTES..end]);
        let sum = hasher.digest().to_be_bytes();
        segment[pos + 4..pos + RECORD_HEADER_BYTES].copy_from_slice(&sum);
        pos = end;
    }
}
