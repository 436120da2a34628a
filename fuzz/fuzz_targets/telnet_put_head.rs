//! The telnet fast path on arbitrary bytes: `parse_put_head` (as is and behind `put `). What
//! it takes must be well formed (positive timestamp in the unit its size says, finite value,
//! metric without a space), agree with `parse_put_line` on the same line, and keep its
//! promise: if the full parser takes a line with the same metric and tag text, it takes this
//! line too, to that line's names and the head's timestamp and value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_ingest::{ParseConfig, is_millis, parse_put_head, parse_put_line};
use strata_tsdb::Value;

fn check(line: &[u8]) {
    let Some(h) = parse_put_head(line) else {
        return;
    };
    assert!(line.starts_with(b"put "));
    assert!(!h.metric.contains(&b' '));
    assert!(h.timestamp > 0 && h.millis == is_millis(h.timestamp));
    if let Value::Float(v) = h.value {
        assert!(v.is_finite());
    }
    let cfg = ParseConfig::new();
    let full = parse_put_line(line, &cfg);
    if let Ok(p) = &full {
        assert_eq!(p.metric.as_bytes(), h.metric);
        assert_eq!(
            (p.timestamp, p.millis, p.value),
            (h.timestamp, h.millis, h.value)
        );
    }
    // `\r\n` is exactly what the full parser strips from `seen`, so its tag text is the
    // head's even when that ends in `\r` or `\n` (as in "...\r\n\n").
    let seen = [b"put ", h.metric, b" 1356998400 1 ", h.tags, b"\r\n"].concat();
    if let Ok(known) = parse_put_line(&seen, &cfg) {
        let p = full.unwrap_or_else(|e| {
            panic!("the head took {line:?}, the full parser refused it ({e}) after {seen:?}")
        });
        assert_eq!((p.metric, p.tags), (known.metric, known.tags));
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    check(&[&b"put "[..], data].concat());
});
