//! `/api/query` end to end: points written with `Tsdb::write`, queried through `handle_query`,
//! compared with hand-computed OpenTSDB JSON.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value as Json, json};
use strata_query::{QueryLimits, QueryMethod};

use crate::answer;
use strata_tsdb::{PointRef, Tsdb, TsdbOptions, Value};

/// 2013-01-01T00:00:00Z in seconds.
const T: i64 = 1_356_998_400;
const NOW_MS: i64 = (T + 86_400) * 1000;

/// A tsdb in a unique temporary directory, removed on drop.
struct TempTsdb {
    tsdb: Option<Tsdb>,
    dir: PathBuf,
}

impl TempTsdb {
    fn new() -> TempTsdb {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "strata-query-it-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let tsdb = Tsdb::open(&dir, TsdbOptions::default()).expect("open tsdb");
        TempTsdb {
            tsdb: Some(tsdb),
            dir,
        }
    }

    fn tsdb(&self) -> &Tsdb {
        self.tsdb.as_ref().expect("open")
    }

    /// Writes `(ts_seconds_or_ms, value)` points of one series.
    fn put(&self, metric: &str, tags: &[(&str, &str)], points: &[(i64, Value)]) {
        let refs: Vec<PointRef<'_>> = points
            .iter()
            .map(|(ts, v)| PointRef {
                metric,
                tags,
                timestamp: *ts,
                value: *v,
            })
            .collect();
        for r in self.tsdb().write(&refs) {
            r.expect("write");
        }
    }

    fn get(&self, qs: &str) -> (u16, String) {
        self.run(false, qs, b"", &QueryLimits::default())
    }

    fn post(&self, qs: &str, body: &Json) -> (u16, String) {
        self.run(
            true,
            qs,
            body.to_string().as_bytes(),
            &QueryLimits::default(),
        )
    }

    fn run(&self, post: bool, qs: &str, body: &[u8], limits: &QueryLimits) -> (u16, String) {
        let (status, body) = answer(
            self.tsdb(),
            if post {
                QueryMethod::Post
            } else {
                QueryMethod::Get
            },
            qs,
            body,
            NOW_MS,
            limits,
        );
        (status, String::from_utf8(body).expect("utf-8"))
    }
}

impl Drop for TempTsdb {
    fn drop(&mut self) {
        drop(self.tsdb.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ints(points: &[(i64, i64)]) -> Vec<(i64, Value)> {
    points.iter().map(|(t, v)| (*t, Value::Int(*v))).collect()
}

fn parse(body: &str) -> Json {
    serde_json::from_str(body).expect("valid JSON")
}

/// Two unaligned series: A 1,2,3 at T+30/60/90 and B 300,299,298 at T+45/75/105.
fn unaligned() -> TempTsdb {
    let db = TempTsdb::new();
    let a = [(T + 30, 1), (T + 60, 2), (T + 90, 3)];
    let b = [(T + 45, 300), (T + 75, 299), (T + 105, 298)];
    db.put(
        "sys.cpu.user",
        &[("host", "web01"), ("dc", "lga")],
        &ints(&a),
    );
    db.put(
        "sys.cpu.user",
        &[("host", "web02"), ("dc", "lga")],
        &ints(&b),
    );
    db
}

fn range() -> String {
    format!("start={T}&end={}", T + 120)
}

#[test]
fn raw_none_query_returns_each_series() {
    let db = unaligned();
    let (status, body) = db.get(&format!("{}&m=none:sys.cpu.user", range()));
    assert_eq!(status, 200, "{body}");
    // Exact text: field order, integers as integers, series ordered by TSUID.
    assert_eq!(
        body,
        format!(
            "[{{\"metric\":\"sys.cpu.user\",\"tags\":{{\"dc\":\"lga\",\"host\":\"web01\"}},\
             \"aggregateTags\":[],\"dps\":{{\"{}\":1,\"{}\":2,\"{}\":3}}}},\
             {{\"metric\":\"sys.cpu.user\",\"tags\":{{\"dc\":\"lga\",\"host\":\"web02\"}},\
             \"aggregateTags\":[],\"dps\":{{\"{}\":300,\"{}\":299,\"{}\":298}}}}]",
            T + 30,
            T + 60,
            T + 90,
            T + 45,
            T + 75,
            T + 105
        )
    );
}

#[test]
fn sum_of_unaligned_series_interpolates_linearly() {
    let db = unaligned();
    let (status, body) = db.get(&format!("{}&m=sum:sys.cpu.user", range()));
    assert_eq!(status, 200, "{body}");
    // T+30: only A (B not started); T+45..T+90: one real + one LERP value, 301.5 exactly
    // (`docs/compat.md` #4: no truncation to 301); T+105: only B (A ended).
    let expected = json!([{
        "metric": "sys.cpu.user",
        "tags": {"dc": "lga"},
        "aggregateTags": ["host"],
        "dps": {
            (T + 30).to_string(): 1,
            (T + 45).to_string(): 301.5,
            (T + 60).to_string(): 301.5,
            (T + 75).to_string(): 301.5,
            (T + 90).to_string(): 301.5,
            (T + 105).to_string(): 298,
        }
    }]);
    assert_eq!(parse(&body), expected);
    assert!(body.contains(&format!("\"{}\":1,", T + 30)), "{body}");
}

#[test]
fn downsample_with_fill_policies() {
    let db = TempTsdb::new();
    let pts = ints(&[(T + 10, 1), (T + 20, 3), (T + 130, 5)]);
    db.put("m", &[("host", "a")], &pts);
    let qs = |fill: &str| format!("start={T}&end={}&m=sum:1m-avg-{fill}:m", T + 180);
    // Buckets at T, T+60, T+120, T+180 (the bucket starting at `end` is included).
    let (status, body) = db.get(&qs("zero"));
    assert_eq!(status, 200, "{body}");
    assert!(
        body.ends_with(&format!(
            "\"dps\":{{\"{T}\":2,\"{}\":0,\"{}\":5,\"{}\":0}}}}]",
            T + 60,
            T + 120,
            T + 180
        )),
        "{body}"
    );
    let (_, body) = db.get(&qs("null"));
    assert!(body.contains(&format!("\"{}\":null,", T + 60)), "{body}");
    let (_, body) = db.get(&qs("nan"));
    assert!(body.contains(&format!("\"{}\":\"NaN\",", T + 60)), "{body}");
    // Without fill, empty buckets are absent.
    let (_, body) = db.get(&qs("none"));
    assert_eq!(
        parse(&body)[0]["dps"],
        json!({T.to_string(): 2, (T + 120).to_string(): 5})
    );
}

#[test]
fn counter_rate_with_rollover() {
    let db = TempTsdb::new();
    db.put(
        "net.bytes",
        &[("host", "a")],
        &ints(&[(T + 30, 45), (T + 60, 75), (T + 90, 5)]),
    );
    let (status, body) = db.get(&format!("{}&m=sum:rate{{counter,100}}:net.bytes", range()));
    assert_eq!(status, 200, "{body}");
    // (75-45)/30 = 1.0; rollover (100-75+5)/30 = 1.0; no output at the first point.
    assert!(
        body.ends_with(&format!(
            "\"dps\":{{\"{}\":1.0,\"{}\":1.0}}}}]",
            T + 60,
            T + 90
        )),
        "{body}"
    );
    // The same through JSON rateOptions.
    let (_, post) = db.post(
        "",
        &json!({"start": T, "end": T + 120, "queries": [{"aggregator": "sum", "metric": "net.bytes",
            "rate": true, "rateOptions": {"counter": true, "counterMax": 100}}]}),
    );
    assert_eq!(post, body);
}

fn grouped() -> TempTsdb {
    let db = TempTsdb::new();
    db.put(
        "m",
        &[("host", "web01"), ("dc", "lga")],
        &ints(&[(T + 30, 1), (T + 60, 2)]),
    );
    db.put(
        "m",
        &[("host", "web02"), ("dc", "lga")],
        &ints(&[(T + 30, 10), (T + 60, 20)]),
    );
    db.put(
        "m",
        &[("host", "web01"), ("dc", "sjc")],
        &ints(&[(T + 30, 100), (T + 60, 200)]),
    );
    db
}

#[test]
fn group_by_wildcard() {
    let db = grouped();
    let (status, body) = db.get(&format!("{}&m=sum:m{{host=*}}", range()));
    assert_eq!(status, 200, "{body}");
    let expected = json!([
        {"metric": "m", "tags": {"host": "web01"}, "aggregateTags": ["dc"],
         "dps": {(T + 30).to_string(): 101, (T + 60).to_string(): 202}},
        {"metric": "m", "tags": {"host": "web02", "dc": "lga"}, "aggregateTags": [],
         "dps": {(T + 30).to_string(): 10, (T + 60).to_string(): 20}},
    ]);
    assert_eq!(parse(&body), expected);
    // Literal-or grouping and a non-grouping second-braces filter.
    let (_, body) = db.get(&format!(
        "{}&m=sum:m{{host=web01|web02}}{{dc=lga}}",
        range()
    ));
    let v = parse(&body);
    assert_eq!(v.as_array().map(Vec::len), Some(2), "{body}");
    assert_eq!(v[0]["dps"][(T + 30).to_string()], json!(1));
    assert_eq!(v[1]["dps"][(T + 30).to_string()], json!(10));
}

#[test]
fn get_and_post_forms_give_identical_output() {
    let db = grouped();
    let (s1, get) = db.get(&format!(
        "{}&m=sum:1m-avg:m{{host=*}}{{dc=literal_or(lga)}}&show_tsuids",
        range()
    ));
    let (s2, post) = db.post(
        "",
        &json!({"start": T.to_string(), "end": T + 120, "showTSUIDs": true, "queries": [{
        "aggregator": "sum", "metric": "m", "downsample": "1m-avg",
        "filters": [
            {"type": "wildcard", "tagk": "host", "filter": "*", "groupBy": true},
            {"type": "literal_or", "tagk": "dc", "filter": "lga", "groupBy": false}
        ]}]}),
    );
    assert_eq!((s1, s2), (200, 200));
    assert_eq!(get, post);
    let v = parse(&get);
    assert_eq!(v.as_array().map(Vec::len), Some(2));
    assert_eq!(v[0]["tsuids"].as_array().map(Vec::len), Some(1));
    // Legacy `tags` map groups too.
    let (_, tags) = db.post(
        "",
        &json!({"start": T, "end": T + 120, "showTSUIDs": "true", "queries": [{
            "aggregator": "sum", "metric": "m", "downsample": "1m-avg",
            "tags": {"host": "*"}, "filters": [
                {"type": "literal_or", "tagk": "dc", "filter": "lga", "groupBy": false}]}]}),
    );
    assert_eq!(tags, get);
}

#[test]
fn arrays_ms_resolution_and_last_point_per_second() {
    let db = TempTsdb::new();
    let base = T * 1000;
    db.put(
        "m",
        &[("host", "a")],
        &[
            (base + 30_100, Value::Int(1)),
            (base + 30_600, Value::Float(2.5)),
            (base + 31_000, Value::Int(3)),
        ],
    );
    let (_, body) = db.get(&format!("{}&m=none:m", range()));
    // Exception #5: one key per second, the last point of the second.
    assert!(
        body.ends_with(&format!(
            "\"dps\":{{\"{}\":2.5,\"{}\":3}}}}]",
            T + 30,
            T + 31
        )),
        "{body}"
    );
    // Each point keeps its type (`docs/compat.md` #14; OpenTSDB's `runMixedSingleTS` types the
    // integer before the double as a double).
    let (_, body) = db.get(&format!("{}&m=none:m&ms", range()));
    assert!(
        body.ends_with(&format!(
            "\"dps\":{{\"{}\":1,\"{}\":2.5,\"{}\":3}}}}]",
            base + 30_100,
            base + 30_600,
            base + 31_000
        )),
        "{body}"
    );
    let (_, body) = db.post(
        "arrays=true",
        &json!({"start": T, "end": T + 120, "queries": [{"aggregator": "none", "metric": "m"}]}),
    );
    assert!(
        body.ends_with(&format!("\"dps\":[[{},2.5],[{},3]]}}]", T + 30, T + 31)),
        "{body}"
    );
}

#[test]
fn only_points_in_range_and_explicit_tags() {
    let db = grouped();
    db.put("m", &[("host", "web03")], &ints(&[(T + 30, 7)]));
    let (_, body) = db.get(&format!(
        "start={}&end={}&m=sum:m{{host=*}}",
        T + 45,
        T + 120
    ));
    let v = parse(&body);
    assert_eq!(v[0]["dps"], json!({(T + 60).to_string(): 202}));
    // web03 has no point in [start, end] but one in the scanned hour: an empty group.
    assert_eq!(v[2]["tags"], json!({"host": "web03"}));
    assert_eq!(v[2]["dps"], json!({}));
    let (_, body) = db.get(&format!("{}&m=sum:explicit_tags:m{{host=*}}", range()));
    let v = parse(&body);
    assert_eq!(v.as_array().map(Vec::len), Some(1), "{body}");
    assert_eq!(v[0]["tags"], json!({"host": "web03"}));
}

#[test]
fn show_query_echoes_index() {
    let db = grouped();
    let (_, body) = db.post(
        "",
        &json!({"start": T, "end": T + 120, "showQuery": true, "showSummary": true, "queries": [
            {"aggregator": "sum", "metric": "m"}, {"aggregator": "max", "metric": "m"}]}),
    );
    let v = parse(&body);
    assert_eq!(v[0]["query"]["index"], json!(0));
    assert_eq!(v[1]["query"]["index"], json!(1));
    assert_eq!(v[1]["query"]["aggregator"], json!("max"));
    assert!(v[2]["statsSummary"].is_object(), "{body}");
}

fn error_of(status_body: (u16, String)) -> (u16, String) {
    let (status, body) = status_body;
    let v = parse(&body);
    assert_eq!(v["error"]["code"], json!(status), "{body}");
    let message = v["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (status, message)
}

#[test]
fn error_cases() {
    let db = grouped();
    let get = |qs: &str| error_of(db.get(qs));
    let r = range();
    let bad = |m: &str| (400, m.to_owned());
    assert_eq!(
        get(&format!("{r}&m=foo:m")),
        bad("No such aggregation function: foo")
    );
    assert_eq!(
        get("start=12x4&m=sum:m"),
        bad("Invalid time: 12x4. Invalid character 'x' in 12x4")
    );
    assert_eq!(
        get(&format!("start={T}&end={T}&m=sum:m")),
        bad(&format!(
            "End time [{0}000] must be greater than the start time [{0}000]",
            T
        ))
    );
    assert_eq!(get("m=sum:m"), bad("Missing parameter <code>start</code>"));
    assert_eq!(get(&r), bad("Missing sub queries"));
    assert_eq!(
        get(&format!("{r}&m=sum:nope")),
        bad("No such name for 'metrics': 'nope'")
    );
    assert_eq!(
        get(&format!("{r}&m=sum:m{{nokey=*}}")),
        bad("No such name for 'tagk': 'nokey'")
    );
    assert_eq!(
        get(&format!("{r}&m=sum:m{{host=web09}}")),
        bad("No such name for 'tagv': 'web09'")
    );
    // Exception #9: malformed filters via GET are 400 naming the problem.
    assert_eq!(
        get(&format!("{r}&m=sum:m{{host=foo(bar)}}")),
        bad("Could not find a tag value filter of the type: foo")
    );
    let (status, msg) = get(&format!("{r}&m=sum:m{{host=regexp(a[)}}"));
    assert_eq!(status, 400);
    assert!(msg.contains("regexp"), "{msg}");
    let (status, msg) = get(&format!("{r}&m=sum:m{{host}}"));
    assert_eq!(status, 400);
    assert!(msg.contains("'host'"), "{msg}");
    let (status, msg) = get(&format!("{r}&m=sum:1m-foo:m"));
    assert_eq!(status, 400);
    assert_eq!(msg, "No such downsampling function: foo");

    let post = |body: &str| error_of(db.run(true, "", body.as_bytes(), &QueryLimits::default()));
    assert_eq!(post(""), bad("Missing request content"));
    assert_eq!(post("{"), bad("Unable to parse the given JSON"));
    assert_eq!(
        post(&format!(
            "{{\"start\":{T},\"queries\":[{{\"aggregator\":\"sum\"}}]}}"
        )),
        bad("Missing the metric or tsuids, provide at least one")
    );
    assert_eq!(
        post(&format!(
            "{{\"start\":{T},\"queries\":[{{\"metric\":\"m\"}}]}}"
        )),
        bad("Missing the aggregation function")
    );
    assert_eq!(post(&format!("{{\"start\":{T}}}")), bad("Missing queries"));
    assert_eq!(
        post("{\"queries\":[{\"aggregator\":\"sum\",\"metric\":\"m\"}]}"),
        bad("Missing start time")
    );
    assert_eq!(
        post(&format!(
            "{{\"start\":{T},\"timezone\":\"Mars/Base\",\"queries\":[{{\"aggregator\":\"sum\",\"metric\":\"m\"}}]}}"
        )),
        bad("The timezone specification could not be found")
    );
}

#[test]
fn limits_are_413_and_delete_needs_permission() {
    let db = grouped();
    let qs = format!("{}&m=sum:m", range());
    let limits = QueryLimits {
        max_series: 2,
        ..QueryLimits::default()
    };
    let (status, msg) = error_of(db.run(false, &qs, b"", &limits));
    assert_eq!(status, 413);
    assert!(msg.contains("limit of 2"), "{msg}");
    let limits = QueryLimits {
        max_data_points: 5,
        ..QueryLimits::default()
    };
    let (status, msg) = error_of(db.run(false, &qs, b"", &limits));
    assert_eq!(status, 413);
    assert!(
        msg.starts_with("Sorry, you have attempted to fetch more than our limit of 5"),
        "{msg}"
    );
    let body = format!(
        "{{\"start\":{T},\"end\":{},\"delete\":true,\"queries\":[{{\"aggregator\":\"sum\",\"metric\":\"m\"}}]}}",
        T + 120
    );
    let (status, msg) = error_of(db.run(true, "", body.as_bytes(), &QueryLimits::default()));
    assert_eq!((status, msg.as_str()), (400, "Bad request"));
    let allow = QueryLimits {
        allow_delete: true,
        ..QueryLimits::default()
    };
    let (status, deleted) = db.run(true, "", body.as_bytes(), &allow);
    assert_eq!(status, 200);
    assert_eq!(parse(&deleted)[0]["dps"][(T + 30).to_string()], json!(111));
    let (status, after) = db.get(&qs);
    assert_eq!((status, after.as_str()), (200, "[]"));
    // The DELETE verb with the query-string form.
    let db = grouped();
    let (status, body) = answer(db.tsdb(), QueryMethod::Delete, &qs, b"", NOW_MS, &allow);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let (status, body) = answer(
        db.tsdb(),
        QueryMethod::Delete,
        &qs,
        b"",
        NOW_MS,
        &QueryLimits::default(),
    );
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));
    assert_eq!(db.get(&qs).1, "[]");
}

#[test]
fn tsuid_queries() {
    let db = grouped();
    let (_, body) = db.get(&format!("{}&m=none:m&show_tsuids", range()));
    let none = parse(&body);
    let a = none[0]["tsuids"][0].as_str().expect("tsuid").to_owned();
    let b = none[1]["tsuids"][0].as_str().expect("tsuid").to_owned();
    let (status, body) = db.get(&format!("{}&tsuid=sum:{a},{b}", range()));
    assert_eq!(status, 200, "{body}");
    let v = parse(&body);
    assert_eq!(v.as_array().map(Vec::len), Some(1), "{body}");
    for t in [T + 30, T + 60] {
        let key = t.to_string();
        let want =
            none[0]["dps"][&key].as_i64().unwrap_or(0) + none[1]["dps"][&key].as_i64().unwrap_or(0);
        assert_eq!(v[0]["dps"][&key], json!(want), "{body}");
    }
    // POST form.
    let (_, post) = db.post(
        "",
        &json!({"start": T, "end": T + 120, "queries": [{"aggregator": "sum", "tsuids": [a, b]}]}),
    );
    assert_eq!(post, body);
    // Exception #9: TSUIDs of different metrics are a 400 naming both.
    db.put("other", &[("host", "web01")], &ints(&[(T + 30, 1)]));
    let (_, other) = db.get(&format!("{}&m=none:other&show_tsuids", range()));
    let c = parse(&other)[0]["tsuids"][0]
        .as_str()
        .expect("tsuid")
        .to_owned();
    let (status, msg) = error_of(db.get(&format!("{}&tsuid=sum:{a},{c}", range())));
    assert_eq!(
        (status, msg),
        (
            400,
            format!("One or more TSUIDs did not share the same metric [{a}] [{c}]")
        )
    );
    // A malformed TSUID is a 400.
    let (status, _) = error_of(db.get(&format!("{}&tsuid=sum:zz", range())));
    assert_eq!(status, 400);
}

#[test]
fn grafana_request_bodies() {
    let db = grouped();
    // Path L (browser, deep-cloned target): ms times, no end, unknown keys, `tags: []`.
    let path_l = json!({
        "start": T * 1000, "msResolution": false, "globalAnnotations": true,
        "queries": [{
            "refId": "A", "datasource": {"type": "opentsdb", "uid": "x"}, "hide": false,
            "metric": "m", "aggregator": "sum", "downsampleAggregator": "avg",
            "downsampleFillPolicy": "none", "isCounter": true, "counterMax": "",
            "downsample": "1m-avg", "rate": true,
            "rateOptions": {"counter": true, "dropResets": true},
            "filters": [{"type": "wildcard", "tagk": "host", "filter": "*", "groupBy": true}],
            "tags": []
        }]
    });
    let (status, body) = db.post("", &path_l);
    assert_eq!(status, 200, "{body}");
    let v = parse(&body);
    // web01: lga 1→2 and sjc 100→200 over 30 s buckets at T and T+60: rates 1/60 + 100/60.
    assert_eq!(v.as_array().map(Vec::len), Some(2), "{body}");
    let key = (T + 60).to_string();
    let r = v[0]["dps"][&key].as_f64().unwrap_or(f64::NAN);
    assert!((r - 101.0 / 60.0).abs() < 1e-12, "{body}");
    // Path B (Go plugin): seconds, `arrays=true`, sorted keys.
    let path_b = format!(
        "{{\"end\":{},\"queries\":[{{\"aggregator\":\"sum\",\"downsample\":\"1m-avg-null\",\
         \"filters\":[{{\"filter\":\"*\",\"groupBy\":true,\"tagk\":\"host\",\"type\":\"wildcard\"}}],\
         \"metric\":\"m\"}}],\"start\":{T}}}",
        T + 120
    );
    let (status, body) = db.run(
        true,
        "arrays=true",
        path_b.as_bytes(),
        &QueryLimits::default(),
    );
    assert_eq!(status, 200, "{body}");
    let v = parse(&body);
    assert_eq!(
        v[1]["dps"],
        json!([[T, 10], [T + 60, 20], [T + 120, null]]),
        "{body}"
    );
}

/// A downsampled rate whose start is not on a bucket: the first emitted bucket's rate is taken
/// against the bucket before `start`, as OpenTSDB does over its scan window (OpenTSDB docs:
/// `user_guide/query (order of operations)`).
#[test]
fn downsampled_rate_has_a_value_in_the_first_bucket_after_an_unaligned_start() {
    let db = TempTsdb::new();
    // A counter rising 1 per second, one point every 10 s for 10 minutes.
    let points: Vec<(i64, i64)> = (0..60).map(|i| (T + 10 * i, 10 * i)).collect();
    db.put("net.bytes", &[("host", "web01")], &ints(&points));
    let (status, body) = db.get(&format!(
        "start={}&end={}&m=sum:1m-avg:rate:net.bytes",
        T + 125,
        T + 299
    ));
    assert_eq!(status, 200, "{body}");
    let v = parse(&body);
    // Buckets T+120 (points 120..170, avg 145) and T+180 (180..230, avg 205): (205-145)/60 = 1.
    // T+120 starts before `start`, so T+180 is the first bucket emitted, and it has its rate.
    assert_eq!(
        v[0]["dps"],
        json!({
            (T + 180).to_string(): 1.0,
            (T + 240).to_string(): 1.0,
        }),
        "{body}"
    );
}

/// A sparse series in a downsampled sum is interpolated between its buckets on either side of
/// the range, as OpenTSDB interpolates over its scan window (OpenTSDB docs:
/// `user_guide/query/aggregators (interpolation)`), though none of its own buckets is in `[start,
/// end]`.
#[test]
fn downsampled_sum_interpolates_a_sparse_series_across_the_range_edges() {
    let db = TempTsdb::new();
    let every_minute: Vec<(i64, i64)> = (0..=10).map(|i| (T + 60 * i, 1)).collect();
    db.put("m", &[("host", "a")], &ints(&every_minute));
    db.put("m", &[("host", "b")], &ints(&[(T, 0), (T + 300, 50)]));
    let (status, body) = db.get(&format!("start={}&end={}&m=sum:1m-avg:m", T + 120, T + 240));
    assert_eq!(status, 200, "{body}");
    let v = parse(&body);
    // b is 0 at T and 50 at T+300: 20, 30 and 40 at T+120, T+180 and T+240, plus a's 1.
    assert_eq!(
        v[0]["dps"],
        json!({
            (T + 120).to_string(): 21,
            (T + 180).to_string(): 31,
            (T + 240).to_string(): 41,
        }),
        "{body}"
    );
}

/// A series passed through as it is (`none`) returns each point with the type it was written
/// with (`docs/compat.md` #14; OpenTSDB's `runMixedSingleTS` turns an integer followed by a double
/// into a double).
#[test]
fn none_returns_each_point_with_its_own_type() {
    let db = TempTsdb::new();
    db.put(
        "m",
        &[("host", "a")],
        &[
            (T, Value::Int(1)),
            (T + 10, Value::Float(2.5)),
            (T + 20, Value::Int(3)),
        ],
    );
    let (status, body) = db.get(&format!("start={T}&end={}&m=none:m", T + 60));
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(&format!("\"{T}\":1,\"{}\":2.5,\"{}\":3}}", T + 10, T + 20)),
        "{body}"
    );
}

/// Heavy queries (more than 32 series-hours of work in all, or a delete) are handed to the
/// offload function, light ones run where they are; both answer the same.
#[test]
fn heavy_queries_are_offloaded_light_ones_are_not() {
    use std::cell::Cell;
    use strata_query::{QueryRequest, handle_query};
    let db = grouped();
    let offloaded = Cell::new(0);
    let offload = |work: &mut (dyn FnMut() + Send)| {
        offloaded.set(offloaded.get() + 1);
        work();
    };
    let answer_as = |method: QueryMethod, query_string: &str, limits: &QueryLimits| {
        let before = offloaded.get();
        let request = QueryRequest {
            method,
            query_string,
            accept: None,
            body: b"",
            now_ms: NOW_MS,
        };
        let r = handle_query(db.tsdb(), &request, limits, &offload);
        let inline = answer(db.tsdb(), method, query_string, b"", NOW_MS, limits);
        assert_eq!((r.status, r.body), inline);
        offloaded.get() - before
    };
    let answer = |query_string: &str, limits: &QueryLimits| {
        answer_as(QueryMethod::Get, query_string, limits)
    };
    let all = QueryLimits::default();
    // 3 series over one hour; one series over 10 hours: light.
    assert_eq!(answer(&format!("{}&m=sum:m", range()), &all), 0);
    let ten_hours = format!("start={T}&end={}&m=sum:m{{host=web02}}", T + 36_000);
    assert_eq!(answer(&ten_hours, &all), 0);
    // 3 series over 11 hours (33 series-hours), and two sub-queries of 20: heavy.
    assert_eq!(
        answer(&format!("start={T}&end={}&m=sum:m", T + 39_600), &all),
        1
    );
    let two = format!("start={T}&end={}&m=sum:m&m=max:m", T + 20_000);
    assert_eq!(answer(&two, &all), 1);
    // Newest points are no read: the same 3 series over 11 hours are light for `all`-`last`,
    // heavy for `all`-`first` or with a rate.
    let newest = |ds: &str| format!("start={T}&end={}&m=sum:{ds}:m", T + 39_600);
    assert_eq!(answer(&newest("0all-last"), &all), 0);
    assert_eq!(answer(&newest("0all-first"), &all), 1);
    assert_eq!(answer(&newest("0all-last:rate"), &all), 1);
    // Queries that fail to plan or resolve fail where they are.
    assert_eq!(answer(&format!("{}&m=sum:nosuch", range()), &all), 0);
    assert_eq!(answer("start=bad&m=sum:m", &all), 0);
    // A delete always goes to the offload (and here is refused).
    let delete = format!("{}&m=sum:m", range());
    assert_eq!(answer_as(QueryMethod::Delete, &delete, &all), 1);
}

/// A query's sub-queries decide together whether its reads fill the block cache: 10 metrics of
/// 60 series, each sub-query small, the query as a whole over a quarter of a 1 MiB cache.
#[test]
fn a_large_query_of_small_sub_queries_leaves_the_cache_as_it_is() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path();
    let open = || {
        let mut opts = TsdbOptions::default();
        opts.db.block_cache_bytes = 1 << 20;
        Tsdb::open(path, opts).expect("open tsdb")
    };
    let metrics: Vec<String> = (0..10).map(|m| format!("m{m}")).collect();
    {
        let db = open();
        for m in &metrics {
            for h in 0..60 {
                let host = format!("h{h:02}");
                let tags = [("host", host.as_str())];
                let points: Vec<PointRef<'_>> = (0..360)
                    .map(|i| PointRef {
                        metric: m,
                        tags: &tags,
                        timestamp: (T + i * 10) * 1000,
                        value: Value::Int(i),
                    })
                    .collect();
                for r in db.write(&points) {
                    r.expect("write");
                }
            }
        }
        db.flush().expect("flush");
    }
    let subs =
        |ms: &[String]| -> String { ms.iter().map(|m| format!("&m=sum:{m}")).collect::<String>() };
    let misses_of_second_run = |qs: &str| {
        let db = open();
        let run = || {
            let (status, _) = answer(
                &db,
                QueryMethod::Get,
                qs,
                b"",
                NOW_MS,
                &QueryLimits::default(),
            );
            assert_eq!(status, 200);
        };
        run();
        let before = db.engine_stats().cache_misses;
        run();
        db.engine_stats().cache_misses - before
    };
    let window = format!("start={T}&end={}", T + 3599);
    // One sub-query of 60 series: cached.
    assert_eq!(
        misses_of_second_run(&format!("{window}{}", subs(&metrics[..1]))),
        0
    );
    // Ten of them: 600 series-hours (and more with the scan window), not cached.
    assert!(misses_of_second_run(&format!("{window}{}", subs(&metrics))) > 0);
}

/// Series counts in `showStats` and `showSummary` do not depend on `showTSUIDs` (the TSUIDs
/// are built only when shown), and shown TSUIDs are one per series, sorted.
#[test]
fn series_counts_hold_with_and_without_tsuids() {
    let db = unaligned();
    let base = format!("{}&m=sum:sys.cpu.user&show_stats&show_summary", range());
    let (status, plain) = db.get(&base);
    assert_eq!(status, 200, "{plain}");
    let plain = parse(&plain);
    assert_eq!(plain[0]["stats"]["seriesCount"], json!(2), "{plain}");
    assert_eq!(plain[1]["statsSummary"]["seriesCount"], json!(2), "{plain}");
    assert!(plain[0].get("tsuids").is_none());
    let (_, shown) = db.get(&format!("{base}&show_tsuids"));
    let shown = parse(&shown);
    assert_eq!(shown[0]["stats"]["seriesCount"], json!(2), "{shown}");
    let tsuids: Vec<&str> = shown[0]["tsuids"]
        .as_array()
        .expect("tsuids")
        .iter()
        .filter_map(Json::as_str)
        .collect();
    assert_eq!(tsuids.len(), 2, "{shown}");
    assert!(tsuids[0] < tsuids[1] && tsuids.iter().all(|t| t.len() % 2 == 0));
    // One group per series under `none`.
    let (_, none) = db.get(&format!("{}&m=none:sys.cpu.user&show_stats", range()));
    let none = parse(&none);
    assert_eq!(none[0]["stats"]["seriesCount"], json!(1), "{none}");
}
