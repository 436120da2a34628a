//! OpenTSDB's `/api/query` JSON (§c.3, §e.9) and error body (§c.1).
//!
//! Written by hand so fields keep OpenTSDB's order and `dps` stays in ascending time order.
//! Integers are JSON integers, doubles keep a fraction (`3.0`), NaN is the string `"NaN"` (or `null`
//! with fill policy `null`); JSON has no infinity, so ±∞ are the strings `"Infinity"`/`"-Infinity"`.
//! Strata difference (exception #5): without `msResolution` only the last point within each second
//! is written, so keys are never duplicated.

use std::borrow::Cow;
use std::fmt::Write as _;

use serde_json::json;
use strata_tsdb::Annotation;

use crate::error::Error;
use crate::exec::ResultGroup;
use crate::model::{SubQuery, TsQuery};
use crate::num::{Num, Point};

fn push_str(out: &mut String, s: &str) {
    // What serde_json escapes: quotes, backslashes and control characters. Names rarely have
    // any, so most strings are copied as they are.
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        // Serializing a &str cannot fail.
        out.push_str(&serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned()));
    }
}

/// A JSON object of string pairs, as serde_json writes a map.
fn push_str_map<'a>(out: &mut String, pairs: impl IntoIterator<Item = (&'a String, &'a String)>) {
    out.push('{');
    for (n, (k, v)) in pairs.into_iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        push_str(out, k);
        out.push(':');
        push_str(out, v);
    }
    out.push('}');
}

/// A JSON array of strings.
fn push_str_list(out: &mut String, list: &[String]) {
    out.push('[');
    for (n, s) in list.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        push_str(out, s);
    }
    out.push(']');
}

fn push_value(out: &mut String, v: Num, nan_as_null: bool) {
    match v {
        Num::Int(i) => out.push_str(itoa::Buffer::new().format(i)),
        Num::Float(f) if f.is_nan() => out.push_str(if nan_as_null { "null" } else { "\"NaN\"" }),
        Num::Float(f) if f.is_infinite() => out.push_str(if f > 0.0 {
            "\"Infinity\""
        } else {
            "\"-Infinity\""
        }),
        Num::Float(f) => push_double(out, f),
    }
}

/// Appends a finite double as Java's `Double.toString` writes it (see [`java_double`]). The
/// plain-decimal range is written by `ryu`, whose shortest round-trip digits and `d.d` form are
/// Java's there.
fn push_double(out: &mut String, v: f64) {
    if v == 0.0 || (1e-3..1e7).contains(&v.abs()) {
        out.push_str(ryu::Buffer::new().format_finite(v));
    } else {
        out.push_str(&java_double(v));
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

fn push_annotations(out: &mut String, list: &[Annotation]) {
    let list: Vec<serde_json::Value> = list.iter().map(annotation_json).collect();
    out.push_str(&serde_json::Value::Array(list).to_string());
}

/// Writes the response array for `results` of query `q`.
pub fn render(q: &TsQuery, results: &[ResultGroup]) -> Vec<u8> {
    let mut out = String::from("[");
    for (n, r) in results.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        out.push_str("{\"metric\":");
        push_str(&mut out, &r.metric);
        out.push_str(",\"tags\":");
        push_str_map(&mut out, &r.tags);
        out.push_str(",\"aggregateTags\":");
        push_str_list(&mut out, &r.aggregate_tags);
        if q.show_query
            && let Some(sub) = q.queries.get(r.query_index)
        {
            let mut sub = sub.clone();
            sub.index = r.query_index;
            out.push_str(",\"query\":");
            out.push_str(&query_echo(&sub).to_string());
        }
        if q.show_tsuids {
            out.push_str(",\"tsuids\":");
            push_str_list(&mut out, &r.tsuids);
        }
        if !r.annotations.is_empty() {
            out.push_str(",\"annotations\":");
            push_annotations(&mut out, &r.annotations);
        }
        if !r.global_annotations.is_empty() {
            out.push_str(",\"globalAnnotations\":");
            push_annotations(&mut out, &r.global_annotations);
        }
        out.push_str(",\"dps\":");
        let points = keyed_points(&r.points, q.ms_resolution);
        out.push(if q.arrays { '[' } else { '{' });
        out.reserve(points.len() * 24);
        let mut ts = itoa::Buffer::new();
        for (i, (t, v)) in points.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            if q.arrays {
                out.push('[');
                out.push_str(ts.format(*t));
                out.push(',');
                push_value(&mut out, *v, r.nan_as_null);
                out.push(']');
            } else {
                out.push('"');
                out.push_str(ts.format(*t));
                out.push_str("\":");
                push_value(&mut out, *v, r.nan_as_null);
            }
        }
        out.push(if q.arrays { ']' } else { '}' });
        if q.show_stats {
            let _ = write!(
                out,
                ",\"stats\":{{\"rawDataPoints\":{},\"emittedDataPoints\":{},\"seriesCount\":{}}}",
                r.raw_points,
                points.len(),
                r.tsuids.len()
            );
        }
        out.push('}');
    }
    if q.show_summary {
        if !results.is_empty() {
            out.push(',');
        }
        let raw: usize = results.iter().map(|r| r.raw_points).sum();
        let emitted: usize = results.iter().map(|r| r.points.len()).sum();
        let series: usize = results.iter().map(|r| r.tsuids.len()).sum();
        let _ = write!(
            out,
            "{{\"statsSummary\":{{\"rawDataPoints\":{raw},\"emittedDataPoints\":{emitted},\
             \"seriesCount\":{series},\"queries\":{},\"results\":{}}}}}",
            q.queries.len(),
            results.len()
        );
    }
    out.push(']');
    out.into_bytes()
}

/// OpenTSDB's error body `{"error":{"code":..,"message":..[,"details":..]}}`.
pub fn error_body(e: &Error) -> Vec<u8> {
    let mut error = serde_json::Map::new();
    error.insert("code".to_owned(), json!(e.status()));
    error.insert("message".to_owned(), json!(e.to_string()));
    if let Error::BadRequest {
        details: Some(d), ..
    } = e
    {
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
            let mut out = String::new();
            push_str_map(&mut out, &pairs);
            prop_assert_eq!(&out, &serde_json::to_string(&pairs).unwrap());
            let list: Vec<String> = pairs.keys().cloned().collect();
            out.clear();
            push_str_list(&mut out, &list);
            prop_assert_eq!(&out, &serde_json::to_string(&list).unwrap());
        }
    }

    #[test]
    fn values_and_seconds() {
        let pts = vec![
            (1_000, Num::Int(1)),
            (1_500, Num::Int(2)),
            (2_000, Num::Float(3.0)),
            (3_000, Num::Float(f64::NAN)),
        ];
        let k = keyed_points(&pts, false);
        assert_eq!(k.len(), 3);
        assert_eq!(&k[..2], &[(1, Num::Int(2)), (2, Num::Float(3.0))]);
        assert!(matches!(k[2], (3, Num::Float(f)) if f.is_nan()));
        let mut s = String::new();
        push_value(&mut s, Num::Float(3.0), false);
        s.push(' ');
        push_value(&mut s, Num::Float(f64::NAN), false);
        s.push(' ');
        push_value(&mut s, Num::Float(f64::NAN), true);
        s.push(' ');
        push_value(&mut s, Num::Int(-7), true);
        assert_eq!(s, "3.0 \"NaN\" null -7");
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
        /// The ryu fast path writes exactly what the `Display`-based conversion writes.
        #[test]
        fn push_double_is_java_double(bits in proptest::num::u64::ANY, small in -1e8f64..1e8) {
            for v in [f64::from_bits(bits), small, (small * 100.0).round() / 100.0] {
                if v.is_finite() {
                    let mut s = String::new();
                    push_double(&mut s, v);
                    proptest::prop_assert_eq!(s, java_double(v));
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
