//! The database against a `BTreeMap` model, with reopen, flush and compaction steps: whatever
//! was written, deleted, flushed to SSTs, compacted and replayed from the WAL reads back as the
//! model says. One variant uses tiny memtables so that flushes also happen on their own, and
//! one commits some batches with `Db::write_queued`.

use std::collections::BTreeMap;

use proptest::prelude::*;
use std::sync::Arc;
use std::time::Duration;

use strata_engine::object_store::memory::InMemory;
use strata_engine::{
    Db, DbOptions, ObjectStorage, ScanOptions, Storage, SyncPolicy, Table, TableOptions, WriteBatch,
};

use crate::{options, tiny_levels};

/// The two tables; `b` has tiny blocks, so that rows, and the batched gets' cursors, cross
/// block boundaries.
fn tables(db: &Db) -> Result<(Table, Table), strata_engine::Error> {
    let tiny = TableOptions {
        block_bytes: 48,
        ..TableOptions::default()
    };
    Ok((
        db.open_table("a", TableOptions::default())?,
        db.open_table("b", tiny)?,
    ))
}

/// A row's cells as the model holds them.
fn cells(row: &strata_engine::Row) -> BTreeMap<Vec<u8>, Vec<u8>> {
    row.cells
        .iter()
        .map(|c| (c.column.to_vec(), c.value.to_vec()))
        .collect()
}

#[derive(Debug, Clone)]
enum Step {
    Put(bool, u8, u8, Vec<u8>),
    Delete(bool, u8, u8),
    DeleteRow(bool, u8),
    /// Commit the current batch.
    Commit,
    /// Queue the current batch with `Db::write_queued` (a plain commit under the sync policy
    /// `always`). What reads see is then unsettled until the next step.
    CommitQueued,
    Reopen,
    Flush,
    Compact,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (any::<bool>(), 0u8..6, 0u8..4, proptest::collection::vec(any::<u8>(), 0..8))
            .prop_map(|(t, r, c, v)| Step::Put(t, r, c, v)),
        2 => (any::<bool>(), 0u8..6, 0u8..4).prop_map(|(t, r, c)| Step::Delete(t, r, c)),
        1 => (any::<bool>(), 0u8..6).prop_map(|(t, r)| Step::DeleteRow(t, r)),
        3 => Just(Step::Commit),
        2 => Just(Step::CommitQueued),
        1 => Just(Step::Reopen),
        1 => Just(Step::Flush),
        1 => Just(Step::Compact),
    ]
}

type Model = BTreeMap<(bool, Vec<u8>), BTreeMap<Vec<u8>, Vec<u8>>>;

fn key(i: u8) -> Vec<u8> {
    vec![b'k', i]
}

fn apply(model: &mut Model, s: &Step) {
    match s {
        Step::Put(t, r, c, v) => {
            model
                .entry((*t, key(*r)))
                .or_default()
                .insert(key(*c), v.clone());
        }
        Step::Delete(t, r, c) => {
            if let Some(row) = model.get_mut(&(*t, key(*r))) {
                row.remove(&key(*c));
                if row.is_empty() {
                    model.remove(&(*t, key(*r)));
                }
            }
        }
        Step::DeleteRow(t, r) => {
            model.remove(&(*t, key(*r)));
        }
        Step::Commit | Step::CommitQueued | Step::Reopen | Step::Flush | Step::Compact => {}
    }
}

fn dump(db: &Db) -> Result<Model, strata_engine::Error> {
    let (a, b) = tables(db)?;
    let mut out = Model::new();
    for (flag, t) in [(false, &a), (true, &b)] {
        for row in db.scan(t, &ScanOptions::default())? {
            let row = row?;
            out.insert((flag, row.key.to_vec()), cells(&row));
        }
    }
    Ok(out)
}

fn run(steps: &[Step], tune: impl Fn(DbOptions) -> DbOptions) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
    let open = || Db::open(dir.path(), tune(options(SyncPolicy::Always, 512)));
    // Queued batches may still wait after a `CommitQueued` step: a later write, a flush and
    // a reopen must take them in order; other steps settle first.
    let mut unsettled = false;
    let fail = |e: strata_engine::Error| TestCaseError::fail(e.to_string());
    let mut db = open().map_err(fail)?;
    let mut model = Model::new();
    let mut pending = Model::new();
    let mut batch = WriteBatch::new();
    for s in steps {
        let (a, b) = tables(&db).map_err(fail)?;
        let mut wrote = false;
        let t = |flag: bool| if flag { b.clone() } else { a.clone() };
        match s {
            Step::Put(f, r, c, v) => batch.put(&t(*f), &key(*r), &key(*c), v),
            Step::Delete(f, r, c) => batch.delete(&t(*f), &key(*r), &key(*c)),
            Step::DeleteRow(f, r) => batch.delete_row(&t(*f), &key(*r)),
            Step::Commit => {
                // A write waits for the batches queued before it; an empty one writes nothing.
                wrote = !batch.is_empty();
                db.write(&batch).map_err(fail)?;
                batch.clear();
                model = pending.clone();
            }
            Step::Reopen => {
                // The uncommitted batch is dropped with the handle.
                batch.clear();
                pending = model.clone();
                drop(db);
                db = open().map_err(fail)?;
            }
            Step::CommitQueued => {
                db.write_queued(&mut batch).map_err(fail)?;
                batch.clear();
                model = pending.clone();
            }
            Step::Flush => db.flush().map_err(fail)?,
            Step::Compact => db.compact_all().map_err(fail)?,
        }
        apply(&mut pending, s);
        match s {
            Step::CommitQueued => {
                unsettled = true;
                continue;
            }
            Step::Flush | Step::Reopen => {}
            Step::Commit if wrote => {}
            _ if unsettled => db.settle().map_err(fail)?,
            _ => {}
        }
        unsettled = false;
        prop_assert_eq!(&dump(&db).map_err(fail)?, &model);
        for flag in [false, true] {
            for r in 0..6 {
                for c in 0..4 {
                    let want = model.get(&(flag, key(r))).and_then(|row| row.get(&key(c)));
                    let got = db.get(&t(flag), &key(r), &key(c)).map_err(fail)?;
                    prop_assert_eq!(got.as_deref(), want.map(|v| &v[..]));
                }
            }
            // Batched gets: every row, every other row (cursors move on within and across
            // blocks and files), and rows out of order (each read alone).
            let snap = db.snapshot();
            for rows in [vec![0u8, 1, 2, 3, 4, 5, 6], vec![1, 3, 5], vec![5, 2, 0]] {
                let keys: Vec<Vec<u8>> = rows.iter().map(|&r| key(r)).collect();
                let mut got = Vec::new();
                snap.get_rows_with(&t(flag), &keys, false, |i, row| {
                    got.push((i, row.key.to_vec(), cells(&row)));
                })
                .map_err(fail)?;
                let want: Vec<_> = keys
                    .iter()
                    .enumerate()
                    .filter_map(|(i, k)| {
                        model
                            .get(&(flag, k.clone()))
                            .map(|r| (i, k.clone(), r.clone()))
                    })
                    .collect();
                prop_assert_eq!(got, want);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn db_matches_a_btreemap_across_reopens(steps in proptest::collection::vec(step(), 1..60)) {
        run(&steps, |o| o)?;
    }

    #[test]
    fn db_with_tiny_memtables_matches_a_btreemap(steps in proptest::collection::vec(step(), 1..80)) {
        run(&steps, |o| DbOptions { memtable_bytes: 200, ..o })?;
    }

    /// Batches queued for real (the sync policy is an interval), with tiny memtables so that
    /// queued batches also freeze them.
    #[test]
    fn db_with_queued_writes_matches_a_btreemap(steps in proptest::collection::vec(step(), 1..80)) {
        run(&steps, |o| DbOptions {
            sync: SyncPolicy::Interval(Duration::from_millis(50)),
            memtable_bytes: 300,
            ..o
        })?;
    }

    /// Tiny levels and files too, so that compactions run through several levels and cut
    /// their outputs.
    #[test]
    fn db_with_tiny_levels_matches_a_btreemap(steps in proptest::collection::vec(step(), 1..80)) {
        run(&steps, tiny_levels)?;
    }

    /// On an object store, with tiny levels and a disk cache of 2 KiB (so files are evicted
    /// and read again, some by ranges), superseded objects deleted at once, and every reopen
    /// claiming a new epoch.
    #[test]
    fn db_on_an_object_store_matches_a_btreemap(steps in proptest::collection::vec(step(), 1..80)) {
        let store = Arc::new(InMemory::new());
        let cache = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        run(&steps, |o| {
            let mut object = ObjectStorage::new(store.clone(), "model", cache.path(), 2 << 10);
            object.delete_delay = Duration::ZERO;
            tiny_levels(DbOptions {
                storage: Storage::Object(object),
                ..o
            })
        })?;
    }
}
