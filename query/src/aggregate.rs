//! Cross-series aggregation with interpolation (OpenTSDB docs: `user_guide/query/aggregators
//! (interpolation)`).
//!
//! The output timestamps are the union of the series' timestamps. A series contributes only from
//! its first to its last point (no extrapolation). At a timestamp where it has no point, its value
//! comes from the aggregator's interpolation (LERP, zero, type max/min, previous), except for rate
//! series, which contribute their previous rate. Strata differences: values keep their type,
//! functions over integers are exact and LERP has no integer truncation (`docs/compat.md` #4 and
//! #14, see `num.rs`); a rate series has no seed value before its first real rate, so it is left
//! out there (`docs/compat.md` #3).

use crate::aggregator::{Aggregator, Interpolation};
use crate::num::{ExactSum, Point};
use strata_tsdb::Value;

/// Where a series stands at an output timestamp.
enum Position {
    /// Before its first point or after its last: contributes nothing.
    Inactive,
    /// Has a point exactly at the timestamp (index).
    At(usize),
    /// Between points `i` and `i + 1`.
    Between(usize),
}

/// Linear interpolation at `t` between `(x0, y0)` and `(x1, y1)`, in `f64`.
fn lerp(t: i64, (x0, y0): (i64, f64), (x1, y1): (i64, f64)) -> f64 {
    y0 + (t - x0) as f64 * (y1 - y0) / (x1 - x0) as f64
}

/// Linear interpolation at `t` (`x0 < t < x1`) between two points: an integer when both are
/// integers and the interpolated value is exactly one, else the double [`lerp`].
fn lerp_num(t: i64, (x0, y0): (i64, Value), (x1, y1): (i64, Value)) -> Value {
    if let (Value::Int(a), Value::Int(b)) = (y0, y1) {
        let den = i128::from(x1) - i128::from(x0);
        let num = (i128::from(b) - i128::from(a)).checked_mul(i128::from(t) - i128::from(x0));
        if let Some(num) = num
            && den != 0
            && num % den == 0
        {
            // Between `a` and `b`, so it fits an i64.
            return crate::num::from_i128(i128::from(a) + num / den);
        }
    }
    Value::Float(lerp(t, (x0, y0.as_f64()), (x1, y1.as_f64())))
}

/// A zero of the same type as `like`, for the ZIM interpolation.
fn zero_like(like: Value) -> Value {
    match like {
        Value::Int(_) => Value::Int(0),
        Value::Float(_) => Value::Float(0.0),
    }
}

/// Aggregates the series of one group (each sorted by time, unique timestamps) into one series.
///
/// `rate` says the inputs are rates: no interpolation, a missing rate takes the series' previous
/// rate. `int_estimators` selects the `ep*` percentile estimators of OpenTSDB's integer path (no
/// downsample, no rate). Each output point is [`Aggregator::apply_nums`] of the series' values
/// at its timestamp, which keep their type (NaN when every contributing value is NaN).
/// `Aggregator::None` is not meant to be aggregated (each series is its own result); given it,
/// this sums.
pub fn aggregate(
    series: &[&[Point]],
    aggregator: Aggregator,
    rate: bool,
    int_estimators: bool,
) -> Vec<Point> {
    let int_estimators = int_estimators && !rate;
    if let Some(out) = aggregate_aligned(series, aggregator, int_estimators) {
        return out;
    }
    aggregate_general(series, aggregator, rate, int_estimators)
}

/// [`aggregate`] for any series: merges the timestamps and interpolates.
fn aggregate_general(
    series: &[&[Point]],
    aggregator: Aggregator,
    rate: bool,
    int_estimators: bool,
) -> Vec<Point> {
    let mut stamps: Vec<i64> = series
        .iter()
        .flat_map(|s| s.iter().map(|(t, _)| *t))
        .collect();
    stamps.sort_unstable();
    stamps.dedup();
    let interpolation = aggregator.interpolation();
    // next[i] = number of points of series i with ts <= the current output timestamp.
    let mut next = vec![0usize; series.len()];
    let mut values = Vec::with_capacity(series.len());
    let mut out = Vec::with_capacity(stamps.len());
    for t in stamps {
        values.clear();
        for (s, n) in series.iter().zip(next.iter_mut()) {
            while *n < s.len() && s[*n].0 <= t {
                *n += 1;
            }
            let position = match (s.first(), s.last()) {
                (Some(first), Some(last)) if first.0 <= t && t <= last.0 => {
                    if s[*n - 1].0 == t {
                        Position::At(*n - 1)
                    } else {
                        Position::Between(*n - 1)
                    }
                }
                _ => Position::Inactive,
            };
            let value = match position {
                Position::Inactive => continue,
                Position::At(i) => s[i].1,
                Position::Between(i) if rate => s[i].1,
                Position::Between(i) => match interpolation {
                    Interpolation::Lerp => lerp_num(t, s[i], s[i + 1]),
                    Interpolation::Zim => zero_like(s[i].1),
                    // The type's extreme never wins the min (max): the series is left out.
                    Interpolation::Max | Interpolation::Min => continue,
                    Interpolation::Prev => s[i].1,
                },
            };
            values.push(value);
        }
        if values.is_empty() {
            continue;
        }
        out.push((t, aggregator.apply_nums(&values, int_estimators)));
    }
    out
}

/// The common case after downsampling: every series has exactly the same strictly increasing
/// timestamps, so each output point aggregates the series' points at one index and no
/// interpolation or timestamp merge is needed. Gives what the general path gives (every series
/// is `At` its point at every timestamp); `None` when the series are not aligned.
fn aggregate_aligned(
    series: &[&[Point]],
    aggregator: Aggregator,
    int_estimators: bool,
) -> Option<Vec<Point>> {
    let first = *series.first()?;
    if first.is_empty()
        || first.windows(2).any(|w| w[0].0 >= w[1].0)
        || series
            .iter()
            .any(|s| s.len() != first.len() || s.iter().zip(first).any(|(a, b)| a.0 != b.0))
    {
        return None;
    }
    if matches!(
        aggregator,
        Aggregator::Sum | Aggregator::ZimSum | Aggregator::PfSum | Aggregator::None
    ) {
        return Some(sum_aligned(series, first));
    }
    let mut values = Vec::with_capacity(series.len());
    let mut out = Vec::with_capacity(first.len());
    for (i, (t, _)) in first.iter().enumerate() {
        values.clear();
        values.extend(series.iter().map(|s| s[i].1));
        out.push((*t, aggregator.apply_nums(&values, int_estimators)));
    }
    Some(out)
}

/// [`aggregate_aligned`] for the sums: one pass over each series in turn, adding into a sum
/// per timestamp, instead of one pass over the series per timestamp, which read every series'
/// points a cache line apart. Each timestamp's sum still adds its values in series order, as
/// [`Aggregator::apply_nums`] does, so it is the same sum bit for bit.
fn sum_aligned(series: &[&[Point]], first: &[Point]) -> Vec<Point> {
    let mut sums = vec![ExactSum::default(); first.len()];
    for s in series {
        for (p, sum) in s.iter().zip(sums.iter_mut()) {
            sum.add(p.1);
        }
    }
    first
        .iter()
        .zip(&sums)
        .map(|((t, _), sum)| (*t, sum.sum()))
        .collect()
}

#[cfg(test)]
#[path = "aggregate/tests.rs"]
mod tests;
