//! Row compaction: reads are the same before and after, late writes and deletes on compacted
//! rows, what is left in the tables, reopen, and corrupt blocks.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use roaring::RoaringBitmap;
use strata_engine::{ScanOptions, WriteBatch};
use strata_tsdb::{ErrorKind, ManualClock, PointRef, RowKey, Tsdb, TsdbOptions, Value};

use crate::TestResult;

const HOUR: i64 = 3_600_000;
const HOUR0: i64 = 1_356_998_400_000;
const GRACE: i64 = 600_000;

/// host → ts_ms → value.
type Model = BTreeMap<String, BTreeMap<i64, Value>>;

fn open(dir: &Path, clock: &Arc<ManualClock>) -> strata_tsdb::Result<Tsdb> {
    Tsdb::open(
        dir,
        TsdbOptions {
            clock: clock.clone(),
            ..TsdbOptions::default()
        },
    )
}

fn random_value(rng: &mut StdRng, kind: u8) -> Value {
    let float = match kind {
        0 => false,
        1 => true,
        _ => rng.gen_bool(0.5),
    };
    if float {
        match rng.gen_range(0..3) {
            0 => Value::Float(f64::from(rng.gen_range(-10_000i32..10_000)) / 100.0),
            1 => Value::Float(rng.gen_range(-1e9..1e9)),
            _ => Value::Float(0.5),
        }
    } else {
        match rng.gen_range(0..3) {
            0 => Value::Int(rng.gen_range(-100..100)),
            1 => Value::Int(rng.r#gen::<i64>()),
            _ => Value::Int(rng.gen_range(0..1_000_000)),
        }
    }
}

/// Writes `points` (host, ts_ms, value) and records them in `model`. Timestamps on a whole
/// second are sometimes sent in seconds, which must land on the same instant.
fn write(db: &Tsdb, model: &mut Model, points: &[(String, i64, Value)], rng: &mut StdRng) {
    let tags: Vec<[(&str, &str); 1]> = points.iter().map(|p| [("host", p.0.as_str())]).collect();
    let refs: Vec<PointRef<'_>> = points
        .iter()
        .zip(&tags)
        .map(|(p, t)| PointRef {
            metric: "m",
            tags: t,
            timestamp: if p.1 % 1000 == 0 && rng.gen_bool(0.5) {
                p.1 / 1000
            } else {
                p.1
            },
            value: p.2,
        })
        .collect();
    for r in db.write(&refs) {
        assert!(r.is_ok(), "{r:?}");
    }
    for (h, ts, v) in points {
        model.entry(h.clone()).or_default().insert(*ts, *v);
    }
}

/// Random series over `hours` hours from HOUR0, at irregular intervals.
fn random_points(rng: &mut StdRng, series: usize, hours: i64) -> Vec<(String, i64, Value)> {
    let mut out = Vec::new();
    for s in 0..series {
        let host = format!("h{s:02}");
        let kind = (s % 3) as u8;
        let mut ts = HOUR0 + rng.gen_range(0..60_000);
        while ts < HOUR0 + hours * HOUR {
            out.push((host.clone(), ts, random_value(rng, kind)));
            ts += match rng.gen_range(0..4) {
                0 => 10_000,
                1 => 1_000 * rng.gen_range(1..120),
                2 => rng.gen_range(1..5_000),
                _ => rng.gen_range(1..600_000),
            };
        }
    }
    // Shuffle so batches mix series and hours.
    for i in (1..out.len()).rev() {
        let j = rng.gen_range(0..=i);
        out.swap(i, j);
    }
    out
}

fn check(db: &Tsdb, model: &Model) -> TestResult {
    let got = db.read(&strata_tsdb::ReadRequest::metric(
        "m",
        &[],
        HOUR0 - HOUR,
        HOUR0 + 10 * HOUR,
    ))?;
    let got: Model = got
        .into_iter()
        .map(|s| (s.tags[0].1.clone(), s.points.into_iter().collect()))
        .filter(|(_, p): &(String, BTreeMap<i64, Value>)| !p.is_empty())
        .collect();
    let want: Model = model
        .iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|(h, p)| (h.clone(), p.clone()))
        .collect();
    assert_eq!(got, want);
    // One series alone takes the per-row get path, over a range cutting into hours.
    let all = db.find_series("m", &[])?;
    if let Some(id) = all.iter().nth(1) {
        let one: RoaringBitmap = [id].into_iter().collect();
        let (a, b) = (HOUR0 + HOUR / 2, HOUR0 + 2 * HOUR + 1234);
        let got = db.read(&strata_tsdb::ReadRequest::ids(&one, a, b))?;
        let host = &got[0].tags[0].1;
        let want: Vec<(i64, Value)> = model
            .get(host)
            .map(|p| p.range(a..=b).map(|(t, v)| (*t, *v)).collect())
            .unwrap_or_default();
        assert_eq!(got[0].points, want);
    }
    Ok(())
}

/// Per hour (seconds): (rows with raw cells, rows with a block, dirty markers).
type Layout = BTreeMap<u32, (usize, usize, usize)>;

fn layout(db: &Tsdb) -> Result<Layout, Box<dyn std::error::Error>> {
    let e = db.engine_for_testing();
    let data = e.table("tsdb").ok_or("no data table")?;
    let meta = e.table("meta").ok_or("no meta table")?;
    let mut out = Layout::new();
    for row in e.scan(&data, &ScanOptions::default())? {
        let row = row?;
        let rk = RowKey::decode(&row.key)?;
        let entry = out.entry(rk.base_time).or_default();
        if row.cells.iter().any(|c| !c.column.is_empty()) {
            entry.0 += 1;
        }
        if row.cells.iter().any(|c| c.column.is_empty()) {
            entry.1 += 1;
        }
    }
    for row in e.scan(&meta, &ScanOptions::prefix(b"d"))? {
        let row = row?;
        let rk = RowKey::decode(&row.key[1..])?;
        out.entry(rk.base_time).or_default().2 += 1;
    }
    Ok(out)
}

fn hour_s(h: i64) -> u32 {
    ((HOUR0 + h * HOUR) / 1000) as u32
}

#[test]
fn reads_survive_compaction_late_writes_deletes_and_reopen() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut rng = StdRng::seed_from_u64(7);
    let clock = Arc::new(ManualClock::new((HOUR0 + 4 * HOUR) as u64));
    let mut model = Model::new();
    let mut db = open(dir.path(), &clock)?;
    let points = random_points(&mut rng, 30, 4);
    for chunk in points.chunks(500) {
        write(&db, &mut model, chunk, &mut rng);
    }
    check(&db, &model)?;

    // Hours 0..=2 have closed (+ grace); hour 3 is still open.
    clock.set_ms((HOUR0 + 3 * HOUR + GRACE) as u64);
    let s = db.rowcompact_all()?;
    assert_eq!(s.rows_compacted, 90);
    assert_eq!(s.rows_raced + s.rows_failed, 0);
    check(&db, &model)?;
    let l = layout(&db)?;
    for h in 0..3 {
        assert_eq!(l[&hour_s(h)], (0, 30, 0), "hour {h}");
    }
    assert_eq!(l[&hour_s(3)], (30, 0, 30));
    // Nothing more to do, and the open hour stays raw.
    assert_eq!(db.rowcompact_all()?.rows_examined, 0);

    drop(db);
    db = open(dir.path(), &clock)?;
    check(&db, &model)?;

    // Late writes to compacted hours: new instants and overwrites of compacted instants.
    let mut late = Vec::new();
    for (host, pts) in &model {
        let existing: Vec<i64> = pts
            .keys()
            .copied()
            .filter(|t| *t < HOUR0 + 3 * HOUR)
            .collect();
        for _ in 0..5 {
            let ts = existing[rng.gen_range(0..existing.len())];
            late.push((host.clone(), ts, random_value(&mut rng, 2)));
            let ts = HOUR0 + rng.gen_range(0..4 * HOUR);
            late.push((host.clone(), ts, random_value(&mut rng, 2)));
        }
    }
    write(&db, &mut model, &late, &mut rng);
    check(&db, &model)?;

    // A partial-hour delete of compacted rows re-encodes their blocks.
    let ids = db.find_series("m", &[])?;
    let some: RoaringBitmap = ids.iter().step_by(3).collect();
    let (a, b) = (HOUR0 + HOUR + 600_000, HOUR0 + HOUR + 1_800_000);
    let deleted = db.delete(&some, a, b)?;
    let mut want_deleted = 0;
    for id in &some {
        let host = db.series_info(id)?.ok_or("no series")?.tags[0].1.clone();
        if let Some(p) = model.get_mut(&host) {
            let gone: Vec<i64> = p.range(a..=b).map(|(t, _)| *t).collect();
            want_deleted += gone.len() as u64;
            for t in gone {
                p.remove(&t);
            }
        }
    }
    assert_eq!(deleted, want_deleted);
    check(&db, &model)?;

    // Everything closes; a second compaction folds the late cells into the blocks.
    clock.set_ms((HOUR0 + 5 * HOUR + GRACE) as u64);
    let s = db.rowcompact_all()?;
    assert!(s.rows_compacted >= 30, "{s:?}");
    check(&db, &model)?;
    for (h, (raw, _, dirty)) in layout(&db)? {
        assert_eq!((raw, dirty), (0, 0), "hour {h}");
    }
    drop(db);
    db = open(dir.path(), &clock)?;
    check(&db, &model)?;
    db.flush()?;
    db.compact_all()?;
    check(&db, &model)?;
    Ok(())
}

#[test]
fn historical_writes_end_up_compacted() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut rng = StdRng::seed_from_u64(3);
    // Writing a day-old backfill: every hour is already closed.
    let clock = Arc::new(ManualClock::new((HOUR0 + 30 * HOUR) as u64));
    let db = open(dir.path(), &clock)?;
    let mut model = Model::new();
    let points = random_points(&mut rng, 5, 6);
    write(&db, &mut model, &points, &mut rng);
    let s = db.rowcompact_all()?;
    assert_eq!(s.rows_compacted, 30);
    assert_eq!(s.cells_folded, points.len() as u64);
    let st = db.stats();
    assert_eq!(
        (st.rows_compacted, st.rowcompact_cells_folded),
        (30, s.cells_folded)
    );
    for (h, (raw, block, dirty)) in layout(&db)? {
        assert_eq!((raw, block, dirty), (0, 5, 0), "hour {h}");
    }
    check(&db, &model)?;
    Ok(())
}

#[test]
fn rows_are_compacted_only_after_the_grace() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clock = Arc::new(ManualClock::new(HOUR0 as u64));
    let db = open(dir.path(), &clock)?;
    let tags = [("host", "a")];
    let p = PointRef {
        metric: "m",
        tags: &tags,
        timestamp: HOUR0 + 5,
        value: Value::Int(1),
    };
    for r in db.write(&[p]) {
        r?;
    }
    clock.set_ms((HOUR0 + HOUR + GRACE - 1) as u64);
    assert_eq!(db.rowcompact_all()?.rows_examined, 0);
    clock.advance_ms(1);
    assert_eq!(db.rowcompact_all()?.rows_compacted, 1);
    // Compacting again finds nothing; a clean row only loses its marker.
    assert_eq!(db.rowcompact_all()?.rows_examined, 0);
    let e = db.engine_for_testing();
    let meta = e.table("meta").ok_or("no meta table")?;
    let data = e.table("tsdb").ok_or("no data table")?;
    let row = e
        .scan(&data, &ScanOptions::default())?
        .next()
        .ok_or("no row")??;
    let mut b = WriteBatch::new();
    let mut marker = b"d".to_vec();
    marker.extend_from_slice(&row.key);
    b.put(&meta, &marker, b"t", &1u64.to_be_bytes());
    e.write(&b)?;
    let s = db.rowcompact_all()?;
    assert_eq!((s.rows_clean, s.rows_compacted), (1, 0));
    assert_eq!(
        db.read(&strata_tsdb::ReadRequest::metric(
            "m",
            &[],
            HOUR0,
            HOUR0 + HOUR
        ))?[0]
            .points,
        vec![(HOUR0 + 5, Value::Int(1))]
    );
    Ok(())
}

#[test]
fn a_corrupt_block_is_an_error_not_a_panic() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clock = Arc::new(ManualClock::new((HOUR0 + 3 * HOUR) as u64));
    let db = open(dir.path(), &clock)?;
    let tags = [("host", "a")];
    for i in 0..10 {
        let p = PointRef {
            metric: "m",
            tags: &tags,
            timestamp: HOUR0 + i * 1000,
            value: Value::Int(i),
        };
        for r in db.write(&[p]) {
            r?;
        }
    }
    assert_eq!(db.rowcompact_all()?.rows_compacted, 1);
    let e = db.engine_for_testing();
    let data = e.table("tsdb").ok_or("no data table")?;
    let row = e
        .scan(&data, &ScanOptions::default())?
        .next()
        .ok_or("no row")??;
    assert_eq!(row.cells.len(), 1);
    for garbage in [
        &b"garbage"[..],
        b"".as_slice(),
        &row.cells[0].value[..row.cells[0].value.len() - 1],
    ] {
        let mut b = WriteBatch::new();
        b.put(&data, &row.key, b"", garbage);
        e.write(&b)?;
        let err = db
            .read(&strata_tsdb::ReadRequest::metric(
                "m",
                &[],
                HOUR0,
                HOUR0 + HOUR,
            ))
            .err()
            .ok_or("read of a corrupt block succeeded")?;
        assert_eq!(err.kind(), ErrorKind::Server);
        let ids = db.find_series("m", &[])?;
        assert!(db.delete(&ids, HOUR0, HOUR0 + 1000).is_err());
    }
    // A late point dirties the row; the compactor reports the row instead of failing.
    let p = PointRef {
        metric: "m",
        tags: &tags,
        timestamp: HOUR0 + 99,
        value: Value::Int(1),
    };
    for r in db.write(&[p]) {
        r?;
    }
    let s = db.rowcompact_all()?;
    assert_eq!((s.rows_failed, s.rows_compacted), (1, 0));
    // Deleting the whole hour removes the bad row.
    let ids = db.find_series("m", &[])?;
    db.delete(&ids, HOUR0, HOUR0 + HOUR - 1)?;
    assert!(
        db.read(&strata_tsdb::ReadRequest::metric(
            "m",
            &[],
            HOUR0,
            HOUR0 + HOUR
        ))?
        .is_empty()
    );
    Ok(())
}

/// The background compactor leaves a closed row alone until `rowcompact_settle` has passed
/// since it was dirtied; `rowcompact_all` does not wait.
#[test]
fn rows_dirtied_moments_ago_wait_for_the_settle_time() -> TestResult {
    let dir = tempfile::tempdir()?;
    let now = (HOUR0 + 5 * HOUR) as u64;
    let clock = Arc::new(ManualClock::new(now));
    let opts = |clock: &Arc<ManualClock>| TsdbOptions {
        clock: clock.clone(),
        rowcompact_settle: std::time::Duration::from_secs(5),
        ..TsdbOptions::default()
    };
    let db = Tsdb::open(dir.path(), opts(&clock))?;
    let write_hour = |db: &Tsdb, hour: i64| -> TestResult {
        let tags = [("host", "a")];
        let points: Vec<PointRef<'_>> = (0..10)
            .map(|i| PointRef {
                metric: "m",
                tags: &tags,
                timestamp: HOUR0 + hour * HOUR + i * 1000,
                value: Value::Int(i),
            })
            .collect();
        for r in db.write(&points) {
            r?;
        }
        Ok(())
    };
    // Two closed hours, dirtied now.
    write_hour(&db, 0)?;
    write_hour(&db, 1)?;
    assert_eq!(db.rowcompact(100)?.rows_examined, 0, "dirtied just now");
    clock.set_ms(now + 4_999);
    assert_eq!(db.rowcompact(100)?.rows_examined, 0, "not settled yet");
    clock.set_ms(now + 5_000);
    let s = db.rowcompact(100)?;
    assert_eq!((s.rows_examined, s.rows_compacted), (2, 2), "{s:?}");
    // A late point dirties hour 0 again; rowcompact_all folds it at once.
    write_hour(&db, 0)?;
    assert_eq!(db.rowcompact(100)?.rows_examined, 0);
    assert_eq!(db.rowcompact_all()?.rows_compacted, 1);
    let got = db.read(&strata_tsdb::ReadRequest::metric(
        "m",
        &[],
        HOUR0,
        HOUR0 + 2 * HOUR - 1,
    ))?;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].points.len(), 20);
    Ok(())
}
