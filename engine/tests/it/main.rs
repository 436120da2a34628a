//! Integration tests of strata-engine, one module per topic.

mod crash;
mod expiry;
mod fault_model;
mod faults;
mod fold;
mod fuzz_standin;
mod golden;
mod group_commit;
mod lsm;
mod model;
mod wal_damage;

use std::path::Path;

use strata_engine::{
    Db, DbOptions, Result, ScanOptions, SyncPolicy, Table, TableOptions, WriteBatch,
};

/// Boxed error for tests that mix engine and std errors.
pub(crate) type TestResult<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Columns of table `a` and table `b` written by every test batch.
const A_COLUMNS: [&[u8]; 3] = [b"c0", b"c1", b"c2"];
const B_COLUMNS: [&[u8]; 2] = [b"x0", b"x1"];

/// The seeds a randomized test runs: by default the fixed `defaults`, so that CI runs the same
/// cases every time; `STRATA_TEST_SEED=<n>` runs seed `n` alone (to replay a failure), and
/// `STRATA_TEST_SEED=random` one new seed. The test prints each seed it runs.
pub(crate) fn test_seeds(defaults: &[u64]) -> Result<Vec<u64>, String> {
    match std::env::var("STRATA_TEST_SEED") {
        Err(_) => Ok(defaults.to_vec()),
        Ok(s) if s.trim() == "random" => Ok(vec![rand::random()]),
        Ok(s) => s
            .trim()
            .parse()
            .map(|n| vec![n])
            .map_err(|_| format!("STRATA_TEST_SEED must be a number or `random`, not {s:?}")),
    }
}

/// Options with a sync policy and a WAL segment size.
pub(crate) fn options(sync: SyncPolicy, wal_segment_bytes: u64) -> DbOptions {
    DbOptions {
        sync,
        wal_segment_bytes,
        ..DbOptions::default()
    }
}

/// Tiny memtables, levels and files, so that compactions run through several levels and cut
/// their outputs.
pub(crate) fn tiny_levels(o: DbOptions) -> DbOptions {
    DbOptions {
        memtable_bytes: 150,
        l0_compaction_trigger: 2,
        level_base_bytes: 600,
        level_size_ratio: 2,
        target_file_bytes: 300,
        ..o
    }
}

/// Opens the two test tables.
pub(crate) fn tables(db: &Db) -> Result<(Table, Table)> {
    Ok((
        db.open_table("a", TableOptions::default())?,
        db.open_table("b", TableOptions::default())?,
    ))
}

fn row(id: u64) -> Vec<u8> {
    format!("r{id:08}").into_bytes()
}

fn value(id: u64, column: &[u8]) -> Vec<u8> {
    let mut v = format!("v{id}-").into_bytes();
    v.extend_from_slice(column);
    v
}

/// Batch `id`: five cells across tables `a` and `b`, plus `a/last:id = id` when `with_last`.
pub(crate) fn test_batch(a: &Table, b: &Table, id: u64, with_last: bool) -> WriteBatch {
    let mut batch = WriteBatch::new();
    let r = row(id);
    for c in A_COLUMNS {
        batch.put(a, &r, c, &value(id, c));
    }
    for c in B_COLUMNS {
        batch.put(b, &r, c, &value(id, c));
    }
    if with_last {
        batch.put(a, b"last", b"id", &id.to_be_bytes());
    }
    batch
}

/// Whether batch `id` is present: `Some(true)` in full, `Some(false)` absent, and an error if
/// only part of it is there or a value is wrong.
pub(crate) fn batch_present(db: &Db, a: &Table, b: &Table, id: u64) -> TestResult<bool> {
    let r = row(id);
    let mut found = 0;
    let cells = A_COLUMNS
        .iter()
        .map(|c| (a, *c))
        .chain(B_COLUMNS.iter().map(|c| (b, *c)));
    for (t, c) in cells {
        if let Some(v) = db.get(t, &r, c)? {
            if v != value(id, c) {
                return Err(format!("batch {id}: wrong value in {}/{c:?}", t.name()).into());
            }
            found += 1;
        }
    }
    match found {
        0 => Ok(false),
        5 => Ok(true),
        n => Err(format!("batch {id} is partly applied: {n} of 5 cells").into()),
    }
}

/// Checks that the batches written in order by one writer form an exact prefix `0..n`, each
/// whole, with `last` pointing at `n - 1`, and returns `n`.
pub(crate) fn check_prefix(db: &Db) -> TestResult<u64> {
    let (a, b) = tables(db)?;
    let rows_a = db.scan(&a, &ScanOptions::default())?.count();
    let rows_b = db.scan(&b, &ScanOptions::default())?.count();
    let mut n = 0;
    while batch_present(db, &a, &b, n)? {
        n += 1;
    }
    let last = db.get(&a, b"last", b"id")?;
    let expected_last = n.checked_sub(1).map(|l| l.to_be_bytes().to_vec());
    if last.as_deref().map(<[u8]>::to_vec) != expected_last {
        return Err(format!("prefix of {n} batches but last = {last:?}").into());
    }
    // No batch beyond the prefix: a has the n rows plus "last", b the n rows.
    if rows_b as u64 != n || rows_a as u64 != n + u64::from(n > 0) {
        return Err(format!("not a prefix: {n} batches, rows a={rows_a} b={rows_b}").into());
    }
    Ok(n)
}

/// The WAL segment files of `dir`, sorted.
pub(crate) fn segments(dir: &Path) -> TestResult<Vec<std::path::PathBuf>> {
    let mut v: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("wal-") && n.ends_with(".log"))
        })
        .collect();
    v.sort();
    Ok(v)
}
