//! The engine side of a [`Tsdb`](crate::Tsdb): the database, its data and meta tables, and the
//! lock that orders every change to them. Reads, deletes, row compaction and annotations work
//! through this handle rather than through the rest of the `Tsdb`.

use parking_lot::Mutex;
use strata_engine::{Db, Table};

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
}

impl Default for WriteState {
    fn default() -> Self {
        // Never 0, the epoch of a cached series that has marked nothing yet.
        WriteState { marker_epoch: 1 }
    }
}

impl WriteState {
    /// Called, under the write lock, before committing a batch that deletes dirty markers.
    pub(crate) fn markers_deleted(&mut self) {
        self.marker_epoch = self.marker_epoch.wrapping_add(1).max(1);
    }
}
