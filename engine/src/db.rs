//! The database handle.
//!
//! STAND-IN: this is a simple in-memory implementation with an append-only log, so that the
//! crates above can be built against the final public API while the LSM internals (WAL,
//! memtable, SST, manifest, compaction) are written. It keeps the API's semantics (atomic
//! batches, snapshots, scans) but none of its performance or TTL behaviour.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};

use crate::batch::{Op, WriteBatch};
use crate::error::{Error, Result};
use crate::options::{DbOptions, SyncPolicy, TableOptions};
use crate::scan::{Cell, Row, RowIter, ScanOptions};
use crate::stats::EngineStats;

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
    log: Mutex<File>,
    path: PathBuf,
}

const REC_TABLE: u8 = 1;
const REC_BATCH: u8 = 2;

impl Db {
    /// Opens (creating if needed) the database in `dir`.
    pub fn open(dir: impl AsRef<Path>, opts: DbOptions) -> Result<Db> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        let path = dir.join("stub.log");
        let mut tables = BTreeMap::new();
        let mut state = Tables::new();
        let mut good_len = 0u64;
        if path.exists() {
            let f = File::open(&path).map_err(|e| Error::io("opening log", e))?;
            let mut r = BufReader::new(f);
            loop {
                let mut hdr = [0u8; 12];
                if r.read_exact(&mut hdr).is_err() {
                    break;
                }
                let len = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]) as usize;
                let sum = u64::from_le_bytes(hdr[4..12].try_into().unwrap_or([0; 8]));
                let mut payload = vec![0u8; len];
                if r.read_exact(&mut payload).is_err() {
                    break;
                }
                if xxhash_rust::xxh3::xxh3_64(&payload) != sum {
                    break;
                }
                if !replay(&payload, &mut tables, &mut state) {
                    break;
                }
                good_len += 12 + len as u64;
            }
        }
        let log = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io("opening log", e))?;
        log.set_len(good_len)
            .map_err(|e| Error::io("truncating log", e))?;
        let mut log = log;
        std::io::Seek::seek(&mut log, std::io::SeekFrom::End(0))
            .map_err(|e| Error::io("seek", e))?;
        Ok(Db {
            inner: Arc::new(Inner {
                opts,
                state: RwLock::new(Arc::new(state)),
                tables: RwLock::new(tables),
                log: Mutex::new(log),
                path,
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
        let id = tables.len() as u32 + 1;
        let mut payload = vec![REC_TABLE];
        payload.extend_from_slice(&id.to_le_bytes());
        payload.extend_from_slice(name.as_bytes());
        self.append(&payload, true)?;
        let t = Table {
            id,
            name: name.into(),
        };
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
        let mut payload = vec![REC_BATCH];
        for op in &batch.ops {
            encode_op(op, &mut payload);
        }
        let mut state = self.inner.state.write();
        self.append(&payload, sync)?;
        let s = Arc::make_mut(&mut state);
        for op in &batch.ops {
            apply(s, op);
        }
        Ok(())
    }

    fn append(&self, payload: &[u8], sync: bool) -> Result<()> {
        let mut log = self.inner.log.lock();
        let mut rec = Vec::with_capacity(payload.len() + 12);
        rec.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        rec.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(payload).to_le_bytes());
        rec.extend_from_slice(payload);
        log.write_all(&rec)
            .map_err(|e| Error::io(format!("appending {}", self.inner.path.display()), e))?;
        if sync {
            log.sync_data().map_err(|e| Error::io("fsync log", e))?;
        }
        Ok(())
    }

    /// Fsyncs the WAL now.
    pub fn sync_wal(&self) -> Result<()> {
        self.inner
            .log
            .lock()
            .sync_data()
            .map_err(|e| Error::io("fsync log", e))
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

    /// Flushes the memtables to SST files and waits for it.
    pub fn flush(&self) -> Result<()> {
        self.sync_wal()
    }

    /// Compacts every level into the bottom one and waits for it.
    pub fn compact_all(&self) -> Result<()> {
        Ok(())
    }

    /// Current counters.
    pub fn stats(&self) -> EngineStats {
        EngineStats::default()
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

fn apply(state: &mut Tables, op: &Op) {
    match op {
        Op::Put {
            table,
            row,
            column,
            value,
        } => {
            state
                .entry(*table)
                .or_default()
                .entry(row.clone())
                .or_default()
                .insert(column.clone(), Bytes::copy_from_slice(value));
        }
        Op::Delete { table, row, column } => {
            if let Some(t) = state.get_mut(table)
                && let Some(r) = t.get_mut(row)
            {
                r.remove(column);
                if r.is_empty() {
                    t.remove(row);
                }
            }
        }
        Op::DeleteRow { table, row } => {
            if let Some(t) = state.get_mut(table) {
                t.remove(row);
            }
        }
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

fn encode_op(op: &Op, out: &mut Vec<u8>) {
    match op {
        Op::Put {
            table,
            row,
            column,
            value,
        } => {
            out.push(1);
            out.extend_from_slice(&table.to_le_bytes());
            put_bytes(out, row);
            put_bytes(out, column);
            put_bytes(out, value);
        }
        Op::Delete { table, row, column } => {
            out.push(2);
            out.extend_from_slice(&table.to_le_bytes());
            put_bytes(out, row);
            put_bytes(out, column);
        }
        Op::DeleteRow { table, row } => {
            out.push(3);
            out.extend_from_slice(&table.to_le_bytes());
            put_bytes(out, row);
        }
    }
}

struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        let a: &[u8] = a;
        self.0 = b;
        Some(a)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.u32()? as usize;
        self.take(n).map(<[u8]>::to_vec)
    }
}

fn replay(payload: &[u8], tables: &mut BTreeMap<String, Table>, state: &mut Tables) -> bool {
    let mut c = Cursor(payload);
    match c.take(1) {
        Some([REC_TABLE]) => {
            let Some(id) = c.u32() else { return false };
            let Ok(name) = std::str::from_utf8(c.0) else {
                return false;
            };
            tables.insert(
                name.to_string(),
                Table {
                    id,
                    name: name.into(),
                },
            );
            true
        }
        Some([REC_BATCH]) => {
            let mut ops = Vec::new();
            while !c.0.is_empty() {
                let Some(kind) = c.take(1).map(|b| b[0]) else {
                    return false;
                };
                let Some(table) = c.u32() else { return false };
                let op = match kind {
                    1 => match (c.bytes(), c.bytes(), c.bytes()) {
                        (Some(row), Some(column), Some(value)) => Op::Put {
                            table,
                            row,
                            column,
                            value,
                        },
                        _ => return false,
                    },
                    2 => match (c.bytes(), c.bytes()) {
                        (Some(row), Some(column)) => Op::Delete { table, row, column },
                        _ => return false,
                    },
                    3 => match c.bytes() {
                        Some(row) => Op::DeleteRow { table, row },
                        None => return false,
                    },
                    _ => return false,
                };
                ops.push(op);
            }
            for op in &ops {
                apply(state, op);
            }
            true
        }
        _ => false,
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
