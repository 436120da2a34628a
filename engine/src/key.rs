//! The internal entry model shared by the memtable, the WAL and the SST layer.
//!
//! Every mutation becomes an [`Entry`]: an [`InternalKey`] (row, column, sequence number, kind),
//! the write time in milliseconds (used for TTL) and a value (empty for tombstones).
//!
//! ## Ordering of internal keys
//!
//! Internal keys sort by these rules, in order:
//!
//! 1. `row` ascending, as unsigned bytes.
//! 2. Within a row, every [`EntryKind::DeleteRow`] marker sorts before every cell of the row
//!    (a marker's column is always empty, and it is compared as if it were "before" the empty
//!    column, so it also precedes the empty-column cell).
//! 3. Then `column` ascending, as unsigned bytes.
//! 4. Then `seq` **descending**, so the newest version of a cell comes first and a reader at
//!    snapshot `s` takes the first entry with `seq <= s`.
//! 5. Ties (same row, column and seq, which a correct engine never writes) break on the kind
//!    code ascending, so the order is total.
//!
//! [`InternalKey::seek_row`] and [`InternalKey::seek_cell`] build the smallest key a reader must
//! seek to.

use std::cmp::Ordering;

use bytes::Bytes;

use crate::coding::{get_varint, put_varint, take, usize_len};

/// What an entry does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum EntryKind {
    /// Sets the cell `(row, column)` to the entry's value.
    Put,
    /// Deletes the cell `(row, column)`; the value is empty.
    DeleteCell,
    /// Deletes every cell of `row` with a lower sequence number; column and value are empty.
    DeleteRow,
}

impl EntryKind {
    /// The on-disk code of this kind (one byte, stable across versions).
    pub(crate) fn code(self) -> u8 {
        match self {
            EntryKind::Put => 1,
            EntryKind::DeleteCell => 2,
            EntryKind::DeleteRow => 3,
        }
    }

    /// Decodes an on-disk kind code.
    pub(crate) fn from_code(code: u8) -> Option<EntryKind> {
        match code {
            1 => Some(EntryKind::Put),
            2 => Some(EntryKind::DeleteCell),
            3 => Some(EntryKind::DeleteRow),
            _ => None,
        }
    }

    /// True for the two tombstone kinds.
    pub(crate) fn is_tombstone(self) -> bool {
        !matches!(self, EntryKind::Put)
    }
}

/// The key of one entry. See the module docs for its ordering.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct InternalKey {
    /// The rowkey.
    pub(crate) row: Bytes,
    /// The column qualifier; always empty for [`EntryKind::DeleteRow`].
    pub(crate) column: Bytes,
    /// The sequence number of the batch that wrote the entry.
    pub(crate) seq: u64,
    /// What the entry does.
    pub(crate) kind: EntryKind,
}

impl InternalKey {
    /// A key from its parts.
    pub(crate) fn new(
        row: impl Into<Bytes>,
        column: impl Into<Bytes>,
        seq: u64,
        kind: EntryKind,
    ) -> InternalKey {
        InternalKey {
            row: row.into(),
            column: column.into(),
            seq,
            kind,
        }
    }

    /// The same key in its own memory. A key read from a block shares the block's buffer,
    /// and keeps all of it alive for as long as the key lives.
    pub(crate) fn detached(&self) -> InternalKey {
        InternalKey::new(
            Bytes::copy_from_slice(&self.row),
            Bytes::copy_from_slice(&self.column),
            self.seq,
            self.kind,
        )
    }

    /// The smallest key of `row`: every entry of the row sorts at or after it.
    pub(crate) fn seek_row(row: &[u8]) -> InternalKey {
        InternalKey::new(
            Bytes::copy_from_slice(row),
            Bytes::new(),
            u64::MAX,
            EntryKind::DeleteRow,
        )
    }

    /// The smallest cell key of `(row, column)` visible at `snapshot_seq`: the first entry at or
    /// after it with the same row and column is the newest version with `seq <= snapshot_seq`.
    #[cfg(test)]
    pub(crate) fn seek_cell(row: &[u8], column: &[u8], snapshot_seq: u64) -> InternalKey {
        InternalKey::new(
            Bytes::copy_from_slice(row),
            Bytes::copy_from_slice(column),
            snapshot_seq,
            EntryKind::Put,
        )
    }

    /// Compares two keys given by parts, without building them.
    pub(crate) fn cmp_parts(
        a: (&[u8], &[u8], u64, EntryKind),
        b: (&[u8], &[u8], u64, EntryKind),
    ) -> Ordering {
        let marker = |k: EntryKind| u8::from(k != EntryKind::DeleteRow);
        a.0.cmp(b.0)
            .then_with(|| marker(a.3).cmp(&marker(b.3)))
            .then_with(|| a.1.cmp(b.1))
            .then_with(|| b.2.cmp(&a.2))
            .then_with(|| a.3.code().cmp(&b.3.code()))
    }

    /// The key as the tuple [`InternalKey::cmp_parts`] takes.
    pub(crate) fn parts(&self) -> (&[u8], &[u8], u64, EntryKind) {
        (&self.row, &self.column, self.seq, self.kind)
    }

    /// Encodes the key alone (used by the SST index block):
    /// `row_len varint | row | column_len varint | column | seq u64 BE | kind u8`.
    pub(crate) fn encode_to(&self, out: &mut Vec<u8>) {
        put_varint(out, self.row.len() as u64);
        out.extend_from_slice(&self.row);
        put_varint(out, self.column.len() as u64);
        out.extend_from_slice(&self.column);
        out.extend_from_slice(&self.seq.to_be_bytes());
        out.push(self.kind.code());
    }

    /// Decodes a key written by [`InternalKey::encode_to`] from the front of `buf`, advancing it.
    /// Errors describe what was wrong; the caller adds the file and offset.
    pub(crate) fn decode_from(buf: &mut &[u8]) -> Result<InternalKey, &'static str> {
        let row_len = usize_len(get_varint(buf)?)?;
        let row = take(buf, row_len)?;
        let col_len = usize_len(get_varint(buf)?)?;
        let column = take(buf, col_len)?;
        let seq_bytes = take(buf, 8)?;
        let mut seq = [0u8; 8];
        seq.copy_from_slice(seq_bytes);
        let kind_byte = take(buf, 1)?;
        let kind = EntryKind::from_code(kind_byte[0]).ok_or("unknown entry kind")?;
        Ok(InternalKey::new(
            Bytes::copy_from_slice(row),
            Bytes::copy_from_slice(column),
            u64::from_be_bytes(seq),
            kind,
        ))
    }
}

impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        InternalKey::cmp_parts(self.parts(), other.parts())
    }
}

impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// One entry: a key, the write time used for TTL, and a value (empty for tombstones).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The entry's key.
    pub(crate) key: InternalKey,
    /// Wall-clock write time in milliseconds since the Unix epoch.
    pub(crate) write_ms: u64,
    /// The cell value; empty for tombstones.
    pub(crate) value: Bytes,
}

impl Entry {
    /// An entry from its parts.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn new(key: InternalKey, write_ms: u64, value: impl Into<Bytes>) -> Entry {
        Entry {
            key,
            write_ms,
            value: value.into(),
        }
    }
}

/// The entry that decides a point read, without its key: what a get needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    /// `Put`, `DeleteCell`, or `DeleteRow` for a row tombstone.
    pub(crate) kind: EntryKind,
    /// The sequence number of the deciding entry.
    pub(crate) seq: u64,
    /// Its write time in milliseconds.
    pub(crate) write_ms: u64,
    /// Its value (empty for tombstones).
    pub(crate) value: Bytes,
}

impl Found {
    /// The newer of the newest visible row tombstone and the newest visible cell entry; the
    /// cell entry wins a tie (both written by one batch: the batch already resolved them).
    pub(crate) fn newer(marker: Option<Found>, cell: Option<Found>) -> Option<Found> {
        match (marker, cell) {
            (Some(m), Some(c)) => Some(if m.seq > c.seq { m } else { c }),
            (m, c) => c.or(m),
        }
    }

    /// The deciding entry of `(row, column)` as a full [`Entry`].
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn into_entry(self, row: &[u8], column: &[u8]) -> Entry {
        let column = if self.kind == EntryKind::DeleteRow {
            &[][..]
        } else {
            column
        };
        Entry::new(
            InternalKey::new(
                Bytes::copy_from_slice(row),
                Bytes::copy_from_slice(column),
                self.seq,
                self.kind,
            ),
            self.write_ms,
            self.value,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn k(row: &str, col: &str, seq: u64, kind: EntryKind) -> InternalKey {
        InternalKey::new(row.as_bytes().to_vec(), col.as_bytes().to_vec(), seq, kind)
    }

    #[test]
    fn ordering_rules() {
        let sorted = [
            k("a", "", 9, EntryKind::DeleteRow),
            k("a", "", 3, EntryKind::DeleteRow),
            k("a", "", 10, EntryKind::Put),
            k("a", "x", 7, EntryKind::DeleteCell),
            k("a", "x", 5, EntryKind::Put),
            k("a", "y", 100, EntryKind::Put),
            k("b", "", 1, EntryKind::DeleteRow),
            k("b", "a", 1, EntryKind::Put),
        ];
        for w in sorted.windows(2) {
            assert!(w[0] < w[1], "{:?} < {:?}", w[0], w[1]);
        }
        assert!(InternalKey::seek_row(b"a") <= sorted[0]);
        assert!(InternalKey::seek_cell(b"a", b"x", 6) > sorted[3]);
        assert!(InternalKey::seek_cell(b"a", b"x", 5) <= sorted[4]);
    }

    fn kind() -> impl Strategy<Value = EntryKind> {
        prop_oneof![
            Just(EntryKind::Put),
            Just(EntryKind::DeleteCell),
            Just(EntryKind::DeleteRow)
        ]
    }

    proptest! {
        #[test]
        fn key_encoding_round_trips(
            row in proptest::collection::vec(any::<u8>(), 0..20),
            col in proptest::collection::vec(any::<u8>(), 0..20),
            seq in any::<u64>(),
            kind in kind(),
        ) {
            let key = InternalKey::new(row, col, seq, kind);
            let mut buf = Vec::new();
            key.encode_to(&mut buf);
            let mut s = buf.as_slice();
            let back = InternalKey::decode_from(&mut s);
            prop_assert_eq!(back, Ok(key));
            prop_assert!(s.is_empty());
            // Every strict prefix fails to decode rather than panicking.
            for cut in 0..buf.len() {
                let mut s = &buf[..cut];
                prop_assert!(InternalKey::decode_from(&mut s).is_err());
            }
        }
    }
}
