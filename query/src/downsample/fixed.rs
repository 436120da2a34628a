//! The fast path of fixed-interval downsampling: buckets folded as they go over the columns a
//! read hands over, and the neighbour buckets around the query range.

use chrono_tz::Tz;

use super::buckets::{Bucket, Buckets, Fold};
use super::{DownsampleSpec, FillPolicy, Interval};
use crate::num::{ExactSum, Point};
use strata_tsdb::Value;

/// A fixed-interval downsample that folds each bucket as it goes: no fill, and a sum, zimsum,
/// pfsum, min, mimmin, max, mimmax, count or avg.
#[derive(Debug, Clone, Copy)]
pub(super) struct FixedFold {
    pub(super) width: i64,
    pub(super) fold: Fold,
    /// The first bucket at or after the range's start.
    pub(super) first: i64,
}

impl FixedFold {
    pub(super) fn of(spec: &DownsampleSpec, start: i64) -> Option<FixedFold> {
        let fold = Fold::of(spec.function);
        let width = match spec.interval {
            Interval::Fixed(width) if spec.fill == FillPolicy::None => width.max(1),
            _ => return None,
        };
        if !matches!(
            fold,
            Fold::Sum | Fold::Min | Fold::Max | Fold::Count | Fold::Avg
        ) {
            return None;
        }
        let mut first = Buckets::Fixed(width).floor(start);
        if first < start {
            first = first.saturating_add(width);
        }
        Some(FixedFold { width, fold, first })
    }

    /// Folds the doubles `vals` (their times sorted, all in emitted buckets, given by `ts`),
    /// as [`Bucket`] does: in order, NaNs skipped, NaN for a bucket of only NaNs.
    #[inline(always)]
    pub(super) fn fold_floats(
        &self,
        ts: &impl Fn(usize) -> i64,
        vals: &[f64],
        out: &mut Vec<Point>,
    ) {
        // One loop per fold, so each inner loop is a plain accumulation. Sums and means start
        // from the `-0.0` of `Iterator::sum`, as `Bucket` does.
        let float = |value: Option<f64>| Value::Float(value.unwrap_or(f64::NAN));
        let bucket = |from: usize, to: usize| vals.get(from..to).unwrap_or_default();
        match self.fold {
            Fold::Sum => for_each_bucket(vals.len(), ts, self.width, |b, from, to| {
                let sum = fold_floats(bucket(from, to), -0.0, |a, v| a + v, true).0;
                out.push((b, float(sum)));
            }),
            Fold::Min => for_each_bucket(vals.len(), ts, self.width, |b, from, to| {
                let min = fold_floats(bucket(from, to), f64::INFINITY, f64::min, false).0;
                out.push((b, float(min)));
            }),
            Fold::Max => for_each_bucket(vals.len(), ts, self.width, |b, from, to| {
                let max = fold_floats(bucket(from, to), f64::NEG_INFINITY, f64::max, false).0;
                out.push((b, float(max)));
            }),
            Fold::Count => for_each_bucket(vals.len(), ts, self.width, |b, from, to| {
                let (any, real) = fold_floats(bucket(from, to), 0.0, |a, _| a, false);
                out.push((b, float(any.map(|_| real as f64))));
            }),
            _ => for_each_bucket(vals.len(), ts, self.width, |b, from, to| {
                let (sum, real) = fold_floats(bucket(from, to), -0.0, |a, v| a + v, true);
                out.push((b, float(sum.map(|sum| sum / real as f64))));
            }),
        }
    }

    /// Folds the integers `vals` (their times sorted, all in emitted buckets, given by `ts`)
    /// exactly, as [`Bucket`] does: sums without overflow, integer min, max and count, and a
    /// mean that is an integer only when the division is exact.
    #[inline(always)]
    pub(super) fn fold_ints(&self, ts: &impl Fn(usize) -> i64, vals: &[i64], out: &mut Vec<Point>) {
        let bucket = |from: usize, to: usize| vals.get(from..to).unwrap_or_default();
        match self.fold {
            Fold::Sum => for_each_bucket(vals.len(), ts, self.width, |b, from, to| {
                out.push((b, crate::num::from_i128(int_sum(bucket(from, to)))));
            }),
            Fold::Min => for_each_bucket(vals.len(), ts, self.width, |b, from, to| {
                let min = bucket(from, to).iter().copied().min();
                out.push((b, min.map_or(Value::Float(f64::NAN), Value::Int)));
            }),
            Fold::Max => for_each_bucket(vals.len(), ts, self.width, |b, from, to| {
                let max = bucket(from, to).iter().copied().max();
                out.push((b, max.map_or(Value::Float(f64::NAN), Value::Int)));
            }),
            Fold::Count => for_each_bucket(vals.len(), ts, self.width, |b, from, to| {
                out.push((b, Value::Int((to - from) as i64)));
            }),
            _ => for_each_bucket(vals.len(), ts, self.width, |b, from, to| {
                let sum = ExactSum {
                    ints: int_sum(bucket(from, to)),
                    n_int: (to - from) as u64,
                    ..ExactSum::default()
                };
                out.push((b, sum.mean()));
            }),
        }
    }
}

/// The `all` bucket of [`downsample_all_folding`]: one bucket at `start` over the points in
/// `[start, end]`, none if there are none, folded by `acc` (a fresh [`Bucket`]); `first` and
/// `last` look at one point only.
pub(super) fn fold_all<T>(
    points: &[T],
    at: &impl Fn(&T) -> (i64, Value),
    mut acc: Bucket,
    (start, end): (i64, i64),
    out: &mut Vec<Point>,
) -> bool {
    if acc.fold == Fold::Values {
        return false;
    }
    let lo = points.partition_point(|p| at(p).0 < start);
    let hi = points.partition_point(|p| at(p).0 <= end);
    let points = points.get(lo..hi).unwrap_or_default();
    let folded = match acc.fold {
        Fold::First => points.first().map(std::slice::from_ref),
        Fold::Last => points.last().map(std::slice::from_ref),
        _ => Some(points),
    };
    // No value buffer: only `Fold::Values` uses one.
    let mut values = Vec::new();
    for p in folded.unwrap_or_default() {
        acc.push(at(p).1, &mut values);
    }
    if acc.any {
        out.push((start, acc.finish(&values)));
    }
    true
}

/// Calls `f(bucket start, from, to)` for each bucket of the points `0..n` (sorted, all inside
/// the emitted range, given by their times `ts`), with `from..to` the bucket's points. The
/// next point usually falls in the next bucket, so the bucket start is only recomputed (a
/// division) when it does not.
#[inline(always)]
pub(super) fn for_each_bucket(
    n: usize,
    ts: &impl Fn(usize) -> i64,
    width: i64,
    mut f: impl FnMut(i64, usize, usize),
) {
    let mut i = 0;
    let mut b = i64::MIN;
    // The previous bucket's point count: at a regular interval, the next bucket holds as
    // many, which two probes confirm.
    let mut last_len = 0;
    while i < n {
        let t = ts(i);
        let next = b.saturating_add(width);
        b = if t >= next && t < next.saturating_add(width) {
            next
        } else {
            Buckets::Fixed(width).floor(t)
        };
        let next = b.saturating_add(width);
        let from = i;
        let guess = from + last_len;
        i = if last_len > 0
            && guess <= n
            && ts(guess - 1) < next
            && (guess == n || ts(guess) >= next)
        {
            guess
        } else {
            bucket_end(ts, from, n, next)
        };
        last_len = i - from;
        f(b, from, i);
    }
}

/// The end of the bucket that starts with point `from` (`ts(from) < next`) among the sorted
/// points `0..n`: the first point at or after `next`, found by a galloping search, so that a
/// bucket of `k` points costs about `2 log2 k` probes instead of `k`.
#[inline(always)]
pub(super) fn bucket_end(ts: &impl Fn(usize) -> i64, from: usize, n: usize, next: i64) -> usize {
    // Every point in `from..lo` is before `next`.
    let mut lo = from + 1;
    let mut step = 1;
    while lo + step <= n && ts(lo + step - 1) < next {
        lo += step;
        step *= 2;
    }
    // The end lies in `lo..=hi`: point `hi` is at or after `next`, or `hi` is `n`.
    let mut hi = (lo + step - 1).min(n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if ts(mid) < next {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The non-NaN values of `v` folded with `add` from `init`, and their count; `None` for the
/// fold when there is no such value. With `sums`, `add` is `+`.
#[inline(always)]
pub(super) fn fold_floats(
    v: &[f64],
    init: f64,
    add: impl Fn(f64, f64) -> f64,
    sums: bool,
) -> (Option<f64>, u64) {
    let (acc, real) = if sums {
        // A plain sum is NaN only when some value is NaN (or infinities cancel, which the
        // NaN-skipping fold gives as well): only then is that needed.
        let sum = v.iter().fold(init, |a, &x| a + x);
        if sum.is_nan() {
            fold_values(v, init, &add)
        } else {
            (sum, v.len() as u64)
        }
    } else if v.iter().fold(false, |nan, x| nan | x.is_nan()) {
        // Not `any`: without an early exit the test is a few vector instructions.
        fold_values(v, init, &add)
    } else {
        // With no branch in the loop, the running value stays in a register.
        (v.iter().copied().fold(init, &add), v.len() as u64)
    };
    ((real > 0).then_some(acc), real)
}

/// Folds `values`, skipping NaNs.
#[inline(always)]
pub(super) fn fold_values(values: &[f64], init: f64, add: &impl Fn(f64, f64) -> f64) -> (f64, u64) {
    let (mut acc, mut real) = (init, 0u64);
    for &v in values {
        if !v.is_nan() {
            real += 1;
            acc = add(acc, v);
        }
    }
    (acc, real)
}

/// The exact sum of `ints`. When the magnitudes cannot carry an i64 sum past its range it is
/// summed as i64s, which vectorizes: with `n` values each in `[-2^(k-1), 2^(k-1))`, where
/// `n <= 2^(63-k)`, the magnitudes add up to less than 2^62; adding 2^(k-1) maps that range
/// onto `[0, 2^k)`, which the OR of the results shows. Otherwise as i128s.
#[inline(always)]
pub(super) fn int_sum(ints: &[i64]) -> i128 {
    let n = ints.len() as u64;
    // The smallest power of two at least `n`, as an exponent.
    let log = 64 - n.saturating_sub(1).leading_zeros();
    if let Some(k) = 62u32.checked_sub(log).filter(|&k| k >= 1) {
        let half = 1i64 << (k - 1);
        let (mut sum, mut bits) = (0i64, 0u64);
        for &v in ints {
            sum = sum.wrapping_add(v);
            bits |= v.wrapping_add(half) as u64;
        }
        if bits >> k == 0 {
            return i128::from(sum);
        }
    }
    ints.iter().map(|&v| i128::from(v)).sum()
}

/// The buckets just outside the emitted range of one series, for the later stages only.
///
/// OpenTSDB downsamples the whole scan window (whole hour rows around the query), computes rates
/// and interpolates across series over it, and only then drops what lies outside `[start, end]`
/// (OpenTSDB docs: `user_guide/query (order of operations)`, `user_guide/query/aggregators
/// (interpolation)`). So the first emitted rate is taken against the bucket before `start`, and a
/// series without a bucket at some `t` near an edge is interpolated towards its bucket beyond the
/// edge. Strata's emitted buckets aggregate only points in `[start, end]` (`docs/compat.md` #8),
/// but to give the same rates and interpolation it also computes, from `points` (sorted, the scan
/// window):
/// - `before`: the last non-empty bucket that starts before the first emitted bucket, over all
///   of its points;
/// - `after`: the first non-empty bucket that starts after `end`, over all of its points.
///
/// The caller places them around [`downsample_into`]'s output and drops them after aggregation.
/// `all` has no neighbours. Fill policies do not apply to these buckets.
pub(crate) fn edge_buckets<T>(
    points: &[T],
    at: impl Fn(&T) -> (i64, Value),
    spec: &DownsampleSpec,
    (start, end): (i64, i64),
    tz: Tz,
    values: &mut Vec<Value>,
) -> (Option<Point>, Option<Point>) {
    let buckets = match spec.interval {
        Interval::All => return (None, None),
        Interval::Fixed(width) => Buckets::Fixed(width.max(1)),
        Interval::Calendar { count, unit } => Buckets::Calendar { count, unit, tz },
    };
    if end < start {
        return (None, None);
    }
    let mut first = buckets.floor(start);
    if first < start {
        first = buckets.next(first);
    }
    let whole_bucket = |b: i64, from: usize, values: &mut Vec<Value>| -> Point {
        let mut acc = Bucket::new(spec.function);
        values.clear();
        for p in &points[from..] {
            let (ts, v) = at(p);
            if buckets.floor(ts) != b {
                break;
            }
            acc.push(v, values);
        }
        (b, acc.finish(values))
    };
    // Points before the first emitted bucket: the bucket of the last of them.
    let ts_of = |p: &T| at(p).0;
    let below = points.partition_point(|p| ts_of(p) < first);
    let before = below.checked_sub(1).map(|last| {
        let b = buckets.floor(ts_of(&points[last]));
        let from = points[..below].partition_point(|p| buckets.floor(ts_of(p)) < b);
        whole_bucket(b, from, values)
    });
    // Points after `end` that belong to no emitted bucket: the bucket of the first of them.
    let above = points.partition_point(|p| ts_of(p) <= end);
    let after = points[above..]
        .iter()
        .position(|p| buckets.floor(ts_of(p)) > end)
        .map(|i| {
            let from = above + i;
            whole_bucket(buckets.floor(ts_of(&points[from])), from, values)
        });
    (before, after)
}
