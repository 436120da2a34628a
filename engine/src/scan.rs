//! Scan options and the rows and cells reads return.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::Result;

/// A predicate on the rowkey, checked before a row's values are decoded.
pub type RowFilter = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// One cell of a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// Column qualifier.
    pub column: Bytes,
    /// Value (empty for key-only reads).
    pub value: Bytes,
}

/// A row and its visible cells, sorted by column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The rowkey.
    pub key: Bytes,
    /// Cells in column order.
    pub cells: Vec<Cell>,
}

/// What a scan reads.
#[derive(Clone, Default)]
pub struct ScanOptions {
    /// First row (inclusive); `None` starts at the beginning of the table.
    pub start: Option<Vec<u8>>,
    /// Row to stop before (exclusive); `None` runs to the end of the table.
    pub stop: Option<Vec<u8>>,
    /// Return rows from the last to the first.
    pub reverse: bool,
    /// Only these columns; `None` reads all.
    pub columns: Option<Vec<Vec<u8>>>,
    /// Return columns without values.
    pub keys_only: bool,
    /// Skip rows whose key fails this predicate.
    pub row_filter: Option<RowFilter>,
    /// Return at most this many rows.
    pub limit: Option<usize>,
    /// Leave the block cache as it is: blocks read from files are not added to it. For reads
    /// that touch data once, such as a rewrite of what they read, which would otherwise push
    /// out the blocks other reads use.
    pub skip_cache_fill: bool,
}

impl ScanOptions {
    /// Every row whose key starts with `prefix`.
    pub fn prefix(prefix: &[u8]) -> ScanOptions {
        ScanOptions {
            start: Some(prefix.to_vec()),
            stop: prefix_successor(prefix),
            ..ScanOptions::default()
        }
    }

    /// Rows in `[start, stop)`.
    pub fn range(start: &[u8], stop: &[u8]) -> ScanOptions {
        ScanOptions {
            start: Some(start.to_vec()),
            stop: Some(stop.to_vec()),
            ..ScanOptions::default()
        }
    }

    /// True when `row` lies in the scan's range.
    pub(crate) fn contains(&self, row: &[u8]) -> bool {
        self.start.as_deref().is_none_or(|s| row >= s)
            && self.stop.as_deref().is_none_or(|s| row < s)
    }
}

impl fmt::Debug for ScanOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScanOptions")
            .field("start", &self.start)
            .field("stop", &self.stop)
            .field("reverse", &self.reverse)
            .field("columns", &self.columns)
            .field("keys_only", &self.keys_only)
            .field("row_filter", &self.row_filter.as_ref().map(|_| "<fn>"))
            .field("limit", &self.limit)
            .field("skip_cache_fill", &self.skip_cache_fill)
            .finish()
    }
}

/// The smallest key greater than every key with `prefix`, or `None` if there is none.
pub(crate) fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// An iterator over the rows of a scan. It owns what it reads, so it can outlive the call.
pub struct RowIter {
    pub(crate) inner: Box<dyn Iterator<Item = Result<Row>> + Send>,
}

impl Iterator for RowIter {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        self.inner.next()
    }
}

impl fmt::Debug for RowIter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RowIter")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_successor_carries() {
        assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_successor(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xff, 0xff]), None);
        assert_eq!(prefix_successor(b""), None);
    }
}
