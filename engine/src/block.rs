//! Data blocks: sorted entries with prefix-compressed keys and restart points.
//!
//! ## Format
//!
//! An uncompressed block (all integers big-endian unless marked varint, which is LEB128):
//!
//! ```text
//! +---------+---------+-----+-----------+----------------+------------------+
//! | entry 0 | entry 1 | ... | entry n-1 | restarts[r] u32 | restart_count u32 |
//! +---------+---------+-----+-----------+----------------+------------------+
//!
//! entry:
//! +--------------+----------------+---------------+---------+-------------+------------------+
//! | shared varint | unshared varint | row_len varint | kind u8 | seq varint  | write_ms varint  |
//! +--------------+----------------+---------------+---------+-------------+------------------+
//! | value_len varint | key suffix (unshared bytes) | value (value_len bytes) |
//! +------------------+-----------------------------+-------------------------+
//! ```
//!
//! The entry's *key bytes* are `row ‖ column`; `shared` bytes come from the previous entry's key
//! bytes and `unshared` follow. `row_len` splits the key bytes into row and column. `kind` is
//! [`EntryKind::code`].
//!
//! Rules:
//!
//! 1. Entries are in strictly ascending [`InternalKey`] order.
//! 2. Every [`RESTART_INTERVAL`]-th entry (starting with the first) is a restart point: its
//!    `shared` is 0. `restarts` holds their byte offsets, ascending, each `<` the start of the
//!    restart array. A non-empty block has `restart_count >= 1` and `restarts[0] == 0`.
//! 3. `shared` never exceeds the previous key's length; `row_len` never exceeds the key length.
//! 4. An empty block is just `restart_count = 0`.
//!
//! On disk a block is stored compressed with a trailer; see [`trailer`].
#![cfg_attr(
    not(test),
    expect(dead_code, reason = "wired into Db by the LSM issue")
)]

mod iter;
pub(crate) mod trailer;

use std::sync::Arc;

use bytes::Bytes;

pub(crate) use iter::{BlockIter, BlockRevIter};

use crate::error::{Error, Result};
use crate::key::{Entry, EntryKind, InternalKey, get_varint, put_varint, take, usize_len};

/// Entries between restart points. 16 keeps a seek's linear scan short while the restart array
/// stays under 2% of a block of small time-series cells.
pub(crate) const RESTART_INTERVAL: usize = 16;

/// Builds one uncompressed block.
#[derive(Debug, Default)]
pub(crate) struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    last_key: Vec<u8>,
    entries: usize,
}

impl BlockBuilder {
    /// An empty builder.
    pub(crate) fn new() -> BlockBuilder {
        BlockBuilder::default()
    }

    /// Appends an entry. Entries must come in ascending [`InternalKey`] order.
    pub(crate) fn add(&mut self, entry: &Entry) {
        let key = &entry.key;
        let shared = if self.entries.is_multiple_of(RESTART_INTERVAL) {
            self.restarts.push(self.buf.len() as u32);
            0
        } else {
            let full = key.row.iter().chain(key.column.iter());
            full.zip(self.last_key.iter())
                .take_while(|(a, b)| a == b)
                .count()
        };
        self.last_key.clear();
        self.last_key.extend_from_slice(&key.row);
        self.last_key.extend_from_slice(&key.column);
        put_varint(&mut self.buf, shared as u64);
        put_varint(&mut self.buf, (self.last_key.len() - shared) as u64);
        put_varint(&mut self.buf, key.row.len() as u64);
        self.buf.push(key.kind.code());
        put_varint(&mut self.buf, key.seq);
        put_varint(&mut self.buf, entry.write_ms);
        put_varint(&mut self.buf, entry.value.len() as u64);
        self.buf.extend_from_slice(&self.last_key[shared..]);
        self.buf.extend_from_slice(&entry.value);
        self.entries += 1;
    }

    /// The size the block would have if finished now.
    pub(crate) fn estimated_len(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// True if no entry was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Appends the restart array and returns the block's bytes, resetting the builder.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for r in &self.restarts {
            out.extend_from_slice(&r.to_be_bytes());
        }
        out.extend_from_slice(&(self.restarts.len() as u32).to_be_bytes());
        self.restarts.clear();
        self.last_key.clear();
        self.entries = 0;
        out
    }
}

/// A decoded (uncompressed) block, cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Block {
    data: Bytes,
    /// Where the restart array starts (= end of the entries).
    restarts_at: usize,
    num_restarts: usize,
    /// File and file offset of the block, for errors.
    file: Arc<str>,
    offset: u64,
}

/// One decoded entry plus where the next one starts.
#[derive(Debug)]
pub(crate) struct Decoded {
    pub(crate) entry: Entry,
    pub(crate) next: usize,
}

impl Block {
    /// Checks the restart array of `data` (the uncompressed block at `offset` of `file`).
    pub(crate) fn new(data: Bytes, file: Arc<str>, offset: u64) -> Result<Block> {
        let bad = |detail: &str| Error::corruption(&*file, offset, format!("data block: {detail}"));
        let len = data.len();
        if len < 4 {
            return Err(bad("shorter than its restart count"));
        }
        let num_restarts = be_u32(&data[len - 4..]) as usize;
        let restarts_at = num_restarts
            .checked_mul(4)
            .and_then(|n| (len - 4).checked_sub(n))
            .ok_or_else(|| bad("restart array larger than the block"))?;
        let block = Block {
            data,
            restarts_at,
            num_restarts,
            file: file.clone(),
            offset,
        };
        let mut prev = None;
        for i in 0..num_restarts {
            let r = block.restart(i);
            if r >= restarts_at || prev.is_some_and(|p| r <= p) || (i == 0 && r != 0) {
                return Err(bad("restart offsets out of order or out of range"));
            }
            prev = Some(r);
        }
        if num_restarts == 0 && restarts_at != 0 {
            return Err(bad("entries without restart points"));
        }
        Ok(block)
    }

    /// The number of restart points (0 for an empty block).
    pub(crate) fn num_restarts(&self) -> usize {
        self.num_restarts
    }

    /// A forward iterator, positioned before the first entry.
    pub(crate) fn iter(&self) -> BlockIter {
        BlockIter::new(self.clone())
    }

    /// A reverse iterator, positioned after the last entry.
    pub(crate) fn rev_iter(&self) -> BlockRevIter {
        BlockRevIter::new(self.clone())
    }

    fn restart(&self, i: usize) -> usize {
        let at = self.restarts_at + 4 * i;
        be_u32(&self.data[at..at + 4]) as usize
    }

    fn corruption(&self, at: usize, detail: &str) -> Error {
        Error::corruption(
            &*self.file,
            self.offset,
            format!("data block: {detail} (entry at byte {at} of the uncompressed block)"),
        )
    }

    /// Decodes the entry at `at`, whose predecessor's key bytes are in `key` (updated in place).
    pub(crate) fn decode_at(&self, at: usize, key: &mut Vec<u8>) -> Result<Decoded> {
        let mut buf = self
            .data
            .get(at..self.restarts_at)
            .ok_or_else(|| self.corruption(at, "entry offset out of range"))?;
        let fail = |d: &str| self.corruption(at, d);
        let shared = usize_len(get_varint(&mut buf).map_err(fail)?).map_err(fail)?;
        let unshared = usize_len(get_varint(&mut buf).map_err(fail)?).map_err(fail)?;
        let row_len = usize_len(get_varint(&mut buf).map_err(fail)?).map_err(fail)?;
        let kind_byte = take(&mut buf, 1).map_err(fail)?[0];
        let kind = EntryKind::from_code(kind_byte).ok_or_else(|| fail("unknown entry kind"))?;
        let seq = get_varint(&mut buf).map_err(fail)?;
        let write_ms = get_varint(&mut buf).map_err(fail)?;
        let value_len = usize_len(get_varint(&mut buf).map_err(fail)?).map_err(fail)?;
        if shared > key.len() {
            return Err(fail("shared prefix longer than the previous key"));
        }
        let suffix = take(&mut buf, unshared).map_err(fail)?;
        key.truncate(shared);
        key.extend_from_slice(suffix);
        if row_len > key.len() {
            return Err(fail("row length longer than the key"));
        }
        if kind == EntryKind::DeleteRow && row_len != key.len() {
            return Err(fail("row tombstone with a column"));
        }
        let value_start = self.restarts_at - buf.len();
        take(&mut buf, value_len).map_err(fail)?;
        let next = self.restarts_at - buf.len();
        let entry = Entry {
            key: InternalKey::new(
                Bytes::copy_from_slice(&key[..row_len]),
                Bytes::copy_from_slice(&key[row_len..]),
                seq,
                kind,
            ),
            write_ms,
            value: self.data.slice(value_start..next),
        };
        Ok(Decoded { entry, next })
    }

    /// Index of the last restart point whose key is `< target` (or `<= target` with
    /// `inclusive`), or `None` if every restart key is greater.
    pub(crate) fn restart_before(
        &self,
        target: &InternalKey,
        inclusive: bool,
    ) -> Result<Option<usize>> {
        // Binary search for the first restart whose key is past the bound.
        let (mut lo, mut hi) = (0, self.num_restarts);
        let mut key = Vec::new();
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            key.clear();
            let d = self.decode_at(self.restart(mid), &mut key)?;
            let ord = d.entry.key.cmp(target);
            let before = ord.is_lt() || (inclusive && ord.is_eq());
            if before {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo.checked_sub(1))
    }

    /// Decodes every entry of restart interval `i`.
    pub(crate) fn interval(&self, i: usize) -> Result<Vec<Entry>> {
        let end = if i + 1 < self.num_restarts {
            self.restart(i + 1)
        } else {
            self.restarts_at
        };
        let mut at = self.restart(i);
        let mut key = Vec::new();
        let mut out = Vec::with_capacity(RESTART_INTERVAL);
        while at < end {
            let d = self.decode_at(at, &mut key)?;
            if d.next > end {
                return Err(self.corruption(at, "entry crosses a restart point"));
            }
            check_order(out.last(), &d.entry, || {
                self.corruption(at, "keys out of order")
            })?;
            out.push(d.entry);
            at = d.next;
        }
        Ok(out)
    }
}

/// Fails unless `prev < next`.
pub(crate) fn check_order(
    prev: Option<&Entry>,
    next: &Entry,
    err: impl FnOnce() -> Error,
) -> Result<()> {
    match prev {
        Some(p) if p.key >= next.key => Err(err()),
        _ => Ok(()),
    }
}

fn be_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_be_bytes(a)
}

#[cfg(test)]
pub(crate) mod tests;
