use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::*;
use crate::batch::WriteBatch;
use crate::options::{DbOptions, TableOptions};
use crate::scan::ScanOptions;

fn tempdir() -> Result<tempfile::TempDir> {
    tempfile::tempdir().map_err(|e| Error::io("tempdir", e))
}

fn put(db: &Db, i: u64) -> Result<()> {
    let t = db
        .table("t")
        .ok_or_else(|| Error::NoSuchTable("t".into()))?;
    let mut b = WriteBatch::new();
    b.put(&t, &i.to_be_bytes(), b"c", &i.to_le_bytes());
    b.put(&t, &i.to_be_bytes(), b"d", b"second cell of the same batch");
    db.write(&b)
}

/// The row keys of table `t` in the checkpoint at `dir`, each checked to hold both cells of
/// its batch. The checkpoint is opened through a restore: opening it in place would start a
/// WAL there, and a directory with a WAL is no longer a backup target.
fn rows(dir: &Path) -> Result<Vec<u64>> {
    let restored = tempdir()?;
    restore_checkpoint(dir, restored.path(), &mut |_, _| {})?;
    let db = Db::open(restored.path(), DbOptions::default())?;
    let t = db
        .table("t")
        .ok_or_else(|| Error::NoSuchTable("t".into()))?;
    let mut out = Vec::new();
    for row in db.scan(&t, &ScanOptions::default())? {
        let row = row?;
        assert_eq!(row.cells.len(), 2, "a batch is copied whole or not at all");
        let mut k = [0u8; 8];
        k.copy_from_slice(&row.key);
        out.push(u64::from_be_bytes(k));
    }
    Ok(out)
}

#[test]
fn checkpoint_under_concurrent_writes_holds_every_acknowledged_batch() -> Result<()> {
    let (src, dst) = (tempdir()?, tempdir()?);
    let db = Db::open(
        src.path(),
        DbOptions {
            memtable_bytes: 64 << 10,
            ..DbOptions::default()
        },
    )?;
    db.open_table("t", TableOptions::default())?;
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
        std::thread::spawn(move || -> Result<()> {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                put(&db, i)?;
                acked.store(i, Ordering::Release);
            }
            Ok(())
        })
    };
    while acked.load(Ordering::Acquire) < 2_000 {
        std::thread::yield_now();
    }
    let before = acked.load(Ordering::Acquire);
    let report = db.checkpoint(dst.path(), &mut |_, _| {})?;
    stop.store(true, Ordering::Relaxed);
    writer
        .join()
        .map_err(|_| Error::InvalidArgument("writer panicked".into()))??;
    drop(db);
    let got = rows(dst.path())?;
    // Batches were written in key order, so a consistent copy holds 1..=n for some n, and n
    // covers every batch acknowledged before the checkpoint began.
    let n = got.len() as u64;
    assert!(n >= before, "{n} rows, {before} acknowledged before");
    assert_eq!(got, (1..=n).collect::<Vec<_>>());
    assert!(report.seq >= before);
    assert!(report.files_linked > 0);
    assert_eq!(report.files_copied, 0, "same file system: links");
    Ok(())
}

#[test]
fn a_second_checkpoint_copies_only_new_files_and_drops_old_ones() -> Result<()> {
    let (src, dst) = (tempdir()?, tempdir()?);
    let db = Db::open(src.path(), DbOptions::default())?;
    db.open_table("t", TableOptions::default())?;
    for i in 1..=100 {
        put(&db, i)?;
    }
    let first = db.checkpoint(dst.path(), &mut |_, _| {})?;
    assert_eq!(first.files_skipped, 0);
    let files = first.files_linked + first.files_copied;
    assert!(files > 0);
    for i in 101..=200 {
        put(&db, i)?;
    }
    let mut last_progress = (0, 0);
    let second = db.checkpoint(dst.path(), &mut |done, total| last_progress = (done, total))?;
    assert_eq!(
        second.files_skipped, files,
        "the first checkpoint's files stay"
    );
    assert_eq!(
        second.files_linked + second.files_copied,
        1,
        "one new flush"
    );
    assert_eq!(second.files_removed, 0);
    assert_eq!(last_progress.0, last_progress.1);
    assert_eq!(last_progress.1, second.total_bytes());
    assert_eq!(rows(dst.path())?, (1..=200).collect::<Vec<_>>());
    db.compact_all()?;
    let third = db.checkpoint(dst.path(), &mut |_, _| {})?;
    assert_eq!(third.files_skipped, 0);
    assert_eq!(third.files_removed, files + 1, "compacted away");
    drop(db);
    assert_eq!(rows(dst.path())?, (1..=200).collect::<Vec<_>>());
    Ok(())
}

#[test]
fn a_changed_file_of_the_same_name_is_copied_again() -> Result<()> {
    let (src, dst) = (tempdir()?, tempdir()?);
    let db = Db::open(src.path(), DbOptions::default())?;
    db.open_table("t", TableOptions::default())?;
    put(&db, 1)?;
    let first = db.checkpoint(dst.path(), &mut |_, _| {})?;
    assert_eq!(first.files_linked, 1);
    // Replace the target's file (a new inode) with one of the same size but other bytes.
    let name = list(dst.path())?
        .into_iter()
        .find(|n| parse_sst_file_name(n).is_some())
        .ok_or_else(|| Error::InvalidArgument("no SST in the checkpoint".into()))?;
    let path = dst.path().join(&name);
    let mut bytes = fs::read(&path).map_err(|e| Error::io("read", e))?;
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    fs::remove_file(&path).map_err(|e| Error::io("remove", e))?;
    fs::write(&path, &bytes).map_err(|e| Error::io("write", e))?;
    let second = db.checkpoint(dst.path(), &mut |_, _| {})?;
    assert_eq!(second.files_skipped, 0);
    assert_eq!(second.files_linked, 1);
    drop(db);
    assert_eq!(rows(dst.path())?, vec![1]);
    Ok(())
}

#[test]
fn a_live_database_or_the_source_is_refused_as_a_target() -> Result<()> {
    let (src, other) = (tempdir()?, tempdir()?);
    let db = Db::open(src.path(), DbOptions::default())?;
    let err = db.checkpoint(src.path(), &mut |_, _| {}).err();
    assert!(matches!(err, Some(Error::InvalidArgument(_))), "{err:?}");
    let live = Db::open(other.path(), DbOptions::default())?;
    let err = db.checkpoint(other.path(), &mut |_, _| {}).err();
    assert!(matches!(err, Some(Error::InvalidArgument(_))), "{err:?}");
    drop(live);
    Ok(())
}

#[test]
fn restore_copies_a_checkpoint_into_a_new_directory() -> Result<()> {
    let (src, backup, restored) = (tempdir()?, tempdir()?, tempdir()?);
    let db = Db::open(src.path(), DbOptions::default())?;
    db.open_table("t", TableOptions::default())?;
    for i in 1..=50 {
        put(&db, i)?;
    }
    db.checkpoint(backup.path(), &mut |_, _| {})?;
    // A stale WAL segment in the target would replay on top of the restored files.
    fs::write(restored.path().join("wal-0000000000000001.log"), b"junk")
        .map_err(|e| Error::io("write", e))?;
    let report = restore_checkpoint(backup.path(), restored.path(), &mut |_, _| {})?;
    assert_eq!(report.files_linked, 0, "a restore copies");
    assert!(report.files_copied > 0);
    assert!(
        !restored.path().join("wal-0000000000000001.log").exists(),
        "the stale segment is gone"
    );
    drop(db);
    let db = Db::open(restored.path(), DbOptions::default())?;
    let t = db
        .table("t")
        .ok_or_else(|| Error::NoSuchTable("t".into()))?;
    assert_eq!(db.scan(&t, &ScanOptions::default())?.count(), 50);
    Ok(())
}

#[test]
fn restore_refuses_a_checkpoint_with_a_truncated_file() -> Result<()> {
    let (src, backup, restored) = (tempdir()?, tempdir()?, tempdir()?);
    let db = Db::open(src.path(), DbOptions::default())?;
    db.open_table("t", TableOptions::default())?;
    put(&db, 1)?;
    db.checkpoint(backup.path(), &mut |_, _| {})?;
    for name in list(backup.path())? {
        if parse_sst_file_name(&name).is_some() {
            let path = backup.path().join(name);
            let f = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| Error::io("open", e))?;
            f.set_len(10).map_err(|e| Error::io("truncate", e))?;
        }
    }
    let err = restore_checkpoint(backup.path(), restored.path(), &mut |_, _| {}).err();
    assert!(matches!(err, Some(Error::Corruption { .. })), "{err:?}");
    Ok(())
}

#[test]
fn a_checkpoint_to_another_file_system_copies() -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let src = tempdir()?;
    // A tmpfs, when the machine has one on another device than the temporary directory: the
    // hard link fails there with EXDEV.
    let shm = Path::new("/dev/shm");
    let dev = |p: &Path| fs::metadata(p).map(|m| m.dev()).ok();
    if dev(shm).is_none() || dev(shm) == dev(src.path()) {
        eprintln!("skipped: no second file system at /dev/shm");
        return Ok(());
    }
    let dst = tempfile::tempdir_in(shm).map_err(|e| Error::io("tempdir", e))?;
    let db = Db::open(src.path(), DbOptions::default())?;
    db.open_table("t", TableOptions::default())?;
    for i in 1..=20 {
        put(&db, i)?;
    }
    let report = db.checkpoint(dst.path(), &mut |_, _| {})?;
    assert_eq!(report.files_linked, 0);
    assert!(report.files_copied > 0);
    assert_eq!(report.bytes_copied, report.total_bytes());
    let again = db.checkpoint(dst.path(), &mut |_, _| {})?;
    assert_eq!(
        again.files_skipped, report.files_copied,
        "nothing new to copy"
    );
    assert_eq!(again.files_copied, 0);
    drop(db);
    assert_eq!(rows(dst.path())?, (1..=20).collect::<Vec<_>>());
    Ok(())
}
