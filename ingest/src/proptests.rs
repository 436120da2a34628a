//! Property tests: arbitrary input never panics and fails only with the crate's listed errors,
//! and well-formed points survive a round trip through both protocols.

use bytes::BytesMut;
use proptest::prelude::*;

use crate::{
    BodyError, Command, LineSplitter, ParseConfig, PutError, decode_body, parse_command,
    parse_put_body, parse_put_line,
};

/// A telnet reply starts with `put: ` and ends with one `\n`.
fn check_put_error(e: &PutError) {
    let text = e.reply_line();
    assert!(text.starts_with("put: ") && text.ends_with('\n'), "{text}");
}

fn check_body_error(e: &BodyError) {
    assert!(matches!(e.status(), 400 | 413));
    assert!(serde_json::from_slice::<serde_json::Value>(&e.to_json()).is_ok());
}

fn name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9._/-]{1,12}|[a-zа-я中国]{1,6}"
}

proptest! {
    #[test]
    fn put_line_never_panics(line in proptest::collection::vec(any::<u8>(), 0..200)) {
        match parse_put_line(&line, &ParseConfig::default()) {
            Ok(p) => {
                prop_assert!(p.timestamp > 0);
                prop_assert!(!p.tags.is_empty() && p.tags.len() <= 8);
            }
            Err(e) => check_put_error(&e),
        }
        if let Command::Unknown(tok) = parse_command(&line) {
            let reply = parse_command(&line).unknown_reply().unwrap_or_default();
            prop_assert!(reply.starts_with("unknown command: ") && reply.ends_with("  Try `help'.\n"));
            prop_assert!(!tok.contains(&b' '));
        }
    }

    /// The one-pass parser takes the common lines, and any line it takes parses to the same
    /// point through the full parser.
    #[test]
    fn fast_put_path_agrees_with_the_full_parser(
        metric in "[a-z0-9._/-]{0,6}|[a-z]{1,3}[=+ ][a-z]{1,3}|é",
        ts in "[0-9]{1,14}|-[0-9]{1,3}|[0-9]{10}\\.[0-9]{1,4}|0",
        value in "-?[0-9]{1,20}|-?[0-9]{0,9}\\.[0-9]{0,9}|[0-9]e[0-9]|\\+1|NaN|-",
        tags in proptest::collection::vec(("[a-z]{0,3}|[a-z]é", "[a-z0-9]{0,3}|=|a=b"), 0..10),
        sep in "  ?",
        tail in "| |\\r",
    ) {
        let tag_text: Vec<String> = tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let line = format!("put{sep}{metric} {ts} {value} {}{tail}", tag_text.join(" "));
        let cfg = ParseConfig::default();
        let full = crate::telnet::parse_put_full(&line, &cfg);
        if let Some(fast) = crate::telnet::parse_put_fast(&line, &cfg) {
            prop_assert_eq!(Ok(fast), full.map_err(|e| e.to_string()), "{}", line);
        }
        let plain = sep == " " && tail.is_empty() && ts.len() <= 13
            && ts.parse::<i64>().is_ok_and(|t| t > 0)
            && (1..=8).contains(&tags.len())
            && !metric.is_empty() && metric.bytes().all(|b| b.is_ascii_alphanumeric() || b"._/-".contains(&b))
            && tags.iter().all(|(k, v)| !k.is_empty() && !v.is_empty()
                && k.bytes().all(|b| b.is_ascii_lowercase()) && v.bytes().all(|b| b.is_ascii_alphanumeric()))
            && tags.iter().enumerate().all(|(i, (k, _))| tags[..i].iter().all(|(k2, _)| k2 != k))
            && value.bytes().all(|b| b.is_ascii_digit() || b == b'-')
            && value.trim_start_matches('-').len() <= 18 && value != "-";
        if plain {
            prop_assert!(crate::telnet::parse_put_fast(&line, &cfg).is_some(), "{}", line);
        }
    }

    /// `parse_put_head`'s promise: a line it takes, whose metric and tag text some line the
    /// full parser took also had, parses fully to that line's names with the head's
    /// timestamp and value.
    #[test]
    fn put_head_agrees_with_the_full_parser(
        metric in "[a-z0-9._/-]{0,6}|[a-z]{1,3}[=+][a-z]{1,3}|é",
        tags in "([a-z]{1,3}=[a-z0-9]{1,3}| |=|é|a=b=c){0,8}",
        ts1 in "[0-9]{10}",
        ts2 in "[0-9]{1,14}|-[0-9]{1,3}|[0-9]{10}\\.[0-9]{1,4}|0|\\+1|",
        value in "-?[0-9]{1,20}|-?[0-9]{0,17}\\.[0-9]{0,17}|[0-9]e[0-9]|\\+1|NaN|Infinity|-|",
        tail in "|\\r|\\n|\\r\\n",
    ) {
        let cfg = ParseConfig::default();
        let seen = format!("put {metric} {ts1} 1 {tags}");
        let line = format!("put {metric} {ts2} {value} {tags}{tail}");
        let head = crate::parse_put_head(line.as_bytes());
        if let Some(h) = head {
            prop_assert_eq!(h.metric, metric.as_bytes());
            prop_assert_eq!(h.tags, tags.as_bytes());
        }
        if let (Some(h), Ok(known)) = (head, parse_put_line(seen.as_bytes(), &cfg)) {
            let full = parse_put_line(line.as_bytes(), &cfg);
            prop_assert!(full.is_ok(), "{:?} for {:?} after {:?}", full, line, seen);
            if let Ok(p) = full {
                prop_assert_eq!(p.metric, known.metric);
                prop_assert_eq!(p.tags, known.tags);
                prop_assert_eq!((p.timestamp, p.millis, p.value), (h.timestamp, h.millis, h.value));
            }
        }
    }

    /// The head's one-pass value reading takes exactly what `fast_value` takes, to the same
    /// value.
    #[test]
    fn head_value_agrees_with_fast_value(
        token in "-?[0-9]{0,20}(\\.[0-9]{0,18})?|-?[0-9]{1,3}[.e+-][0-9]{0,3}|-|\\.5|5\\.",
    ) {
        let line = format!("put m 1356998400 {token} k=v");
        let head = crate::parse_put_head(line.as_bytes()).map(|h| h.value);
        prop_assert_eq!(head, crate::telnet::fast_value(&token), "{}", token);
    }

    #[test]
    fn put_line_never_panics_on_plausible_lines(
        words in proptest::collection::vec("[a-z0-9=.+eE -]{0,8}|1e400|NaN|[=]{0,3}", 0..14)
    ) {
        let line = format!("put {}", words.join(" "));
        if let Err(e) = parse_put_line(line.as_bytes(), &ParseConfig::default()) {
            check_put_error(&e);
        }
    }

    #[test]
    fn line_splitter_never_panics(
        chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..8),
        max in 0usize..40,
    ) {
        let mut sp = LineSplitter::new(max);
        let mut buf = BytesMut::new();
        'outer: for c in &chunks {
            buf.extend_from_slice(c);
            loop {
                match sp.next_line(&mut buf) {
                    Ok(Some(line)) => {
                        prop_assert!(line.len() <= max);
                        prop_assert!(!line.contains(&b'\n'));
                    }
                    Ok(None) => break,
                    Err(e) => {
                        prop_assert_eq!(e.max, max);
                        break 'outer;
                    }
                }
            }
        }
    }

    #[test]
    fn put_body_never_panics(body in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Err(e) = parse_put_body(&body, &ParseConfig::default()) {
            check_body_error(&e);
        }
        if let Err(e) = decode_body(&body, true, 4096) {
            check_body_error(&e);
        }
    }

    #[test]
    fn put_body_never_panics_on_json_like_input(
        parts in proptest::collection::vec(
            prop_oneof![
                Just("{".to_owned()), Just("}".to_owned()), Just("[".to_owned()), Just("]".to_owned()),
                Just(",".to_owned()), Just(":".to_owned()), Just("\"metric\"".to_owned()),
                Just("\"timestamp\"".to_owned()), Just("\"value\"".to_owned()), Just("\"tags\"".to_owned()),
                Just("NaN".to_owned()), Just("-Infinity".to_owned()), Just("null".to_owned()),
                Just("\"\\u00e9\"".to_owned()), "-?[0-9]{1,3}(\\.[0-9])?(e[0-9])?", "\"[a-z =]{0,4}\"",
            ],
            0..40,
        )
    ) {
        let body = parts.concat();
        match parse_put_body(body.as_bytes(), &ParseConfig::default()) {
            Ok(p) => {
                prop_assert_eq!(p.good_count() + p.failures().len(), p.total());
                for f in p.failures() {
                    prop_assert!(serde_json::to_string(&f.datapoint).is_ok());
                }
            }
            Err(e) => check_body_error(&e),
        }
    }

    #[test]
    fn telnet_round_trip(
        metric in name(),
        ts in 1i64..=9_999_999_999_999,
        int in any::<bool>(),
        v in any::<i64>(),
        f in -1e12f64..1e12,
        tags in proptest::collection::btree_map(name(), name(), 1..=8),
    ) {
        let value = if int { v.to_string() } else { format!("{f:?}") };
        let tag_text: Vec<String> = tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let line = format!("put {metric} {ts} {value} {}\r\n", tag_text.join(" "));
        let p = parse_put_line(line.as_bytes(), &ParseConfig::default()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(p.metric, metric.as_str());
        prop_assert_eq!(p.timestamp, ts);
        prop_assert_eq!(p.value, if int { strata_tsdb::Value::Int(v) } else { strata_tsdb::Value::Float(f) });
        let got: Vec<(String, String)> = p.tags.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
        let want: Vec<(String, String)> = tags.into_iter().collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn http_round_trip(
        metric in name(),
        ts in 1i64..=9_999_999_999_999,
        v in any::<i64>(),
        as_string in any::<bool>(),
        tags in proptest::collection::btree_map(name(), name(), 1..=8),
    ) {
        let value = if as_string { serde_json::json!(v.to_string()) } else { serde_json::json!(v) };
        let body = serde_json::json!([{ "metric": metric, "timestamp": ts, "value": value, "tags": tags }]);
        let bytes = serde_json::to_vec(&body).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let p = parse_put_body(&bytes, &ParseConfig::default()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(p.failures().is_empty(), "{:?}", p.failures());
        let pt = p.points().next().ok_or_else(|| TestCaseError::fail("no point"))?;
        prop_assert_eq!(pt.metric, metric.as_str());
        prop_assert_eq!(pt.timestamp, ts);
        prop_assert_eq!(pt.value, strata_tsdb::Value::Int(v));
        prop_assert_eq!(pt.tags.len(), tags.len());
        for (k, val) in &tags {
            prop_assert_eq!(pt.tags.get(k), Some(val.as_str()));
        }
    }
}
