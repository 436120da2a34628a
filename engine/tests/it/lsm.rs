//! The LSM behaviour of the database: flushes bound memory and the WAL, data survives in SST
//! files across reopens, and damaged SST files are reported, never read as wrong data.

use std::path::{Path, PathBuf};

use strata_engine::{Db, DbOptions, Error, ScanOptions, SyncPolicy, TableOptions, WriteBatch};

use crate::{TestResult, segments};

fn lsm_options(memtable_bytes: usize) -> DbOptions {
    DbOptions {
        sync: SyncPolicy::Interval(std::time::Duration::from_millis(20)),
        memtable_bytes,
        wal_segment_bytes: 16 << 10,
        ..DbOptions::default()
    }
}

fn sst_files(dir: &Path) -> TestResult<Vec<PathBuf>> {
    let mut v: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect();
    v.sort();
    Ok(v)
}

fn row(i: u64) -> Vec<u8> {
    format!("row{i:08}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    format!("value-{i}-{}", "x".repeat(40)).into_bytes()
}

/// A memtable of many rows with one cell each grows past its base size before it freezes, so
/// that a flush does not write each row with one cell; one of few, long rows does not.
#[test]
fn rows_of_one_cell_fill_a_larger_memtable() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), lsm_options(64 << 10))?;
    let t = db.open_table("t", TableOptions::default())?;
    for i in 0..1_000 {
        let mut b = WriteBatch::new();
        b.put(&t, &row(i), b"c", b"v");
        db.write(&b)?;
    }
    let stats = db.stats();
    assert_eq!(stats.flushes, 0, "{stats:?}");
    assert!(stats.memtable_bytes > 64 << 10, "{stats:?}");
    // The same bytes in one row freeze at the base size.
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), lsm_options(64 << 10))?;
    let t = db.open_table("t", TableOptions::default())?;
    for i in 0..20_000u64 {
        let mut b = WriteBatch::new();
        b.put(&t, b"one row", &i.to_be_bytes(), b"v");
        db.write(&b)?;
    }
    db.flush()?;
    assert!(db.stats().flushes > 2, "{:?}", db.stats());
    Ok(())
}

#[test]
fn memory_and_wal_stay_bounded() -> TestResult {
    let dir = tempfile::tempdir()?;
    let n = 60_000;
    {
        let db = Db::open(dir.path(), lsm_options(64 << 10))?;
        let t = db.open_table("t", TableOptions::default())?;
        let mut max_mem = 0;
        for i in 0..n {
            let mut b = WriteBatch::new();
            b.put(&t, &row(i), b"c", &value(i));
            db.write(&b)?;
            max_mem = max_mem.max(db.stats().memtable_bytes);
        }
        let stats = db.stats();
        assert!(stats.flushes > 2, "{stats:?}");
        assert!(stats.compactions > 0, "{stats:?}");
        // Level 0 is compacted down as it fills; writers stall at 20 files.
        assert!(stats.levels[0].files <= 20, "{stats:?}");
        // Rows of one cell each: a memtable grows to at most 16 times its base size before it
        // freezes, and one frozen memtable of that size waits for its flush at a time.
        assert!(
            max_mem <= 2 * 16 * (64 << 10) + (64 << 10),
            "memtables grew to {max_mem} bytes"
        );
        assert!(!sst_files(dir.path())?.is_empty());
        // Only the segments after the last flush remain.
        let wal: u64 = segments(dir.path())?
            .iter()
            .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
            .sum();
        assert!(wal < 1 << 20, "WAL holds {wal} bytes");
        assert_eq!(db.get(&t, &row(7), b"c")?.as_deref(), Some(&value(7)[..]));
    }
    let db = Db::open(dir.path(), lsm_options(64 << 10))?;
    let t = db.table("t").ok_or("table t is gone")?;
    assert_eq!(db.scan(&t, &ScanOptions::default())?.count() as u64, n);
    for i in (0..n).step_by(997) {
        assert_eq!(db.get(&t, &row(i), b"c")?.as_deref(), Some(&value(i)[..]));
    }
    db.compact_all()?;
    let stats = db.stats();
    assert_eq!(stats.levels.first().map_or(0, |l| l.files), 0, "{stats:?}");
    assert_eq!(sst_files(dir.path())?.len(), 1);
    let rows: Vec<_> = db
        .scan(
            &t,
            &ScanOptions {
                reverse: true,
                limit: Some(3),
                ..ScanOptions::default()
            },
        )?
        .collect::<Result<_, _>>()?;
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0].key.as_ref(), &row(n - 1)[..]);
    Ok(())
}

#[test]
fn snapshots_survive_flushes_and_compactions() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), lsm_options(1 << 20))?;
    let t = db.open_table("t", TableOptions::default())?;
    let mut b = WriteBatch::new();
    b.put(&t, b"r", b"a", b"1");
    b.put(&t, b"r", b"b", b"2");
    db.write(&b)?;
    db.flush()?;
    let before = db.snapshot();
    let mut b = WriteBatch::new();
    b.delete_row(&t, b"r");
    b.put(&t, b"r", b"c", b"3");
    db.write(&b)?;
    db.flush()?;
    db.compact_all()?;
    assert_eq!(before.get(&t, b"r", b"a")?.as_deref(), Some(&b"1"[..]));
    let old = before.get_row(&t, b"r")?.ok_or("row missing")?;
    assert_eq!(old.cells.len(), 2);
    let now = db.get_row(&t, b"r")?.ok_or("row missing")?;
    assert_eq!(now.cells.len(), 1);
    assert_eq!(now.cells[0].column.as_ref(), b"c");
    assert_eq!(db.get(&t, b"r", b"a")?, None);
    Ok(())
}

#[test]
fn a_flipped_byte_in_an_sst_is_corruption() -> TestResult {
    let dir = tempfile::tempdir()?;
    let n = 2000;
    {
        let db = Db::open(dir.path(), lsm_options(64 << 20))?;
        let t = db.open_table(
            "t",
            TableOptions {
                block_bytes: 1024,
                ..TableOptions::default()
            },
        )?;
        let mut b = WriteBatch::new();
        for i in 0..n {
            b.put(&t, &row(i), b"c", &value(i));
        }
        db.write(&b)?;
        db.flush()?;
    }
    let files = sst_files(dir.path())?;
    assert_eq!(files.len(), 1);
    let original = std::fs::read(&files[0])?;
    // Bytes spread over the data blocks (the metadata is checked at open).
    for pos in (0..original.len() - 200).step_by(original.len() / 7) {
        let mut bytes = original.clone();
        bytes[pos] ^= 0x40;
        std::fs::write(&files[0], &bytes)?;
        let db = match Db::open(dir.path(), lsm_options(64 << 20)) {
            Ok(db) => db,
            Err(Error::Corruption { .. }) => continue,
            Err(e) => return Err(format!("byte {pos}: {e}").into()),
        };
        let t = db.table("t").ok_or("table t is gone")?;
        let mut seen_error = false;
        for r in db.scan(&t, &ScanOptions::default())? {
            match r {
                Ok(r) => {
                    let i: u64 = std::str::from_utf8(&r.key[3..])?.parse()?;
                    assert_eq!(r.cells[0].value.as_ref(), &value(i)[..], "byte {pos}");
                }
                Err(Error::Corruption { .. }) => seen_error = true,
                Err(e) => return Err(format!("byte {pos}: {e}").into()),
            }
        }
        for i in 0..n {
            match db.get(&t, &row(i), b"c") {
                Ok(Some(v)) => assert_eq!(v.as_ref(), &value(i)[..], "byte {pos}"),
                Ok(None) => return Err(format!("byte {pos}: row {i} vanished").into()),
                Err(Error::Corruption { .. }) => seen_error = true,
                Err(e) => return Err(format!("byte {pos}: {e}").into()),
            }
        }
        assert!(seen_error, "flipping byte {pos} went unnoticed");
    }
    std::fs::write(&files[0], &original)?;
    let db = Db::open(dir.path(), lsm_options(64 << 20))?;
    let t = db.table("t").ok_or("table t is gone")?;
    assert_eq!(db.scan(&t, &ScanOptions::default())?.count() as u64, n);
    Ok(())
}

#[test]
fn concurrent_writers_and_readers_across_flushes() -> TestResult {
    let dir = tempfile::tempdir()?;
    let opts = DbOptions {
        sync: SyncPolicy::Interval(std::time::Duration::from_millis(5)),
        memtable_bytes: 16 << 10,
        max_frozen_memtables: 1,
        wal_segment_bytes: 8 << 10,
        ..DbOptions::default()
    };
    let (threads, per_thread) = (4u64, 400u64);
    {
        let db = Db::open(dir.path(), opts.clone())?;
        let t = db.open_table("t", TableOptions::default())?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (db, t, stop) = (db.clone(), t.clone(), stop.clone());
            std::thread::spawn(move || -> Result<u64, String> {
                let mut scans = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for r in db
                        .scan(&t, &ScanOptions::default())
                        .map_err(|e| e.to_string())?
                    {
                        let r = r.map_err(|e| e.to_string())?;
                        // Every batch writes both cells of its row: never half of them.
                        if r.cells.len() != 2 {
                            return Err(format!("row {:?} has {} cells", r.key, r.cells.len()));
                        }
                    }
                    scans += 1;
                }
                Ok(scans)
            })
        };
        let writers: Vec<_> = (0..threads)
            .map(|w| {
                let (db, t) = (db.clone(), t.clone());
                std::thread::spawn(move || -> Result<(), String> {
                    for i in 0..per_thread {
                        let mut b = WriteBatch::new();
                        let r = row(w * per_thread + i);
                        b.put(&t, &r, b"a", &value(i));
                        b.put(&t, &r, b"b", &value(w));
                        db.write(&b).map_err(|e| e.to_string())?;
                    }
                    Ok(())
                })
            })
            .collect();
        for w in writers {
            w.join().map_err(|_| "writer panicked")??;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let scans = reader.join().map_err(|_| "reader panicked")??;
        assert!(scans > 0);
        let stats = db.stats();
        assert!(stats.flushes > 0, "{stats:?}");
        assert_eq!(
            db.scan(&t, &ScanOptions::default())?.count() as u64,
            threads * per_thread
        );
    }
    let db = Db::open(dir.path(), opts)?;
    let t = db.table("t").ok_or("table t is gone")?;
    assert_eq!(
        db.scan(&t, &ScanOptions::default())?.count() as u64,
        threads * per_thread
    );
    for w in 0..threads {
        let i = per_thread - 1;
        let r = db
            .get_row(&t, &row(w * per_thread + i))?
            .ok_or("row missing")?;
        assert_eq!(r.cells[1].value.as_ref(), &value(w)[..]);
    }
    Ok(())
}

#[test]
fn compactions_move_data_through_several_levels() -> TestResult {
    let dir = tempfile::tempdir()?;
    let opts = DbOptions {
        memtable_bytes: 4 << 10,
        l0_compaction_trigger: 2,
        level_base_bytes: 8 << 10,
        level_size_ratio: 2,
        target_file_bytes: 4 << 10,
        ..lsm_options(4 << 10)
    };
    let mut model = std::collections::BTreeMap::new();
    {
        let db = Db::open(dir.path(), opts.clone())?;
        let t = db.open_table("t", TableOptions::default())?;
        for round in 0..30u64 {
            let mut b = WriteBatch::new();
            for i in 0..60u64 {
                let k = (i * 7 + round * 13) % 500;
                if (i + round) % 9 == 0 {
                    b.delete_row(&t, &row(k));
                    model.remove(&k);
                } else {
                    b.put(&t, &row(k), b"c", &value(round * 1000 + i));
                    model.insert(k, value(round * 1000 + i));
                }
            }
            db.write(&b)?;
            db.flush()?;
        }
        // Let the background compactions settle: level 0 drained and the deeper compactions
        // they trigger done (the compaction thread works through them one at a time, so
        // waiting on level 0 alone raced with the level 1 -> 2 compaction on a loaded machine).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let settled = |s: &strata_engine::EngineStats| {
            s.levels[0].files < 2 && s.levels.iter().skip(2).any(|l| l.files > 0)
        };
        while !settled(&db.stats()) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let stats = db.stats();
        // Data in level 2 took at least a level 0 -> 1 and a level 1 -> 2 compaction; how many
        // more depends on how many flushes each level-0 compaction found waiting, which
        // depends on the machine's load.
        assert!(stats.compactions >= 2, "{stats:?}");
        assert!(
            stats.levels.iter().skip(2).any(|l| l.files > 0),
            "nothing reached level 2: {stats:?}"
        );
    }
    let db = Db::open(dir.path(), opts)?;
    let t = db.table("t").ok_or("table t is gone")?;
    let rows: Vec<(Vec<u8>, Vec<u8>)> = db
        .scan(&t, &ScanOptions::default())?
        .map(|r| r.map(|r| (r.key.to_vec(), r.cells[0].value.to_vec())))
        .collect::<Result<_, _>>()?;
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (row(*k), v.clone())).collect();
    assert_eq!(rows, want);
    for k in 0..500 {
        assert_eq!(
            db.get(&t, &row(k), b"c")?.map(|v| v.to_vec()),
            model.get(&k).cloned()
        );
    }
    Ok(())
}

/// Compaction reads its inputs once and deletes them: it must not push the blocks that reads
/// use out of the block cache.
#[test]
fn compaction_does_not_evict_the_blocks_reads_use() -> TestResult {
    let dir = tempfile::tempdir()?;
    // Room for every file's index and filter, not for the bulk table's data blocks.
    let opts = DbOptions {
        block_cache_bytes: 8 << 20,
        ..lsm_options(1 << 30)
    };
    let db = Db::open(dir.path(), opts)?;
    let hot = db.open_table("hot", TableOptions::default())?;
    let bulk = db.open_table("bulk", TableOptions::default())?;
    let mut b = WriteBatch::new();
    for i in 0..200 {
        b.put(&hot, &row(i), b"c", &value(i));
    }
    db.write(&b)?;
    db.flush()?;
    let read_hot = || -> TestResult<()> {
        for i in 0..200 {
            assert_eq!(db.get(&hot, &row(i), b"c")?.as_deref(), Some(&value(i)[..]));
        }
        Ok(())
    };
    read_hot()?;
    let misses = db.stats().cache_misses;
    read_hot()?;
    assert_eq!(db.stats().cache_misses, misses, "the hot rows are cached");
    // The bulk table: level-0 files of about 1.5 MiB each, compacted in the background, far
    // more than the cache.
    let before = db.stats().compactions;
    for round in 0..8u64 {
        let mut b = WriteBatch::new();
        for i in 0..20_000 {
            b.put(&bulk, &row(i), format!("c{round}").as_bytes(), &value(i))
        }
        db.write(&b)?;
        db.flush()?;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while db.stats().compactions == before {
        assert!(std::time::Instant::now() < deadline, "no compaction ran");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Let the background work settle; compaction's own lookups count as misses too.
    let mut seen = db.stats().compactions;
    loop {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let now = db.stats().compactions;
        if now == seen {
            break;
        }
        seen = now;
    }
    let misses = db.stats().cache_misses;
    read_hot()?;
    assert_eq!(
        db.stats().cache_misses,
        misses,
        "compacting the bulk table evicted the hot table's blocks"
    );
    Ok(())
}
