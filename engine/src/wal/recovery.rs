//! Replaying the WAL's segments at open, applying the recovery rules of the `wal` module.

use crate::error::{Error, Result};
use crate::file_name::parse_segment_file_name;
use crate::fs::FileSystem;
use crate::wal::entry::END_PAYLOAD;
use crate::wal::segment::{HeaderError, RecordIter, decode_header};

/// Receives each good payload with its file's name and the record's offset in it.
pub(crate) type ReplayFn<'a> = dyn FnMut(&[u8], &str, u64) -> Result<()> + 'a;

/// Where appending resumes after recovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tail {
    /// Number of the last segment.
    pub(crate) number: u64,
    /// Its file name.
    pub(crate) name: String,
    /// Length of its good prefix; zero means its header was torn and it must be rewritten.
    pub(crate) good_len: u64,
    /// True when bytes past `good_len` must be cut off.
    pub(crate) truncate: bool,
    /// The segment ends with an end record at `good_len`, old bytes of a recycled file after
    /// it: appending writes over them, and the next roll marks the end again.
    pub(crate) ended: bool,
}

/// Lists the segment files of `fs` with their numbers, sorted by number.
pub(crate) fn list_segments(fs: &dyn FileSystem) -> Result<Vec<(u64, String)>> {
    let mut segs: Vec<(u64, String)> = fs
        .list()?
        .into_iter()
        .filter_map(|name| Some((parse_segment_file_name(&name)?, name)))
        .collect();
    segs.sort_unstable();
    Ok(segs)
}

fn corruption(name: &str, offset: u64, detail: impl Into<String>) -> Error {
    Error::corruption(name, offset, detail)
}

/// Replays every good record of the WAL in `fs`, in order, into `apply`, and returns where
/// appending resumes (`None` when there is no segment yet).
///
/// `apply` gets each payload with its file and offset; it returns an error for a payload that
/// passed its checksum but does not decode, which aborts recovery.
pub(crate) fn recover(fs: &dyn FileSystem, apply: &mut ReplayFn<'_>) -> Result<Option<Tail>> {
    let segs = list_segments(fs)?;
    for pair in segs.windows(2) {
        if pair[1].0 != pair[0].0 + 1 {
            return Err(corruption(
                &pair[1].1,
                0,
                format!("missing WAL segment {} before it", pair[0].0 + 1),
            ));
        }
    }
    let mut tail = None;
    for (i, (number, name)) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        let file = fs.open(name)?;
        let file = file.read_at(0, usize::try_from(file.len()).unwrap_or(usize::MAX))?;
        let header = match decode_header(&file) {
            Ok(h) => h,
            // Rule 5: a torn header can only be the segment being created at the crash.
            Err(HeaderError::Damaged(detail)) if last => {
                tracing::warn!(file = %name, %detail, "WAL segment header is torn; starting the segment afresh");
                tail = Some(Tail {
                    number: *number,
                    name: name.clone(),
                    good_len: 0,
                    truncate: true,
                    ended: false,
                });
                break;
            }
            Err(HeaderError::Damaged(detail) | HeaderError::Unsupported(detail)) => {
                return Err(corruption(name, 0, detail));
            }
        };
        if header.number != *number {
            return Err(corruption(
                name,
                8,
                format!(
                    "header says segment {}, file name says {number}",
                    header.number
                ),
            ));
        }
        let mut records = RecordIter::new(&file, header.seed);
        let mut end = None;
        loop {
            let offset = records.good_len();
            let Some(payload) = records.next() else { break };
            if payload == END_PAYLOAD {
                // Rule 8: what follows is a recycled file's earlier life.
                end = Some(offset);
                break;
            }
            apply(payload, name, offset)?;
        }
        // Appending resumes over a last segment's end record (from a sync, or a roll that
        // never finished).
        let good_len = end.unwrap_or(records.good_len());
        if let Some(bad) = records.bad() {
            if !last {
                // Rule 4: a segment is fsynced before the next one is created, so damage
                // before the last segment is corruption, not a torn write.
                return Err(corruption(name, bad.offset, bad.detail.clone()));
            }
            tracing::warn!(
                file = %name,
                offset = bad.offset,
                dropped_bytes = file.len() as u64 - bad.offset,
                detail = %bad.detail,
                "WAL tail is torn or corrupt, or left from a recycled file's earlier use; truncating it"
            );
        }
        if last {
            tail = Some(Tail {
                number: *number,
                name: name.clone(),
                good_len,
                truncate: end.is_none() && good_len != file.len() as u64,
                ended: end.is_some(),
            });
        }
    }
    Ok(tail)
}
