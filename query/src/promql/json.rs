//! Prometheus' JSON: the `{"status":"success","data":…}` envelope and its error form, with
//! values as strings (Go's shortest form, exponent outside [1e-6, 1e21)) and times as seconds
//! with up to three decimals.

use std::io::Write;

use super::{PromSeries, PromValue};

/// Appends a JSON string.
pub(crate) fn string(out: &mut Vec<u8>, s: &str) {
    // Writing to a Vec cannot fail, and a &str always serializes.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Appends a time in ms as seconds, as Prometheus writes it: `1435781451.780`, `1435781451`.
fn time(out: &mut Vec<u8>, ms: i64) {
    let (sign, ms) = if ms < 0 { ("-", -ms) } else { ("", ms) };
    let _ = write!(out, "{sign}{}", ms / 1000);
    let frac = ms % 1000;
    if frac != 0 {
        let _ = write!(out, ".{frac:03}");
    }
}

/// A value as Prometheus formats it (`strconv.FormatFloat(v, 'f' or 'e', -1, 64)`).
pub(crate) fn format_value(v: f64) -> String {
    if v.is_nan() {
        return "NaN".to_owned();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    let a = v.abs();
    if a != 0.0 && !(1e-6..1e21).contains(&a) {
        // Rust's `1.5e-7` to Go's `1.5e-07`.
        let s = format!("{v:e}");
        if let Some((mantissa, exp)) = s.split_once('e') {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            return format!("{mantissa}e{sign}{digits:0>2}");
        }
        return s;
    }
    format!("{v}")
}

/// Appends `[time, "value"]`.
fn point(out: &mut Vec<u8>, ms: i64, v: f64) {
    out.push(b'[');
    time(out, ms);
    out.extend_from_slice(b",\"");
    out.extend_from_slice(format_value(v).as_bytes());
    out.extend_from_slice(b"\"]");
}

/// Appends a label set as an object.
pub(crate) fn labels(out: &mut Vec<u8>, labels: &[(String, String)]) {
    out.push(b'{');
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(out, k);
        out.push(b':');
        string(out, v);
    }
    out.push(b'}');
}

fn series(out: &mut Vec<u8>, s: &PromSeries) {
    out.extend_from_slice(b"{\"metric\":");
    labels(out, &s.labels);
    out.extend_from_slice(b",\"values\":[");
    for (i, (t, v)) in s.points.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        point(out, *t, *v);
    }
    out.extend_from_slice(b"]}");
}

/// The success envelope of a query result.
pub(crate) fn query_result(value: &PromValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"status\":\"success\",\"data\":{\"resultType\":");
    match value {
        PromValue::Scalar { time_ms, value } => {
            out.extend_from_slice(b"\"scalar\",\"result\":");
            point(&mut out, *time_ms, *value);
        }
        PromValue::Vector(samples) => {
            out.extend_from_slice(b"\"vector\",\"result\":[");
            for (i, s) in samples.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(b"{\"metric\":");
                labels(&mut out, &s.labels);
                out.extend_from_slice(b",\"value\":");
                point(&mut out, s.time_ms, s.value);
                out.push(b'}');
            }
            out.push(b']');
        }
        PromValue::Matrix(all) => {
            out.extend_from_slice(b"\"matrix\",\"result\":[");
            for (i, s) in all.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                series(&mut out, s);
            }
            out.push(b']');
        }
    }
    out.extend_from_slice(b"}}");
    out
}

/// The success envelope around `data`, already JSON.
pub(crate) fn success(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 32);
    out.extend_from_slice(b"{\"status\":\"success\",\"data\":");
    out.extend_from_slice(data);
    out.push(b'}');
    out
}

/// The error envelope.
pub(crate) fn error(error_type: &str, message: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 64);
    out.extend_from_slice(b"{\"status\":\"error\",\"errorType\":");
    string(&mut out, error_type);
    out.extend_from_slice(b",\"error\":");
    string(&mut out, message);
    out.push(b'}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::promql::PromSample;

    #[test]
    fn values_format_like_go() {
        assert_eq!(format_value(1.0), "1");
        assert_eq!(format_value(0.1), "0.1");
        assert_eq!(format_value(-2.5), "-2.5");
        assert_eq!(format_value(0.0), "0");
        assert_eq!(format_value(1e20), "100000000000000000000");
        assert_eq!(format_value(1e21), "1e+21");
        assert_eq!(format_value(1.5e-7), "1.5e-07");
        assert_eq!(format_value(0.000001), "0.000001");
        assert_eq!(format_value(1.23e300), "1.23e+300");
        assert_eq!(format_value(0.26666666666666666), "0.26666666666666666");
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
    }

    #[test]
    fn envelopes() {
        let v = PromValue::Vector(vec![PromSample {
            labels: vec![
                ("__name__".into(), "up".into()),
                ("job".into(), "a\"b".into()),
            ],
            time_ms: 1_435_781_451_780,
            value: 1.0,
        }]);
        assert_eq!(
            String::from_utf8(query_result(&v)).unwrap(),
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"up","job":"a\"b"},"value":[1435781451.780,"1"]}]}}"#
        );
        let s = PromValue::Scalar {
            time_ms: 4000,
            value: 2.0,
        };
        assert_eq!(
            String::from_utf8(query_result(&s)).unwrap(),
            r#"{"status":"success","data":{"resultType":"scalar","result":[4,"2"]}}"#
        );
        let m = PromValue::Matrix(vec![PromSeries {
            labels: vec![],
            points: vec![(1000, 1.5), (2005, 2.0)],
        }]);
        assert_eq!(
            String::from_utf8(query_result(&m)).unwrap(),
            r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1.5"],[2.005,"2"]]}]}}"#
        );
        assert_eq!(
            String::from_utf8(error("bad_data", "x")).unwrap(),
            r#"{"status":"error","errorType":"bad_data","error":"x"}"#
        );
        let mut t = Vec::new();
        time(&mut t, -1500);
        assert_eq!(t, b"-1.500");
    }
}
