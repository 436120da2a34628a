use super::*;
use chrono::TimeZone;
use chrono_tz::{America::New_York, UTC};
use strata_tsdb::{PointColumns, Value};

// 2013-01-01T00:00:00Z in ms.
const T: i64 = 1_356_998_400_000;
const SEC: i64 = 1000;
const MIN: i64 = 60 * SEC;

fn spec(s: &str) -> DownsampleSpec {
    DownsampleSpec::parse(s, false).unwrap()
}

fn ints(points: &[(i64, i64)]) -> Vec<Point> {
    points.iter().map(|&(t, v)| (t, Value::Int(v))).collect()
}

/// Output as (ts, f64) pairs, for the tests of where buckets fall (the tests of value types
/// compare `Value`s).
fn floats(out: Vec<Point>) -> Vec<(i64, f64)> {
    out.into_iter().map(|(t, v)| (t, v.as_f64())).collect()
}

fn ms(tz: Tz, y: i32, mo: u32, d: u32, h: u32) -> i64 {
    tz.with_ymd_and_hms(y, mo, d, h, 0, 0)
        .earliest()
        .unwrap()
        .timestamp_millis()
}

#[test]
fn parse_specs() {
    let s = spec("1m-avg");
    assert_eq!(s.interval, Interval::Fixed(60_000));
    assert_eq!(s.function, Aggregator::Avg);
    assert_eq!(s.fill, FillPolicy::None);
    let s = spec("1h-sum-zero");
    assert_eq!(
        (s.interval, s.fill),
        (Interval::Fixed(3_600_000), FillPolicy::Zero)
    );
    assert_eq!(spec("0all-last").interval, Interval::All);
    assert_eq!(spec("0all-last").function, Aggregator::Last);
    assert_eq!(spec("500ms-avg").interval, Interval::Fixed(500));
    let s = spec("1dc-max");
    assert_eq!(
        s.interval,
        Interval::Calendar {
            count: 1,
            unit: CalendarUnit::Day
        }
    );
    assert_eq!(s.function, Aggregator::Max);
    // `1n` without calendar: 30 days fixed; with useCalendar: a calendar month
    assert_eq!(spec("1n-avg").interval, Interval::Fixed(2_592_000_000));
    let s = DownsampleSpec::parse("1n-avg", true).unwrap();
    assert_eq!(
        s.interval,
        Interval::Calendar {
            count: 1,
            unit: CalendarUnit::Month
        }
    );
    assert_eq!(
        spec("1yc-sum").interval,
        Interval::Calendar {
            count: 1,
            unit: CalendarUnit::Year
        }
    );
    assert_eq!(spec("1m-avg-NaN").fill, FillPolicy::Nan);
    assert_eq!(spec("1m-avg-null").fill, FillPolicy::Null);
    assert_eq!(
        spec("1m-p99").function,
        Aggregator::from_name("p99").unwrap()
    );
}

#[test]
fn parse_errors() {
    let msg = |s: &str| DownsampleSpec::parse(s, false).unwrap_err().to_string();
    assert_eq!(
        msg("1m"),
        "Invalid downsampling specifier '1m': must provide at least interval and function"
    );
    assert_eq!(
        msg("1m-avg-zero-x"),
        "Invalid downsampling specifier '1m-avg-zero-x': must consist of interval, function, and \
         optional fill policy"
    );
    assert_eq!(
        msg("1m-none"),
        "cannot use the NONE aggregator for downsampling"
    );
    assert_eq!(msg("1m-foo"), "No such downsampling function: foo");
    assert_eq!(msg("1m-avg-bar"), "Unrecognized fill policy: bar");
    assert_eq!(msg("0m-avg"), "Zero or negative duration: 0m");
    assert_eq!(msg("1x-avg"), "Invalid duration (suffix): 1x");
}

#[test]
fn scalar_fill_fails_at_run_time() {
    let s = spec("1m-avg-scalar");
    assert_eq!(
        downsample(&ints(&[(T, 1)]), &s, T, T, UTC),
        Err(Error::UnsupportedFill)
    );
}

#[test]
fn epoch_aligned_buckets() {
    // I = 1000 s: 1356998400000 - (1356998400000 mod 1000000 = 400000) = 1356998000000
    let out = downsample(
        &ints(&[(T, 5)]),
        &spec("1000s-sum"),
        1_356_998_000_000,
        T,
        UTC,
    );
    assert_eq!(floats(out.unwrap()), vec![(1_356_998_000_000, 5.0)]);
    // I = 36 min = 2160000 ms: 1388550980000 mod 2160000 = 1460000 -> 1388549520000
    let ts = 1_388_550_980_000;
    let out = downsample(
        &ints(&[(ts, 7)]),
        &spec("36m-max"),
        1_388_549_520_000,
        ts,
        UTC,
    );
    assert_eq!(floats(out.unwrap()), vec![(1_388_549_520_000, 7.0)]);
}

#[test]
fn bucket_functions_keep_integers_exact() {
    // 1,2,6 in one minute: avg 3, sum 9, count 3, dev sqrt(((−2)²+(−1)²+3²)/3)=sqrt(14/3)
    let pts = ints(&[(T, 1), (T + 10 * SEC, 2), (T + 20 * SEC, 6)]);
    let run = |s: &str| downsample(&pts, &spec(s), T, T + MIN, UTC).unwrap();
    assert_eq!(run("1m-avg"), ints(&[(T, 3)]));
    assert_eq!(run("1m-sum"), ints(&[(T, 9)]));
    assert_eq!(run("1m-count"), ints(&[(T, 3)]));
    assert_eq!(run("1m-first"), ints(&[(T, 1)]));
    assert_eq!(run("1m-last"), ints(&[(T, 6)]));
    assert_eq!(run("1m-max"), ints(&[(T, 6)]));
    let dev = run("1m-dev")[0].1;
    assert!(!dev.is_int());
    assert!((dev.as_f64() - (14.0f64 / 3.0).sqrt()).abs() < 1e-12);
    // {1,2}: avg 1.5, not truncated
    let two = ints(&[(T, 1), (T + SEC, 2)]);
    assert_eq!(
        downsample(&two, &spec("1m-avg"), T, T + MIN, UTC).unwrap(),
        vec![(T, Value::Float(1.5))]
    );
    // Past 2^53 and past i64: sums are exact, and a double only past i64.
    let big = ints(&[
        (T, 9_007_199_254_740_993),
        (T + SEC, 2),
        (T + MIN, i64::MAX),
        (T + MIN + SEC, 1),
    ]);
    assert_eq!(
        downsample(&big, &spec("1m-sum"), T, T + 2 * MIN, UTC).unwrap(),
        vec![
            (T, Value::Int(9_007_199_254_740_995)),
            (T + MIN, Value::Float(9_223_372_036_854_775_808.0)),
        ]
    );
    // A bucket with a double in it is a double.
    let mixed = vec![
        (T, Value::Int(9_007_199_254_740_993)),
        (T + SEC, Value::Float(0.5)),
    ];
    assert_eq!(
        downsample(&mixed, &spec("1m-sum"), T, T + MIN, UTC).unwrap(),
        vec![(T, Value::Float(9_007_199_254_740_994.0))]
    );
    assert_eq!(
        downsample(&mixed, &spec("1m-max"), T, T + MIN, UTC).unwrap(),
        vec![(T, Value::Int(9_007_199_254_740_993))]
    );
}

#[test]
fn range_edges() {
    // start T+45s is inside bucket [T, T+60s): that partial bucket is not emitted, so the point at
    // T+50s (10) is dropped. T+90s -> bucket T+60s; T+150s -> T+120s; T+180s (= end) -> T+180s;
    // T+185s is after end: excluded (`docs/compat.md` #8), so bucket T+180s is 7, not 107.
    let pts = ints(&[
        (T + 30 * SEC, 1),
        (T + 50 * SEC, 10),
        (T + 90 * SEC, 2),
        (T + 150 * SEC, 3),
        (T + 180 * SEC, 7),
        (T + 185 * SEC, 100),
    ]);
    let out = downsample(&pts, &spec("1m-sum"), T + 45 * SEC, T + 180 * SEC, UTC).unwrap();
    assert_eq!(
        floats(out),
        vec![(T + MIN, 2.0), (T + 2 * MIN, 3.0), (T + 3 * MIN, 7.0)]
    );
}

#[test]
fn gaps_and_fill_policies() {
    // points at T (1) and T+120s (3); range [T, T+180s] has buckets T, T+60, T+120, T+180.
    let pts = ints(&[(T, 1), (T + 2 * MIN, 3)]);
    let run = |s: &str| floats(downsample(&pts, &spec(s), T, T + 3 * MIN, UTC).unwrap());
    assert_eq!(run("1m-sum"), vec![(T, 1.0), (T + 2 * MIN, 3.0)]);
    assert_eq!(
        run("1m-sum-zero"),
        vec![
            (T, 1.0),
            (T + MIN, 0.0),
            (T + 2 * MIN, 3.0),
            (T + 3 * MIN, 0.0)
        ]
    );
    for fill in ["nan", "null"] {
        let out = run(&format!("1m-sum-{fill}"));
        assert_eq!(out.len(), 4);
        assert_eq!((out[0], out[2]), ((T, 1.0), (T + 2 * MIN, 3.0)));
        assert!(out[1].1.is_nan() && out[3].1.is_nan());
        assert_eq!((out[1].0, out[3].0), (T + MIN, T + 3 * MIN));
    }
}

#[test]
fn fill_with_no_point_in_range_and_empty_input() {
    // The series has a point (before the range), so fill emits every bucket in [T, T+120s].
    let before = ints(&[(T - MIN, 9)]);
    let out = downsample(&before, &spec("1m-sum-zero"), T, T + 2 * MIN, UTC).unwrap();
    assert_eq!(
        floats(out),
        vec![(T, 0.0), (T + MIN, 0.0), (T + 2 * MIN, 0.0)]
    );
    // Without fill: nothing.
    assert!(
        downsample(&before, &spec("1m-sum"), T, T + 2 * MIN, UTC)
            .unwrap()
            .is_empty()
    );
    // Fill never creates a series.
    assert!(
        downsample(&[], &spec("1m-sum-zero"), T, T + 2 * MIN, UTC)
            .unwrap()
            .is_empty()
    );
    assert!(
        downsample(&[], &spec("1m-sum"), T, T + 2 * MIN, UTC)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn all_interval() {
    // 300 points, values 1..=300, every 30 s from T+30s.
    let pts: Vec<Point> = (1..=300)
        .map(|i| (T + i * 30 * SEC, Value::Int(i)))
        .collect();
    let run = |s, e| floats(downsample(&pts, &spec("0all-sum"), s, e, UTC).unwrap());
    // 300*301/2 = 45150 at T
    assert_eq!(run(T, T + 43_200 * SEC), vec![(T, 45_150.0)]);
    // [T+100, T+200]: points 4 (T+120), 5 (T+150), 6 (T+180) -> 15 at T+100s
    assert_eq!(
        run(T + 100 * SEC, T + 200 * SEC),
        vec![(T + 100 * SEC, 15.0)]
    );
    // end inclusive (`docs/compat.md` #8): [T+90, T+180] -> 3+4+5+6 = 18
    assert_eq!(run(T + 90 * SEC, T + 180 * SEC), vec![(T + 90 * SEC, 18.0)]);
    // nothing in range: nothing, even with a fill policy
    let fill = downsample(&pts, &spec("0all-sum-zero"), T, T + 10 * SEC, UTC).unwrap();
    assert!(fill.is_empty());
}

#[test]
fn calendar_day_in_new_york() {
    // 1357016400000 = 2013-01-01T00:00 EST; points at +0h,+12h,+24h,+36h with 1,2,4,8:
    // Jan 1 EST -> 1+2 = 3, Jan 2 EST (1357102800000) -> 4+8 = 12.
    let d0 = 1_357_016_400_000;
    let h = 3_600_000;
    let pts = ints(&[
        (d0, 1),
        (d0 + 12 * h, 2),
        (d0 + 24 * h, 4),
        (d0 + 36 * h, 8),
    ]);
    let out = downsample(&pts, &spec("1dc-sum"), d0, d0 + 36 * h, New_York).unwrap();
    assert_eq!(floats(out), vec![(d0, 3.0), (1_357_102_800_000, 12.0)]);
}

#[test]
fn calendar_day_fill_across_dst() {
    // 2013-03-10 is 23 hours long in New York: midnights are 05:00Z (Mar 9, Mar 10) then 04:00Z.
    let mar9 = ms(New_York, 2013, 3, 9, 0);
    let mar10 = ms(New_York, 2013, 3, 10, 0);
    let mar11 = ms(New_York, 2013, 3, 11, 0);
    assert_eq!(mar10 - mar9, 24 * 3_600_000);
    assert_eq!(mar11 - mar10, 23 * 3_600_000);
    let noon10 = ms(New_York, 2013, 3, 10, 12);
    let out = downsample(
        &ints(&[(noon10, 5)]),
        &spec("1dc-sum-zero"),
        mar9,
        mar11,
        New_York,
    );
    assert_eq!(
        floats(out.unwrap()),
        vec![(mar9, 0.0), (mar10, 5.0), (mar11, 0.0)]
    );
}

#[test]
fn calendar_month_and_week() {
    // 1nc in UTC: Jan 15 (1) -> Jan 1; Feb 1 (2) and Feb 28 (4) -> Feb 1 = 6; Mar 1 (8) -> Mar 1.
    let pts = ints(&[
        (ms(UTC, 2013, 1, 15, 0), 1),
        (ms(UTC, 2013, 2, 1, 0), 2),
        (ms(UTC, 2013, 2, 28, 23), 4),
        (ms(UTC, 2013, 3, 1, 0), 8),
    ]);
    let out = downsample(&pts, &spec("1nc-sum"), T, ms(UTC, 2013, 3, 31, 0), UTC).unwrap();
    let expect = vec![
        (T, 1.0),
        (ms(UTC, 2013, 2, 1, 0), 6.0),
        (ms(UTC, 2013, 3, 1, 0), 8.0),
    ];
    assert_eq!(floats(out), expect);
    // 1wc: 2013-01-01 is a Tuesday; its week starts Sunday 2012-12-30. Jan 6 is the next Sunday.
    let dec30 = ms(UTC, 2012, 12, 30, 0);
    let jan6 = ms(UTC, 2013, 1, 6, 0);
    let pts = ints(&[
        (ms(UTC, 2013, 1, 1, 12), 1),
        (ms(UTC, 2013, 1, 5, 23), 2),
        (jan6, 4),
    ]);
    let out = downsample(&pts, &spec("1wc-sum"), dec30, jan6, UTC).unwrap();
    assert_eq!(floats(out), vec![(dec30, 3.0), (jan6, 4.0)]);
}

#[test]
fn calendar_units_that_do_not_divide_their_parent() {
    // 7mc counts from the top of the day: 00:56 is a boundary (8*7), then 01:03 (9*7).
    let start = T + 56 * MIN;
    let pts = ints(&[(T + 57 * MIN, 1), (T + 62 * MIN, 2), (T + 63 * MIN, 4)]);
    let out = downsample(&pts, &spec("7mc-sum"), start, T + 70 * MIN, UTC).unwrap();
    assert_eq!(floats(out), vec![(start, 3.0), (T + 63 * MIN, 4.0)]);
    // 15mc divides the hour: buckets at :00, :15, ...; 10:20 -> 10:15
    let pts = ints(&[(T + 620 * MIN, 1)]);
    let out = downsample(&pts, &spec("15mc-sum"), T, T + 700 * MIN, UTC).unwrap();
    assert_eq!(floats(out), vec![(T + 615 * MIN, 1.0)]);
}

#[test]
fn fill_bucket_limit() {
    // 1 ms buckets over one day = 86.4 million > 10 million
    let out = downsample(
        &ints(&[(T, 1)]),
        &spec("1ms-sum-zero"),
        T,
        T + 86_400 * SEC,
        UTC,
    );
    assert!(matches!(out, Err(Error::TooManyBuckets { .. })));
    // without fill there is no limit: one bucket
    let out = downsample(&ints(&[(T, 1)]), &spec("1ms-sum"), T, T + 86_400 * SEC, UTC);
    assert_eq!(floats(out.unwrap()), vec![(T, 1.0)]);
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The folding fast paths (columns for fixed intervals, pairs for `all`) give what the
        /// generic path gives, bit for bit, with the edge buckets for fixed intervals, for every
        /// function they take (and take none they should not): NaNs, negative times, points on
        /// both sides of the range, integers near and past the exact-sum bound, mixed series.
        #[test]
        fn folding_fast_paths_match_the_generic_path(
            points in proptest::collection::btree_map(-200_000i64..600_000, -1000i64..1000, 0..80),
            nan_every in 0usize..5,
            width in 1i64..120_000,
            all in 0usize..3,
            start in -100_000i64..100_000,
            len in -1000i64..700_000,
            function in 0usize..9,
            fill in 0usize..2,
            kind in 0usize..6,
        ) {
            let name =
                ["sum", "zimsum", "min", "mimmax", "count", "avg", "p50", "first", "last"][function];
            // Floats (kind 0), small integers (1), integers whose sums pass 2^53 (2), integers
            // an f64 does not hold exactly (3), integers and floats in turn (4), integers at
            // the largest magnitudes (5).
            let pts: Vec<(i64, Value)> = points
                .iter()
                .enumerate()
                .map(|(i, (t, v))| {
                    let int = match kind {
                        1 => Some(*v),
                        2 => Some(*v << 50),
                        3 => Some(v.signum() * ((1i64 << 53) + 1) + v),
                        4 if i % 2 == 0 => Some(*v),
                        5 => Some(if v % 2 == 0 { i64::MAX - v.abs() } else { i64::MIN + v.abs() }),
                        _ => None,
                    };
                    let v = match int {
                        Some(n) => Value::Int(n),
                        None if nan_every > 0 && i % (nan_every + 1) == 0 => Value::Float(f64::NAN),
                        None => Value::Float(*v as f64 / 8.0),
                    };
                    (T + t, v)
                })
                .collect();
            let at = |p: &(i64, Value)| *p;
            // One case in three downsamples to `all`.
            let all = all == 0;
            let spec = DownsampleSpec {
                interval: if all { Interval::All } else { Interval::Fixed(width) },
                function: Aggregator::from_name(name).unwrap(),
                fill: [FillPolicy::None, FillPolicy::Zero][fill],
            };
            let range = (T + start, T + start + len);
            let mut fast = Vec::new();
            let handled = if all {
                downsample_all_folding(&pts, at, &spec, range, &mut fast)
            } else {
                let mut cols = PointColumns::default();
                for &(t, v) in &pts {
                    cols.push(t, v);
                }
                downsample_columns(&cols, &spec, range, UTC, &mut fast).unwrap()
            };
            let simple = if all {
                name != "p50"
            } else {
                !matches!(name, "p50" | "first" | "last") && fill == 0
            };
            prop_assert_eq!(handled, simple);
            prop_assert_eq!(folds_by_columns(&spec), simple && !all);
            if handled {
                let mut slow = Vec::new();
                let (before, after) = edge_buckets(&pts, at, &spec, range, UTC, &mut Vec::new());
                slow.extend(before);
                downsample_into(pts.iter().map(at), &spec, range, UTC, &mut Vec::new(), &mut slow)
                    .unwrap();
                slow.extend(after);
                let bits = crate::num::typed_bits;
                prop_assert_eq!(bits(&fast), bits(&slow));
            } else {
                prop_assert!(fast.is_empty());
            }
        }

        /// Fixed buckets: outputs are strictly increasing bucket starts in [start, end], and the
        /// bucket sums add up to the sum of the points from the first whole bucket to `end`.
        #[test]
        fn fixed_sum_conserves_points(
            offsets in proptest::collection::btree_set(0i64..600_000, 0..50),
            width in 1i64..120_000,
            start_off in 0i64..60_000,
            len in 0i64..700_000,
        ) {
            let pts: Vec<Point> = offsets.iter().map(|o| (T + o, Value::Int(o % 97))).collect();
            let (start, end) = (T + start_off, T + start_off + len);
            let s = DownsampleSpec {
                interval: Interval::Fixed(width),
                function: Aggregator::Sum,
                fill: FillPolicy::None,
            };
            let out = floats(downsample(&pts, &s, start, end, UTC).unwrap());
            for pair in out.windows(2) {
                prop_assert!(pair[0].0 < pair[1].0);
            }
            let first = start + (width - start.rem_euclid(width)) % width;
            for (b, _) in &out {
                prop_assert!(*b >= start && *b <= end && b.rem_euclid(width) == 0);
            }
            let expect: f64 = pts
                .iter()
                .filter(|(t, _)| *t >= first && *t <= end)
                .map(|(_, v)| v.as_f64())
                .sum();
            let got: f64 = out.iter().map(|(_, v)| v).sum();
            prop_assert_eq!(got, expect);
        }
    }
}

#[test]
fn calendar_hours_across_dst_fall_back() {
    // 2013-11-03 in New York: 01:00 EDT (05:00Z) and 01:00 EST (06:00Z) are both "1 o'clock".
    let h = 3_600_000;
    let edt1 = 1_383_454_800_000; // 2013-11-03T05:00Z = 01:00 EDT
    let est1 = edt1 + h; // 06:00Z = 01:00 EST
    // points at 01:30 EDT (1) and 01:30 EST (2): each lands in its own hour bucket
    let pts = ints(&[(edt1 + h / 2, 1), (est1 + h / 2, 2)]);
    let out = downsample(&pts, &spec("1hc-sum"), edt1, est1 + h, New_York).unwrap();
    assert_eq!(floats(out), vec![(edt1, 1.0), (est1, 2.0)]);
    // with fill: 01:00 EDT, 01:00 EST, 02:00 EST (07:00Z)
    let out = downsample(&pts, &spec("1hc-sum-zero"), edt1, est1 + h, New_York).unwrap();
    assert_eq!(floats(out), vec![(edt1, 1.0), (est1, 2.0), (est1 + h, 0.0)]);
}

#[test]
fn calendar_fill_bucket_limit() {
    // 1 s calendar buckets over a year = 31.5 million > 10 million: refused before allocating
    let out = downsample(
        &ints(&[(T, 1)]),
        &spec("1sc-sum-nan"),
        T,
        T + 365 * 86_400 * SEC,
        UTC,
    );
    assert!(matches!(out, Err(Error::TooManyBuckets { .. })));
}

mod fold_prop {
    use super::*;
    use proptest::prelude::*;

    /// A value's type and bits.
    fn bits(v: Value) -> (bool, u64) {
        match v {
            Value::Int(i) => (true, i as u64),
            Value::Float(f) => (false, f.to_bits()),
        }
    }

    /// The reference: points grouped by fixed bucket, each bucket given to `apply_nums`.
    fn reference(points: &[Point], width: i64, function: Aggregator) -> Vec<(i64, (bool, u64))> {
        let mut groups: Vec<(i64, Vec<Value>)> = Vec::new();
        for (t, v) in points {
            let b = t - t.rem_euclid(width);
            match groups.last_mut() {
                Some((lb, vs)) if *lb == b => vs.push(*v),
                _ => groups.push((b, vec![*v])),
            }
        }
        groups
            .into_iter()
            .map(|(b, vs)| (b, bits(function.apply_nums(&vs, false))))
            .collect()
    }

    proptest! {
        /// Folding bucket by bucket gives bit for bit what `apply_nums` over the bucket gives,
        /// types, NaNs and signed zeros included, for every downsampling function; and over
        /// doubles alone that is `apply`'s double.
        #[test]
        fn folds_equal_apply(
            offsets in proptest::collection::btree_set(0i64..600_000, 1..80),
            raw in proptest::collection::vec((0u8..6, -20i64..20), 80),
            name in proptest::sample::select(
                crate::aggregator::aggregator_names().filter(|n| *n != "none").collect::<Vec<_>>()),
        ) {
            let points: Vec<Point> = offsets
                .iter()
                .zip(&raw)
                .map(|(o, (kind, v))| {
                    let value = match kind {
                        0 => Value::Float(f64::NAN),
                        1 => Value::Float(-0.0),
                        2 => Value::Int(*v),
                        3 => Value::Int(v.signum() * (1i64 << 60) + v),
                        _ => Value::Float(*v as f64 / 8.0),
                    };
                    (T + o, value)
                })
                .collect();
            let function = Aggregator::from_name(name).unwrap();
            let spec = DownsampleSpec { interval: Interval::Fixed(MIN), function, fill: FillPolicy::None };
            let got: Vec<(i64, (bool, u64))> = downsample(&points, &spec, T, T + 600_000, UTC)
                .unwrap()
                .into_iter()
                .map(|(t, v)| (t, bits(v)))
                .collect();
            prop_assert_eq!(got, reference(&points, MIN, function));
            let all = DownsampleSpec { interval: Interval::All, function, fill: FillPolicy::None };
            let got = downsample(&points, &all, T, T + 600_000, UTC).unwrap();
            prop_assert_eq!(got.len(), 1);
            prop_assert_eq!(bits(got[0].1), bits(function.apply_nums(&points.iter().map(|p| p.1).collect::<Vec<_>>(), false)));
            if points.iter().all(|p| !p.1.is_int()) {
                let values: Vec<f64> = points.iter().map(|p| p.1.as_f64()).collect();
                prop_assert_eq!(bits(got[0].1), (false, function.apply(&values, false).to_bits()));
            }
        }
    }
}

fn edges(points: &[(i64, f64)], s: &str, start: i64, end: i64) -> (Option<Point>, Option<Point>) {
    edge_buckets(
        points,
        |p| (p.0, Value::Float(p.1)),
        &spec(s),
        (start, end),
        UTC,
        &mut Vec::new(),
    )
}

#[test]
fn edge_buckets_are_the_whole_neighbouring_buckets() {
    // Points every 20 s from T to T+4m; 1m buckets; range [T+70s, T+150s].
    let points: Vec<(i64, f64)> = (0..=12).map(|i| (T + i * 20 * SEC, i as f64)).collect();
    let (before, after) = edges(&points, "1m-avg", T + 70 * SEC, T + 150 * SEC);
    // The first emitted bucket is T+2m; before it, the T+1m bucket over all of its points, the
    // one at 60 s (before `start`) included: 3, 4 and 5, avg 4.
    assert_eq!(before, Some((T + MIN, Value::Float(4.0))));
    // The last emitted bucket is T+2m (start ≤ end); after it, T+3m: points 9, 10, 11, avg 10.
    assert_eq!(after, Some((T + 3 * MIN, Value::Float(10.0))));
}

#[test]
fn edge_buckets_skip_empty_buckets_and_are_absent_without_points() {
    // A gap: points at T and T+10m only; range [T+3m, T+5m].
    let points = [(T, 1.0), (T + 10 * MIN, 2.0)];
    let (before, after) = edges(&points, "1m-sum", T + 3 * MIN, T + 5 * MIN);
    assert_eq!(before, Some((T, Value::Float(1.0))));
    assert_eq!(after, Some((T + 10 * MIN, Value::Float(2.0))));
    // Points only inside the range: no neighbours.
    let inside = [(T + 3 * MIN, 1.0), (T + 4 * MIN, 2.0)];
    assert_eq!(
        edges(&inside, "1m-sum", T + 3 * MIN, T + 5 * MIN),
        (None, None)
    );
    // A point after `end` but in the last emitted bucket is not a neighbour.
    let tail = [(T + 5 * MIN + 30 * SEC, 1.0)];
    assert_eq!(
        edges(&tail, "1m-sum", T + 3 * MIN, T + 5 * MIN),
        (None, None)
    );
    // `all` has no neighbours.
    assert_eq!(
        edges(&points, "0all-sum", T + 3 * MIN, T + 5 * MIN),
        (None, None)
    );
}
