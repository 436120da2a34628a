//! A read replica over several trees: the writers of one object-store prefix that partition
//! the salt buckets (`--salt-buckets LO-HI`) each keep their own tree, and a replica reads all
//! of them ([`Tsdb::open_read_only_trees`]).
//!
//! Data rowkeys start with the salt byte and every bucket has one owner, so trees never hold
//! rows of one bucket twice: a read routes each bucket's gets and scans to the tree that owns
//! it, through one snapshot per tree ([`DataView`]). Names are one UID per name across the
//! writers, so the UID maps are the union of the trees' UID tables. The series index is the
//! trees' indexes one after the other, renumbered: series ids are per tree. While a bucket has
//! no open tree, a refresh asks the [`TreeSource`] for the owners again, so the tree of a
//! writer that starts later is found.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use strata_engine::{
    Db, EngineStats, LevelStats, ObjectStats, SharedBlockCache, Snapshot, Storage, Table,
};

use crate::error::Result;
use crate::replica::{Replica, no_database_yet};
use crate::series_index::SeriesIndex;
use crate::tsdb::{DATA_TABLE, META_TABLE, Tsdb, TsdbOptions, UID_TABLE, engine_options};
use crate::uid::UidTable;

/// Where a replica of partitioned writers finds their trees: the object-store layout is the
/// caller's (the server's `store::partition`).
pub trait TreeSource: Send + Sync + std::fmt::Debug {
    /// The tree that owns each salt bucket, by bucket; `None` for a bucket no writer claimed.
    fn owners(&self) -> Result<Vec<Option<String>>>;
    /// The engine storage of the tree named `tree`. The trees' disk caches should share one
    /// bound (`ObjectStorage::shared_disk_cache`), as their block caches do.
    fn storage(&self, tree: &str) -> Result<Storage>;
}

/// One writer's tree, opened read-only.
#[derive(Debug, Clone)]
pub(crate) struct Tree {
    name: String,
    pub(crate) db: Db,
    pub(crate) data: Table,
    pub(crate) uid: Table,
    pub(crate) meta: Table,
}

/// The trees open now, and which one owns each salt bucket.
#[derive(Debug, Default)]
pub(crate) struct TreeSet {
    pub(crate) trees: Vec<Tree>,
    /// The index in `trees` of each bucket's owner; `None` for a bucket no open tree owns.
    of_salt: Vec<Option<usize>>,
}

/// The trees of a replica over partitioned writers, in [`crate::store::Store::trees`].
#[derive(Debug)]
pub(crate) struct Trees {
    source: Arc<dyn TreeSource>,
    /// The replica's directory; each tree's local state is in `trees/<name>` under it.
    dir: PathBuf,
    opts: TsdbOptions,
    /// One block cache bound over every tree: the setting is the replica's, not per tree.
    blocks: SharedBlockCache,
    pub(crate) set: RwLock<Arc<TreeSet>>,
}

/// What a read sees of the data table: one snapshot per tree and the tree of each bucket.
/// A single-tree database has one, used for every bucket.
pub(crate) struct DataView {
    snaps: Vec<(Snapshot, Table)>,
    of_salt: Vec<Option<usize>>,
}

impl DataView {
    /// The view of one database.
    pub(crate) fn one(db: &Db, data: &Table) -> DataView {
        DataView {
            snaps: vec![(db.snapshot(), data.clone())],
            of_salt: Vec::new(),
        }
    }

    /// The view of every tree of `set`, taken now.
    pub(crate) fn of_set(set: &TreeSet) -> DataView {
        DataView {
            snaps: set
                .trees
                .iter()
                .map(|t| (t.db.snapshot(), t.data.clone()))
                .collect(),
            of_salt: set.of_salt.clone(),
        }
    }

    /// The snapshot and data table that hold salt bucket `salt`; `None` when no open tree
    /// owns it (it has no rows to read yet).
    pub(crate) fn of_salt(&self, salt: u8) -> Option<(&Snapshot, &Table)> {
        let i = if self.of_salt.is_empty() {
            0
        } else {
            self.of_salt.get(usize::from(salt)).copied().flatten()?
        };
        self.snaps.get(i).map(|(s, t)| (s, t))
    }
}

impl Trees {
    /// Opens the trees that `source` names and that hold a database yet.
    fn open(source: Arc<dyn TreeSource>, dir: &Path, opts: &TsdbOptions) -> Result<Trees> {
        let trees = Trees {
            source,
            dir: dir.to_path_buf(),
            opts: opts.clone(),
            blocks: SharedBlockCache::new(opts.db.block_cache_bytes),
            set: RwLock::new(Arc::default()),
        };
        trees.discover()?;
        Ok(trees)
    }

    /// Asks the source for the owners and opens the trees not open yet. True if a tree was
    /// added; a tree with no database yet (its writer has not flushed) is tried again later.
    fn discover(&self) -> Result<bool> {
        let owners = self.source.owners()?;
        let old = self.set.read().clone();
        let mut trees = old.trees.clone();
        let mut added = false;
        for name in owners.iter().flatten() {
            if trees.iter().any(|t| &t.name == name) {
                continue;
            }
            match self.open_tree(name) {
                Ok(Some(tree)) => {
                    tracing::info!(tree = %name, "replica reads a new tree");
                    trees.push(tree);
                    added = true;
                }
                Ok(None) => {}
                Err(e) => tracing::debug!(tree = %name, error = %e, "tree not readable yet"),
            }
        }
        let of_salt = owners
            .iter()
            .map(|o| {
                o.as_ref()
                    .and_then(|name| trees.iter().position(|t| &t.name == name))
            })
            .collect::<Vec<_>>();
        if added || of_salt != old.of_salt {
            *self.set.write() = Arc::new(TreeSet { trees, of_salt });
        }
        Ok(added)
    }

    /// Tree `name` read-only, or `None` if no writer has flushed a database to it yet.
    fn open_tree(&self, name: &str) -> Result<Option<Tree>> {
        let mut db_opts = engine_options(&self.opts);
        db_opts.storage = self.source.storage(name)?;
        db_opts.shared_block_cache = Some(self.blocks.clone());
        let db = Db::open_read_only(self.dir.join("trees").join(name), db_opts)?;
        let (Some(data), Some(uid), Some(meta)) = (
            db.table(DATA_TABLE),
            db.table(UID_TABLE),
            db.table(META_TABLE),
        ) else {
            return Ok(None);
        };
        Ok(Some(Tree {
            name: name.to_owned(),
            db,
            data,
            uid,
            meta,
        }))
    }

    /// Refreshes every open tree and, while a bucket has no open tree, looks for new ones.
    /// Whether any file set changed, whether any UID or meta table's did (or a tree was
    /// added), and the first error: a tree that failed does not keep the others from moving
    /// on, and their change is not lost to the error.
    pub(crate) fn refresh(&self) -> (bool, bool, Result<()>) {
        let set = self.set.read().clone();
        let (mut changed, mut names_changed) = (false, false);
        let mut result = Ok(());
        for t in &set.trees {
            match t.db.refresh_changes() {
                Ok(Some(tables)) => {
                    changed = true;
                    names_changed |= tables.contains(&t.uid) || tables.contains(&t.meta);
                }
                Ok(None) => {}
                Err(e) => {
                    if result.is_ok() {
                        result = Err(e.into());
                    }
                }
            }
        }
        // A claim is permanent: once every bucket's tree is open, there is nothing to find.
        let all_open = !set.of_salt.is_empty() && set.of_salt.iter().all(Option::is_some);
        if !all_open {
            match self.discover() {
                Ok(added) => {
                    changed |= added;
                    names_changed |= added;
                }
                Err(e) => {
                    if result.is_ok() {
                        result = Err(e);
                    }
                }
            }
        }
        (changed, names_changed, result)
    }

    /// Loads the UID maps of every tree, their union, into `uids`, then returns the trees'
    /// series indexes merged. Names go first: a series of the index finds its names.
    pub(crate) fn load(&self, uids: &UidTable, buckets: u8) -> Result<SeriesIndex> {
        let set = self.set.read().clone();
        let uid_tables: Vec<(&Db, &Table)> = set.trees.iter().map(|t| (&t.db, &t.uid)).collect();
        uids.reload_from(&uid_tables)?;
        let mut index = SeriesIndex::default();
        for t in &set.trees {
            index.append(SeriesIndex::load(&t.db, &t.meta, buckets)?, buckets);
        }
        Ok(index)
    }
}

/// The engine figures of every tree as one: counts, sizes and times add up, a flag is set
/// when any tree's is, the manifest version and epoch are the largest. The trees share one
/// block cache, which each reports whole, so its size is the largest, not the sum.
pub(crate) fn merged_stats(set: &TreeSet) -> EngineStats {
    let mut all = EngineStats::default();
    for t in &set.trees {
        let EngineStats {
            memtable_bytes,
            frozen_memtables,
            levels,
            write_failed,
            wal_batches_refused,
            flush_errors,
            flush_failing,
            writes_refused,
            compaction_errors,
            write_stalls,
            write_stall_micros,
            flushes,
            flush_micros,
            rows_folded,
            folds_rejected,
            compactions,
            compaction_micros,
            compaction_bytes_written,
            expired_files_dropped,
            expired_bytes_dropped,
            expired_rows_dropped,
            cache_hits,
            cache_misses,
            cache_bytes,
            wal_bytes,
            wal_syncs,
            wal_queue_bytes,
            batches_written,
            object,
        } = t.db.stats();
        all.memtable_bytes += memtable_bytes;
        all.frozen_memtables += frozen_memtables;
        if all.levels.len() < levels.len() {
            all.levels.resize(levels.len(), LevelStats::default());
        }
        for (sum, l) in all.levels.iter_mut().zip(levels) {
            sum.files += l.files;
            sum.bytes += l.bytes;
        }
        all.write_failed |= write_failed;
        all.wal_batches_refused += wal_batches_refused;
        all.flush_errors += flush_errors;
        all.flush_failing |= flush_failing;
        all.writes_refused += writes_refused;
        all.compaction_errors += compaction_errors;
        all.write_stalls += write_stalls;
        all.write_stall_micros += write_stall_micros;
        all.flushes += flushes;
        all.flush_micros += flush_micros;
        all.rows_folded += rows_folded;
        all.folds_rejected += folds_rejected;
        all.compactions += compactions;
        all.compaction_micros += compaction_micros;
        all.compaction_bytes_written += compaction_bytes_written;
        all.expired_files_dropped += expired_files_dropped;
        all.expired_bytes_dropped += expired_bytes_dropped;
        all.expired_rows_dropped += expired_rows_dropped;
        all.cache_hits += cache_hits;
        all.cache_misses += cache_misses;
        all.cache_bytes = all.cache_bytes.max(cache_bytes);
        all.wal_bytes += wal_bytes;
        all.wal_syncs += wal_syncs;
        all.wal_queue_bytes += wal_queue_bytes;
        all.batches_written += batches_written;
        let ObjectStats {
            gets,
            puts,
            heads,
            lists,
            deletes,
            bytes_read,
            bytes_written,
            disk_cache_hits,
            disk_cache_misses,
            disk_cache_bytes,
            manifest_version,
            epoch,
            fenced,
        } = object;
        let o = &mut all.object;
        o.gets += gets;
        o.puts += puts;
        o.heads += heads;
        o.lists += lists;
        o.deletes += deletes;
        o.bytes_read += bytes_read;
        o.bytes_written += bytes_written;
        o.disk_cache_hits += disk_cache_hits;
        o.disk_cache_misses += disk_cache_misses;
        // Each tree's share of the one bound: they add up.
        o.disk_cache_bytes += disk_cache_bytes;
        o.manifest_version = o.manifest_version.max(manifest_version);
        o.epoch = o.epoch.max(epoch);
        o.fenced |= fenced;
    }
    all
}

impl Tsdb {
    /// Opens a read replica of the partitioned writers of one object-store prefix: every tree
    /// `source` names, each read as [`Tsdb::open_read_only`] reads one, answering queries over
    /// the union. [`Tsdb::refresh`] follows every writer and opens the trees of new ones.
    /// `dir` holds only local state. A prefix none of whose trees holds a database yet is an
    /// error for which [`crate::is_no_database_yet`] is true.
    pub fn open_read_only_trees(
        dir: impl AsRef<Path>,
        opts: TsdbOptions,
        source: Arc<dyn TreeSource>,
    ) -> Result<Tsdb> {
        let trees = Trees::open(source, dir.as_ref(), &opts)?;
        let first = trees.set.read().trees.first().map(|t| t.db.clone());
        let Some(db) = first else {
            return Err(no_database_yet());
        };
        let replica = Replica::default();
        replica.mark_ok(opts.clock.now_ms());
        Tsdb::on_db_trees(db, opts, Some(replica), Some(trees))
    }
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;
    use roaring::RoaringBitmap;
    use strata_engine::ObjectStorage;

    use super::*;
    use crate::error::Error;
    use crate::fetch::Plan;
    use crate::point::PointRef;
    use crate::read::ReadRequest;
    use crate::tsdb::tests::SharedNames;
    use crate::value::Value;

    /// Trees `p/<name>` of an in-memory store, with owners the test sets.
    #[derive(Debug)]
    struct Fixed {
        store: Arc<InMemory>,
        owners: parking_lot::Mutex<Vec<Option<String>>>,
        cache: PathBuf,
    }

    impl TreeSource for Fixed {
        fn owners(&self) -> Result<Vec<Option<String>>> {
            Ok(self.owners.lock().clone())
        }

        fn storage(&self, tree: &str) -> Result<Storage> {
            Ok(Storage::Object(ObjectStorage::new(
                self.store.clone(),
                format!("p/{tree}"),
                self.cache.join(tree),
                1 << 30,
            )))
        }
    }

    fn tempdir() -> Result<tempfile::TempDir> {
        tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))
    }

    /// Point `(T0 + 10 k, i)` of host `h<i>` for 16 hosts; each writer stores its own.
    fn put_all(w: &Tsdb, k: i64) -> usize {
        let hosts: Vec<String> = (0..16).map(|i| format!("h{i}")).collect();
        let tags: Vec<[(&str, &str); 1]> = hosts.iter().map(|h| [("host", h.as_str())]).collect();
        let points: Vec<PointRef<'_, &str>> = (0..16)
            .map(|i| PointRef {
                metric: "m",
                tags: &tags[i],
                timestamp: 1_700_000_000 + 10 * k,
                value: Value::Int(i as i64),
            })
            .collect();
        w.write(&points).iter().filter(|r| r.is_ok()).count()
    }

    /// Every series' host number and points, read with `plan`.
    fn read_all(r: &Tsdb, ids: &RoaringBitmap, plan: Plan) -> Result<Vec<(i64, Vec<i64>)>> {
        let req = ReadRequest::ids(ids, 0, 2_000_000_000_000);
        let mut out = Vec::new();
        for s in r.read_planned(&req, plan)? {
            let host: i64 = s.tags[0].1.trim_start_matches('h').parse().unwrap_or(-1);
            let ts = s.points.iter().map(|p| p.0 / 1000).collect();
            out.push((host, ts));
        }
        out.sort_unstable();
        Ok(out)
    }

    #[test]
    fn a_replica_reads_every_tree_and_finds_new_ones() -> Result<()> {
        let store = Arc::new(InMemory::new());
        let shared: Arc<dyn crate::UidAllocator> = Arc::new(SharedNames::default());
        let dirs = [tempdir()?, tempdir()?, tempdir()?, tempdir()?];
        let writer = |i: usize, tree: &str, owned| {
            let mut opts = TsdbOptions {
                uid_allocator: Some(shared.clone()),
                owned_salts: Some(owned),
                salt_buckets: Some(4),
                ..TsdbOptions::default()
            };
            opts.db.storage = Storage::Object(ObjectStorage::new(
                store.clone(),
                format!("p/{tree}"),
                dirs[i].path().join("cache"),
                1 << 30,
            ));
            Tsdb::open(dirs[i].path(), opts)
        };
        let a = writer(0, "a", (0, 1))?;
        let b = writer(1, "b", (2, 3))?;
        let on_a = put_all(&a, 0);
        assert_eq!(on_a + put_all(&b, 0), 16);
        assert!(on_a > 0 && on_a < 16);
        a.flush()?;
        b.flush()?;
        let source = Arc::new(Fixed {
            store: store.clone(),
            owners: parking_lot::Mutex::new(vec![Some("a".into()), Some("a".into()), None, None]),
            cache: dirs[2].path().to_path_buf(),
        });
        let r = Tsdb::open_read_only_trees(dirs[3].path(), TsdbOptions::default(), source.clone())?;
        assert_eq!(r.series_count(), on_a);

        // b's claims appear: its tree is found at refresh, its series renumbered after a's.
        *source.owners.lock() = vec![
            Some("a".into()),
            Some("a".into()),
            Some("b".into()),
            Some("b".into()),
        ];
        assert!(r.refresh()?);
        assert_eq!(r.series_count(), 16);
        let ids: RoaringBitmap = (0..16).collect();
        let want = |k: i64| -> Vec<(i64, Vec<i64>)> {
            (0..16)
                .map(|i| (i, (0..k).map(|j| 1_700_000_000 + 10 * j).collect()))
                .collect()
        };
        assert_eq!(read_all(&r, &ids, Plan::Scans)?, want(1));
        for id in 0..16 {
            let one: RoaringBitmap = [id].into_iter().collect();
            let got = read_all(&r, &one, Plan::Gets)?;
            assert_eq!(got.len(), 1, "series {id}");
        }
        assert_eq!(r.suggest(crate::UidKind::Tagv, "h", 100).len(), 16);

        // New points on either writer show after a refresh; nothing before it.
        put_all(&a, 1);
        put_all(&b, 1);
        a.flush()?;
        b.flush()?;
        assert_eq!(read_all(&r, &ids, Plan::Scans)?, want(1));
        assert!(r.refresh()?);
        assert_eq!(read_all(&r, &ids, Plan::Scans)?, want(2));
        assert!(!r.refresh()?);

        // The engine figures are every tree's: files add up.
        let files = |s: EngineStats| s.levels.iter().map(|l| l.files).sum::<u64>();
        assert_eq!(
            files(r.engine_stats()),
            files(a.engine_stats()) + files(b.engine_stats())
        );

        // Annotations posted to either writer are read from every tree; one posted to both
        // (the same start time) is read once.
        let note = |start_time: i64, description: &str| crate::Annotation {
            start_time,
            description: description.into(),
            ..crate::Annotation::default()
        };
        assert!(!r.has_annotations());
        a.put_annotation(&note(100, "on a"))?;
        b.put_annotation(&note(200, "on b"))?;
        a.put_annotation(&note(300, "on both"))?;
        b.put_annotation(&note(300, "on both"))?;
        a.flush()?;
        b.flush()?;
        assert!(r.refresh()?);
        assert!(r.has_annotations());
        let described = |v: Vec<crate::Annotation>| -> Vec<String> {
            v.into_iter().map(|a| a.description).collect()
        };
        assert_eq!(
            described(r.annotations(None, 0, i64::MAX)?),
            ["on a", "on b", "on both"]
        );
        assert_eq!(described(r.all_annotations()?).len(), 3);
        let got = r.get_annotation(None, 200)?.map(|a| a.description);
        assert_eq!(got.as_deref(), Some("on b"));
        Ok(())
    }
}
