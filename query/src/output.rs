//! OpenTSDB's `/api/query` JSON (OpenTSDB docs: `api_http/query`, `api_http/query (response)`) and
//! error body (OpenTSDB docs: `api_http/index (errors)`).
//!
//! Written by hand so fields keep OpenTSDB's order and `dps` stays in ascending time order.
//! Integers are JSON integers, doubles keep a fraction (`3.0`), NaN is the string `"NaN"` (or
//! `null` with fill policy `null`); JSON has no infinity, so ±∞ are the strings
//! `"Infinity"`/`"-Infinity"`. Strata difference (`docs/compat.md` #5): without `msResolution` only
//! the last point within each second is written, so keys are never duplicated.

use std::borrow::Cow;
use std::io::Write as _;

use serde_json::json;
use strata_tsdb::Annotation;

use crate::error::Error;
use crate::exec::ResultGroup;
use crate::model::{SubQuery, TsQuery};
use crate::num::Point;
use strata_tsdb::Value;

fn push_str(out: &mut Vec<u8>, s: &str) {
    // What serde_json escapes: quotes, backslashes and control characters. Names rarely have
    // any, so most strings are copied as they are.
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Serializing a &str cannot fail.
        out.extend_from_slice(
            serde_json::to_string(s)
                .unwrap_or_else(|_| "\"\"".to_owned())
                .as_bytes(),
        );
    }
}

/// A JSON object of string pairs, as serde_json writes a map.
fn push_str_map<'a>(out: &mut Vec<u8>, pairs: impl IntoIterator<Item = (&'a String, &'a String)>) {
    out.push(b'{');
    for (n, (k, v)) in pairs.into_iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        push_str(out, k);
        out.push(b':');
        push_str(out, v);
    }
    out.push(b'}');
}

/// A JSON array of strings.
fn push_str_list(out: &mut Vec<u8>, list: &[String]) {
    out.push(b'[');
    for (n, s) in list.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        push_str(out, s);
    }
    out.push(b']');
}

fn push_value(out: &mut Vec<u8>, v: Value, nan_as_null: bool) {
    match v {
        Value::Int(i) => out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes()),
        Value::Float(f) if f.is_nan() => {
            out.extend_from_slice(if nan_as_null { b"null" } else { b"\"NaN\"" });
        }
        Value::Float(f) if f.is_infinite() => out.extend_from_slice(if f > 0.0 {
            b"\"Infinity\""
        } else {
            b"\"-Infinity\""
        }),
        Value::Float(f) => push_double(out, f),
    }
}

/// Appends a finite double as Java's `Double.toString` writes it (see [`java_double`]). The
/// plain-decimal range is written by `zmij`, whose shortest round-trip digits and `d.d` form are
/// Java's there.
fn push_double(out: &mut Vec<u8>, v: f64) {
    if v == 0.0 || (1e-3..1e7).contains(&v.abs()) {
        out.extend_from_slice(zmij::Buffer::new().format_finite(v).as_bytes());
    } else {
        out.extend_from_slice(java_double(v).as_bytes());
    }
}

/// Appends one `dps` entry: `"<key>":<value>`, or `[<key>,<value>]` with `arrays`.
fn push_point(out: &mut Vec<u8>, key: i64, v: Value, arrays: bool, nan_as_null: bool) {
    let mut ts = itoa::Buffer::new();
    let key = ts.format(key).as_bytes();
    // The longest value (a double in E form) is under 32 bytes.
    out.reserve(key.len() + 36);
    out.push(if arrays { b'[' } else { b'"' });
    out.extend_from_slice(key);
    if arrays {
        out.push(b',');
    } else {
        out.extend_from_slice(b"\":");
    }
    push_value(out, v, nan_as_null);
    if arrays {
        out.push(b']');
    }
}

/// A finite double as Java's `Double.toString` writes it (shortest round-trip digits): plain
/// decimal with at least one fraction digit for 1e-3 <= |v| < 1e7, else `d.dddE<exp>`.
fn java_double(v: f64) -> String {
    let abs = v.abs();
    if v == 0.0 || (1e-3..1e7).contains(&abs) {
        let s = v.to_string();
        if s.contains('.') { s } else { s + ".0" }
    } else {
        let s = format!("{v:e}");
        match s.split_once('e') {
            Some((mantissa, exp)) if mantissa.contains('.') => format!("{mantissa}E{exp}"),
            Some((mantissa, exp)) => format!("{mantissa}.0E{exp}"),
            None => s,
        }
    }
}

/// The points as written: ms keys, or second keys keeping the last point of each second.
pub(crate) fn keyed_points(points: &[Point], ms: bool) -> Cow<'_, [Point]> {
    if ms {
        return Cow::Borrowed(points);
    }
    let mut out: Vec<Point> = Vec::with_capacity(points.len());
    for (t, v) in points {
        let s = t.div_euclid(1000);
        match out.last_mut() {
            Some(last) if last.0 == s => last.1 = *v,
            _ => out.push((s, *v)),
        }
    }
    Cow::Owned(out)
}

/// The sub-query echo for `showQuery`.
fn query_echo(sub: &SubQuery) -> serde_json::Value {
    let filters: Vec<serde_json::Value> = sub
        .filters
        .iter()
        .map(
            |f| json!({"tagk": f.tagk, "filter": f.filter, "group_by": f.group_by, "type": f.kind}),
        )
        .collect();
    json!({
        "aggregator": sub.aggregator,
        "metric": sub.metric,
        "tsuids": sub.tsuids,
        "downsample": sub.downsample,
        "rate": sub.rate,
        "filters": filters,
        "index": sub.index,
        "tags": sub.tags,
        "rateOptions": {
            "counter": sub.rate_options.counter,
            "counterMax": sub.rate_options.counter_max,
            "resetValue": sub.rate_options.reset_value,
            "dropResets": sub.rate_options.drop_resets,
        },
        "explicitTags": sub.explicit_tags,
        "percentiles": sub.percentiles,
    })
}

/// OpenTSDB's JSON for an annotation (`custom` only when set).
pub fn annotation_json(a: &Annotation) -> serde_json::Value {
    let mut o = json!({
        "tsuid": a.tsuid.clone().unwrap_or_default(),
        "description": a.description,
        "notes": a.notes,
        "endTime": a.end_time,
        "startTime": a.start_time,
    });
    if !a.custom.is_empty() {
        o["custom"] = json!(a.custom);
    }
    o
}

fn push_annotations(out: &mut Vec<u8>, list: &[Annotation]) {
    let list: Vec<serde_json::Value> = list.iter().map(annotation_json).collect();
    out.extend_from_slice(serde_json::Value::Array(list).to_string().as_bytes());
}

/// Writes the response array for `results` of query `q`.
pub fn render(q: &TsQuery, results: &[ResultGroup]) -> Vec<u8> {
    let mut out = Vec::from(*b"[");
    for (n, r) in results.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"metric\":");
        push_str(&mut out, &r.metric);
        out.extend_from_slice(b",\"tags\":");
        push_str_map(&mut out, &r.tags);
        out.extend_from_slice(b",\"aggregateTags\":");
        push_str_list(&mut out, &r.aggregate_tags);
        if q.show_query
            && let Some(sub) = q.queries.get(r.query_index)
        {
            let mut sub = sub.clone();
            sub.index = r.query_index;
            out.extend_from_slice(b",\"query\":");
            out.extend_from_slice(query_echo(&sub).to_string().as_bytes());
        }
        if q.show_tsuids {
            out.extend_from_slice(b",\"tsuids\":");
            push_str_list(&mut out, &r.tsuids);
        }
        if !r.annotations.is_empty() {
            out.extend_from_slice(b",\"annotations\":");
            push_annotations(&mut out, &r.annotations);
        }
        if !r.global_annotations.is_empty() {
            out.extend_from_slice(b",\"globalAnnotations\":");
            push_annotations(&mut out, &r.global_annotations);
        }
        out.extend_from_slice(b",\"dps\":");
        let points = keyed_points(&r.points, q.ms_resolution);
        out.push(if q.arrays { b'[' } else { b'{' });
        out.reserve(points.len() * 24);
        for (i, (t, v)) in points.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_point(&mut out, *t, *v, q.arrays, r.nan_as_null);
        }
        out.push(if q.arrays { b']' } else { b'}' });
        if q.show_stats {
            let _ = write!(
                out,
                ",\"stats\":{{\"rawDataPoints\":{},\"emittedDataPoints\":{},\"seriesCount\":{}}}",
                r.raw_points,
                points.len(),
                r.series
            );
        }
        out.push(b'}');
    }
    if q.show_summary {
        if !results.is_empty() {
            out.push(b',');
        }
        let raw: usize = results.iter().map(|r| r.raw_points).sum();
        let emitted: usize = results.iter().map(|r| r.points.len()).sum();
        let series: usize = results.iter().map(|r| r.series).sum();
        let _ = write!(
            out,
            "{{\"statsSummary\":{{\"rawDataPoints\":{raw},\"emittedDataPoints\":{emitted},\
             \"seriesCount\":{series},\"queries\":{},\"results\":{}}}}}",
            q.queries.len(),
            results.len()
        );
    }
    out.push(b']');
    out
}

/// OpenTSDB's error body `{"error":{"code":..,"message":..[,"details":..]}}`.
pub fn error_body(e: &Error) -> Vec<u8> {
    let mut error = serde_json::Map::new();
    error.insert("code".to_owned(), json!(e.status()));
    error.insert("message".to_owned(), json!(e.to_string()));
    if let Some(d) = e.details() {
        error.insert("details".to_owned(), json!(d));
    }
    // `code`, `details`, `message` sort alphabetically in serde_json's map; order is not significant.
    json!({ "error": error }).to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Strings, tag maps and lists are written exactly as serde_json writes them, quotes,
        /// backslashes, control characters and non-ASCII included.
        #[test]
        fn strings_are_written_as_serde_json_writes_them(
            pairs in proptest::collection::btree_map("[a-z\"\\\\\u{0}-\u{1f}\u{7f}é/ ]{0,6}", ".{0,6}", 0..4),
        ) {
            let mut out = Vec::new();
            push_str_map(&mut out, &pairs);
            prop_assert_eq!(&out, &serde_json::to_vec(&pairs).unwrap());
            let list: Vec<String> = pairs.keys().cloned().collect();
            out.clear();
            push_str_list(&mut out, &list);
            prop_assert_eq!(&out, &serde_json::to_vec(&list).unwrap());
        }
    }

    #[test]
    fn values_and_seconds() {
        let pts = vec![
            (1_000, Value::Int(1)),
            (1_500, Value::Int(2)),
            (2_000, Value::Float(3.0)),
            (3_000, Value::Float(f64::NAN)),
        ];
        let k = keyed_points(&pts, false);
        assert_eq!(k.len(), 3);
        assert_eq!(&k[..2], &[(1, Value::Int(2)), (2, Value::Float(3.0))]);
        assert!(matches!(k[2], (3, Value::Float(f)) if f.is_nan()));
        let mut s = Vec::new();
        push_value(&mut s, Value::Float(3.0), false);
        s.push(b' ');
        push_value(&mut s, Value::Float(f64::NAN), false);
        s.push(b' ');
        push_value(&mut s, Value::Float(f64::NAN), true);
        s.push(b' ');
        push_value(&mut s, Value::Int(-7), true);
        s.push(b' ');
        push_point(&mut s, 17, Value::Float(f64::INFINITY), false, false);
        s.push(b' ');
        push_point(&mut s, -1, Value::Float(-2.5e-7), true, false);
        assert_eq!(
            String::from_utf8(s).unwrap(),
            "3.0 \"NaN\" null -7 \"17\":\"Infinity\" [-1,-2.5E-7]"
        );
    }

    #[test]
    fn doubles_in_java_form() {
        let cases = [
            (3.0, "3.0"),
            (301.5, "301.5"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (0.001, "0.001"),
            (0.0001, "1.0E-4"),
            (1234567.0, "1234567.0"),
            (1e7, "1.0E7"),
            (2.559546108e10, "2.559546108E10"),
            (-1.5e-5, "-1.5E-5"),
            (0.1 + 0.2, "0.30000000000000004"),
        ];
        for (v, want) in cases {
            assert_eq!(java_double(v), want, "{v}");
        }
    }

    proptest::proptest! {
        /// The zmij fast path writes exactly what the `Display`-based conversion writes.
        #[test]
        fn push_double_is_java_double(bits in proptest::num::u64::ANY, small in -1e8f64..1e8) {
            for v in [f64::from_bits(bits), small, (small * 100.0).round() / 100.0] {
                if v.is_finite() {
                    let mut s = Vec::new();
                    push_double(&mut s, v);
                    proptest::prop_assert_eq!(s, java_double(v).into_bytes());
                }
            }
        }
    }

    #[test]
    fn error_shape() {
        let body = error_body(&Error::bad_request("Missing queries"));
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v,
            json!({"error": {"code": 400, "message": "Missing queries"}})
        );
    }
}
