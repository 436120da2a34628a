//! A stable-toolchain stand-in for the `query_parse` cargo-fuzz target in `fuzz/`: bounded
//! proptest runs over arbitrary query strings and bodies and over mutations of valid ones
//! (URI `m=`/`tsuid=` form and JSON form). Parsing fails only with a 400, validation and
//! filter building only with client errors, and the whole endpoint, run against a small
//! database, answers with a status from its documented set and, on error, OpenTSDB's error
//! JSON carrying that status.

use std::sync::OnceLock;

use proptest::prelude::*;
use strata_query::{
    Error, QueryLimits, QueryMethod, QueryRequest, error_body, handle_query, parse_m,
    parse_query_string, parse_request, parse_tsuid_param, run_inline, validate_query,
};
use strata_tsdb::{Filter, FilterKind, PointRef, Tsdb, TsdbOptions, Tsuid, Value};

/// Cases per property: each kind of mutation is drawn many times, and the file stays a few
/// seconds in CI.
const CASES: u32 = 256;
/// "Now" for every query: an hour after the points written.
const NOW_MS: i64 = 1_356_998_400_000 + 3_600_000;

const URI_QUERIES: &[&str] = &[
    "start=1h-ago&m=sum:sys.cpu{host=*}",
    "start=1356998400&end=1356998460&m=avg:1m-avg:rate{counter,100,0}:sys.cpu{host=a|b}{dc=x}&ms&show_tsuids",
    "start=2h-ago&tsuid=sum:000001000001000001,000001000001000002&show_query",
    "start=1h-ago&m=zimsum:10m-sum-zero:sys.cpu&arrays&show_summary",
    "start=1d-ago&m=max:explicit_tags:sys.cpu{host=regexp(a.*)}&m=min:1h-max-nan:rate:sys.cpu",
    "start=2012/12/31-23:00:00&end=2013/01/01-01:00:00&m=p99:0all-count:sys.cpu{dc=iliteral_or(X)}",
    "start=1h-ago&m=sum%3Asys.cpu%7Bhost%3Dnot_literal_or(a)%7D&format=arrow",
];

const JSON_QUERIES: &[&str] = &[
    r#"{"start":"1h-ago","queries":[{"aggregator":"sum","metric":"sys.cpu","tags":{"host":"*"}}]}"#,
    r#"{"start":1356998400000,"end":"1356998460","msResolution":true,"showTSUIDs":"true",
        "queries":[{"aggregator":"avg","metric":"sys.cpu","downsample":"1m-avg-nan","rate":true,
        "rateOptions":{"counter":true,"counterMax":"100","resetValue":0,"dropResets":1},
        "filters":[{"type":"wildcard","tagk":"host","filter":"a*","groupBy":true},
                   {"type":"not_key","tagk":"rack","filter":""}]}]}"#,
    r#"{"start":"1d-ago","timezone":"America/New_York","useCalendar":true,
        "queries":[{"aggregator":"count","metric":"sys.cpu","downsample":"1dc-sum"},
                   {"aggregator":"sum","tsuids":["000001000001000001"]}]}"#,
    r#"{"start":"1h-ago","queries":[{"aggregator":"dev","metric":"sys.cpu","explicitTags":true,
        "tags":{"host":"a","dc":"x"},"percentiles":[]}],"noAnnotations":true}"#,
];

/// One edit of a byte string.
#[derive(Debug, Clone)]
enum Mutation {
    Flip { at: usize, bit: u8 },
    Insert { at: usize, byte: u8 },
    Delete { at: usize },
    Truncate { at: usize },
    Duplicate { at: usize, len: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Insert { at, byte }),
        // The query languages' structural bytes are the interesting ones to insert.
        (
            any::<usize>(),
            prop::sample::select(b":{}[],|=&%\"-0123456789.*()ahmsdn ".to_vec())
        )
            .prop_map(|(at, byte)| Mutation::Insert { at, byte }),
        any::<usize>().prop_map(|at| Mutation::Delete { at }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        (any::<usize>(), 1usize..16).prop_map(|(at, len)| Mutation::Duplicate { at, len }),
    ]
}

fn mutated(base: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut data = base.to_vec();
    for m in mutations {
        let n = data.len();
        match *m {
            Mutation::Flip { at, bit } if n > 0 => data[at % n] ^= 1 << bit,
            Mutation::Insert { at, byte } => data.insert(at % (n + 1), byte),
            Mutation::Delete { at } if n > 0 => {
                data.remove(at % n);
            }
            Mutation::Truncate { at } => data.truncate(at % (n + 1)),
            Mutation::Duplicate { at, len } if n > 0 => {
                let start = at % n;
                let end = (start + len).min(n);
                let copy = data[start..end].to_vec();
                data.splice(end..end, copy);
            }
            _ => {}
        }
    }
    data
}

/// An error's body is OpenTSDB's error JSON with the error's status.
fn check_error_body(e: &Error) {
    let body: serde_json::Value =
        serde_json::from_slice(&error_body(e)).expect("the error body is JSON");
    assert_eq!(body["error"]["code"], u64::from(e.status()));
}

/// Parses a request, validates what parses, and builds its filters: every failure is the
/// client's, with status 400.
fn check_parse(method: QueryMethod, qs: &str, body: &[u8]) {
    let q = match parse_request(method, qs, body) {
        Ok(q) => q,
        Err(e) => {
            assert!(
                matches!(e, Error::BadRequest { .. }),
                "unlisted parse error: {e:?}"
            );
            check_error_body(&e);
            return;
        }
    };
    if let Err(e) = validate_query(&q, NOW_MS) {
        assert!(
            matches!(
                e,
                Error::BadRequest { .. }
                    | Error::InvalidTime { .. }
                    | Error::MissingStart
                    | Error::EndBeforeStart { .. }
                    | Error::InvalidDuration { .. }
                    | Error::InvalidDownsample { .. }
                    | Error::UnknownAggregator(_)
            ),
            "unlisted validation error: {e:?}"
        );
        assert_eq!(e.status(), 400);
        check_error_body(&e);
    }
    for sub in &q.queries {
        for f in &sub.filters {
            if let Some(kind) = FilterKind::parse(&f.kind)
                && let Err(e) = Filter::new(kind, &f.tagk, &f.filter, f.group_by)
            {
                assert_eq!(e.kind(), strata_tsdb::ErrorKind::Client, "{e:?}");
            }
        }
        for t in &sub.tsuids {
            if let Err(e) = Tsuid::parse_hex(t) {
                assert_eq!(e.kind(), strata_tsdb::ErrorKind::Client, "{e:?}");
            }
        }
    }
}

/// Parses one `m=` or `tsuid=` value on its own: only a 400 may fail.
fn check_param(spec: &str) {
    for r in [parse_m(spec), parse_tsuid_param(spec)] {
        if let Err(e) = r {
            assert!(
                matches!(e, Error::BadRequest { .. }),
                "unlisted parse error: {e:?}"
            );
        }
    }
}

/// A small database: one metric, three series over the hour before `NOW_MS`.
fn tsdb() -> &'static Tsdb {
    static TSDB: OnceLock<(tempfile::TempDir, Tsdb)> = OnceLock::new();
    let (_, tsdb) = TSDB.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let tsdb = Tsdb::open(dir.path(), TsdbOptions::default()).expect("opening the tsdb");
        let series: [&[(&str, &str)]; 3] = [
            &[("host", "a"), ("dc", "x")],
            &[("host", "b"), ("dc", "x")],
            &[("host", "c"), ("dc", "y"), ("rack", "r1")],
        ];
        for (i, tags) in series.iter().enumerate() {
            let points: Vec<PointRef<'_>> = (0..60)
                .map(|m| PointRef {
                    metric: "sys.cpu",
                    tags,
                    timestamp: 1_356_998_400 + m * 60,
                    value: if m % 2 == 0 {
                        Value::Int(m * (i as i64 + 1))
                    } else {
                        Value::Float(m as f64 / 4.0)
                    },
                })
                .collect();
            for r in tsdb.write(&points) {
                r.expect("writing a point");
            }
        }
        (dir, tsdb)
    });
    tsdb
}

/// Runs the whole endpoint: a status from the documented set, and an error body that is
/// OpenTSDB's error JSON with that status.
fn check_endpoint(method: QueryMethod, qs: &str, body: &[u8]) -> u16 {
    let limits = QueryLimits::default();
    let r = handle_query(
        tsdb(),
        &QueryRequest {
            method,
            query_string: qs,
            accept: None,
            body,
            now_ms: NOW_MS,
        },
        &limits,
        &run_inline,
    );
    assert!(
        matches!(r.status, 200 | 400 | 408 | 413),
        "status {}",
        r.status
    );
    if r.status != 200 {
        let json: serde_json::Value =
            serde_json::from_slice(&r.body).expect("the error body is JSON");
        assert_eq!(json["error"]["code"], u64::from(r.status));
    }
    r.status
}

fn method() -> impl Strategy<Value = QueryMethod> {
    prop_oneof![
        Just(QueryMethod::Get),
        Just(QueryMethod::Post),
        Just(QueryMethod::Delete)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn arbitrary_input_never_panics_the_query_parsers(
        qs in prop::collection::vec(any::<u8>(), 0..200),
        body in prop::collection::vec(any::<u8>(), 0..200),
        method in method(),
    ) {
        let qs = String::from_utf8_lossy(&qs);
        check_parse(method, &qs, &body);
        check_param(&qs);
        for (_, v) in parse_query_string(&qs) {
            check_param(&v);
        }
    }

    #[test]
    fn mutated_uri_queries_fail_cleanly(
        base in prop::sample::select(URI_QUERIES),
        mutations in prop::collection::vec(mutation(), 0..6),
    ) {
        let qs = String::from_utf8_lossy(&mutated(base.as_bytes(), &mutations)).into_owned();
        check_parse(QueryMethod::Get, &qs, b"");
        for (_, v) in parse_query_string(&qs) {
            check_param(&v);
        }
        check_endpoint(QueryMethod::Get, &qs, b"");
    }

    #[test]
    fn mutated_json_queries_fail_cleanly(
        base in prop::sample::select(JSON_QUERIES),
        mutations in prop::collection::vec(mutation(), 0..6),
    ) {
        let body = mutated(base.as_bytes(), &mutations);
        check_parse(QueryMethod::Post, "", &body);
        check_endpoint(QueryMethod::Post, "", &body);
    }
}

#[test]
fn the_seed_queries_parse_and_answer() {
    for qs in URI_QUERIES {
        assert!(parse_request(QueryMethod::Get, qs, b"").is_ok(), "{qs}");
        assert_eq!(check_endpoint(QueryMethod::Get, qs, b""), 200, "{qs}");
    }
    for body in JSON_QUERIES {
        let q = parse_request(QueryMethod::Post, "", body.as_bytes());
        assert!(q.is_ok(), "{body}: {q:?}");
        assert_eq!(
            check_endpoint(QueryMethod::Post, "", body.as_bytes()),
            200,
            "{body}"
        );
    }
}
