//! The database against a `BTreeMap` model, with reopen steps: whatever was written, deleted
//! and replayed from the WAL reads back as the model says.

use std::collections::BTreeMap;

use proptest::prelude::*;
use strata_engine::{Db, ScanOptions, SyncPolicy, WriteBatch};

use crate::{options, tables};

#[derive(Debug, Clone)]
enum Step {
    Put(bool, u8, u8, Vec<u8>),
    Delete(bool, u8, u8),
    DeleteRow(bool, u8),
    /// Commit the current batch.
    Commit,
    Reopen,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (any::<bool>(), 0u8..6, 0u8..4, proptest::collection::vec(any::<u8>(), 0..8))
            .prop_map(|(t, r, c, v)| Step::Put(t, r, c, v)),
        2 => (any::<bool>(), 0u8..6, 0u8..4).prop_map(|(t, r, c)| Step::Delete(t, r, c)),
        1 => (any::<bool>(), 0u8..6).prop_map(|(t, r)| Step::DeleteRow(t, r)),
        3 => Just(Step::Commit),
        1 => Just(Step::Reopen),
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
        Step::Commit | Step::Reopen => {}
    }
}

fn dump(db: &Db) -> Result<Model, strata_engine::Error> {
    let (a, b) = tables(db)?;
    let mut out = Model::new();
    for (flag, t) in [(false, &a), (true, &b)] {
        for row in db.scan(t, &ScanOptions::default())? {
            let row = row?;
            let cells = row
                .cells
                .iter()
                .map(|c| (c.column.to_vec(), c.value.to_vec()))
                .collect();
            out.insert((flag, row.key.to_vec()), cells);
        }
    }
    Ok(out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn db_matches_a_btreemap_across_reopens(steps in proptest::collection::vec(step(), 1..60)) {
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let open = || Db::open(dir.path(), options(SyncPolicy::Always, 512));
        let fail = |e: strata_engine::Error| TestCaseError::fail(e.to_string());
        let mut db = open().map_err(fail)?;
        let mut model = Model::new();
        let mut pending = Model::new();
        let mut batch = WriteBatch::new();
        for s in &steps {
            let (a, b) = tables(&db).map_err(fail)?;
            let t = |flag: bool| if flag { b.clone() } else { a.clone() };
            match s {
                Step::Put(f, r, c, v) => batch.put(&t(*f), &key(*r), &key(*c), v),
                Step::Delete(f, r, c) => batch.delete(&t(*f), &key(*r), &key(*c)),
                Step::DeleteRow(f, r) => batch.delete_row(&t(*f), &key(*r)),
                Step::Commit => {
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
            }
            apply(&mut pending, s);
            prop_assert_eq!(&dump(&db).map_err(fail)?, &model);
        }
    }
}
