//! Row compaction under injected file faults (the engine's `Faults`): whatever fails, every
//! acknowledged point reads back exactly, before and after a reopen with no faults, every row
//! still decodes, and a later `rowcompact_all` folds every row; the background compactor
//! retries a full disk until it has space.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use strata_engine::{
    DbOptions, Fault, FaultError, FaultFile, FaultOp, Faults, ScanOptions, SyncPolicy,
};
use strata_tsdb::{ManualClock, PointRef, Tsdb, TsdbOptions, Value};

use crate::TestResult;

const HOUR: i64 = 3_600_000;
/// 2013-01-01T00:00:00Z.
const HOUR0: i64 = 1_356_998_400_000;
const HOURS: i64 = 3;
const HOSTS: usize = 6;

/// host → ts_ms → (value, acknowledged).
type Model = BTreeMap<String, BTreeMap<i64, (Value, bool)>>;

fn options(faults: &Faults) -> TsdbOptions {
    TsdbOptions {
        db: DbOptions {
            sync: SyncPolicy::Always,
            faults: faults.clone(),
            // Small segments and memtables: faults also meet rolls and flushes.
            wal_segment_bytes: 8 << 10,
            memtable_bytes: 16 << 10,
            max_frozen_memtables: 1 << 20,
            l0_stall_files: 1 << 20,
            ..DbOptions::default()
        },
        // Every hour written is closed.
        clock: Arc::new(ManualClock::new((HOUR0 + (HOURS + 2) * HOUR) as u64)),
        ..TsdbOptions::default()
    }
}

/// Writes `points` (host, ts, value) with an fsync; `Ok` acknowledges all of them.
fn write(db: &Tsdb, points: &[(String, i64, Value)]) -> strata_tsdb::Result<()> {
    let tags: Vec<[(&str, &str); 1]> = points.iter().map(|p| [("host", p.0.as_str())]).collect();
    let refs: Vec<PointRef<'_>> = points
        .iter()
        .zip(&tags)
        .map(|(p, t)| PointRef {
            metric: "m",
            tags: t,
            timestamp: p.1,
            value: p.2,
        })
        .collect();
    db.write_sync(&refs).into_iter().collect()
}

/// Round 0 fills each host's hours every 97 s, ints for even hosts and floats for odd ones;
/// later rounds add one late point per host and hour, between the round-0 instants.
fn round(r: i64) -> Vec<(String, i64, Value)> {
    let mut out = Vec::new();
    for h in 0..HOSTS {
        for hour in 0..HOURS {
            let start = HOUR0 + hour * HOUR;
            let instants: Vec<i64> = if r == 0 {
                (0..HOUR / 97_000).map(|i| start + i * 97_000).collect()
            } else {
                vec![start + r * 1_000 + 13]
            };
            for ts in instants {
                let v = if h % 2 == 0 {
                    Value::Int(ts / 1000 * (h as i64 + 1) - r)
                } else {
                    Value::Float(ts as f64 / 7.0 + r as f64)
                };
                out.push((format!("h{h}"), ts, v));
            }
        }
    }
    out
}

fn record(model: &mut Model, points: &[(String, i64, Value)], acked: bool) {
    for (host, ts, v) in points {
        model
            .entry(host.clone())
            .or_default()
            .insert(*ts, (*v, acked));
    }
}

/// Every acknowledged point reads back exactly; an unacknowledged one is there exactly or
/// not at all; nothing else is.
fn check(db: &Tsdb, model: &Model, when: &str) -> Result<(), String> {
    let got = db
        .read(&strata_tsdb::ReadRequest::metric(
            "m",
            &[],
            HOUR0,
            HOUR0 + HOURS * HOUR - 1,
        ))
        .map_err(|e| format!("{when}: read: {e}"))?;
    let mut seen = 0;
    for s in &got {
        let host = &s.tags[0].1;
        let want = model.get(host).ok_or(format!("{when}: unknown {host}"))?;
        seen += 1;
        let points: BTreeMap<i64, Value> = s.points.iter().copied().collect();
        for (ts, (v, acked)) in want {
            match points.get(ts) {
                Some(got) if got == v => {}
                None if !acked => {}
                other => return Err(format!("{when}: {host} at {ts}: {other:?}, want {v:?}")),
            }
        }
        if let Some(ts) = points.keys().find(|ts| !want.contains_key(ts)) {
            return Err(format!("{when}: {host} has a stray point at {ts}"));
        }
    }
    if seen != model.len() {
        return Err(format!(
            "{when}: {seen} series read, {} written",
            model.len()
        ));
    }
    Ok(())
}

/// Dirty markers left in table `meta`.
fn dirty_rows(db: &Tsdb) -> Result<usize, String> {
    let e = db.engine_for_testing();
    let meta = e.table("meta").ok_or("no meta table")?;
    e.scan(&meta, &ScanOptions::prefix(b"d"))
        .map(Iterator::count)
        .map_err(|e| e.to_string())
}

#[derive(Debug, Clone)]
enum Step {
    Arm(Fault),
    Clear,
    RowCompact(usize),
    RowCompactAll,
    Flush,
    Compact,
    /// Late points of round `n` (1-based) into the closed rows.
    Late,
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
        3 => fault().prop_map(Step::Arm),
        1 => Just(Step::Clear),
        3 => (1usize..20).prop_map(Step::RowCompact),
        2 => Just(Step::RowCompactAll),
        1 => Just(Step::Flush),
        1 => Just(Step::Compact),
        2 => Just(Step::Late),
    ]
}

fn run(steps: &[Step]) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let faults = Faults::new();
    let db = Tsdb::open(dir.path(), options(&faults)).map_err(|e| e.to_string())?;
    let mut model = Model::new();
    let first = round(0);
    write(&db, &first).map_err(|e| format!("round 0: {e}"))?;
    record(&mut model, &first, true);
    let mut late = 0;
    for s in steps {
        // Engine errors (injected) are expected; only what reads back matters.
        let _ = match s {
            Step::Arm(f) => {
                faults.arm(*f);
                Ok(())
            }
            Step::Clear => {
                faults.clear();
                Ok(())
            }
            Step::RowCompact(n) => db.rowcompact(*n).map(|_| ()),
            Step::RowCompactAll => db.rowcompact_all().map(|_| ()),
            Step::Flush => db.flush(),
            Step::Compact => db.compact_all(),
            Step::Late => {
                late += 1;
                let points = round(late);
                let r = write(&db, &points);
                record(&mut model, &points, r.is_ok());
                r
            }
        };
        check(&db, &model, &format!("after {s:?}"))?;
    }
    faults.clear();
    drop(db);
    let db =
        Tsdb::open(dir.path(), options(&Faults::default())).map_err(|e| format!("reopen: {e}"))?;
    check(&db, &model, "after the reopen")?;
    db.rowcompact_all()
        .map_err(|e| format!("rowcompact_all after the reopen: {e}"))?;
    check(&db, &model, "after rowcompact_all")?;
    match dirty_rows(&db)? {
        0 => Ok(()),
        n => Err(format!("{n} rows still dirty")),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn rowcompact_under_faults_keeps_every_acknowledged_point(
        steps in proptest::collection::vec(step(), 1..25)
    ) {
        run(&steps).map_err(TestCaseError::fail)?;
    }
}

/// The background row compactor meets a full disk: its passes fail and are retried, nothing
/// is lost, and once the disk has space every row is folded.
#[test]
fn background_rowcompact_resumes_once_the_disk_has_space() -> TestResult {
    let dir = tempfile::tempdir()?;
    let faults = Faults::new();
    let db = Tsdb::open(dir.path(), options(&faults))?;
    let points = round(0);
    write(&db, &points)?;
    let mut model = Model::new();
    record(&mut model, &points, true);
    faults.arm(
        Fault::new(FaultOp::Write, FaultError::NoSpace)
            .on(FaultFile::Wal)
            .sticky(),
    );
    let compactor = db.spawn_rowcompactor(Duration::from_millis(5))?;
    let wait_for = |what: &str, cond: &dyn Fn() -> bool| -> TestResult {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !cond() {
            if Instant::now() > deadline {
                return Err(format!("timed out waiting for {what}").into());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    };
    wait_for("failed passes", &|| db.stats().rowcompact_errors >= 2)?;
    assert_eq!(db.stats().rows_compacted, 0);
    assert!(
        !db.engine_stats().write_failed,
        "a full disk refuses, it does not fail the WAL"
    );
    check(&db, &model, "while the disk is full")?;
    faults.clear();
    wait_for("every row folded", &|| {
        dirty_rows(&db).is_ok_and(|n| n == 0)
    })?;
    drop(compactor);
    assert_eq!(db.stats().rows_compacted, (HOSTS as i64 * HOURS) as u64);
    check(&db, &model, "after the compactor caught up")?;
    drop(db);
    let db = Tsdb::open(dir.path(), options(&Faults::default()))?;
    check(&db, &model, "after a reopen")?;
    Ok(())
}
