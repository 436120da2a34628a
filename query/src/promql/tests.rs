//! PromQL evaluated over a real tsdb in a temporary directory, and the API around it.

use strata_tsdb::{PointRef, Tsdb, TsdbOptions, Value};

use super::*;
use crate::promql::api::{PromRequest, handle_prometheus};

/// 2024-01-01T00:00:00Z, seconds.
const T: i64 = 1_704_067_200;

struct Db {
    _dir: tempfile::TempDir,
    tsdb: Tsdb,
}

fn put(tsdb: &Tsdb, metric: &str, tags: &[(&str, &str)], points: &[(i64, Value)]) {
    let refs: Vec<PointRef<'_>> = points
        .iter()
        .map(|(t, v)| PointRef {
            metric,
            tags,
            timestamp: *t,
            value: *v,
        })
        .collect();
    for r in tsdb.write(&refs) {
        r.unwrap();
    }
}

/// `m`: four series with a sample every minute for 10 minutes from T, host a (ints
/// 0, 1, ...), b (floats 0.5, 1.5, ...), c (no dc tag, 100 each), d (dc "xx", 7 each);
/// `n`: one series for host a, 10 each; `c`: a counter +10 every 10 s for 10 minutes;
/// `cpu.user`: one series, 42.
fn db() -> Db {
    let dir = tempfile::tempdir().unwrap();
    let tsdb = Tsdb::open(dir.path(), TsdbOptions::default()).unwrap();
    let minutes = |f: &dyn Fn(i64) -> Value| -> Vec<(i64, Value)> {
        (0..=10).map(|i| (T + i * 60, f(i))).collect()
    };
    put(
        &tsdb,
        "m",
        &[("host", "a"), ("dc", "x")],
        &minutes(&|i| Value::Int(i)),
    );
    put(
        &tsdb,
        "m",
        &[("host", "b"), ("dc", "y")],
        &minutes(&|i| Value::Float(i as f64 + 0.5)),
    );
    put(&tsdb, "m", &[("host", "c")], &minutes(&|_| Value::Int(100)));
    put(
        &tsdb,
        "m",
        &[("host", "d"), ("dc", "xx")],
        &minutes(&|_| Value::Int(7)),
    );
    put(&tsdb, "n", &[("host", "a")], &minutes(&|_| Value::Int(10)));
    let counter: Vec<(i64, Value)> = (0..=60).map(|i| (T + i * 10, Value::Int(i * 10))).collect();
    put(&tsdb, "c", &[("host", "a")], &counter);
    put(
        &tsdb,
        "cpu.user",
        &[("host", "a")],
        &minutes(&|_| Value::Float(42.0)),
    );
    Db { _dir: dir, tsdb }
}

fn instant(db: &Db, query: &str, at_s: i64) -> Result<PromValue> {
    promql_eval(
        &db.tsdb,
        &PromQuery {
            query: query.to_owned(),
            start_ms: at_s * 1000,
            end_ms: at_s * 1000,
            step_ms: 1,
            lookback_ms: DEFAULT_LOOKBACK_MS,
        },
        &QueryLimits::default(),
    )
}

fn range(db: &Db, query: &str, start_s: i64, end_s: i64, step_s: i64) -> Result<PromValue> {
    promql_eval(
        &db.tsdb,
        &PromQuery {
            query: query.to_owned(),
            start_ms: start_s * 1000,
            end_ms: end_s * 1000,
            step_ms: step_s * 1000,
            lookback_ms: DEFAULT_LOOKBACK_MS,
        },
        &QueryLimits::default(),
    )
}

/// An instant vector as `(value of label, value)` pairs.
fn by_label(v: PromValue, label: &str) -> Vec<(String, f64)> {
    let PromValue::Vector(samples) = v else {
        panic!("not a vector: {v:?}");
    };
    samples
        .into_iter()
        .map(|s| {
            let l = s
                .labels
                .iter()
                .find(|(k, _)| k == label)
                .map_or(String::new(), |(_, v)| v.clone());
            (l, s.value)
        })
        .collect()
}

/// The hosts of an instant vector, sorted.
fn hosts(v: PromValue) -> Vec<String> {
    let mut h: Vec<String> = by_label(v, "host").into_iter().map(|(h, _)| h).collect();
    h.sort();
    h
}

#[test]
fn selectors_match_like_prometheus() {
    let db = db();
    let at = T + 600;
    let q = |s: &str| hosts(instant(&db, s, at).unwrap());
    assert_eq!(q(r#"m{dc="x"}"#), ["a"]);
    // A missing label is the empty value: `!=` and `!~` take series without it.
    assert_eq!(q(r#"m{dc!="x"}"#), ["b", "c", "d"]);
    assert_eq!(q(r#"m{dc=""}"#), ["c"]);
    assert_eq!(q(r#"m{dc!=""}"#), ["a", "b", "d"]);
    // Regexes are anchored: "x" does not match "xx".
    assert_eq!(q(r#"m{dc=~"x"}"#), ["a"]);
    assert_eq!(q(r#"m{dc=~"x|y"}"#), ["a", "b"]);
    assert_eq!(q(r#"m{dc=~"x.*"}"#), ["a", "d"]);
    assert_eq!(q(r#"m{dc!~"x"}"#), ["b", "c", "d"]);
    assert_eq!(q(r#"m{dc=~"|x"}"#), ["a", "c"]);
    assert_eq!(q(r#"m{nokey="v"}"#), Vec::<String>::new());
    assert_eq!(q(r#"m{nokey!="v"}"#), ["a", "b", "c", "d"]);
    assert_eq!(q(r#"nometric"#), Vec::<String>::new());
    let names = by_label(
        instant(&db, r#"{__name__=~"m|n", host="a"}"#, at).unwrap(),
        "__name__",
    );
    assert_eq!(names, [("m".to_owned(), 10.0), ("n".to_owned(), 10.0)]);
    // Bare dotted names, as OpenTSDB users and MetricsQL write them.
    assert_eq!(
        by_label(instant(&db, "cpu.user", at).unwrap(), "__name__"),
        [("cpu.user".to_owned(), 42.0)]
    );
    assert_eq!(q(r#"{"cpu.user", host="a"}"#), ["a"]);
}

#[test]
fn instant_selectors_look_back_five_minutes() {
    let db = db();
    let last = T + 600;
    // Integers come back as floats; host b's floats keep their fraction.
    assert_eq!(
        by_label(instant(&db, "m{dc=~\"x|y\"}", last + 299).unwrap(), "host"),
        [("a".to_owned(), 10.0), ("b".to_owned(), 10.5)]
    );
    // The window is open on the left: a sample exactly 5 m old is gone.
    assert!(hosts(instant(&db, "m", last + 300).unwrap()).is_empty());
    // Between samples, the one before.
    assert_eq!(
        by_label(instant(&db, "m{host=\"a\"}", T + 90).unwrap(), "host"),
        [("a".to_owned(), 1.0)]
    );
    // offset looks back.
    assert_eq!(
        by_label(
            instant(&db, "m{host=\"a\"} offset 2m", T + 300).unwrap(),
            "host"
        ),
        [("a".to_owned(), 3.0)]
    );
    // @ pins the time.
    assert_eq!(
        by_label(
            instant(&db, "m{host=\"a\"} @ 1704067320", T + 600).unwrap(),
            "host"
        ),
        [("a".to_owned(), 2.0)]
    );
}

#[test]
fn range_queries_step_from_the_start() {
    let db = db();
    let PromValue::Matrix(series) = range(&db, "m{host=\"a\"}", T + 30, T + 290, 60).unwrap()
    else {
        panic!("not a matrix");
    };
    assert_eq!(series.len(), 1);
    let times: Vec<i64> = series[0].points.iter().map(|p| p.0 / 1000 - T).collect();
    assert_eq!(times, [30, 90, 150, 210, 270]);
    let values: Vec<f64> = series[0].points.iter().map(|p| p.1).collect();
    assert_eq!(values, [0.0, 1.0, 2.0, 3.0, 4.0]);
    // A scalar over a range is one series without labels.
    let PromValue::Matrix(s) = range(&db, "1 + 1", T, T + 120, 60).unwrap() else {
        panic!("not a matrix");
    };
    assert_eq!(s[0].labels, Vec::<(String, String)>::new());
    assert_eq!(
        s[0].points,
        vec![
            (T * 1000, 2.0),
            ((T + 60) * 1000, 2.0),
            ((T + 120) * 1000, 2.0)
        ]
    );
}

#[test]
fn functions_over_stored_samples() {
    let db = db();
    let at = T + 300;
    // +10 every 10 s: one per second, and the 6 samples of (t-1m, t] extrapolated to 60.
    assert_eq!(
        by_label(instant(&db, "rate(c[1m])", at).unwrap(), "host"),
        [("a".to_owned(), 1.0)]
    );
    assert_eq!(
        by_label(instant(&db, "increase(c[1m])", at).unwrap(), "host"),
        [("a".to_owned(), 60.0)]
    );
    assert_eq!(
        by_label(instant(&db, "irate(c[1m])", at).unwrap(), "host"),
        [("a".to_owned(), 1.0)]
    );
    assert_eq!(
        by_label(instant(&db, "delta(c[1m])", at).unwrap(), "host"),
        [("a".to_owned(), 60.0)]
    );
    // host a holds 0..10 at minutes 0..10: at 5 m, (0, 5m] of a 5 m window is 1..5.
    let a = |f: &str| {
        by_label(
            instant(&db, &format!("{f}(m{{host=\"a\"}}[5m])"), at).unwrap(),
            "host",
        )[0]
        .1
    };
    assert_eq!(a("avg_over_time"), 3.0);
    assert_eq!(a("sum_over_time"), 15.0);
    assert_eq!(a("min_over_time"), 1.0);
    assert_eq!(a("max_over_time"), 5.0);
    assert_eq!(a("count_over_time"), 5.0);
    assert_eq!(a("last_over_time"), 5.0);
    // Functions drop the metric name, except last_over_time.
    let PromValue::Vector(v) = instant(&db, "rate(c[1m])", at).unwrap() else {
        panic!()
    };
    assert_eq!(v[0].labels, vec![("host".to_owned(), "a".to_owned())]);
    let PromValue::Vector(v) = instant(&db, "last_over_time(c[1m])", at).unwrap() else {
        panic!()
    };
    assert_eq!(v[0].labels[0], ("__name__".to_owned(), "c".to_owned()));
    // Two series that differ only by name collide once it is dropped.
    let e = instant(&db, r#"rate({__name__=~"n|c"}[5m])"#, at).unwrap_err();
    assert!(matches!(e, Error::Execution(_)), "{e}");
}

#[test]
fn aggregations_and_binary_operators() {
    let db = db();
    let at = T + 600;
    // a 10, b 10.5, c 100, d 7.
    let v = |q: &str| by_label(instant(&db, q, at).unwrap(), "dc");
    assert_eq!(v("sum(m)"), [(String::new(), 127.5)]);
    assert_eq!(v("count(m)"), [(String::new(), 4.0)]);
    assert_eq!(v("avg(m)"), [(String::new(), 31.875)]);
    assert_eq!(
        v("max by (dc) (m)"),
        [
            (String::new(), 100.0),
            ("x".to_owned(), 10.0),
            ("xx".to_owned(), 7.0),
            ("y".to_owned(), 10.5)
        ]
    );
    // topk keeps its order, largest first.
    assert_eq!(
        by_label(instant(&db, "topk(2, m)", at).unwrap(), "host"),
        [("c".to_owned(), 100.0), ("b".to_owned(), 10.5)]
    );
    assert_eq!(hosts(instant(&db, "bottomk(1, m)", at).unwrap()), ["d"]);
    assert_eq!(v("min without (host) (m)").len(), 4);
    let h = |q: &str| by_label(instant(&db, q, at).unwrap(), "host");
    assert_eq!(h("m{host=\"a\"} * 2 + 1"), [("a".to_owned(), 21.0)]);
    assert_eq!(
        h("m > 10"),
        [("b".to_owned(), 10.5), ("c".to_owned(), 100.0)]
    );
    assert_eq!(h("m{host=\"a\"} / on(host) n"), [("a".to_owned(), 1.0)]);
    assert_eq!(h("m{host=\"a\"} - ignoring(dc) n"), [("a".to_owned(), 0.0)]);
    // Without a modifier m{host=a} has dc, n does not: no match.
    assert!(h("m{host=\"a\"} - n").is_empty());
    assert_eq!(h("-n"), [("a".to_owned(), -10.0)]);
    // Set operators, vector(), scalar(), time().
    assert_eq!(hosts(instant(&db, "m and on(host) n", at).unwrap()), ["a"]);
    assert_eq!(
        hosts(instant(&db, "m unless on(host) n", at).unwrap()),
        ["b", "c", "d"]
    );
    assert_eq!(
        by_label(instant(&db, "nometric or vector(0)", at).unwrap(), "host"),
        [(String::new(), 0.0)]
    );
    assert_eq!(h("n * scalar(m{host=\"d\"})"), [("a".to_owned(), 70.0)]);
    // scalar() of several samples, or of none, is NaN.
    for q in ["scalar(m)", "scalar(nometric)"] {
        let PromValue::Scalar { value, .. } = instant(&db, q, at).unwrap() else {
            panic!("{q}: not a scalar");
        };
        assert!(value.is_nan(), "{q}");
    }
    assert_eq!(
        instant(&db, "time()", T).unwrap(),
        PromValue::Scalar {
            time_ms: T * 1000,
            value: T as f64
        }
    );
    assert_eq!(
        instant(&db, "1+1", 4).unwrap(),
        PromValue::Scalar {
            time_ms: 4000,
            value: 2.0
        }
    );
}

#[test]
fn histogram_quantile_of_stored_buckets() {
    let db = db();
    // OpenTSDB tag values cannot hold `+`: `Inf` reads as +Inf too.
    for (le, count) in [("0.1", 50), ("0.2", 70), ("Inf", 100)] {
        put(
            &db.tsdb,
            "lat_bucket",
            &[("le", le), ("job", "j")],
            &[(T, Value::Int(count))],
        );
    }
    let q = by_label(
        instant(&db, "histogram_quantile(0.6, lat_bucket)", T + 10).unwrap(),
        "job",
    );
    assert_eq!(q.len(), 1);
    assert!((q[0].1 - 0.15).abs() < 1e-12);
}

#[test]
fn an_instant_query_of_a_range_selector_gives_raw_samples() {
    let db = db();
    let PromValue::Matrix(s) = instant(&db, "m{host=\"a\"}[3m]", T + 600).unwrap() else {
        panic!("not a matrix");
    };
    let got: Vec<(i64, f64)> = s[0]
        .points
        .iter()
        .map(|(t, v)| (t / 1000 - T, *v))
        .collect();
    assert_eq!(got, [(480, 8.0), (540, 9.0), (600, 10.0)]);
    let e = range(&db, "m[3m]", T, T + 60, 60).unwrap_err();
    assert!(e.to_string().contains("range vector"), "{e}");
}

#[test]
fn unsupported_parts_are_named() {
    let db = db();
    let err = |q: &str| instant(&db, q, T).unwrap_err();
    for (q, names) in [
        (
            "predict_linear(m[5m], 1)",
            "unsupported function \"predict_linear\"",
        ),
        ("rate(m[5m:1m])", "subquery"),
        ("changes(m[5m])", "unsupported function \"changes\""),
        ("m + on(host) group_left(dc) n", "group_left"),
        ("stddev(m)", "unsupported aggregation \"stddev\""),
        ("quantile(0.5, m)", "unsupported aggregation \"quantile\""),
        ("abs(m)", "unsupported function \"abs\""),
    ] {
        let e = err(q);
        assert!(matches!(e, Error::Unsupported(_)), "{q}: {e:?}");
        assert!(e.to_string().contains(names), "{q}: {e}");
    }
    assert!(matches!(err("sum("), Error::BadRequest { .. }));
}

fn api(db: &Db, method: &str, path: &str, qs: &str, body: &str) -> (u16, serde_json::Value) {
    let r = handle_prometheus(
        &db.tsdb,
        &PromRequest {
            path,
            method,
            query_string: qs,
            body: body.as_bytes(),
            now_ms: (T + 600) * 1000,
        },
        &QueryLimits::default(),
    );
    (r.status, serde_json::from_slice(&r.body).unwrap())
}

#[test]
fn the_api_answers_in_prometheus_envelopes() {
    let db = db();
    let (status, j) = api(
        &db,
        "POST",
        "query_range",
        "",
        &format!("query=sum+by+(dc)+(m)&start={}&end={}&step=60", T, T + 120),
    );
    assert_eq!(status, 200, "{j}");
    assert_eq!(j["status"], "success");
    assert_eq!(j["data"]["resultType"], "matrix");
    assert_eq!(j["data"]["result"][0]["metric"], serde_json::json!({}));
    assert_eq!(
        j["data"]["result"][0]["values"][2],
        serde_json::json!([T + 120, "100"])
    );
    let (status, j) = api(&db, "GET", "query", "query=m%7Bhost%3D%22b%22%7D", "");
    assert_eq!(status, 200);
    assert_eq!(
        j["data"]["result"][0]["value"],
        serde_json::json!([T + 600, "10.5"])
    );
    let (_, j) = api(&db, "GET", "labels", "", "");
    assert_eq!(j["data"], serde_json::json!(["__name__", "dc", "host"]));
    let (_, j) = api(&db, "GET", "label/__name__/values", "", "");
    assert_eq!(j["data"], serde_json::json!(["c", "cpu.user", "m", "n"]));
    let (_, j) = api(&db, "GET", "label/dc/values", "", "");
    assert_eq!(j["data"], serde_json::json!(["x", "xx", "y"]));
    let (_, j) = api(&db, "GET", "label/host/values", "match[]=n", "");
    assert_eq!(j["data"], serde_json::json!(["a"]));
    let (_, j) = api(&db, "POST", "labels", "", "match[]=n");
    assert_eq!(j["data"], serde_json::json!(["__name__", "host"]));
    let (_, j) = api(
        &db,
        "GET",
        "series",
        "match[]=m%7Bdc%3D%22x%22%7D&match[]=n",
        "",
    );
    assert_eq!(
        j["data"],
        serde_json::json!([{"__name__": "m", "dc": "x", "host": "a"}, {"__name__": "n", "host": "a"}])
    );
    let (status, j) = api(&db, "GET", "series", "", "");
    assert_eq!((status, j["errorType"].as_str()), (400, Some("bad_data")));
    let (_, j) = api(&db, "GET", "status/buildinfo", "", "");
    assert!(
        j["data"]["version"]
            .as_str()
            .is_some_and(|v| v.starts_with("2."))
    );
    let (_, j) = api(&db, "GET", "metadata", "", "");
    assert_eq!(j["data"], serde_json::json!({}));
    let (_, j) = api(&db, "GET", "format_query", "query=sum(cpu.user)", "");
    assert_eq!(j["data"], "sum({__name__=\"cpu.user\"})");
    // Errors: bad data, unsupported, execution, a bad time.
    let (status, j) = api(&db, "GET", "query", "query=sum(", "");
    assert_eq!((status, j["errorType"].as_str()), (400, Some("bad_data")));
    assert!(
        j["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("invalid parameter \"query\""))
    );
    let (status, j) = api(&db, "GET", "query", "query=predict_linear(m[5m],1)", "");
    assert_eq!(status, 400);
    assert!(
        j["error"]
            .as_str()
            .is_some_and(|e| e.contains("\"predict_linear\"")),
        "{j}"
    );
    let (status, j) = api(
        &db,
        "GET",
        "query",
        "query=rate(%7B__name__%3D~%22n%7Cc%22%7D%5B5m%5D)",
        "",
    );
    assert_eq!(
        (status, j["errorType"].as_str()),
        (422, Some("execution")),
        "{j}"
    );
    let (status, _) = api(
        &db,
        "GET",
        "query_range",
        "query=m&start=x&end=1&step=1",
        "",
    );
    assert_eq!(status, 400);
    let (status, j) = api(
        &db,
        "GET",
        "query_range",
        "query=m&start=1&end=100000&step=1",
        "",
    );
    assert_eq!(status, 400, "{j}");
}

proptest::proptest! {
    /// Any text is parsed, refused or evaluated: never a panic.
    #[test]
    fn any_query_text_is_answered(q in "[a-z_.{}()\\[\\]=~!\"'0-9 ,+*/^<>@:#-]{0,40}") {
        let _ = parse(&q);
    }
}

/// Reads large enough to be split over threads answer as a read on one thread does.
#[test]
fn split_reads_answer_like_one_thread() {
    let dir = tempfile::tempdir().unwrap();
    let tsdb = Tsdb::open(dir.path(), TsdbOptions::default()).unwrap();
    for h in 0..40i64 {
        let host = format!("h{h:02}");
        let dc = ["a", "b", "c"][h as usize % 3];
        let points: Vec<(i64, Value)> = (0..3 * 360i64)
            .filter(|i| (i + h) % 11 != 0)
            .map(|i| {
                let v = if h % 2 == 0 {
                    Value::Int(i * h)
                } else {
                    Value::Float(i as f64 / (h as f64 + 1.0))
                };
                (T + i * 10 + h % 10, v)
            })
            .collect();
        put(&tsdb, "m", &[("host", &host), ("dc", dc)], &points);
    }
    for query in ["sum by (dc) (rate(m[5m]))", "m", "max_over_time(m[7m]) - m"] {
        let run = |threads| {
            promql_eval(
                &tsdb,
                &PromQuery {
                    query: query.to_owned(),
                    start_ms: (T + 600) * 1000,
                    end_ms: (T + 3 * 3600) * 1000,
                    step_ms: 60_000,
                    lookback_ms: DEFAULT_LOOKBACK_MS,
                },
                &QueryLimits {
                    threads,
                    ..QueryLimits::default()
                },
            )
            .unwrap()
        };
        let (split, one) = (run(0), run(1));
        let PromValue::Matrix(series) = &split else {
            panic!("not a matrix");
        };
        assert!(!series.is_empty(), "{query}");
        assert_eq!(split, one, "{query}");
    }
}

#[test]
fn a_query_past_its_timeout_is_a_timeout() {
    let db = db();
    let r = handle_prometheus(
        &db.tsdb,
        &PromRequest {
            path: "query",
            method: "GET",
            query_string: "query=m&timeout=0s",
            body: b"",
            now_ms: (T + 600) * 1000,
        },
        &QueryLimits::default(),
    );
    let j: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(
        (r.status, j["errorType"].as_str()),
        (503, Some("timeout")),
        "{j}"
    );
}

/// Every pair of matchers over a small index selects exactly the series a brute-force
/// reading of Prometheus' rules selects (absent label = empty value, anchored regexes).
#[test]
fn matchers_agree_with_the_brute_force_definition() {
    use super::plan::{LabelMatcher, MatchKind};
    let dir = tempfile::tempdir().unwrap();
    let tsdb = Tsdb::open(dir.path(), TsdbOptions::default()).unwrap();
    let values = [None, Some("x"), Some("y"), Some("xy")];
    let mut all = Vec::new();
    for a in values {
        for b in values {
            let mut tags = vec![("id", format!("{}{}", a.unwrap_or("-"), b.unwrap_or("-")))];
            tags.extend(a.map(|v| ("a", v.to_owned())));
            tags.extend(b.map(|v| ("b", v.to_owned())));
            let refs: Vec<(&str, &str)> = tags.iter().map(|(k, v)| (*k, v.as_str())).collect();
            put(&tsdb, "s", &refs, &[(T, Value::Int(1))]);
            all.push(tags);
        }
    }
    let mut matchers = Vec::new();
    for key in ["a", "b", "nokey"] {
        for value in ["", "x", "y", "x|y", ".*", "x.*", "xy"] {
            let re = || regex::Regex::new(&format!("^(?:{value})$")).unwrap();
            for op in [
                MatchKind::Equal,
                MatchKind::NotEqual,
                MatchKind::Regex(re()),
                MatchKind::NotRegex(re()),
            ] {
                matchers.push(LabelMatcher {
                    name: key.to_owned(),
                    op,
                    value: value.to_owned(),
                });
            }
        }
    }
    let name = LabelMatcher {
        name: "__name__".to_owned(),
        op: MatchKind::Equal,
        value: "s".to_owned(),
    };
    for m1 in &matchers {
        for m2 in &matchers {
            let set = [name.clone(), m1.clone(), m2.clone()];
            let mut got: Vec<String> = super::select::find_series(&tsdb, &set)
                .unwrap()
                .iter()
                .map(|id| {
                    let (_, tags) = tsdb.series_names(id).unwrap().unwrap();
                    tags.into_iter().find(|(k, _)| k == "id").unwrap().1
                })
                .collect();
            got.sort();
            let mut want: Vec<String> = all
                .iter()
                .filter(|tags| {
                    [m1, m2].iter().all(|m| {
                        let v = tags
                            .iter()
                            .find(|(k, _)| *k == m.name)
                            .map_or("", |(_, v)| v.as_str());
                        m.matches(v)
                    })
                })
                .map(|tags| tags[0].1.clone())
                .collect();
            want.sort();
            assert_eq!(
                got, want,
                "{} {:?} {:?} / {} {:?} {:?}",
                m1.name, m1.op, m1.value, m2.name, m2.op, m2.value
            );
        }
    }
}

/// Names stored as remote write stores them ([`strata_tsdb::escape_name`]), and one stored
/// as telnet may store it, are read back as they were written.
#[test]
fn escaped_names_read_back_as_written() {
    use strata_tsdb::escape_name;
    let dir = tempfile::tempdir().unwrap();
    let tsdb = Tsdb::open(dir.path(), TsdbOptions::default()).unwrap();
    let written = [
        ("job:up:rate5m", "instance", "localhost:9090", 1),
        ("job:up:rate5m", "instance", "a b,c=d", 2),
        ("job:up:rate5m", "instance", "plain", 3),
        ("job:up:rate5m", "weird key", "x|y", 4),
        ("job:up:rate5m", "instance", "x__xy", 5),
    ];
    for (metric, k, v, n) in written {
        put(
            &tsdb,
            &escape_name(metric),
            &[(&escape_name(k), &escape_name(v))],
            &[(T, Value::Int(n))],
        );
    }
    // A name no escape produced, as a telnet put can store it: shown and found as it is.
    put(
        &tsdb,
        "tel__xnet",
        &[("host", "a__xZ")],
        &[(T, Value::Int(6))],
    );
    let db = Db { _dir: dir, tsdb };
    let values = |q: &str| -> Vec<f64> {
        let mut v: Vec<f64> = by_label(instant(&db, q, T + 1).unwrap(), "")
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    assert_eq!(
        values(r#"{"job:up:rate5m", instance="localhost:9090"}"#),
        [1.0]
    );
    assert_eq!(values(r#"job:up:rate5m{instance="a b,c=d"}"#), [2.0]);
    assert_eq!(
        values(r#"job:up:rate5m{instance=~"localhost:.*|plain"}"#),
        [1.0, 3.0]
    );
    assert_eq!(
        values(r#"job:up:rate5m{instance!~".*:.*"}"#),
        [2.0, 3.0, 4.0, 5.0]
    );
    assert_eq!(values(r#"job:up:rate5m{instance="x__xy"}"#), [5.0]);
    assert_eq!(values(r#"job:up:rate5m{"weird key"="x|y"}"#), [4.0]);
    assert_eq!(values(r#"job:up:rate5m{"weird key"=~"x.y"}"#), [4.0]);
    assert_eq!(values(r#"{__name__=~"job:.*"}"#), [1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(values(r#"{"tel__xnet", host="a__xZ"}"#), [6.0]);
    assert_eq!(values(r#"{"tel__xnet", host=~"a__x.*"}"#), [6.0]);

    let PromValue::Vector(samples) =
        instant(&db, r#"job:up:rate5m{instance="a b,c=d"}"#, T + 1).unwrap()
    else {
        panic!("not a vector");
    };
    assert_eq!(
        samples[0].labels,
        [
            ("__name__".to_owned(), "job:up:rate5m".to_owned()),
            ("instance".to_owned(), "a b,c=d".to_owned())
        ]
    );
    let (status, j) = api(&db, "GET", "labels", "", "");
    assert_eq!(status, 200, "{j}");
    assert_eq!(
        j["data"],
        serde_json::json!(["__name__", "host", "instance", "weird key"])
    );
    let (_, j) = api(&db, "GET", "label/__name__/values", "", "");
    assert_eq!(j["data"], serde_json::json!(["job:up:rate5m", "tel__xnet"]));
    let (_, j) = api(&db, "GET", "label/instance/values", "", "");
    assert_eq!(
        j["data"],
        serde_json::json!(["a b,c=d", "localhost:9090", "plain", "x__xy"])
    );
    // Prometheus' escape of a label name in the path: `U__` and `_20_` for a space.
    let (_, j) = api(
        &db,
        "GET",
        "label/U__weird_20_key/values",
        "match[]=%7B__name__%3D%22job%3Aup%3Arate5m%22%7D",
        "",
    );
    assert_eq!(j["data"], serde_json::json!(["x|y"]));
    let (_, j) = api(
        &db,
        "GET",
        "series",
        "match[]=%7Binstance%3D~%22local.*%22%7D",
        "",
    );
    assert_eq!(
        j["data"],
        serde_json::json!([{"__name__": "job:up:rate5m", "instance": "localhost:9090"}])
    );
}
