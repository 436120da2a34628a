//! A stable-toolchain stand-in for the `telnet_put_line`, `telnet_put_head`, `http_put_body`,
//! `influx_lines` and `remote_write_body` cargo-fuzz targets in `fuzz/`: bounded proptest runs
//! that feed arbitrary bytes, and mutations of valid lines and bodies, to every parser of the
//! write protocols.
//! Nothing may panic; results must keep the parsers' promises (among them the telnet fast
//! path's, `parse_put_head`, against the full parser). The case counts keep the whole file to
//! a few seconds.

use std::io::Write as _;

use bytes::BytesMut;
use proptest::prelude::*;
use strata_ingest::{
    Command, LineSplitter, ParseConfig, decode_body, is_millis, parse_command, parse_put_body,
    parse_put_head, parse_put_line,
};

/// Cases per property: enough to cover each mutation kind many times, small enough for CI.
const CASES: u32 = 256;

const VALID_LINES: &[&str] = &[
    "put sys.cpu.user 1356998400 42.5 host=web01 cpu=0",
    "put sys.cpu.user 1356998400123 -7 host=web01\r\n",
    "put m 1364410924.250 1e3 a=b c=d e=f",
    "put  m  1 2  h=a ",
    "put net.bytes 1700000000 9223372036854775807 dc=eu-1 rack=r/12",
    "put m 1 NaN h=a",
    "version",
    "stats\n",
];

/// Lines the telnet fast path takes, and some it must leave to the full parser.
const HEAD_LINES: &[&str] = &[
    "put sys.cpu.user 1356998400 42 host=web01 cpu=0",
    "put sys.cpu.user 1356998400123 -7.25 host=web01\r\n",
    "put m 4294967295999 123456789012345678 h=a",
    "put m 1 0.000000000000001 h=a\n",
    "put m 1356998400 1 h=a h=a",
    "put m 1356998400 1 h=a  b=c",
    "put m 1356998400 1 ",
    "put m\t1 1 h=a",
];

const VALID_BODIES: &[&str] = &[
    r#"{"metric":"sys.mem","timestamp":1356998400,"value":"12.5","tags":{"host":"a"}}"#,
    r#"[{"metric":"m","timestamp":1356998400123,"value":1,"tags":{"h":"a","x":"y"}},
        {"metric":"m","timestamp":"1356998401","value":-2.5e3,"tags":{"h":"b"}}]"#,
    r#"[{"metric":"m","timestamp":1.5,"value":NaN,"tags":{"h":null}},{"unknown":[1,{"a":2}]}]"#,
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
        // Structural bytes are the interesting ones to insert.
        (
            any::<usize>(),
            prop::sample::select(b" =.\r\n\"{}[],:\\-+eE0".to_vec())
        )
            .prop_map(|(at, byte)| Mutation::Insert { at, byte }),
        any::<usize>().prop_map(|at| Mutation::Delete { at }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        (any::<usize>(), 1usize..16).prop_map(|(at, len)| Mutation::Duplicate { at, len }),
    ]
}

fn apply(mut data: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
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

/// Runs the telnet path over `data` as one line and checks what a parsed point promises.
fn check_line(data: &[u8]) {
    let cfg = ParseConfig::new();
    let _ = parse_command(data);
    // parse_put_line ignores the first token, so feed it both as is and behind `put `.
    let mut prefixed = b"put ".to_vec();
    prefixed.extend_from_slice(data);
    for line in [data, &prefixed[..]] {
        match parse_put_line(line, &cfg) {
            Ok(p) => {
                assert!(!p.metric.is_empty());
                assert!(!p.tags.is_empty());
                assert!(p.timestamp > 0);
                assert!(p.tags.len() <= cfg.max_tags());
            }
            // An error must render as a reply line.
            Err(e) => assert!(e.to_string().starts_with("put: "), "{e}"),
        }
        if let Command::Unknown(tok) = parse_command(line) {
            assert!(line.starts_with(tok));
        }
    }
}

/// Runs the telnet fast path over `line`: what it takes is well formed, and it keeps its
/// promise (see `parse_put_head`): if the full parser takes a line with the same metric and
/// tag text, it takes this line too, to that line's names and the head's timestamp and value.
fn check_head(line: &[u8]) {
    let Some(h) = parse_put_head(line) else {
        return;
    };
    assert!(line.starts_with(b"put "));
    assert!(!h.metric.contains(&b' '));
    assert!(h.timestamp > 0 && h.millis == is_millis(h.timestamp));
    if let strata_tsdb::Value::Float(v) = h.value {
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

/// Runs the HTTP path over `body` and checks the counts add up.
fn check_body(body: &[u8], gzip: bool) {
    let decoded = match decode_body(body, gzip, 1 << 20) {
        Ok(d) => d,
        Err(e) => {
            assert!(matches!(e.status(), 400 | 413));
            return;
        }
    };
    match parse_put_body(&decoded, &ParseConfig::new()) {
        Ok(parsed) => {
            assert_eq!(
                parsed.good_count() + parsed.failures().len(),
                parsed.total()
            );
            assert_eq!(parsed.points().count(), parsed.good_count());
        }
        Err(e) => {
            assert!(matches!(e.status(), 400 | 413));
            assert!(!e.to_json().is_empty());
        }
    }
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(data).expect("writing to a Vec");
    enc.finish().expect("finishing a Vec")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn arbitrary_bytes_never_panic_the_line_parsers(
        data in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        check_line(&data);
    }

    #[test]
    fn mutated_put_lines_never_panic(
        base in prop::sample::select(VALID_LINES),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        check_line(&apply(base.as_bytes().to_vec(), &mutations));
    }

    #[test]
    fn arbitrary_bytes_keep_the_fast_path_promise(
        data in prop::collection::vec(any::<u8>(), 0..160),
        prefixed in any::<bool>(),
    ) {
        let line = if prefixed { [&b"put "[..], &data].concat() } else { data };
        check_head(&line);
    }

    #[test]
    fn mutated_put_lines_keep_the_fast_path_promise(
        base in prop::sample::select([HEAD_LINES, VALID_LINES].concat()),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let line = apply(base.as_bytes().to_vec(), &mutations);
        check_head(&line);
        check_line(&line);
    }

    #[test]
    fn line_splitter_survives_any_stream_and_chunking(
        data in prop::collection::vec(
            prop_oneof![any::<u8>(), Just(b'\n'), Just(b'\r')], 0..600),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
        max in 0usize..64,
    ) {
        let mut splitter = LineSplitter::new(max);
        let mut buf = BytesMut::new();
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
        points.push(data.len());
        points.sort_unstable();
        let mut from = 0;
        let mut consumed = 0;
        let mut failed = false;
        'reads: for to in points {
            buf.extend_from_slice(&data[from..to]);
            from = to;
            loop {
                match splitter.next_line(&mut buf) {
                    Ok(Some(line)) => {
                        prop_assert!(line.len() <= max);
                        prop_assert!(!line.contains(&b'\n'));
                        consumed += 1;
                        check_line(&line);
                    }
                    Ok(None) => break,
                    Err(_) => {
                        failed = true;
                        break 'reads;
                    }
                }
            }
        }
        if !failed && let Ok(Some(line)) = splitter.finish(&mut buf) {
            prop_assert!(line.len() <= max);
            consumed += 1;
        }
        prop_assert!(consumed <= data.len() + 1);
    }

    #[test]
    fn arbitrary_bodies_never_panic_the_put_parser(
        data in prop::collection::vec(any::<u8>(), 0..512),
        gz in any::<bool>(),
    ) {
        check_body(&data, gz);
        // The same bytes, validly gzipped.
        check_body(&gzip(&data), true);
    }

    #[test]
    fn mutated_put_bodies_never_panic(
        base in prop::sample::select(VALID_BODIES),
        mutations in prop::collection::vec(mutation(), 1..6),
        gz in any::<bool>(),
    ) {
        let body = apply(base.as_bytes().to_vec(), &mutations);
        check_body(&body, false);
        if gz {
            check_body(&gzip(&body), true);
            // A corrupted gzip stream must be an error, not a panic.
            check_body(&apply(gzip(base.as_bytes()), &mutations), true);
        }
    }
}

#[test]
fn hostile_shapes_are_errors_not_crashes() {
    // Deep nesting, a huge number token, and a gzip bomb past the limit.
    check_body("[".repeat(100_000).as_bytes(), false);
    check_body(
        format!("[{{\"x\":{}}}]", "9".repeat(100_000)).as_bytes(),
        false,
    );
    let bomb = gzip(&vec![b' '; 4 << 20]);
    assert_eq!(
        decode_body(&bomb, true, 1 << 20).err().map(|e| e.status()),
        Some(413)
    );
    check_line(&vec![b'9'; 100_000]);
    check_line(b"put m 99999999999999999999999.9 1 h=a");
    for line in HEAD_LINES {
        check_head(line.as_bytes());
    }
    assert!(parse_put_head(HEAD_LINES[0].as_bytes()).is_some());
}

/// Found by the `telnet_put_head` fuzzer: a line ending in `\r\n\n` keeps `\r\n` in its
/// tag text (one terminator is stripped), so the line that shares it must end in it too.
#[test]
fn fast_path_promise_holds_for_a_line_with_two_terminators() {
    let line = b"put sys.cpu.user 13569984123 -7.25 host=web00\r\n\n";
    let head = parse_put_head(line).expect("the fast path takes the line");
    assert_eq!(head.tags, b"host=web00\r\n");
    assert!(parse_put_line(line, &ParseConfig::new()).is_err());
    check_head(line);
    check_head(b"put m 1356998400 1 h=a\r\r");
}

// The collectors' protocols: stand-ins for the `influx_lines` and `remote_write_body` targets.

const VALID_LINE_BODIES: &[&str] = &[
    "cpu,host=a,region=us-west usage=12.5,procs=301i,up=true,name=\"x y\" 1700000000000000000\n",
    "disk\\ io,mount\\ point=/var\\,log,k\\=1=a\\=b read\\ bytes=5i,w=1u 1700000000\n# c\n\nm v=1",
    "m,h=a v=-1.5e-3,w=F,s=\"multi\nline \\\" quote\" 5\r\nm,h=b v=18446744073709551615u,x=1i -5",
];

/// Parses a line protocol body and checks what a batch promises: every field is a point or a
/// refusal, every name is a valid OpenTSDB name, and both APIs answer with a known status.
fn check_lines(body: &[u8]) {
    use strata_ingest::{InfluxApi, InfluxBatch, Precision};
    for precision in [Precision::Nanoseconds, Precision::Hours] {
        let batch = InfluxBatch::parse(body, precision, 1_700_000_000_000);
        let points = batch.points().points();
        assert_eq!(
            batch.received(),
            (points.len() + batch.refusals().count()) as u64
        );
        for p in &points {
            assert!(
                strata_tsdb::unescape_name(p.metric).is_some(),
                "{}",
                p.metric
            );
            for (k, v) in p.tags {
                assert!(strata_tsdb::unescape_name(k).is_some(), "{k}");
                assert!(strata_tsdb::unescape_name(v).is_some(), "{v}");
            }
        }
        let ok: Vec<strata_tsdb::Result<()>> = points.iter().map(|_| Ok(())).collect();
        for api in [InfluxApi::V1, InfluxApi::V2] {
            let results = if batch.rejects_all(api) {
                &[][..]
            } else {
                &ok[..]
            };
            let reply = batch.reply(api, results);
            assert!(matches!(reply.status, 204 | 400 | 422), "{}", reply.status);
            assert_eq!(reply.stored, results.len() as u64);
        }
    }
}

/// Decodes a remote write body (snappy around `raw`) and maps it; nothing may panic.
fn check_remote_write(raw: &[u8]) {
    use strata_ingest::{RemoteWriteBatch, decompress_write_request};
    let body = snap_compress(raw);
    for b in [raw, &body[..]] {
        let decoded = decompress_write_request(b, 1 << 20).and_then(|raw| {
            let mut batch = RemoteWriteBatch::decode(&raw)?;
            let n = batch.mapped_points()?.len();
            let ok: Vec<strata_tsdb::Result<()>> = (0..n).map(|_| Ok(())).collect();
            Ok((batch.reply(&ok), n))
        });
        match decoded {
            Ok((reply, n)) => {
                assert!(matches!(reply.status, 204 | 400), "{}", reply.status);
                assert_eq!(reply.stored, n as u64);
            }
            Err(e) => assert!(matches!(e.status(), 400 | 413)),
        }
    }
}

fn snap_compress(data: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new()
        .compress_vec(data)
        .unwrap_or_default()
}

/// A valid protobuf `WriteRequest` (not compressed) with two series, names that need mapping,
/// a stale marker and an empty label value.
fn valid_write_request() -> Vec<u8> {
    use prost::Message as _;
    use strata_ingest::{Label, STALE_NAN_BITS, Sample, TimeSeries, WriteRequest};
    let label = |n: &str, v: &str| Label {
        name: n.to_string().into(),
        value: v.to_string().into(),
    };
    let sample = |value: f64, timestamp: i64| Sample { value, timestamp };
    WriteRequest {
        timeseries: vec![
            TimeSeries {
                labels: vec![label("__name__", "a:b"), label("instance", "h:9090")],
                samples: vec![
                    sample(1.5, 1_700_000_000_000),
                    sample(f64::from_bits(STALE_NAN_BITS), 1_700_000_015_000),
                ],
            },
            TimeSeries {
                labels: vec![label("__name__", "up"), label("job", "")],
                samples: vec![sample(1.0, 5)],
            },
        ],
    }
    .encode_to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn arbitrary_bytes_never_panic_the_collector_parsers(
        data in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        check_lines(&data);
        check_remote_write(&data);
    }

    #[test]
    fn mutated_line_bodies_keep_their_promises(
        base in prop::sample::select(VALID_LINE_BODIES),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        check_lines(&apply(base.as_bytes().to_vec(), &mutations));
    }

    #[test]
    fn mutated_write_requests_never_panic(
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        check_remote_write(&apply(valid_write_request(), &mutations));
    }
}

#[test]
fn the_stand_in_seeds_are_valid() {
    let raw = valid_write_request();
    let mut batch = strata_ingest::RemoteWriteBatch::decode(&raw).unwrap();
    assert_eq!(batch.mapped_points().map(|p| p.len()).ok(), Some(1));
    assert_eq!(batch.stale_markers(), 1);
    for body in VALID_LINE_BODIES {
        let b = strata_ingest::InfluxBatch::parse(
            body.as_bytes(),
            strata_ingest::Precision::Nanoseconds,
            1_700_000_000_000,
        );
        assert!(!b.points().is_empty(), "{body}");
    }
}
