//! Atomic write batches.

use crate::db::Table;

/// One mutation inside a [`WriteBatch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    Put {
        table: u32,
        row: Vec<u8>,
        column: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        table: u32,
        row: Vec<u8>,
        column: Vec<u8>,
    },
    DeleteRow {
        table: u32,
        row: Vec<u8>,
    },
}

/// A set of mutations, possibly across tables, applied atomically: after a crash either all of
/// them are visible or none is. Later operations in a batch win over earlier ones on the same
/// cell.
#[derive(Debug, Clone, Default)]
pub struct WriteBatch {
    pub(crate) ops: Vec<Op>,
    bytes: usize,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Sets `column` of `row` in `table` to `value`.
    pub fn put(&mut self, table: &Table, row: &[u8], column: &[u8], value: &[u8]) {
        self.bytes += row.len() + column.len() + value.len() + 16;
        self.ops.push(Op::Put {
            table: table.id(),
            row: row.to_vec(),
            column: column.to_vec(),
            value: value.to_vec(),
        });
    }

    /// Deletes one cell.
    pub fn delete(&mut self, table: &Table, row: &[u8], column: &[u8]) {
        self.bytes += row.len() + column.len() + 16;
        self.ops.push(Op::Delete {
            table: table.id(),
            row: row.to_vec(),
            column: column.to_vec(),
        });
    }

    /// Deletes every cell of a row that was written before this batch.
    pub fn delete_row(&mut self, table: &Table, row: &[u8]) {
        self.bytes += row.len() + 16;
        self.ops.push(Op::DeleteRow {
            table: table.id(),
            row: row.to_vec(),
        });
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Approximate encoded size in bytes.
    pub fn approximate_bytes(&self) -> usize {
        self.bytes
    }

    /// Removes every operation, keeping the allocation.
    pub fn clear(&mut self) {
        self.ops.clear();
        self.bytes = 0;
    }
}
