//! The database handle.
//!
//! STAND-IN: the state is an in-memory map of tables, made durable by the write-ahead log
//! (`wal.rs`) and rebuilt from it at open. It keeps the API's semantics (atomic batches,
//! snapshots, scans) while the LSM internals (memtable, SST, manifest, compaction) are written;
//! until memtables flush to SSTs, every WAL segment is kept.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use parking_lot::RwLock;

use crate::batch::{OpRef, WriteBatch};
use crate::error::{Error, Result};
use crate::options::{DbOptions, SyncPolicy, TableOptions};
use crate::scan::{Cell, Row, RowIter, ScanOptions};
use crate::stats::EngineStats;
use crate::wal::{DecodedEntry, Entry, Wal, decode_entry};

type Cells = BTreeMap<Vec<u8>, Bytes>;
type Rows = BTreeMap<Vec<u8>, Cells>;
type Tables = BTreeMap<u32, Rows>;

/// A handle to a table, cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    id: u32,
    name: Arc<str>,
}

impl Table {
    pub(crate) fn new(id: u32, name: Arc<str>) -> Table {
        Table { id, name }
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn id(&self) -> u32 {
        self.id
    }
}

/// An open database. Cheap to clone; every clone shares the same state.
#[derive(Debug, Clone)]
pub struct Db {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    opts: DbOptions,
    state: RwLock<Arc<Tables>>,
    tables: RwLock<BTreeMap<String, Table>>,
    wal: Arc<Wal>,
}

impl Db {
    /// Opens (creating if needed) the database in `dir`.
    pub fn open(dir: impl AsRef<Path>, opts: DbOptions) -> Result<Db> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        let mut tables = BTreeMap::new();
        let mut state = Tables::new();
        let mut replay = |payload: &[u8], file: &Path, offset: u64| -> Result<()> {
            let bad = |detail: String| Error::Corruption {
                file: file.display().to_string(),
                offset,
                detail,
            };
            match decode_entry(payload).map_err(bad)? {
                DecodedEntry::Table { id, name } => {
                    tables.insert(name.to_string(), Table::new(id, name.into()));
                }
                DecodedEntry::Batch(ops) => {
                    for op in &ops {
                        apply(&mut state, op);
                    }
                }
            }
            Ok(())
        };
        let wal = Arc::new(Wal::open(dir, opts.wal_segment_bytes, &mut replay)?);
        if let SyncPolicy::Interval(every) = opts.sync {
            Wal::spawn_syncer(&wal, every)?;
        }
        Ok(Db {
            inner: Arc::new(Inner {
                opts,
                state: RwLock::new(Arc::new(state)),
                tables: RwLock::new(tables),
                wal,
            }),
        })
    }

    /// Opens the table `name`, creating it with `opts` if it does not exist.
    pub fn open_table(&self, name: &str, _opts: TableOptions) -> Result<Table> {
        if name.is_empty() || name.len() > 255 {
            return Err(Error::InvalidArgument(format!("bad table name {name:?}")));
        }
        let mut tables = self.inner.tables.write();
        if let Some(t) = tables.get(name) {
            return Ok(t.clone());
        }
        let id = tables.values().map(Table::id).max().unwrap_or(0) + 1;
        // A table's creation is always durable before the table is handed out. Its record
        // changes no cell, so the group's apply skips it; the table map is updated here.
        self.inner
            .wal
            .commit(Entry::Table { id, name }, true, &mut |payloads| {
                self.apply_group(payloads)
            })?;
        let t = Table::new(id, name.into());
        tables.insert(name.to_string(), t.clone());
        Ok(t)
    }

    /// The table `name`, if it exists.
    pub fn table(&self, name: &str) -> Option<Table> {
        self.inner.tables.read().get(name).cloned()
    }

    /// Applies `batch` atomically. It is durable according to the database's sync policy.
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        self.write_inner(batch, self.inner.opts.sync == SyncPolicy::Always)
    }

    /// Applies `batch` atomically and fsyncs the WAL before returning, whatever the policy.
    pub fn write_sync(&self, batch: &WriteBatch) -> Result<()> {
        self.write_inner(batch, true)
    }

    fn write_inner(&self, batch: &WriteBatch, sync: bool) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        self.inner
            .wal
            .commit(Entry::Batch(batch), sync, &mut |payloads| {
                self.apply_group(payloads)
            })
    }

    /// Applies a committed group of WAL payloads to the in-memory state, in log order.
    fn apply_group(&self, payloads: &[&[u8]]) {
        let mut state = self.inner.state.write();
        let s = Arc::make_mut(&mut state);
        for payload in payloads {
            match decode_entry(payload) {
                Ok(DecodedEntry::Batch(ops)) => {
                    for op in &ops {
                        apply(s, op);
                    }
                }
                Ok(DecodedEntry::Table { .. }) => {}
                // We encoded these bytes ourselves a moment ago.
                Err(e) => tracing::error!(error = %e, "undecodable WAL payload of our own"),
            }
        }
    }

    /// Fsyncs the WAL now.
    pub fn sync_wal(&self) -> Result<()> {
        self.inner.wal.sync()
    }

    /// A consistent read view of the database as of now.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            state: self.inner.state.read().clone(),
        }
    }

    /// Reads one cell.
    pub fn get(&self, table: &Table, row: &[u8], column: &[u8]) -> Result<Option<Bytes>> {
        self.snapshot().get(table, row, column)
    }

    /// Reads one row with all its cells; `None` if the row has no visible cell.
    pub fn get_row(&self, table: &Table, row: &[u8]) -> Result<Option<Row>> {
        self.snapshot().get_row(table, row)
    }

    /// Scans rows of `table`.
    pub fn scan(&self, table: &Table, opts: &ScanOptions) -> Result<RowIter> {
        self.snapshot().scan(table, opts)
    }

    /// Flushes the memtables to SST files and waits for it. For now (no SSTs yet) this fsyncs
    /// the WAL.
    pub fn flush(&self) -> Result<()> {
        self.sync_wal()
    }

    /// Compacts every level into the bottom one and waits for it.
    pub fn compact_all(&self) -> Result<()> {
        Ok(())
    }

    /// Current counters.
    pub fn stats(&self) -> EngineStats {
        let wal = self.inner.wal.stats();
        EngineStats {
            wal_bytes: wal.bytes.load(Ordering::Relaxed),
            wal_syncs: wal.syncs.load(Ordering::Relaxed),
            batches_written: wal.batches.load(Ordering::Relaxed),
            ..EngineStats::default()
        }
    }

    /// Flushes and closes the database.
    pub fn close(self) -> Result<()> {
        self.sync_wal()
    }
}

/// A consistent read view.
#[derive(Debug, Clone)]
pub struct Snapshot {
    state: Arc<Tables>,
}

impl Snapshot {
    /// Reads one cell.
    pub fn get(&self, table: &Table, row: &[u8], column: &[u8]) -> Result<Option<Bytes>> {
        Ok(self
            .state
            .get(&table.id)
            .and_then(|t| t.get(row))
            .and_then(|r| r.get(column))
            .cloned())
    }

    /// Reads one row.
    pub fn get_row(&self, table: &Table, row: &[u8]) -> Result<Option<Row>> {
        Ok(self
            .state
            .get(&table.id)
            .and_then(|t| t.get(row))
            .map(|cells| Row {
                key: Bytes::copy_from_slice(row),
                cells: cells
                    .iter()
                    .map(|(c, v)| Cell {
                        column: Bytes::copy_from_slice(c),
                        value: v.clone(),
                    })
                    .collect(),
            }))
    }

    /// Scans rows of `table`.
    pub fn scan(&self, table: &Table, opts: &ScanOptions) -> Result<RowIter> {
        let mut rows = Vec::new();
        if let Some(t) = self.state.get(&table.id) {
            let mut visit = |k: &Vec<u8>, cells: &Cells| {
                if !opts.contains(k) {
                    return;
                }
                if let Some(f) = &opts.row_filter
                    && !f(k)
                {
                    return;
                }
                let cells: Vec<Cell> = cells
                    .iter()
                    .filter(|(c, _)| {
                        opts.columns
                            .as_ref()
                            .is_none_or(|cs| cs.iter().any(|x| x == *c))
                    })
                    .map(|(c, v)| Cell {
                        column: Bytes::copy_from_slice(c),
                        value: if opts.keys_only {
                            Bytes::new()
                        } else {
                            v.clone()
                        },
                    })
                    .collect();
                if !cells.is_empty() {
                    rows.push(Ok(Row {
                        key: Bytes::copy_from_slice(k),
                        cells,
                    }));
                }
            };
            if opts.reverse {
                t.iter().rev().for_each(|(k, c)| visit(k, c));
            } else {
                t.iter().for_each(|(k, c)| visit(k, c));
            }
        }
        if let Some(l) = opts.limit {
            rows.truncate(l);
        }
        Ok(RowIter {
            inner: Box::new(rows.into_iter()),
        })
    }
}

fn apply(state: &mut Tables, op: &OpRef<'_>) {
    match *op {
        OpRef::Put {
            table,
            row,
            column,
            value,
        } => {
            state
                .entry(table)
                .or_default()
                .entry(row.to_vec())
                .or_default()
                .insert(column.to_vec(), Bytes::copy_from_slice(value));
        }
        OpRef::Delete { table, row, column } => {
            if let Some(t) = state.get_mut(&table)
                && let Some(r) = t.get_mut(row)
            {
                r.remove(column);
                if r.is_empty() {
                    t.remove(row);
                }
            }
        }
        OpRef::DeleteRow { table, row } => {
            if let Some(t) = state.get_mut(&table) {
                t.remove(row);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_survives_reopen() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        {
            let db = Db::open(dir.path(), DbOptions::default())?;
            let t = db.open_table("t", TableOptions::default())?;
            let mut b = WriteBatch::new();
            b.put(&t, b"r1", b"c1", b"v1");
            b.put(&t, b"r1", b"c2", b"v2");
            b.put(&t, b"r2", b"c1", b"v3");
            b.delete(&t, b"r1", b"c2");
            db.write(&b)?;
            db.close()?;
        }
        let db = Db::open(dir.path(), DbOptions::default())?;
        let t = db
            .table("t")
            .ok_or_else(|| Error::NoSuchTable("t".into()))?;
        assert_eq!(db.get(&t, b"r1", b"c1")?.as_deref(), Some(&b"v1"[..]));
        assert_eq!(db.get(&t, b"r1", b"c2")?, None);
        let rows: Vec<Row> = db
            .scan(
                &t,
                &ScanOptions {
                    reverse: true,
                    ..Default::default()
                },
            )?
            .collect::<Result<_>>()?;
        assert_eq!(
            rows.iter().map(|r| r.key.to_vec()).collect::<Vec<_>>(),
            vec![b"r2".to_vec(), b"r1".to_vec()]
        );
        Ok(())
    }
}
