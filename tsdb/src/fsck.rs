//! Offline checks of the time-series tables, and their repair (`strata fsck`).
//!
//! [`fsck`] reads the `uid`, `meta` and `tsdb` tables of a database and reports what is
//! inconsistent; [`fsck_repair`] fixes what can be fixed without guessing. Both work on an
//! engine [`Db`] rather than an open [`Tsdb`](crate::Tsdb): `Tsdb::open` refuses a UID table
//! or series index it cannot load, and those are among the things checked here. The caller
//! keeps every writer off the database meanwhile.
//!
//! What is checked:
//!
//! 1. The UID table: every mapping decodes; every name → UID mapping has the UID → name
//!    mapping back and the reverse; no UID is above its kind's counter.
//! 2. The series index (`meta` rows `i`, `s`, `l`): ids are dense from 0, each `i` row holds a
//!    well-formed TSUID, no TSUID has two ids, `s` rows agree with `i` rows, `l` rows decode
//!    and name a known id, and every UID of an indexed TSUID has a name.
//! 3. Every data row: the rowkey decodes and its salt is the series' bucket; the main block,
//!    the partial blocks and the raw cells decode, with every point inside the row's hour
//!    (`cell::decode_row`); the row's TSUID is indexed and its UIDs have names.
//! 4. Every dirty-row marker (`meta` rows `d`) holds a well-formed rowkey of the right bucket.
//!
//! A series that is indexed but has no data row is fine (TTL and deletes leave those), and so
//! is a marker whose row is gone.

mod meta_rows;
mod repair;
mod rows;
mod uids;

use std::collections::HashMap;

use strata_engine::{Db, Table};

use crate::error::Result;
use crate::meta;
use crate::rowkey::Tsuid;
use crate::tsdb::{DATA_TABLE, META_TABLE, UID_TABLE};
use crate::uid::{Uid, UidKind};
use crate::value::Value;

pub use repair::{FsckRepaired, SAVED_CELLS, fsck_repair};

/// What [`fsck_repair`] does about a problem.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FsckRemedy {
    /// Nothing: the fix would be a guess. The problem stays.
    None,
    /// The data row's cells are saved to lost+found, and the row is rewritten as one block of
    /// the points that decode (or deleted if none do).
    RewriteRow,
    /// The row's cells are saved to lost+found and the row is deleted.
    DeleteRow,
    /// The cell is saved to lost+found and deleted.
    DeleteCell,
    /// The series gets the next series id.
    IndexSeries,
    /// The series index rows (`meta` `i`, `s`, `l`) are rewritten: ids dense from 0 in their
    /// old order, each TSUID once, every TSUID of the data indexed.
    RebuildIndex,
    /// The UID → name mapping is written.
    AddUidName {
        /// The kind.
        kind: UidKind,
        /// The UID.
        uid: Uid,
        /// Its name.
        name: String,
    },
    /// The name → UID mapping is written.
    AddUidId {
        /// The kind.
        kind: UidKind,
        /// The name.
        name: String,
        /// Its UID.
        uid: Uid,
    },
    /// The kind's counter is raised to the largest UID in use.
    RaiseUidCounter {
        /// The kind.
        kind: UidKind,
        /// The largest UID in use.
        to: u32,
    },
}

impl FsckRemedy {
    /// What the remedy does, for messages.
    pub fn describe(&self) -> String {
        match self {
            FsckRemedy::None => "left as is".into(),
            FsckRemedy::RewriteRow => {
                "save the row to lost+found, rewrite it with the points that decode".into()
            }
            FsckRemedy::DeleteRow => "save the row to lost+found, delete it".into(),
            FsckRemedy::DeleteCell => "save the cell to lost+found, delete it".into(),
            FsckRemedy::IndexSeries => "index the series".into(),
            FsckRemedy::RebuildIndex => "rewrite the series index".into(),
            FsckRemedy::AddUidName { kind, uid, name } => {
                format!("map {kind} UID {uid} to {name:?}")
            }
            FsckRemedy::AddUidId { kind, name, uid } => {
                format!("map {kind} name {name:?} to UID {uid}")
            }
            FsckRemedy::RaiseUidCounter { kind, to } => {
                format!("raise the {kind} UID counter to {to}")
            }
        }
    }
}

/// One thing found wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsckProblem {
    /// The table: `tsdb`, `uid` or `meta`.
    pub table: &'static str,
    /// The row.
    pub row: Vec<u8>,
    /// The column, when one cell is concerned.
    pub column: Option<Vec<u8>>,
    /// What is wrong.
    pub detail: String,
    /// What [`fsck_repair`] does about it.
    pub remedy: FsckRemedy,
}

/// What [`fsck`] read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsckCounts {
    /// Data rows.
    pub rows: u64,
    /// Their cells.
    pub cells: u64,
    /// Points in them that decode.
    pub points: u64,
    /// Series in the index.
    pub series: u64,
    /// Distinct series in the data rows.
    pub data_series: u64,
    /// UIDs assigned (name → UID mappings).
    pub uids: u64,
    /// Dirty-row markers.
    pub markers: u64,
}

/// Everything [`fsck`] found.
#[derive(Debug, Clone, Default)]
pub struct FsckReport {
    /// What was read.
    pub counts: FsckCounts,
    /// What was found wrong, table by table.
    pub problems: Vec<FsckProblem>,
    /// The newest point that decodes of each series in the data, for the index rows a repair
    /// writes.
    newest: HashMap<Tsuid, (i64, Value)>,
}

impl FsckReport {
    /// The problems [`fsck_repair`] acts on.
    pub fn repairable(&self) -> usize {
        self.problems
            .iter()
            .filter(|p| p.remedy != FsckRemedy::None)
            .count()
    }

    fn add(
        &mut self,
        table: &'static str,
        row: &[u8],
        column: Option<&[u8]>,
        detail: impl Into<String>,
        remedy: FsckRemedy,
    ) {
        self.problems.push(FsckProblem {
            table,
            row: row.to_vec(),
            column: column.map(<[u8]>::to_vec),
            detail: detail.into(),
            remedy,
        });
    }
}

/// The time-series tables of a database (those that exist).
#[derive(Debug, Clone)]
struct Tables {
    data: Option<Table>,
    uid: Option<Table>,
    meta: Option<Table>,
}

impl Tables {
    fn of(db: &Db) -> Tables {
        Tables {
            data: db.table(DATA_TABLE),
            uid: db.table(UID_TABLE),
            meta: db.table(META_TABLE),
        }
    }
}

/// Checks the time-series tables of `db` (see the module docs); changes nothing. Fails only
/// if the engine cannot read a table.
pub fn fsck(db: &Db) -> Result<FsckReport> {
    let tables = Tables::of(db);
    let mut report = FsckReport::default();
    let uids = match &tables.uid {
        Some(t) => uids::check(db, t, &mut report)?,
        None => uids::UidMaps::default(),
    };
    let buckets = match &tables.meta {
        Some(t) => buckets(db, t, tables.data.is_some(), &mut report)?,
        None => None,
    };
    let index = match &tables.meta {
        Some(t) => meta_rows::check(db, t, buckets, &uids, &mut report)?,
        None => meta_rows::Index::default(),
    };
    if let Some(t) = &tables.data {
        rows::check(db, t, buckets, &uids, &index, &mut report)?;
    }
    Ok(report)
}

/// The salt bucket count, if it is stored and valid (a problem otherwise, when there is data).
fn buckets(db: &Db, meta_t: &Table, has_data: bool, report: &mut FsckReport) -> Result<Option<u8>> {
    let stored = db.get(meta_t, meta::CONFIG_ROW, meta::SALT_BUCKETS_COLUMN)?;
    let detail = match stored.as_deref() {
        Some([b]) if *b > 0 => return Ok(Some(*b)),
        Some(_) => "the salt bucket count is not one non-zero byte",
        None if has_data => "there is data, but no salt bucket count",
        None => return Ok(None),
    };
    report.add(
        META_TABLE,
        meta::CONFIG_ROW,
        Some(meta::SALT_BUCKETS_COLUMN),
        detail,
        FsckRemedy::None,
    );
    Ok(None)
}

#[cfg(test)]
mod tests;
