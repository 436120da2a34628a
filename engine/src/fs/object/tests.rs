use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use super::*;
use crate::batch::WriteBatch;
use crate::db::Db;
use crate::manifest::FileMeta;
use crate::options::{DbOptions, Storage, TableOptions};
use crate::scan::{Row, ScanOptions};
use crate::table::Table;

fn tempdir() -> Result<tempfile::TempDir> {
    tempfile::tempdir().map_err(|e| Error::io("tempdir", e))
}

fn storage(store: &Arc<InMemory>, cache: &Path, cache_bytes: u64) -> ObjectStorage {
    let mut o = ObjectStorage::new(store.clone(), "db/one", cache, cache_bytes);
    o.delete_delay = Duration::ZERO;
    o
}

fn options(o: ObjectStorage) -> DbOptions {
    DbOptions {
        storage: Storage::Object(o),
        ..DbOptions::default()
    }
}

/// Blocks on an object-store future from a test thread.
fn block<T>(f: impl Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("test runtime")
        .block_on(f)
}

fn objects(store: &InMemory, dir: &str) -> Vec<String> {
    let listed = block(store.list_with_delimiter(Some(&ObjectPath::from(format!("db/one/{dir}")))))
        .expect("list");
    let mut names: Vec<String> = listed
        .objects
        .into_iter()
        .filter_map(|o| o.location.filename().map(str::to_owned))
        .collect();
    names.sort();
    names
}

/// A database on its own local directories, over `store`.
struct Node {
    db: Db,
    _dirs: [tempfile::TempDir; 2],
}

fn node(store: &Arc<InMemory>, follower: bool) -> Result<Node> {
    let (dir, cache) = (tempdir()?, tempdir()?);
    let opts = options(storage(store, cache.path(), 1 << 30));
    let db = if follower {
        Db::open_read_only(dir.path(), opts)?
    } else {
        Db::open(dir.path(), opts)?
    };
    Ok(Node {
        db,
        _dirs: [dir, cache],
    })
}

/// A writer with table `t` holding rows 0..10 of `value`, flushed.
fn writer_with_rows(store: &Arc<InMemory>, value: &[u8]) -> Result<(Node, Table)> {
    let n = node(store, false)?;
    let t = n.db.open_table("t", TableOptions::default())?;
    write_rows(&n.db, &t, 0..10, value)?;
    n.db.flush()?;
    Ok((n, t))
}

fn table(db: &Db, name: &str) -> Result<Table> {
    db.table(name)
        .ok_or_else(|| Error::NoSuchTable(name.into()))
}

fn write_rows(db: &Db, t: &Table, rows: std::ops::Range<u32>, value: &[u8]) -> Result<()> {
    let mut b = WriteBatch::new();
    for row in rows {
        b.put(t, &row.to_be_bytes(), b"c", value);
    }
    db.write(&b)
}

fn all_rows(db: &Db, t: &Table) -> Result<Vec<Row>> {
    db.scan(t, &ScanOptions::default())?.collect()
}

fn assert_rows(db: &Db, t: &Table, n: u32, value: &[u8]) -> Result<()> {
    let rows = all_rows(db, t)?;
    assert_eq!(rows.len(), n as usize);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row.key.as_ref(), &(i as u32).to_be_bytes());
        assert_eq!(row.cells[0].value.as_ref(), value, "row {i}");
    }
    Ok(())
}

#[test]
fn version_records_round_trip_and_every_flipped_byte_is_corruption() -> Result<()> {
    let record = VersionRecord {
        version: 42,
        epoch: 7,
        manifest: Manifest {
            next_file_id: 7 << EPOCH_FILE_SHIFT,
            last_seq: 99,
            flushed_segment: 3,
            tables: [(1, "t".to_owned())].into(),
            files: vec![FileMeta {
                table: 1,
                level: 0,
                id: 5,
                bytes: 100,
            }],
        },
    };
    let bytes = record.encode();
    assert_eq!(VersionRecord::decode(&bytes, "v")?, record);
    for i in 0..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0x10;
        assert!(
            matches!(
                VersionRecord::decode(&b, "v"),
                Err(Error::Corruption { .. })
            ),
            "byte {i}"
        );
    }
    for len in 0..bytes.len() {
        assert!(VersionRecord::decode(&bytes[..len], "v").is_err());
    }
    Ok(())
}

/// Format 1 of a manifest version, frozen: `sample_record()` must keep encoding to exactly
/// these bytes, and they must keep decoding.
const V1_FIXTURE: &str = "534d565200010000000000000000000300000000000000020000002b534d414e00010000000000178180808080404d04010101740101018080808080408020e4581d9444a4d45582a5067ecfa37b7f";

fn sample_record() -> VersionRecord {
    VersionRecord {
        version: 3,
        epoch: 2,
        manifest: Manifest {
            next_file_id: (2 << EPOCH_FILE_SHIFT) + 1,
            last_seq: 77,
            flushed_segment: 4,
            tables: [(1, "t".to_owned())].into(),
            files: vec![FileMeta {
                table: 1,
                level: 1,
                id: 2 << EPOCH_FILE_SHIFT,
                bytes: 4096,
            }],
        },
    }
}

#[test]
fn format_v1_fixture_is_reproduced_and_reads() -> Result<()> {
    assert_eq!(crate::coding::to_hex(&sample_record().encode()), V1_FIXTURE);
    let bytes = crate::coding::from_hex(V1_FIXTURE);
    assert_eq!(VersionRecord::decode(&bytes, "v")?, sample_record());
    Ok(())
}

#[test]
fn write_flush_compact_reopen_and_read_from_an_empty_cache() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let (dir, cache) = (tempdir()?, tempdir()?);
    {
        let db = Db::open(dir.path(), options(storage(&store, cache.path(), 1 << 30)))?;
        let t = db.open_table("t", TableOptions::default())?;
        write_rows(&db, &t, 0..100, b"old")?;
        db.flush()?;
        write_rows(&db, &t, 50..200, b"new")?;
        db.flush()?;
        db.compact_all()?;
        write_rows(&db, &t, 0..50, b"new")?;
        db.flush()?;
        write_rows(&db, &t, 200..300, b"new")?;
        assert_rows(&db, &t, 300, b"new")?;
        let stats = db.stats().object;
        assert!(stats.puts >= 4, "{stats:?}");
        assert_eq!(stats.epoch, 1);
        db.close()?;
    }
    // Only the manifest versions and live SSTs are in the bucket, no local manifest.
    assert!(!objects(&store, "sst").is_empty());
    assert!(!dir.path().join("MANIFEST").exists());
    {
        let db = Db::open(dir.path(), options(storage(&store, cache.path(), 1 << 30)))?;
        let t = table(&db, "t")?;
        assert_rows(&db, &t, 300, b"new")?;
        let stats = db.stats().object;
        assert_eq!(stats.epoch, 2);
        // The GETs are of manifest versions (the garbage collection reads the kept ones).
        assert_eq!(stats.disk_cache_misses, 0, "{stats:?}");
        assert!(stats.disk_cache_hits > 0);
    }
    // A new cache directory: the files come from the bucket, the unflushed rows from the WAL.
    let empty = tempdir()?;
    let db = Db::open(dir.path(), options(storage(&store, empty.path(), 1 << 30)))?;
    let t = table(&db, "t")?;
    assert_rows(&db, &t, 300, b"new")?;
    let stats = db.stats().object;
    assert!(stats.gets > 1 && stats.disk_cache_misses > 0, "{stats:?}");
    Ok(())
}

#[test]
fn a_newer_writer_fences_the_older_one() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let (a, ta) = writer_with_rows(&store, b"a")?;
    let a = &a.db;
    a.write_sync(&{
        let mut b = WriteBatch::new();
        b.put(&ta, b"synced", b"c", b"before b");
        b
    })?;

    let b = node(&store, false)?;
    let b = &b.db;
    let tb = table(b, "t")?;
    // A's synced write is in the bucket, beside the ten flushed rows.
    assert_eq!(
        b.get(&tb, b"synced", b"c")?.as_deref(),
        Some(&b"before b"[..])
    );
    assert_eq!(all_rows(b, &tb)?.len(), 11);
    assert_eq!(b.stats().object.epoch, 2);

    // A synced write on A is not acknowledged once B holds the prefix.
    let mut batch = WriteBatch::new();
    batch.put(&ta, b"synced", b"c", b"after b");
    match a.write_sync(&batch) {
        Err(Error::Fenced {
            epoch: 1,
            newer_epoch: 2,
            prefix,
        }) => assert_eq!(prefix, "db/one"),
        other => panic!("expected fencing, got {other:?}"),
    }
    assert!(matches!(
        write_rows(a, &ta, 10..20, b"a"),
        Err(Error::Fenced { .. })
    ));
    assert!(matches!(a.flush(), Err(Error::Fenced { .. })));
    assert!(a.stats().object.fenced);
    assert_eq!(
        a.get(&ta, &0u32.to_be_bytes(), b"c")?.as_deref(),
        Some(&b"a"[..]),
        "reads go on"
    );

    // B writes on, and A's files are still there for it.
    write_rows(b, &tb, 10..20, b"a")?;
    b.flush()?;
    b.compact_all()?;
    assert_eq!(all_rows(b, &tb)?.len(), 21);
    Ok(())
}

#[test]
fn a_fenced_flush_fails_and_leaves_the_newer_writers_files() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let (a, ta) = writer_with_rows(&store, b"a")?;
    let a = &a.db;
    write_rows(a, &ta, 10..20, b"unflushed")?;
    let b = node(&store, false)?;
    let b = &b.db;
    let tb = table(b, "t")?;
    write_rows(b, &tb, 0..5, b"b")?;
    b.flush()?;
    // A's flush writes its SST under its own epoch's ids, then finds B's version.
    assert!(matches!(a.flush(), Err(Error::Fenced { .. })));
    assert!(matches!(
        write_rows(a, &ta, 0..1, b"x"),
        Err(Error::Fenced { .. })
    ));
    let rows = all_rows(b, &tb)?;
    assert_eq!(rows.len(), 10);
    assert_eq!(rows[0].cells[0].value.as_ref(), b"b");
    assert_eq!(rows[9].cells[0].value.as_ref(), b"a");
    Ok(())
}

/// A writer with rows 0..10 of "one" in table `t`, and a follower of it with that table.
fn writer_and_follower(store: &Arc<InMemory>) -> Result<(Node, Table, Node, Table)> {
    let (w, tw) = writer_with_rows(store, b"one")?;
    let f = node(store, true)?;
    let tf = table(&f.db, "t")?;
    assert_rows(&f.db, &tf, 10, b"one")?;
    Ok((w, tw, f, tf))
}

#[test]
fn a_follower_sees_new_flushes_after_refresh_and_refuses_writes() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let (w, tw, f, tf) = writer_and_follower(&store)?;
    let (w, f) = (&w.db, &f.db);
    assert!(!f.refresh()?, "nothing new");

    write_rows(w, &tw, 0..20, b"two")?;
    w.flush()?;
    w.compact_all()?;
    assert_rows(f, &tf, 10, b"one")?;
    assert!(f.refresh()?);
    assert_rows(f, &tf, 20, b"two")?;
    // Tables created later show up too.
    let t2 = w.open_table("t2", TableOptions::default())?;
    write_rows(w, &t2, 0..3, b"x")?;
    w.flush()?;
    assert!(f.refresh()?);
    let t2f = table(f, "t2")?;
    assert_rows(f, &t2f, 3, b"x")?;

    assert!(matches!(
        write_rows(f, &tf, 0..1, b"x"),
        Err(Error::ReadOnly(_))
    ));
    assert!(matches!(f.flush(), Err(Error::ReadOnly(_))));
    assert!(matches!(f.compact_all(), Err(Error::ReadOnly(_))));
    assert!(matches!(
        f.open_table("new", TableOptions::default()),
        Err(Error::ReadOnly(_))
    ));
    assert_eq!(f.stats().object.epoch, 0);
    assert!(Db::open_read_only(tempdir()?.path(), DbOptions::default()).is_err());
    Ok(())
}

/// A refresh that cannot fetch a new file changes nothing, and the next one takes that version
/// again.
#[test]
fn a_follower_refresh_that_fails_is_tried_again() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let (w, tw, f, tf) = writer_and_follower(&store)?;
    let (w, f) = (&w.db, &f.db);
    let before = objects(&store, "sst");
    write_rows(w, &tw, 0..20, b"two")?;
    w.flush()?;
    let new: Vec<String> = objects(&store, "sst")
        .into_iter()
        .filter(|n| !before.contains(n))
        .collect();
    assert_eq!(new.len(), 1, "{new:?}");
    let key = ObjectPath::from(format!("db/one/sst/{}", new[0]));
    let bytes = block(async { store.get(&key).await?.bytes().await })
        .map_err(|e| Error::io("get", std::io::Error::other(e)))?;
    block(store.delete(&key)).map_err(|e| Error::io("delete", std::io::Error::other(e)))?;
    let version = f.stats().object.manifest_version;
    assert!(f.refresh().is_err());
    assert_eq!(f.stats().object.manifest_version, version);
    assert_rows(f, &tf, 10, b"one")?;
    block(store.put(&key, PutPayload::from(bytes)))
        .map_err(|e| Error::io("put", std::io::Error::other(e)))?;
    assert!(f.refresh()?);
    assert!(f.stats().object.manifest_version > version);
    assert_rows(f, &tf, 20, b"two")?;
    Ok(())
}

#[test]
fn open_deletes_old_unreferenced_sst_objects_only() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let (dir, cache) = (tempdir()?, tempdir()?);
    let orphan = ObjectPath::from("db/one/sst/00000000000000aa.sst");
    {
        let db = Db::open(dir.path(), options(storage(&store, cache.path(), 1 << 30)))?;
        let t = db.open_table("t", TableOptions::default())?;
        write_rows(&db, &t, 0..10, b"v")?;
        db.flush()?;
        block(store.put(&orphan, PutPayload::from_static(b"left by a crashed flush")))
            .map_err(|e| store_error("put".into(), e))?;
    }
    let live = objects(&store, "sst");
    assert_eq!(live.len(), 2);
    // Within the grace period the orphan may be another writer's upload in flight.
    drop(Db::open(
        dir.path(),
        options(storage(&store, cache.path(), 1 << 30)),
    )?);
    assert_eq!(objects(&store, "sst"), live);
    let mut o = storage(&store, cache.path(), 1 << 30);
    o.orphan_grace = Duration::ZERO;
    let db = Db::open(dir.path(), options(o))?;
    let referenced: Vec<String> = live
        .iter()
        .filter(|n| *n != "00000000000000aa.sst")
        .cloned()
        .collect();
    assert_eq!(referenced.len(), 1);
    assert_eq!(objects(&store, "sst"), referenced);
    let t = table(&db, "t")?;
    assert_rows(&db, &t, 10, b"v")?;
    Ok(())
}

/// A flush cut short between its SST upload and its manifest version (here the writer was
/// fenced in between, and dropped before its delayed delete ran, as a crash would) leaves an
/// SST object that no version names. A writer's open deletes it once it is older than the
/// grace period, and not before; the data every version names stays.
#[test]
fn the_sst_of_a_flush_that_never_reached_a_manifest_version_is_collected() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let (a, t) = writer_with_rows(&store, b"v")?;
    let b = node(&store, false)?;
    write_rows(&a.db, &t, 10..20, b"lost")?;
    assert!(matches!(a.db.flush(), Err(Error::Fenced { .. })));
    drop(a);
    drop(b);
    assert_eq!(objects(&store, "sst").len(), 2, "the orphan was uploaded");
    drop(node(&store, false)?);
    assert_eq!(
        objects(&store, "sst").len(),
        2,
        "kept within the grace period"
    );
    let (dir, cache) = (tempdir()?, tempdir()?);
    let mut o = storage(&store, cache.path(), 1 << 30);
    o.orphan_grace = Duration::ZERO;
    let db = Db::open(dir.path(), options(o))?;
    assert_eq!(
        objects(&store, "sst").len(),
        1,
        "collected past the grace period"
    );
    assert_rows(&db, &table(&db, "t")?, 10, b"v")?;
    Ok(())
}

#[test]
fn old_manifest_versions_are_deleted_keeping_the_newest() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let (dir, cache) = (tempdir()?, tempdir()?);
    let mut o = storage(&store, cache.path(), 1 << 30);
    o.manifest_versions_kept = 3;
    let db = Db::open(dir.path(), options(o))?;
    let t = db.open_table("t", TableOptions::default())?;
    for i in 0..6 {
        write_rows(&db, &t, i..i + 1, b"v")?;
        db.flush()?;
    }
    // Versions 1 (the claim) to 7; the newest three, and the one whose deletion waits for
    // the next store, are left.
    let versions = objects(&store, "manifest");
    assert!(versions.len() <= 4, "{versions:?}");
    assert_eq!(
        versions.last().map(String::as_str),
        Some("00000000000000000007")
    );
    Ok(())
}

/// Table `t` of `db`, its blocks uncompressed so that file sizes follow the rows written.
fn uncompressed_table(db: &Db) -> Result<Table> {
    db.open_table(
        "t",
        TableOptions {
            compression: crate::options::Compression::None,
            ..TableOptions::default()
        },
    )
}

/// Bytes of the SST files in the disk cache directory `dir`.
fn sst_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io("ls", e))? {
        let entry = entry.map_err(|e| Error::io("ls", e))?;
        // A compaction's output spooling meanwhile is not in the cache yet.
        if entry.file_name().to_string_lossy().ends_with(".sst") {
            total += entry.metadata().map_err(|e| Error::io("stat", e))?.len();
        }
    }
    Ok(total)
}

#[test]
fn the_disk_cache_stays_within_its_bound() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let (dir, cache) = (tempdir()?, tempdir()?);
    let bound = 64 << 10;
    let db = Db::open(dir.path(), options(storage(&store, cache.path(), bound)))?;
    let t = uncompressed_table(&db)?;
    let value = vec![7u8; 1000];
    for round in 0..8u32 {
        write_rows(&db, &t, round * 20..(round + 1) * 20, &value)?;
        db.flush()?;
    }
    let on_disk = || sst_bytes(cache.path());
    let listing = || {
        std::fs::read_dir(cache.path())
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| (e.file_name(), e.metadata().map(|m| m.len()).unwrap_or(0)))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    assert!(
        on_disk()? <= bound,
        "{} > {bound}: {:?}",
        on_disk()?,
        listing()
    );
    db.clear_block_cache();
    assert_rows(&db, &t, 160, &value)?;
    let stats = db.stats().object;
    assert!(stats.disk_cache_bytes <= bound);
    assert!(on_disk()? <= bound);
    assert!(
        stats.disk_cache_misses > 0 && stats.disk_cache_hits > 0,
        "{stats:?}"
    );
    Ok(())
}

#[test]
fn large_ssts_go_up_in_multipart_uploads() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let (dir, cache) = (tempdir()?, tempdir()?);
    let mut o = storage(&store, cache.path(), 1 << 30);
    o.multipart_threshold = 1 << 10;
    let db = Db::open(dir.path(), options(o))?;
    let t = uncompressed_table(&db)?;
    let value = vec![1u8; 10_000];
    write_rows(&db, &t, 0..1000, &value)?;
    db.flush()?;
    let stats = db.stats().object;
    // 10 MB: create, two parts, complete, plus the manifest versions.
    assert!(stats.puts >= 6, "{stats:?}");
    drop(db);
    let empty = tempdir()?;
    let db = Db::open(dir.path(), options(storage(&store, empty.path(), 1 << 30)))?;
    assert_rows(&db, &t, 1000, &value)?;
    Ok(())
}

#[test]
fn a_database_opens_works_and_drops_inside_a_tokio_runtime() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .map_err(|e| Error::io("runtime", e))?;
    // The server calls the engine from its worker threads, and may drop it there.
    rt.block_on(async {
        let n = node(&store, false)?;
        let t = n.db.open_table("t", TableOptions::default())?;
        write_rows(&n.db, &t, 0..10, b"v")?;
        n.db.write_sync(&WriteBatch::new())?;
        n.db.flush()?;
        assert_rows(&n.db, &t, 10, b"v")?;
        drop(n);
        Ok::<(), Error>(())
    })?;
    let n = node(&store, false)?;
    assert_rows(&n.db, &table(&n.db, "t")?, 10, b"v")
}

#[test]
fn synced_writes_check_the_manifest_head() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let (n, t) = writer_with_rows(&store, b"v")?;
    let before = n.db.stats().object.heads;
    let mut b = WriteBatch::new();
    b.put(&t, b"r", b"c", b"v");
    n.db.write_sync(&b)?;
    n.db.write(&b)?;
    let after = n.db.stats().object.heads;
    assert_eq!(
        after,
        before + 1,
        "one HEAD for the synced write, none for the other"
    );
    Ok(())
}

/// A writer's data and cache directories, to open it on again and again.
struct WriterDirs([tempfile::TempDir; 2]);

impl WriterDirs {
    fn new() -> Result<WriterDirs> {
        Ok(WriterDirs([tempdir()?, tempdir()?]))
    }

    fn open(&self, store: &Arc<InMemory>) -> Result<Db> {
        let [dir, cache] = &self.0;
        Db::open(dir.path(), options(storage(store, cache.path(), 1 << 30)))
    }
}

/// Writes rows `0..10` of table `t` as `a`, flushes, writes them again as `unflushed` and
/// closes `db`: the second rows are only in its WAL.
fn leave_unflushed_rows(db: Db) -> Result<()> {
    let t = db.open_table("t", TableOptions::default())?;
    write_rows(&db, &t, 0..10, b"a")?;
    db.flush()?;
    write_rows(&db, &t, 0..10, b"unflushed")?;
    db.close()
}

#[test]
fn a_writer_whose_wal_was_superseded_does_not_replay_it() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let dirs = WriterDirs::new()?;
    let open_a = || dirs.open(&store);
    leave_unflushed_rows(open_a()?)?;
    // A restart of the last writer replays its WAL.
    {
        let a = open_a()?;
        assert_rows(&a, &table(&a, "t")?, 10, b"unflushed")?;
    }
    // A newer writer that writes takes the prefix over: a's WAL is no longer a's to replay.
    let b = node(&store, false)?;
    let tb = table(&b.db, "t")?;
    assert_rows(&b.db, &tb, 10, b"a")?;
    write_rows(&b.db, &tb, 20..21, b"b")?;
    b.db.flush()?;
    match open_a() {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("epoch 3"), "{msg}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(decode_epoch(&encode_epoch(7))?, 7);
    let mut bad = encode_epoch(7);
    bad[9] ^= 1;
    assert!(matches!(decode_epoch(&bad), Err(Error::Corruption { .. })));
    Ok(())
}

/// A newer epoch that only claimed the prefix (a writer that opened and wrote nothing, or
/// this writer's own claim cut short by a crash before it recorded the epoch locally) leaves
/// the manifest's WAL position as it was: the writer's WAL is still its own to replay.
#[test]
fn a_wal_survives_later_claims_that_wrote_nothing() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let dirs = WriterDirs::new()?;
    let open_a = || dirs.open(&store);
    leave_unflushed_rows(open_a()?)?;
    for _ in 0..2 {
        drop(node(&store, false)?);
    }
    let a = open_a()?;
    assert_rows(&a, &table(&a, "t")?, 10, b"unflushed")?;
    Ok(())
}

#[test]
fn synced_writes_racing_this_writers_flushes_are_not_fenced() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let (n, t) = writer_with_rows(&store, b"v")?;
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..4u32)
            .map(|w| {
                let (db, t) = (&n.db, &t);
                s.spawn(move || -> Result<()> {
                    for i in 0..50u32 {
                        let mut b = WriteBatch::new();
                        b.put(t, &(w * 1000 + i).to_be_bytes(), b"c", b"s");
                        db.write_sync(&b)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for _ in 0..20 {
            n.db.flush()?;
        }
        for w in writers {
            w.join()
                .map_err(|_| Error::Closed("writer panicked".into()))??;
        }
        Ok::<(), Error>(())
    })?;
    assert!(!n.db.stats().object.fenced);
    Ok(())
}

#[test]
fn a_synced_write_is_in_the_bucket_when_it_returns() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let w = node(&store, false)?;
    let t = w.db.open_table("t", TableOptions::default())?;
    // A plain write stays in the writer's WAL and memtable until a flush.
    write_rows(&w.db, &t, 0..5, b"plain")?;
    let before = node(&store, true)?;
    let seen = match before.db.table("t") {
        Some(tf) => all_rows(&before.db, &tf)?.len(),
        None => 0,
    };
    assert_eq!(seen, 0);

    let mut b = WriteBatch::new();
    b.put(&t, &9u32.to_be_bytes(), b"c", b"synced");
    w.db.write_sync(&b)?;
    // No flush was asked for, and the writer is not closed: the bucket alone has the batch,
    // and the earlier plain writes with it.
    let fresh = node(&store, true)?;
    let rows = all_rows(&fresh.db, &table(&fresh.db, "t")?)?;
    assert_eq!(rows.len(), 6);
    assert_eq!(rows[5].cells[0].value.as_ref(), b"synced");

    // A second synced write with nothing new in between flushes only its own batch.
    let flushes = w.db.stats().flushes;
    w.db.write_sync(&b)?;
    assert_eq!(w.db.stats().flushes, flushes + 1);
    Ok(())
}

#[test]
fn databases_sharing_cache_bounds_stay_within_them_together() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let bound = 64 << 10;
    let (disk, blocks) = (
        crate::SharedDiskCache::new(bound),
        crate::SharedBlockCache::new(1 << 20),
    );
    let mut dbs = Vec::new();
    for prefix in ["db/a", "db/b"] {
        let (dir, cache) = (tempdir()?, tempdir()?);
        let mut o = ObjectStorage::new(store.clone(), prefix, cache.path(), 1 << 30);
        o.shared_disk_cache = Some(disk.clone());
        let opts = DbOptions {
            shared_block_cache: Some(blocks.clone()),
            ..options(o)
        };
        let db = Db::open(dir.path(), opts)?;
        let t = uncompressed_table(&db)?;
        dbs.push((db, t, [dir, cache]));
    }
    for round in 0..8u32 {
        for (i, (db, t, _)) in dbs.iter().enumerate() {
            let v = vec![i as u8; 1000];
            write_rows(db, t, round * 20..(round + 1) * 20, &v)?;
            db.flush()?;
        }
    }
    let cached = |dbs: &[(Db, Table, [tempfile::TempDir; 2])]| -> Result<(u64, u64)> {
        let mut files = 0;
        let mut counted = 0;
        for (db, _, dirs) in dbs {
            files += sst_bytes(dirs[1].path())?;
            counted += db.stats().object.disk_cache_bytes;
        }
        Ok((files, counted))
    };
    let (files, counted) = cached(&dbs)?;
    assert!(
        files <= bound && counted <= bound,
        "{files} {counted} > {bound}"
    );
    // Both read back their own rows, not the other's (same file numbers, one block cache).
    for (i, (db, t, _)) in dbs.iter().enumerate() {
        assert_rows(db, t, 160, &vec![i as u8; 1000])?;
    }
    let (files, counted) = cached(&dbs)?;
    assert!(
        files <= bound && counted <= bound,
        "{files} {counted} > {bound}"
    );
    assert!(counted > 0);
    Ok(())
}

/// A store error's causes reach the engine's message, each once.
#[test]
fn a_store_errors_message_names_its_causes() {
    #[derive(Debug, thiserror::Error)]
    #[error("error sending request")]
    struct Sending(#[source] io::Error);
    let reset = io::Error::new(ErrorKind::ConnectionReset, "connection reset by peer");
    let e = object_store::Error::Generic {
        store: "S3",
        source: Box::new(Sending(reset)),
    };
    let message = store_error("listing db/manifest".into(), e).to_string();
    assert_eq!(
        message,
        "I/O error while listing db/manifest: Generic S3 error: error sending request: \
         connection reset by peer"
    );
}
