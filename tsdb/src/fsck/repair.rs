//! Repairing what [`super::fsck`] found.
//!
//! Every cell a repair deletes or rewrites is first saved, as hex, to the file
//! [`SAVED_CELLS`] in the lost+found folder: one line per cell, `table row column value`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::Path;

use strata_engine::{Cell, Db, ScanOptions, Table, WriteBatch};

use super::rows::decode_parts;
use super::{FsckRemedy, FsckReport, Tables};
use crate::block::encode_block;
use crate::error::{Error, Result, hex_upper};
use crate::meta;
use crate::rowkey::{RowKey, Tsuid};
use crate::tsdb::{DATA_TABLE, META_TABLE, UID_TABLE};
use crate::uid::COUNTER_ROW;
use crate::value::Value;

/// The file in the lost+found folder that receives the cells a repair deletes or rewrites.
pub const SAVED_CELLS: &str = "tsdb-cells.txt";
/// Rows per engine batch of a repair: bounds a batch's size, not its atomicity (a repair
/// interrupted half way is finished by running it again).
const BATCH_ROWS: usize = 4096;

/// One change [`fsck_repair`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsckRepaired {
    /// The table.
    pub table: &'static str,
    /// The row (empty for a change of the whole series index).
    pub row: Vec<u8>,
    /// What was done.
    pub action: String,
    /// Why: what was wrong.
    pub reason: String,
}

/// Writes batches of at most [`BATCH_ROWS`] changes, each fsynced after the cells it deletes
/// are saved.
struct Writer<'a> {
    db: &'a Db,
    batch: WriteBatch,
    rows: usize,
    saver: Saver,
}

impl Writer<'_> {
    fn op(&mut self, f: impl FnOnce(&mut WriteBatch)) -> Result<()> {
        f(&mut self.batch);
        self.rows += 1;
        if self.rows >= BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.rows > 0 {
            self.saver.sync()?;
            self.db.write_sync(&self.batch)?;
            self.batch = WriteBatch::new();
            self.rows = 0;
        }
        Ok(())
    }
}

/// Appends cells to [`SAVED_CELLS`].
struct Saver {
    out: std::fs::File,
}

impl Saver {
    fn open(lost_found: &Path) -> Result<Saver> {
        let path = lost_found.join(SAVED_CELLS);
        let io = |e| io_error(format!("opening {}", path.display()), e);
        std::fs::create_dir_all(lost_found).map_err(io)?;
        let fresh = !path.exists();
        let mut out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        if fresh {
            writeln!(
                out,
                "# cells saved by strata fsck before a repair deleted or rewrote them: \
                 table row column value, in hex"
            )
            .map_err(io)?;
        }
        Ok(Saver { out })
    }

    fn save(&mut self, table: &str, row: &[u8], cells: &[Cell]) -> Result<()> {
        for c in cells {
            writeln!(
                self.out,
                "{table} {} {} {}",
                hex_upper(row),
                hex_upper(&c.column),
                hex_upper(&c.value)
            )
            .map_err(|e| io_error("saving cells".into(), e))?;
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.out
            .sync_all()
            .map_err(|e| io_error("syncing the saved cells".into(), e))
    }
}

fn io_error(context: String, source: std::io::Error) -> Error {
    Error::Engine(strata_engine::Error::Io { context, source })
}

/// Acts on the remedies of `report` (from [`super::fsck`] of this `db`), saving every cell it
/// deletes or rewrites under `lost_found`. Problems with no remedy are left. Returns what was
/// done.
pub fn fsck_repair(db: &Db, report: &FsckReport, lost_found: &Path) -> Result<Vec<FsckRepaired>> {
    let tables = Tables::of(db);
    let mut w = Writer {
        db,
        batch: WriteBatch::new(),
        rows: 0,
        saver: Saver::open(lost_found)?,
    };
    let mut done = Vec::new();
    let mut rows_done: BTreeSet<(&str, &[u8])> = BTreeSet::new();
    let mut index_reasons = Vec::new();
    for p in &report.problems {
        let table = match p.table {
            DATA_TABLE => tables.data.as_ref(),
            UID_TABLE => tables.uid.as_ref(),
            _ => tables.meta.as_ref(),
        };
        let Some(table) = table else { continue };
        let action = match &p.remedy {
            FsckRemedy::None => continue,
            FsckRemedy::IndexSeries | FsckRemedy::RebuildIndex => {
                index_reasons.push(p.detail.clone());
                continue;
            }
            FsckRemedy::RewriteRow | FsckRemedy::DeleteRow => {
                if !rows_done.insert((p.table, &p.row)) {
                    continue;
                }
                let rewrite = p.remedy == FsckRemedy::RewriteRow;
                rewrite_row(table, &p.row, rewrite, &mut w)?
            }
            FsckRemedy::DeleteCell => {
                let column = p.column.as_deref().unwrap_or_default();
                let value = db.get(table, &p.row, column)?;
                if let Some(value) = value {
                    let cell = Cell {
                        column: column.to_vec().into(),
                        value,
                    };
                    w.saver.save(p.table, &p.row, &[cell])?;
                    w.op(|b| b.delete(table, &p.row, column))?;
                }
                "cell saved to lost+found and deleted".to_owned()
            }
            FsckRemedy::AddUidName { kind, uid, name } => {
                w.op(|b| b.put(table, &uid.to_bytes(), kind.name_column(), name.as_bytes()))?;
                p.remedy.describe()
            }
            FsckRemedy::AddUidId { kind, name, uid } => {
                w.op(|b| b.put(table, name.as_bytes(), kind.id_column(), &uid.to_bytes()))?;
                p.remedy.describe()
            }
            FsckRemedy::RaiseUidCounter { kind, to } => {
                let v = u64::from(*to).to_be_bytes();
                w.op(|b| b.put(table, COUNTER_ROW, kind.max_column(), &v))?;
                p.remedy.describe()
            }
        };
        done.push(FsckRepaired {
            table: p.table,
            row: p.row.clone(),
            action,
            reason: p.detail.clone(),
        });
    }
    w.flush()?;
    if !index_reasons.is_empty()
        && let Some(meta_t) = &tables.meta
    {
        let (written, deleted) = rebuild_index(db, meta_t, &report.newest, &mut w)?;
        w.flush()?;
        let reason = match index_reasons.as_slice() {
            [one] => one.clone(),
            [first, rest @ ..] => format!("{first} (and {} more)", rest.len()),
            [] => String::new(),
        };
        done.push(FsckRepaired {
            table: META_TABLE,
            row: Vec::new(),
            action: format!("series index rewritten: {written} rows written, {deleted} deleted"),
            reason,
        });
    }
    Ok(done)
}

/// Saves the cells of `row` and deletes it; if `rewrite`, writes back the points that decode
/// as one main block. Returns what was done.
fn rewrite_row(table: &Table, key: &[u8], rewrite: bool, w: &mut Writer<'_>) -> Result<String> {
    let Some(row) = w.db.get_row(table, key)? else {
        return Ok("the row is gone already".into());
    };
    w.saver.save(table.name(), key, &row.cells)?;
    let points = match (rewrite, RowKey::decode(key)) {
        (true, Ok(rk)) => decode_parts(rk.base_time, &row.cells).0,
        _ => Vec::new(),
    };
    let mut block = Vec::new();
    if !points.is_empty() {
        encode_block(&points, &mut block)?;
    }
    w.op(|b| {
        b.delete_row(table, key);
        if !block.is_empty() {
            b.put(table, key, b"", &block);
        }
    })?;
    Ok(if block.is_empty() {
        "row saved to lost+found and deleted".into()
    } else {
        format!(
            "row saved to lost+found and rewritten with the {} points that decode",
            points.len()
        )
    })
}

/// The series index rows as they are.
#[derive(Debug, Default)]
struct IndexRows {
    /// `i` rows that decode.
    by_id: BTreeMap<u32, Tsuid>,
    /// `s` rows with a well-formed TSUID, and the id they hold if it decodes.
    by_tsuid: HashMap<Tsuid, Option<u32>>,
    /// `l` rows that decode, by id: the stored value.
    lasts: HashMap<u32, Vec<u8>>,
    /// Rows of the three kinds whose key does not decode.
    bad_keys: Vec<Vec<u8>>,
}

fn read_index(db: &Db, meta_t: &Table) -> Result<IndexRows> {
    let mut rows = IndexRows::default();
    let scan = |prefix: u8| db.scan(meta_t, &ScanOptions::prefix(&[prefix]));
    for row in scan(meta::SERIES_BY_ID_PREFIX)? {
        let row = row?;
        let tsuid = row
            .cells
            .iter()
            .find(|c| c.column == meta::SERIES_TSUID_COLUMN)
            .and_then(|c| Tsuid::from_bytes(&c.value).ok());
        match (meta::decode_id_key(&row.key), tsuid) {
            (Ok(id), Some(t)) => {
                rows.by_id.insert(id, t);
            }
            _ => rows.bad_keys.push(row.key.to_vec()),
        }
    }
    for row in scan(meta::SERIES_BY_TSUID_PREFIX)? {
        let row = row?;
        let id = row
            .cells
            .iter()
            .find(|c| c.column == meta::SERIES_ID_COLUMN)
            .and_then(|c| <[u8; 4]>::try_from(&c.value[..]).ok())
            .map(u32::from_be_bytes);
        match Tsuid::from_bytes(&row.key[1..]) {
            Ok(t) => {
                rows.by_tsuid.insert(t, id);
            }
            Err(_) => rows.bad_keys.push(row.key.to_vec()),
        }
    }
    for row in scan(meta::LAST_PREFIX)? {
        let row = row?;
        let value = row.cells.iter().find(|c| c.column == meta::LAST_COLUMN);
        let good = value.is_some_and(|c| meta::decode_last(&row.key, &c.value).is_ok());
        match (meta::decode_id_key(&row.key), value) {
            (Ok(id), Some(c)) if good => {
                rows.lasts.insert(id, c.value.to_vec());
            }
            _ => rows.bad_keys.push(row.key.to_vec()),
        }
    }
    Ok(rows)
}

/// Rewrites the series index: the TSUIDs of the `i` rows in id order, each once, then the
/// series of the data that no `i` row holds, numbered densely from 0. Each keeps its last
/// point if its `l` row decodes, else takes its newest point in the data. Only rows that
/// change are written. Returns the rows written and deleted.
fn rebuild_index(
    db: &Db,
    meta_t: &Table,
    newest: &HashMap<Tsuid, (i64, Value)>,
    w: &mut Writer<'_>,
) -> Result<(u64, u64)> {
    let old = read_index(db, meta_t)?;
    let mut order: Vec<&Tsuid> = Vec::new();
    let mut old_id: HashMap<&Tsuid, u32> = HashMap::new();
    for (id, t) in &old.by_id {
        if !old_id.contains_key(t) {
            old_id.insert(t, *id);
            order.push(t);
        }
    }
    let mut unindexed: Vec<&Tsuid> = newest.keys().filter(|t| !old_id.contains_key(t)).collect();
    unindexed.sort();
    order.extend(unindexed);
    let (mut written, mut deleted) = (0u64, 0u64);
    let id_key = |p: u8, id: u32| meta::key(p, &id.to_be_bytes());
    // Stale rows go first: a row deleted and then written in one batch keeps the write.
    let n = order.len() as u64;
    let mut stale: Vec<Vec<u8>> = old.bad_keys;
    stale.extend(
        old.by_id
            .keys()
            .filter(|id| u64::from(**id) >= n)
            .map(|id| id_key(meta::SERIES_BY_ID_PREFIX, *id)),
    );
    stale.extend(
        old.lasts
            .keys()
            .filter(|id| u64::from(**id) >= n)
            .map(|id| id_key(meta::LAST_PREFIX, *id)),
    );
    stale.extend(
        old.by_tsuid
            .keys()
            .filter(|t| !old_id.contains_key(t) && !newest.contains_key(*t))
            .map(|t| meta::key(meta::SERIES_BY_TSUID_PREFIX, t.as_bytes())),
    );
    for key in stale {
        w.op(|b| b.delete_row(meta_t, &key))?;
        deleted += 1;
    }
    for (new_id, t) in order.iter().enumerate() {
        let new_id = u32::try_from(new_id).map_err(|_| Error::SeriesExhausted {
            count: order.len() as u64,
        })?;
        if old.by_id.get(&new_id) != Some(*t) {
            let key = id_key(meta::SERIES_BY_ID_PREFIX, new_id);
            w.op(|b| b.put(meta_t, &key, meta::SERIES_TSUID_COLUMN, t.as_bytes()))?;
            written += 1;
        }
        if old.by_tsuid.get(*t) != Some(&Some(new_id)) {
            let key = meta::key(meta::SERIES_BY_TSUID_PREFIX, t.as_bytes());
            w.op(|b| b.put(meta_t, &key, meta::SERIES_ID_COLUMN, &new_id.to_be_bytes()))?;
            written += 1;
        }
        let want = old_id
            .get(*t)
            .and_then(|id| old.lasts.get(id).cloned())
            .or_else(|| newest.get(*t).map(|&(ts, v)| meta::encode_last(ts, v)));
        let key = id_key(meta::LAST_PREFIX, new_id);
        match (want, old.lasts.get(&new_id)) {
            (Some(want), have) if have != Some(&want) => {
                w.op(|b| b.put(meta_t, &key, meta::LAST_COLUMN, &want))?;
                written += 1;
            }
            (None, Some(_)) => {
                w.op(|b| b.delete_row(meta_t, &key))?;
                deleted += 1;
            }
            _ => {}
        }
    }
    Ok((written, deleted))
}
