//! UIDs: 3-byte ids for metric names, tag keys and tag values (table `uid`).
//!
//! ## Format
//!
//! ```text
//! row = name (UTF-8)      column = "id:<kind>"    value = uid (3 bytes BE)
//! row = uid (3 bytes BE)  column = "name:<kind>"  value = name (UTF-8)
//! row = 0x00              column = "max:<kind>"   value = last assigned uid (8 bytes BE u64)
//! ```
//!
//! `<kind>` is `metrics`, `tagk` or `tagv`.
//!
//! 1. UIDs are assigned from 1 upward per kind; 0 is never assigned.
//! 2. An assignment writes the counter and both mappings in one atomic batch, under a per-table
//!    mutex, so a UID is never handed out twice and never leaked.
//! 3. A name row and a UID row can share bytes (a 3-byte name); their columns differ, and a name
//!    never holds 0x00, so the counter row is never a name row.
//!
//! Every mapping is loaded into memory at open, in both directions; the maps are the caches.
//!
//! With a shared [`UidAllocator`] (partitioned ingest), the allocator picks a new name's UID
//! instead of `counter + 1`; the batch is the same, and the counter becomes the largest UID
//! held, so it never goes down.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use std::fmt;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use strata_engine::{Db, ScanOptions, Table, WriteBatch};

use crate::error::{Error, Result, hex_upper};
use crate::uid_alloc::UidAllocator;
pub(crate) use crate::uid_kind::UidKind;

/// Bytes of a UID.
pub(crate) const UID_LEN: usize = 3;
/// Largest UID on 3 bytes.
pub const MAX_UID: u32 = (1 << 24) - 1;
/// Row of the per-kind counters.
pub(crate) const COUNTER_ROW: &[u8] = &[0];

/// A 3-byte unique id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Uid(u32);

impl Uid {
    /// The UID with this number, if it fits in 3 bytes and is not 0.
    pub fn from_u32(n: u32) -> Option<Uid> {
        (1..=MAX_UID).contains(&n).then_some(Uid(n))
    }

    pub(crate) fn from_array(b: [u8; UID_LEN]) -> Uid {
        Uid(u32::from_be_bytes([0, b[0], b[1], b[2]]))
    }

    /// Decodes 3 big-endian bytes.
    pub fn from_bytes(b: &[u8]) -> Option<Uid> {
        match b {
            [a, b, c] => Uid::from_u32(u32::from_be_bytes([0, *a, *b, *c])),
            _ => None,
        }
    }

    /// The number.
    pub fn get(self) -> u32 {
        self.0
    }

    /// 3 big-endian bytes.
    pub fn to_bytes(self) -> [u8; UID_LEN] {
        let b = self.0.to_be_bytes();
        [b[1], b[2], b[3]]
    }
}

impl fmt::Display for Uid {
    /// Upper-case fixed-width hex, as OpenTSDB's API prints UIDs (`00002A`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex_upper(&self.to_bytes()))
    }
}

#[derive(Debug, Default)]
struct KindMaps {
    by_name: BTreeMap<Arc<str>, Uid>,
    by_uid: FxHashMap<Uid, Arc<str>>,
    max: u32,
}

impl KindMaps {
    /// The name of `uid`, a `kind` UID.
    fn name(&self, kind: UidKind, uid: Uid) -> Result<&Arc<str>> {
        self.by_uid.get(&uid).ok_or_else(|| Error::NoSuchUid {
            kind,
            uid: uid.to_string(),
        })
    }
}

/// The UID table with its in-memory maps.
#[derive(Debug)]
pub(crate) struct UidTable {
    db: Db,
    table: Table,
    maps: [RwLock<KindMaps>; 3],
    /// Serializes assignments and renames (counter read, batch, map update).
    assign: Mutex<()>,
    max_uid: u32,
    /// Picks new names' UIDs; `None` counts up locally.
    allocator: Option<Arc<dyn UidAllocator>>,
}

impl UidTable {
    /// Loads every mapping of `table`; new names' UIDs are picked by `allocator` (`None`: the
    /// local counter).
    pub(crate) fn open_with_allocator(
        db: Db,
        table: Table,
        allocator: Option<Arc<dyn UidAllocator>>,
    ) -> Result<UidTable> {
        let mut t = UidTable::open_with_max(db, table, MAX_UID)?;
        t.allocator = allocator;
        Ok(t)
    }

    /// Loads every mapping of `table`, with the local counter stopping at `max_uid` (tests of
    /// exhaustion).
    pub(crate) fn open_with_max(db: Db, table: Table, max_uid: u32) -> Result<UidTable> {
        let [a, b, c] = load(&db, &table)?;
        Ok(UidTable {
            db,
            table,
            maps: [RwLock::new(a), RwLock::new(b), RwLock::new(c)],
            assign: Mutex::new(()),
            max_uid,
            allocator: None,
        })
    }

    /// Drops the in-memory maps and loads them again from the table (an operator's
    /// `dropcaches`). No assignment or rename runs meanwhile; lookups see the old maps until
    /// the new ones are in.
    pub(crate) fn reload(&self) -> Result<()> {
        let _guard = self.assign.lock();
        let loaded = load(&self.db, &self.table)?;
        for (maps, new) in self.maps.iter().zip(loaded) {
            *maps.write() = new;
        }
        Ok(())
    }

    /// As [`UidTable::reload`], from the UID tables of several trees whose writers share
    /// UIDs (one per name across them): the maps are their union. A replica's only.
    pub(crate) fn reload_from(&self, tables: &[(&Db, &Table)]) -> Result<()> {
        let _guard = self.assign.lock();
        let mut union: [KindMaps; 3] = Default::default();
        for (db, table) in tables {
            for (all, one) in union.iter_mut().zip(load(db, table)?) {
                all.by_name.extend(one.by_name);
                all.by_uid.extend(one.by_uid);
                all.max = all.max.max(one.max);
            }
        }
        for (maps, new) in self.maps.iter().zip(union) {
            *maps.write() = new;
        }
        Ok(())
    }

    /// The engine table the maps are read from.
    pub(crate) fn table(&self) -> &Table {
        &self.table
    }

    /// The UID of `name`, if assigned.
    pub(crate) fn get(&self, kind: UidKind, name: &str) -> Option<Uid> {
        self.maps[kind.index()].read().by_name.get(name).copied()
    }

    /// The UID of `name`, or `No such name` error.
    pub(crate) fn lookup(&self, kind: UidKind, name: &str) -> Result<Uid> {
        self.get(kind, name).ok_or_else(|| Error::NoSuchName {
            kind,
            name: name.to_string(),
        })
    }

    /// The name of `uid`.
    pub(crate) fn name(&self, kind: UidKind, uid: Uid) -> Result<Arc<str>> {
        self.maps[kind.index()].read().name(kind, uid).cloned()
    }

    /// The names of a series' metric and tag pairs, under one read lock per kind (a query
    /// resolves thousands of these).
    pub(crate) fn series_names(
        &self,
        metric: Uid,
        tags: impl Iterator<Item = (Uid, Uid)>,
    ) -> Result<(String, Vec<(String, String)>)> {
        let metrics = self.maps[UidKind::Metric.index()].read();
        let tagks = self.maps[UidKind::Tagk.index()].read();
        let tagvs = self.maps[UidKind::Tagv.index()].read();
        // `String::from(&str)` copies; `to_string` on an `Arc<str>` would go through `Display`.
        let metric = String::from(&**metrics.name(UidKind::Metric, metric)?);
        let tags = tags
            .map(|(k, v)| {
                Ok((
                    String::from(&**tagks.name(UidKind::Tagk, k)?),
                    String::from(&**tagvs.name(UidKind::Tagv, v)?),
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((metric, tags))
    }

    /// The UID of `name`, assigning the next one if it has none. Returns the UID and whether it
    /// was just assigned.
    pub(crate) fn get_or_assign(&self, kind: UidKind, name: &str) -> Result<(Uid, bool)> {
        if let Some(uid) = self.get(kind, name) {
            return Ok((uid, false));
        }
        let _guard = self.assign.lock();
        if let Some(uid) = self.get(kind, name) {
            return Ok((uid, false));
        }
        let max = self.maps[kind.index()].read().max;
        let uid = match &self.allocator {
            None => {
                let next = max + 1;
                if next > self.max_uid {
                    return Err(Error::UidsExhausted { kind });
                }
                Uid(next)
            }
            Some(allocator) => {
                let uid = allocator.allocate(kind, name, max)?;
                let m = self.maps[kind.index()].read();
                if let Some(other) = m.by_uid.get(&uid) {
                    // Only a table that assigned UIDs on its own before it shared an
                    // allocator can hold this.
                    return Err(Error::corruption(
                        "uid row",
                        &uid.to_bytes(),
                        format!(
                            "the shared allocator gave {kind} {name:?} the UID of {other:?} \
                             in this table"
                        ),
                    ));
                }
                uid
            }
        };
        let next = max.max(uid.0);
        let mut batch = WriteBatch::new();
        batch.put(
            &self.table,
            COUNTER_ROW,
            kind.max_column(),
            &u64::from(next).to_be_bytes(),
        );
        batch.put(
            &self.table,
            &uid.to_bytes(),
            kind.name_column(),
            name.as_bytes(),
        );
        batch.put(
            &self.table,
            name.as_bytes(),
            kind.id_column(),
            &uid.to_bytes(),
        );
        self.db.write(&batch)?;
        let mut m = self.maps[kind.index()].write();
        let name: Arc<str> = name.into();
        m.max = next;
        m.by_name.insert(name.clone(), uid);
        m.by_uid.insert(uid, name);
        tracing::trace!(kind = kind.as_str(), uid = uid.0, "assigned uid");
        Ok((uid, true))
    }

    /// Renames `old` to `new`, keeping its UID.
    pub(crate) fn rename(&self, kind: UidKind, old: &str, new: &str) -> Result<()> {
        self.check_unshared(kind, "renamed")?;
        let _guard = self.assign.lock();
        let uid = self.lookup(kind, old)?;
        if let Some(existing) = self.get(kind, new) {
            return Err(Error::NameExists {
                kind,
                name: new.to_string(),
                uid: existing.to_string(),
            });
        }
        let mut batch = WriteBatch::new();
        batch.delete(&self.table, old.as_bytes(), kind.id_column());
        batch.put(
            &self.table,
            new.as_bytes(),
            kind.id_column(),
            &uid.to_bytes(),
        );
        batch.put(
            &self.table,
            &uid.to_bytes(),
            kind.name_column(),
            new.as_bytes(),
        );
        self.db.write(&batch)?;
        let mut m = self.maps[kind.index()].write();
        let new: Arc<str> = new.into();
        m.by_name.remove(old);
        m.by_name.insert(new.clone(), uid);
        m.by_uid.insert(uid, new);
        Ok(())
    }

    /// Deletes the mapping of `name` both ways, as OpenTSDB's `uid delete`; its UID is not
    /// handed out again (the counter stays).
    pub(crate) fn delete(&self, kind: UidKind, name: &str) -> Result<Uid> {
        self.check_unshared(kind, "deleted")?;
        let _guard = self.assign.lock();
        let uid = self.lookup(kind, name)?;
        let mut batch = WriteBatch::new();
        batch.delete(&self.table, name.as_bytes(), kind.id_column());
        batch.delete(&self.table, &uid.to_bytes(), kind.name_column());
        self.db.write(&batch)?;
        let mut m = self.maps[kind.index()].write();
        m.by_name.remove(name);
        m.by_uid.remove(&uid);
        Ok(uid)
    }

    /// Whether new names' UIDs come from an allocator shared with other databases.
    pub(crate) fn is_shared(&self) -> bool {
        self.allocator.is_some()
    }

    /// Refuses to change a mapping that a shared allocator holds for other databases too:
    /// they would keep the old one.
    fn check_unshared(&self, kind: UidKind, what: &str) -> Result<()> {
        match self.allocator {
            Some(_) => Err(Error::InvalidArgument(format!(
                "{kind} names cannot be {what} while UIDs are shared between writers \
                 (partitioned ingest): the other writers would keep the old mapping"
            ))),
            None => Ok(()),
        }
    }

    /// Up to `max` names of `kind` starting with `prefix`, sorted.
    pub(crate) fn suggest(&self, kind: UidKind, prefix: &str, max: usize) -> Vec<String> {
        let m = self.maps[kind.index()].read();
        m.by_name
            .range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(n, _)| n.starts_with(prefix))
            .take(max)
            .map(|(n, _)| n.to_string())
            .collect()
    }

    /// Number of UIDs assigned for `kind`.
    pub(crate) fn count(&self, kind: UidKind) -> usize {
        self.maps[kind.index()].read().by_name.len()
    }
}

/// Every mapping and counter of the UID table, by kind.
fn load(db: &Db, table: &Table) -> Result<[KindMaps; 3]> {
    let mut maps: [KindMaps; 3] = Default::default();
    for row in db.scan(table, &ScanOptions::default())? {
        let row = row?;
        for cell in &row.cells {
            for kind in UidKind::ALL {
                let m = &mut maps[kind.index()];
                if cell.column == kind.id_column() {
                    let uid = Uid::from_bytes(&cell.value)
                        .ok_or_else(|| Error::corruption("uid row", &row.key, "bad UID value"))?;
                    let name = std::str::from_utf8(&row.key)
                        .map_err(|_| Error::corruption("uid row", &row.key, "name is not UTF-8"))?;
                    m.by_name.insert(name.into(), uid);
                } else if cell.column == kind.name_column() {
                    let uid = Uid::from_bytes(&row.key)
                        .ok_or_else(|| Error::corruption("uid row", &row.key, "bad UID rowkey"))?;
                    let name = std::str::from_utf8(&cell.value)
                        .map_err(|_| Error::corruption("uid row", &row.key, "name is not UTF-8"))?;
                    m.by_uid.insert(uid, name.into());
                } else if cell.column == kind.max_column() && *row.key == *COUNTER_ROW {
                    let b: [u8; 8] = cell.value[..].try_into().map_err(|_| {
                        Error::corruption("uid row", &row.key, "counter is not 8 bytes")
                    })?;
                    m.max = u32::try_from(u64::from_be_bytes(b)).map_err(|_| {
                        Error::corruption("uid row", &row.key, "counter out of range")
                    })?;
                }
            }
        }
    }
    Ok(maps)
}

#[cfg(test)]
mod tests {
    use strata_engine::{DbOptions, TableOptions};

    use super::*;

    fn open(dir: &std::path::Path, max: u32) -> Result<UidTable> {
        let db = Db::open(dir, DbOptions::default())?;
        let t = db.open_table("uid", TableOptions::default())?;
        UidTable::open_with_max(db, t, max)
    }

    /// `reload` drops the maps and reads the table again: a mapping written to the table
    /// behind the maps' back (as another process's tool might) appears, and nothing is lost.
    #[test]
    fn reload_reads_the_table_again() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let u = open(dir.path(), MAX_UID)?;
        u.get_or_assign(UidKind::Metric, "a")?;
        u.get_or_assign(UidKind::Tagv, "v")?;
        let mut batch = WriteBatch::new();
        batch.put(&u.table, b"b", UidKind::Metric.id_column(), &[0, 0, 9]);
        batch.put(&u.table, &[0, 0, 9], UidKind::Metric.name_column(), b"b");
        u.db.write(&batch)?;
        assert_eq!(u.get(UidKind::Metric, "b"), None);
        u.reload()?;
        assert_eq!(u.get(UidKind::Metric, "b"), Uid::from_u32(9));
        assert_eq!(u.name(UidKind::Metric, Uid(9))?.as_ref(), "b");
        assert_eq!(u.get(UidKind::Metric, "a"), Some(Uid(1)));
        assert_eq!(u.get(UidKind::Tagv, "v"), Some(Uid(1)));
        // The counter came back too: the next name gets the next UID.
        assert_eq!(u.get_or_assign(UidKind::Metric, "c")?, (Uid(2), true));
        Ok(())
    }

    #[test]
    fn assign_lookup_rename_reopen() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        {
            let u = open(dir.path(), MAX_UID)?;
            assert_eq!(u.get_or_assign(UidKind::Metric, "sys.cpu")?, (Uid(1), true));
            assert_eq!(u.get_or_assign(UidKind::Metric, "sys.mem")?, (Uid(2), true));
            assert_eq!(
                u.get_or_assign(UidKind::Metric, "sys.cpu")?,
                (Uid(1), false)
            );
            assert_eq!(u.get_or_assign(UidKind::Tagk, "sys.cpu")?, (Uid(1), true));
            u.rename(UidKind::Metric, "sys.mem", "sys.memory")?;
            assert!(matches!(
                u.rename(UidKind::Metric, "sys.cpu", "sys.memory"),
                Err(Error::NameExists { .. })
            ));
            assert_eq!(
                u.lookup(UidKind::Metric, "nope")
                    .err()
                    .map(|e| e.to_string())
                    .as_deref(),
                Some("No such name for 'metrics': 'nope'")
            );
        }
        let u = open(dir.path(), MAX_UID)?;
        assert_eq!(u.get(UidKind::Metric, "sys.memory"), Some(Uid(2)));
        assert_eq!(u.get(UidKind::Metric, "sys.mem"), None);
        assert_eq!(&*u.name(UidKind::Metric, Uid(2))?, "sys.memory");
        assert_eq!(u.get_or_assign(UidKind::Metric, "x")?, (Uid(3), true));
        assert_eq!(
            u.suggest(UidKind::Metric, "sys.", 10),
            vec!["sys.cpu", "sys.memory"]
        );
        assert_eq!(u.suggest(UidKind::Metric, "sys.", 1), vec!["sys.cpu"]);
        assert_eq!(u.count(UidKind::Tagk), 1);
        Ok(())
    }

    #[test]
    fn exhaustion_message() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let u = open(dir.path(), 2)?;
        u.get_or_assign(UidKind::Tagv, "a")?;
        u.get_or_assign(UidKind::Tagv, "b")?;
        let e = u
            .get_or_assign(UidKind::Tagv, "c")
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("All Unique IDs for tagv on 3 bytes are already assigned!")
        );
        Ok(())
    }

    #[test]
    fn uid_bytes() {
        assert_eq!(Uid::from_u32(0), None);
        assert_eq!(Uid::from_u32(1 << 24), None);
        assert_eq!(Uid(42).to_string(), "00002A");
        assert_eq!(Uid::from_bytes(&[0, 0, 42]), Some(Uid(42)));
        assert_eq!(Uid::from_bytes(&[0, 0, 0]), None);
        assert_eq!(Uid::from_bytes(&[0, 42]), None);
    }
}
