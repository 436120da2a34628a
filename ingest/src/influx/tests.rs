use proptest::prelude::*;
use strata_tsdb::Value;

use super::*;

const NOW_MS: i64 = 1_700_000_000_000;

type Owned = (String, Vec<(String, String)>, i64, Value);

fn owned(b: &InfluxBatch<'_>) -> Vec<Owned> {
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

fn point(metric: &str, tags: &[(&str, &str)], ts: i64, v: Value) -> Owned {
    (
        metric.into(),
        tags.iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
        ts,
        v,
    )
}

fn ok(n: usize) -> Vec<strata_tsdb::Result<()>> {
    (0..n).map(|_| Ok(())).collect()
}

fn json(reply: &InfluxReply) -> serde_json::Value {
    serde_json::from_slice(&reply.body).unwrap_or_default()
}

#[test]
fn fields_become_metrics_and_types_are_kept() {
    let body = b"weather,location=us-midwest temperature=82i,humidity=71.0,raining=true,\
                 n=18446744073709551615u,note=\"hot\" 1465839830100400200";
    let b = InfluxBatch::parse(body, Precision::Nanoseconds, NOW_MS);
    let tags = [("location", "us-midwest")];
    let ts = 1_465_839_830_100;
    assert_eq!(
        owned(&b),
        vec![
            point("weather.temperature", &tags, ts, Value::Int(82)),
            point("weather.humidity", &tags, ts, Value::Float(71.0)),
            point("weather.raining", &tags, ts, Value::Int(1)),
        ]
    );
    assert_eq!(b.received(), 5);
    let kinds: Vec<_> = b.refusals().collect();
    assert_eq!(kinds, [RefusalKind::Value, RefusalKind::Value]);
    // InfluxDB 1.x: 400 partial write naming the refused fields; 2.x: 422.
    let r = b.reply(InfluxApi::V1, &ok(3));
    assert_eq!((r.status, r.stored), (400, 3));
    let msg = json(&r)["error"].as_str().unwrap_or_default().to_string();
    assert!(msg.starts_with("partial write: 'weather,location"), "{msg}");
    assert!(msg.contains("field \"note\" is a string"), "{msg}");
    assert!(
        msg.contains("unsigned value 18446744073709551615 does not fit"),
        "{msg}"
    );
    assert!(msg.ends_with(" dropped=2"), "{msg}");
    let r = b.reply(InfluxApi::V2, &ok(3));
    assert_eq!(r.status, 422);
    assert_eq!(json(&r)["code"], "unprocessable entity");
    let msg = json(&r)["message"].as_str().unwrap_or_default().to_string();
    assert!(
        msg.starts_with("failure writing points to database: partial write: "),
        "{msg}"
    );
}

#[test]
fn every_precision_lands_on_the_same_instant() {
    let cases = [
        (
            Precision::Nanoseconds,
            "1700000000123456789",
            1_700_000_000_123,
        ),
        (
            Precision::Microseconds,
            "1700000000123456",
            1_700_000_000_123,
        ),
        (Precision::Milliseconds, "1700000000123", 1_700_000_000_123),
        (Precision::Seconds, "1700000000", 1_700_000_000_000),
        (Precision::Minutes, "28333333", 1_699_999_980_000),
        (Precision::Hours, "472222", 1_699_999_200_000),
    ];
    for (p, ts, want) in cases {
        let body = format!("m,h=a v=1i {ts}");
        let b = InfluxBatch::parse(body.as_bytes(), p, NOW_MS);
        assert_eq!(owned(&b)[0].2, want, "{p:?}");
    }
    // No timestamp: the request's time.
    let b = InfluxBatch::parse(b"m,h=a v=1i", Precision::Seconds, NOW_MS);
    assert_eq!(owned(&b)[0].2, NOW_MS);
    // Parameters as each API spells them.
    assert_eq!(Precision::from_v1(Some("u")), Some(Precision::Microseconds));
    assert_eq!(Precision::from_v1(None), Some(Precision::Nanoseconds));
    assert_eq!(Precision::from_v1(Some("h")), Some(Precision::Hours));
    assert_eq!(Precision::from_v1(Some("x")), None);
    assert_eq!(
        Precision::from_v2(Some("us")),
        Some(Precision::Microseconds)
    );
    assert_eq!(Precision::from_v2(Some("h")), None);
    let r = Precision::invalid_reply(InfluxApi::V2, "h");
    assert_eq!(r.status, 400);
    assert_eq!(json(&r)["code"], "invalid");
}

#[test]
fn escaped_names_are_mapped_for_opentsdb() {
    let body = br"disk\ io,mount\ point=/var\,log,k\=1=a\=b read\ bytes=5i 1700000000";
    let b = InfluxBatch::parse(body, Precision::Seconds, NOW_MS);
    assert_eq!(
        owned(&b),
        vec![point(
            "disk__x20_io.read__x20_bytes",
            &[
                ("mount__x20_point", "/var__x2C_log"),
                ("k__x3D_1", "a__x3D_b")
            ],
            1_700_000_000_000,
            Value::Int(5)
        )]
    );
}

#[test]
fn a_partly_bad_batch_is_answered_as_influxdb_does() {
    let body = b"m,h=a v=1i 1700000000\nm,h=b v=oops 1700000000\nm,h=c v=3i 1700000000\n";
    let b = InfluxBatch::parse(body, Precision::Seconds, NOW_MS);
    assert_eq!(b.points().len(), 2);
    // 1.x stores the good lines and answers 400 "partial write".
    assert!(!b.rejects_all(InfluxApi::V1));
    let r = b.reply(InfluxApi::V1, &ok(2));
    assert_eq!((r.status, r.stored), (400, 2));
    assert_eq!(
        json(&r)["error"],
        "partial write: unable to parse 'm,h=b v=oops 1700000000': invalid boolean dropped=0"
    );
    // 2.x stores nothing and answers 400 "invalid".
    assert!(b.rejects_all(InfluxApi::V2));
    let r = b.reply(InfluxApi::V2, &[]);
    assert_eq!((r.status, r.stored), (400, 0));
    assert_eq!(
        json(&r),
        serde_json::json!({"code": "invalid",
            "message": "unable to parse 'm,h=b v=oops 1700000000': invalid boolean"})
    );
    // Nothing parses: 1.x answers without the "partial write" prefix.
    let b = InfluxBatch::parse(b"bad\nworse x", Precision::Seconds, NOW_MS);
    let r = b.reply(InfluxApi::V1, &[]);
    assert_eq!(r.status, 400);
    assert_eq!(
        json(&r)["error"],
        "unable to parse 'bad': missing fields\nunable to parse 'worse x': invalid field format"
    );
}

#[test]
fn storage_refusals_and_failures() {
    let b = InfluxBatch::parse(b"m v=1i 1700000000", Precision::Seconds, NOW_MS);
    let no_tags = Err(strata_tsdb::PointError::NoTags {
        metric: "m.v".into(),
    }
    .into());
    let r = b.reply(InfluxApi::V1, &[no_tags]);
    assert_eq!(r.status, 400);
    assert_eq!(
        json(&r)["error"],
        "partial write: 'm v=1i 1700000000': Need at least one tag (metric=m.v, tags={}) dropped=1"
    );
    let failed = Err(strata_tsdb::Error::SeriesExhausted { count: 1 });
    assert_eq!(b.reply(InfluxApi::V1, &[failed]).status, 500);
    let failed = Err(strata_tsdb::Error::SeriesExhausted { count: 1 });
    let r = b.reply(InfluxApi::V2, &[failed]);
    assert_eq!(
        (r.status, json(&r)["code"].clone()),
        (500, "internal error".into())
    );
}

#[test]
fn empty_bodies() {
    let b = InfluxBatch::parse(b"", Precision::Nanoseconds, NOW_MS);
    assert_eq!(b.reply(InfluxApi::V1, &[]).status, 204);
    let r = b.reply(InfluxApi::V2, &[]);
    assert_eq!(
        (r.status, json(&r)["message"].clone()),
        (400, "writing requires points".into())
    );
    let b = InfluxBatch::parse(b"# only a comment\n", Precision::Nanoseconds, NOW_MS);
    assert_eq!(b.reply(InfluxApi::V2, &[]).status, 204);
}

#[test]
fn timestamps_storage_cannot_hold_are_refused() {
    let b = InfluxBatch::parse(b"m,h=a v=1i,w=2i -5", Precision::Seconds, NOW_MS);
    assert!(b.points().is_empty());
    assert_eq!(b.refusals().count(), 2);
    let b = InfluxBatch::parse(b"m,h=a v=1 9223372036854775807", Precision::Hours, NOW_MS);
    let r = b.reply(InfluxApi::V1, &[]);
    assert_eq!(
        json(&r)["error"],
        "unable to parse 'm,h=a v=1 9223372036854775807': time outside range"
    );
}

proptest! {
    /// A body without backslashes and quotes splits into the same point lines either way.
    #[test]
    fn plain_lines_are_the_lines_of_a_plain_body(
        body in proptest::collection::vec(
            proptest::sample::select(b" \t\r\n\0#,=a1".to_vec()), 0..200)
    ) {
        let text = std::str::from_utf8(&body).unwrap();
        let plain: Vec<&[u8]> = plain_lines(text).map(str::as_bytes).collect();
        let general: Vec<&[u8]> = lines(&body)
            .filter_map(|k| match k {
                LineKind::Point(raw) => Some(raw),
                LineKind::Skip => None,
            })
            .collect();
        prop_assert_eq!(plain, general);
    }

    /// Any body parses into points and errors without a panic, and answers on both APIs.
    #[test]
    fn arbitrary_bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..400)) {
        let b = InfluxBatch::parse(&body, Precision::Nanoseconds, NOW_MS);
        let results = ok(b.points().len());
        let _ = b.reply(InfluxApi::V1, &results);
        let _ = b.reply(InfluxApi::V2, &results);
    }

    /// Integers keep all 64 bits and floats all their bits.
    #[test]
    fn values_are_exact(i in any::<i64>(), f in any::<f64>().prop_filter("finite", |f| f.is_finite())) {
        let body = format!("m,h=a i={i}i,f={f:?} 1700000000");
        let b = InfluxBatch::parse(body.as_bytes(), Precision::Seconds, NOW_MS);
        let pts = owned(&b);
        prop_assert_eq!(pts.len(), 2, "{}", body);
        prop_assert_eq!(&pts[0].3, &Value::Int(i));
        let Value::Float(got) = pts[1].3 else {
            return Err(TestCaseError::fail("not a float"));
        };
        prop_assert_eq!(got.to_bits(), f.to_bits());
    }
}

/// Lines of every kind: plain ones (which the known-series path can take once their series
/// are known), escaped and quoted ones, and ones that fail in each part.
const MIXED_BODY: &str = "cpu,host=a,dc=x user=1.5,system=2i,up=true 1700000000000000000
cpu,host=b user=3 1700000000000000000
mem,host=a used=5u,free=18446744073709551615u 1700000000000000000
disk\\ io,host=a\\ b read=1i 1700000000000000000
log,host=a msg=\"hi there\",n=1i 1700000000000000000
cpu,host=a,dc=x user=2.5,system=3i,up=F
cpu,host=a,dc=x user=x 1700000000000000000
cpu,host=a,host=b user=1 1700000000000000000
cpu,host=a,dc=x user=1,,system=2i 1700000000000000000
cpu,host=a,dc=x user=1 17000000000000000000000
cpu,host=a,dc=x user=1 -5
cpu,host=a,dc=x user=1 1700000000000000000 extra
";

/// A body without a backslash or a quote, which `parse_known` splits without the quote-aware
/// scan: blank, comment, CRLF and indented lines among points that fail in each part.
const PLAIN_BODY: &str = "cpu,host=a,dc=x user=1.5,system=2i,up=true 1700000000000000000\r
\r
# a comment
   \t cpu,host=b user=3 1700000000000000000
mem,host=a used=5u,free=18446744073709551615u 1700000000000000000

cpu,host=a,dc=x user=2.5,system=3i,up=F
\0cpu,host=a,dc=x user=x 1700000000000000000
cpu,host=a,host=b user=1 1700000000000000000
cpu,host=a,dc=x user=1,,system=2i 1700000000000000000
cpu,host=a,dc=x user=1 17000000000000000000000\r
cpu,host=a,dc=x user=1 -5
cpu,host=a,dc=x user=1 1700000000000000000 extra";

#[test]
fn known_series_lines_are_read_as_the_full_parse_reads_them() {
    known_lines_match_the_full_parse(MIXED_BODY);
}

#[test]
fn known_series_lines_of_a_plain_body_are_read_as_the_full_parse_reads_them() {
    known_lines_match_the_full_parse(PLAIN_BODY);
}

/// `body` read by `parse_known`, three times as its series become known, gives the points,
/// errors and replies of the full parse.
fn known_lines_match_the_full_parse(body: &str) {
    let dir = tempfile::tempdir().unwrap();
    let tsdb = Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default()).unwrap();
    let known = KnownLines::new();
    let body = body.as_bytes();
    let full = InfluxBatch::parse(body, Precision::Nanoseconds, NOW_MS);
    let full_points: Vec<(i64, Value)> = owned(&full).into_iter().map(|p| (p.2, p.3)).collect();
    let full_results: Vec<strata_tsdb::Result<()>> = tsdb.write(&full.points().points());
    let series = tsdb.series_count();
    for round in 0..3 {
        let mut b = InfluxBatch::parse_known(body, Precision::Nanoseconds, NOW_MS, &tsdb, &known);
        assert_eq!(b.received(), full.received(), "round {round}");
        assert_eq!(
            b.refusals().collect::<Vec<_>>(),
            full.refusals().collect::<Vec<_>>(),
            "round {round}"
        );
        b.resolve(&tsdb, &known);
        let points = b.series_points();
        let got: Vec<(i64, Value)> = points.iter().map(|p| (p.timestamp, p.value)).collect();
        assert_eq!(got, full_points, "round {round}");
        let results = tsdb.write_series_visible(&points).unwrap();
        assert_eq!(tsdb.series_count(), series, "round {round}");
        for api in [InfluxApi::V1, InfluxApi::V2] {
            assert_eq!(
                b.reply(api, &results),
                full.reply(api, &full_results),
                "round {round}"
            );
        }
    }
    // The plain lines' series were remembered: cpu (a: user, system, up; b: user) and mem.
    assert_eq!(known.len(), 5);
}
