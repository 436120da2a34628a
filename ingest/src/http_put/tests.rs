use super::*;
use crate::put_response::{PutResponse, ReplyMode};
use strata_tsdb::Value;

fn parse(body: &str) -> ParsedPut<'_> {
    match parse_put_body(body.as_bytes(), &ParseConfig::default()) {
        Ok(p) => p,
        Err(e) => panic!("{body}: {e:?}"),
    }
}

fn body_err(body: &str) -> BodyError {
    match parse_put_body(body.as_bytes(), &ParseConfig::default()) {
        Ok(p) => panic!("expected a body error for {body}, got {p:?}"),
        Err(e) => e,
    }
}

/// The single failure message for a one-point body.
fn point_err(point: &str) -> String {
    let p = parse(point);
    assert_eq!(p.good_count(), 0, "{point}");
    assert_eq!(p.failures().len(), 1, "{point}");
    p.failures()[0].error.to_string()
}

fn echo(f: &PutFailure) -> String {
    serde_json::to_string(&f.datapoint).unwrap()
}

#[test]
fn single_object_and_array() {
    let p = parse(
        r#"{"metric":"sys.cpu.nice","timestamp":1346846400,"value":18,"tags":{"host":"web01"}}"#,
    );
    let pts: Vec<_> = p.points().collect();
    assert_eq!(pts.len(), 1);
    assert_eq!(pts[0].metric, "sys.cpu.nice");
    assert_eq!((pts[0].timestamp, pts[0].millis), (1346846400, false));
    assert_eq!(pts[0].value, Value::Int(18));
    assert_eq!(pts[0].tags.as_slice(), &[("host", "web01")]);

    let p = parse(
        r#" [ {"metric":"a","timestamp":1346846400000,"value":"12.5","tags":{"h":"x","dc":"y"}},
              {"metric":"b","timestamp":"1346846400","value":-3,"tags":{"h":"z"}},
              {"metric":"c","timestamp":1365465600.9,"value":1.5e3,"tags":{"h":"z"}} ] "#,
    );
    let pts: Vec<_> = p.points().collect();
    assert_eq!(p.total(), 3);
    assert_eq!(pts.len(), 3);
    assert_eq!(
        (pts[0].timestamp, pts[0].millis, pts[0].value),
        (1346846400000, true, Value::Float(12.5))
    );
    assert_eq!(pts[0].tags.as_slice(), &[("h", "x"), ("dc", "y")]);
    assert_eq!(
        (pts[1].metric, pts[1].timestamp, pts[1].value),
        ("b", 1346846400, Value::Int(-3))
    );
    assert_eq!(
        (pts[2].timestamp, pts[2].value),
        (1365465600, Value::Float(1500.0))
    );
}

#[test]
fn spec_example_details() {
    let p = parse(
        r#"[{"metric":"sys.cpu.nice","timestamp":1346846400,"value":18,"tags":{"host":"web01"}},{"metric":"sys.cpu.nice","timestamp":1346846400,"value":"x","tags":{"host":"web02"}}]"#,
    );
    assert_eq!(p.good_count(), 1);
    assert_eq!(p.failures()[0].index, 1);
    let r = PutResponse::build(ReplyMode::Details, p.good_count() as u64, p.failures(), &[]);
    assert_eq!(r.status, 400);
    assert_eq!(
        std::str::from_utf8(&r.body).unwrap(),
        r#"{"success":1,"failed":1,"errors":[{"datapoint":{"metric":"sys.cpu.nice","timestamp":1346846400,"value":"x","tags":{"host":"web02"}},"error":"Unable to parse value to a number"}]}"#
    );
}

#[test]
fn per_point_validation_messages() {
    const TAGS: &str = r#""tags":{"h":"x"}"#;
    let cases = [
        (format!(r#"{{"timestamp":1,"value":1,{TAGS}}}"#), "Metric name was empty"),
        (format!(r#"{{"metric":null,"timestamp":1,"value":1,{TAGS}}}"#), "Metric name was empty"),
        (format!(r#"{{"metric":"","timestamp":1,"value":1,{TAGS}}}"#), "Metric name was empty"),
        (format!(r#"{{"metric":"m","value":1,{TAGS}}}"#), "Invalid timestamp"),
        (format!(r#"{{"metric":"m","timestamp":null,"value":1,{TAGS}}}"#), "Invalid timestamp"),
        (format!(r#"{{"metric":"m","timestamp":0,"value":1,{TAGS}}}"#), "Invalid timestamp"),
        (format!(r#"{{"metric":"m","timestamp":-1,"value":1,{TAGS}}}"#), "Invalid timestamp"),
        (format!(r#"{{"metric":"m","timestamp":"abc","value":1,{TAGS}}}"#), "Invalid timestamp"),
        (format!(r#"{{"metric":"m","timestamp":NaN,"value":1,{TAGS}}}"#), "Invalid timestamp"),
        (format!(r#"{{"metric":"m","timestamp":1e300,"value":1,{TAGS}}}"#), "Invalid timestamp"),
        (format!(r#"{{"metric":"m","timestamp":1,{TAGS}}}"#), "Empty value"),
        (format!(r#"{{"metric":"m","timestamp":1,"value":null,{TAGS}}}"#), "Empty value"),
        (format!(r#"{{"metric":"m","timestamp":1,"value":"",{TAGS}}}"#), "Empty value"),
        (r#"{"metric":"m","timestamp":1,"value":1}"#.to_owned(), "Missing tags"),
        (r#"{"metric":"m","timestamp":1,"value":1,"tags":null}"#.to_owned(), "Missing tags"),
        (r#"{"metric":"m","timestamp":1,"value":1,"tags":{}}"#.to_owned(), "Missing tags"),
        (format!(r#"{{"metric":"m","timestamp":1,"value":"abc",{TAGS}}}"#), "Unable to parse value to a number"),
        (format!(r#"{{"metric":"m","timestamp":1,"value":true,{TAGS}}}"#), "Unable to parse value to a number"),
        (format!(r#"{{"metric":"m","timestamp":1,"value":"1.2.3",{TAGS}}}"#), "Unable to parse value to a number"),
        (format!(r#"{{"metric":"m","timestamp":1,"value":NaN,{TAGS}}}"#), "Unable to parse value to a number"),
        (format!(r#"{{"metric":"m","timestamp":1,"value":Infinity,{TAGS}}}"#), "Unable to parse value to a number"),
        (format!(r#"{{"metric":"m","timestamp":1,"value":-Infinity,{TAGS}}}"#), "Unable to parse value to a number"),
        (
            format!(r#"{{"metric":"m","timestamp":1,"value":1e400,{TAGS}}}"#),
            "value is NaN or Infinite: Infinity for metric=m timestamp=1",
        ),
        (
            format!(r#"{{"metric":"m","timestamp":10000000000000,"value":42,{TAGS}}}"#),
            "bad timestamp=10000000000000 when trying to add value=[42]/0 to metric=m, tags={h=x}",
        ),
        (
            format!(r#"{{"metric":"a b","timestamp":1,"value":1,{TAGS}}}"#),
            "Invalid metric name (\"a b\"): illegal character:  ",
        ),
        (
            r#"{"metric":"m","timestamp":1,"value":1,"tags":{"h":"x y"}}"#.to_owned(),
            "Invalid tag value with key [h] (\"x y\"): illegal character:  ",
        ),
        (
            r#"{"metric":"m","timestamp":1,"value":1,"tags":{"h":""}}"#.to_owned(),
            "Invalid tag value with key [h]: empty string",
        ),
        (
            r#"{"metric":"m","timestamp":1,"value":1,"tags":{"h":null}}"#.to_owned(),
            "Invalid tag value with key [h]: null",
        ),
        (
            r#"{"metric":"m","timestamp":1,"value":1,"tags":{"a":"1","b":"2","c":"3","d":"4","e":"5","f":"6","g":"7","h":"8","i":"9"}}"#.to_owned(),
            "Too many tags: 9 maximum allowed: 8, tags: {a=1, b=2, c=3, d=4, e=5, f=6, g=7, h=8, i=9}",
        ),
    ];
    for (body, want) in &cases {
        assert_eq!(point_err(body), *want, "{body}");
    }
    // The first failing check wins: metric before timestamp before value before tags.
    assert_eq!(point_err(r#"{"value":"abc"}"#), "Metric name was empty");
    assert_eq!(
        point_err(r#"{"metric":"m","value":"abc"}"#),
        "Invalid timestamp"
    );
    assert_eq!(point_err(r#"{"metric":"m","timestamp":1}"#), "Empty value");
    assert_eq!(
        point_err(r#"{"metric":"m","timestamp":1,"value":"abc"}"#),
        "Missing tags"
    );
}

#[test]
fn non_finite_tokens_reject_only_their_points() {
    let p = parse(
        r#"[{"metric":"m","timestamp":1,"value":NaN,"tags":{"h":"a"}},
            {"metric":"m","timestamp":2,"value":4,"tags":{"h":"a"}},
            {"metric":"m","timestamp":3,"value":-Infinity,"tags":{"h":"a"}},
            {"metric":"m","timestamp":4,"value":Infinity,"tags":{"h":"a"},"extra":[NaN,{"x":Infinity}]}]"#,
    );
    assert_eq!(p.good_count(), 1);
    assert_eq!(p.points().next().unwrap().timestamp, 2);
    let idx: Vec<_> = p.failures().iter().map(|f| f.index).collect();
    assert_eq!(idx, vec![0, 2, 3]);
    assert_eq!(
        echo(&p.failures()[0]),
        r#"{"metric":"m","timestamp":1,"value":"NaN","tags":{"h":"a"}}"#
    );
    assert_eq!(
        p.failures()[1].datapoint.value.as_deref(),
        Some("-Infinity")
    );
}

#[test]
fn echo_omits_absent_fields() {
    let p = parse(r#"[{"value":"1"},{"metric":"m","tags":{"h":null}},null]"#);
    assert_eq!(echo(&p.failures()[0]), r#"{"timestamp":0,"value":"1"}"#);
    assert_eq!(
        echo(&p.failures()[1]),
        r#"{"metric":"m","timestamp":0,"tags":{"h":null}}"#
    );
    assert_eq!(p.failures()[2].error.to_string(), "Unexpected exception");
    assert_eq!(echo(&p.failures()[2]), r#"{"timestamp":0}"#);
    // Numbers keep their text in the echo.
    let p = parse(r#"{"metric":"a b","timestamp":1,"value":1.50,"tags":{"h":"x"}}"#);
    assert_eq!(p.failures()[0].datapoint.value.as_deref(), Some("1.50"));
}

#[test]
fn jackson_like_field_handling() {
    // Unknown fields (any shape) are ignored, repeated fields replace earlier ones, scalars
    // are read as text for string fields, escapes are decoded.
    let p = parse(
        r#"{"tsuid":"x","metric":"old","metric":"sys.cpu","timestamp":1,"value":"7",
            "tags":{"a":"1","b":"2"},"tags":{"host":"w\u0065b","host":"web2","n":5},
            "nested":{"a":[1,[2,[3]],{"b":null}]}}"#,
    );
    let pt = p.points().next().unwrap();
    assert_eq!(pt.metric, "sys.cpu");
    assert_eq!(pt.value, Value::Int(7));
    assert_eq!(pt.tags.as_slice(), &[("host", "web2"), ("n", "5")]);
    let p = parse(r#"{"metric":"caf\u00e9","timestamp":1,"value":1,"tags":{"h":"x"}}"#);
    assert_eq!(p.points().next().unwrap().metric, "café");
    // A failed point's tags do not leak into the next one.
    let p = parse(
        r#"[{"metric":"m","timestamp":1,"value":"bad","tags":{"x":"1"}},
            {"metric":"m","timestamp":1,"value":1,"tags":{"y":"2"}}]"#,
    );
    assert_eq!(p.points().next().unwrap().tags.as_slice(), &[("y", "2")]);
}

#[test]
fn whole_body_errors() {
    assert_eq!(body_err(""), BodyError::MissingContent);
    assert_eq!(body_err(" \n\t "), BodyError::MissingContent);
    assert_eq!(body_err("metric=x"), BodyError::NotObjectOrArray);
    assert_eq!(body_err("\"x\""), BodyError::NotObjectOrArray);
    assert_eq!(body_err("[]"), BodyError::NoDatapoints);
    assert_eq!(body_err(" [ ] "), BodyError::NoDatapoints);
    for bad in [
        "[{",
        "{\"metric\":}",
        "[1]",
        "[\"x\"]",
        "[{}]]",
        "{} {}",
        r#"{"value":{"a":1}}"#,
        r#"{"metric":["m"]}"#,
        r#"{"timestamp":[1]}"#,
        r#"{"tags":"h=x"}"#,
        r#"{"tags":{"h":{"x":1}}}"#,
        r#"{"metric":'m'}"#,
        "{\"metric\":\"m\",}",
        "[{\"value\":01}]",
    ] {
        assert!(matches!(body_err(bad), BodyError::Malformed(_)), "{bad}");
    }
    assert!(matches!(
        parse_put_body(b"[{\"metric\":\"\xff\"}]", &ParseConfig::default()),
        Err(BodyError::Malformed(_))
    ));
}

#[test]
fn body_error_json() {
    let e = body_err("[{");
    assert_eq!(e.status(), 400);
    let json: serde_json::Value = serde_json::from_slice(&e.to_json()).unwrap();
    assert_eq!(json["error"]["code"], 400);
    assert_eq!(json["error"]["message"], "Unable to parse the given JSON");
    assert!(
        json["error"]["details"]
            .as_str()
            .unwrap()
            .contains("byte offset")
    );
    assert_eq!(
        std::str::from_utf8(&body_err("[]").to_json()).unwrap(),
        r#"{"error":{"code":400,"message":"No datapoints found in content"}}"#
    );
    assert_eq!(
        std::str::from_utf8(&body_err("x").to_json()).unwrap(),
        r#"{"error":{"code":400,"message":"The JSON must start as an object or an array"}}"#
    );
    assert_eq!(
        std::str::from_utf8(&body_err("").to_json()).unwrap(),
        r#"{"error":{"code":400,"message":"Missing request content"}}"#
    );
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

#[test]
fn gzip_bodies() {
    let json = br#"[{"metric":"m","timestamp":1,"value":1,"tags":{"h":"x"}}]"#;
    let z = gzip(json);
    let plain = decode_body(&z, true, 1 << 20).unwrap();
    assert_eq!(&*plain, json);
    assert_eq!(
        parse_put_body(&plain, &ParseConfig::default())
            .unwrap()
            .good_count(),
        1
    );
    // Not gzip: borrowed as is.
    assert!(matches!(
        decode_body(json, false, 1 << 20).unwrap(),
        Cow::Borrowed(_)
    ));
    // Content-Encoding: gzip with no body.
    assert_eq!(&*decode_body(b"", true, 10).unwrap(), b"");
    // Limits apply to the decompressed size.
    let big = gzip(&vec![b' '; 10_000]);
    assert!(big.len() < 1000);
    assert_eq!(
        decode_body(&big, true, 1000),
        Err(BodyError::TooLarge { max: 1000 })
    );
    assert_eq!(decode_body(&big, true, 1000).unwrap_err().status(), 413);
    assert_eq!(
        decode_body(json, false, 10),
        Err(BodyError::TooLarge { max: 10 })
    );
    assert!(matches!(
        decode_body(b"not gzip", true, 1000),
        Err(BodyError::Gzip(_))
    ));
    assert!(matches!(
        decode_body(&z[..z.len() / 2], true, 1000),
        Err(BodyError::Gzip(_))
    ));
}
