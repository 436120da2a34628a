//! The payload of a WAL record: a table creation or a write batch.
//!
//! The byte layout is documented in the `wal` module's `## Format` section.

use std::ops::Range;

use crate::batch::{OPS_AT, OpRef, WriteBatch, decode_ops};
use crate::coding::{Cursor, put_varint};
use crate::wal::segment::{RECORD_HEADER_BYTES, seal_record};

/// Payload type of a table-creation record.
const ENTRY_TABLE: u8 = 1;
/// Payload type of a write-batch record.
const ENTRY_BATCH: u8 = 2;
/// The whole payload of a segment's end record (see rule 8 of the `wal` module).
pub(crate) const END_PAYLOAD: &[u8] = &[3];

/// A WAL record's payload, to be encoded.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Entry<'a> {
    /// Table `name` now exists with id `id`.
    Table { id: u32, name: &'a str },
    /// An atomic batch of mutations.
    Batch(&'a WriteBatch),
}

impl Entry<'_> {
    /// Appends the encoded payload to `out`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Entry::Table { id, name } => {
                out.push(ENTRY_TABLE);
                put_varint(out, u64::from(*id));
                out.extend_from_slice(name.as_bytes());
            }
            Entry::Batch(b) => {
                out.push(ENTRY_BATCH);
                put_varint(out, u64::from(b.count()));
                out.extend_from_slice(b.data());
            }
        }
    }

    /// An upper bound on the encoded size.
    pub(crate) fn max_encoded_len(&self) -> usize {
        match self {
            Entry::Table { name, .. } => 1 + 5 + name.len(),
            Entry::Batch(b) => 1 + 5 + b.data().len(),
        }
    }

    /// True for a write batch.
    pub(crate) fn is_batch(&self) -> bool {
        matches!(self, Entry::Batch(_))
    }
}

/// Frames, where it is, the batch record of `count` operations whose buffer (from
/// [`WriteBatch::take_buffer`]) is `buf`: its type byte, count and frame (sealed with `seed`)
/// go in the room before the operations. Returns the whole record's range in `buf`.
pub(crate) fn frame_batch_in_place(buf: &mut [u8], count: u32, seed: u64) -> Range<usize> {
    let mut head = Vec::with_capacity(6);
    head.push(ENTRY_BATCH);
    put_varint(&mut head, u64::from(count));
    let payload_at = OPS_AT - head.len();
    buf[payload_at..OPS_AT].copy_from_slice(&head);
    let at = payload_at - RECORD_HEADER_BYTES;
    seal_record(&mut buf[at..], seed);
    at..buf.len()
}

/// A decoded WAL record payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DecodedEntry<'a> {
    /// Table `name` has id `id`.
    Table { id: u32, name: &'a str },
    /// The operations of a batch, in order.
    Batch(Vec<OpRef<'a>>),
    /// The end of a segment: what follows is not part of it.
    End,
}

/// Decodes a record payload; the error describes what is malformed.
pub(crate) fn decode_entry(payload: &[u8]) -> Result<DecodedEntry<'_>, String> {
    let mut c = Cursor(payload);
    match c.byte() {
        Some(ENTRY_TABLE) => {
            let id = c.varint_u32().ok_or("table record: bad id")?;
            let name = std::str::from_utf8(c.0).map_err(|_| "table record: name is not UTF-8")?;
            if name.is_empty() {
                return Err("table record: empty name".into());
            }
            Ok(DecodedEntry::Table { id, name })
        }
        Some(ENTRY_BATCH) => {
            let count = c.varint().ok_or("batch record: bad op count")?;
            let ops = decode_ops(c.0, count).map_err(|e| format!("batch record: {e}"))?;
            Ok(DecodedEntry::Batch(ops))
        }
        Some(3) if c.0.is_empty() => Ok(DecodedEntry::End),
        Some(t) => Err(format!("unknown record type {t}")),
        None => Err("empty record".into()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::table::Table;

    #[test]
    fn entries_round_trip() {
        let mut out = Vec::new();
        let e = Entry::Table {
            id: 300,
            name: "tsdb",
        };
        e.encode(&mut out);
        assert!(out.len() <= e.max_encoded_len());
        assert_eq!(
            decode_entry(&out),
            Ok(DecodedEntry::Table {
                id: 300,
                name: "tsdb"
            })
        );

        let t = Table::new(3, Arc::from("x"));
        let mut b = WriteBatch::new();
        b.put(&t, b"r", b"c", b"v");
        b.delete_row(&t, b"q");
        let e = Entry::Batch(&b);
        out.clear();
        e.encode(&mut out);
        assert!(out.len() <= e.max_encoded_len());
        assert_eq!(
            decode_entry(&out),
            Ok(DecodedEntry::Batch(vec![
                OpRef::Put {
                    table: 3,
                    row: b"r",
                    column: b"c",
                    value: b"v"
                },
                OpRef::DeleteRow {
                    table: 3,
                    row: b"q"
                },
            ]))
        );
        assert!(decode_entry(&[]).is_err());
        assert!(decode_entry(&[9]).is_err());
        assert!(decode_entry(&[ENTRY_TABLE, 1]).is_err());
    }
}
