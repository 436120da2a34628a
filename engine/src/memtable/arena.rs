//! Copies of spilled entries' columns and values, in shared chunks.

use bytes::{Bytes, BytesMut};

/// Size of one arena chunk. Large enough that chunk allocations are rare next to the cells
/// they hold, small enough that a slice kept alive by a reader pins little memory.
pub(super) const ARENA_CHUNK: usize = 64 << 10;

/// A position in the arena: chunk number and byte offset.
#[derive(Debug, Clone, Copy)]
pub(super) struct ArenaPos {
    pub(super) chunk: u32,
    pub(super) offset: u32,
}

/// Copies of spilled entries' columns and values: filled chunks, frozen and shareable, and the
/// chunk being filled.
#[derive(Debug, Default)]
pub(super) struct Arena {
    pub(super) full: Vec<Bytes>,
    pub(super) filling: BytesMut,
}

impl Arena {
    /// Copies `column ‖ value` in.
    pub(super) fn alloc(&mut self, column: &[u8], value: &[u8]) -> ArenaPos {
        let n = column.len() + value.len();
        if self.filling.capacity() - self.filling.len() < n {
            let fresh = BytesMut::with_capacity(ARENA_CHUNK.max(n));
            let full = std::mem::replace(&mut self.filling, fresh);
            if !full.is_empty() {
                self.full.push(full.freeze());
            }
        }
        let at = ArenaPos {
            chunk: self.full.len() as u32,
            offset: self.filling.len() as u32,
        };
        self.filling.extend_from_slice(column);
        self.filling.extend_from_slice(value);
        at
    }

    /// `len` bytes at `skip` past `at`.
    pub(super) fn bytes(&self, at: ArenaPos, skip: u32, len: u32) -> &[u8] {
        let chunk: &[u8] = match self.full.get(at.chunk as usize) {
            Some(c) => c,
            None => &self.filling,
        };
        let start = (at.offset + skip) as usize;
        &chunk[start..start + len as usize]
    }

    /// As [`Arena::bytes`], as a `Bytes` sharing a filled chunk (a copy from the chunk being
    /// filled, which cannot be shared while it is written).
    pub(super) fn shared(&self, at: ArenaPos, skip: u32, len: u32) -> Bytes {
        let start = (at.offset + skip) as usize;
        match self.full.get(at.chunk as usize) {
            Some(c) => c.slice(start..start + len as usize),
            None => Bytes::copy_from_slice(&self.filling[start..start + len as usize]),
        }
    }
}
