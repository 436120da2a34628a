//! The database under random injected file faults, against a model of every cell's history.
//!
//! Random workloads (writes, flushes, compactions, reopens) run while random faults are armed
//! and cleared: EIO or ENOSPC on the n-th create, write, fsync, directory fsync or rename of
//! the WAL, the SSTs or the manifest, torn or not, once or until cleared. A write that
//! returned `Ok` is acknowledged (the sync policy is `always`); one that failed may or may not
//! have happened. The checks:
//!
//! (a) every acknowledged write survives, in the open database and after a reopen with the
//!     faults cleared: a cell holds the value of its last acknowledged write, or of a failed
//!     write after it;
//! (b) a reopen never meets a file it cannot read;
//! (c) an operation during which an injected fault fired on the test's thread returned an
//!     error (the variant whose memtables freeze only in `Db::flush`: a freeze inside a write
//!     may be refused for a full disk while the write itself succeeds);
//! and a write-failed database refuses every write, while one with no fault armed and no
//! failed WAL takes them.

use std::collections::BTreeMap;

use proptest::prelude::*;
use strata_engine::{
    Db, DbOptions, ErrorKind, Fault, FaultError, FaultFile, FaultOp, Faults, ScanOptions,
    SyncPolicy, Table, TableOptions, WriteBatch,
};

#[derive(Debug, Clone)]
enum Step {
    Put(bool, u8, u8, u8),
    Delete(bool, u8, u8),
    DeleteRow(bool, u8),
    Commit,
    Flush,
    Compact,
    Arm(Fault),
    Clear,
    Reopen,
}

fn fault() -> impl Strategy<Value = Fault> {
    let op = prop_oneof![
        Just(FaultOp::Create),
        Just(FaultOp::Write),
        Just(FaultOp::Sync),
        Just(FaultOp::SyncDir),
        Just(FaultOp::Rename),
    ];
    let file = prop_oneof![
        Just(FaultFile::Any),
        Just(FaultFile::Wal),
        Just(FaultFile::Sst),
        Just(FaultFile::Manifest),
    ];
    let error = prop_oneof![Just(FaultError::Io), Just(FaultError::NoSpace)];
    (
        op,
        file,
        0u64..4,
        error,
        any::<bool>(),
        prop::bool::weighted(0.3),
    )
        .prop_map(|(op, file, after, error, torn, sticky)| {
            let mut f = Fault::new(op, error).on(file).after(after);
            if torn {
                f = f.torn();
            }
            if sticky {
                f = f.sticky();
            }
            f
        })
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => (any::<bool>(), 0u8..5, 0u8..3, any::<u8>())
            .prop_map(|(t, r, c, v)| Step::Put(t, r, c, v)),
        2 => (any::<bool>(), 0u8..5, 0u8..3).prop_map(|(t, r, c)| Step::Delete(t, r, c)),
        1 => (any::<bool>(), 0u8..5).prop_map(|(t, r)| Step::DeleteRow(t, r)),
        5 => Just(Step::Commit),
        2 => Just(Step::Flush),
        1 => Just(Step::Compact),
        4 => fault().prop_map(Step::Arm),
        2 => Just(Step::Clear),
        1 => Just(Step::Reopen),
    ]
}

/// A cell: table flag, row, column.
type CellKey = (bool, u8, u8);

/// A write to a cell: the value (`None`: deleted) and whether it was acknowledged.
type CellWrite = (Option<Vec<u8>>, bool);

/// Each cell's writes in log order.
#[derive(Debug, Default)]
struct Model {
    cells: BTreeMap<CellKey, Vec<CellWrite>>,
}

impl Model {
    /// Records a committed batch (its last effect on each cell) as acknowledged or not.
    fn commit(&mut self, batch: &BTreeMap<CellKey, Option<Vec<u8>>>, acked: bool) {
        for (k, v) in batch {
            self.cells.entry(*k).or_default().push((v.clone(), acked));
        }
    }

    /// The values cell `k` may hold: that of its last acknowledged write (absent if none),
    /// or that of any failed write after it.
    fn allowed(&self, k: &CellKey) -> Vec<Option<Vec<u8>>> {
        let hist = self.cells.get(k).map(Vec::as_slice).unwrap_or(&[]);
        let last = hist.iter().rposition(|(_, acked)| *acked);
        let mut out = vec![last.and_then(|i| hist[i].0.clone())];
        out.extend(
            hist[last.map_or(0, |i| i + 1)..]
                .iter()
                .map(|(v, _)| v.clone()),
        );
        out
    }

    /// After a reopen: each cell's value is now what the database holds.
    fn settle(&mut self, found: &BTreeMap<CellKey, Vec<u8>>) {
        for (k, hist) in &mut self.cells {
            *hist = vec![(found.get(k).cloned(), true)];
        }
    }
}

fn key(i: u8) -> Vec<u8> {
    vec![b'k', i]
}

fn tables(db: &Db) -> strata_engine::Result<(Table, Table)> {
    Ok((
        db.open_table("a", TableOptions::default())?,
        db.open_table("b", TableOptions::default())?,
    ))
}

/// Every cell of both tables.
fn dump(db: &Db) -> strata_engine::Result<BTreeMap<CellKey, Vec<u8>>> {
    let (a, b) = tables(db)?;
    let mut out = BTreeMap::new();
    for (flag, t) in [(false, &a), (true, &b)] {
        for row in db.scan(t, &ScanOptions::default())? {
            let row = row?;
            for c in &row.cells {
                out.insert((flag, row.key[1], c.column[1]), c.value.to_vec());
            }
        }
    }
    Ok(out)
}

/// Checks (a): every cell the database holds, and every cell of the model, as allowed.
fn check(db: &Db, model: &Model) -> Result<BTreeMap<CellKey, Vec<u8>>, TestCaseError> {
    let found = dump(db).map_err(|e| TestCaseError::fail(format!("reading: {e}")))?;
    for (k, v) in &found {
        prop_assert!(
            model.allowed(k).contains(&Some(v.clone())),
            "cell {k:?} holds {v:?}, allowed {:?}",
            model.allowed(k)
        );
    }
    for k in model.cells.keys() {
        let got = found.get(k).cloned();
        prop_assert!(
            model.allowed(k).contains(&got),
            "cell {k:?} holds {got:?}, allowed {:?}",
            model.allowed(k)
        );
    }
    Ok(found)
}

fn run(
    steps: &[Step],
    tune: fn(DbOptions) -> DbOptions,
    check_c: bool,
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
    let open = |faults: &Faults| {
        let opts = DbOptions {
            sync: SyncPolicy::Always,
            wal_segment_bytes: 400,
            // No stall: a write stalled behind a flush failing until cleared would hang.
            max_frozen_memtables: 1 << 20,
            l0_stall_files: 1 << 20,
            faults: faults.clone(),
            ..DbOptions::default()
        };
        Db::open(dir.path(), tune(opts))
    };
    let fail = |what: &str| {
        let what = what.to_string();
        move |e: strata_engine::Error| TestCaseError::fail(format!("{what}: {e}"))
    };
    let mut faults = Faults::new();
    let mut db = open(&faults).map_err(fail("open"))?;
    let (mut a, mut b) = tables(&db).map_err(fail("tables"))?;
    let mut model = Model::default();
    let mut batch = WriteBatch::new();
    let mut pending: BTreeMap<CellKey, Option<Vec<u8>>> = BTreeMap::new();
    let mut armed = false;
    for s in steps {
        let t = |flag: bool| if flag { b.clone() } else { a.clone() };
        let fired = faults.fired_on_this_thread();
        let failed_before = db.stats().write_failed;
        let outcome = match s {
            Step::Put(f, r, c, v) => {
                batch.put(&t(*f), &key(*r), &key(*c), &[*v]);
                pending.insert((*f, *r, *c), Some(vec![*v]));
                None
            }
            Step::Delete(f, r, c) => {
                batch.delete(&t(*f), &key(*r), &key(*c));
                pending.insert((*f, *r, *c), None);
                None
            }
            Step::DeleteRow(f, r) => {
                batch.delete_row(&t(*f), &key(*r));
                // Every cell the row may hold, written or pending.
                for c in 0..3 {
                    pending.insert((*f, *r, c), None);
                }
                None
            }
            Step::Commit => {
                let result = db.write(&batch);
                let empty = batch.is_empty();
                if !empty {
                    model.commit(&pending, result.is_ok());
                }
                batch.clear();
                pending.clear();
                if let Err(e) = &result {
                    prop_assert!(
                        matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Server),
                        "{e}"
                    );
                }
                if failed_before && !empty {
                    prop_assert!(result.is_err(), "a write-failed database took a write");
                } else if !armed {
                    // (A retry that met a fault before the clear may fail the WAL meanwhile.)
                    prop_assert!(
                        result.is_ok() || db.stats().write_failed,
                        "no fault armed, yet {result:?}"
                    );
                }
                Some(result)
            }
            Step::Flush => Some(db.flush()),
            Step::Compact => Some(db.compact_all()),
            Step::Arm(f) => {
                faults.arm(*f);
                armed = true;
                None
            }
            Step::Clear => {
                faults.clear();
                armed = false;
                None
            }
            Step::Reopen => {
                faults.clear();
                drop(db);
                batch.clear();
                pending.clear();
                // (b): the files are all readable.
                faults = Faults::new();
                armed = false;
                db = open(&faults).map_err(fail("reopen"))?;
                (a, b) = tables(&db).map_err(fail("tables"))?;
                let found = check(&db, &model)?;
                model.settle(&found);
                None
            }
        };
        if check_c && let Some(result) = &outcome {
            prop_assert!(
                faults.fired_on_this_thread() == fired || result.is_err(),
                "{s:?} met an injected fault and returned Ok"
            );
        }
        // Reads go on whatever failed.
        check(&db, &model)?;
    }
    faults.clear();
    drop(db);
    let db = open(&Faults::default()).map_err(fail("final reopen"))?;
    check(&db, &model)?;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Memtables freeze only in `Db::flush`, and compactions run only in `Db::compact_all`:
    /// every fault on the test's thread hits the step that runs, which must fail.
    #[test]
    fn faults_never_lose_acknowledged_writes(steps in proptest::collection::vec(step(), 1..70)) {
        run(&steps, |o| DbOptions { l0_compaction_trigger: 1 << 20, ..o }, true)?;
    }

    /// Tiny memtables and levels: flushes and compactions also run (and fail, and retry) in
    /// the background.
    #[test]
    fn faults_in_background_work_never_lose_acknowledged_writes(
        steps in proptest::collection::vec(step(), 1..70)
    ) {
        run(&steps, crate::tiny_levels, false)?;
    }
}
