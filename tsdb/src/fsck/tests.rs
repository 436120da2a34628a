//! Damaged copies of real databases: points written with a real [`Tsdb`], then the tables
//! damaged through the engine. Each problem is found with its table and key, and a repair
//! leaves a database that checks clean, opens and serves the intact points.

use std::path::Path;

use strata_engine::{Db, DbOptions, ScanOptions, WriteBatch};

use super::*;
use crate::cell::{encode_column, encode_value};
use crate::error::Error;
use crate::rowkey::RowKey;
use crate::{PointRef, Tsdb, TsdbOptions};

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

const HOUR: i64 = 1_356_998_400;
const HOSTS: [&str; 3] = ["a", "b", "c"];

/// Points per series: two hours at 60 s row-compacted, then 10 raw points in a third hour
/// flushed (partial blocks), then 5 more left in the WAL.
const POINTS_PER_SERIES: usize = 120 + 10 + 5;

fn write(tsdb: &Tsdb, times: impl Iterator<Item = i64> + Clone) -> Result<()> {
    for host in HOSTS {
        let tags = [("host", host)];
        let points: Vec<PointRef<'_>> = times
            .clone()
            .map(|t| PointRef {
                metric: "cpu",
                tags: &tags,
                timestamp: t,
                value: if t % 120 == 0 {
                    Value::Float(t as f64 / 7.0)
                } else {
                    Value::Int(t)
                },
            })
            .collect();
        for r in tsdb.write(&points) {
            r?;
        }
    }
    Ok(())
}

fn build(dir: &Path) -> Result<()> {
    let tsdb = Tsdb::open(dir, TsdbOptions::default())?;
    write(&tsdb, (0..120).map(|i| HOUR + i * 60))?;
    tsdb.rowcompact_all()?;
    write(&tsdb, (0..10).map(|i| HOUR + 7200 + i * 60))?;
    tsdb.flush()?;
    write(&tsdb, (10..15).map(|i| HOUR + 7200 + i * 60))?;
    tsdb.sync()
}

fn engine(dir: &Path) -> Result<Db> {
    Ok(Db::open(dir, DbOptions::default())?)
}

/// Points of each host's series, as a reopened [`Tsdb`] reads them.
fn points(dir: &Path) -> Result<Vec<usize>> {
    let tsdb = Tsdb::open(dir, TsdbOptions::default())?;
    let mut out = Vec::new();
    for host in HOSTS {
        let f = crate::Filter::new(crate::FilterKind::LiteralOr, "host", host, false)?;
        let series = tsdb.read(&crate::ReadRequest::metric("cpu", &[f], 0, i64::MAX))?;
        out.push(series.iter().map(|s| s.points.len()).sum());
    }
    Ok(out)
}

fn put(db: &Db, table: &str, row: &[u8], column: &[u8], value: &[u8]) -> Result<()> {
    let t = db
        .table(table)
        .ok_or_else(|| Error::InvalidArgument(table.into()))?;
    let mut b = WriteBatch::new();
    b.put(&t, row, column, value);
    Ok(db.write_sync(&b)?)
}

fn delete_cell(db: &Db, table: &str, row: &[u8], column: &[u8]) -> Result<()> {
    let t = db
        .table(table)
        .ok_or_else(|| Error::InvalidArgument(table.into()))?;
    let mut b = WriteBatch::new();
    b.delete(&t, row, column);
    Ok(db.write_sync(&b)?)
}

fn delete_row(db: &Db, table: &str, row: &[u8]) -> Result<()> {
    let t = db
        .table(table)
        .ok_or_else(|| Error::InvalidArgument(table.into()))?;
    let mut b = WriteBatch::new();
    b.delete_row(&t, row);
    Ok(db.write_sync(&b)?)
}

/// The first data row with a main block.
fn compacted_row(db: &Db) -> Result<Vec<u8>> {
    let t = db
        .table(DATA_TABLE)
        .ok_or_else(|| Error::InvalidArgument("tsdb".into()))?;
    for row in db.scan(&t, &ScanOptions::default())? {
        let row = row?;
        if row.cells.first().is_some_and(|c| c.column.is_empty()) {
            return Ok(row.key.to_vec());
        }
    }
    Err(Error::InvalidArgument("no compacted row".into()))
}

/// Runs a repair into `lost_found`, then checks the database checks clean.
fn repair_clean(dir: &Path, lost_found: &Path) -> Result<Vec<FsckRepaired>> {
    let db = engine(dir)?;
    let report = fsck(&db)?;
    let done = fsck_repair(&db, &report, lost_found)?;
    let after = fsck(&db)?;
    assert_eq!(after.problems, vec![], "after {done:?}");
    Ok(done)
}

fn only(report: &FsckReport) -> &FsckProblem {
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    &report.problems[0]
}

#[test]
fn a_clean_database_has_no_problems() -> TestResult {
    let dir = tempfile::tempdir()?;
    build(dir.path())?;
    let report = fsck(&engine(dir.path())?)?;
    assert_eq!(report.problems, vec![]);
    let c = report.counts;
    assert_eq!(c.points, (POINTS_PER_SERIES * HOSTS.len()) as u64);
    assert_eq!((c.rows, c.series, c.data_series), (9, 3, 3));
    assert_eq!(c.uids, 1 + 1 + 3);
    assert!(c.markers >= 3, "{c:?}");
    assert_eq!(points(dir.path())?, vec![POINTS_PER_SERIES; 3]);
    Ok(())
}

#[test]
fn a_corrupt_block_is_found_and_repair_keeps_the_other_points() -> TestResult {
    let dir = tempfile::tempdir()?;
    build(dir.path())?;
    let key = {
        let db = engine(dir.path())?;
        let key = compacted_row(&db)?;
        put(&db, DATA_TABLE, &key, b"", b"\x01\x05garbage")?;
        // A raw cell past the row's hour, in the same row.
        put(&db, DATA_TABLE, &key, &[0x37, 0, 0], &[0, 1])?;
        let report = fsck(&db)?;
        assert_eq!(report.problems.len(), 2, "{:?}", report.problems);
        for p in &report.problems {
            assert_eq!((p.table, &p.row), (DATA_TABLE, &key));
            assert_eq!(p.remedy, FsckRemedy::RewriteRow);
        }
        assert_eq!(report.problems[0].column.as_deref(), Some(&b""[..]));
        assert_eq!(
            report.problems[1].column.as_deref(),
            Some(&[0x37, 0, 0][..])
        );
        key
    };
    let lost = dir.path().join("lost+found");
    let done = repair_clean(dir.path(), &lost)?;
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0].row, key);
    let saved = std::fs::read_to_string(lost.join(SAVED_CELLS))?;
    assert!(saved.contains(&crate::error::hex_upper(&key)), "{saved}");
    let mut got = points(dir.path())?;
    got.sort_unstable();
    // One hour's block of one series is gone; the rest reads.
    assert_eq!(
        got,
        vec![POINTS_PER_SERIES - 60, POINTS_PER_SERIES, POINTS_PER_SERIES]
    );
    Ok(())
}

#[test]
fn a_block_point_outside_its_hour_is_found() -> TestResult {
    let dir = tempfile::tempdir()?;
    build(dir.path())?;
    let db = engine(dir.path())?;
    let key = compacted_row(&db)?;
    let mut block = Vec::new();
    crate::block::encode_block(&[(1000, Value::Int(1))], &mut block)?;
    put(&db, DATA_TABLE, &key, b"", &block)?;
    let p = only(&fsck(&db)?).clone();
    assert!(p.detail.contains("outside the row's hour"), "{}", p.detail);
    Ok(())
}

#[test]
fn a_missing_reverse_uid_mapping_is_restored() -> TestResult {
    let dir = tempfile::tempdir()?;
    build(dir.path())?;
    {
        let db = engine(dir.path())?;
        let uid = db
            .get(
                &db.table(UID_TABLE).ok_or("uid")?,
                b"cpu",
                UidKind::Metric.id_column(),
            )?
            .ok_or("no uid")?;
        delete_cell(&db, UID_TABLE, &uid, UidKind::Metric.name_column())?;
        let report = fsck(&db)?;
        let uid = Uid::from_bytes(&uid).ok_or("bad uid")?;
        // The UID table, and the series that use the UID.
        assert_eq!(report.problems[0].table, UID_TABLE);
        assert_eq!(report.problems[0].row, b"cpu");
        assert_eq!(
            report.problems[0].remedy,
            FsckRemedy::AddUidName {
                kind: UidKind::Metric,
                uid,
                name: "cpu".into()
            }
        );
        assert!(
            report.problems[1..]
                .iter()
                .all(|p| p.remedy == FsckRemedy::None)
        );
        assert_eq!(report.problems.len(), 4, "{:?}", report.problems);
    }
    repair_clean(dir.path(), &dir.path().join("lost+found"))?;
    assert_eq!(points(dir.path())?, vec![POINTS_PER_SERIES; 3]);
    Ok(())
}

#[test]
fn a_bad_uid_cell_and_a_low_counter_are_repaired_so_the_database_opens() -> TestResult {
    let dir = tempfile::tempdir()?;
    build(dir.path())?;
    {
        let db = engine(dir.path())?;
        put(&db, UID_TABLE, b"mem", UidKind::Metric.id_column(), b"xx")?;
        put(
            &db,
            UID_TABLE,
            crate::uid::COUNTER_ROW,
            UidKind::Tagv.max_column(),
            &1u64.to_be_bytes(),
        )?;
    }
    assert!(Tsdb::open(dir.path(), TsdbOptions::default()).is_err());
    let report = fsck(&engine(dir.path())?)?;
    let remedies: Vec<&FsckRemedy> = report.problems.iter().map(|p| &p.remedy).collect();
    assert_eq!(
        remedies,
        vec![
            &FsckRemedy::DeleteCell,
            &FsckRemedy::RaiseUidCounter {
                kind: UidKind::Tagv,
                to: 3
            }
        ]
    );
    repair_clean(dir.path(), &dir.path().join("lost+found"))?;
    assert_eq!(points(dir.path())?, vec![POINTS_PER_SERIES; 3]);
    Ok(())
}

#[test]
fn a_garbage_dirty_marker_is_removed() -> TestResult {
    let dir = tempfile::tempdir()?;
    build(dir.path())?;
    let key = meta::key(meta::DIRTY_PREFIX, b"garbage");
    {
        let db = engine(dir.path())?;
        put(
            &db,
            META_TABLE,
            &key,
            meta::DIRTY_COLUMN,
            &0u64.to_be_bytes(),
        )?;
        let p = only(&fsck(&db)?).clone();
        assert_eq!(
            (p.table, &p.row, &p.remedy),
            (META_TABLE, &key, &FsckRemedy::DeleteRow)
        );
    }
    repair_clean(dir.path(), &dir.path().join("lost+found"))?;
    Ok(())
}

#[test]
fn an_unindexed_series_is_indexed() -> TestResult {
    let dir = tempfile::tempdir()?;
    build(dir.path())?;
    {
        let db = engine(dir.path())?;
        let last = 2u32.to_be_bytes();
        let t = db.table(META_TABLE).ok_or("meta")?;
        let tsuid = db
            .get(
                &t,
                &meta::key(meta::SERIES_BY_ID_PREFIX, &last),
                meta::SERIES_TSUID_COLUMN,
            )?
            .ok_or("no i row")?;
        for key in [
            meta::key(meta::SERIES_BY_ID_PREFIX, &last),
            meta::key(meta::SERIES_BY_TSUID_PREFIX, &tsuid),
            meta::key(meta::LAST_PREFIX, &last),
        ] {
            delete_row(&db, META_TABLE, &key)?;
        }
        let report = fsck(&db)?;
        let p = only(&report);
        assert_eq!((p.table, &p.remedy), (DATA_TABLE, &FsckRemedy::IndexSeries));
        assert_eq!(RowKey::decode(&p.row)?.tsuid.as_bytes(), &tsuid[..]);
    }
    assert_eq!(points(dir.path())?.iter().filter(|n| **n == 0).count(), 1);
    repair_clean(dir.path(), &dir.path().join("lost+found"))?;
    assert_eq!(points(dir.path())?, vec![POINTS_PER_SERIES; 3]);
    let tsdb = Tsdb::open(dir.path(), TsdbOptions::default())?;
    let last = tsdb.series_info(2)?.and_then(|s| s.last).map(|l| l.0);
    assert_eq!(last, Some((HOUR + 7200 + 14 * 60) * 1000));
    Ok(())
}

#[test]
fn a_gap_in_series_ids_is_rebuilt_so_the_database_opens() -> TestResult {
    let dir = tempfile::tempdir()?;
    build(dir.path())?;
    {
        let db = engine(dir.path())?;
        delete_row(
            &db,
            META_TABLE,
            &meta::key(meta::SERIES_BY_ID_PREFIX, &0u32.to_be_bytes()),
        )?;
        let report = fsck(&db)?;
        assert!(
            report.problems.iter().all(
                |p| p.remedy == FsckRemedy::RebuildIndex || p.remedy == FsckRemedy::IndexSeries
            ),
            "{:?}",
            report.problems
        );
        assert!(report.problems.len() >= 2, "{:?}", report.problems);
    }
    assert!(Tsdb::open(dir.path(), TsdbOptions::default()).is_err());
    repair_clean(dir.path(), &dir.path().join("lost+found"))?;
    assert_eq!(points(dir.path())?, vec![POINTS_PER_SERIES; 3]);
    Ok(())
}

#[test]
fn a_malformed_data_rowkey_is_moved_out() -> TestResult {
    let dir = tempfile::tempdir()?;
    build(dir.path())?;
    let key = b"\x00short".to_vec();
    {
        let db = engine(dir.path())?;
        let enc = encode_value(Value::Int(5));
        put(&db, DATA_TABLE, &key, &encode_column(0), enc.as_bytes())?;
        let p = only(&fsck(&db)?).clone();
        assert_eq!(
            (p.table, &p.row, &p.remedy),
            (DATA_TABLE, &key, &FsckRemedy::DeleteRow)
        );
    }
    let lost = dir.path().join("lost+found");
    repair_clean(dir.path(), &lost)?;
    let saved = std::fs::read_to_string(lost.join(SAVED_CELLS))?;
    assert!(saved.contains("tsdb 0073686F7274 000000 0005"), "{saved}");
    Ok(())
}

#[test]
fn a_stale_series_row_and_a_bad_last_point_are_rebuilt() -> TestResult {
    let dir = tempfile::tempdir()?;
    build(dir.path())?;
    {
        let db = engine(dir.path())?;
        let t = db.table(META_TABLE).ok_or("meta")?;
        let tsuid = db
            .get(
                &t,
                &meta::key(meta::SERIES_BY_ID_PREFIX, &1u32.to_be_bytes()),
                meta::SERIES_TSUID_COLUMN,
            )?
            .ok_or("no i row")?;
        let s_key = meta::key(meta::SERIES_BY_TSUID_PREFIX, &tsuid);
        put(
            &db,
            META_TABLE,
            &s_key,
            meta::SERIES_ID_COLUMN,
            &7u32.to_be_bytes(),
        )?;
        let l_key = meta::key(meta::LAST_PREFIX, &0u32.to_be_bytes());
        put(&db, META_TABLE, &l_key, meta::LAST_COLUMN, b"short")?;
        let report = fsck(&db)?;
        let rows: Vec<&[u8]> = report.problems.iter().map(|p| &p.row[..]).collect();
        assert_eq!(rows, vec![&l_key[..], &s_key[..]], "{:?}", report.problems);
        assert!(
            report
                .problems
                .iter()
                .all(|p| p.remedy == FsckRemedy::RebuildIndex)
        );
    }
    assert!(Tsdb::open(dir.path(), TsdbOptions::default()).is_err());
    repair_clean(dir.path(), &dir.path().join("lost+found"))?;
    assert_eq!(points(dir.path())?, vec![POINTS_PER_SERIES; 3]);
    let tsdb = Tsdb::open(dir.path(), TsdbOptions::default())?;
    let last = tsdb.series_info(0)?.and_then(|s| s.last).map(|l| l.0);
    assert_eq!(last, Some((HOUR + 7200 + 14 * 60) * 1000));
    Ok(())
}
