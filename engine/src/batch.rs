//! Atomic write batches and their encoding.
//!
//! A [`WriteBatch`] keeps its operations pre-encoded in one buffer, after room for the WAL's
//! record frame, so the WAL can frame the batch where it is and keep the buffer instead of
//! copying it (see [`WriteBatch::take_buffer`]). The encoding of one operation is:
//!
//! ```text
//! +------+----------------+----------------------+-------------------------+------------------------+
//! | kind | table (varint) | row len (varint) row | column len (varint) col | value len (varint) val |
//! +------+----------------+----------------------+-------------------------+------------------------+
//!   u8     present always   present always         Put and Delete only       Put only
//! ```
//!
//! `kind` is 1 = put, 2 = delete cell, 3 = delete row. Varints are unsigned LEB128 (7 bits per
//! byte, least significant group first, high bit set on every byte but the last, see
//! `coding.rs`), at most 5 bytes for a u32 and 10 for a u64. The WAL wraps these bytes in a
//! batch record (see `wal.rs`).

use crate::coding::{Cursor, put_varint, varint_size};
use crate::table::Table;
use crate::wal::segment::RECORD_HEADER_BYTES;

/// Where a batch's operations start in its buffer: after room for the WAL's record frame and
/// the batch record's type byte and operation count (a u32 varint, at most 5 bytes).
pub(crate) const OPS_AT: usize = RECORD_HEADER_BYTES + 1 + 5;

const KIND_PUT: u8 = 1;
const KIND_DELETE: u8 = 2;
const KIND_DELETE_ROW: u8 = 3;

/// One decoded mutation, borrowing from the encoded batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpRef<'a> {
    Put {
        table: u32,
        row: &'a [u8],
        column: &'a [u8],
        value: &'a [u8],
    },
    Delete {
        table: u32,
        row: &'a [u8],
        column: &'a [u8],
    },
    DeleteRow {
        table: u32,
        row: &'a [u8],
    },
}

impl<'a> OpRef<'a> {
    /// The table and row the operation changes.
    pub(crate) fn table_row(&self) -> (u32, &'a [u8]) {
        match *self {
            OpRef::Put { table, row, .. }
            | OpRef::Delete { table, row, .. }
            | OpRef::DeleteRow { table, row } => (table, row),
        }
    }
}

/// A set of mutations, possibly across tables, applied atomically: after a crash either all of
/// them are visible or none is. Later operations in a batch win over earlier ones on the same
/// cell.
#[derive(Debug, Clone, Default)]
pub struct WriteBatch {
    /// [`OPS_AT`] bytes of room, then the encoded operations back to back; empty before the
    /// first operation, so an unused batch allocates nothing.
    data: Vec<u8>,
    /// Number of operations in `data`.
    count: u32,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// An empty batch with room for about `bytes` of encoded operations (each is its table id,
    /// row, column and value, plus a few bytes of lengths).
    pub fn with_capacity(bytes: usize) -> WriteBatch {
        WriteBatch {
            data: Vec::with_capacity(OPS_AT + bytes),
            count: 0,
        }
    }

    /// The buffer, with its room for the frame made before the first operation.
    fn ops(&mut self) -> &mut Vec<u8> {
        if self.data.is_empty() {
            self.data.resize(OPS_AT, 0);
        }
        &mut self.data
    }

    /// Sets `column` of `row` in `table` to `value`.
    pub fn put(&mut self, table: &Table, row: &[u8], column: &[u8], value: &[u8]) {
        self.put_pieces(table, &[row], column, value);
    }

    /// [`WriteBatch::put`] of a row given as the pieces it is made of, in order, which saves
    /// the caller assembling the row first: every byte of it is then copied once, straight into
    /// the batch. The ingest path writes each point this way.
    #[inline]
    pub fn put_pieces(&mut self, table: &Table, row: &[&[u8]], column: &[u8], value: &[u8]) {
        let row_len: usize = row.iter().map(|piece| piece.len()).sum();
        let table_id = u64::from(table.id());
        let len = 1
            + varint_size(table_id)
            + varint_size(row_len as u64)
            + row_len
            + varint_size(column.len() as u64)
            + column.len()
            + varint_size(value.len() as u64)
            + value.len();
        let data = self.ops();
        data.reserve(len);
        data.push(KIND_PUT);
        put_varint(data, table_id);
        put_varint(data, row_len as u64);
        for piece in row {
            data.extend_from_slice(piece);
        }
        put_bytes(data, column);
        put_bytes(data, value);
        self.count += 1;
    }

    /// Deletes one cell.
    pub fn delete(&mut self, table: &Table, row: &[u8], column: &[u8]) {
        let data = self.ops();
        data.push(KIND_DELETE);
        put_varint(data, u64::from(table.id()));
        put_bytes(data, row);
        put_bytes(data, column);
        self.count += 1;
    }

    /// Deletes every cell of a row that was written before this batch.
    pub fn delete_row(&mut self, table: &Table, row: &[u8]) {
        let data = self.ops();
        data.push(KIND_DELETE_ROW);
        put_varint(data, u64::from(table.id()));
        put_bytes(data, row);
        self.count += 1;
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True when the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Approximate encoded size in bytes.
    pub fn approximate_bytes(&self) -> usize {
        self.data().len()
    }

    /// Bytes of operations it has room for without reallocating.
    pub fn capacity(&self) -> usize {
        self.data.capacity().saturating_sub(OPS_AT)
    }

    /// Makes room for at least `bytes` more bytes of operations.
    pub fn reserve(&mut self, bytes: usize) {
        self.ops().reserve(bytes);
    }

    /// Removes every operation, keeping the allocation.
    pub fn clear(&mut self) {
        self.data.clear();
        self.count = 0;
    }

    /// Number of operations, as encoded in the WAL.
    pub(crate) fn count(&self) -> u32 {
        self.count
    }

    /// The encoded operations.
    pub(crate) fn data(&self) -> &[u8] {
        self.data.get(OPS_AT..).unwrap_or_default()
    }

    /// Takes the buffer (operations from [`OPS_AT`] on, [`WriteBatch::count`] of them),
    /// leaving the batch empty with `replacement`'s allocation.
    pub(crate) fn take_buffer(&mut self, mut replacement: Vec<u8>) -> Vec<u8> {
        replacement.clear();
        self.count = 0;
        std::mem::replace(&mut self.data, replacement)
    }
}

/// Decodes `count` operations from `data`, which must hold exactly that many.
///
/// Returns a description of the problem on malformed input; never panics.
pub(crate) fn decode_ops(data: &[u8], count: u64) -> Result<Vec<OpRef<'_>>, String> {
    let mut c = Cursor(data);
    // Every op takes at least 3 bytes, so a huge count cannot make us allocate much.
    let mut ops = Vec::with_capacity(count.min(data.len() as u64 / 3) as usize);
    for i in 0..count {
        let kind = c.byte().ok_or_else(|| format!("op {i}: truncated"))?;
        let table = c
            .varint_u32()
            .ok_or_else(|| format!("op {i}: bad table id"))?;
        let row = c.bytes().ok_or_else(|| format!("op {i}: bad row"))?;
        let op = match kind {
            KIND_PUT => OpRef::Put {
                table,
                row,
                column: c.bytes().ok_or_else(|| format!("op {i}: bad column"))?,
                value: c.bytes().ok_or_else(|| format!("op {i}: bad value"))?,
            },
            KIND_DELETE => OpRef::Delete {
                table,
                row,
                column: c.bytes().ok_or_else(|| format!("op {i}: bad column"))?,
            },
            KIND_DELETE_ROW => OpRef::DeleteRow { table, row },
            k => return Err(format!("op {i}: unknown kind {k}")),
        };
        ops.push(op);
    }
    if !c.0.is_empty() {
        return Err(format!("{} trailing bytes after {count} ops", c.0.len()));
    }
    Ok(ops)
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;

    fn table(id: u32) -> Table {
        Table::new(id, Arc::from("t"))
    }

    #[derive(Debug, Clone)]
    enum Op {
        Put(u32, Vec<u8>, Vec<u8>, Vec<u8>),
        Delete(u32, Vec<u8>, Vec<u8>),
        DeleteRow(u32, Vec<u8>),
    }

    fn op() -> impl Strategy<Value = Op> {
        let b = || proptest::collection::vec(any::<u8>(), 0..40);
        prop_oneof![
            (any::<u32>(), b(), b(), b()).prop_map(|(t, r, c, v)| Op::Put(t, r, c, v)),
            (any::<u32>(), b(), b()).prop_map(|(t, r, c)| Op::Delete(t, r, c)),
            (any::<u32>(), b()).prop_map(|(t, r)| Op::DeleteRow(t, r)),
        ]
    }

    proptest! {
        #[test]
        fn batch_round_trips(ops in proptest::collection::vec(op(), 0..20)) {
            let mut b = WriteBatch::new();
            for o in &ops {
                match o {
                    Op::Put(t, r, c, v) => b.put(&table(*t), r, c, v),
                    Op::Delete(t, r, c) => b.delete(&table(*t), r, c),
                    Op::DeleteRow(t, r) => b.delete_row(&table(*t), r),
                }
            }
            prop_assert_eq!(b.len(), ops.len());
            let decoded = decode_ops(b.data(), u64::from(b.count())).map_err(TestCaseError::fail)?;
            prop_assert_eq!(decoded.len(), ops.len());
            for (d, o) in decoded.iter().zip(&ops) {
                let ok = match (d, o) {
                    (OpRef::Put { table, row, column, value }, Op::Put(t, r, c, v)) =>
                        table == t && row == r && column == c && value == v,
                    (OpRef::Delete { table, row, column }, Op::Delete(t, r, c)) =>
                        table == t && row == r && column == c,
                    (OpRef::DeleteRow { table, row }, Op::DeleteRow(t, r)) =>
                        table == t && row == r,
                    _ => false,
                };
                prop_assert!(ok, "{:?} != {:?}", d, o);
            }
        }

        /// A row put in pieces encodes exactly as the whole row put at once.
        #[test]
        fn a_row_put_in_pieces_encodes_as_the_whole_row(
            pieces in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..6),
            column in proptest::collection::vec(any::<u8>(), 0..200),
            value in proptest::collection::vec(any::<u8>(), 0..200),
            id in any::<u32>(),
        ) {
            let whole: Vec<u8> = pieces.concat();
            let slices: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
            let (mut a, mut b) = (WriteBatch::new(), WriteBatch::new());
            a.put(&table(id), &whole, &column, &value);
            a.put(&table(1), b"r", b"c", b"v");
            b.put_pieces(&table(id), &slices, &column, &value);
            b.put_pieces(&table(1), &[b"r"], b"c", b"v");
            prop_assert_eq!(a.data(), b.data());
            prop_assert_eq!(a.count(), b.count());
        }

        #[test]
        fn decode_never_panics(data in proptest::collection::vec(any::<u8>(), 0..64), n in 0u64..10) {
            let _ = decode_ops(&data, n);
        }
    }

    #[test]
    fn count_mismatch_is_an_error() {
        let mut b = WriteBatch::new();
        b.put(&table(1), b"r", b"c", b"v");
        assert!(decode_ops(b.data(), 2).is_err());
        assert!(decode_ops(b.data(), 0).is_err());
        b.clear();
        assert!(b.is_empty());
        assert_eq!(b.approximate_bytes(), 0);
    }
}
