//! `/api/suggest` and `/api/search/lookup` latency with 1 M series in the index: the tsdb calls
//! the endpoints make (`Tsdb::suggest`; `Tsdb::find_series` then `Tsdb::series_info` per match
//! and a TSUID sort, as `server/src/api/lookup.rs` does), without HTTP.
//!
//! Data: 50 metrics `bench.m00`..`bench.m49` × 20,000 hosts `host-00000`.. (tag `host`), each
//! host in one of 20 data centres (`dc`), one point per series: 1,000,000 series. A lookup of
//! `bench.m07{dc=dc-03}` matches 1,000 series.
//!
//! Targets (issue #7): median ≤ 5 ms for suggest, ≤ 50 ms for a 1,000-series lookup.
//!
//! `cargo bench -p strata-benches --bench suggest_lookup -- --warm-up-time 1 --measurement-time 5`

use std::time::Instant;

use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use strata_tsdb::{Filter, FilterKind, PointRef, SeriesInfo, Tsdb, TsdbOptions, UidKind, Value};

const METRICS: usize = 50;
const HOSTS: usize = 20_000;
const DCS: usize = 20;
/// Points per `Tsdb::write` call: big batches keep the build to seconds.
const BATCH: usize = 50_000;

fn build(dir: &std::path::Path) -> Tsdb {
    let tsdb = match Tsdb::open(dir, TsdbOptions::default()) {
        Ok(t) => t,
        Err(e) => panic!("open: {e}"),
    };
    let started = Instant::now();
    let hosts: Vec<String> = (0..HOSTS).map(|h| format!("host-{h:05}")).collect();
    let dcs: Vec<String> = (0..DCS).map(|d| format!("dc-{d:02}")).collect();
    let metrics: Vec<String> = (0..METRICS).map(|m| format!("bench.m{m:02}")).collect();
    let mut tags: Vec<[(&str, &str); 2]> = Vec::with_capacity(METRICS * HOSTS);
    let mut metric_of = Vec::with_capacity(METRICS * HOSTS);
    for m in &metrics {
        for (h, host) in hosts.iter().enumerate() {
            tags.push([("host", host.as_str()), ("dc", dcs[h % DCS].as_str())]);
            metric_of.push(m.as_str());
        }
    }
    let points: Vec<PointRef<'_>> = tags
        .iter()
        .zip(&metric_of)
        .enumerate()
        .map(|(i, (t, m))| PointRef {
            metric: m,
            tags: t,
            timestamp: 1_795_320_000 + (i % 3600) as i64,
            value: Value::Int(i as i64),
        })
        .collect();
    for chunk in points.chunks(BATCH) {
        for r in tsdb.write(chunk) {
            if let Err(e) = r {
                panic!("write: {e}");
            }
        }
    }
    eprintln!(
        "tsdb/suggest_lookup: {} series built in {:.1} s",
        tsdb.series_count(),
        started.elapsed().as_secs_f64()
    );
    tsdb
}

/// What `/api/search/lookup` does after parsing: find the series (literal filters, then
/// removing the series that lack each `k=*` key), describe them, sort by TSUID, limit.
fn lookup(
    tsdb: &Tsdb,
    metric: &str,
    filters: &[Filter],
    any_value_keys: &[&str],
    limit: usize,
) -> Vec<SeriesInfo> {
    let find = |f: &[Filter]| match tsdb.find_series(metric, f) {
        Ok(ids) => ids,
        Err(e) => panic!("find: {e}"),
    };
    let mut ids = find(filters);
    for k in any_value_keys {
        ids -= find(&[filter(FilterKind::NotKey, k, "")]);
    }
    let mut out: Vec<SeriesInfo> = ids
        .iter()
        .filter_map(|id| tsdb.series_info(id).ok().flatten())
        .collect();
    out.sort_unstable_by(|a, b| a.tsuid.cmp(&b.tsuid));
    if limit > 0 {
        out.truncate(limit);
    }
    out
}

fn filter(kind: FilterKind, tagk: &str, expr: &str) -> Filter {
    match Filter::new(kind, tagk, expr, false) {
        Ok(f) => f,
        Err(e) => panic!("filter: {e}"),
    }
}

fn bench_suggest_lookup(c: &mut Criterion) {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("tempdir: {e}"),
    };
    let tsdb = build(dir.path());
    let mut group = c.benchmark_group("tsdb/suggest_lookup");
    group.sample_size(30);

    for (kind, prefix) in [
        (UidKind::Metric, "bench.m"),
        (UidKind::Tagv, "host-1"),
        (UidKind::Tagv, ""),
    ] {
        group.throughput(Throughput::Elements(25));
        let id = format!("{}/{prefix:?}/max25", kind.as_str());
        group.bench_function(BenchmarkId::new("suggest", id), |b| {
            b.iter(|| tsdb.suggest(black_box(kind), black_box(prefix), 25))
        });
    }

    let dc = [filter(FilterKind::LiteralOr, "dc", "dc-03")];
    assert_eq!(lookup(&tsdb, "bench.m07", &dc, &[], 0).len(), 1000);
    assert_eq!(lookup(&tsdb, "bench.m07", &dc, &["host"], 0).len(), 1000);
    group.throughput(Throughput::Elements(1000));
    group.bench_function(
        BenchmarkId::new("lookup", "bench.m07{dc=dc-03}/1000_series"),
        |b| b.iter(|| lookup(&tsdb, "bench.m07", black_box(&dc), &[], 0)),
    );
    group.bench_function(
        BenchmarkId::new("lookup", "bench.m07{host=*,dc=dc-03}/1000_series"),
        |b| b.iter(|| lookup(&tsdb, "bench.m07", black_box(&dc), &["host"], 0)),
    );
    // The same match through a `*` wildcard filter, which visits all 20,000 host values:
    // what the lookup avoids.
    let wildcard = [
        filter(FilterKind::Wildcard, "host", "*"),
        filter(FilterKind::LiteralOr, "dc", "dc-03"),
    ];
    group.bench_function(
        BenchmarkId::new("find_series", "wildcard_host_star/1000_series"),
        |b| {
            b.iter(|| {
                tsdb.find_series("bench.m07", black_box(&wildcard))
                    .map(|ids| ids.len())
            })
        },
    );
    group.throughput(Throughput::Elements(25));
    group.bench_function(
        BenchmarkId::new("lookup", "bench.m07/20000_series_limit25"),
        |b| b.iter(|| lookup(&tsdb, "bench.m07", &[], &[], 25)),
    );
    group.finish();
}

criterion_group!(benches, bench_suggest_lookup);
criterion_main!(benches);
