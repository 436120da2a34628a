//! Replaying the WAL's segments at open, applying the recovery rules of the `wal` module.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::wal::segment::{HeaderError, RecordIter, decode_header, parse_segment_file_name};

/// Receives each good payload with its file and the record's offset in it.
pub(crate) type ReplayFn<'a> = dyn FnMut(&[u8], &Path, u64) -> Result<()> + 'a;

/// Where appending resumes after recovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tail {
    /// Number of the last segment.
    pub(crate) number: u64,
    /// Its path.
    pub(crate) path: PathBuf,
    /// Length of its good prefix; zero means its header was torn and it must be rewritten.
    pub(crate) good_len: u64,
    /// True when bytes past `good_len` must be cut off.
    pub(crate) truncate: bool,
}

/// Lists the segment files of `dir`, sorted by number.
pub(crate) fn list_segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
    let mut segs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
        if let Some(n) = entry.file_name().to_str().and_then(parse_segment_file_name) {
            segs.push((n, entry.path()));
        }
    }
    segs.sort_unstable();
    Ok(segs)
}

fn corruption(path: &Path, offset: u64, detail: impl Into<String>) -> Error {
    Error::Corruption {
        file: path.display().to_string(),
        offset,
        detail: detail.into(),
    }
}

/// Replays every good record of the WAL in `dir`, in order, into `apply`, and returns where
/// appending resumes (`None` when there is no segment yet).
///
/// `apply` gets each payload with its file and offset; it returns an error for a payload that
/// passed its checksum but does not decode, which aborts recovery.
pub(crate) fn recover(dir: &Path, apply: &mut ReplayFn<'_>) -> Result<Option<Tail>> {
    let segs = list_segments(dir)?;
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
    for (i, (number, path)) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        let file =
            std::fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        let header_number = match decode_header(&file) {
            Ok(n) => n,
            // Rule 5: a torn header can only be the segment being created at the crash.
            Err(HeaderError::Damaged(detail)) if last => {
                tracing::warn!(file = %path.display(), %detail, "WAL segment header is torn; starting the segment afresh");
                tail = Some(Tail {
                    number: *number,
                    path: path.clone(),
                    good_len: 0,
                    truncate: true,
                });
                break;
            }
            Err(HeaderError::Damaged(detail) | HeaderError::Unsupported(detail)) => {
                return Err(corruption(path, 0, detail));
            }
        };
        if header_number != *number {
            return Err(corruption(
                path,
                8,
                format!("header says segment {header_number}, file name says {number}"),
            ));
        }
        let mut records = RecordIter::new(&file);
        loop {
            let offset = records.good_len();
            let Some(payload) = records.next() else { break };
            apply(payload, path, offset)?;
        }
        let good_len = records.good_len();
        if let Some(bad) = records.bad() {
            if !last {
                // Rule 4: a segment is fsynced before the next one is created, so damage
                // before the last segment is corruption, not a torn write.
                return Err(corruption(path, bad.offset, bad.detail.clone()));
            }
            tracing::warn!(
                file = %path.display(),
                offset = bad.offset,
                dropped_bytes = file.len() as u64 - bad.offset,
                detail = %bad.detail,
                "WAL tail is torn or corrupt; truncating it"
            );
        }
        if last {
            tail = Some(Tail {
                number: *number,
                path: path.clone(),
                good_len,
                truncate: good_len != file.len() as u64,
            });
        }
    }
    Ok(tail)
}
