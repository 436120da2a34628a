//! Injected file faults (`Faults`, the `testing` feature): a failed WAL fsync or write fails
//! the WAL until a restart, a full disk refuses WAL appends and holds flushes and compactions
//! back until it has space again, and none of it leaves a file that the next open cannot read.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use strata_engine::{
    Db, DbOptions, ErrorKind, Fault, FaultError, FaultFile, FaultOp, Faults, SyncPolicy, Table,
    TableOptions, WriteBatch,
};

use crate::TestResult;

fn open(dir: &Path, faults: &Faults, tune: impl FnOnce(DbOptions) -> DbOptions) -> TestResult<Db> {
    let opts = DbOptions {
        sync: SyncPolicy::Always,
        faults: faults.clone(),
        ..DbOptions::default()
    };
    Ok(Db::open(dir, tune(opts))?)
}

fn put(db: &Db, t: &Table, row: u32, value: &[u8]) -> strata_engine::Result<()> {
    let mut b = WriteBatch::new();
    b.put(t, &row.to_be_bytes(), b"c", value);
    db.write(&b)
}

fn get(db: &Db, t: &Table, row: u32) -> strata_engine::Result<Option<Vec<u8>>> {
    Ok(db.get(t, &row.to_be_bytes(), b"c")?.map(|v| v.to_vec()))
}

/// Polls `cond` for up to 60 s (a background retry waits up to 10 s between tries).
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) -> TestResult {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}").into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// The SST files in `dir`.
fn sst_files(dir: &Path) -> TestResult<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir(dir)? {
        let name = e?.file_name().to_string_lossy().into_owned();
        if name.ends_with(".sst") {
            out.insert(name);
        }
    }
    Ok(out)
}

/// The number of SST files the database has live.
fn live_files(db: &Db) -> u64 {
    db.stats().levels.iter().map(|l| l.files).sum()
}

/// PostgreSQL's "fsyncgate": the background fsync fails and the kernel drops the unsynced
/// bytes; a later fsync must not report them durable. Before the fix the failed fsync only
/// marked the WAL dirty again, and `sync_wal` then succeeded.
#[test]
fn a_failed_background_fsync_is_never_reported_durable_later() -> TestResult {
    let dir = tempfile::tempdir()?;
    let faults = Faults::new();
    let db = open(dir.path(), &faults, |o| DbOptions {
        sync: SyncPolicy::Interval(Duration::from_millis(2)),
        ..o
    })?;
    let t = db.open_table("t", TableOptions::default())?;
    faults.arm(Fault::new(FaultOp::Sync, FaultError::Io).on(FaultFile::Wal));
    put(&db, &t, 1, b"lost")?;
    wait_for("the background fsync to fail", || faults.fired() == 1)?;

    let e = db
        .sync_wal()
        .err()
        .ok_or("sync_wal reported lost bytes durable")?;
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    assert!(matches!(e, strata_engine::Error::WalFailed(_)), "{e}");
    let e = put(&db, &t, 2, b"refused")
        .err()
        .ok_or("a write after the failure")?;
    assert_eq!(e.kind(), ErrorKind::Unavailable);
    assert!(e.to_string().contains("restart"), "{e}");
    assert!(db.stats().write_failed);
    // Reads go on, from memory.
    assert_eq!(get(&db, &t, 1)?.as_deref(), Some(&b"lost"[..]));
    assert!(db.flush().is_err(), "a flush needs a new WAL segment");
    drop(db);

    // A restart recovers from what is on disk and writes again.
    let db = open(dir.path(), &Faults::default(), |o| o)?;
    let t = db.open_table("t", TableOptions::default())?;
    assert!(!db.stats().write_failed);
    assert_eq!(get(&db, &t, 1)?, None, "the dropped bytes are gone");
    put(&db, &t, 3, b"after")?;
    drop(db);
    let db = open(dir.path(), &Faults::default(), |o| o)?;
    let t = db.open_table("t", TableOptions::default())?;
    assert_eq!(get(&db, &t, 3)?.as_deref(), Some(&b"after"[..]));
    Ok(())
}

#[test]
fn a_failed_synced_write_fails_the_wal_until_a_restart() -> TestResult {
    let dir = tempfile::tempdir()?;
    let faults = Faults::new();
    let db = open(dir.path(), &faults, |o| o)?;
    let t = db.open_table("t", TableOptions::default())?;
    put(&db, &t, 1, b"kept")?;
    faults.arm(Fault::new(FaultOp::Sync, FaultError::Io).on(FaultFile::Wal));
    assert!(put(&db, &t, 2, b"failed").is_err());
    faults.clear();
    // The disk works again, but the WAL's state on it is unknown: still refused.
    let e = put(&db, &t, 3, b"refused")
        .err()
        .ok_or("a write after the failure")?;
    assert!(matches!(e, strata_engine::Error::WalFailed(_)), "{e}");
    assert_eq!(get(&db, &t, 1)?.as_deref(), Some(&b"kept"[..]));
    assert!(db.close().is_err());

    let db = open(dir.path(), &Faults::default(), |o| o)?;
    let t = db.open_table("t", TableOptions::default())?;
    assert_eq!(get(&db, &t, 1)?.as_deref(), Some(&b"kept"[..]));
    assert_eq!(
        get(&db, &t, 2)?,
        None,
        "its fsync failed and took the bytes"
    );
    put(&db, &t, 4, b"again")?;
    Ok(())
}

/// An EIO write (torn, even) fails the WAL; the torn record is cut off at the next open.
#[test]
fn a_torn_wal_write_fails_the_wal_and_the_reopen_drops_the_tear() -> TestResult {
    let dir = tempfile::tempdir()?;
    let faults = Faults::new();
    let db = open(dir.path(), &faults, |o| o)?;
    let t = db.open_table("t", TableOptions::default())?;
    put(&db, &t, 1, b"kept")?;
    faults.arm(
        Fault::new(FaultOp::Write, FaultError::Io)
            .on(FaultFile::Wal)
            .torn(),
    );
    assert!(put(&db, &t, 2, &[7; 100]).is_err());
    assert!(db.stats().write_failed);
    drop(db);
    let db = open(dir.path(), &Faults::default(), |o| o)?;
    let t = db.open_table("t", TableOptions::default())?;
    assert_eq!(get(&db, &t, 1)?.as_deref(), Some(&b"kept"[..]));
    assert_eq!(get(&db, &t, 2)?, None);
    Ok(())
}

/// A full disk refuses the batches it cannot append, without failing the WAL: once there is
/// space again writes go on, and nothing acknowledged is lost.
#[test]
fn a_full_disk_refuses_wal_appends_until_it_has_space() -> TestResult {
    let dir = tempfile::tempdir()?;
    let faults = Faults::new();
    // Small segments: the full disk also hits the creation of the next one.
    let db = open(dir.path(), &faults, |o| DbOptions {
        wal_segment_bytes: 300,
        ..o
    })?;
    let t = db.open_table("t", TableOptions::default())?;
    put(&db, &t, 0, b"before")?;
    for op in [FaultOp::Write, FaultOp::Create] {
        faults.arm(
            Fault::new(op, FaultError::NoSpace)
                .on(FaultFile::Wal)
                .torn()
                .sticky(),
        );
    }
    for row in 1..20 {
        let e = put(&db, &t, row, &[row as u8; 40])
            .err()
            .ok_or("a write to a full disk")?;
        assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
        assert!(e.to_string().contains("No space left"), "{e}");
    }
    let s = db.stats();
    assert!(!s.write_failed);
    assert_eq!(s.wal_batches_refused, 19);
    faults.clear();
    for row in 20..40 {
        put(&db, &t, row, &[row as u8; 40])?;
    }
    drop(db);
    let db = open(dir.path(), &Faults::default(), |o| o)?;
    let t = db.open_table("t", TableOptions::default())?;
    assert_eq!(get(&db, &t, 0)?.as_deref(), Some(&b"before"[..]));
    for row in 1..20 {
        assert_eq!(get(&db, &t, row)?, None, "refused row {row}");
    }
    for row in 20..40 {
        assert_eq!(get(&db, &t, row)?, Some(vec![row as u8; 40]), "row {row}");
    }
    Ok(())
}

/// A database with 2 KiB memtables, two of which may wait for a flush, and a full disk for
/// SST files until the faults are cleared.
fn small_memtables_full_disk(dir: &Path) -> TestResult<(Db, Faults, Table)> {
    let faults = Faults::new();
    let db = open(dir, &faults, |o| DbOptions {
        sync: SyncPolicy::Interval(Duration::from_millis(50)),
        memtable_bytes: 2 << 10,
        max_frozen_memtables: 2,
        l0_compaction_trigger: 100,
        ..o
    })?;
    let t = db.open_table("t", TableOptions::default())?;
    faults.arm(
        Fault::new(FaultOp::Write, FaultError::NoSpace)
            .on(FaultFile::Sst)
            .torn()
            .sticky(),
    );
    Ok((db, faults, t))
}

/// A flush that meets a full disk leaves no SST behind and is retried in the background
/// until the disk has space; writers wait meanwhile rather than fill memory.
#[test]
fn a_full_disk_holds_flushes_back_until_it_has_space() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (db, faults, t) = small_memtables_full_disk(dir.path())?;
    // A writer fills memtables until it stalls on the frozen ones.
    let writer = {
        let (db, t) = (db.clone(), t.clone());
        std::thread::spawn(move || -> strata_engine::Result<()> {
            for row in 0..400u32 {
                put(&db, &t, row, &[1; 50])?;
            }
            Ok(())
        })
    };
    wait_for("stalled writes and failed flushes", || {
        let s = db.stats();
        s.flush_errors >= 2 && s.frozen_memtables == 2 && s.write_stalls > 0
    })?;
    assert_eq!(db.stats().flushes, 0);
    // Between two tries no file is there: a failed flush leaves none behind.
    wait_for("no SST file", || {
        sst_files(dir.path()).is_ok_and(|f| f.is_empty())
    })?;
    faults.clear();
    writer.join().map_err(|_| "writer panicked")??;
    wait_for("the flushes to catch up", || {
        db.stats().frozen_memtables == 0
    })?;
    assert_eq!(sst_files(dir.path())?.len() as u64, live_files(&db));
    assert!(!db.stats().write_failed);
    db.close()?;
    let db = open(dir.path(), &Faults::default(), |o| o)?;
    let t = db.open_table("t", TableOptions::default())?;
    for row in 0..400u32 {
        assert_eq!(
            get(&db, &t, row)?.as_deref(),
            Some(&[1; 50][..]),
            "row {row}"
        );
    }
    Ok(())
}

/// A stall in which no flush finishes (the storage under the flushes keeps failing) ends
/// with the write refused after `WRITE_STALL_LIMIT`, as `Unavailable` with the flush's error;
/// once the storage works again the flushes catch up and writes are taken, nothing lost.
#[test]
fn a_stall_with_failing_flushes_is_refused_after_the_limit() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (db, faults, t) = small_memtables_full_disk(dir.path())?;
    let mut refused = None;
    for row in 0..10_000u32 {
        let started = Instant::now();
        if let Err(e) = put(&db, &t, row, &[1; 50]) {
            refused = Some((row, e, started.elapsed()));
            break;
        }
    }
    let (row, e, waited) = refused.ok_or("no write was refused")?;
    assert!(row > 0, "the memtables took writes first");
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    let text = e.to_string();
    assert!(
        text.contains("writes held back") && text.contains("space"),
        "{text}"
    );
    assert!(waited >= strata_engine::WRITE_STALL_LIMIT, "{waited:?}");
    let s = db.stats();
    assert!(s.flush_failing && s.writes_refused == 1 && s.flushes == 0);
    faults.clear();
    wait_for("the flushes to catch up", || {
        db.stats().frozen_memtables == 0
    })?;
    assert!(!db.stats().flush_failing);
    put(&db, &t, row, &[1; 50])?;
    for r in 0..=row {
        assert_eq!(get(&db, &t, r)?.as_deref(), Some(&[1; 50][..]), "row {r}");
    }
    Ok(())
}

/// A background compaction that meets a full disk keeps its inputs, leaves no output, and
/// runs again once the disk has space.
#[test]
fn a_full_disk_holds_compactions_back_until_it_has_space() -> TestResult {
    let dir = tempfile::tempdir()?;
    let faults = Faults::new();
    let db = open(dir.path(), &faults, |o| DbOptions {
        l0_compaction_trigger: 2,
        ..o
    })?;
    let t = db.open_table("t", TableOptions::default())?;
    put(&db, &t, 1, b"one")?;
    db.flush()?;
    // The next SST created, the second flush's, succeeds; the compaction's outputs do not.
    faults.arm(
        Fault::new(FaultOp::Create, FaultError::NoSpace)
            .on(FaultFile::Sst)
            .after(1)
            .sticky(),
    );
    put(&db, &t, 2, b"two")?;
    db.flush()?;
    wait_for("failed compactions", || db.stats().compaction_errors >= 2)?;
    let s = db.stats();
    assert_eq!((s.compactions, s.levels[0].files), (0, 2));
    assert_eq!(sst_files(dir.path())?.len(), 2);
    assert_eq!(get(&db, &t, 1)?.as_deref(), Some(&b"one"[..]));
    faults.clear();
    wait_for("the compaction", || db.stats().compactions == 1)?;
    assert_eq!(db.stats().levels[0].files, 0);
    assert_eq!(sst_files(dir.path())?.len() as u64, live_files(&db));
    drop(db);
    let db = open(dir.path(), &Faults::default(), |o| o)?;
    let t = db.open_table("t", TableOptions::default())?;
    assert_eq!(get(&db, &t, 1)?.as_deref(), Some(&b"one"[..]));
    assert_eq!(get(&db, &t, 2)?.as_deref(), Some(&b"two"[..]));
    Ok(())
}

/// A manifest store that fails before its rename (or whose rename did not happen) deletes
/// the new files at once; one whose directory fsync failed after the rename (the file may be
/// the new one) keeps them until the next manifest is in place. Either way the store stays
/// consistent across a reopen.
#[test]
fn a_failed_manifest_store_leaves_the_previous_state() -> TestResult {
    let dir = tempfile::tempdir()?;
    let faults = Faults::new();
    let db = open(dir.path(), &faults, |o| DbOptions {
        l0_compaction_trigger: 100,
        ..o
    })?;
    let t = db.open_table("t", TableOptions::default())?;
    let on_disk = || -> TestResult<u64> { Ok(sst_files(dir.path())?.len() as u64) };
    let cases = [
        (FaultOp::Sync, false),
        (FaultOp::Rename, false),
        (FaultOp::SyncDir, true),
    ];
    for (i, (op, kept)) in cases.into_iter().enumerate() {
        put(&db, &t, i as u32, b"v")?;
        faults.arm(
            Fault::new(op, FaultError::Io)
                .on(FaultFile::Manifest)
                .sticky(),
        );
        assert!(db.flush().is_err(), "{op:?}");
        let errors = db.stats().flush_errors;
        wait_for("a failed retry", || db.stats().flush_errors > errors)?;
        if kept {
            assert!(on_disk()? > live_files(&db), "{op:?}");
        } else {
            wait_for("no file of a failed store", || {
                on_disk().is_ok_and(|n| n == live_files(&db))
            })?;
        }
        faults.clear();
        // The retry succeeds, and the files kept from the failed stores go with it.
        wait_for("the flush", || db.stats().frozen_memtables == 0)?;
        assert_eq!(on_disk()?, live_files(&db), "{op:?}");
    }
    // Compactions whose manifest store fails.
    for (op, kept) in [(FaultOp::Rename, false), (FaultOp::SyncDir, true)] {
        faults.arm(
            Fault::new(op, FaultError::Io)
                .on(FaultFile::Manifest)
                .sticky(),
        );
        assert!(db.compact_all().is_err());
        assert_eq!(db.stats().levels[0].files, 3);
        assert_eq!(on_disk()? > live_files(&db), kept, "{op:?}");
        faults.clear();
    }
    db.compact_all()?;
    assert_eq!(on_disk()?, live_files(&db));
    drop(db);
    let db = open(dir.path(), &Faults::default(), |o| o)?;
    let t = db.open_table("t", TableOptions::default())?;
    for row in 0..3 {
        assert_eq!(get(&db, &t, row)?.as_deref(), Some(&b"v"[..]));
    }
    Ok(())
}

/// A batch already told it was queued (`Db::write_queued`) cannot be told its append failed:
/// even a clean ENOSPC then fails the WAL, and every later write says so.
#[test]
fn a_failed_append_of_queued_batches_fails_the_wal() -> TestResult {
    let dir = tempfile::tempdir()?;
    let faults = Faults::new();
    let db = open(dir.path(), &faults, |o| DbOptions {
        sync: SyncPolicy::Interval(Duration::from_millis(20)),
        ..o
    })?;
    let t = db.open_table("t", TableOptions::default())?;
    put(&db, &t, 1, b"kept")?;
    faults.arm(Fault::new(FaultOp::Write, FaultError::NoSpace).on(FaultFile::Wal));
    let mut b = WriteBatch::new();
    b.put(&t, &2u32.to_be_bytes(), b"c", b"queued");
    db.write_queued(&mut b)?;
    wait_for("the WAL to fail", || db.stats().write_failed)?;
    let e = put(&db, &t, 3, b"refused")
        .err()
        .ok_or("a write after the failure")?;
    assert!(matches!(e, strata_engine::Error::WalFailed(_)), "{e}");
    assert_eq!(get(&db, &t, 1)?.as_deref(), Some(&b"kept"[..]));
    drop(db);
    let db = open(dir.path(), &Faults::default(), |o| o)?;
    let t = db.open_table("t", TableOptions::default())?;
    assert_eq!(get(&db, &t, 1)?.as_deref(), Some(&b"kept"[..]));
    assert_eq!(get(&db, &t, 2)?, None);
    Ok(())
}
