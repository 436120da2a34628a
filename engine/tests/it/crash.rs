//! Crash test: a child process (this test binary, re-run in child mode) writes batches with
//! `SyncPolicy::Always` and prints each acknowledged batch id; the parent SIGKILLs it at
//! random points and checks after each round that every acknowledged batch is present in full
//! and that the batches form an exact prefix (none partly applied).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng, rngs::StdRng};
use strata_engine::{Db, DbOptions, SyncPolicy};

use crate::{TestResult, check_prefix, options, tables, test_batch, test_seeds};

/// Set in the child's environment to the database directory.
const CHILD_DIR_VAR: &str = "STRATA_ENGINE_CRASH_CHILD_DIR";
/// Set in the child's environment to a memtable size, to make it flush while it writes.
const MEMTABLE_VAR: &str = "STRATA_ENGINE_CRASH_MEMTABLE";
const ROUNDS: usize = 8;
/// The seeds CI runs (see [`crate::test_seeds`]).
const SEEDS: [u64; 2] = [0x5eed_0001, 0x5eed_0002];

/// The child: a no-op unless run by `kill_9_keeps_every_acknowledged_batch`.
#[test]
fn child() -> TestResult {
    let Some(dir) = std::env::var_os(CHILD_DIR_VAR) else {
        return Ok(());
    };
    let memtable_bytes = match std::env::var(MEMTABLE_VAR) {
        Ok(s) => Some(s.parse()?),
        Err(_) => None,
    };
    let db = Db::open(&dir, crash_options(memtable_bytes))?;
    let (a, b) = tables(&db)?;
    let start = check_prefix(&db)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut id = start;
    while Instant::now() < deadline {
        db.write(&test_batch(&a, &b, id, true))?;
        println!("ack {id}");
        id += 1;
    }
    Ok(())
}

/// Small segments so that crashes also hit segment rollover; with `memtable_bytes`, small
/// memtables so that they also hit flushes and WAL segment deletion.
fn crash_options(memtable_bytes: Option<usize>) -> DbOptions {
    let opts = options(SyncPolicy::Always, 4096);
    match memtable_bytes {
        Some(memtable_bytes) => DbOptions {
            memtable_bytes,
            ..opts
        },
        None => opts,
    }
}

#[test]
fn kill_9_keeps_every_acknowledged_batch() -> TestResult {
    crash_rounds(None)
}

#[test]
fn kill_9_during_flushes_keeps_every_acknowledged_batch() -> TestResult {
    crash_rounds(Some(8 << 10))
}

fn crash_rounds(memtable_bytes: Option<usize>) -> TestResult {
    for seed in test_seeds(&SEEDS)? {
        println!("crash test seed {seed} (STRATA_TEST_SEED={seed} replays it)");
        crash_rounds_seeded(memtable_bytes, seed).map_err(|e| format!("seed {seed}: {e}"))?;
    }
    Ok(())
}

/// The rounds of one seed. The seed decides when each child is killed; the machine's speed
/// decides how far it got, so a replay repeats the kill times, not the exact cut.
fn crash_rounds_seeded(memtable_bytes: Option<usize>, seed: u64) -> TestResult {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir()?;
    let exe = std::env::current_exe()?;
    let mut max_acked: Option<u64> = None;
    let mut total_acks = 0;
    for round in 0..ROUNDS {
        let mut cmd = Command::new(&exe);
        cmd.args(["--exact", "crash::child", "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR_VAR, dir.path());
        if let Some(m) = memtable_bytes {
            cmd.env(MEMTABLE_VAR, m.to_string());
        }
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn()?;
        let stdout = child.stdout.take().ok_or("no child stdout")?;
        let (tx, rx) = std::sync::mpsc::channel::<u64>();
        let reader = std::thread::spawn(move || {
            let acks = BufReader::new(stdout)
                .lines()
                .map_while(|l| l.ok())
                .filter_map(|l| l.strip_prefix("ack ").and_then(|n| n.parse::<u64>().ok()));
            for id in acks {
                if tx.send(id).is_err() {
                    break;
                }
            }
        });
        let wait = rng.gen_range(30..600);
        std::thread::sleep(Duration::from_millis(wait));
        let mut acks: Vec<u64> = Vec::new();
        if round + 1 == ROUNDS && total_acks == 0 {
            // However slow the machine, let at least one round kill a writing child.
            acks.extend(rx.recv_timeout(Duration::from_secs(20)).ok());
        }
        child.kill()?; // SIGKILL
        child.wait()?;
        reader.join().map_err(|_| "reader panicked")?;
        acks.extend(rx.try_iter());
        total_acks += acks.len();
        if let Some(&m) = acks.iter().max() {
            max_acked = Some(max_acked.map_or(m, |x| x.max(m)));
        }
        let db = Db::open(dir.path(), crash_options(memtable_bytes))?;
        let n = check_prefix(&db).map_err(|e| format!("round {round}: {e}"))?;
        drop(db);
        println!(
            "round {round}: killed after {wait} ms, {} acks, {n} batches present",
            acks.len()
        );
        if let Some(m) = max_acked {
            assert!(
                m < n,
                "round {round}: batch {m} was acknowledged but only {n} are present"
            );
        }
    }
    assert!(total_acks > 0, "the child never acknowledged a batch");
    if memtable_bytes.is_some() {
        println!("{total_acks} acks in all");
        assert!(
            dir.path().join("MANIFEST").exists(),
            "the child never finished a flush"
        );
    }
    Ok(())
}
