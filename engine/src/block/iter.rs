//! Forward and reverse iterators over one [`Block`].

use super::{Block, check_order};
use crate::error::Result;
use crate::key::{Entry, InternalKey};

/// Iterates a block's entries in ascending key order.
#[derive(Debug)]
pub(crate) struct BlockIter {
    block: Block,
    /// Offset of the next entry to decode.
    at: usize,
    key: Vec<u8>,
    /// An entry decoded by a seek but not yet returned.
    peeked: Option<Entry>,
    last: Option<Entry>,
}

impl BlockIter {
    pub(super) fn new(block: Block) -> BlockIter {
        BlockIter {
            block,
            at: 0,
            key: Vec::new(),
            peeked: None,
            last: None,
        }
    }

    /// Positions the iterator so that the next entry is the first one `>= target`.
    pub(crate) fn seek(&mut self, target: &InternalKey) -> Result<()> {
        let start = self.block.restart_before(target, false)?.unwrap_or(0);
        self.at = if self.block.num_restarts == 0 {
            0
        } else {
            self.block.restart(start)
        };
        self.key.clear();
        self.peeked = None;
        self.last = None;
        while let Some(e) = self.next_entry()? {
            if e.key >= *target {
                self.peeked = Some(e);
                break;
            }
        }
        Ok(())
    }

    /// The next entry, or `None` at the end of the block.
    pub(crate) fn next_entry(&mut self) -> Result<Option<Entry>> {
        if let Some(e) = self.peeked.take() {
            return Ok(Some(e));
        }
        if self.at >= self.block.restarts_at {
            return Ok(None);
        }
        let at = self.at;
        let d = self.block.decode_at(at, &mut self.key)?;
        check_order(self.last.as_ref(), &d.entry, || {
            self.block.corruption(at, "keys out of order")
        })?;
        self.at = d.next;
        self.last = Some(d.entry.clone());
        Ok(Some(d.entry))
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
        match self.block.restart_before(target, inclusive)? {
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
