//! `/api/query` requests on arbitrary bytes, in the URI form (`m=`/`tsuid=` query strings) and
//! the JSON body form. The first byte picks the method (GET, POST, DELETE) and whether the rest
//! is cut at its first newline into a query string and a body. Parsing may fail only with a
//! 400; what parses is validated (times, aggregators, downsample specs) and its filters and
//! TSUIDs built, failing only with client errors; and the whole endpoint, run against a small
//! database, answers with a status from its documented set and, on error, OpenTSDB's error
//! JSON carrying that status.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use strata_query::{
    Error, QueryLimits, QueryMethod, error_body, QueryRequest, handle_query, run_inline, parse_m, parse_query_string,
    parse_request, parse_tsuid_param, validate_query,
};
use strata_tsdb::{Filter, FilterKind, PointRef, Tsdb, TsdbOptions, Tsuid, Value};

const NOW_MS: i64 = 1_356_998_400_000 + 3_600_000;

fn check_error_body(e: &Error) {
    let body: serde_json::Value =
        serde_json::from_slice(&error_body(e)).expect("the error body is JSON");
    assert_eq!(body["error"]["code"], u64::from(e.status()));
}

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

/// A small database, made once per fuzzing process: one metric, three series.
fn tsdb() -> &'static Tsdb {
    static TSDB: OnceLock<Tsdb> = OnceLock::new();
    TSDB.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("strata-fuzz-query-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let tsdb = Tsdb::open(&dir, TsdbOptions::default()).expect("opening the tsdb");
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
        tsdb
    })
}

fn check_endpoint(method: QueryMethod, qs: &str, body: &[u8]) {
    let r = handle_query(tsdb(), &QueryRequest { method: method, query_string: qs, accept: None, body: body, now_ms: NOW_MS }, &QueryLimits::default(), &run_inline);
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
}

fuzz_target!(|data: &[u8]| {
    let Some((&knob, data)) = data.split_first() else {
        return;
    };
    let method = match knob % 3 {
        0 => QueryMethod::Get,
        1 => QueryMethod::Post,
        _ => QueryMethod::Delete,
    };
    let (qs, body) = match (knob & 4 != 0, method) {
        (true, _) => match data.iter().position(|&b| b == b'\n') {
            Some(i) => (&data[..i], &data[i + 1..]),
            None => (data, &[][..]),
        },
        (false, QueryMethod::Get) => (data, &[][..]),
        (false, _) => (&[][..], data),
    };
    let qs = String::from_utf8_lossy(qs);
    check_parse(method, &qs, body);
    check_param(&qs);
    for (_, v) in parse_query_string(&qs) {
        check_param(&v);
    }
    check_endpoint(method, &qs, body);
});
