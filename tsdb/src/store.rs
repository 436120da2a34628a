//! The engine side of a [`Tsdb`](crate::Tsdb): the database, its data and meta tables, and the
//! lock that orders every change to them. Reads, deletes, row compaction and annotations work
//! through this handle rather than through the rest of the `Tsdb`.

use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use strata_engine::{Db, Table, WriteBatch};

use crate::tsdb::LastUpdate;

use crate::trees::{DataView, Trees};

/// The engine database and the tables of one tsdb.
#[derive(Debug)]
pub(crate) struct Store {
    pub(crate) db: Db,
    /// Data rows (`rowkey.rs`, `cell.rs`, `block.rs`).
    pub(crate) data: Table,
    /// Dirty markers, newest points and the configuration row (`meta.rs`).
    pub(crate) meta: Table,
    /// Serializes the commit part of writes, deletes and row compaction, so the index, the
    /// last points and the series id counter follow the engine's batch order.
    pub(crate) writes: Mutex<WriteState>,
    /// On a replica of partitioned writers, every writer's tree (`db` and the tables above
    /// are the first's); `None` on one tree.
    pub(crate) trees: Option<Trees>,
}

impl Store {
    /// What a read sees of the data, as of now: every tree's on a replica of partitioned
    /// writers.
    pub(crate) fn data_view(&self) -> DataView {
        match &self.trees {
            None => DataView::one(&self.db, &self.data),
            Some(trees) => DataView::of_set(&trees.set.read()),
        }
    }
}

/// State of the write path, under [`Store::writes`].
#[derive(Debug)]
pub(crate) struct WriteState {
    /// Changes whenever dirty markers may have been deleted (a row compaction or a delete
    /// committed). A series whose marker for a row was written in the current epoch needs no
    /// new one: nothing can have removed it since, as every removal commits under this lock.
    pub(crate) marker_epoch: u32,
    /// Counts the commits that wrote dirty markers, bumped before the lock is released: the
    /// row compactor skips its walk of the markers while this is unchanged and none of the
    /// markers it saw last time can have become due (see `rowcompact.rs`).
    pub(crate) markers_written: u64,
    /// Room for the next commit: its engine batch and its series' newest points. Kept from
    /// one batch to the next, so a commit writes into memory that is already mapped and
    /// likely in cache, rather than into a fresh allocation the size of the batch.
    pub(crate) scratch: CommitScratch,
}

/// See [`WriteState::scratch`].
#[derive(Debug, Default)]
pub(crate) struct CommitScratch {
    pub(crate) batch: WriteBatch,
    pub(crate) lasts: FxHashMap<u32, LastUpdate>,
}

impl CommitScratch {
    /// Past this many points, a batch's room is given back rather than kept: one huge
    /// `/api/put` must not pin its memory for the server's lifetime.
    const KEEP_POINTS: usize = 1 << 16;

    /// Empties the scratch for a batch of `n` points.
    pub(crate) fn take(&mut self, n: usize) -> (WriteBatch, FxHashMap<u32, LastUpdate>) {
        let mut batch = std::mem::take(&mut self.batch);
        let mut lasts = std::mem::take(&mut self.lasts);
        batch.clear();
        lasts.clear();
        // A data cell is a rowkey (40-odd bytes), a 3-byte column, a value and a few length
        // bytes; room for that per point spares the batch its doublings. Most points of a
        // batch are of distinct series: the map is sized once, never rehashed.
        batch.reserve(n * 64);
        lasts.reserve(n);
        (batch, lasts)
    }

    /// Keeps a batch's room for the next one, unless it is too large to keep.
    pub(crate) fn give_back(&mut self, batch: WriteBatch, lasts: FxHashMap<u32, LastUpdate>) {
        if lasts.capacity() <= Self::KEEP_POINTS {
            self.batch = batch;
            self.lasts = lasts;
        }
    }
}

impl Default for WriteState {
    fn default() -> Self {
        // Never 0, the epoch of a cached series that has marked nothing yet.
        WriteState {
            marker_epoch: 1,
            markers_written: 0,
            scratch: CommitScratch::default(),
        }
    }
}

impl WriteState {
    /// Called, under the write lock, before committing a batch that deletes dirty markers.
    pub(crate) fn markers_deleted(&mut self) {
        self.marker_epoch = self.marker_epoch.wrapping_add(1).max(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;

    fn filled(scratch: &mut CommitScratch, n: usize) -> (WriteBatch, FxHashMap<u32, LastUpdate>) {
        let (batch, mut lasts) = scratch.take(n);
        for id in 0..n as u32 {
            lasts.insert(
                id,
                LastUpdate {
                    point: (i64::from(id), Value::Int(1)),
                    persist: false,
                    new_row: false,
                },
            );
        }
        (batch, lasts)
    }

    #[test]
    fn a_commit_finds_the_last_one_s_room_empty() {
        let mut scratch = CommitScratch::default();
        let (batch, lasts) = filled(&mut scratch, 1000);
        let room = lasts.capacity();
        scratch.give_back(batch, lasts);
        let (batch, lasts) = scratch.take(10);
        assert!(batch.is_empty());
        assert!(lasts.is_empty());
        assert_eq!(lasts.capacity(), room, "the table is kept, not reallocated");
        assert!(batch.capacity() >= 10 * 64);
    }

    #[test]
    fn a_huge_commit_s_room_is_given_back_to_the_allocator() {
        let mut scratch = CommitScratch::default();
        let (batch, lasts) = filled(&mut scratch, CommitScratch::KEEP_POINTS + 1);
        scratch.give_back(batch, lasts);
        assert_eq!(scratch.lasts.capacity(), 0);
        assert_eq!(scratch.batch.capacity(), 0);
    }
}
