//! Latency of the five peer-benchmark queries (Q1–Q5 of `benches/peers/peers.py`, OpenTSDB
//! dialect, exact JSON bodies) through `strata_query::handle_query`, over a devops-shaped
//! data set: 200 hosts × 20 metrics at a 10 s interval, row-compacted and engine-compacted as the
//! server's `POST /api/admin/compact` leaves it.
//!
//! `cargo bench -p strata-benches --bench query_devops -- --warm-up-time 1 --measurement-time 5`
//!
//! Building the 24 h set (34.56 M points) takes minutes, so the finished directory is kept under
//! `/tmp/strata-query-bench-<hash of the parameters>` and reused. `STRATA_QUERY_BENCH_HOURS`
//! (default 24) shortens the window for quick iterations; `STRATA_QUERY_BENCH_HOSTS` (default
//! 200) the host count; `STRATA_QUERY_BENCH_THREADS` sets `QueryLimits::threads`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use strata_benches::{BASE_TS_MS, DEFAULT_SEED, Shape, series};
use strata_query::{QueryLimits, QueryMethod, QueryRequest, handle_query, run_inline};
use strata_tsdb::{PointRef, Tsdb, TsdbOptions};

/// The server's allocator (`src/main.rs`), so that queries are measured as they run there.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Start of the data set: 2024-01-01T00:00:00Z, the start `queries.py` uses.
const START_S: i64 = 1_704_067_200;
/// Sample interval.
const INTERVAL_MS: i64 = 10_000;
/// Bumped whenever the generated data changes, so an old cached directory is not reused.
const DATA_VERSION: u32 = 1;

/// The 20 metrics of the peer benchmark's generator, with the shape each one gets here.
const METRICS: [(&str, Shape); 20] = [
    ("cpu.user", Shape::GaugeOneDecimal),
    ("cpu.system", Shape::GaugeOneDecimal),
    ("cpu.iowait", Shape::GaugeOneDecimal),
    ("cpu.idle", Shape::GaugeOneDecimal),
    ("mem.used", Shape::GaugeOneDecimal),
    ("mem.cached", Shape::GaugeOneDecimal),
    ("mem.free", Shape::GaugeOneDecimal),
    ("disk.read_bytes", Shape::Counter),
    ("disk.write_bytes", Shape::Counter),
    ("disk.used_pct", Shape::GaugeOneDecimal),
    ("net.rx_bytes", Shape::Counter),
    ("net.tx_bytes", Shape::Counter),
    ("net.errors", Shape::Counter),
    ("load.1m", Shape::GaugeOneDecimal),
    ("load.5m", Shape::GaugeOneDecimal),
    ("load.15m", Shape::GaugeOneDecimal),
    ("proc.count", Shape::Counter),
    ("swap.used", Shape::Constant),
    ("sys.cpu_count", Shape::Constant),
    ("temp.cpu", Shape::GaugeOneDecimal),
];

const DCS: [&str; 4] = ["ams1", "fra1", "nyc1", "sfo1"];
const OSES: [&str; 3] = ["debian12", "ubuntu22.04", "rhel9"];
const SERVICES: [&str; 10] = [
    "api", "web", "db", "cache", "queue", "search", "auth", "billing", "ingest", "batch",
];
const TEAMS: [&str; 5] = ["core", "platform", "data", "payments", "growth"];

#[derive(Debug, Clone, Copy)]
struct Params {
    hosts: usize,
    hours: i64,
    seed: u64,
}

impl Params {
    fn from_env() -> Params {
        let env = |name: &str, default: i64| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse::<i64>().ok())
                .filter(|v| *v > 0)
                .unwrap_or(default)
        };
        Params {
            hosts: env("STRATA_QUERY_BENCH_HOSTS", 200) as usize,
            hours: env("STRATA_QUERY_BENCH_HOURS", 24),
            seed: DEFAULT_SEED,
        }
    }

    fn describe(&self) -> String {
        format!(
            "devops v{DATA_VERSION} hosts={} metrics={} hours={} interval_ms={INTERVAL_MS} \
             start_s={START_S} seed={:#x}",
            self.hosts,
            METRICS.len(),
            self.hours,
            self.seed
        )
    }

    /// The cache directory: FNV-1a of the parameter text.
    fn dir(&self) -> PathBuf {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in self.describe().bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        PathBuf::from(format!("/tmp/strata-query-bench-{h:016x}"))
    }

    fn end_s(&self) -> i64 {
        START_S + self.hours * 3600
    }
}

/// Tags of host `h` (0-based), as the peer generator assigns them.
fn host_tags(h: usize) -> Vec<(String, String)> {
    let svc = (h * 7 + 3) % SERVICES.len();
    vec![
        ("host".to_owned(), format!("host-{:04}", h + 1)),
        ("dc".to_owned(), DCS[h % DCS.len()].to_owned()),
        (
            "rack".to_owned(),
            format!("r{:02}", (h / DCS.len()) % 20 + 1),
        ),
        ("os".to_owned(), OSES[h % OSES.len()].to_owned()),
        ("service".to_owned(), SERVICES[svc].to_owned()),
        ("team".to_owned(), TEAMS[svc / 2].to_owned()),
    ]
}

fn build(p: &Params, dir: &Path) -> anyhow::Result<()> {
    let started = Instant::now();
    let tsdb = Tsdb::open(dir, TsdbOptions::default())?;
    let n = (p.hours * 3600 * 1000 / INTERVAL_MS) as usize;
    let shift = START_S * 1000 - BASE_TS_MS;
    let mut total = 0u64;
    for h in 0..p.hosts {
        let tags = host_tags(h);
        for (m, (metric, shape)) in METRICS.iter().enumerate() {
            let seed = p.seed ^ ((h as u64) << 16) ^ m as u64;
            let points = series(*shape, n, INTERVAL_MS, seed);
            for chunk in points.chunks(8640) {
                let refs: Vec<PointRef<'_, String>> = chunk
                    .iter()
                    .map(|(ts, v)| PointRef {
                        metric,
                        tags: &tags,
                        timestamp: ts + shift,
                        value: *v,
                    })
                    .collect();
                for r in tsdb.write(&refs) {
                    r?;
                }
            }
            total += n as u64;
        }
        if h % 20 == 19 {
            eprintln!(
                "query/devops: wrote {} hosts, {total} points, {:.0} s",
                h + 1,
                started.elapsed().as_secs_f64()
            );
        }
    }
    let rows = tsdb.rowcompact_all()?;
    tsdb.flush()?;
    tsdb.compact_all()?;
    tsdb.sync()?;
    eprintln!(
        "query/devops: {total} points, {} rows compacted, built in {:.0} s",
        rows.rows_compacted,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Opens the cached data set, building it first when missing.
fn open(p: &Params) -> anyhow::Result<Tsdb> {
    let dir = p.dir();
    eprintln!("query/devops: {} in {}", p.describe(), dir.display());
    if !dir.join("PARAMS").exists() {
        let tmp = dir.with_extension("building");
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp)?;
        }
        std::fs::create_dir_all(&tmp)?;
        build(p, &tmp)?;
        std::fs::write(tmp.join("PARAMS"), p.describe())?;
        std::fs::rename(&tmp, &dir)?;
    }
    Ok(Tsdb::open(&dir, TsdbOptions::default())?)
}

/// The five queries' JSON bodies, as `queries.py` builds them for the OpenTSDB dialect, with the
/// raw point count each reads and the expected (series, points).
fn queries(p: &Params) -> Vec<(&'static str, String, u64, (usize, usize))> {
    let (start, end) = (START_S, p.end_s());
    let h1 = end - 3600;
    let h12 = start.max(end - 12 * 3600);
    let h24 = start.max(end - 24 * 3600);
    let hosts = p.hosts as u64;
    let per_hour = 3600 * 1000 / INTERVAL_MS as u64;
    vec![
        (
            "Q1",
            format!(
                r#"{{"start":{h1},"end":{},"queries":[{{"metric":"cpu.user","aggregator":"none","tags":{{"host":"host-0001"}}}}]}}"#,
                end - 1
            ),
            per_hour,
            (1, 360),
        ),
        (
            "Q2",
            format!(
                r#"{{"start":{h12},"end":{},"queries":[{{"metric":"cpu.user","aggregator":"sum","downsample":"1m-avg"}}]}}"#,
                end - 1
            ),
            hosts * per_hour * ((end - h12) / 3600) as u64,
            (1, ((end - h12) / 60) as usize),
        ),
        (
            "Q3",
            format!(
                r#"{{"start":{h24},"end":{},"queries":[{{"metric":"disk.read_bytes","aggregator":"sum","tags":{{"host":"host-0001"}},"downsample":"5m-avg","rate":true,"rateOptions":{{"counter":true}}}}]}}"#,
                end - 1
            ),
            per_hour * ((end - h24) / 3600) as u64,
            (1, ((end - h24) / 300) as usize),
        ),
        (
            "Q4",
            format!(
                r#"{{"start":{start},"end":{},"queries":[{{"metric":"cpu.user","aggregator":"avg","downsample":"1h-avg","filters":[{{"type":"wildcard","tagk":"dc","filter":"*","groupBy":true}}]}}]}}"#,
                end - 1
            ),
            hosts * per_hour * p.hours as u64,
            (4, 4 * p.hours as usize),
        ),
        (
            "Q5",
            format!(
                r#"{{"start":{h1},"end":{},"queries":[{{"metric":"cpu.user","aggregator":"none","downsample":"0all-last"}}]}}"#,
                end - 1
            ),
            hosts * per_hour,
            (p.hosts, p.hosts),
        ),
    ]
}

/// Series and points of a JSON answer, to check the shape like `run_peers.sh` does.
fn shape(body: &[u8]) -> (usize, usize) {
    let text = String::from_utf8_lossy(body);
    let series = text.matches("\"metric\":").count();
    // Every dps entry is `"<ts>":<value>`: count the keys inside the dps objects.
    let points = text
        .split("\"dps\":{")
        .skip(1)
        .map(|s| s.split('}').next().unwrap_or("").matches("\":").count())
        .sum();
    (series, points)
}

fn bench_devops(c: &mut Criterion) {
    strata_benches::configure_allocator();
    let p = Params::from_env();
    let tsdb = match open(&p) {
        Ok(t) => t,
        Err(e) => panic!("query/devops: building the data set failed: {e:#}"),
    };
    let now_ms = p.end_s() * 1000 + 60_000;
    // STRATA_QUERY_BENCH_THREADS sets `QueryLimits::threads` (0 = one per core).
    let threads = std::env::var("STRATA_QUERY_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(strata_query::DEFAULT_QUERY_THREADS);
    let limits = QueryLimits {
        threads,
        ..QueryLimits::default()
    };
    let mut group = c.benchmark_group("query/devops");
    group.sample_size(20);
    for (name, body, raw_points, expect) in queries(&p) {
        let (status, out) = {
            let r = handle_query(
                &tsdb,
                &QueryRequest::new(QueryMethod::Post, "", body.as_bytes(), now_ms),
                &limits,
                &run_inline,
            );
            (r.status, r.body)
        };
        assert_eq!(status, 200, "{name}: {}", String::from_utf8_lossy(&out));
        let got = shape(&out);
        // Q3's first rate has no previous bucket (compat exception 3): allow one point less.
        assert!(
            got.0 == expect.0 && (got.1 == expect.1 || got.1 + 1 == expect.1),
            "{name}: (series, points) {got:?}, expected {expect:?}"
        );
        eprintln!(
            "query/devops {name}: {} bytes, {got:?} (series, points)",
            out.len()
        );
        group.throughput(Throughput::Elements(raw_points));
        group.bench_function(BenchmarkId::new(name, format!("{}h", p.hours)), |b| {
            b.iter(|| {
                let r = handle_query(
                    &tsdb,
                    &QueryRequest::new(QueryMethod::Post, "", body.as_bytes(), now_ms),
                    &limits,
                    &run_inline,
                );
                (r.status, r.body)
            })
        });
    }
    // The tsdb read alone (one thread, no query stages) of Q2's and Q4's series and scan
    // windows, to tell read time from query time.
    let ids = match tsdb.find_series("cpu.user", &[]) {
        Ok(ids) => ids,
        Err(e) => panic!("find_series: {e}"),
    };
    let end_ms = p.end_s() * 1000;
    for (name, ws, hours) in [
        ("read_Q2", end_ms - 12 * 3_600_000, 12),
        ("read_Q4", START_S * 1000, p.hours),
    ] {
        let ws = ws.max(START_S * 1000);
        group.throughput(Throughput::Elements(
            p.hosts as u64 * 360 * hours.min(p.hours) as u64,
        ));
        group.bench_function(BenchmarkId::new(name, format!("{}h", p.hours)), |b| {
            b.iter(|| tsdb.read(&strata_tsdb::ReadRequest::ids(&ids, ws, end_ms + 3_600_000)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_devops);
criterion_main!(benches);
