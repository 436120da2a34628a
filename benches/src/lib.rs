//! Shared pieces of Strata's benchmarks: the seeded data generator.
//!
//! Every generator takes an explicit seed, so a run can be repeated exactly; benches print the
//! seed they use.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_tsdb::Value;

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
