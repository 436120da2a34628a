//! The WAL format against committed fixtures: the current encoder must produce the bytes of
//! `tests/fixtures/wal-v2`, and it and the first format's `tests/fixtures/wal-v1` (records
//! checksummed without a seed) must open with the expected contents. Run with
//! `STRATA_BLESS=1` to regenerate the current fixture after a deliberate format change (which
//! also bumps the format version, and keeps the old fixture as a test that it still opens).

use std::path::PathBuf;

use strata_engine::{Db, SyncPolicy};

use crate::{TestResult, batch_present, check_prefix, options, segments, tables, test_batch};

fn fixture_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Writes the fixture's contents: tables `a` and `b`, batches 0..3, then a delete.
fn write_fixture(dir: &std::path::Path) -> TestResult {
    let db = Db::open(dir, options(SyncPolicy::Always, 64 << 20))?;
    let (a, b) = tables(&db)?;
    for id in 0..3 {
        db.write(&test_batch(&a, &b, id, true))?;
    }
    let mut batch = strata_engine::WriteBatch::new();
    batch.delete_row(&b, b"gone");
    batch.delete(&a, b"gone", b"c");
    db.write(&batch)?;
    db.close()?;
    Ok(())
}

#[test]
fn wal_v2_fixture_matches_the_encoder_and_opens() -> TestResult {
    let fresh = tempfile::tempdir()?;
    write_fixture(fresh.path())?;
    let fresh_segs = segments(fresh.path())?;
    let fixture = fixture_dir("wal-v2");
    if std::env::var_os("STRATA_BLESS").is_some() {
        std::fs::create_dir_all(&fixture)?;
        for s in &fresh_segs {
            std::fs::copy(s, fixture.join(s.file_name().ok_or("no name")?))?;
        }
    }
    let fixture_segs = segments(&fixture)?;
    assert_eq!(fixture_segs.len(), fresh_segs.len());
    for (f, n) in fixture_segs.iter().zip(&fresh_segs) {
        assert_eq!(f.file_name(), n.file_name());
        assert_eq!(
            std::fs::read(f)?,
            std::fs::read(n)?,
            "{} differs",
            f.display()
        );
    }
    opens_with_the_fixture_contents(&fixture_segs)
}

#[test]
fn wal_v1_fixture_still_opens() -> TestResult {
    opens_with_the_fixture_contents(&segments(&fixture_dir("wal-v1"))?)
}

/// Opens a copy of the segments `fixture_segs` (opening may truncate, and the fixture must
/// stay untouched) and checks what it holds.
fn opens_with_the_fixture_contents(fixture_segs: &[PathBuf]) -> TestResult {
    assert!(!fixture_segs.is_empty());
    let copy = tempfile::tempdir()?;
    for s in fixture_segs {
        std::fs::copy(s, copy.path().join(s.file_name().ok_or("no name")?))?;
    }
    let db = Db::open(copy.path(), options(SyncPolicy::Always, 64 << 20))?;
    assert_eq!(check_prefix(&db)?, 3);
    let (a, b) = tables(&db)?;
    assert!(batch_present(&db, &a, &b, 2)?);
    Ok(())
}
