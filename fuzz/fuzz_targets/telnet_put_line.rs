//! Telnet framing and `put` parsing on arbitrary bytes: `LineSplitter` cuts the input (as a
//! socket would deliver it, in two reads), `parse_command` recognises each line and
//! `parse_put_line` parses the puts. Nothing may panic; a parsed point must satisfy the checks
//! the parser promises (non-empty metric, at least one tag, a positive timestamp), and an
//! error must render as a `put: ` reply line.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use strata_ingest::{Command, LineSplitter, ParseConfig, parse_command, parse_put_line};

fuzz_target!(|data: &[u8]| {
    let cfg = ParseConfig::new();
    // The first byte picks the line limit and where the input is split into two reads.
    let (knob, data) = data.split_first().map_or((0, data), |(k, d)| (*k, d));
    let mut splitter = LineSplitter::new(16 + usize::from(knob) * 8);
    let cut = usize::from(knob).min(data.len());
    let mut buf = BytesMut::new();
    let mut lines = Vec::new();
    'reads: for part in [&data[..cut], &data[cut..]] {
        buf.extend_from_slice(part);
        loop {
            match splitter.next_line(&mut buf) {
                Ok(Some(line)) => lines.push(line),
                Ok(None) => break,
                Err(_) => break 'reads,
            }
        }
    }
    if let Ok(Some(line)) = splitter.finish(&mut buf) {
        lines.push(line);
    }
    // The whole input as one line too, so long and odd lines reach the parser.
    lines.push(bytes::Bytes::copy_from_slice(data));
    for line in &lines {
        if let Command::Put(_) = parse_command(line) {
            match parse_put_line(line, &cfg) {
                Ok(p) => {
                    assert!(!p.metric.is_empty());
                    assert!(!p.tags.is_empty());
                    assert!(p.timestamp > 0);
                }
                // An error must render as one reply line.
                Err(e) => {
                    let reply = e.reply_line();
                    assert!(
                        reply.starts_with("put: ") && reply.ends_with('\n'),
                        "{reply}"
                    );
                }
            }
        }
    }
});
