//! Cross-series aggregation with interpolation (§e.8).
//!
//! The output timestamps are the union of the series' timestamps. A series contributes only from its
//! first to its last point (no extrapolation). At a timestamp where it has no point, its value comes
//! from the aggregator's interpolation (LERP, zero, type max/min, previous), except for rate series,
//! which contribute their previous rate. Strata differences: LERP and every function run in `f64`
//! with no integer truncation (exception #4); a rate series has no seed value before its first real
//! rate, so it is left out there (exception #3).

use crate::aggregator::{Aggregator, Interpolation};
use crate::num::{Num, Point};

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

/// Aggregates the series of one group (each sorted by time, unique timestamps) into one series.
///
/// `rate` says the inputs are rates: no interpolation, a missing rate takes the series' previous
/// rate. An output point is a `Num::Int` only when `rate` is false, the current and next points of
/// every series are integers, and the result is exactly integral; otherwise it is a `Num::Float`
/// (NaN when every contributing value is NaN). `Aggregator::None` is not meant to be aggregated
/// (each series is its own result); given it, this sums.
pub fn aggregate(series: &[&[Point]], aggregator: Aggregator, rate: bool) -> Vec<Point> {
    if let Some(out) = aggregate_aligned(series, aggregator, rate) {
        return out;
    }
    aggregate_general(series, aggregator, rate)
}

/// [`aggregate`] for any series: merges the timestamps and interpolates.
fn aggregate_general(series: &[&[Point]], aggregator: Aggregator, rate: bool) -> Vec<Point> {
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
        let mut int_path = !rate;
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
            // Integer output needs every current and next point of the group to be an integer.
            let (cur, nxt) = match position {
                Position::Inactive if *n == 0 => (None, s.first()),
                Position::Inactive => (None, None),
                Position::At(i) | Position::Between(i) => (s.get(i), s.get(i + 1)),
            };
            if cur.is_some_and(|p| !p.1.is_int()) || nxt.is_some_and(|p| !p.1.is_int()) {
                int_path = false;
            }
            let value = match position {
                Position::Inactive => continue,
                Position::At(i) => s[i].1.to_f64(),
                Position::Between(i) => {
                    let (x0, y0) = (s[i].0, s[i].1.to_f64());
                    if rate {
                        y0
                    } else {
                        match interpolation {
                            Interpolation::Lerp => {
                                lerp(t, (x0, y0), (s[i + 1].0, s[i + 1].1.to_f64()))
                            }
                            Interpolation::Zim => 0.0,
                            Interpolation::Max => f64::MAX,
                            Interpolation::Min => -f64::MAX,
                            Interpolation::Prev => y0,
                        }
                    }
                }
            };
            values.push(value);
        }
        if values.is_empty() {
            continue;
        }
        out.push((
            t,
            Num::from_result(aggregator.apply(&values, int_path), int_path),
        ));
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
    rate: bool,
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
        return Some(sum_aligned(series, first, rate));
    }
    let mut values = Vec::with_capacity(series.len());
    let mut out = Vec::with_capacity(first.len());
    for (i, (t, _)) in first.iter().enumerate() {
        values.clear();
        let mut int_path = !rate;
        for s in series {
            let v = s[i].1;
            // Integer output needs every current and next point of the group to be an integer.
            if !v.is_int() || s.get(i + 1).is_some_and(|p| !p.1.is_int()) {
                int_path = false;
            }
            values.push(v.to_f64());
        }
        out.push((
            *t,
            Num::from_result(aggregator.apply(&values, int_path), int_path),
        ));
    }
    Some(out)
}

/// [`aggregate_aligned`] for the sums: one pass over each series in turn, adding into a sum
/// per timestamp, instead of one pass over the series per timestamp, which read every series'
/// points a cache line apart (a quarter of a 200-series panel's aggregation time went to those
/// misses). Each timestamp's sum still adds its values in series order, from the same start as
/// [`Aggregator::apply`], skipping NaNs, so it is the same sum bit for bit.
fn sum_aligned(series: &[&[Point]], first: &[Point], rate: bool) -> Vec<Point> {
    let n = first.len();
    let mut sums = vec![std::iter::empty::<f64>().sum::<f64>(); n];
    let mut real = vec![false; n];
    // Integer output needs every current and next point of the group to be an integer.
    let mut ints = vec![!rate; n];
    for s in series {
        let slots = sums.iter_mut().zip(real.iter_mut().zip(ints.iter_mut()));
        for (i, (p, (sum, (real, int)))) in s.iter().zip(slots).enumerate() {
            if !p.1.is_int() || s.get(i + 1).is_some_and(|q| !q.1.is_int()) {
                *int = false;
            }
            let v = p.1.to_f64();
            if !v.is_nan() {
                *sum += v;
                *real = true;
            }
        }
    }
    first
        .iter()
        .zip(sums.iter().zip(&real).zip(&ints))
        .map(|((t, _), ((&sum, &real), &int))| {
            let value = if real { sum } else { f64::NAN };
            (*t, Num::from_result(value, int))
        })
        .collect()
}

#[cfg(test)]
#[path = "aggregate/tests.rs"]
mod tests;
