//! Flush folding: a table may rewrite each row's entries as a flush writes them to level 0.
//!
//! A flush normally copies every entry of a frozen memtable into a level-0 file, one entry per
//! cell. A table whose rows take many small cells (a time-series row takes one per point) can
//! instead hand each row's entries to its [`FlushFold`], which may return a smaller set: for
//! strata-tsdb, one encoded block in place of hundreds of raw cells. Everything downstream (the
//! level-0 file, compactions, later reads) then handles one entry where it handled hundreds.
//!
//! The contract that keeps this safe:
//!
//! * A fold sees one row's entries of one frozen memtable, in internal-key order (row
//!   tombstones first, then columns ascending, newest sequence number first within a column).
//! * Its output must mean the same for any read of the finished level-0 file as the input did.
//!   Reads of the file only come from snapshots taken after the flush, whose sequence numbers
//!   are at least the memtable's highest, so the fold may drop versions a newer entry of the
//!   same row hides, and may give a new entry any sequence number up to the highest one it
//!   folds. Snapshots taken before the flush keep reading the memtable itself.
//! * Its output must be in internal-key order. The engine checks this and writes the row
//!   unfolded if it is not.

use std::fmt;
use std::sync::Arc;

/// What one entry handed to a fold does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoldKind {
    /// Sets the cell to the value.
    Put,
    /// Deletes the cell.
    DeleteCell,
    /// Deletes every cell of the row with a lower sequence number.
    DeleteRow,
}

/// One entry of the row being folded, borrowed from the memtable.
#[derive(Debug, Clone, Copy)]
pub struct FoldEntry<'a> {
    /// The column (empty for a row tombstone).
    pub column: &'a [u8],
    /// The value (empty for tombstones).
    pub value: &'a [u8],
    /// The sequence number of the batch that wrote it.
    pub seq: u64,
    /// What it does.
    pub kind: FoldKind,
}

/// One entry of a fold's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FoldOut {
    /// Keep the input entry at this index as it is.
    Keep(usize),
    /// A new cell. Its write time is the newest write time of the row's input entries.
    Put {
        /// The cell's column.
        column: Vec<u8>,
        /// The cell's value.
        value: Vec<u8>,
        /// Its sequence number: at most the highest of the row's input entries.
        seq: u64,
    },
}

/// Rewrites a row's entries as a flush writes them; see the module documentation for the
/// contract.
pub trait FlushFold: Send + Sync {
    /// The replacement for `row`'s `entries`, or `None` to write them unchanged.
    fn fold(&self, row: &[u8], entries: &[FoldEntry<'_>]) -> Option<Vec<FoldOut>>;
}

/// A table's flush fold, as set in [`crate::TableOptions::flush_fold`]. Two are equal when
/// they are the same object.
#[derive(Clone)]
pub struct FlushFolder(pub Arc<dyn FlushFold>);

impl fmt::Debug for FlushFolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FlushFolder(..)")
    }
}

impl PartialEq for FlushFolder {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for FlushFolder {}
