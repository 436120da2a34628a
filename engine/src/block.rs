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
//! 2. The first entry, and the entry after [`RESTART_INTERVAL`] entries or
//!    [`RESTART_BYTES`] bytes since the last restart point, is a restart point: its `shared`
//!    is 0. `restarts` holds their byte offsets, ascending, each `<` the start of the restart
//!    array. A non-empty block has `restart_count >= 1` and `restarts[0] == 0`. Readers rely
//!    only on `restarts`, not on the spacing.
//! 3. `shared` never exceeds the previous key's length; `row_len` never exceeds the key length.
//! 4. An empty block is just `restart_count = 0`.
//! 5. Since SST format version 2, writers never share column bytes: `shared <= row_len`, so an
//!    entry's whole column lies in its unshared bytes. Readers accept blocks without this
//!    property (version 1 files) and copy such columns; with it, the column is a slice of the
//!    block, like the value.
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

use crate::coding::{be_u32, put_varint, take, usize_len};
use crate::error::{Error, Result};
use crate::key::{Entry, EntryKind, InternalKey};

/// Entries between restart points. 16 keeps a seek's linear scan short while the restart array
/// stays under 2% of a block of small time-series cells.
pub(crate) const RESTART_INTERVAL: usize = 16;

/// Entry bytes after which the next entry is a restart point, even before
/// [`RESTART_INTERVAL`] entries. A compacted row is one entry with a large value (about 500
/// bytes for an hour at 10 s), so with entry counts alone a seek stepped over about 8 of them
/// (4 KiB); with this bound it steps over about 2, at the cost of a restart's full key and
/// offset (some 30 bytes more) per 2 KiB.
pub(crate) const RESTART_BYTES: usize = 2048;

/// Builds one uncompressed block.
#[derive(Debug, Default)]
pub(crate) struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    last_key: Vec<u8>,
    entries: usize,
    /// Entries added since the last restart point, that one included.
    since_restart: usize,
}

impl BlockBuilder {
    /// An empty builder.
    pub(crate) fn new() -> BlockBuilder {
        BlockBuilder::default()
    }

    /// Appends an entry. Entries must come in ascending [`InternalKey`] order.
    pub(crate) fn add(&mut self, entry: &Entry) {
        let key = &entry.key;
        let since_restart = self
            .restarts
            .last()
            .map_or(0, |&r| self.buf.len() - r as usize);
        let shared = if self.restarts.is_empty()
            || self.since_restart == RESTART_INTERVAL
            || since_restart >= RESTART_BYTES
        {
            self.restarts.push(self.buf.len() as u32);
            self.since_restart = 0;
            0
        } else {
            // Rule 5: never share column bytes, so that readers can slice columns out of
            // the block instead of copying them.
            let full = key.row.iter().chain(key.column.iter());
            full.zip(self.last_key.iter())
                .take_while(|(a, b)| a == b)
                .count()
                .min(key.row.len())
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
        self.since_restart += 1;
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
        self.since_restart = 0;
        out
    }

    /// Takes back a finished block's buffer, emptied, for the next block: otherwise every
    /// block grows its buffer from nothing, through a dozen reallocations onto fresh memory
    /// that the kernel must zero first.
    pub(crate) fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.buf.is_empty() && buf.capacity() > self.buf.capacity() {
            buf.clear();
            self.buf = buf;
        }
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

/// One entry decoded in place: its key bytes are in the caller's buffer, its column and value
/// are ranges of the block, nothing is copied.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawEntry {
    /// Key bytes shared with the previous entry.
    pub(crate) shared: usize,
    /// Length of the row part of the key bytes.
    pub(crate) row_len: usize,
    pub(crate) kind: EntryKind,
    pub(crate) seq: u64,
    pub(crate) write_ms: u64,
    /// Where the unshared key bytes start in the block, and where they end.
    pub(crate) suffix: (usize, usize),
    /// Where the value starts in the block, and where it ends (= the next entry).
    pub(crate) value: (usize, usize),
}

impl RawEntry {
    /// The key as the tuple [`InternalKey::cmp_parts`] takes, given its key bytes.
    pub(crate) fn parts<'k>(&self, key: &'k [u8]) -> (&'k [u8], &'k [u8], u64, EntryKind) {
        (
            &key[..self.row_len],
            &key[self.row_len..],
            self.seq,
            self.kind,
        )
    }

    /// Offset of the next entry.
    pub(crate) fn next(&self) -> usize {
        self.value.1
    }
}

/// An entry decoded in place, as iterators hand it out: the entry, its key bytes, whether its
/// row is that of the entry decoded before it in the same block, and the block.
pub(crate) type RawNext<'a> = (RawEntry, &'a [u8], bool, &'a Block);

/// A key given by parts, as [`InternalKey::cmp_parts`] takes it.
pub(crate) type KeyParts<'a> = (&'a [u8], &'a [u8], u64, EntryKind);

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

    /// Decodes the entry at `at` without copying anything but its key bytes: `prev` holds the
    /// previous entry's key bytes (empty at a restart point) and `key` receives this entry's.
    pub(crate) fn decode_raw(&self, at: usize, prev: &[u8], key: &mut Vec<u8>) -> Result<RawEntry> {
        let end = self.restarts_at;
        let mut buf = self
            .data
            .get(at..end)
            .ok_or_else(|| self.corruption(at, "entry offset out of range"))?;
        let fail = |d: &str| self.corruption(at, d);
        let shared = varint_len(&mut buf).map_err(fail)?;
        let unshared = varint_len(&mut buf).map_err(fail)?;
        let row_len = varint_len(&mut buf).map_err(fail)?;
        let kind_byte = take(&mut buf, 1).map_err(fail)?[0];
        let kind = EntryKind::from_code(kind_byte).ok_or_else(|| fail("unknown entry kind"))?;
        let seq = varint(&mut buf).map_err(fail)?;
        let write_ms = varint(&mut buf).map_err(fail)?;
        let value_len = varint_len(&mut buf).map_err(fail)?;
        if shared > prev.len() {
            return Err(fail("shared prefix longer than the previous key"));
        }
        let suffix_start = end - buf.len();
        let suffix = take(&mut buf, unshared).map_err(fail)?;
        key.clear();
        key.extend_from_slice(&prev[..shared]);
        key.extend_from_slice(suffix);
        if row_len > key.len() {
            return Err(fail("row length longer than the key"));
        }
        if kind == EntryKind::DeleteRow && row_len != key.len() {
            return Err(fail("row tombstone with a column"));
        }
        let value_start = end - buf.len();
        take(&mut buf, value_len).map_err(fail)?;
        Ok(RawEntry {
            shared,
            row_len,
            kind,
            seq,
            write_ms,
            suffix: (suffix_start, suffix_start + unshared),
            value: (value_start, end - buf.len()),
        })
    }

    /// The entry `raw` with key bytes `key` as an [`Entry`]. The value, and the column when
    /// the whole column lies in the unshared bytes, are slices of the block; `row` holds the
    /// previous entry's row and is reused (or replaced) so that a row's cells share one copy.
    /// With `same_row`, the caller knows `row` already holds this entry's row.
    pub(crate) fn entry(
        &self,
        raw: &RawEntry,
        key: &[u8],
        row: &mut Bytes,
        same_row: bool,
    ) -> Entry {
        let row_bytes = &key[..raw.row_len];
        if !same_row && row[..] != *row_bytes {
            *row = if raw.shared == 0 {
                self.data.slice(raw.suffix.0..raw.suffix.0 + raw.row_len)
            } else {
                Bytes::copy_from_slice(row_bytes)
            };
        }
        let column = if raw.row_len == key.len() {
            Bytes::new()
        } else if raw.shared <= raw.row_len {
            self.data
                .slice(raw.suffix.0 + (raw.row_len - raw.shared)..raw.suffix.1)
        } else {
            Bytes::copy_from_slice(&key[raw.row_len..])
        };
        Entry {
            key: InternalKey {
                row: row.clone(),
                column,
                seq: raw.seq,
                kind: raw.kind,
            },
            write_ms: raw.write_ms,
            value: self.data.slice(raw.value.0..raw.value.1),
        }
    }

    /// The row of `raw` (key bytes `key`): a slice of the block when it is all in the
    /// unshared bytes, else a copy.
    pub(crate) fn row(&self, raw: &RawEntry, key: &[u8]) -> Bytes {
        if raw.shared == 0 {
            self.data.slice(raw.suffix.0..raw.suffix.0 + raw.row_len)
        } else {
            Bytes::copy_from_slice(&key[..raw.row_len])
        }
    }

    /// The column of `raw` (key bytes `key`): a slice of the block when it is all in the
    /// unshared bytes (always, since format version 2), else a copy.
    pub(crate) fn column(&self, raw: &RawEntry, key: &[u8]) -> Bytes {
        if raw.row_len == key.len() {
            Bytes::new()
        } else if raw.shared <= raw.row_len {
            self.data
                .slice(raw.suffix.0 + (raw.row_len - raw.shared)..raw.suffix.1)
        } else {
            Bytes::copy_from_slice(&key[raw.row_len..])
        }
    }

    /// The value of `raw` as a slice of the block.
    pub(crate) fn value(&self, raw: &RawEntry) -> Bytes {
        self.data.slice(raw.value.0..raw.value.1)
    }

    /// Index of the last restart point whose key is `< target` (or `<= target` with
    /// `inclusive`), or `None` if every restart key is greater. `key` is scratch space.
    pub(crate) fn restart_before(
        &self,
        target: KeyParts<'_>,
        inclusive: bool,
        key: &mut Vec<u8>,
    ) -> Result<Option<usize>> {
        // Binary search for the first restart whose key is past the bound.
        let (mut lo, mut hi) = (0, self.num_restarts);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let raw = self.decode_raw(self.restart(mid), &[], key)?;
            let ord = InternalKey::cmp_parts(raw.parts(key), target);
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
        let (mut key, mut prev) = (Vec::new(), Vec::new());
        let mut last: Option<RawEntry> = None;
        let mut row = Bytes::new();
        let mut out = Vec::with_capacity(RESTART_INTERVAL);
        while at < end {
            std::mem::swap(&mut key, &mut prev);
            let raw = self.decode_raw(at, &prev, &mut key)?;
            if raw.next() > end {
                return Err(self.corruption(at, "entry crosses a restart point"));
            }
            if let Some(p) = &last {
                check_order(p, &prev, &raw, &key, || {
                    self.corruption(at, "keys out of order")
                })?;
            }
            out.push(self.entry(&raw, &key, &mut row, false));
            last = Some(raw);
            at = raw.next();
        }
        Ok(out)
    }
}

/// Fails unless the key of `prev` (bytes `prev_key`) is below the key of `next`.
pub(crate) fn check_order(
    prev: &RawEntry,
    prev_key: &[u8],
    next: &RawEntry,
    next_key: &[u8],
    err: impl FnOnce() -> Error,
) -> Result<()> {
    if InternalKey::cmp_parts(prev.parts(prev_key), next.parts(next_key)).is_lt() {
        Ok(())
    } else {
        Err(err())
    }
}

/// A LEB128 varint, inlined, with a fast path for the one-byte case; the same checks as
/// `coding::get_varint`.
#[inline]
fn varint(buf: &mut &[u8]) -> std::result::Result<u64, &'static str> {
    let b = *buf;
    if let Some(&x) = b.first()
        && x < 0x80
    {
        *buf = &b[1..];
        return Ok(u64::from(x));
    }
    let mut v = 0u64;
    for (i, &byte) in b.iter().take(10).enumerate() {
        if i == 9 && byte > 1 {
            return Err("varint overflows u64");
        }
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            *buf = &b[i + 1..];
            return Ok(v);
        }
    }
    Err(if b.len() < 10 {
        "truncated varint"
    } else {
        "varint longer than 10 bytes"
    })
}

/// A varint that is a length.
#[inline]
fn varint_len(buf: &mut &[u8]) -> std::result::Result<usize, &'static str> {
    usize_len(varint(buf)?)
}

#[cfg(test)]
pub(crate) mod tests;
