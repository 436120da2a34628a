//! Crash test of row compaction: a child process (this test binary, re-run in child mode)
//! writes a known round of points into closed hours with `write_sync`, prints `ready`, then
//! runs `Tsdb::rowcompact` in small passes forever. The parent SIGKILLs it at a random moment,
//! reopens the database and checks every point against the model (none lost, none duplicated,
//! raw cells winning over older block points), runs `rowcompact_all`, checks again, and checks
//! that no dirty marker is left. Later rounds write late points into already compacted rows.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_engine::{DbOptions, ScanOptions};
use strata_tsdb::{ManualClock, PointRef, RowCompactStats, Tsdb, TsdbOptions, Value};

use crate::TestResult;

/// Set in the child's environment to the database directory.
const CHILD_DIR_VAR: &str = "STRATA_TSDB_ROWCOMPACT_CRASH_DIR";
/// Set in the child's environment to the round whose points it writes.
const CHILD_ROUND_VAR: &str = "STRATA_TSDB_ROWCOMPACT_CRASH_ROUND";
/// Set in the child's environment to the run's seed.
const CHILD_SEED_VAR: &str = "STRATA_TSDB_ROWCOMPACT_CRASH_SEED";
/// The seeds CI runs (see [`crate::test_seeds`]).
const SEEDS: [u64; 3] = [0xc0de_0001, 0xc0de_0002, 0xc0de_0003];
const ROUNDS: u64 = 6;
const HOUR: i64 = 3_600_000;
/// 2013-01-01T00:00:00Z.
const HOUR0: i64 = 1_356_998_400_000;
const HOURS: i64 = 4;
const HOSTS: usize = 24;
/// Data rows the test writes.
const ROWS: i64 = HOURS * HOSTS as i64;
/// Rows per compaction pass of the child.
const PASS_ROWS: usize = 4;

/// host → ts_ms → value.
type Model = BTreeMap<String, BTreeMap<i64, Value>>;

/// Small memtables, so that flushes also happen while rows are compacted. Even rounds fold
/// rows into partial blocks at flush (the default), odd rounds leave their points raw.
fn options(clock: Arc<ManualClock>, round: u64) -> TsdbOptions {
    TsdbOptions {
        db: DbOptions {
            memtable_bytes: 128 << 10,
            ..DbOptions::default()
        },
        clock,
        fold_on_flush: round.is_multiple_of(2),
        ..TsdbOptions::default()
    }
}

/// A clock long after every hour the test writes, so every row is closed.
fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new((HOUR0 + (HOURS + 2) * HOUR) as u64))
}

/// The points of round `round` of the run seeded `seed`: round 0 fills every host's hours at
/// irregular intervals; later rounds add late points, a third of them overwriting an instant
/// an earlier round wrote (so a raw cell must win over a block point).
fn round_points(seed: u64, round: u64) -> Vec<(String, i64, Value)> {
    let mut rng = StdRng::seed_from_u64(seed ^ round.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut out = Vec::new();
    for h in 0..HOSTS {
        let host = format!("h{h:02}");
        let float = h % 3 != 0;
        let mut ts = HOUR0 + rng.gen_range(0..5_000);
        let end = HOUR0 + HOURS * HOUR;
        while ts < end {
            let take = round == 0 || rng.gen_bool(0.05);
            if take {
                // Late rounds move some points onto whole seconds, where earlier ones may sit.
                let t = if round > 0 && rng.gen_bool(0.3) {
                    ts - ts % 10_000
                } else {
                    ts
                };
                let v = if float || (h % 3 == 0 && rng.gen_bool(0.1)) {
                    Value::Float(f64::from(rng.gen_range(-100_000i32..100_000)) / 10.0)
                } else {
                    Value::Int(rng.gen_range(-1_000_000i64..1_000_000))
                };
                out.push((host.clone(), t, v));
            }
            ts += rng.gen_range(1_000..30_000);
        }
    }
    out
}

fn write_round(db: &Tsdb, points: &[(String, i64, Value)]) -> strata_tsdb::Result<()> {
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

/// The child: a no-op unless run by `kill_9_during_rowcompact_loses_and_duplicates_nothing`.
#[test]
fn child() -> TestResult {
    let Some(dir) = std::env::var_os(CHILD_DIR_VAR) else {
        return Ok(());
    };
    let seed: u64 = std::env::var(CHILD_SEED_VAR)?.parse()?;
    let round: u64 = std::env::var(CHILD_ROUND_VAR)?.parse()?;
    let db = Tsdb::open(&dir, options(clock(), round))?;
    write_round(&db, &round_points(seed, round))?;
    println!("ready");
    let mut passes = 0u64;
    let mut idle = false;
    loop {
        // A pass over partial blocks takes well under a millisecond: paced, the parent's kill
        // lands in the middle of the work rather than after it.
        std::thread::sleep(Duration::from_millis(1));
        let s = db.rowcompact(PASS_ROWS)?;
        passes += 1;
        if s.rows_examined > 0 {
            println!("pass {passes}: {} rows compacted", s.rows_compacted);
        } else if !idle {
            println!("idle");
            idle = true;
        }
    }
}

/// Dirty markers left in table `meta`.
fn dirty_rows(db: &Tsdb) -> Result<usize, Box<dyn std::error::Error>> {
    let e = db.engine_for_testing();
    let meta = e.table("meta").ok_or("no meta table")?;
    Ok(e.scan(&meta, &ScanOptions::prefix(b"d"))?.count())
}

/// Every series of `m` reads back exactly as the model has it.
fn check(db: &Tsdb, model: &Model, when: &str) -> TestResult {
    let got = db.read(&strata_tsdb::ReadRequest::metric(
        "m",
        &[],
        HOUR0,
        HOUR0 + HOURS * HOUR - 1,
    ))?;
    assert_eq!(got.len(), model.len(), "{when}: series count");
    for s in &got {
        let host = &s.tags[0].1;
        let want: Vec<(i64, Value)> = model
            .get(host)
            .map(|m| m.iter().map(|(t, v)| (*t, *v)).collect())
            .unwrap_or_default();
        if s.points != want {
            let first_diff = s.points.iter().zip(&want).position(|(a, b)| a != b);
            return Err(format!(
                "{when}: host {host}: {} points read, {} expected, first difference at {first_diff:?}",
                s.points.len(),
                want.len()
            )
            .into());
        }
    }
    Ok(())
}

#[test]
fn kill_9_during_rowcompact_loses_and_duplicates_nothing() -> TestResult {
    for seed in crate::test_seeds(&SEEDS)? {
        println!("rowcompact crash test seed {seed} (STRATA_TEST_SEED={seed} replays it)");
        kill_9_during_rowcompact(seed).map_err(|e| format!("seed {seed}: {e}"))?;
    }
    Ok(())
}

fn kill_9_during_rowcompact(seed: u64) -> TestResult {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir()?;
    let exe = std::env::current_exe()?;
    let mut model = Model::new();
    let mut interrupted = 0;
    for round in 0..ROUNDS {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "rowcompact_crash::child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR_VAR, dir.path())
            .env(CHILD_SEED_VAR, seed.to_string())
            .env(CHILD_ROUND_VAR, round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no child stdout")?;
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // The round's points are acknowledged once `ready` is printed; kill after that, at a
        // random moment of the compaction loop.
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut ready = false;
        // Kill after a random number of compaction passes (most rounds stop in the middle of
        // the work) and a random few milliseconds more (inside a pass).
        let kill_after_passes = rng.gen_range(0..ROWS as usize / PASS_ROWS + 2);
        let mut passes = 0;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match rx.recv_timeout(left) {
                Ok(line) if line.ends_with("ready") => ready = true,
                Ok(line) if line.starts_with("pass ") => passes += 1,
                // Everything is compacted: kill it anyway.
                Ok(line) if line == "idle" => break,
                Ok(_) => {}
                Err(_) => break,
            }
            if ready && passes >= kill_after_passes {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..8)));
        child.kill()?; // SIGKILL
        child.wait()?;
        reader.join().map_err(|_| "reader panicked")?;
        if !ready {
            return Err(format!("round {round}: the child never acknowledged its points").into());
        }
        passes += rx.try_iter().filter(|l| l.starts_with("pass ")).count();
        for (host, ts, v) in round_points(seed, round) {
            model.entry(host).or_default().insert(ts, v);
        }
        let db = Tsdb::open(dir.path(), options(clock(), round))?;
        let dirty = dirty_rows(&db)?;
        interrupted += usize::from(dirty > 0 && passes > 0);
        check(&db, &model, &format!("round {round} after the kill"))?;
        let stats = db.rowcompact_all()?;
        assert_eq!(stats.rows_failed, 0, "round {round}: {stats:?}");
        check(&db, &model, &format!("round {round} after rowcompact_all"))?;
        assert_eq!(dirty_rows(&db)?, 0, "round {round}: dirty rows left");
        assert_eq!(db.rowcompact_all()?, RowCompactStats::default());
        println!(
            "round {round}: {passes} passes before the kill, {dirty} dirty rows at reopen, \
             second pass {stats:?}"
        );
        db.sync()?;
        drop(db);
        // Reopen once more: what the second pass wrote is there too.
        let db = Tsdb::open(dir.path(), options(clock(), round + 1))?;
        check(&db, &model, &format!("round {round} after reopen"))?;
    }
    println!("{interrupted} of {ROUNDS} rounds were killed in the middle of a compaction");
    // Each round kills after a random pass count below the work's, so nearly every round
    // stops mid-way; all of them finishing first would mean the test tests nothing.
    assert!(interrupted > 0, "no round was killed during a compaction");
    Ok(())
}

/// The child's data set is what the parent's model assumes: deterministic per seed and round.
#[test]
fn crash_rounds_are_deterministic() {
    assert_eq!(round_points(7, 0), round_points(7, 0));
    assert_eq!(round_points(7, 3), round_points(7, 3));
    assert_ne!(round_points(7, 1), round_points(7, 2));
}
