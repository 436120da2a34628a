use proptest::prelude::*;
use strata_tsdb::Value;

use super::*;

fn series(labels: &[(&str, &str)], samples: &[(f64, i64)]) -> TimeSeries {
    TimeSeries {
        labels: labels
            .iter()
            .map(|(n, v)| Label {
                name: n.to_string().into(),
                value: v.to_string().into(),
            })
            .collect(),
        samples: samples
            .iter()
            .map(|&(value, timestamp)| Sample { value, timestamp })
            .collect(),
    }
}

/// A point as owned `(metric, tags, timestamp, value)`.
type Owned = (String, Vec<(String, String)>, i64, Value);

/// The points of a batch.
fn owned(b: &RemoteWriteBatch<'_>) -> Vec<Owned> {
    b.points()
        .points()
        .iter()
        .map(|p| {
            (
                p.metric.to_string(),
                p.tags
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                p.timestamp,
                p.value,
            )
        })
        .collect()
}

#[test]
fn requests_round_trip_through_snappy_and_protobuf() -> Result<(), ProtocolError> {
    let req = WriteRequest {
        timeseries: vec![series(
            &[("__name__", "up"), ("job", "node")],
            &[(1.0, 1_700_000_000_000)],
        )],
    };
    let body = encode_write_request(&req);
    assert_eq!(decode_write_request(&body, 1 << 20)?, req);
    Ok(())
}

#[test]
fn bad_bodies_are_client_errors() {
    let e = decode_write_request(b"not snappy at all", 1 << 20).unwrap_err();
    assert!(matches!(e, ProtocolError::Snappy(_)), "{e}");
    assert_eq!(e.status(), 400);
    let garbage = snap::raw::Encoder::new()
        .compress_vec(&[0xff; 32])
        .unwrap_or_default();
    let e = decode_write_request(&garbage, 1 << 20).unwrap_err();
    assert!(matches!(e, ProtocolError::Protobuf(_)), "{e}");
    let big = encode_write_request(&WriteRequest {
        timeseries: vec![series(&[("__name__", &"x".repeat(4000))], &[])],
    });
    let e = decode_write_request(&big, 1000).unwrap_err();
    assert_eq!(e, ProtocolError::TooLarge { max: 1000 });
    assert_eq!(e.status(), 413);
}

#[test]
fn samples_map_to_float_points_with_escaped_names() {
    let req = WriteRequest {
        timeseries: vec![
            series(
                &[
                    ("__name__", "job:http_requests:rate5m"),
                    ("instance", "localhost:9090"),
                    ("empty", ""),
                    ("le", "+Inf"),
                ],
                &[(1.0, 1_700_000_000_000), (2.5, 1_700_000_010_123)],
            ),
            series(&[("__name__", "up"), ("job", "node")], &[(0.1, 5_000)]),
        ],
    };
    let b = RemoteWriteBatch::new(&req);
    let tags = vec![
        ("instance".to_string(), "localhost__x3A_9090".to_string()),
        ("le".to_string(), "__x2B_Inf".to_string()),
    ];
    let metric = "job__x3A_http_requests__x3A_rate5m".to_string();
    assert_eq!(
        owned(&b),
        vec![
            (
                metric.clone(),
                tags.clone(),
                1_700_000_000_000,
                Value::Float(1.0)
            ),
            (metric, tags, 1_700_000_010_123, Value::Float(2.5)),
            (
                "up".to_string(),
                vec![("job".to_string(), "node".to_string())],
                5,
                Value::Float(0.1)
            ),
        ]
    );
    assert_eq!(b.samples(), 3);
    assert_eq!(b.reply(&[Ok(()), Ok(()), Ok(())]).status, 204);
}

#[test]
fn stale_markers_and_non_finite_values_are_not_stored() {
    let stale = f64::from_bits(STALE_NAN_BITS);
    assert!(stale.is_nan());
    let req = WriteRequest {
        timeseries: vec![series(
            &[("__name__", "m"), ("a", "b")],
            &[
                (1.0, 1_700_000_000_000),
                (stale, 1_700_000_015_000),
                (f64::NAN, 1_700_000_030_000),
                (f64::INFINITY, 1_700_000_045_000),
            ],
        )],
    };
    let b = RemoteWriteBatch::new(&req);
    assert_eq!(b.points().len(), 1);
    assert_eq!(b.stale_markers(), 1);
    assert_eq!(b.not_finite(), 2);
    assert_eq!(b.refusals().count(), 0);
    let reply = b.reply(&[Ok(())]);
    assert_eq!((reply.status, reply.stored), (204, 1));
}

#[test]
fn bad_samples_give_400_naming_them_and_the_rest_is_kept() {
    let req = WriteRequest {
        timeseries: vec![
            series(&[("job", "x")], &[(1.0, 1_700_000_000_000)]),
            series(
                &[("__name__", "m"), ("a", "b")],
                &[(1.0, -5), (2.0, 1_700_000_000_000)],
            ),
            series(&[("__name__", "lonely")], &[(3.0, 1_700_000_000_000)]),
        ],
    };
    let b = RemoteWriteBatch::new(&req);
    assert_eq!(b.points().len(), 2);
    let kinds: Vec<_> = b.refusals().collect();
    assert_eq!(kinds, [RefusalKind::Name, RefusalKind::Timestamp]);
    let results = vec![
        Ok(()),
        Err(strata_tsdb::PointError::NoTags {
            metric: "lonely".into(),
        }
        .into()),
    ];
    let reply = b.reply(&results);
    assert_eq!((reply.status, reply.stored), (400, 1));
    assert!(
        reply.body.starts_with("1 of 4 samples stored; refused:\n"),
        "{}",
        reply.body
    );
    assert!(
        reply
            .body
            .contains("{job=\"x\"}: 1 samples without a metric name"),
        "{}",
        reply.body
    );
    assert!(
        reply
            .body
            .contains("m{a=\"b\"}: timestamp -5 ms is before 1970"),
        "{}",
        reply.body
    );
    assert!(
        reply.body.contains("lonely{}: Need at least one tag"),
        "{}",
        reply.body
    );
}

#[test]
fn storage_failures_ask_for_a_retry() {
    let req = WriteRequest {
        timeseries: vec![series(
            &[("__name__", "m"), ("a", "b")],
            &[(1.0, 1_700_000_000_000)],
        )],
    };
    let b = RemoteWriteBatch::new(&req);
    let err = strata_tsdb::Error::SeriesExhausted { count: 1 };
    let reply = b.reply(&[Err(err)]);
    assert_eq!(reply.status, 500);
}

proptest! {
    /// Any bytes decode to a request or a client error, never a panic; whatever decodes maps
    /// to points without a panic.
    #[test]
    fn arbitrary_bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = decode_write_request(&body, 1 << 20);
        let compressed = snap::raw::Encoder::new().compress_vec(&body).unwrap_or_default();
        if let Ok(req) = decode_write_request(&compressed, 1 << 20) {
            let b = RemoteWriteBatch::new(&req);
            let _ = b.reply(&[]);
        }
    }

    /// Every finite sample of a named series becomes exactly one point with its bits.
    #[test]
    fn finite_samples_keep_their_bits(
        values in proptest::collection::vec(any::<f64>(), 0..20),
        name in "\\PC{1,10}",
        value in "\\PC{1,10}",
    ) {
        let samples: Vec<(f64, i64)> = values
            .iter()
            .enumerate()
            .map(|(i, v)| (*v, 1_700_000_000_000 + i as i64))
            .collect();
        let req = WriteRequest {
            timeseries: vec![series(&[("__name__", &name), ("label", &value)], &samples)],
        };
        let b = RemoteWriteBatch::new(&req);
        let got = owned(&b);
        let want: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        prop_assert_eq!(got.len(), want.len());
        for ((metric, tags, _, v), w) in got.iter().zip(&want) {
            let Value::Float(f) = v else {
                return Err(TestCaseError::fail("not a float"));
            };
            prop_assert_eq!(f.to_bits(), w.to_bits());
            prop_assert_eq!(
                strata_tsdb::unescape_name(metric).map(|n| n.into_owned()),
                Some(name.clone())
            );
            prop_assert_eq!(
                strata_tsdb::unescape_name(&tags[0].1).map(|n| n.into_owned()),
                Some(value.clone())
            );
        }
    }
}

#[test]
fn labels_that_are_not_utf8_refuse_their_series() {
    let mut bad = series(
        &[("__name__", "m"), ("a", "b")],
        &[(1.0, 1_700_000_000_000)],
    );
    bad.labels[1].value = bytes::Bytes::from_static(b"\xff\xfe");
    let good = series(
        &[("__name__", "m"), ("a", "c")],
        &[(2.0, 1_700_000_000_000)],
    );
    let req = WriteRequest {
        timeseries: vec![bad, good],
    };
    let b = RemoteWriteBatch::new(&req);
    assert_eq!(owned(&b).len(), 1);
    assert_eq!(owned(&b)[0].1, vec![("a".to_string(), "c".to_string())]);
    let reply = b.reply(&[Ok(())]);
    assert_eq!(reply.status, 400);
    assert!(
        reply.body.contains("a label that is not UTF-8"),
        "{}",
        reply.body
    );
}

#[test]
fn a_refused_series_counts_each_of_its_samples() {
    let req = WriteRequest {
        timeseries: vec![series(
            &[("job", "x")],
            &[
                (1.0, 1_700_000_000_000),
                (2.0, 1_700_000_015_000),
                (3.0, 1_700_000_030_000),
            ],
        )],
    };
    let b = RemoteWriteBatch::new(&req);
    assert_eq!(b.refusals().collect::<Vec<_>>(), [RefusalKind::Name; 3]);
}
