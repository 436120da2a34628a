use super::*;

const T: i64 = 1_356_998_400_000;
const S: i64 = 1000;

fn agg(name: &str) -> Aggregator {
    Aggregator::from_name(name).unwrap()
}

fn ints(points: &[(i64, i64)]) -> Vec<Point> {
    points
        .iter()
        .map(|&(t, v)| (T + t * S, Value::Int(v)))
        .collect()
}

fn floats(points: &[(i64, f64)]) -> Vec<Point> {
    points
        .iter()
        .map(|&(t, v)| (T + t * S, Value::Float(v)))
        .collect()
}

/// Series A 1,2,3 at T+30/60/90 and B 300,299,298 at T+45/75/105 (OpenTSDB's
/// `runInterpolationSeconds`).
fn unaligned() -> (Vec<Point>, Vec<Point>) {
    (
        ints(&[(30, 1), (60, 2), (90, 3)]),
        ints(&[(45, 300), (75, 299), (105, 298)]),
    )
}

fn run(name: &str, a: &[Point], b: &[Point]) -> Vec<Point> {
    aggregate(&[a, b], agg(name), false, true)
}

#[test]
fn sum_lerp_without_truncation() {
    let (a, b) = unaligned();
    // T+30: only A (B not started) = 1
    // T+45: A lerp 1 + 15*(2-1)/30 = 1.5, + 300 = 301.5 (OpenTSDB truncates to 301;
    // `docs/compat.md` #4)
    // T+60: 2 + B lerp 299.5 = 301.5; T+75: 2.5 + 299 = 301.5; T+90: 3 + 298.5 = 301.5
    // T+105: A ended -> 298
    let expect = vec![
        (T + 30 * S, Value::Int(1)),
        (T + 45 * S, Value::Float(301.5)),
        (T + 60 * S, Value::Float(301.5)),
        (T + 75 * S, Value::Float(301.5)),
        (T + 90 * S, Value::Float(301.5)),
        (T + 105 * S, Value::Int(298)),
    ];
    assert_eq!(run("sum", &a, &b), expect);
}

#[test]
fn integral_lerp_stays_integer() {
    // A 0 at T, 4 at T+40; B 10 at T+20, 20 at T+30.
    // T: A only = 0; T+20: A lerp 2 + 10 = 12; T+30: 3 + 20 = 23; T+40: B ended -> 4
    let a = ints(&[(0, 0), (40, 4)]);
    let b = ints(&[(20, 10), (30, 20)]);
    let expect = ints(&[(0, 0), (20, 12), (30, 23), (40, 4)]);
    assert_eq!(run("sum", &a, &b), expect);
}

#[test]
fn zim_max_min_prev_fills() {
    let (a, b) = unaligned();
    let vals =
        |name: &str| -> Vec<f64> { run(name, &a, &b).iter().map(|p| p.1.as_f64()).collect() };
    // zimsum: the missing series counts 0: 1, 0+300, 2+0, 0+299, 3+0, 298
    assert_eq!(vals("zimsum"), vec![1.0, 300.0, 2.0, 299.0, 3.0, 298.0]);
    assert!(run("zimsum", &a, &b).iter().all(|p| p.1.is_int()));
    // mimmax: missing = type min, so the present value wins
    assert_eq!(vals("mimmax"), vec![1.0, 300.0, 2.0, 299.0, 3.0, 298.0]);
    // mimmin: missing = type max
    assert_eq!(vals("mimmin"), vec![1.0, 300.0, 2.0, 299.0, 3.0, 298.0]);
    // pfsum: missing = previous value: 1, 1+300, 2+300, 2+299, 3+299, 298
    assert_eq!(vals("pfsum"), vec![1.0, 301.0, 302.0, 301.0, 302.0, 298.0]);
    // count: active series (ZIM zeros count): 1, 2, 2, 2, 2, 1
    assert_eq!(vals("count"), vec![1.0, 2.0, 2.0, 2.0, 2.0, 1.0]);
    // squareSum: 1, 0+90000, 4+0, 89401, 9, 88804
    assert_eq!(
        vals("squareSum"),
        vec![1.0, 90_000.0, 4.0, 89_401.0, 9.0, 88_804.0]
    );
}

#[test]
fn lerp_functions() {
    let (a, b) = unaligned();
    let vals =
        |name: &str| -> Vec<f64> { run(name, &a, &b).iter().map(|p| p.1.as_f64()).collect() };
    // pairs per timestamp: (1), (1.5,300), (2,299.5), (2.5,299), (3,298.5), (298)
    assert_eq!(vals("max"), vec![1.0, 300.0, 299.5, 299.0, 298.5, 298.0]);
    assert_eq!(vals("min"), vec![1.0, 1.5, 2.0, 2.5, 3.0, 298.0]);
    // avg: (1.5+300)/2 = 150.75, (2+299.5)/2 = 150.75, ...
    assert_eq!(
        vals("avg"),
        vec![1.0, 150.75, 150.75, 150.75, 150.75, 298.0]
    );
    // dev of a pair = |a-b|/2: (300-1.5)/2 = 149.25, (299.5-2)/2 = 148.75, 148.25, 147.75
    assert_eq!(vals("dev"), vec![0.0, 149.25, 148.75, 148.25, 147.75, 0.0]);
    // mult: 1.5*300 = 450, 2*299.5 = 599, 2.5*299 = 747.5, 3*298.5 = 895.5
    assert_eq!(vals("mult"), vec![1.0, 450.0, 599.0, 747.5, 895.5, 298.0]);
    // diff = last - first in series order: 300-1.5 = 298.5, 297.5, 296.5, 295.5; single -> 0
    assert_eq!(vals("diff"), vec![0.0, 298.5, 297.5, 296.5, 295.5, 0.0]);
    // median of a pair = sorted[1] = the larger
    assert_eq!(vals("median"), vec![1.0, 300.0, 299.5, 299.0, 298.5, 298.0]);
}

#[test]
fn first_last_use_zim_zeros() {
    // A 1 at T, 3 at T+20; B 5 at T+10. At T+10 A is active but has no point: ZIM 0.
    let a = ints(&[(0, 1), (20, 3)]);
    let b = ints(&[(10, 5)]);
    assert_eq!(run("first", &a, &b), ints(&[(0, 1), (10, 0), (20, 3)]));
    assert_eq!(run("last", &a, &b), ints(&[(0, 1), (10, 5), (20, 3)]));
}

#[test]
fn percentiles_across_series() {
    let series: Vec<Vec<Point>> = [1, 3, 4, 8].iter().map(|&v| ints(&[(0, v)])).collect();
    let refs: Vec<&[Point]> = series.iter().map(Vec::as_slice).collect();
    // integer inputs: ep50r3 uses R-3 -> 3; ep50r7 R-7 -> 3.5; p50 LEGACY -> 3.5; p75 -> 7
    assert_eq!(
        aggregate(&refs, agg("ep50r3"), false, true),
        ints(&[(0, 3)])
    );
    assert_eq!(
        aggregate(&refs, agg("ep50r7"), false, true),
        floats(&[(0, 3.5)])
    );
    assert_eq!(
        aggregate(&refs, agg("p50"), false, true),
        floats(&[(0, 3.5)])
    );
    assert_eq!(aggregate(&refs, agg("p75"), false, true), ints(&[(0, 7)]));
    // float inputs: ep* fall back to LEGACY: p50 = 3.5
    let series: Vec<Vec<Point>> = [1.0, 3.0, 4.0, 8.0]
        .iter()
        .map(|&v| floats(&[(0, v)]))
        .collect();
    let refs: Vec<&[Point]> = series.iter().map(Vec::as_slice).collect();
    assert_eq!(
        aggregate(&refs, agg("ep50r3"), false, true),
        floats(&[(0, 3.5)])
    );
}

#[test]
fn rate_series_use_previous_rate_and_no_seed() {
    // A rates 1.0 at T+60, 2.0 at T+90; B rates 10.0 at T+75, 20.0 at T+105.
    let a = floats(&[(60, 1.0), (90, 2.0)]);
    let b = floats(&[(75, 10.0), (105, 20.0)]);
    // T+60: B has no rate yet -> left out (`docs/compat.md` #3): 1.0
    // T+75: A previous rate 1.0 (no LERP) + 10 = 11; T+90: 2 + B previous 10 = 12; T+105: 20
    let out = aggregate(&[&a, &b], agg("sum"), true, true);
    assert_eq!(
        out,
        floats(&[(60, 1.0), (75, 11.0), (90, 12.0), (105, 20.0)])
    );
}

#[test]
fn mixed_int_float_single_series() {
    // Each point keeps its type (`docs/compat.md` #14; OpenTSDB's `runMixedSingleTS` turns the 1
    // into a double because a double follows it).
    let s = vec![
        (T, Value::Int(1)),
        (T + S, Value::Float(2.5)),
        (T + 2 * S, Value::Int(9_007_199_254_740_993)),
        (T + 3 * S, Value::Int(i64::MIN)),
    ];
    for name in [
        "sum", "min", "max", "first", "last", "avg", "zimsum", "mimmax",
    ] {
        assert_eq!(aggregate(&[&s], agg(name), false, true), s, "{name}");
    }
}

#[test]
fn integer_sums_are_exact_past_2_pow_53_and_i64() {
    // Two series whose sum needs all 63 bits, and two whose sum leaves the i64 range.
    let a = ints(&[(0, 4_611_686_018_427_387_904), (10, i64::MAX), (20, -3)]);
    let b = ints(&[
        (0, 4_611_686_018_427_387_903),
        (10, i64::MAX),
        (20, i64::MIN),
    ]);
    let out = aggregate(&[&a, &b], agg("sum"), false, true);
    assert_eq!(out[0], (T, Value::Int(i64::MAX)));
    assert_eq!(out[1], (T + 10 * S, Value::Float(2.0 * i64::MAX as f64)));
    assert_eq!(out[2], (T + 20 * S, Value::Float(i64::MIN as f64 - 3.0)));
    // The general path (unaligned: b lacks T+10) interpolates exactly and sums exactly too.
    let b = ints(&[
        (0, 4_611_686_018_427_387_903),
        (20, 4_611_686_018_427_387_903),
    ]);
    let out = aggregate(&[&a, &b], agg("sum"), false, true);
    assert_eq!(out[0], (T, Value::Int(i64::MAX)));
    assert_eq!(
        out[1],
        (
            T + 10 * S,
            crate::num::from_i128(i128::from(i64::MAX) + 4_611_686_018_427_387_903)
        )
    );
    // max and min pick the exact integer, not its rounded double.
    let c = ints(&[(0, 9_007_199_254_740_993)]);
    let d = floats(&[(0, 9_007_199_254_740_992.0)]);
    assert_eq!(run("max", &c, &d), c);
    assert_eq!(run("min", &c, &d), d);
}

#[test]
fn nan_inputs_are_skipped() {
    // fill-policy NaNs: sum of present values; all-NaN -> NaN
    let a = floats(&[(0, f64::NAN), (60, 2.0), (120, f64::NAN)]);
    let b = floats(&[(0, 5.0), (60, f64::NAN), (120, f64::NAN)]);
    let out = aggregate(&[&a, &b], agg("sum"), false, true);
    assert_eq!(&out[..2], &floats(&[(0, 5.0), (60, 2.0)])[..]);
    assert!(matches!(out[2], (t, Value::Float(v)) if t == T + 120 * S && v.is_nan()));
}

#[test]
fn single_point_and_empty_inputs() {
    let one = ints(&[(0, 7)]);
    assert_eq!(aggregate(&[&one], agg("avg"), false, true), ints(&[(0, 7)]));
    assert_eq!(
        aggregate(&[&one, &[]], agg("sum"), false, true),
        ints(&[(0, 7)])
    );
    assert!(aggregate(&[], agg("sum"), false, true).is_empty());
    assert!(aggregate(&[&[], &[]], agg("sum"), true, true).is_empty());
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    /// Any integer, or a double (small, any bits, or NaN now and then).
    fn any_num() -> impl Strategy<Value = Value> {
        prop_oneof![
            3 => any::<i64>().prop_map(Value::Int),
            2 => (-1000i64..1000).prop_map(Value::Int),
            2 => (-1e6f64..1e6).prop_map(Value::Float),
            1 => any::<f64>().prop_map(Value::Float),
        ]
    }

    proptest! {
        /// Aggregating one series returns it unchanged, every value with its type and bits,
        /// for every function that is the identity on one value.
        #[test]
        fn single_series_is_identity(
            points in proptest::collection::btree_map(0i64..10_000, any_num(), 0..40),
            name in proptest::sample::select(vec![
                "sum", "zimsum", "pfsum", "min", "max", "mimmin", "mimmax", "avg", "median",
                "p99", "first", "last",
            ]),
        ) {
            let s: Vec<Point> = points.iter().map(|(&o, &v)| (T + o, v)).collect();
            let bits = crate::num::typed_bits;
            prop_assert_eq!(bits(&aggregate(&[&s], agg(name), false, true)), bits(&s));
        }

        /// With aligned series (same timestamps), `sum` is the pointwise sum: exact over
        /// integers (a double only past i64), a double as soon as a double is in it.
        #[test]
        fn aligned_sum_is_pointwise(values in proptest::collection::vec((any_num(), any_num()), 0..40)) {
            let a: Vec<Point> =
                values.iter().enumerate().map(|(i, v)| (T + i as i64, v.0)).collect();
            let b: Vec<Point> =
                values.iter().enumerate().map(|(i, v)| (T + i as i64, v.1)).collect();
            let out = aggregate(&[&a, &b], agg("sum"), false, true);
            prop_assert_eq!(out.len(), values.len());
            for ((t, got), (i, (x, y))) in out.iter().zip(values.iter().enumerate()) {
                prop_assert_eq!(*t, T + i as i64);
                match (x, y) {
                    (Value::Int(x), Value::Int(y)) => {
                        prop_assert_eq!(*got, crate::num::from_i128(i128::from(*x) + i128::from(*y)));
                    }
                    _ => {
                        prop_assert!(!got.is_int());
                        let (x, y) = (x.as_f64(), y.as_f64());
                        let expect = match (x.is_nan(), y.is_nan()) {
                            (true, true) => f64::NAN,
                            (true, false) => y,
                            (false, true) => x,
                            _ => x + y,
                        };
                        // Only a mixed pair's integer may be past 2^53 and keep bits a plain
                        // f64 sum loses: compare within the integer's rounding.
                        let tol = x.abs().max(y.abs()) * f64::EPSILON * 2.0;
                        let g = got.as_f64();
                        prop_assert!(
                            (g.is_nan() && expect.is_nan()) || g == expect || (g - expect).abs() <= tol,
                            "{:?} + {:?} = {:?}", x, y, got
                        );
                    }
                }
            }
        }

        /// The aligned fast path gives exactly what the general merge-and-interpolate path gives.
        #[test]
        fn aligned_fast_path_equals_general(
            rows in proptest::collection::vec(
                proptest::collection::vec((0u8..5, -50i64..50), 3), 1..30),
            name in proptest::sample::select(crate::aggregator::aggregator_names().collect::<Vec<_>>()),
            rate in any::<bool>(),
        ) {
            // Integers, floats, and now and then a NaN (kind 0).
            let series: Vec<Vec<Point>> = (0..3)
                .map(|j| {
                    rows.iter()
                        .enumerate()
                        .map(|(i, r)| {
                            let (kind, v) = r[j];
                            let v = match kind {
                                0 => Value::Float(f64::NAN),
                                1 | 2 => Value::Int(v),
                                _ => Value::Float(v as f64 / 4.0),
                            };
                            (T + i as i64 * 1000, v)
                        })
                        .collect()
                })
                .collect();
            let refs: Vec<&[Point]> = series.iter().map(Vec::as_slice).collect();
            let fast = aggregate(&refs, agg(name), rate, true);
            let general = aggregate_general(&refs, agg(name), rate, !rate);
            let bits = crate::num::typed_bits;
            prop_assert_eq!(bits(&fast), bits(&general));
        }
    }
}
