//! `/api/query` request parsers (OpenTSDB docs: `api_http/query`): the POST JSON body and the GET
//! query string (`m=`, `tsuid=`), both producing a [`TsQuery`].
//!
//! The JSON parser is as lenient as OpenTSDB's Jackson set-up: unknown keys are ignored, times may
//! be numbers or strings, booleans may be strings (`"true"`) or numbers, and `tags` may be `[]`.
//! Validation of times, aggregators and downsample specs happens in `exec`, in OpenTSDB's order.
//! Strata difference (`docs/compat.md` #9): a malformed filter in `m=` is a 400 naming the problem.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::model::{FilterSpec, SubQuery, TsQuery, tag_to_filter};
use crate::rate::RateOptions;

/// Decodes a URL query string into `(key, value)` pairs, in order. `+` is a space; a bad `%`
/// escape is kept as is; a key without `=` has an empty value.
pub fn parse_query_string(qs: &str) -> Vec<(String, String)> {
    qs.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(p), String::new()),
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn json_error(details: impl Into<String>) -> Error {
    Error::BadRequest {
        message: "Unable to parse the given JSON".to_owned(),
        details: Some(details.into()),
    }
}

/// A JSON boolean as Jackson reads one: `true`, `"true"` (any case) and non-zero numbers are
/// true; `false`, `"false"`, `""`, `"null"`, `0`, `null` and absence are false. Any other
/// string, an object or an array is a 400, as with Jackson, not a silent false.
fn as_bool(v: Option<&Value>, field: &str) -> Result<bool> {
    match v {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::Number(n)) => Ok(n.as_f64().is_some_and(|f| f != 0.0)),
        Some(Value::String(s)) => match s.trim() {
            t if t.eq_ignore_ascii_case("true") => Ok(true),
            t if t.eq_ignore_ascii_case("false") || t.is_empty() || t == "null" => Ok(false),
            _ => Err(json_error(format!(
                "'{field}' must be a boolean: only \"true\" or \"false\" are recognized, not \
                 {s:?}"
            ))),
        },
        Some(_) => Err(json_error(format!("'{field}' must be a boolean"))),
    }
}

/// A JSON string or number as text; `null`/absent as `None`.
fn as_text(v: Option<&Value>, field: &str) -> Result<Option<String>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(Value::Bool(b)) => Ok(Some(b.to_string())),
        Some(_) => Err(json_error(format!(
            "'{field}' must be a string or a number"
        ))),
    }
}

/// A JSON integer, leniently: numbers or strings holding one; integral values beyond the 64-bit
/// range saturate (a Go client sends `counterMax` 2^64-1 as `1.8446744073709552e19`).
fn as_long(v: Option<&Value>, field: &str) -> Result<Option<i64>> {
    let bad = || json_error(format!("'{field}' must be an integer"));
    let from_f64 = |f: f64| {
        if f.is_finite() && f.fract() == 0.0 {
            // `as` saturates at the i64 bounds.
            Ok(Some(f as i64))
        } else {
            Err(bad())
        }
    };
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Ok(Some(i)),
            (None, Some(f)) => from_f64(f),
            (None, None) => Err(bad()),
        },
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => match s.trim().parse::<i64>() {
            Ok(i) => Ok(Some(i)),
            Err(_) => s
                .trim()
                .parse::<f64>()
                .map_err(|_| bad())
                .and_then(from_f64),
        },
        Some(_) => Err(bad()),
    }
}

/// Whether any of `names` is set (true) in `obj`.
fn flag(obj: &Map<String, Value>, names: &[&str]) -> Result<bool> {
    let mut set = false;
    for n in names {
        set |= as_bool(obj.get(*n), n)?;
    }
    Ok(set)
}

/// Parses a POST body. Empty → `Missing request content`; not JSON or not an object →
/// `Unable to parse the given JSON` with the reason in `details`.
pub fn parse_json(body: &[u8]) -> Result<TsQuery> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::bad_request("Missing request content"));
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| json_error(e.to_string()))?;
    let Value::Object(obj) = value else {
        return Err(json_error("the query must be a JSON object"));
    };
    let mut q = TsQuery {
        start: as_text(obj.get("start"), "start")?.unwrap_or_default(),
        end: as_text(obj.get("end"), "end")?,
        timezone: as_text(obj.get("timezone"), "timezone")?,
        ms_resolution: flag(&obj, &["msResolution", "ms"])?,
        show_tsuids: flag(&obj, &["showTSUIDs"])?,
        show_query: flag(&obj, &["showQuery"])?,
        show_summary: flag(&obj, &["showSummary"])?,
        show_stats: flag(&obj, &["showStats"])?,
        no_annotations: flag(&obj, &["noAnnotations"])?,
        global_annotations: flag(&obj, &["globalAnnotations"])?,
        delete: flag(&obj, &["delete"])?,
        use_calendar: flag(&obj, &["useCalendar"])?,
        arrays: false,
        queries: Vec::new(),
    };
    match obj.get("queries") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for sub in list {
                let Value::Object(sub) = sub else {
                    return Err(json_error("each query must be a JSON object"));
                };
                q.queries.push(parse_json_sub(sub)?);
            }
        }
        Some(_) => return Err(json_error("'queries' must be an array")),
    }
    Ok(q)
}

fn parse_json_sub(obj: &Map<String, Value>) -> Result<SubQuery> {
    let mut sub = SubQuery {
        aggregator: as_text(obj.get("aggregator"), "aggregator")?.unwrap_or_default(),
        metric: as_text(obj.get("metric"), "metric")?.unwrap_or_default(),
        downsample: as_text(obj.get("downsample"), "downsample")?.filter(|d| !d.is_empty()),
        rate: as_bool(obj.get("rate"), "rate")?,
        explicit_tags: as_bool(obj.get("explicitTags"), "explicitTags")?,
        ..SubQuery::default()
    };
    match obj.get("tsuids") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for t in list {
                match t {
                    Value::String(s) => sub.tsuids.push(s.clone()),
                    _ => return Err(json_error("'tsuids' must hold strings")),
                }
            }
        }
        Some(_) => return Err(json_error("'tsuids' must be an array")),
    }
    if let Some(Value::Object(ro)) = obj.get("rateOptions") {
        let defaults = RateOptions::default();
        sub.rate_options = RateOptions {
            counter: as_bool(ro.get("counter"), "counter")?,
            counter_max: as_long(ro.get("counterMax"), "counterMax")?
                .unwrap_or(defaults.counter_max),
            reset_value: as_long(ro.get("resetValue"), "resetValue")?
                .unwrap_or(defaults.reset_value),
            drop_resets: as_bool(ro.get("dropResets"), "dropResets")?,
        };
    }
    match obj.get("filters") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for f in list {
                let Value::Object(f) = f else {
                    return Err(json_error("each filter must be a JSON object"));
                };
                let field = |name: &str| -> Result<String> {
                    as_text(f.get(name), name)?
                        .ok_or_else(|| json_error(format!("Missing the filter's '{name}'")))
                };
                sub.filters.push(FilterSpec {
                    kind: field("type")?,
                    tagk: field("tagk")?,
                    filter: field("filter")?,
                    group_by: flag(f, &["groupBy", "group_by"])?,
                });
            }
        }
        Some(_) => return Err(json_error("'filters' must be an array")),
    }
    match obj.get("tags") {
        Some(Value::Object(tags)) => {
            for (k, v) in tags {
                let v = as_text(Some(v), "tags")?.unwrap_or_default();
                sub.filters.push(tag_to_filter(k, &v, true));
                sub.tags.insert(k.clone(), v);
            }
        }
        None | Some(Value::Null) | Some(Value::Array(_)) => {}
        Some(_) => return Err(json_error("'tags' must be an object")),
    }
    match obj.get("percentiles") {
        Some(Value::Array(list)) => {
            for p in list {
                match p.as_f64() {
                    Some(p) => sub.percentiles.push(p),
                    None => return Err(json_error("'percentiles' must hold numbers")),
                }
            }
        }
        None | Some(Value::Null) => {}
        Some(_) => return Err(json_error("'percentiles' must be an array")),
    }
    Ok(sub)
}

/// Parses the GET form from decoded query-string pairs. Presence flags (`ms`, `show_tsuids`, ...)
/// are true whatever their value.
pub fn parse_get(params: &[(String, String)]) -> Result<TsQuery> {
    let get = |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let has = |name: &str| params.iter().any(|(k, _)| k == name);
    let Some(start) = get("start") else {
        return Err(Error::bad_request("Missing parameter <code>start</code>"));
    };
    let mut q = TsQuery {
        start: start.clone(),
        end: get("end").cloned(),
        ms_resolution: has("ms"),
        show_tsuids: has("show_tsuids"),
        show_query: has("show_query"),
        show_summary: has("show_summary"),
        show_stats: has("show_stats"),
        no_annotations: has("no_annotations"),
        global_annotations: has("global_annotations"),
        ..TsQuery::default()
    };
    for (k, v) in params {
        match k.as_str() {
            "m" => q.queries.push(parse_m(v)?),
            "tsuid" | "tsuids" => q.queries.push(parse_tsuid_param(v)?),
            _ => {}
        }
    }
    if q.queries.is_empty() {
        return Err(Error::bad_request("Missing sub queries"));
    }
    Ok(q)
}

/// Splits an `m=`/`tsuid=` value into its `:` parts (2 to 5).
fn split_parts<'a>(name: &str, spec: &'a str) -> Result<Vec<&'a str>> {
    let parts: Vec<&str> = spec.split(':').collect();
    if parts.len() < 2 || parts.len() > 5 {
        let how = if parts.len() < 2 {
            "not enough"
        } else {
            "too many"
        };
        return Err(Error::bad_request(format!(
            "Invalid parameter {name}={spec} ({how} :-separated parts)"
        )));
    }
    Ok(parts)
}

/// Applies the middle parts (rate, downsample, explicit_tags, percentiles) to a sub-query.
fn apply_middle(sub: &mut SubQuery, middle: &[&str]) -> Result<()> {
    for part in middle {
        let lower = part.to_ascii_lowercase();
        if lower.starts_with("rate") {
            sub.rate = true;
            sub.rate_options = parse_rate_options(part)?;
        } else if part.as_bytes().first().is_some_and(u8::is_ascii_digit) {
            sub.downsample = Some((*part).to_owned());
        } else if lower == "explicit_tags" {
            sub.explicit_tags = true;
        } else if let Some(list) = lower.strip_prefix("percentiles") {
            let list = list.trim_start_matches('[').trim_end_matches(']');
            for p in list.split(',').filter(|p| !p.trim().is_empty()) {
                let v = p
                    .trim()
                    .parse::<f64>()
                    .map_err(|_| Error::bad_request(format!("Invalid percentile value: {p}")))?;
                sub.percentiles.push(v);
            }
        }
    }
    Ok(())
}

/// Parses `rate`, `rate{counter[,max[,reset]]}` or `rate{dropcounter,...}`, as OpenTSDB.
pub(crate) fn parse_rate_options(spec: &str) -> Result<RateOptions> {
    if spec.len() == 4 {
        return Ok(RateOptions::default());
    }
    if spec.len() < 6 || !spec.is_char_boundary(5) || !spec.is_char_boundary(spec.len() - 1) {
        return Err(Error::bad_request(format!(
            "Invalid rate options specification: {spec}"
        )));
    }
    let inner = &spec[5..spec.len() - 1];
    let parts: Vec<&str> = inner.split(',').collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err(Error::bad_request(format!(
            "Incorrect number of values in rate options specification, must be \
             counter[,counter max value,reset value], recieved: {} parts",
            parts.len()
        )));
    }
    let counter_max = match parts.get(1) {
        Some(p) if !p.is_empty() => p.parse().map_err(|_| {
            Error::bad_request(format!(
                "Max value of counter was not a number, received '{p}'"
            ))
        })?,
        _ => i64::MAX,
    };
    let reset_value = match parts.get(2) {
        Some(p) if !p.is_empty() => p.parse().map_err(|_| {
            Error::bad_request(format!(
                "Reset value of counter was not a number, received '{p}'"
            ))
        })?,
        _ => 0,
    };
    Ok(RateOptions {
        counter: parts[0].ends_with("counter"),
        counter_max,
        reset_value,
        drop_resets: parts[0] == "dropcounter",
    })
}

/// Parses one `m=` value: `<agg>[:<ds>][:rate..][:explicit_tags]:<metric>[{..}[{..}]]`.
pub fn parse_m(spec: &str) -> Result<SubQuery> {
    let parts = split_parts("m", spec)?;
    let mut sub = SubQuery {
        aggregator: parts[0].to_owned(),
        ..SubQuery::default()
    };
    apply_middle(&mut sub, &parts[1..parts.len() - 1])?;
    let last = parts[parts.len() - 1];
    let (metric, filters, tags) = parse_metric_filters(last)?;
    sub.metric = metric;
    sub.filters = filters;
    sub.tags = tags;
    Ok(sub)
}

/// Parses one `tsuid=` value: `<agg>[:<ds>][:rate..]:<hex>[,<hex>...]`.
pub fn parse_tsuid_param(spec: &str) -> Result<SubQuery> {
    let parts = split_parts("tsuid", spec)?;
    let mut sub = SubQuery {
        aggregator: parts[0].to_owned(),
        ..SubQuery::default()
    };
    apply_middle(&mut sub, &parts[1..parts.len() - 1])?;
    sub.tsuids = parts[parts.len() - 1]
        .split(',')
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect();
    Ok(sub)
}

/// Splits `metric{group-by filters}{other filters}` (OpenTSDB docs: `user_guide/query/filters`):
/// tags syntax in both braces, the first grouping and the second not.
fn parse_metric_filters(text: &str) -> Result<(String, Vec<FilterSpec>, BTreeMap<String, String>)> {
    let Some(open) = text.find('{') else {
        return Ok((text.to_owned(), Vec::new(), BTreeMap::new()));
    };
    let metric = text[..open].to_owned();
    let mut rest = &text[open..];
    let mut filters = Vec::new();
    let mut tags = BTreeMap::new();
    for group_by in [true, false] {
        let Some(body) = rest.strip_prefix('{') else {
            break;
        };
        let Some(close) = body.find('}') else {
            return Err(Error::bad_request(format!(
                "Missing '}}' at the end of: {text}"
            )));
        };
        for pair in body[..close].split(',').filter(|p| !p.is_empty()) {
            let Some((k, v)) = pair.split_once('=') else {
                return Err(Error::bad_request(format!(
                    "Invalid filter '{pair}' in {text}: expected <tagk>=<filter>"
                )));
            };
            if k.is_empty() || v.is_empty() {
                return Err(Error::bad_request(format!(
                    "Invalid filter '{pair}' in {text}: empty tag key or filter"
                )));
            }
            filters.push(tag_to_filter(k, v, group_by));
            if group_by {
                tags.insert(k.to_owned(), v.to_owned());
            }
        }
        rest = &body[close + 1..];
    }
    if !rest.is_empty() {
        return Err(Error::bad_request(format!(
            "Unexpected text after the filters in: {text}"
        )));
    }
    Ok((metric, filters, tags))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_string_decoding() {
        let p = parse_query_string("start=1h-ago&m=sum%3Asys.cpu%7Bhost%3D*%7D&ms&x=a+b");
        assert_eq!(
            p,
            vec![
                ("start".into(), "1h-ago".into()),
                ("m".into(), "sum:sys.cpu{host=*}".into()),
                ("ms".into(), String::new()),
                ("x".into(), "a b".into()),
            ]
        );
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }

    #[test]
    fn m_with_everything() {
        let s = parse_m("avg:1h-avg-nan:rate{counter,,1000}:if.octets{host=*}{dc=lga}").unwrap();
        assert_eq!(s.aggregator, "avg");
        assert_eq!(s.downsample.as_deref(), Some("1h-avg-nan"));
        assert!(s.rate);
        assert_eq!(
            s.rate_options,
            RateOptions {
                counter: true,
                counter_max: i64::MAX,
                reset_value: 1000,
                drop_resets: false
            }
        );
        assert_eq!(s.metric, "if.octets");
        assert_eq!(
            s.filters,
            vec![
                tag_to_filter("host", "*", true),
                tag_to_filter("dc", "lga", false)
            ]
        );
        assert_eq!(s.filters[0].kind, "wildcard");
        assert_eq!(s.filters[1].kind, "literal_or");
        let s = parse_m("sum:explicit_tags:sys.cpu{host=a|b,dc=regexp(l.*)}").unwrap();
        assert!(s.explicit_tags);
        assert_eq!(s.filters[0].kind, "literal_or");
        assert_eq!(s.filters[0].filter, "a|b");
        assert_eq!(s.filters[1].kind, "regexp");
        assert_eq!(s.filters[1].filter, "l.*");
        assert!(s.filters[1].group_by);
        let s = parse_m("sum:m{}{host=web*}").unwrap();
        assert_eq!(s.filters[0].kind, "iwildcard");
        assert!(!s.filters[0].group_by);
    }

    #[test]
    fn m_errors() {
        let msg = |s: &str| parse_m(s).unwrap_err().to_string();
        assert_eq!(
            msg("sum"),
            "Invalid parameter m=sum (not enough :-separated parts)"
        );
        assert_eq!(
            msg("a:b:c:d:e:f"),
            "Invalid parameter m=a:b:c:d:e:f (too many :-separated parts)"
        );
        assert!(msg("sum:m{host").starts_with("Missing '}'"));
        assert!(msg("sum:m{host}").starts_with("Invalid filter 'host'"));
        assert_eq!(
            msg("sum:rate{counter,x}:m"),
            "Max value of counter was not a number, received 'x'"
        );
        assert_eq!(
            msg("sum:rate{counter,1,y}:m"),
            "Reset value of counter was not a number, received 'y'"
        );
        assert_eq!(
            msg("sum:rate{a,b,c,d}:m"),
            "Incorrect number of values in rate options specification, must be \
             counter[,counter max value,reset value], recieved: 4 parts"
        );
        assert_eq!(
            msg("sum:rate{:m"),
            "Invalid rate options specification: rate{"
        );
    }

    #[test]
    fn rate_drop_counter() {
        let o = parse_rate_options("rate{dropcounter}").unwrap();
        assert!(o.counter && o.drop_resets);
    }

    #[test]
    fn json_is_lenient() {
        let q = parse_json(
            br#"{"start":1356998400,"end":"1356998460","msResolution":"true","showQuery":1,
                 "queries":[{"aggregator":"sum","metric":"m","rate":"true","refId":"A",
                 "rateOptions":{"counter":true,"counterMax":"100","resetValue":5.0},
                 "filters":[{"type":"wildcard","tagk":"host","filter":"*","groupBy":true}],
                 "tags":[]}]}"#,
        )
        .unwrap();
        assert_eq!(q.start, "1356998400");
        assert_eq!(q.end.as_deref(), Some("1356998460"));
        assert!(q.ms_resolution && q.show_query && !q.show_tsuids);
        let s = &q.queries[0];
        assert!(s.rate);
        assert_eq!(s.rate_options.counter_max, 100);
        assert_eq!(s.rate_options.reset_value, 5);
        let big = Value::from(1.8446744073709552e19);
        assert_eq!(as_long(Some(&big), "counterMax").unwrap(), Some(i64::MAX));
        assert!(as_long(Some(&Value::from(1.5)), "x").is_err());
        assert!(as_long(Some(&Value::from("x")), "x").is_err());
        assert_eq!(s.filters.len(), 1);
        let q = parse_json(br#"{"start":"1h-ago","queries":[{"aggregator":"sum","metric":"m","tags":{"host":"a|b"}}]}"#).unwrap();
        assert_eq!(
            q.queries[0].filters,
            vec![tag_to_filter("host", "a|b", true)]
        );
    }

    /// Jackson reads a boolean from `true`/`false` in any JSON form, but a string that is
    /// neither is an error; it was silently false.
    #[test]
    fn a_boolean_given_another_string_is_a_400() {
        let sub = |field: &str, value: &str| {
            parse_json(
                format!(
                    r#"{{"start":1,"queries":[{{"aggregator":"sum","metric":"m","{field}":{value}}}]}}"#
                )
                .as_bytes(),
            )
        };
        for (value, want) in [
            ("true", true),
            ("\"TRUE\"", true),
            (" 1", true),
            ("false", false),
            ("\"false\"", false),
            ("\"\"", false),
            ("null", false),
            ("0", false),
        ] {
            let q = sub("rate", value).unwrap();
            assert_eq!(q.queries[0].rate, want, "{value}");
        }
        for value in ["\"yes\"", "\"1\"", "[]", "{}"] {
            let err = sub("rate", value).unwrap_err();
            assert_eq!(err.status(), 400);
            assert_eq!(err.to_string(), "Unable to parse the given JSON", "{value}");
            let details = err.details().unwrap_or_default();
            assert!(details.contains("'rate' must be a boolean"), "{details}");
        }
        assert!(sub("explicitTags", "\"no\"").is_err());
        assert!(parse_json(br#"{"start":1,"showQuery":"yes","queries":[]}"#).is_err());
        let counter = r#"{"start":1,"queries":[{"aggregator":"sum","metric":"m","rate":true,"rateOptions":{"counter":"y"}}]}"#;
        assert!(parse_json(counter.as_bytes()).is_err());
    }

    #[test]
    fn json_errors() {
        assert_eq!(
            parse_json(b"  ").unwrap_err().to_string(),
            "Missing request content"
        );
        assert_eq!(
            parse_json(b"{nope").unwrap_err().to_string(),
            "Unable to parse the given JSON"
        );
        assert_eq!(
            parse_json(b"[1]").unwrap_err().to_string(),
            "Unable to parse the given JSON"
        );
    }

    #[test]
    fn get_requires_start_and_queries() {
        let p = parse_query_string("m=sum:m");
        assert_eq!(
            parse_get(&p).unwrap_err().to_string(),
            "Missing parameter <code>start</code>"
        );
        let p = parse_query_string("start=1h-ago");
        assert_eq!(
            parse_get(&p).unwrap_err().to_string(),
            "Missing sub queries"
        );
        let p = parse_query_string("start=1h-ago&tsuid=sum:000001000001000001,000001000001000002");
        assert_eq!(parse_get(&p).unwrap().queries[0].tsuids.len(), 2);
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(input in "\\PC{0,80}") {
            let _ = parse_query_string(&input);
            let _ = parse_m(&input);
            let _ = parse_tsuid_param(&input);
            let _ = parse_rate_options(&input);
            let _ = parse_json(input.as_bytes());
            let _ = parse_get(&parse_query_string(&input));
        }

        #[test]
        fn m_like_inputs_never_panic(
            input in "[a-z]{0,4}(:[0-9a-z{}=,|*()-]{0,12}){0,5}",
        ) {
            let _ = parse_m(&input);
        }
    }
}
