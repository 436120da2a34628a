//! Stored data rows as they are, cell by cell, for `strata scan` and other debugging tools.
//!
//! Each cell is decoded with the codecs the read path uses (`cell.rs`, `block.rs`); a cell or
//! a rowkey that does not decode is handed over with its error rather than failing the walk,
//! since these tools exist to look at damaged rows too.

use std::ops::ControlFlow;

use bytes::Bytes;
use strata_engine::{Cell, ScanOptions};

use crate::cell::{PARTIAL_COLUMN_LEN, PARTIAL_TAG, decode_column, decode_row_block, decode_value};
use crate::error::{Error, ErrorKind, Result};
use crate::rowkey::{ROW_SPAN_SECS, RowKey, scan_range};
use crate::tsdb::Tsdb;
use crate::uid_kind::UidKind;
use crate::value::Value;

/// Which data rows [`Tsdb::inspect_rows`] walks: those of `metric` (every metric when `None`)
/// whose hour `[base, base + 3600)` meets `[start_s, end_s]` (epoch seconds).
#[derive(Debug, Clone, Copy)]
pub struct InspectRequest<'a> {
    /// Only rows of this metric.
    pub metric: Option<&'a str>,
    /// Only rows whose hour ends after this time (seconds).
    pub start_s: i64,
    /// Only rows whose hour starts at or before this time (seconds).
    pub end_s: i64,
}

/// One stored data row.
#[derive(Debug)]
pub struct StoredRow {
    /// The rowkey's bytes.
    pub key: Bytes,
    /// The decoded rowkey; a row whose key does not decode is still handed over.
    pub rowkey: Result<RowKey>,
    /// Its cells, in column order (empty when the rowkey does not decode).
    pub cells: Vec<StoredCell>,
}

/// One cell of a [`StoredRow`].
#[derive(Debug)]
pub enum StoredCell {
    /// A raw cell: one point, `offset_ms` after the row's base time.
    Raw {
        /// Milliseconds after the row's base time.
        offset_ms: u32,
        /// The value as written.
        value: Value,
    },
    /// The row's compacted block, or a partial block written by a flush.
    Block {
        /// The engine sequence number of the flush that wrote a partial block; `None` for the
        /// row's main block.
        flush_seq: Option<u64>,
        /// The block's bytes.
        bytes: Bytes,
        /// Its points (absolute ms), or why they do not decode.
        points: Result<Vec<(i64, Value)>>,
    },
    /// A cell that does not decode.
    Bad {
        /// The column.
        column: Bytes,
        /// The value.
        value: Bytes,
        /// What is wrong.
        error: Error,
    },
}

impl Tsdb {
    /// Walks the stored data rows `req` selects, in key order per salt bucket, handing each to
    /// `f` until it breaks. An unknown metric selects nothing.
    pub fn inspect_rows<E: From<Error>>(
        &self,
        req: &InspectRequest<'_>,
        mut f: impl FnMut(StoredRow) -> std::result::Result<ControlFlow<()>, E>,
    ) -> std::result::Result<(), E> {
        let start = req.start_s.max(0);
        let end = req.end_s;
        if end < start {
            return Ok(());
        }
        let hour = |t: i64| {
            let t = u32::try_from(t).unwrap_or(u32::MAX);
            t - t % ROW_SPAN_SECS
        };
        let ranges: Vec<ScanOptions> = match req.metric {
            None => vec![ScanOptions::default()],
            Some(m) => {
                let uid = match self.uids().lookup(UidKind::Metric, m) {
                    Ok(uid) => uid,
                    Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
                    Err(e) => return Err(e.into()),
                };
                (0..self.salt_buckets().max(1))
                    .map(|salt| {
                        let (from, to) = scan_range(salt, uid, hour(start), hour(end));
                        ScanOptions::range(&from, &to)
                    })
                    .collect()
            }
        };
        // Rows whose hour [base, base + 3600) meets [start, end].
        let in_range = |base: u32| {
            let base = i64::from(base);
            base + i64::from(ROW_SPAN_SECS) > start && base <= end
        };
        let store = self.store();
        for opts in ranges {
            for row in store.db.scan(&store.data, &opts).map_err(Error::from)? {
                let row = row.map_err(Error::from)?;
                let rowkey = RowKey::decode(&row.key);
                let cells = match &rowkey {
                    Ok(k) if !in_range(k.base_time) => continue,
                    Ok(k) => row
                        .cells
                        .iter()
                        .map(|c| stored_cell(k.base_time, c))
                        .collect(),
                    Err(_) => Vec::new(),
                };
                let stored = StoredRow {
                    key: row.key,
                    rowkey,
                    cells,
                };
                if f(stored)?.is_break() {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

/// Decodes one cell of the row at `base_time` as a read would.
fn stored_cell(base_time: u32, cell: &Cell) -> StoredCell {
    let block = |flush_seq| StoredCell::Block {
        flush_seq,
        bytes: cell.value.clone(),
        points: decode_row_block(base_time, &cell.value),
    };
    if cell.column.is_empty() {
        return block(None);
    }
    if cell.column.len() == PARTIAL_COLUMN_LEN
        && let [PARTIAL_TAG, seq @ ..] = &cell.column[..]
        && let Ok(seq) = <[u8; 8]>::try_from(seq)
    {
        return block(Some(u64::from_be_bytes(seq)));
    }
    let raw = decode_column(&cell.column)
        .and_then(|off| Ok((off, decode_value(&cell.column, &cell.value)?)));
    match raw {
        Ok((offset_ms, value)) => StoredCell::Raw { offset_ms, value },
        Err(error) => StoredCell::Bad {
            column: cell.column.clone(),
            value: cell.value.clone(),
            error,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(column: &[u8], value: &[u8]) -> std::result::Result<(u32, Value), String> {
        let cell = Cell {
            column: Bytes::copy_from_slice(column),
            value: Bytes::copy_from_slice(value),
        };
        match stored_cell(0, &cell) {
            StoredCell::Raw { offset_ms, value } => Ok((offset_ms, value)),
            StoredCell::Bad { error, .. } => Err(error.to_string()),
            StoredCell::Block { .. } => Err("a block".into()),
        }
    }

    #[test]
    fn raw_cells_decode_and_bad_ones_are_errors() {
        assert_eq!(
            raw(&[0, 0x03, 0xe8], &[0x00, 42]),
            Ok((1000, Value::Int(42)))
        );
        assert_eq!(
            raw(&[0, 0, 0], &[0x01, 0xff, 0xfe]),
            Ok((0, Value::Int(-2)))
        );
        let f = 42.5f32.to_be_bytes();
        assert_eq!(
            raw(&[0, 0, 1], &[0x0b, f[0], f[1], f[2], f[3]]),
            Ok((1, Value::Float(42.5)))
        );
        assert!(raw(&[0, 0], &[0, 1]).is_err());
        assert!(raw(&[0xff, 0xff, 0xff], &[0, 1]).is_err());
        assert!(raw(&[0, 0, 0], &[]).is_err());
        assert!(raw(&[0, 0, 0], &[0x02, 1, 2, 3]).is_err());
        assert!(raw(&[0, 0, 0], &[0x10, 1]).is_err());
    }
}
