//! Flush folding (`fold.rs`): a table's fold rewrites each row as a flush writes it; reads of
//! the flushed data, snapshots taken before the flush, and a fold that breaks the contract.

use std::sync::Arc;

use strata_engine::{
    Db, DbOptions, FlushFold, FlushFolder, FoldEntry, FoldKind, FoldOut, ScanOptions, SyncPolicy,
    TableOptions, WriteBatch,
};

use crate::TestResult;

/// Folds a row's visible puts into one cell `"all"` holding `column=value;` pairs, keeping
/// row tombstones as they are.
struct Concat;

impl FlushFold for Concat {
    fn fold(&self, _row: &[u8], entries: &[FoldEntry<'_>]) -> Option<Vec<FoldOut>> {
        let mut out = Vec::new();
        let mut deleted_before = 0;
        let mut value = Vec::new();
        let mut last_col: Option<&[u8]> = None;
        let mut seq = 0;
        for (i, e) in entries.iter().enumerate() {
            match e.kind {
                FoldKind::DeleteRow => {
                    deleted_before = deleted_before.max(e.seq);
                    out.push(FoldOut::Keep(i));
                }
                FoldKind::DeleteCell => return None,
                FoldKind::Put => {
                    // Newest first within a column: the first visible version wins.
                    if e.seq < deleted_before || last_col == Some(e.column) {
                        continue;
                    }
                    last_col = Some(e.column);
                    value.extend_from_slice(e.column);
                    value.push(b'=');
                    value.extend_from_slice(e.value);
                    value.push(b';');
                    seq = seq.max(e.seq);
                }
            }
        }
        if value.is_empty() {
            return None;
        }
        out.push(FoldOut::Put {
            column: b"all".to_vec(),
            value,
            seq,
        });
        Some(out)
    }
}

/// Returns its output backwards: always out of order.
struct Backwards;

impl FlushFold for Backwards {
    fn fold(&self, _row: &[u8], entries: &[FoldEntry<'_>]) -> Option<Vec<FoldOut>> {
        (entries.len() >= 2).then(|| (0..entries.len()).rev().map(FoldOut::Keep).collect())
    }
}

fn options() -> DbOptions {
    DbOptions {
        sync: SyncPolicy::Interval(std::time::Duration::from_millis(50)),
        ..DbOptions::default()
    }
}

fn table_opts(fold: Arc<dyn FlushFold>) -> TableOptions {
    TableOptions {
        flush_fold: Some(FlushFolder(fold)),
        ..TableOptions::default()
    }
}

#[test]
fn a_flush_writes_what_the_fold_returns() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), options())?;
    let t = db.open_table("t", table_opts(Arc::new(Concat)))?;
    let plain = db.open_table("plain", TableOptions::default())?;
    let mut b = WriteBatch::new();
    b.put(&t, b"r1", b"a", b"1");
    b.put(&t, b"r1", b"b", b"2");
    b.put(&plain, b"r1", b"a", b"1");
    db.write(&b)?;
    let mut b = WriteBatch::new();
    b.put(&t, b"r1", b"a", b"3");
    b.delete_row(&t, b"r2");
    db.write(&b)?;
    let mut b = WriteBatch::new();
    b.put(&t, b"r2", b"x", b"9");
    db.write(&b)?;
    let before = db.snapshot();
    db.flush()?;
    let stats = db.stats();
    assert_eq!(stats.rows_folded, 2, "{stats:?}");
    assert_eq!(stats.folds_rejected, 0);
    // Reads after the flush see the folded cell; the other table is untouched.
    assert_eq!(
        db.get(&t, b"r1", b"all")?.as_deref(),
        Some(&b"a=3;b=2;"[..])
    );
    assert_eq!(db.get(&t, b"r1", b"a")?, None);
    assert_eq!(db.get(&t, b"r2", b"all")?.as_deref(), Some(&b"x=9;"[..]));
    assert_eq!(db.get(&plain, b"r1", b"a")?.as_deref(), Some(&b"1"[..]));
    // A snapshot from before the flush still reads the memtable it pinned.
    assert_eq!(before.get(&t, b"r1", b"a")?.as_deref(), Some(&b"3"[..]));
    // The row tombstone was kept and still hides older data of r2 after compaction.
    db.compact_all()?;
    let rows: Vec<_> = db
        .scan(&t, &ScanOptions::default())?
        .collect::<Result<Vec<_>, _>>()?;
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1].cells.len(), 1);
    // And the data survives a reopen.
    drop(before);
    db.close()?;
    let db = Db::open(dir.path(), options())?;
    let t = db.open_table("t", table_opts(Arc::new(Concat)))?;
    assert_eq!(
        db.get(&t, b"r1", b"all")?.as_deref(),
        Some(&b"a=3;b=2;"[..])
    );
    Ok(())
}

#[test]
fn a_fold_that_breaks_the_contract_is_ignored() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), options())?;
    let t = db.open_table("t", table_opts(Arc::new(Backwards)))?;
    let mut b = WriteBatch::new();
    b.put(&t, b"r", b"a", b"1");
    b.put(&t, b"r", b"b", b"2");
    b.put(&t, b"s", b"a", b"3");
    db.write(&b)?;
    db.flush()?;
    let stats = db.stats();
    assert_eq!(stats.folds_rejected, 1, "{stats:?}");
    assert_eq!(stats.rows_folded, 0, "{stats:?}");
    assert_eq!(db.get(&t, b"r", b"a")?.as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(&t, b"r", b"b")?.as_deref(), Some(&b"2"[..]));
    assert_eq!(db.get(&t, b"s", b"a")?.as_deref(), Some(&b"3"[..]));
    Ok(())
}
