//! What reads see: the active memtable, the frozen ones waiting for a flush, and the live SST
//! files. A [`State`] is immutable once published; writers, flushes and compactions replace it
//! whole, so a reader holding one sees a consistent set.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::compaction::FileSummary;
use crate::memtable::Memtable;
use crate::sst::SstReader;

/// A frozen memtable waiting to be flushed.
#[derive(Debug, Clone)]
pub(crate) struct Frozen {
    pub(crate) mem: Arc<Memtable>,
    /// The last WAL segment holding its records.
    pub(crate) last_segment: u64,
    /// The last sequence number it holds.
    pub(crate) last_seq: u64,
}

/// The live SST files: per table, per level; level 0 newest first.
#[derive(Debug, Clone, Default)]
pub(crate) struct Files {
    pub(crate) tables: BTreeMap<u32, Vec<Vec<Arc<SstReader>>>>,
}

impl Files {
    /// Adds `reader` to `level` of `table`; [`Files::sort`] puts it in its place.
    pub(crate) fn add(&mut self, table: u32, level: u8, reader: Arc<SstReader>) {
        let levels = self.tables.entry(table).or_default();
        let level = usize::from(level);
        if levels.len() <= level {
            levels.resize_with(level + 1, Vec::new);
        }
        levels[level].push(reader);
    }

    /// Sorts level 0 of every table newest (highest file id) first, and deeper levels by
    /// row range.
    pub(crate) fn sort(&mut self) {
        for levels in self.tables.values_mut() {
            for (i, level) in levels.iter_mut().enumerate() {
                if i == 0 {
                    level.sort_by_key(|r| std::cmp::Reverse(r.file_id()));
                } else {
                    level.sort_by(|a, b| a.properties().first_row.cmp(&b.properties().first_row));
                }
            }
        }
    }

    /// What the compaction planner needs to know about `table`'s files.
    pub(crate) fn summaries(&self, table: u32) -> Vec<Vec<FileSummary>> {
        self.tables
            .get(&table)
            .map(|levels| {
                levels
                    .iter()
                    .map(|level| {
                        level
                            .iter()
                            .map(|r| FileSummary {
                                id: r.file_id(),
                                bytes: r.file_bytes(),
                                first_row: r.properties().first_row.clone(),
                                last_row: r.properties().last_row.clone(),
                            })
                            .collect()
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// What reads see.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) active: Arc<Memtable>,
    /// Oldest first.
    pub(crate) frozen: Vec<Frozen>,
    pub(crate) files: Arc<Files>,
}
