//! Expected values re-derived from the cases of Prometheus' promql/promqltest/testdata
//! (functions.test, histograms.test); each comment gives the derivation.

use super::*;

const MIN: i64 = 60_000;

/// Samples `values` every `interval` ms from 0, as a `load` line of the test files writes
/// them (`None` for `_`, no sample).
fn load(interval: i64, values: &[Option<f64>]) -> Vec<Sample> {
    values
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.map(|v| (i as i64 * interval, v)))
        .collect()
}

/// `a+bxN`: a, a+b, ..., a+N*b.
fn series(a: f64, b: f64, n: usize) -> Vec<Option<f64>> {
    (0..=n).map(|i| Some(a + b * i as f64)).collect()
}

/// The samples of `s` in the window `(at - range, at]`, and the function's value there.
fn eval(func: RangeFunc, s: &[Sample], at: i64, range: i64) -> Option<f64> {
    let w: Vec<Sample> = s
        .iter()
        .copied()
        .filter(|(t, _)| *t > at - range && *t <= at)
        .collect();
    range_function(func, &w, at, range)
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() <= 1e-12 * b.abs().max(1.0))
}

#[test]
fn increase_extrapolates_to_the_window_and_to_zero() {
    let foo = load(5 * MIN, &series(0.0, 10.0, 10));
    let mut bar_v = series(0.0, 18.0, 5);
    bar_v.extend(series(0.0, 18.0, 5));
    let bar = load(5 * MIN, &bar_v);
    let dings = load(5 * MIN, &series(10.0, 10.0, 10));
    let bumms = load(5 * MIN, &series(1.0, 10.0, 10));
    // (0, 50m] leaves out t=0: 10..100 over 45 m, extrapolated 5 m to the start: 90*50/45.
    assert!(close(
        eval(RangeFunc::Increase, &foo, 50 * MIN, 50 * MIN),
        100.0
    ));
    // 18..90, reset, 0..72: 144 over 45 m, to the start 5 m (zero would be 5.6 m away).
    assert!(close(
        eval(RangeFunc::Increase, &bar, 50 * MIN, 50 * MIN),
        160.0
    ));
    // Over 100 m every sample is in; a series at 0 at t=0 is not extrapolated at all.
    assert!(close(
        eval(RangeFunc::Increase, &foo, 50 * MIN, 100 * MIN),
        100.0
    ));
    assert!(close(
        eval(RangeFunc::Increase, &bar, 50 * MIN, 100 * MIN),
        162.0
    ));
    // Half an interval (2.5 m) before the first sample; zero is 5 m before it.
    assert!(close(
        eval(RangeFunc::Increase, &dings, 50 * MIN, 100 * MIN),
        105.0
    ));
    // Zero is 0.5 m before the first sample, nearer than 2.5 m.
    assert!(close(
        eval(RangeFunc::Increase, &bumms, 50 * MIN, 100 * MIN),
        101.0
    ));
}

#[test]
fn increase_counts_a_reset_as_a_restart_from_zero() {
    let s = load(5 * MIN, &[0., 1., 2., 3., 2., 3., 4.].map(Some));
    // 1 2 3 2 3 4: 3 + 3 = 6 over 25 m, zero 25/6 m before the first sample: 6*(29+1/6)/25.
    assert!(close(
        eval(RangeFunc::Increase, &s, 30 * MIN, 30 * MIN),
        7.0
    ));
}

#[test]
fn rate_handles_resets_offsets_and_the_zero_cutoff() {
    let mut v = series(0.0, 27.0, 4);
    v.extend(series(0.0, 27.0, 5));
    let middle = load(5 * MIN, &v);
    // 216 over 45 m extrapolated to 50 m, per second of the 50 m range.
    assert!(close(
        eval(RangeFunc::Rate, &middle, 50 * MIN, 50 * MIN),
        0.08
    ));
    let mut v = series(0.0, 10.0, 9);
    v.extend([Some(0.0), Some(10.0)]);
    let end = load(5 * MIN, &v);
    // One sample in (45m, 50m]: no rate; two in (44m, 50m], 90 then a reset to 0: 0.
    assert_eq!(eval(RangeFunc::Rate, &end, 50 * MIN, 5 * MIN), None);
    assert!(close(eval(RangeFunc::Rate, &end, 50 * MIN, 6 * MIN), 0.0));
    let window = load(5 * MIN, &series(0.0, 80.0, 10));
    assert!(close(
        eval(RangeFunc::Rate, &window, 50 * MIN, 50 * MIN),
        0.26666666666666666
    ));
    // `[10m] offset 5m` at 50m is the window (35m, 45m]: 80, 90, extrapolated 5 m back.
    let a = load(5 * MIN, &series(0.0, 10.0, 10));
    assert!(close(
        eval(RangeFunc::Rate, &a, 45 * MIN, 10 * MIN),
        0.03333333333333333
    ));
    // 4 m samples, window (-10m, 10m]: the start is cut at zero or at half an interval.
    for (start, want) in [(0.0, 0.5), (60.0, 0.55), (120.0, 0.6), (300.0, 0.6)] {
        let s = load(4 * MIN, &series(start, 240.0, 10));
        assert!(
            close(eval(RangeFunc::Rate, &s, 10 * MIN, 20 * MIN), want),
            "start {start}"
        );
        assert!(close(eval(RangeFunc::Rate, &s, 50 * MIN, 20 * MIN), 0.6));
    }
}

#[test]
fn irate_uses_the_last_two_samples() {
    let foo = load(5 * MIN, &series(0.0, 10.0, 10));
    let mut v = series(0.0, 10.0, 5);
    v.extend(series(0.0, 10.0, 5));
    let bar = load(5 * MIN, &v);
    assert!(close(
        eval(RangeFunc::Irate, &foo, 50 * MIN, 50 * MIN),
        10.0 / 300.0
    ));
    // 50 then 0 at 30 m: a reset, so the change is the last value, 0.
    assert!(close(eval(RangeFunc::Irate, &bar, 30 * MIN, 50 * MIN), 0.0));
    let nan = load(
        5 * MIN,
        &[
            Some(1.0),
            Some(f64::NAN),
            Some(f64::NAN),
            Some(5.0),
            Some(11.0),
        ],
    );
    let r = 15 * MIN + 1000;
    assert_eq!(eval(RangeFunc::Irate, &nan, 0, r), None);
    assert!(eval(RangeFunc::Irate, &nan, 5 * MIN, r).is_some_and(f64::is_nan));
    assert!(close(eval(RangeFunc::Irate, &nan, 20 * MIN, r), 0.02));
}

#[test]
fn delta_extrapolates_without_counter_rules() {
    let foo = load(5 * MIN, &[0., 50., 100., 150., 200.].map(Some));
    let bar = load(5 * MIN, &[200., 150., 100., 50., 0.].map(Some));
    assert!(close(
        eval(RangeFunc::Delta, &foo, 20 * MIN, 20 * MIN),
        200.0
    ));
    assert!(close(
        eval(RangeFunc::Delta, &bar, 20 * MIN, 20 * MIN),
        -200.0
    ));
}

#[test]
fn over_time_functions() {
    let s = 10_000;
    let data = |v: [f64; 3]| load(s, &v.map(Some));
    let cases: [([f64; 3], f64, f64); 5] = [
        // values, min, max over (−1m, 1m]
        ([2., 0., 3.], 0.0, 3.0),
        ([2., 0., f64::NAN], 0.0, 2.0),
        ([2., f64::NAN, 1.], 1.0, 2.0),
        ([f64::NAN, 0., 1.], 0.0, 1.0),
        ([f64::NAN; 3], f64::NAN, f64::NAN),
    ];
    for (v, min, max) in cases {
        let d = data(v);
        let got_min = eval(RangeFunc::MinOverTime, &d, MIN, 2 * MIN);
        let got_max = eval(RangeFunc::MaxOverTime, &d, MIN, 2 * MIN);
        assert!(
            got_min.is_some_and(|g| g == min || (g.is_nan() && min.is_nan())),
            "{v:?}"
        );
        assert!(
            got_max.is_some_and(|g| g == max || (g.is_nan() && max.is_nan())),
            "{v:?}"
        );
    }
    let sparse = load(s, &[None, Some(5.0), Some(2.0), None, Some(4.0), None]);
    assert_eq!(
        eval(RangeFunc::MinOverTime, &sparse, MIN, 2 * MIN),
        Some(2.0)
    );
    assert_eq!(
        eval(RangeFunc::MaxOverTime, &sparse, MIN, 2 * MIN),
        Some(5.0)
    );
    assert_eq!(
        eval(RangeFunc::LastOverTime, &sparse, MIN, 2 * MIN),
        Some(4.0)
    );
    assert_eq!(
        eval(RangeFunc::CountOverTime, &sparse, MIN, 2 * MIN),
        Some(3.0)
    );
    assert_eq!(
        eval(RangeFunc::SumOverTime, &sparse, MIN, 2 * MIN),
        Some(11.0)
    );
    assert_eq!(
        eval(RangeFunc::AvgOverTime, &sparse, MIN, 2 * MIN),
        Some(11.0 / 3.0)
    );
    // The window is open on the left: at 50 s, [20s] holds the samples at 40 s and 50 s.
    let m = load(s, &series(0.0, 1.0, 5));
    assert_eq!(eval(RangeFunc::AvgOverTime, &m, 50_000, 20_000), Some(4.5));
    assert_eq!(
        eval(RangeFunc::CountOverTime, &m, 50_000, 20_000),
        Some(2.0)
    );
    // No sample, no value.
    assert_eq!(eval(RangeFunc::SumOverTime, &m, 500_000, 20_000), None);
}

#[test]
fn sums_are_compensated() {
    // Naive summation loses the small terms next to 1e100.
    let v = [1e100, 1.0, -1e100, 1.0];
    assert_eq!(kahan_sum(v.iter().copied()), 2.0);
    assert_eq!(average(v.iter().copied()), 0.5);
    // A sum that overflows falls back to the incremental mean.
    let big = [f64::MAX, f64::MAX, f64::MAX];
    assert_eq!(average(big.iter().copied()), f64::MAX);
    assert_eq!(kahan_sum([f64::INFINITY, 1.0].into_iter()), f64::INFINITY);
}

#[test]
fn bucket_quantiles() {
    // histograms.test: buckets 0.1:50, 0.2:70, +Inf:100 (cumulative) ...
    let b = || vec![(0.1, 50.0), (0.2, 70.0), (f64::INFINITY, 100.0)];
    // rank 50 falls in the first bucket, [0, 0.1]: its top.
    assert_eq!(bucket_quantile(0.5, &mut b()), 0.1);
    // rank 60: 10 of the 20 in (0.1, 0.2].
    assert!((bucket_quantile(0.6, &mut b()) - 0.15).abs() < 1e-15);
    // In the +Inf bucket: the largest finite bound.
    assert_eq!(bucket_quantile(0.99, &mut b()), 0.2);
    assert_eq!(bucket_quantile(-1.0, &mut b()), f64::NEG_INFINITY);
    assert_eq!(bucket_quantile(2.0, &mut b()), f64::INFINITY);
    assert!(bucket_quantile(f64::NAN, &mut b()).is_nan());
    // No +Inf bucket, one bucket, no observations: NaN.
    assert!(bucket_quantile(0.5, &mut vec![(0.1, 1.0), (0.2, 2.0)]).is_nan());
    assert!(bucket_quantile(0.5, &mut vec![(f64::INFINITY, 2.0)]).is_nan());
    assert!(bucket_quantile(0.5, &mut vec![(1.0, 0.0), (f64::INFINITY, 0.0)]).is_nan());
    // Unsorted input, a decreasing count raised to its predecessor.
    let mut v = vec![(f64::INFINITY, 10.0), (2.0, 4.0), (1.0, 6.0)];
    // Counts become 6, 6, 10: rank 5 in [0, 1] at 5/6.
    assert!((bucket_quantile(0.5, &mut v) - 5.0 / 6.0).abs() < 1e-15);
    // A first bucket with a bound at or below zero answers with that bound.
    assert_eq!(
        bucket_quantile(0.1, &mut vec![(-1.0, 5.0), (f64::INFINITY, 10.0)]),
        -1.0
    );
    // Buckets with the same bound are added together.
    let mut v = vec![(1.0, 2.0), (1.0, 2.0), (f64::INFINITY, 8.0)];
    assert_eq!(bucket_quantile(0.25, &mut v), 0.5);
}
