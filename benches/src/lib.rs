//! Shared pieces of Strata's benchmarks: the seeded data generator.
//!
//! Every generator takes an explicit seed, so a run can be repeated exactly; benches print the
//! seed they use.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_tsdb::Value;

/// Sets the server's mimalloc purge delay (`src/main.rs`: `mi_option_purge_delay`, 100 ms). A
/// bench that declares `#[global_allocator] static GLOBAL: mimalloc::MiMalloc` and calls this
/// measures its path on the allocator as the server runs it: with another allocator, allocation
/// would weigh differently in the figures than it does in the server.
#[allow(
    unsafe_code,
    reason = "mi_option_set is a C function that stores an integer option"
)]
pub fn configure_allocator() {
    // SAFETY: stores an integer in mimalloc's option table; valid at any time.
    unsafe { libmimalloc_sys::mi_option_set(libmimalloc_sys::mi_option_use_numa_nodes - 1, 100) };
}

/// Seed the benches use unless they say otherwise.
pub const DEFAULT_SEED: u64 = 0x5EED_57A7A;

/// Base timestamp of generated series: 2026-11-22T04:00:00Z in milliseconds, an hour boundary.
pub const BASE_TS_MS: i64 = 1_795_320_000_000;

/// The shape of a generated series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A float gauge with one decimal in 0.0..=100.0, moving by a random walk (like cpu %).
    GaugeOneDecimal,
    /// A monotonically increasing integer counter (like bytes sent).
    Counter,
    /// The same float on every point.
    Constant,
}

impl Shape {
    /// All shapes, for benches that iterate over them.
    pub const ALL: [Shape; 3] = [Shape::GaugeOneDecimal, Shape::Counter, Shape::Constant];

    /// A short lowercase name for bench ids.
    pub fn name(self) -> &'static str {
        match self {
            Shape::GaugeOneDecimal => "gauge_1dp",
            Shape::Counter => "counter",
            Shape::Constant => "constant",
        }
    }
}

/// `n` points of `shape` starting at [`BASE_TS_MS`], `interval_ms` apart, from `seed`.
pub fn series(shape: Shape, n: usize, interval_ms: i64, seed: u64) -> Vec<(i64, Value)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut tenths: i64 = rng.gen_range(0..=1000);
    let mut count: i64 = rng.gen_range(0..1_000_000_000);
    (0..n)
        .map(|i| {
            let ts = BASE_TS_MS + i as i64 * interval_ms;
            let v = match shape {
                Shape::GaugeOneDecimal => {
                    tenths = (tenths + rng.gen_range(-10..=10)).clamp(0, 1000);
                    Value::Float(tenths as f64 / 10.0)
                }
                Shape::Counter => {
                    count += rng.gen_range(0..5000);
                    Value::Int(count)
                }
                Shape::Constant => Value::Float(42.5),
            };
            (ts, v)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_is_seeded_and_shaped() {
        let a = series(Shape::GaugeOneDecimal, 100, 10_000, 1);
        assert_eq!(a, series(Shape::GaugeOneDecimal, 100, 10_000, 1));
        assert!(a.windows(2).all(|w| w[1].0 - w[0].0 == 10_000));
        let c = series(Shape::Counter, 100, 1000, 2);
        assert!(c.windows(2).all(|w| w[1].1.as_f64() >= w[0].1.as_f64()));
        assert!(
            series(Shape::Constant, 5, 1, 3)
                .iter()
                .all(|p| p.1 == Value::Float(42.5))
        );
    }
}

/// The devops workload of the peer benchmark (`benches/peers/`): hosts × 20 metrics, 6 tags,
/// one point per 10 s.
pub mod devops {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use strata_tsdb::{Point, Value};

    /// The 20 metric names.
    pub const METRICS: [&str; 20] = [
        "cpu.user",
        "cpu.system",
        "cpu.idle",
        "cpu.iowait",
        "cpu.steal",
        "mem.used",
        "mem.free",
        "mem.cached",
        "mem.buffered",
        "disk.read_bytes",
        "disk.write_bytes",
        "disk.io_time",
        "net.bytes_recv",
        "net.bytes_sent",
        "net.err_in",
        "net.err_out",
        "load.1m",
        "load.5m",
        "proc.running",
        "proc.total",
    ];
    /// First timestamp of generated data (2026-01-01T00:00:00Z), in seconds.
    pub const START: i64 = 1_767_225_600;
    /// Interval between points of a series, in seconds.
    pub const STEP: i64 = 10;

    /// The 6 tags of host `h`.
    pub fn tags(h: usize) -> Vec<(String, String)> {
        vec![
            ("host".into(), format!("host-{h:04}")),
            ("dc".into(), format!("dc-{}", h % 4)),
            ("rack".into(), format!("r-{}", h % 50)),
            ("os".into(), "linux".into()),
            ("arch".into(), "x86_64".into()),
            ("team".into(), format!("t-{}", h % 10)),
        ]
    }

    /// Points in time order, `steps` timestamps from `START + first_step * STEP`, every host
    /// and metric at each timestamp; values are one-decimal random walks in 0..=100.
    pub fn points(hosts: usize, first_step: i64, steps: i64, seed: u64) -> Vec<Point> {
        let mut rng = StdRng::seed_from_u64(seed);
        let tags: Vec<_> = (0..hosts).map(tags).collect();
        let mut values: Vec<f64> = (0..hosts * METRICS.len())
            .map(|_| rng.gen_range(0.0..100.0))
            .collect();
        let mut out = Vec::with_capacity(hosts * METRICS.len() * steps as usize);
        for step in first_step..first_step + steps {
            let ts = START + step * STEP;
            for (h, tags) in tags.iter().enumerate() {
                for (m, metric) in METRICS.iter().enumerate() {
                    let v = &mut values[h * METRICS.len() + m];
                    *v = (*v + rng.gen_range(-1.0..1.0)).clamp(0.0, 100.0);
                    out.push(Point {
                        metric: (*metric).to_string(),
                        tags: tags.clone(),
                        timestamp: ts,
                        value: Value::Float((*v * 10.0).round() / 10.0),
                    });
                }
            }
        }
        out
    }
}
