//! One row of a memtable: its key, its packed log, and the entries spilled beside it.

use std::cmp::Ordering as CmpOrdering;

use bytes::Bytes;

use super::arena::{Arena, ArenaPos};
use super::log::{LogIter, View, cell_of, cmp_slot, encode_entry};
use crate::key::EntryKind;

/// Bytes charged per spilled entry on top of its column and value.
pub(super) const SPILL_OVERHEAD: u64 = std::mem::size_of::<Spilled>() as u64;
/// Bytes of the last entry's column kept in the row, so that the append test compares a
/// time-series column without reading the log.
pub(super) const HEAD_LEN: usize = 8;

/// An entry kept beside a row's log.
#[derive(Debug, Clone, Copy)]
pub(super) struct Spilled {
    pub(super) at: ArenaPos,
    pub(super) column_len: u32,
    pub(super) value_len: u32,
    pub(super) kind: EntryKind,
    pub(super) seq: u64,
}

impl Spilled {
    pub(super) fn view<'a>(&self, arena: &'a Arena) -> View<'a> {
        View {
            kind: self.kind,
            seq: self.seq,
            column: arena.bytes(self.at, 0, self.column_len),
            value: arena.bytes(self.at, self.column_len, self.value_len),
            spilled: Some(self.at),
        }
    }
}

/// The last entry of a row's log, for the append test.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Last {
    pub(super) seq: u64,
    /// Where it starts in the log.
    pub(super) offset: u32,
    pub(super) column_len: u32,
    /// The column's first [`HEAD_LEN`] bytes, zero-padded.
    pub(super) head: [u8; HEAD_LEN],
    pub(super) cell: u8,
}

/// One row: its key, its log, and its spilled entries.
#[derive(Debug)]
pub(super) struct Row {
    pub(super) key: Bytes,
    pub(super) log: Vec<u8>,
    /// Valid while `log` is not empty.
    pub(super) last: Last,
    #[expect(
        clippy::box_collection,
        reason = "a row that never spills, nearly every row, pays 8 bytes for this, not 24"
    )]
    pub(super) spill: Option<Box<Vec<Spilled>>>,
}

/// `column`'s first [`HEAD_LEN`] bytes, zero-padded.
#[inline]
pub(super) fn column_head(column: &[u8]) -> [u8; HEAD_LEN] {
    if let Some(head) = column.first_chunk::<HEAD_LEN>() {
        return *head;
    }
    // Shifted in, not copied: a copy of a variable length under 8 bytes is a call to
    // `memcpy`, whose narrow stores then stall the 8-byte load of the comparison, on every
    // operation a memtable applies.
    let mut head = 0u64;
    for (i, &b) in column.iter().enumerate() {
        head |= u64::from(b) << (8 * (HEAD_LEN - 1 - i));
    }
    head.to_be_bytes()
}

impl Row {
    /// Whether an entry `(cell, column, seq)` sorts after the log's last entry.
    #[inline]
    pub(super) fn appends(&self, cell: u8, column: &[u8], seq: u64, base: u64) -> bool {
        if self.log.is_empty() {
            return true;
        }
        let last = &self.last;
        let by_column = if last.column_len as usize <= HEAD_LEN && column.len() <= HEAD_LEN {
            // Zero-padded heads order like the columns, a tie going to the shorter.
            u64::from_be_bytes(column_head(column))
                .cmp(&u64::from_be_bytes(last.head))
                .then((column.len()).cmp(&(last.column_len as usize)))
        } else {
            match self.log_iter(base, last.offset as usize).next() {
                Some(v) => column.cmp(v.column),
                None => return false,
            }
        };
        cell.cmp(&last.cell)
            .then(by_column)
            .then_with(|| last.seq.cmp(&seq))
            .is_gt()
    }

    pub(super) fn log_iter(&self, base: u64, from: usize) -> LogIter<'_> {
        LogIter {
            log: &self.log,
            at: from,
            base,
        }
    }

    /// Appends an entry that sorts after the last one.
    #[inline]
    pub(super) fn append(
        &mut self,
        kind: EntryKind,
        seq: u64,
        base: u64,
        column: &[u8],
        value: &[u8],
    ) {
        let offset = self.log.len() as u32;
        encode_entry(
            &mut self.log,
            kind,
            seq.wrapping_sub(base) as i64,
            column,
            value,
        );
        self.last = Last {
            seq,
            offset,
            column_len: column.len() as u32,
            head: column_head(column),
            cell: cell_of(kind),
        };
    }

    /// Drops the cell entries written with `seq` (a row tombstone of the same batch overrides
    /// them). Returns the change in bytes held.
    pub(super) fn drop_cells_of(&mut self, seq: u64, base: u64) -> i64 {
        let mut change = 0i64;
        if let Some(spill) = &mut self.spill {
            let before = spill.len();
            spill.retain(|e| e.kind == EntryKind::DeleteRow || e.seq != seq);
            // The arena bytes stay; only the entries go.
            change -= ((before - spill.len()) as u64 * SPILL_OVERHEAD) as i64;
        }
        if !self
            .log_iter(base, 0)
            .any(|v| v.kind != EntryKind::DeleteRow && v.seq == seq)
        {
            return change;
        }
        let old = std::mem::take(&mut self.log);
        let mut kept = Row {
            key: self.key.clone(),
            log: Vec::with_capacity(old.len()),
            last: Last::default(),
            spill: None,
        };
        for v in (LogIter {
            log: &old,
            at: 0,
            base,
        })
        .filter(|v| v.kind == EntryKind::DeleteRow || v.seq != seq)
        {
            kept.append(v.kind, v.seq, base, v.column, v.value);
        }
        change += kept.log.capacity() as i64 - old.capacity() as i64;
        self.log = kept.log;
        self.last = kept.last;
        change
    }

    /// All of the row's entries in internal-key order, into `out`: the log's, with the spilled
    /// ones merged in, a spilled entry replacing a logged one of the same slot (it was written
    /// later), and of several spilled ones of a slot the last.
    pub(super) fn view<'a>(&'a self, base: u64, arena: &'a Arena, out: &mut Vec<View<'a>>) {
        out.clear();
        let Some(spill) = self.spill.as_deref().filter(|s| !s.is_empty()) else {
            out.extend(self.log_iter(base, 0));
            return;
        };
        let mut spilled: Vec<View<'a>> = spill.iter().map(|s| s.view(arena)).collect();
        // Stable: of equal slots the later write stays later.
        spilled.sort_by(|a, b| cmp_slot(a.slot(), b.slot()));
        spilled.dedup_by(|later, earlier| {
            if cmp_slot(later.slot(), earlier.slot()).is_eq() {
                *earlier = *later;
                true
            } else {
                false
            }
        });
        let mut logged = self.log_iter(base, 0).peekable();
        let mut spilled = spilled.into_iter().peekable();
        loop {
            let next = match (logged.peek(), spilled.peek()) {
                (Some(l), Some(s)) => match cmp_slot(l.slot(), s.slot()) {
                    CmpOrdering::Less => logged.next(),
                    CmpOrdering::Greater => spilled.next(),
                    CmpOrdering::Equal => {
                        logged.next();
                        spilled.next()
                    }
                },
                (Some(_), None) => logged.next(),
                (None, Some(_)) => spilled.next(),
                (None, None) => break,
            };
            out.extend(next);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_head_is_its_first_bytes_zero_padded() {
        let column: Vec<u8> = (1..=10).collect();
        for len in 0..=column.len() {
            let mut want = [0u8; HEAD_LEN];
            let n = len.min(HEAD_LEN);
            want[..n].copy_from_slice(&column[..n]);
            assert_eq!(column_head(&column[..len]), want, "length {len}");
        }
    }
}
