//! Forward and reverse iterators over one [`Block`].
//!
//! The forward iterator decodes entries in place ([`RawEntry`]) and builds an [`Entry`] only
//! for what it returns, reusing one row copy for all cells of a row and slicing values (and
//! whole columns) out of the block. Seeks compare keys in place, without building entries.

use bytes::Bytes;

use super::{Block, KeyParts, RawEntry, RawNext};
use crate::error::Result;
use crate::key::{Entry, InternalKey};

/// Iterates a block's entries in ascending key order.
#[derive(Debug)]
pub(crate) struct BlockIter {
    block: Block,
    /// Offset of the next entry to decode.
    at: usize,
    /// Key bytes of the last decoded entry.
    key: Vec<u8>,
    /// Scratch: the key bytes of the entry before it.
    prev: Vec<u8>,
    /// The last decoded entry, for the order check.
    last: Option<RawEntry>,
    /// The last decoded entry was found by a seek and not returned yet.
    pending: bool,
    /// The row of the last built entry.
    row: Bytes,
    /// `row` holds the row of the last decoded entry.
    row_is_last: bool,
    /// The last decoded entry has the same row as the one before it, and `row` holds it.
    same_row: bool,
    /// The last decoded entry has the same row as the one decoded before it.
    same_row_decoded: bool,
}

impl BlockIter {
    pub(super) fn new(block: Block) -> BlockIter {
        BlockIter {
            block,
            at: 0,
            key: Vec::new(),
            prev: Vec::new(),
            last: None,
            pending: false,
            row: Bytes::new(),
            row_is_last: false,
            same_row: false,
            same_row_decoded: false,
        }
    }

    /// Decodes the next entry in place, checking that keys ascend.
    fn step(&mut self) -> Result<Option<RawEntry>> {
        self.step_checking(true)
    }

    /// [`BlockIter::step`], checking the order against the entry before only if `check`: a
    /// seek skips entries it never returns, and compares each with its target anyway.
    #[inline(always)]
    fn step_checking(&mut self, check: bool) -> Result<Option<RawEntry>> {
        if self.at >= self.block.restarts_at {
            return Ok(None);
        }
        let at = self.at;
        std::mem::swap(&mut self.key, &mut self.prev);
        let raw = self.block.decode_raw(at, &self.prev, &mut self.key)?;
        // The row is unchanged when the shared prefix covers it and the lengths agree: the
        // common case, checked without comparing bytes.
        let same_row = self
            .last
            .is_some_and(|p| raw.shared >= p.row_len && raw.row_len == p.row_len);
        if let Some(p) = self.last.as_ref().filter(|_| check) {
            let ord = if same_row {
                InternalKey::cmp_parts(
                    (&[], &self.prev[p.row_len..], p.seq, p.kind),
                    (&[], &self.key[raw.row_len..], raw.seq, raw.kind),
                )
            } else {
                InternalKey::cmp_parts(p.parts(&self.prev), raw.parts(&self.key))
            };
            if !ord.is_lt() {
                return Err(self.block.corruption(at, "keys out of order"));
            }
        }
        self.same_row = same_row && self.row_is_last;
        self.same_row_decoded = same_row;
        self.row_is_last = false;
        self.at = raw.next();
        self.last = Some(raw);
        Ok(Some(raw))
    }

    /// Positions the iterator so that the next entry is the first one `>= target`.
    pub(crate) fn seek(&mut self, target: &InternalKey) -> Result<()> {
        self.seek_parts(target.parts())
    }

    /// Like [`BlockIter::seek`], with the target given by parts.
    pub(crate) fn seek_parts(&mut self, target: KeyParts<'_>) -> Result<()> {
        let start = self
            .block
            .restart_before(target, false, &mut self.key)?
            .unwrap_or(0);
        self.at = if self.block.num_restarts == 0 {
            0
        } else {
            self.block.restart(start)
        };
        self.key.clear();
        self.last = None;
        self.pending = false;
        self.row_is_last = false;
        // The entries passed over are not returned, so their order is not checked; the one the
        // seek stops at is checked against the next by the steps that follow.
        while let Some(raw) = self.step_checking(false)? {
            if InternalKey::cmp_parts(raw.parts(&self.key), target).is_ge() {
                self.pending = true;
                break;
            }
        }
        Ok(())
    }

    /// The entry a seek stopped at, decoded in place, with its key bytes; `None` if the seek
    /// ran off the end of the block (or the entry was already returned).
    pub(crate) fn peek_raw(&self) -> Option<(RawEntry, &[u8])> {
        if !self.pending {
            return None;
        }
        self.last.map(|raw| (raw, self.key.as_slice()))
    }

    /// The next entry decoded in place (the one a seek stopped at first), with its key bytes
    /// whether its row is that of the entry decoded before it in this block, and the block.
    pub(crate) fn next_raw(&mut self) -> Result<Option<RawNext<'_>>> {
        let raw = if self.pending {
            self.pending = false;
            self.same_row_decoded = false;
            self.last
        } else {
            self.step()?
        };
        Ok(raw.map(|raw| (raw, self.key.as_slice(), self.same_row_decoded, &self.block)))
    }

    /// True when no entry is left to return.
    pub(crate) fn exhausted(&self) -> bool {
        !self.pending && self.at >= self.block.restarts_at
    }

    /// The block iterated.
    pub(crate) fn block(&self) -> &Block {
        &self.block
    }

    /// The next entry, or `None` at the end of the block.
    pub(crate) fn next_entry(&mut self) -> Result<Option<Entry>> {
        let raw = if self.pending {
            self.pending = false;
            self.last
        } else {
            self.step()?
        };
        Ok(raw.map(|raw| {
            self.row_is_last = true;
            self.block
                .entry(&raw, &self.key, &mut self.row, self.same_row)
        }))
    }
}

/// Iterates a block's entries in descending key order, one restart interval at a time.
#[derive(Debug)]
pub(crate) struct BlockRevIter {
    block: Block,
    /// The restart interval to load when `buf` runs out (exclusive: loads `next_interval - 1`).
    next_interval: usize,
    /// Entries of the current interval still to return, ascending (popped from the back).
    buf: Vec<Entry>,
}

impl BlockRevIter {
    pub(super) fn new(block: Block) -> BlockRevIter {
        let next_interval = block.num_restarts;
        BlockRevIter {
            block,
            next_interval,
            buf: Vec::new(),
        }
    }

    /// Positions the iterator so that the next entry is the last one `< target`
    /// (`<= target` with `inclusive`).
    pub(crate) fn seek_before(&mut self, target: &InternalKey, inclusive: bool) -> Result<()> {
        self.buf.clear();
        let mut scratch = Vec::new();
        match self
            .block
            .restart_before(target.parts(), inclusive, &mut scratch)?
        {
            None => self.next_interval = 0,
            Some(i) => {
                self.buf = self.block.interval(i)?;
                self.buf.retain(|e| {
                    let ord = e.key.cmp(target);
                    ord.is_lt() || (inclusive && ord.is_eq())
                });
                self.next_interval = i;
            }
        }
        Ok(())
    }

    /// The previous entry, or `None` at the start of the block.
    pub(crate) fn prev_entry(&mut self) -> Result<Option<Entry>> {
        while self.buf.is_empty() {
            if self.next_interval == 0 {
                return Ok(None);
            }
            self.next_interval -= 1;
            self.buf = self.block.interval(self.next_interval)?;
        }
        Ok(self.buf.pop())
    }
}
