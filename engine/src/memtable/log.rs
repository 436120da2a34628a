//! A row's packed log: the encoding of its entries (see `## The log` in the `memtable`
//! module), and the view of one entry that readers and the merge with spilled entries share.

use std::cmp::Ordering as CmpOrdering;

use super::arena::ArenaPos;
use crate::coding::{put_varint, varint_size};
use crate::key::EntryKind;

/// The longest column length the tag holds; longer lengths continue in a varint.
pub(super) const TAG_COLUMN_MAX: usize = 63;

pub(super) fn kind_code(kind: EntryKind) -> u8 {
    match kind {
        EntryKind::Put => 0,
        EntryKind::DeleteCell => 1,
        EntryKind::DeleteRow => 2,
    }
}

pub(super) fn kind_of(code: u8) -> EntryKind {
    match code & 3 {
        0 => EntryKind::Put,
        1 => EntryKind::DeleteCell,
        _ => EntryKind::DeleteRow,
    }
}

/// 0 for a row tombstone, 1 for a cell entry: tombstones sort first.
pub(super) fn cell_of(kind: EntryKind) -> u8 {
    u8::from(kind != EntryKind::DeleteRow)
}

/// Orders two entries of one row like [`InternalKey`](crate::key::InternalKey)s, ignoring the
/// kind of two cell entries (within a batch a later one replaces an earlier one of the same
/// cell).
pub(super) fn cmp_slot(a: (u8, &[u8], u64), b: (u8, &[u8], u64)) -> CmpOrdering {
    a.0.cmp(&b.0)
        .then_with(|| a.1.cmp(b.1))
        .then_with(|| b.2.cmp(&a.2))
}

#[inline]
pub(super) fn get_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

pub(super) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub(super) fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

/// The bytes [`encode_entry`] writes for these arguments.
#[inline]
pub(super) fn entry_len(seq_delta: i64, column: &[u8], value: &[u8]) -> usize {
    let long = if column.len() >= TAG_COLUMN_MAX {
        varint_size((column.len() - TAG_COLUMN_MAX) as u64)
    } else {
        0
    };
    1 + long
        + varint_size(zigzag(seq_delta))
        + column.len()
        + varint_size(value.len() as u64)
        + value.len()
}

/// Appends one entry to a log.
#[inline]
pub(super) fn encode_entry(
    log: &mut Vec<u8>,
    kind: EntryKind,
    seq_delta: i64,
    column: &[u8],
    value: &[u8],
) {
    let short = column.len().min(TAG_COLUMN_MAX);
    log.push(kind_code(kind) | (short as u8) << 2);
    if short == TAG_COLUMN_MAX {
        put_varint(log, (column.len() - TAG_COLUMN_MAX) as u64);
    }
    put_varint(log, zigzag(seq_delta));
    log.extend_from_slice(column);
    put_varint(log, value.len() as u64);
    log.extend_from_slice(value);
}

/// One entry of a row, borrowed from its log or from the arena.
#[derive(Debug, Clone, Copy)]
pub(super) struct View<'a> {
    pub(super) kind: EntryKind,
    pub(super) seq: u64,
    pub(super) column: &'a [u8],
    pub(super) value: &'a [u8],
    /// Where it lives: `None` in the log (`column` and `value` are slices of it), `Some` in the
    /// arena.
    pub(super) spilled: Option<ArenaPos>,
}

impl View<'_> {
    pub(super) fn slot(&self) -> (u8, &[u8], u64) {
        (cell_of(self.kind), self.column, self.seq)
    }
}

/// Decodes a log (entries in order); stops at the first undecodable byte, which a log this
/// module wrote never has.
pub(super) struct LogIter<'a> {
    pub(super) log: &'a [u8],
    pub(super) at: usize,
    pub(super) base: u64,
}

impl<'a> Iterator for LogIter<'a> {
    type Item = View<'a>;

    #[inline]
    fn next(&mut self) -> Option<View<'a>> {
        let log = self.log;
        let tag = *log.get(self.at)?;
        let mut at = self.at + 1;
        let mut col_len = usize::from(tag >> 2);
        if col_len == TAG_COLUMN_MAX {
            col_len += usize::try_from(get_varint(log, &mut at)?).ok()?;
        }
        let seq = self
            .base
            .wrapping_add_signed(unzigzag(get_varint(log, &mut at)?));
        let column = log.get(at..at.checked_add(col_len)?)?;
        at += col_len;
        let value_len = usize::try_from(get_varint(log, &mut at)?).ok()?;
        let value = log.get(at..at.checked_add(value_len)?)?;
        self.at = at + value_len;
        Some(View {
            kind: kind_of(tag),
            seq,
            column,
            value,
            spilled: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{encode_entry, entry_len};
    use crate::key::EntryKind;

    proptest! {
        /// A row's log grows when `entry_len` says the entry does not fit, so it must be what
        /// `encode_entry` writes, neither more (logs would double early) nor less.
        #[test]
        fn entry_len_is_what_encode_entry_writes(
            seq_delta in any::<i64>(),
            column in proptest::collection::vec(any::<u8>(), 0..200),
            value in proptest::collection::vec(any::<u8>(), 0..300),
            kind in prop_oneof![
                Just(EntryKind::Put),
                Just(EntryKind::DeleteCell),
                Just(EntryKind::DeleteRow),
            ],
        ) {
            let mut log = vec![7u8; 3];
            encode_entry(&mut log, kind, seq_delta, &column, &value);
            prop_assert_eq!(log.len() - 3, entry_len(seq_delta, &column, &value));
        }
    }
}
