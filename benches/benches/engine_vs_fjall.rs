//! strata-engine against fjall, a mature pure-Rust LSM, with the same durability settings:
//! every write reaches the OS before it returns (Strata writes each commit group to its WAL;
//! fjall's default `PersistMode::Buffer` flushes its journal buffer per write or batch), and
//! the log is fsynced every 100 ms in the background, never per write (Strata's
//! `SyncPolicy::Interval`; for fjall, which has no timed fsync of its own, a thread here calls
//! `Database::persist(SyncData)` at the same interval). Both get the same block cache budget
//! (Strata's default, 256 MiB). Other settings are each engine's defaults.
//!
//! Cases: a time-series-shaped write (4,000 rows, each receiving cells appended in time order),
//! random single-cell writes, point gets (hit and miss) and a prefix scan.
//!
//! Run: `cargo bench -p strata-benches --bench engine_vs_fjall`
//! `STRATA_BENCH_FJALL_SYNCER=0` leaves out fjall's background fsync (to see what it costs);
//! `STRATA_BENCH_CACHE_MB` sets both engines' block cache (default 256).
//! Sizes: `STRATA_BENCH_GET_CELLS` (default 10,000,000) and `STRATA_BENCH_SCAN_CELLS`
//! (default 1,000,000) set the data set of the get and scan cases.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use rand::{Rng, SeedableRng, rngs::StdRng};
use strata_engine::{Db, DbOptions, ScanOptions, SyncPolicy, Table, TableOptions, WriteBatch};

/// Rows in the time-series write case, as in a 4,000-series devops load.
const TS_ROWS: u32 = 4_000;
/// Cells appended to each row per measured iteration.
const TS_CELLS_PER_ROW: u32 = 10;
/// Cells per write batch, about what one ingest connection groups.
const BATCH: usize = 1_000;
/// The background fsync interval of both engines.
const SYNC_EVERY: Duration = Duration::from_millis(100);
/// The block cache of both engines: Strata's default, unless `STRATA_BENCH_CACHE_MB` says.
fn cache_bytes() -> usize {
    env_usize("STRATA_BENCH_CACHE_MB", 256) << 20
}
/// Value size: a raw time-series cell is a flag byte plus up to 8 bytes.
const VALUE: &[u8] = &[0x0b, 0x42, 0x2a, 0x00, 0x00];

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn row_key(row: u32) -> [u8; 16] {
    // Shaped like a tsdb rowkey: salt, metric, hour, one tag pair.
    let mut k = [0u8; 16];
    k[0] = (row % 20) as u8;
    k[1..4].copy_from_slice(&[0, 0, 1]);
    k[4..8].copy_from_slice(&1_700_000_000u32.to_be_bytes());
    k[8..12].copy_from_slice(&row.to_be_bytes());
    k
}

fn column(i: u32) -> [u8; 3] {
    let b = (i * 10_000).to_be_bytes();
    [b[1], b[2], b[3]]
}

struct Strata {
    db: Db,
    table: Table,
    _dir: tempfile::TempDir,
}

fn strata() -> Strata {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = DbOptions {
        sync: SyncPolicy::Interval(SYNC_EVERY),
        block_cache_bytes: cache_bytes(),
        ..DbOptions::default()
    };
    let db = Db::open(dir.path(), opts).expect("open strata");
    let table = db.open_table("t", TableOptions::default()).expect("table");
    Strata {
        db,
        table,
        _dir: dir,
    }
}

struct Fjall {
    // Declared first so that it stops before the database is dropped.
    _syncer: Syncer,
    db: Database,
    ks: Keyspace,
    _dir: tempfile::TempDir,
}

fn fjall() -> Fjall {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Database::builder(dir.path())
        .cache_size(cache_bytes() as u64)
        .open()
        .expect("open fjall");
    let ks = db
        .keyspace("t", KeyspaceCreateOptions::default)
        .expect("keyspace");
    Fjall {
        _syncer: Syncer::spawn(&db),
        db,
        ks,
        _dir: dir,
    }
}

/// fsyncs fjall's journal every [`SYNC_EVERY`], as Strata's `SyncPolicy::Interval` does for
/// its WAL; stops (and joins) when dropped.
struct Syncer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Syncer {
    fn spawn(db: &Database) -> Syncer {
        let stop = Arc::new(AtomicBool::new(false));
        if env_usize("STRATA_BENCH_FJALL_SYNCER", 1) == 0 {
            return Syncer { stop, thread: None };
        }
        let (db, flag) = (db.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(SYNC_EVERY);
                db.persist(PersistMode::SyncData)
                    .expect("fjall background fsync");
            }
        });
        Syncer {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// fjall has no columns: a cell's key is rowkey ‖ column, which sorts the same way.
fn fjall_key(row: u32, col: u32) -> Vec<u8> {
    let mut k = row_key(row).to_vec();
    k.extend_from_slice(&column(col));
    k
}

fn ts_write(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine/ts_write");
    g.throughput(Throughput::Elements(u64::from(TS_ROWS * TS_CELLS_PER_ROW)));
    g.sample_size(10);
    let s = strata();
    let mut round = 0u32;
    g.bench_function("strata", |b| {
        b.iter(|| {
            let mut batch = WriteBatch::new();
            for t in 0..TS_CELLS_PER_ROW {
                let col = column(round * TS_CELLS_PER_ROW + t);
                for row in 0..TS_ROWS {
                    batch.put(&s.table, &row_key(row), &col, VALUE);
                    if batch.len() == BATCH {
                        s.db.write(&batch).expect("write");
                        batch.clear();
                    }
                }
            }
            s.db.write(&batch).expect("write");
            round += 1;
        })
    });
    let f = fjall();
    let mut round = 0u32;
    g.bench_function("fjall", |b| {
        b.iter(|| {
            let mut batch = f.db.batch();
            let mut n = 0;
            for t in 0..TS_CELLS_PER_ROW {
                for row in 0..TS_ROWS {
                    batch.insert(&f.ks, fjall_key(row, round * TS_CELLS_PER_ROW + t), VALUE);
                    n += 1;
                    if n == BATCH {
                        batch.commit().expect("commit");
                        batch = f.db.batch();
                        n = 0;
                    }
                }
            }
            batch.commit().expect("commit");
            round += 1;
        })
    });
    g.finish();
}

fn random_write(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine/random_write");
    const N: u64 = 10_000;
    g.throughput(Throughput::Elements(N));
    g.sample_size(10);
    let s = strata();
    let mut rng = StdRng::seed_from_u64(42);
    g.bench_function("strata", |b| {
        b.iter(|| {
            for _ in 0..N {
                let mut batch = WriteBatch::new();
                batch.put(
                    &s.table,
                    &row_key(rng.r#gen()),
                    &column(rng.gen_range(0..360)),
                    VALUE,
                );
                s.db.write(&batch).expect("write");
            }
        })
    });
    let f = fjall();
    let mut rng = StdRng::seed_from_u64(42);
    g.bench_function("fjall", |b| {
        b.iter(|| {
            for _ in 0..N {
                f.ks.insert(fjall_key(rng.r#gen(), rng.gen_range(0..360)), VALUE)
                    .expect("insert");
            }
        })
    });
    g.finish();
}

/// Loads `cells` cells as `cells / 360` rows of 360 columns into both engines, flushed.
fn load(cells: usize) -> (Strata, Fjall, u32) {
    let rows = (cells / 360).max(1) as u32;
    let s = strata();
    let f = fjall();
    let mut batch = WriteBatch::new();
    let mut fb = f.db.batch();
    for row in 0..rows {
        for col in 0..360 {
            batch.put(&s.table, &row_key(row), &column(col), VALUE);
            fb.insert(&f.ks, fjall_key(row, col), VALUE);
        }
        if batch.len() >= 10 * BATCH {
            s.db.write(&batch).expect("write");
            batch.clear();
            fb.commit().expect("commit");
            fb = f.db.batch();
        }
    }
    s.db.write(&batch).expect("write");
    fb.commit().expect("commit");
    s.db.flush().expect("flush");
    s.db.compact_all().expect("compact");
    f.ks.rotate_memtable_and_wait().expect("fjall flush");
    (s, f, rows)
}

fn point_get(c: &mut Criterion) {
    let (s, f, rows) = load(env_usize("STRATA_BENCH_GET_CELLS", 10_000_000));
    let mut g = c.benchmark_group("engine/point_get");
    g.throughput(Throughput::Elements(1));
    for (case, offset) in [("hit", 0u32), ("miss", rows)] {
        let mut rng = StdRng::seed_from_u64(7);
        g.bench_function(format!("strata/{case}"), |b| {
            b.iter_batched(
                || (rng.gen_range(0..rows) + offset, rng.gen_range(0..360)),
                |(row, col)| {
                    black_box(
                        s.db.get(&s.table, &row_key(row), &column(col))
                            .expect("get"),
                    )
                },
                BatchSize::SmallInput,
            )
        });
        let mut rng = StdRng::seed_from_u64(7);
        g.bench_function(format!("fjall/{case}"), |b| {
            b.iter_batched(
                || fjall_key(rng.gen_range(0..rows) + offset, rng.gen_range(0..360)),
                |k| black_box(f.ks.get(k).expect("get")),
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

fn prefix_scan(c: &mut Criterion) {
    let cells = env_usize("STRATA_BENCH_SCAN_CELLS", 1_000_000);
    let (s, f, _) = load(cells);
    let mut g = c.benchmark_group("engine/prefix_scan");
    g.throughput(Throughput::Elements(cells as u64 / 360 * 360));
    g.sample_size(10);
    // Every loaded row shares the 1-byte-salt-free part; scan the whole table by the common
    // empty prefix so both engines read every cell.
    g.bench_function("strata", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for row in
                s.db.scan(&s.table, &ScanOptions::prefix(b""))
                    .expect("scan")
            {
                n += row.expect("row").cells.len();
            }
            black_box(n)
        })
    });
    g.bench_function("fjall", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for kv in f.ks.prefix(b"") {
                black_box(kv.into_inner().expect("kv"));
                n += 1;
            }
            black_box(n)
        })
    });
    g.finish();
}

criterion_group!(benches, ts_write, random_write, point_get, prefix_scan);
criterion_main!(benches);
