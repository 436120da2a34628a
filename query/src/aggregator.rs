//! The 35 OpenTSDB aggregators (OpenTSDB docs: `user_guide/query/aggregators`): name, function and
//! interpolation kind.
//!
//! [`Aggregator::apply`] computes in `f64`, as OpenTSDB's double path does, with no integer
//! truncation (`docs/compat.md` #4). [`Aggregator::apply_nums`] takes values that kept their type
//! and is exact over integers (`docs/compat.md` #14, see `num.rs`). One difference of OpenTSDB's
//! integer path is kept: the `ep*r3`/`ep*r7` percentiles use the estimator when every input
//! is an integer (no downsample, no rate), else the LEGACY one.

use crate::error::{Error, Result};
use crate::num::{ExactSum, Extreme};
use strata_tsdb::Value;

/// How a series that has no point at an output timestamp is given a value there (OpenTSDB docs:
/// `user_guide/query/aggregators (interpolation)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interpolation {
    /// Linear interpolation between the series' neighbouring points.
    Lerp,
    /// Zero if missing.
    Zim,
    /// The largest representable value (so `min` ignores the series).
    Max,
    /// The smallest representable value (so `max` ignores the series).
    Min,
    /// The previous point's value.
    Prev,
}

/// A percentile estimator (commons-math `Percentile.EstimationType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Estimator {
    /// `pos = p·(n+1)`, linear between neighbours.
    Legacy,
    /// nearest rank, `pos = rint(n·p)` (round half to even).
    R3,
    /// `pos = 1 + (n−1)·p`, linear between neighbours.
    R7,
}

/// One aggregation function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregator {
    /// Σ, LERP.
    Sum,
    /// Σ, missing counts as zero.
    ZimSum,
    /// Σ, missing takes the previous value.
    PfSum,
    /// Minimum, LERP.
    Min,
    /// Maximum, LERP.
    Max,
    /// Minimum, missing ignored.
    MimMin,
    /// Maximum, missing ignored.
    MimMax,
    /// Mean, LERP.
    Avg,
    /// Upper median `sorted[n/2]`, LERP.
    Median,
    /// Population standard deviation, LERP.
    Dev,
    /// Number of values (active series across series), ZIM.
    Count,
    /// Σ v², ZIM.
    SquareSum,
    /// Π, LERP.
    Mult,
    /// last − first, LERP.
    Diff,
    /// First value in order, ZIM.
    First,
    /// Last value in order, ZIM.
    Last,
    /// No aggregation: every series is its own result (`raw` internally).
    None,
    /// A percentile, LERP. `per_mille` is the percentile × 10 (p999 → 999, p50 → 500).
    Percentile {
        /// Percentile × 10: 500, 750, 900, 950, 990 or 999.
        per_mille: u16,
        /// Which estimator the integer path uses (the double path always uses LEGACY).
        estimator: Estimator,
    },
}

const fn pct(per_mille: u16, estimator: Estimator) -> Aggregator {
    Aggregator::Percentile {
        per_mille,
        estimator,
    }
}

/// Every aggregator by its OpenTSDB name, in the order `/api/aggregators` lists them.
const TABLE: [(&str, Aggregator); 35] = [
    ("sum", Aggregator::Sum),
    ("zimsum", Aggregator::ZimSum),
    ("pfsum", Aggregator::PfSum),
    ("min", Aggregator::Min),
    ("max", Aggregator::Max),
    ("mimmin", Aggregator::MimMin),
    ("mimmax", Aggregator::MimMax),
    ("avg", Aggregator::Avg),
    ("median", Aggregator::Median),
    ("dev", Aggregator::Dev),
    ("count", Aggregator::Count),
    ("squareSum", Aggregator::SquareSum),
    ("mult", Aggregator::Mult),
    ("diff", Aggregator::Diff),
    ("first", Aggregator::First),
    ("last", Aggregator::Last),
    ("none", Aggregator::None),
    ("p50", pct(500, Estimator::Legacy)),
    ("p75", pct(750, Estimator::Legacy)),
    ("p90", pct(900, Estimator::Legacy)),
    ("p95", pct(950, Estimator::Legacy)),
    ("p99", pct(990, Estimator::Legacy)),
    ("p999", pct(999, Estimator::Legacy)),
    ("ep50r3", pct(500, Estimator::R3)),
    ("ep75r3", pct(750, Estimator::R3)),
    ("ep90r3", pct(900, Estimator::R3)),
    ("ep95r3", pct(950, Estimator::R3)),
    ("ep99r3", pct(990, Estimator::R3)),
    ("ep999r3", pct(999, Estimator::R3)),
    ("ep50r7", pct(500, Estimator::R7)),
    ("ep75r7", pct(750, Estimator::R7)),
    ("ep90r7", pct(900, Estimator::R7)),
    ("ep95r7", pct(950, Estimator::R7)),
    ("ep99r7", pct(990, Estimator::R7)),
    ("ep999r7", pct(999, Estimator::R7)),
];

/// The names of all aggregators, for `/api/aggregators`.
pub fn aggregator_names() -> impl Iterator<Item = &'static str> {
    TABLE.iter().map(|(name, _)| *name)
}

impl Aggregator {
    /// Looks an aggregator up by its case-sensitive name.
    pub fn from_name(name: &str) -> Result<Aggregator> {
        TABLE
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, a)| *a)
            .ok_or_else(|| Error::UnknownAggregator(name.to_owned()))
    }

    /// The aggregator's OpenTSDB name.
    pub fn name(self) -> &'static str {
        TABLE
            .iter()
            .find(|(_, a)| *a == self)
            .map_or("none", |(n, _)| *n)
    }

    /// The interpolation used for a series lacking a point at an output timestamp.
    pub fn interpolation(self) -> Interpolation {
        match self {
            Aggregator::ZimSum
            | Aggregator::Count
            | Aggregator::SquareSum
            | Aggregator::First
            | Aggregator::Last => Interpolation::Zim,
            Aggregator::PfSum => Interpolation::Prev,
            Aggregator::MimMin => Interpolation::Max,
            Aggregator::MimMax => Interpolation::Min,
            _ => Interpolation::Lerp,
        }
    }

    /// Applies the function to `values` (in series order, or point order when downsampling).
    ///
    /// `int_path` says every input was an integer (no downsample, no rate); it only selects the
    /// `ep*` estimators. NaN inputs are skipped except by `mult`, `first`, `last` and `diff`; with
    /// no usable value the result is NaN. `None` behaves like `sum` (callers never aggregate with
    /// it).
    pub fn apply(self, values: &[f64], int_path: bool) -> f64 {
        let real = values.iter().copied().filter(|v| !v.is_nan());
        let empty = values.iter().all(|v| v.is_nan());
        match self {
            Aggregator::Mult => {
                if values.is_empty() {
                    f64::NAN
                } else {
                    values.iter().product()
                }
            }
            Aggregator::First => values.first().copied().unwrap_or(f64::NAN),
            Aggregator::Last => values.last().copied().unwrap_or(f64::NAN),
            Aggregator::Diff => match (values.first(), values.last()) {
                (Some(first), Some(last)) => last - first,
                _ => f64::NAN,
            },
            _ if empty => f64::NAN,
            Aggregator::Sum | Aggregator::ZimSum | Aggregator::PfSum | Aggregator::None => {
                real.sum()
            }
            Aggregator::SquareSum => real.map(|v| v * v).sum(),
            Aggregator::Min | Aggregator::MimMin => real.fold(f64::INFINITY, f64::min),
            Aggregator::Max | Aggregator::MimMax => real.fold(f64::NEG_INFINITY, f64::max),
            Aggregator::Count => real.count() as f64,
            Aggregator::Avg => {
                // From `-0.0`, as a sum: the mean of `-0.0` alone is `-0.0`.
                let (sum, n) = real.fold((-0.0, 0u64), |(s, n), v| (s + v, n + 1));
                sum / n as f64
            }
            Aggregator::Dev => population_dev(real),
            Aggregator::Median => {
                let sorted = sorted(real);
                sorted[sorted.len() / 2]
            }
            Aggregator::Percentile {
                per_mille,
                estimator,
            } => {
                let estimator = if int_path {
                    estimator
                } else {
                    Estimator::Legacy
                };
                percentile(&sorted(real), f64::from(per_mille) / 1000.0, estimator)
            }
        }
    }
}

fn sorted(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    v
}

/// Welford's running variance, divided by n (population).
fn population_dev(values: impl Iterator<Item = f64>) -> f64 {
    let (mut n, mut mean, mut m2) = (0u64, 0.0f64, 0.0f64);
    for v in values {
        n += 1;
        let delta = v - mean;
        mean += delta / n as f64;
        m2 += delta * (v - mean);
    }
    if n == 0 {
        f64::NAN
    } else {
        (m2 / n as f64).sqrt()
    }
}

/// Where the percentile `p` (0..1] of `n` ascending values lies with commons-math's
/// estimators: the 0-based index of the lower value and the fraction of the way to the next
/// one (0 when the percentile is a value itself). `None` for no value.
fn percentile_pos(n: usize, p: f64, estimator: Estimator) -> Option<(usize, f64)> {
    if n == 0 {
        return None;
    }
    if n == 1 {
        return Some((0, 0.0));
    }
    let nf = n as f64;
    // `pos` is 1-based.
    let pos = match estimator {
        Estimator::Legacy => p * (nf + 1.0),
        Estimator::R3 => {
            if p <= 0.5 / nf {
                0.0
            } else {
                (nf * p).round_ties_even()
            }
        }
        Estimator::R7 => {
            if p >= 1.0 {
                nf
            } else {
                1.0 + (nf - 1.0) * p
            }
        }
    };
    if pos < 1.0 {
        return Some((0, 0.0));
    }
    if pos >= nf {
        return Some((n - 1, 0.0));
    }
    let floor = pos.floor();
    Some((floor as usize - 1, pos - floor))
}

/// The percentile `p` (0..1] of ascending, non-empty `sorted` with commons-math's estimators.
pub(crate) fn percentile(sorted: &[f64], p: f64, estimator: Estimator) -> f64 {
    match percentile_pos(sorted.len(), p, estimator) {
        None => f64::NAN,
        Some((i, 0.0)) => sorted[i],
        Some((i, frac)) => {
            let (lower, upper) = (sorted[i], sorted[i + 1]);
            lower + frac * (upper - lower)
        }
    }
}

impl Aggregator {
    /// [`Aggregator::apply`] over values that keep their type (`docs/compat.md` #14): with only
    /// doubles it is `apply`, bit for bit. With integers among them, sums, `count`, `diff`,
    /// `mult` and `squareSum` are exact integer arithmetic (a double only past `i64`, or when a
    /// double is among the values), min, max, median, first, last and a percentile that falls
    /// on a value return that value as it was given, and the mean is an integer only when the
    /// division is exact. `int_estimators` selects the `ep*` estimators, as `apply`'s
    /// `int_path` does (OpenTSDB's integer path: no downsample, no rate, integers only).
    pub fn apply_nums(self, values: &[Value], int_estimators: bool) -> Value {
        if !values.iter().any(|v| v.is_int()) {
            let floats: Vec<f64> = values.iter().map(|v| v.as_f64()).collect();
            return Value::Float(self.apply(&floats, false));
        }
        let all_int = values.iter().all(|v| v.is_int());
        let real = || values.iter().copied().filter(|v| !v.is_nan());
        let nan = Value::Float(f64::NAN);
        match self {
            Aggregator::First => values.first().copied().unwrap_or(nan),
            Aggregator::Last => values.last().copied().unwrap_or(nan),
            Aggregator::Diff => match (values.first(), values.last()) {
                (Some(Value::Int(a)), Some(Value::Int(b))) => {
                    crate::num::from_i128(i128::from(*b) - i128::from(*a))
                }
                (Some(a), Some(b)) => Value::Float(b.as_f64() - a.as_f64()),
                _ => nan,
            },
            Aggregator::Mult => {
                if all_int {
                    let product = values.iter().try_fold(1i128, |acc, v| match v {
                        Value::Int(i) => acc.checked_mul(i128::from(*i)),
                        Value::Float(_) => None,
                    });
                    if let Some(p) = product {
                        return crate::num::from_i128(p);
                    }
                }
                Value::Float(values.iter().map(|v| v.as_f64()).product())
            }
            Aggregator::Sum | Aggregator::ZimSum | Aggregator::PfSum | Aggregator::None => {
                let mut s = ExactSum::default();
                real().for_each(|v| s.add(v));
                s.sum()
            }
            Aggregator::SquareSum => {
                let mut s = ExactSum::default();
                let mut overflow = false;
                for v in real() {
                    match v {
                        Value::Int(i) => {
                            let sq = i128::from(i) * i128::from(i);
                            match s.ints.checked_add(sq) {
                                Some(t) => {
                                    s.ints = t;
                                    s.n_int += 1;
                                }
                                None => overflow = true,
                            }
                        }
                        Value::Float(f) => s.add(Value::Float(f * f)),
                    }
                }
                if overflow {
                    return Value::Float(real().map(|v| v.as_f64() * v.as_f64()).sum());
                }
                s.sum()
            }
            Aggregator::Min | Aggregator::MimMin | Aggregator::Max | Aggregator::MimMax => {
                let mut e = Extreme::new(matches!(self, Aggregator::Max | Aggregator::MimMax));
                real().for_each(|v| e.add(v));
                e.value()
            }
            Aggregator::Count => {
                let n = real().count() as i64;
                if all_int {
                    Value::Int(n)
                } else {
                    Value::Float(n as f64)
                }
            }
            Aggregator::Avg => {
                let mut s = ExactSum::default();
                real().for_each(|v| s.add(v));
                s.mean()
            }
            Aggregator::Dev => {
                let v = population_dev(real().map(|v| v.as_f64()));
                crate::num::from_result(v, all_int)
            }
            Aggregator::Median => {
                let sorted = sorted_nums(real());
                sorted.get(sorted.len() / 2).copied().unwrap_or(nan)
            }
            Aggregator::Percentile {
                per_mille,
                estimator,
            } => {
                let estimator = if int_estimators && all_int {
                    estimator
                } else {
                    Estimator::Legacy
                };
                let sorted = sorted_nums(real());
                let p = f64::from(per_mille) / 1000.0;
                match percentile_pos(sorted.len(), p, estimator) {
                    None => nan,
                    Some((i, 0.0)) => sorted[i],
                    Some((i, frac)) => {
                        let (lower, upper) = (sorted[i].as_f64(), sorted[i + 1].as_f64());
                        let both_int = sorted[i].is_int() && sorted[i + 1].is_int();
                        crate::num::from_result(lower + frac * (upper - lower), both_int)
                    }
                }
            }
        }
    }
}

/// Values in ascending exact order (no NaN among them).
fn sorted_nums(values: impl Iterator<Item = Value>) -> Vec<Value> {
    let mut v: Vec<Value> = values.collect();
    v.sort_by(|a, b| a.exact_cmp(*b).unwrap_or(std::cmp::Ordering::Equal));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agg(name: &str) -> Aggregator {
        Aggregator::from_name(name).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 || (a.is_nan() && b.is_nan())
    }

    #[test]
    fn names_round_trip_and_count() {
        assert_eq!(aggregator_names().count(), 35);
        for name in aggregator_names() {
            assert_eq!(agg(name).name(), name);
        }
        // case-sensitive
        assert_eq!(
            Aggregator::from_name("SUM").unwrap_err().to_string(),
            "No such name for 'aggregator': 'SUM'"
        );
    }

    #[test]
    fn interpolation_kinds() {
        use Interpolation::*;
        let expect = [
            ("sum", Lerp),
            ("zimsum", Zim),
            ("pfsum", Prev),
            ("min", Lerp),
            ("max", Lerp),
            ("mimmin", Max),
            ("mimmax", Min),
            ("avg", Lerp),
            ("median", Lerp),
            ("dev", Lerp),
            ("count", Zim),
            ("squareSum", Zim),
            ("mult", Lerp),
            ("diff", Lerp),
            ("first", Zim),
            ("last", Zim),
            ("p99", Lerp),
            ("ep50r3", Lerp),
            ("ep999r7", Lerp),
        ];
        for (name, kind) in expect {
            assert_eq!(agg(name).interpolation(), kind, "{name}");
        }
    }

    #[test]
    fn simple_functions() {
        let v = [4.0, 1.0, 3.0, 8.0];
        // 4+1+3+8 = 16
        for name in ["sum", "zimsum", "pfsum"] {
            assert_eq!(agg(name).apply(&v, false), 16.0);
        }
        assert_eq!(agg("min").apply(&v, false), 1.0);
        assert_eq!(agg("mimmin").apply(&v, false), 1.0);
        assert_eq!(agg("max").apply(&v, false), 8.0);
        assert_eq!(agg("mimmax").apply(&v, false), 8.0);
        assert_eq!(agg("avg").apply(&v, false), 4.0); // 16/4
        // sorted 1,3,4,8: sorted[4/2] = 4 (upper median)
        assert_eq!(agg("median").apply(&v, false), 4.0);
        assert_eq!(agg("count").apply(&v, false), 4.0);
        assert_eq!(agg("squareSum").apply(&v, false), 90.0); // 16+1+9+64
        assert_eq!(agg("mult").apply(&v, false), 96.0); // 4*1*3*8
        assert_eq!(agg("diff").apply(&v, false), 4.0); // 8-4
        assert_eq!(agg("first").apply(&v, false), 4.0);
        assert_eq!(agg("last").apply(&v, false), 8.0);
        // avg with no truncation on integer inputs: (1+2)/2 = 1.5 (`docs/compat.md` #4)
        assert_eq!(agg("avg").apply(&[1.0, 2.0], true), 1.5);
    }

    #[test]
    fn dev_is_population() {
        // mean 5, squared deviations 9+1+1+1+0+0+4+16 = 32, /8 = 4, sqrt = 2
        let v = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert!(close(agg("dev").apply(&v, false), 2.0));
        assert_eq!(agg("dev").apply(&[7.0], false), 0.0);
        // {1,2}: mean 1.5, var 0.25, dev 0.5 (not truncated to 0)
        assert!(close(agg("dev").apply(&[1.0, 2.0], true), 0.5));
    }

    #[test]
    fn nan_handling() {
        let v = [f64::NAN, 2.0, 3.0];
        assert_eq!(agg("sum").apply(&v, false), 5.0);
        assert_eq!(agg("count").apply(&v, false), 2.0);
        assert_eq!(agg("avg").apply(&v, false), 2.5);
        assert_eq!(agg("min").apply(&v, false), 2.0);
        assert!(agg("mult").apply(&v, false).is_nan());
        assert!(agg("first").apply(&v, false).is_nan());
        assert_eq!(agg("last").apply(&v, false), 3.0);
        assert!(agg("diff").apply(&v, false).is_nan());
        let all_nan = [f64::NAN, f64::NAN];
        for name in aggregator_names() {
            assert!(agg(name).apply(&all_nan, false).is_nan(), "{name}");
            assert!(agg(name).apply(&[], false).is_nan(), "{name}");
        }
    }

    #[test]
    fn legacy_percentiles() {
        let v = [1.0, 3.0, 4.0, 8.0];
        // pos = 0.5*5 = 2.5 -> x2 + .5*(x3-x2) = 3 + .5 = 3.5
        assert_eq!(agg("p50").apply(&v, false), 3.5);
        // pos = .75*5 = 3.75 -> 4 + .75*(8-4) = 7
        assert_eq!(agg("p75").apply(&v, false), 7.0);
        // pos 4.5 and 4.95 >= n -> max
        assert_eq!(agg("p90").apply(&v, false), 8.0);
        assert_eq!(agg("p99").apply(&v, false), 8.0);
        // pos = .5*5 = 2.5 < ... for p999: pos 4.995 -> max
        assert_eq!(agg("p999").apply(&v, false), 8.0);
        // pos for p50 of 2 values = 1.5 -> 1 + .5*(3-1) = 2
        assert_eq!(agg("p50").apply(&[3.0, 1.0], false), 2.0);
        assert_eq!(agg("p95").apply(&[6.0], false), 6.0);
    }

    #[test]
    fn ep_percentiles_only_on_integer_path() {
        let v = [1.0, 3.0, 4.0, 8.0];
        // pos = rint(4*.5) = 2 -> 3; rint(3.0) = 3 -> 4; rint(3.6) = 4 -> 8
        assert_eq!(agg("ep50r3").apply(&v, true), 3.0);
        assert_eq!(agg("ep75r3").apply(&v, true), 4.0);
        assert_eq!(agg("ep90r3").apply(&v, true), 8.0);
        // R-3 rint(4*.95=3.8)=4 -> 8; rint(1.5)=2 (half-even) on 3 values {1,3,4} at p=.5 -> 3
        assert_eq!(agg("ep95r3").apply(&v, true), 8.0);
        assert_eq!(agg("ep50r3").apply(&[1.0, 3.0, 4.0], true), 3.0);
        // pos = 1+3*.5 = 2.5 -> 3.5; 1+3*.75 = 3.25 -> 4 + .25*4 = 5
        assert_eq!(agg("ep50r7").apply(&v, true), 3.5);
        assert_eq!(agg("ep75r7").apply(&v, true), 5.0);
        // 1+3*.9 = 3.7 -> 4 + .7*4 = 6.8
        assert!(close(agg("ep90r7").apply(&v, true), 6.8));
        // double path: LEGACY (p75 = 7)
        assert_eq!(agg("ep75r7").apply(&v, false), 7.0);
        assert_eq!(agg("ep75r3").apply(&v, false), 7.0);
    }
}
