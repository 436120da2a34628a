//! Damaged copies of real database directories: each kind of damage is found with its file,
//! and [`repair`] leaves a directory that verifies clean, opens and serves what was readable.

use std::path::Path;

use super::*;
use crate::batch::WriteBatch;
use crate::db::Db;
use crate::file_name::segment_file_name;
use crate::options::{DbOptions, TableOptions};

fn row(i: u32) -> Vec<u8> {
    format!("row{i:05}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("value of row {i} {}", "x".repeat(40)).into_bytes()
}

fn opts() -> DbOptions {
    DbOptions {
        wal_segment_bytes: 2048,
        ..DbOptions::default()
    }
}

/// Writes rows `range` to table `name`, one batch each.
fn write(db: &Db, name: &str, range: std::ops::Range<u32>) -> Result<()> {
    let t = db.open_table(
        name,
        TableOptions {
            block_bytes: 512,
            ..TableOptions::default()
        },
    )?;
    for i in range {
        let mut b = WriteBatch::new();
        b.put(&t, &row(i), b"c", &value(i));
        db.write(&b)?;
    }
    Ok(())
}

/// Rows 0..200 of tables `a` and `b` in SST files, then rows 200..260 of `a` in the WAL only.
fn build(dir: &Path) -> Result<()> {
    let db = Db::open(dir, opts())?;
    write(&db, "a", 0..200)?;
    write(&db, "b", 0..200)?;
    db.flush()?;
    write(&db, "a", 200..260)?;
    db.close()
}

/// The rows of table `name` that read back as written, by number.
fn readable(db: &Db, name: &str) -> Result<Vec<u32>> {
    let Some(t) = db.table(name) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for i in 0..300 {
        if let Ok(Some(v)) = db.get(&t, &row(i), b"c") {
            assert_eq!(v[..], value(i)[..], "row {i}");
            out.push(i);
        }
    }
    Ok(out)
}

fn sst_of(report: &VerifyReport, table: &str) -> String {
    let files = report.sst_files();
    let f = files.iter().find(|f| f.table == table);
    f.map(|f| f.name.clone()).unwrap_or_default()
}

fn flip(path: &Path, offset: u64) -> Result<()> {
    let mut bytes = std::fs::read(path).map_err(|e| Error::io("test read", e))?;
    bytes[offset as usize] ^= 0x20;
    std::fs::write(path, bytes).map_err(|e| Error::io("test write", e))
}

/// The WAL segments recovery would replay (a flush may leave covered ones for the next open
/// to delete).
fn segments(dir: &Path) -> Result<Vec<PathBuf>> {
    let report = verify(dir)?;
    Ok(report
        .segments
        .keys()
        .map(|n| dir.join(segment_file_name(*n)))
        .collect())
}

/// Repairs `dir` into `dir/lost+found`, then checks it verifies clean and opens.
fn repair_and_reopen(dir: &Path) -> Result<(Vec<Repaired>, Db)> {
    let report = verify(dir)?;
    let done = repair(&report, &dir.join("lost+found"))?;
    let after = verify(dir)?;
    assert_eq!(after.errors(), 0, "{:?}", after.findings);
    Ok((done, Db::open(dir, opts())?))
}

#[test]
fn a_clean_directory_has_no_findings_and_its_view_reads_everything() -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
    build(dir.path())?;
    let report = verify(dir.path())?;
    assert_eq!(report.findings, vec![]);
    assert_eq!(report.counts.sst_files, 2);
    assert_eq!(report.counts.entries, 400);
    assert!(report.counts.blocks > 10, "{:?}", report.counts);
    assert!(report.counts.wal_records >= 60, "{:?}", report.counts);
    {
        let view = CheckView::open(&report, opts())?;
        assert_eq!(readable(view.db(), "a")?, (0..260).collect::<Vec<_>>());
        assert_eq!(readable(view.db(), "b")?.len(), 200);
    }
    assert!(!dir.path().join(".fsck-view").exists());
    // The view changed nothing: the directory still verifies the same.
    assert_eq!(verify(dir.path())?.counts, report.counts);
    Ok(())
}

#[test]
fn a_damaged_data_block_is_found_and_the_rest_of_its_file_survives_repair() -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
    build(dir.path())?;
    let name = sst_of(&verify(dir.path())?, "a");
    flip(&dir.path().join(&name), 10)?;
    assert!(
        Db::open(dir.path(), opts()).is_ok(),
        "a bad data block does not stop an open"
    );

    let report = verify(dir.path())?;
    assert_eq!(report.errors(), 1, "{:?}", report.findings);
    let f = &report.findings[0];
    assert_eq!((f.file.as_str(), f.offset), (name.as_str(), Some(0)));
    assert_eq!(f.remedy, Remedy::RewriteFile);
    assert!(f.detail.contains("checksum"), "{}", f.detail);
    let lost_row = f.row.clone().unwrap_or_default();
    assert!(lost_row.starts_with(b"row"), "{lost_row:?}");

    let view_rows = {
        let view = CheckView::open(&report, opts())?;
        let rows = readable(view.db(), "a")?;
        assert!(!rows.contains(&0) && rows.contains(&199) && rows.contains(&259));
        assert_eq!(readable(view.db(), "b")?.len(), 200);
        rows
    };
    let (done, db) = repair_and_reopen(dir.path())?;
    assert_eq!(done.len(), 1, "{done:?}");
    assert!(dir.path().join("lost+found").join(&name).exists());
    assert_eq!(readable(&db, "a")?, view_rows);
    assert_eq!(readable(&db, "b")?.len(), 200);
    Ok(())
}

#[test]
fn a_damaged_footer_or_a_missing_file_drops_the_file() -> Result<()> {
    for missing in [false, true] {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        build(dir.path())?;
        let name = sst_of(&verify(dir.path())?, "b");
        let path = dir.path().join(&name);
        if missing {
            std::fs::remove_file(&path).map_err(|e| Error::io("remove", e))?;
        } else {
            let len = std::fs::metadata(&path)
                .map_err(|e| Error::io("stat", e))?
                .len();
            flip(&path, len - 20)?;
        }
        assert!(Db::open(dir.path(), opts()).is_err());
        let report = verify(dir.path())?;
        assert_eq!(report.errors(), 1, "{:?}", report.findings);
        let f = &report.findings[0];
        assert_eq!(f.file, name);
        let want = if missing {
            Remedy::DropFromManifest
        } else {
            Remedy::MoveFile
        };
        assert_eq!(f.remedy, want);
        {
            let view = CheckView::open(&report, opts())?;
            assert_eq!(readable(view.db(), "b")?, Vec::<u32>::new());
            assert_eq!(readable(view.db(), "a")?.len(), 260);
        }
        let (_, db) = repair_and_reopen(dir.path())?;
        assert_eq!(readable(&db, "a")?.len(), 260);
        assert_eq!(dir.path().join("lost+found").join(&name).exists(), !missing);
    }
    Ok(())
}

#[test]
fn an_unnamed_sst_is_a_warning_and_repair_moves_it() -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
    build(dir.path())?;
    let name = sst_of(&verify(dir.path())?, "b");
    let stray = sst_file_name(999);
    std::fs::copy(dir.path().join(&name), dir.path().join(&stray))
        .map_err(|e| Error::io("copy", e))?;
    let report = verify(dir.path())?;
    assert_eq!((report.errors(), report.warnings()), (0, 1));
    assert_eq!(report.findings[0].file, stray);
    let (done, _) = repair_and_reopen(dir.path())?;
    assert_eq!(done.len(), 1);
    assert!(dir.path().join("lost+found").join(&stray).exists());
    Ok(())
}

#[test]
fn a_torn_wal_tail_is_only_a_warning() -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
    build(dir.path())?;
    let segs = segments(dir.path())?;
    let last = segs.last().cloned().unwrap_or_default();
    // The end of the log's last record: a recycled segment has old bytes after it.
    let bytes = std::fs::read(&last).map_err(|e| Error::io("read", e))?;
    let seed = crate::wal::segment::decode_header(&bytes)
        .map_err(|e| Error::corruption("test", 0, format!("{e:?}")))?
        .seed;
    let mut records = crate::wal::segment::RecordIter::new(&bytes, seed);
    let mut len = records.good_len();
    while let Some(payload) = records.next() {
        if payload == crate::wal::entry::END_PAYLOAD {
            break;
        }
        len = records.good_len();
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&last)
        .map_err(|e| Error::io("open", e))?;
    file.set_len(len - 7)
        .map_err(|e| Error::io("truncate", e))?;
    let report = verify(dir.path())?;
    assert_eq!(
        (report.errors(), report.warnings()),
        (0, 1),
        "{:?}",
        report.findings
    );
    assert!(
        report.findings[0].detail.contains("torn end"),
        "{:?}",
        report.findings
    );
    Ok(())
}

#[test]
fn a_damaged_wal_record_before_the_tail_is_an_error_and_repair_keeps_later_records() -> Result<()> {
    // In an earlier segment, then in the last one with good records after it.
    for which in [0usize, 1] {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        build(dir.path())?;
        let segs = segments(dir.path())?;
        assert!(segs.len() >= 3, "{segs:?}");
        let target = if which == 0 {
            segs[0].clone()
        } else {
            segs[segs.len() - 1].clone()
        };
        // Inside the first record's payload: header 24, frame 12.
        flip(&target, 40)?;
        if which == 0 {
            assert!(Db::open(dir.path(), opts()).is_err());
        }
        let report = verify(dir.path())?;
        assert_eq!(report.errors(), 1, "{:?}", report.findings);
        let f = &report.findings[0];
        assert_eq!(
            Some(f.file.as_str()),
            target.file_name().and_then(|n| n.to_str())
        );
        assert_eq!((f.offset, f.remedy), (Some(24), Remedy::RewriteSegment));
        let view_rows = readable(CheckView::open(&report, opts())?.db(), "a")?;
        assert_eq!(view_rows.len(), 259, "one batch lost");
        let (_, db) = repair_and_reopen(dir.path())?;
        assert_eq!(readable(&db, "a")?, view_rows);
        assert!(dir.path().join("lost+found").join(f.file.as_str()).exists());
    }
    Ok(())
}

#[test]
fn a_missing_wal_segment_in_the_middle_is_filled() -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
    build(dir.path())?;
    let segs = segments(dir.path())?;
    assert!(segs.len() >= 3, "{segs:?}");
    std::fs::remove_file(&segs[1]).map_err(|e| Error::io("remove", e))?;
    assert!(Db::open(dir.path(), opts()).is_err());
    let report = verify(dir.path())?;
    assert_eq!(report.errors(), 1, "{:?}", report.findings);
    assert_eq!(report.findings[0].remedy, Remedy::CreateSegment);
    let (_, db) = repair_and_reopen(dir.path())?;
    let rows = readable(&db, "a")?;
    assert!(rows.len() > 200 && rows.len() < 260, "{}", rows.len());
    Ok(())
}

#[test]
fn a_damaged_manifest_is_an_error_that_nothing_can_open() -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
    build(dir.path())?;
    flip(&dir.path().join(MANIFEST_NAME), 14)?;
    let report = verify(dir.path())?;
    assert!(!report.manifest_readable());
    assert_eq!(report.findings[0].file, MANIFEST_NAME);
    assert_eq!(report.findings[0].remedy, Remedy::None);
    // The SST files are still read, each on its own.
    assert_eq!(report.counts.sst_files, 2);
    assert!(CheckView::open(&report, opts()).is_err());
    assert!(verify(dir.path().join("nope")).is_err());
    Ok(())
}

#[test]
fn an_inconsistent_manifest_is_reported() -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
    build(dir.path())?;
    let fs = LocalFs::new(dir.path())?;
    let mut m = Manifest::load(&fs)?.unwrap_or_default();
    // Both files (of the same rows) on level 1 of one table, and a file named twice, of a
    // table the manifest does not know.
    let table = m.files[0].table;
    for f in &mut m.files {
        f.table = table;
        f.level = 1;
    }
    let mut twice = m.files[0].clone();
    twice.table = 77;
    m.files.push(twice);
    m.store(&fs)?;
    let report = verify(dir.path())?;
    let details: Vec<&str> = report.findings.iter().map(|f| f.detail.as_str()).collect();
    assert!(details.iter().any(|d| d.contains("twice")), "{details:?}");
    assert!(
        details.iter().any(|d| d.contains("unknown table 77")),
        "{details:?}"
    );
    assert!(details.iter().any(|d| d.contains("overlap")), "{details:?}");
    assert!(report.findings.iter().all(|f| f.remedy == Remedy::None));
    Ok(())
}

#[test]
fn without_a_manifest_every_sst_is_unnamed_and_repair_moves_them() -> Result<()> {
    let src = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
    build(src.path())?;
    let name = sst_of(&verify(src.path())?, "a");
    let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
    {
        let db = Db::open(dir.path(), opts())?;
        write(&db, "a", 0..10)?;
        db.close()?;
    }
    assert!(!dir.path().join(MANIFEST_NAME).exists());
    std::fs::copy(src.path().join(&name), dir.path().join(&name))
        .map_err(|e| Error::io("copy", e))?;
    let report = verify(dir.path())?;
    assert_eq!(
        (report.errors(), report.warnings()),
        (0, 1),
        "{:?}",
        report.findings
    );
    let (done, db) = repair_and_reopen(dir.path())?;
    assert_eq!(done.len(), 1);
    assert!(dir.path().join("lost+found").join(&name).exists());
    assert_eq!(readable(&db, "a")?, (0..10).collect::<Vec<_>>());
    Ok(())
}
