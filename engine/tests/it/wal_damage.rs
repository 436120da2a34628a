//! Torn and corrupt WAL tails: every cut and every byte flip in the last records must reopen
//! to exactly the prefix of batches before the damaged record.

use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng, rngs::StdRng};
use strata_engine::{Db, SyncPolicy};

use crate::{TestResult, check_prefix, options, segments, tables, test_batch};

/// A written database: the last segment's bytes and, for each batch record in it, its start
/// and end offset; `before` batches live in earlier segments.
struct Written {
    dir: tempfile::TempDir,
    last: PathBuf,
    bytes: Vec<u8>,
    records: Vec<(u64, u64)>,
    before: u64,
}

fn write(n: u64, segment_bytes: u64) -> TestResult<Written> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), options(SyncPolicy::Always, segment_bytes))?;
    let (a, b) = tables(&db)?;
    let mut ends: Vec<(PathBuf, u64)> = Vec::new();
    for id in 0..n {
        db.write(&test_batch(&a, &b, id, true))?;
        let last = segments(dir.path())?.pop().ok_or("no segment")?;
        let len = std::fs::metadata(&last)?.len();
        ends.push((last, len));
    }
    db.close()?;
    let last = segments(dir.path())?.pop().ok_or("no segment")?;
    let bytes = std::fs::read(&last)?;
    let mut records = Vec::new();
    let mut before = 0;
    for (i, (path, end)) in ends.iter().enumerate() {
        if *path != last {
            before += 1;
            continue;
        }
        let start = match i.checked_sub(1).map(|p| &ends[p]) {
            Some((p, e)) if *p == last => *e,
            _ => 24,
        };
        records.push((start, *end));
    }
    assert_eq!(records.last().map(|r| r.1), Some(bytes.len() as u64));
    Ok(Written {
        dir,
        last,
        bytes,
        records,
        before,
    })
}

fn reopen_count(dir: &Path) -> TestResult<u64> {
    let db = Db::open(dir, options(SyncPolicy::Always, 1 << 20))?;
    let n = check_prefix(&db)?;
    drop(db);
    Ok(n)
}

/// Batches whose records end at or before `offset` in the last segment, plus earlier ones.
fn complete_before(w: &Written, offset: u64) -> u64 {
    w.before + w.records.iter().filter(|r| r.1 <= offset).count() as u64
}

fn cut_everywhere(w: &Written, from: u64) -> TestResult {
    for cut in from..=w.bytes.len() as u64 {
        std::fs::write(&w.last, &w.bytes[..cut as usize])?;
        let n = reopen_count(w.dir.path()).map_err(|e| format!("cut at {cut}: {e}"))?;
        assert_eq!(n, complete_before(w, cut), "cut at {cut}");
    }
    Ok(())
}

#[test]
fn every_cut_of_the_last_records_reopens_to_a_prefix() -> TestResult {
    let w = write(12, 64 << 20)?;
    assert_eq!(w.before, 0);
    let from = w.records[w.records.len() - 4].0;
    cut_everywhere(&w, from)
}

#[test]
fn every_cut_of_the_last_segment_reopens_to_a_prefix() -> TestResult {
    let w = write(30, 1024)?;
    assert!(w.before > 0, "expected several segments");
    // From 0: a torn header of the last segment too.
    cut_everywhere(&w, 0)
}

#[test]
fn byte_flips_in_the_last_records_reopen_to_a_prefix() -> TestResult {
    for seed in crate::test_seeds(&[0xf11b_0001, 0xf11b_0002])? {
        println!("byte flip seed {seed} (STRATA_TEST_SEED={seed} replays it)");
        byte_flips(seed).map_err(|e| format!("seed {seed}: {e}"))?;
    }
    Ok(())
}

fn byte_flips(seed: u64) -> TestResult {
    let mut rng = StdRng::seed_from_u64(seed);
    let w = write(12, 1024)?;
    let from = w.records[w.records.len().saturating_sub(4)].0;
    for offset in from..w.bytes.len() as u64 {
        let (start, _) = *w
            .records
            .iter()
            .find(|r| r.0 <= offset && offset < r.1)
            .ok_or("offset outside records")?;
        for mask in [0x80u8, rng.gen_range(1..=255)] {
            let mut bytes = w.bytes.clone();
            bytes[offset as usize] ^= mask;
            std::fs::write(&w.last, &bytes)?;
            let n = reopen_count(w.dir.path())
                .map_err(|e| format!("flip {mask:#04x} at {offset}: {e}"))?;
            assert_eq!(
                n,
                complete_before(&w, start),
                "flip {mask:#04x} at {offset}"
            );
        }
    }
    Ok(())
}

#[test]
fn a_flip_in_an_earlier_segment_is_reported() -> TestResult {
    let w = write(30, 1024)?;
    let first = segments(w.dir.path())?
        .into_iter()
        .next()
        .ok_or("no segment")?;
    let mut bytes = std::fs::read(&first)?;
    let at = bytes.len() - 10;
    bytes[at] ^= 0x20;
    std::fs::write(&first, &bytes)?;
    match Db::open(w.dir.path(), options(SyncPolicy::Always, 1024)) {
        Err(e) => assert!(matches!(e, strata_engine::Error::Corruption { .. }), "{e}"),
        Ok(_) => return Err("corruption in a non-last segment was not reported".into()),
    }
    Ok(())
}
