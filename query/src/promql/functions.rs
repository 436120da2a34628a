//! The value functions of PromQL that Strata evaluates, over plain slices: the range-vector
//! functions over the samples of one window, and the bucket quantile of `histogram_quantile`.
//! Each follows Prometheus' definition (promql/functions.go and promql/quantile.go of
//! Prometheus 3), edge cases included; the tests re-derive Prometheus' own expected values.

use super::plan::RangeFunc;

/// A sample: time in ms and value.
pub(crate) type Sample = (i64, f64);

/// The value of `func` over the samples of one window `(end - range, end]` (`samples` holds
/// exactly those, in time order), or `None` where Prometheus gives no sample.
pub(crate) fn range_function(
    func: RangeFunc,
    samples: &[Sample],
    end_ms: i64,
    range_ms: i64,
) -> Option<f64> {
    let (first, last) = (samples.first()?, samples.last()?);
    match func {
        RangeFunc::Rate => extrapolated_rate(samples, end_ms - range_ms, end_ms, true, true),
        RangeFunc::Increase => extrapolated_rate(samples, end_ms - range_ms, end_ms, true, false),
        RangeFunc::Delta => extrapolated_rate(samples, end_ms - range_ms, end_ms, false, false),
        RangeFunc::Irate => irate(samples),
        RangeFunc::AvgOverTime => Some(average(samples.iter().map(|s| s.1))),
        RangeFunc::SumOverTime => Some(kahan_sum(samples.iter().map(|s| s.1))),
        RangeFunc::CountOverTime => Some(samples.len() as f64),
        RangeFunc::LastOverTime => Some(last.1),
        RangeFunc::MinOverTime => {
            Some(samples.iter().skip(1).fold(
                first.1,
                |m, s| {
                    if s.1 < m || m.is_nan() { s.1 } else { m }
                },
            ))
        }
        RangeFunc::MaxOverTime => {
            Some(samples.iter().skip(1).fold(
                first.1,
                |m, s| {
                    if s.1 > m || m.is_nan() { s.1 } else { m }
                },
            ))
        }
    }
}

/// `rate`, `increase` and `delta`: the change over the window, corrected for counter resets
/// (when `counter`), extrapolated towards the window's edges, and per second (when `per_second`).
///
/// The first and last samples are extrapolated to the window's edges when they lie within 1.1
/// average sample intervals of them, and by half an average interval otherwise, since the
/// series then probably starts or ends inside the window. A counter is never extrapolated
/// below zero. The window is `(start_ms, end_ms]`. Fewer than two samples give no value.
pub(crate) fn extrapolated_rate(
    samples: &[Sample],
    start_ms: i64,
    end_ms: i64,
    counter: bool,
    per_second: bool,
) -> Option<f64> {
    if samples.len() < 2 {
        return None;
    }
    let (first, last) = (samples[0], samples[samples.len() - 1]);
    let mut result = last.1 - first.1;
    if counter {
        for w in samples.windows(2) {
            if w[1].1 < w[0].1 {
                result += w[0].1;
            }
        }
    }
    let mut to_start = (first.0 - start_ms) as f64 / 1000.0;
    let mut to_end = (end_ms - last.0) as f64 / 1000.0;
    let sampled = (last.0 - first.0) as f64 / 1000.0;
    let average_interval = sampled / (samples.len() - 1) as f64;
    let threshold = average_interval * 1.1;
    if to_start >= threshold {
        to_start = average_interval / 2.0;
    }
    if counter && result > 0.0 && first.1 >= 0.0 {
        // The counter would reach zero this long before the first sample.
        let to_zero = sampled * (first.1 / result);
        if to_zero < to_start {
            to_start = to_zero;
        }
    }
    if to_end >= threshold {
        to_end = average_interval / 2.0;
    }
    let mut factor = if sampled != 0.0 {
        (sampled + to_start + to_end) / sampled
    } else {
        1.0
    };
    if per_second {
        factor /= (end_ms - start_ms) as f64 / 1000.0;
    }
    Some(result * factor)
}

/// `irate`: the per-second change between the last two samples; after a counter reset, the
/// last value itself is the change.
fn irate(samples: &[Sample]) -> Option<f64> {
    let [.., prev, last] = samples else {
        return None;
    };
    let interval_ms = last.0 - prev.0;
    if interval_ms == 0 {
        return None;
    }
    let change = if last.1 < prev.1 {
        last.1
    } else {
        last.1 - prev.1
    };
    Some(change / (interval_ms as f64 / 1000.0))
}

/// Neumaier's compensated sum, as Prometheus sums (an infinite partial sum resets the
/// compensation, so infinities come out as infinities, not NaN).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct KahanSum {
    sum: f64,
    c: f64,
}

impl KahanSum {
    /// Adds `x`.
    pub(crate) fn add(&mut self, x: f64) {
        let t = self.sum + x;
        if t.is_infinite() {
            self.c = 0.0;
        } else if self.sum.abs() >= x.abs() {
            self.c += (self.sum - t) + x;
        } else {
            self.c += (x - t) + self.sum;
        }
        self.sum = t;
    }

    /// The sum so far.
    pub(crate) fn value(&self) -> f64 {
        self.sum + self.c
    }
}

/// The compensated sum of `values`.
pub(crate) fn kahan_sum(values: impl Iterator<Item = f64>) -> f64 {
    let mut k = KahanSum::default();
    values.for_each(|v| k.add(v));
    k.value()
}

/// The mean of `values` (at least one): the compensated sum over the count while the sum
/// stays finite, else an incremental mean, which cannot overflow.
pub(crate) fn average(values: impl Iterator<Item = f64> + Clone) -> f64 {
    let mut k = KahanSum::default();
    let mut n = 0u64;
    for v in values.clone() {
        k.add(v);
        n += 1;
    }
    let mean = k.value() / n as f64;
    if !mean.is_infinite() || values.clone().any(f64::is_infinite) {
        return mean;
    }
    let mut mean = 0.0;
    for (i, v) in values.enumerate() {
        mean += (v - mean) / (i + 1) as f64;
    }
    mean
}

/// One bucket of a classic histogram: its upper bound (`le`) and cumulative count.
pub(crate) type Bucket = (f64, f64);

/// The `q` quantile of a classic histogram's buckets, interpolated linearly inside the
/// bucket that holds it: NaN without a `+Inf` bucket, with fewer than two buckets or without
/// observations, -Inf/+Inf for `q` below 0/above 1. Buckets with the same bound are added
/// together, and counts that decrease (which a scrape racing an update can give) are raised
/// to their predecessor, as are differences within 1e-12 relative.
pub(crate) fn bucket_quantile(q: f64, buckets: &mut Vec<Bucket>) -> f64 {
    if q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    match buckets.last() {
        Some(b) if b.0 == f64::INFINITY => {}
        _ => return f64::NAN,
    }
    buckets.dedup_by(|b, a| {
        if a.0 == b.0 {
            a.1 += b.1;
            true
        } else {
            false
        }
    });
    let mut prev = buckets[0].1;
    for b in buckets.iter_mut().skip(1) {
        if b.1 == prev {
            continue;
        }
        if almost_equal(prev, b.1, 1e-12) || b.1 < prev {
            b.1 = prev;
            continue;
        }
        prev = b.1;
    }
    if buckets.len() < 2 {
        return f64::NAN;
    }
    let observations = buckets[buckets.len() - 1].1;
    if observations == 0.0 {
        return f64::NAN;
    }
    let mut rank = q * observations;
    let last = buckets.len() - 1;
    let b = buckets[..last].partition_point(|b| b.1 < rank);
    if b == last {
        return buckets[last - 1].0;
    }
    if b == 0 && buckets[0].0 <= 0.0 {
        return buckets[0].0;
    }
    let (mut start, end, mut count) = (0.0, buckets[b].0, buckets[b].1);
    if b > 0 {
        start = buckets[b - 1].0;
        count -= buckets[b - 1].1;
        rank -= buckets[b - 1].1;
    }
    start + (end - start) * (rank / count)
}

/// Whether `a` and `b` differ by less than `epsilon` relative (absolute near zero).
fn almost_equal(a: f64, b: f64, epsilon: f64) -> bool {
    const MIN_NORMAL: f64 = f64::MIN_POSITIVE;
    if a == b {
        return true;
    }
    let abs_sum = a.abs() + b.abs();
    let diff = (a - b).abs();
    if a == 0.0 || b == 0.0 || abs_sum < MIN_NORMAL {
        return diff < epsilon * MIN_NORMAL;
    }
    diff / abs_sum.min(f64::MAX) < epsilon
}

#[cfg(test)]
mod tests;
