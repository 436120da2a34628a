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

/// The protobuf of `req`, as a request body holds it after snappy.
fn raw(req: &WriteRequest) -> Vec<u8> {
    req.encode_to_vec()
}

/// Decodes `raw` and maps its names; the batch and its points as owned tuples.
fn mapped(raw: &[u8]) -> (RemoteWriteBatch<'_>, Vec<Owned>) {
    let mut b = RemoteWriteBatch::decode(raw).unwrap();
    let points = owned(&b.mapped_points().unwrap());
    (b, points)
}

/// A point as owned `(metric, tags, timestamp, value)`.
type Owned = (String, Vec<(String, String)>, i64, Value);

/// The points of a batch.
fn owned(b: &PointBatch<'_>) -> Vec<Owned> {
    b.points()
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
    assert_eq!(decompress_write_request(&body, 1 << 20)?, raw(&req));
    Ok(())
}

/// A buffer kept from a larger request holds its bytes past the next one's end; only the
/// length returned is the request.
#[test]
fn a_reused_buffer_gives_each_request_exactly() -> Result<(), ProtocolError> {
    let large = WriteRequest {
        timeseries: vec![series(
            &[("__name__", "up"), ("job", &"n".repeat(300))],
            &[(1.0, 1_700_000_000_000)],
        )],
    };
    let small = WriteRequest {
        timeseries: vec![series(&[("__name__", "up")], &[(2.0, 1_700_000_000_000)])],
    };
    let mut buf = Vec::new();
    let n = decompress_write_request_into(&encode_write_request(&large), 1 << 20, &mut buf)?;
    assert_eq!(&buf[..n], raw(&large).as_slice());
    let n = decompress_write_request_into(&encode_write_request(&small), 1 << 20, &mut buf)?;
    assert_eq!(&buf[..n], raw(&small).as_slice());
    assert!(buf.len() > n, "the buffer kept its size");
    let e = decompress_write_request_into(b"not snappy at all", 1 << 20, &mut buf).unwrap_err();
    assert!(matches!(e, ProtocolError::Snappy(_)), "{e}");
    Ok(())
}

#[test]
fn bad_bodies_are_client_errors() {
    let e = decompress_write_request(b"not snappy at all", 1 << 20).unwrap_err();
    assert!(matches!(e, ProtocolError::Snappy(_)), "{e}");
    assert_eq!(e.status(), 400);
    let e = RemoteWriteBatch::decode(&[0xff; 32]).unwrap_err();
    assert!(matches!(e, ProtocolError::Protobuf(_)), "{e}");
    assert_eq!(e.status(), 400);
    let big = encode_write_request(&WriteRequest {
        timeseries: vec![series(&[("__name__", &"x".repeat(4000))], &[])],
    });
    let e = decompress_write_request(&big, 1000).unwrap_err();
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
    let raw = raw(&req);
    let (b, points) = mapped(&raw);
    let tags = vec![
        ("instance".to_string(), "localhost__x3A_9090".to_string()),
        ("le".to_string(), "__x2B_Inf".to_string()),
    ];
    let metric = "job__x3A_http_requests__x3A_rate5m".to_string();
    assert_eq!(
        points,
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
    let raw = raw(&req);
    let (b, points) = mapped(&raw);
    assert_eq!(points.len(), 1);
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
    let raw = raw(&req);
    let (b, points) = mapped(&raw);
    assert_eq!(points.len(), 2);
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
    let raw = raw(&req);
    let (b, _) = mapped(&raw);
    let err = strata_tsdb::Error::SeriesExhausted { count: 1 };
    let reply = b.reply(&[Err(err)]);
    assert_eq!(reply.status, 500);
}

proptest! {
    /// Any bytes decode to a request or a client error, never a panic; whatever decodes maps
    /// to points without a panic.
    #[test]
    fn arbitrary_bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = decompress_write_request(&body, 1 << 20);
        if let Ok(mut b) = RemoteWriteBatch::decode(&body) {
            let _ = b.mapped_points();
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
        let raw = raw(&req);
        let (_, got) = mapped(&raw);
        // prost's encoder leaves out a zero of either sign (proto3's default), so -0.0 arrives
        // as 0.0; Go's encoder sends its bits.
        let want: Vec<f64> = values
            .iter()
            .filter(|v| v.is_finite())
            .map(|&v| if v == 0.0 { 0.0 } else { v })
            .collect();
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
    let raw = raw(&req);
    let (b, points) = mapped(&raw);
    assert_eq!(points.len(), 1);
    assert_eq!(points[0].1, vec![("a".to_string(), "c".to_string())]);
    let reply = b.reply(&[Ok(())]);
    assert_eq!(reply.status, 400);
    assert!(
        reply.body.contains("a label that is not UTF-8"),
        "{}",
        reply.body
    );
}

#[test]
fn negative_zero_keeps_its_sign() {
    // 1: a series with __name__="m", a="b", and one sample of -0.0 (written by hand, as prost
    // would not write the value).
    let mut ts = Vec::new();
    for (n, v) in [("__name__", "m"), ("a", "b")] {
        let mut label = Vec::new();
        prost::encoding::bytes::encode(1, &n.as_bytes().to_vec(), &mut label);
        prost::encoding::bytes::encode(2, &v.as_bytes().to_vec(), &mut label);
        prost::encoding::bytes::encode(1, &label, &mut ts);
    }
    let mut sample = vec![0x09];
    sample.extend_from_slice(&(-0.0f64).to_bits().to_le_bytes());
    prost::encoding::int64::encode(2, &1_700_000_000_000, &mut sample);
    prost::encoding::bytes::encode(2, &sample, &mut ts);
    let mut raw = Vec::new();
    prost::encoding::bytes::encode(1, &ts, &mut raw);
    let (_, points) = mapped(&raw);
    assert_eq!(points.len(), 1);
    assert!(matches!(points[0].3, Value::Float(f) if f.to_bits() == (-0.0f64).to_bits()));
}

#[test]
fn labels_split_by_another_field_name_one_series() {
    // Labels, a sample, then another label: the series' key is assembled from both parts,
    // and the names are those of every label.
    let mut ts = Vec::new();
    let label = |n: &str, v: &str, out: &mut Vec<u8>| {
        let mut l = Vec::new();
        prost::encoding::bytes::encode(1, &n.as_bytes().to_vec(), &mut l);
        prost::encoding::bytes::encode(2, &v.as_bytes().to_vec(), &mut l);
        prost::encoding::bytes::encode(1, &l, out);
    };
    label("__name__", "m", &mut ts);
    let sample = Sample {
        value: 1.0,
        timestamp: 1_700_000_000_000,
    }
    .encode_to_vec();
    prost::encoding::bytes::encode(2, &sample, &mut ts);
    label("a", "b", &mut ts);
    let mut raw = Vec::new();
    prost::encoding::bytes::encode(1, &ts, &mut raw);
    let (b, points) = mapped(&raw);
    assert_eq!(
        points,
        [(
            "m".to_string(),
            vec![("a".to_string(), "b".to_string())],
            1_700_000_000_000,
            Value::Float(1.0)
        )]
    );
    let mut want_key = Vec::new();
    label("__name__", "m", &mut want_key);
    label("a", "b", &mut want_key);
    assert_eq!(&*b.series[0].key, &want_key[..]);
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
    let raw = raw(&req);
    let (b, _) = mapped(&raw);
    assert_eq!(b.refusals().collect::<Vec<_>>(), [RefusalKind::Name; 3]);
}

#[test]
fn series_resolve_through_known_series_once() {
    let dir = tempfile::tempdir().unwrap();
    let tsdb = Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default()).unwrap();
    let known = KnownSeries::new();
    let req = |t: i64| WriteRequest {
        timeseries: vec![
            series(&[("__name__", "up"), ("job", "a:1")], &[(1.0, t)]),
            series(&[("__name__", "up"), ("job", "b")], &[(2.0, t)]),
            series(&[("__name__", "lonely")], &[(3.0, t)]),
        ],
    };
    let write = |t: i64| {
        let raw = raw(&req(t));
        let mut b = RemoteWriteBatch::decode(&raw).unwrap();
        b.resolve(&tsdb, &known).unwrap();
        let results = tsdb.write_series_visible(&b.series_points()).unwrap();
        let reply = b.reply(&results);
        assert_eq!(b.series_errors().map(|(_, n)| n).sum::<u64>(), 1);
        (reply.status, reply.stored)
    };
    assert_eq!(write(1_700_000_000_000), (400, 2));
    assert_eq!(known.len(), 2);
    assert_eq!(write(1_700_000_010_000), (400, 2));
    assert_eq!(known.len(), 2);
    assert_eq!(tsdb.series_count(), 2);
    let ids = tsdb.find_series("up", &[]).unwrap();
    let mut jobs: Vec<String> = ids
        .iter()
        .map(|id| tsdb.series_names(id).unwrap().unwrap().1[0].1.clone())
        .collect();
    jobs.sort();
    assert_eq!(jobs, ["a__x3A_1", "b"]);
    // A rename makes the remembered handles stale: the series resolve afresh.
    tsdb.rename_uid(strata_tsdb::UidKind::Tagv, "b", "c")
        .unwrap();
    assert_eq!(write(1_700_000_020_000), (400, 2));
    assert_eq!(tsdb.series_count(), 3);
}
