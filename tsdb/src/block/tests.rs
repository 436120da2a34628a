//! Tests for the block codec: golden bytes, round trips (fixed and proptest), size checks,
//! and corruption handling.

use super::*;
use proptest::prelude::*;

fn encode(points: &[(i64, Value)]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_block(points, &mut out).unwrap();
    out
}

fn round_trip(points: &[(i64, Value)]) -> Vec<u8> {
    let bytes = encode(points);
    let mut got = Vec::new();
    decode_block(&bytes, &mut got).unwrap();
    assert_eq!(got.len(), points.len());
    assert!(got == points, "round trip differs");
    let (mut ts, mut vals) = (Vec::new(), Vec::new());
    decode_block_columns(&bytes, &mut ts, &mut vals).unwrap();
    assert!(
        ts.iter()
            .zip(&vals)
            .map(|(t, v)| (*t, *v))
            .eq(points.iter().copied())
    );
    assert_eq!(block_len(&bytes).unwrap(), points.len());
    // Into caller-provided buffers, with one spare slot; one slot short is refused.
    let n = points.len();
    let (mut ts, mut vals) = (vec![7i64; n + 1], vec![Value::Int(7); n + 1]);
    assert_eq!(decode_block_into(&bytes, &mut ts, &mut vals), Ok(n));
    assert!(
        ts[..n]
            .iter()
            .zip(&vals[..n])
            .map(|(t, v)| (*t, *v))
            .eq(points.iter().copied())
    );
    assert_eq!((ts[n], vals[n]), (7, Value::Int(7)));
    if n > 0 {
        assert_eq!(
            decode_block_into(&bytes, &mut ts[..n - 1], &mut vals),
            Err(BlockError::BufferTooSmall {
                needed: n,
                available: n - 1
            })
        );
    }
    bytes
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Base of an hour row in milliseconds (2026-11-22T04:00:00Z).
const BASE: i64 = 1_795_320_000_000;

fn gauge_1dp(n: usize, step: i64) -> Vec<(i64, Value)> {
    let mut x = 12345u64;
    let mut v = 50.0f64;
    (0..n)
        .map(|i| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let tenths = (v * 10.0).round() as i64 + ((x >> 33) % 21) as i64 - 10;
            v = (tenths.clamp(0, 1000)) as f64 / 10.0;
            (BASE + i as i64 * step, Value::Float(v))
        })
        .collect()
}

fn counter(n: usize, step: i64) -> Vec<(i64, Value)> {
    let mut x = 99u64;
    let mut c = 1_000_000i64;
    (0..n)
        .map(|i| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            c += ((x >> 33) % 500) as i64;
            (BASE + i as i64 * step, Value::Int(c))
        })
        .collect()
}

#[test]
fn golden_bytes() {
    // 3 integer points at 1 s, 2 s, 3.5 s; a counter going 5, 7, 9.
    let points = [
        (1000, Value::Int(5)),
        (2000, Value::Int(7)),
        (3500, Value::Int(9)),
    ];
    let bytes = round_trip(&points);
    // version 1 | count 3 | t0 zigzag(1000) = 2000 | min_delta 1000 | width 9 |
    // residuals 0, 500 at 9 bits: 000000000 111110100 -> 00 7d 00 (18 bits, padded) |
    // layout int | kind delta | v0 zigzag(5) = 10 | min_delta zigzag(2) = 4 | width 0
    let body = [
        "01", "03", "d00f", "e807", "09", "007d00", "00", "01", "0a", "04", "00",
    ]
    .concat();
    assert_eq!(hex(&bytes[..bytes.len() - 4]), body);
    let expected = hex(&bytes);
    assert_eq!(expected.len(), body.len() + 8);
    let sum = xxhash_rust::xxh3::xxh3_64(&bytes[..bytes.len() - 4]) as u32;
    assert_eq!(&bytes[bytes.len() - 4..], &sum.to_be_bytes());
}

#[test]
fn golden_bytes_decimal_floats() {
    // One-decimal gauge at a regular 10 s interval.
    let points = [
        (0, Value::Float(1.5)),
        (10_000, Value::Float(1.7)),
        (20_000, Value::Float(1.6)),
    ];
    let bytes = round_trip(&points);
    // version | count 3 | t0 0 | min_delta 10000 = 90 4e | width 0 | layout float | decimal |
    // k=1 | int FOR | min zigzag(15)=30 | width 2 | residuals 0,2,1 = 00 10 01 -> 0x24
    assert_eq!(hex(&bytes[..bytes.len() - 4]), "010300904e00010101001e0224");
}

#[test]
fn empty_block() {
    let bytes = round_trip(&[]);
    assert_eq!(bytes.len(), 2 + 4);
}

#[test]
fn special_values_round_trip() {
    let specials = [
        Value::Int(i64::MIN),
        Value::Int(i64::MAX),
        Value::Int(0),
        Value::Int(-1),
        Value::Float(-0.0),
        Value::Float(0.0),
        Value::Float(f64::MAX),
        Value::Float(f64::MIN),
        Value::Float(f64::MIN_POSITIVE),
        Value::Float(f64::from_bits(1)),
        Value::Float(f64::from_bits(0x000f_ffff_ffff_ffff)),
        Value::Float(f64::NAN),
        Value::Float(f64::from_bits(0xfff8_0000_dead_beef)),
        Value::Float(f64::INFINITY),
        Value::Float(f64::NEG_INFINITY),
        Value::Float(0.1),
        Value::Float(1e300),
        Value::Float(-1e-300),
    ];
    let ts = [
        i64::MIN,
        i64::MIN + 1,
        -1,
        0,
        1,
        7,
        3_599_999,
        i64::MAX - 1,
        i64::MAX,
    ];
    let points: Vec<_> = specials
        .iter()
        .zip(ts.iter().cycle())
        .enumerate()
        .map(|(i, (v, _))| (i as i64 * 977 - 5000, *v))
        .collect();
    round_trip(&points);
    let extremes: Vec<_> = ts.iter().map(|&t| (t, Value::Int(t))).collect();
    round_trip(&extremes);
    round_trip(&[
        (i64::MIN, Value::Float(-0.0)),
        (i64::MAX, Value::Float(0.0)),
    ]);
    // Each special alone and as constants.
    for v in specials {
        round_trip(&[(5, v)]);
        round_trip(&[(5, v), (6, v), (9, v)]);
    }
    // All floats, each pair of specials (decimal must refuse the ones it cannot keep).
    for a in specials.iter().filter(|v| v.is_float()) {
        for b in specials.iter().filter(|v| v.is_float()) {
            round_trip(&[(0, *a), (1, Value::Float(2.5)), (2, *b)]);
        }
    }
}

#[test]
fn rejects_unordered_input() {
    let mut out = vec![7];
    let err = encode_block(&[(5, Value::Int(1)), (5, Value::Int(2))], &mut out).unwrap_err();
    assert_eq!(
        err,
        BlockError::NotIncreasing {
            index: 1,
            prev: 5,
            ts: 5
        }
    );
    assert_eq!(out, [7]);
}

#[test]
fn full_hour_at_one_millisecond() {
    let n = 3_600_000;
    let points = gauge_1dp(n, 1);
    let bytes = round_trip(&points);
    assert!(bytes.len() < n, "{} bytes for {n} points", bytes.len());
    let ints: Vec<_> = (0..n as i64)
        .map(|i| (BASE + i, Value::Int(i * 3)))
        .collect();
    let bytes = round_trip(&ints);
    assert!(
        bytes.len() < 64,
        "a steady counter is constant size: {}",
        bytes.len()
    );
}

#[test]
fn bytes_per_point_by_shape() {
    type Shape = (&'static str, Vec<(i64, Value)>, f64);
    let shapes: [Shape; 5] = [
        ("gauge 1dp, 10 s", gauge_1dp(360, 10_000), 1.2),
        ("gauge 1dp, 1 s", gauge_1dp(3600, 1000), 0.8),
        ("counter, 10 s", counter(360, 10_000), 1.3),
        ("counter, 1 s", counter(3600, 1000), 1.3),
        (
            "constant, 10 s",
            (0..360)
                .map(|i| (BASE + i * 10_000, Value::Float(42.5)))
                .collect(),
            0.1,
        ),
    ];
    for (name, points, max) in shapes {
        let bytes = round_trip(&points);
        let bpp = bytes.len() as f64 / points.len() as f64;
        println!(
            "{name}: {} points, {} bytes, {bpp:.3} B/pt",
            points.len(),
            bytes.len()
        );
        assert!(bpp <= max, "{name}: {bpp} B/pt > {max}");
    }
    // Plain Gorilla on the same gauge, for comparison.
    let g: Vec<f64> = gauge_1dp(3600, 1000).iter().map(|p| p.1.as_f64()).collect();
    let mut out = Vec::new();
    gorilla::encode(&g, &mut out);
    println!(
        "gauge 1dp, Gorilla only: {:.3} B/pt (values)",
        out.len() as f64 / 3600.0
    );
}

#[test]
fn jittered_timestamps_round_trip() {
    let mut x = 7u64;
    let mut t = BASE;
    let points: Vec<_> = (0..3600)
        .map(|i| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            t += 1000 + ((x >> 40) % 50) as i64;
            (t, Value::Int(i))
        })
        .collect();
    round_trip(&points);
}

#[test]
fn truncation_at_every_byte_is_an_error() {
    let mixed: Vec<_> = (0..50)
        .map(|i| {
            let v = if i % 3 == 0 {
                Value::Int(i)
            } else {
                Value::Float(i as f64 * 0.37)
            };
            (BASE + i * 1013 + (i * i) % 7, v)
        })
        .collect();
    for points in [gauge_1dp(40, 10_000), counter(40, 1000), mixed] {
        let bytes = encode(&points);
        for cut in 0..bytes.len() {
            let mut out = Vec::new();
            assert!(
                decode_block(&bytes[..cut], &mut out).is_err(),
                "cut at {cut}"
            );
            assert!(out.is_empty());
            // Without the checksum the parser itself must notice (or at least not panic).
            let mut ts = Vec::new();
            let mut vals = Vec::new();
            let body = &bytes[..bytes.len() - CHECKSUM_LEN];
            if cut < body.len() {
                assert!(
                    decode_body(&body[..cut], &mut ts, &mut vals).is_err(),
                    "body cut {cut}"
                );
            }
        }
    }
}

#[test]
fn wrong_version_and_lying_count() {
    let mut bytes = encode(&counter(10, 1000));
    bytes[0] = 2;
    let n = bytes.len();
    let sum = checksum(&bytes[..n - 4]);
    bytes[n - 4..].copy_from_slice(&sum.to_be_bytes());
    let mut out = Vec::new();
    assert_eq!(
        decode_block(&bytes, &mut out),
        Err(BlockError::BadVersion {
            got: 2,
            expected: 1
        })
    );
    // A body claiming 2^40 points is refused before any allocation.
    let mut body = vec![1];
    put_varint(&mut body, 1 << 40);
    let sum = checksum(&body);
    body.extend_from_slice(&sum.to_be_bytes());
    assert!(matches!(
        decode_block(&body, &mut out),
        Err(BlockError::TooManyPoints { .. })
    ));
}

fn arb_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::Int),
        (-1000i64..1000).prop_map(Value::Int),
        any::<u64>().prop_map(|b| Value::Float(f64::from_bits(b))),
        (-100_000i64..100_000, 0u32..4)
            .prop_map(|(m, k)| Value::Float(m as f64 / 10f64.powi(k as i32))),
        prop::sample::select(vec![
            -0.0,
            0.0,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            f64::NAN
        ])
        .prop_map(Value::Float),
    ]
}

/// Strictly increasing timestamps from a start and positive gaps.
fn arb_ts(max_len: usize) -> impl Strategy<Value = Vec<i64>> {
    (
        any::<i64>(),
        prop_oneof![Just(1i64), Just(1000), 1i64..100_000],
        prop::collection::vec(0i64..3, 1..max_len),
        any::<bool>(),
    )
        .prop_map(|(start, step, jitter, regular)| {
            let mut t = start.clamp(i64::MIN, i64::MAX - 400_000_000_000);
            jitter
                .iter()
                .map(|j| {
                    let cur = t;
                    t += if regular { step } else { step + j * 17 };
                    cur
                })
                .collect()
        })
}

proptest! {
    #[test]
    fn prop_round_trip_any(ts in arb_ts(600), vals in prop::collection::vec(arb_value(), 600)) {
        let points: Vec<_> = ts.iter().copied().zip(vals).collect();
        round_trip(&points);
    }

    #[test]
    fn prop_round_trip_ints(ts in arb_ts(2000), seed in any::<i64>(), spread in 0u32..64) {
        let mut v = seed;
        let points: Vec<_> = ts
            .iter()
            .enumerate()
            .map(|(i, &t)| {
                v = v.wrapping_add((i as i64).wrapping_mul(0x5851_F42D) >> spread);
                (t, Value::Int(v))
            })
            .collect();
        round_trip(&points);
    }

    #[test]
    fn prop_round_trip_decimal_gauges(ts in arb_ts(2000), k in 0i32..6, base in -1e6f64..1e6) {
        let points: Vec<_> = ts
            .iter()
            .enumerate()
            .map(|(i, &t)| {
                let m = (base * 10f64.powi(k)).round() + ((i * 7919) % 301) as f64 - 150.0;
                (t, Value::Float(m / 10f64.powi(k)))
            })
            .collect();
        round_trip(&points);
    }

    #[test]
    fn prop_round_trip_constant(
        start in -1i64 << 60..1 << 60,
        step in 1i64..100_000,
        n in 1i64..3000,
        v in arb_value(),
    ) {
        let points: Vec<_> = (0..n).map(|i| (start + i * step, v)).collect();
        let bytes = round_trip(&points);
        prop_assert!(bytes.len() < 64, "constant series took {} bytes", bytes.len());
    }

    #[test]
    fn prop_random_flips_never_panic(
        ts in arb_ts(200),
        vals in prop::collection::vec(arb_value(), 200),
        flips in prop::collection::vec((any::<usize>(), 1u8..=255), 1..4),
    ) {
        let points: Vec<_> = ts.iter().copied().zip(vals).collect();
        let mut bytes = encode(&points);
        for (at, x) in &flips {
            let i = at % bytes.len();
            bytes[i] ^= x;
        }
        let mut out = Vec::new();
        prop_assert!(decode_block(&bytes, &mut out).is_err(), "checksum must catch flips");
        // The parser on its own, past the checksum, must not panic either.
        let body = &bytes[..bytes.len() - CHECKSUM_LEN];
        let (mut t, mut v) = (Vec::new(), Vec::new());
        let _ = decode_body(body, &mut t, &mut v);
    }

    #[test]
    fn prop_arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let (mut t, mut v) = (Vec::new(), Vec::new());
        let _ = decode_body(&bytes, &mut t, &mut v);
        let mut out = Vec::new();
        let _ = decode_block(&bytes, &mut out);
    }
}
