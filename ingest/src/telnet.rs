//! The telnet-style line protocol: command dispatch and `put` parsing
//! (OpenTSDB's `TelnetRpc` and `PutDataPointRpc.execute`).
//!
//! A `put` line is split on every single space, so consecutive spaces make empty tokens; they
//! count towards the argument total and empty tag tokens are skipped, as in OpenTSDB. The checks
//! run in OpenTSDB's order and the first failure wins. Strata differs from OpenTSDB in two ways
//! (`docs/compat.md` #1 and #7): lines are UTF-8, and `sec.frac` timestamps take a
//! fraction of 1–3 digits as milliseconds instead of deleting the dot.

use strata_tsdb::{STANDARD_NAME_BYTES, Value};

use crate::config::{MAX_INLINE_TAGS, ParseConfig};
use crate::error::PutError;
use crate::point::{
    MAX_TIMESTAMP_MS, POW10_EXACT, PointRef, Tags, check_point, is_millis, java_map, parse_long,
    parse_plain_decimal, parse_value,
};

/// The commands in OpenTSDB's registration order, which is also the order `help` prints.
/// `rollup` and `histogram` are not supported by Strata.
pub const COMMAND_NAMES: [&str; 7] = [
    "stats",
    "dropcaches",
    "version",
    "exit",
    "help",
    "put",
    "diediedie",
];

/// A telnet command, recognised by its first token (case-sensitive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command<'a> {
    /// `put ...`: holds the whole line without its terminator, for [`parse_put_line`].
    Put(&'a [u8]),
    /// `version`.
    Version,
    /// `stats`.
    Stats,
    /// `help`.
    Help,
    /// `dropcaches`.
    DropCaches,
    /// `exit`: close the connection without a reply.
    Exit,
    /// `diediedie`: shut the server down (if enabled).
    DieDieDie,
    /// Anything else, including an empty line: holds the first token.
    Unknown(&'a [u8]),
}

impl Command<'_> {
    /// For [`Command::Unknown`], OpenTSDB's reply line (with its `\n`).
    pub fn unknown_reply(&self) -> Option<String> {
        match self {
            Command::Unknown(tok) => Some(unknown_command_reply(tok)),
            _ => None,
        }
    }
}

/// `unknown command: <tok>.  Try `help'.` plus `\n` (two spaces after the period).
pub fn unknown_command_reply(token: &[u8]) -> String {
    format!(
        "unknown command: {}.  Try `help'.\n",
        String::from_utf8_lossy(token)
    )
}

/// `available commands: <name> <name> ... \n`, with a space after every name; `put` only when
/// the server takes writes.
pub fn help_reply(include_diediedie: bool, include_put: bool) -> String {
    let mut out = String::from("available commands:");
    for name in COMMAND_NAMES {
        if (name != "diediedie" || include_diediedie) && (name != "put" || include_put) {
            out.push(' ');
            out.push_str(name);
        }
    }
    out.push_str(" \n");
    out
}

/// Strips one trailing `\n` and then one trailing `\r`.
pub(crate) fn strip_terminator(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Recognises the command of one line (terminator optional).
pub fn parse_command(line: &[u8]) -> Command<'_> {
    let line = strip_terminator(line);
    let token = line.split(|&b| b == b' ').next().unwrap_or_default();
    match token {
        b"put" => Command::Put(line),
        b"version" => Command::Version,
        b"stats" => Command::Stats,
        b"help" => Command::Help,
        b"dropcaches" => Command::DropCaches,
        b"exit" => Command::Exit,
        b"diediedie" => Command::DieDieDie,
        other => Command::Unknown(other),
    }
}

impl PutError {
    /// The reply line sent to the client, with its `\n`.
    pub fn reply_line(&self) -> String {
        format!("{self}\n")
    }
}

/// Tags seen so far: inline in the common case, spilling to the heap only past
/// [`MAX_INLINE_TAGS`] (which is always an error, since `max_tags` is capped there).
#[derive(Default)]
struct TagSet<'a> {
    inline: Tags<'a>,
    spill: Vec<(&'a str, &'a str)>,
}

impl<'a> TagSet<'a> {
    fn iter(&self) -> impl Iterator<Item = (&'a str, &'a str)> + '_ {
        self.inline.iter().chain(self.spill.iter().copied())
    }

    /// OpenTSDB's `Tags.parse`: one `=`, both sides non-empty; a repeated identical pair is
    /// ignored, a repeated key with another value is an error.
    fn add(&mut self, token: &'a str) -> Result<(), PutError> {
        // Byte-wise: `=` is ASCII, so the split points are char boundaries.
        let bytes = token.as_bytes();
        let eq = bytes.iter().position(|&b| b == b'=');
        let Some(eq) = eq.filter(|&i| !bytes[i + 1..].contains(&b'=')) else {
            return Err(PutError::InvalidTag(token.to_owned()));
        };
        let (k, v) = (&token[..eq], &token[eq + 1..]);
        if k.is_empty() || v.is_empty() {
            return Err(PutError::InvalidTag(token.to_owned()));
        }
        let existing = self.iter().find(|&(key, _)| same_name(key, k));
        match existing {
            Some((_, old)) if old == v => Ok(()),
            Some(_) => Err(PutError::DuplicateTag {
                tag: token.to_owned(),
                tags: java_map(self.iter()),
            }),
            None => {
                if !self.inline.push(k, v) {
                    self.spill.push((k, v));
                }
                Ok(())
            }
        }
    }
}

/// `a == b` for short non-empty names, rejecting on the length and the first byte before
/// comparing the rest: most tag keys of a line differ there, and a full comparison is a call.
fn same_name(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.as_bytes().first() == b.as_bytes().first() && a == b
}

/// The tokens of a line split on every single space, as `str::split(' ')` yields them, found
/// byte by byte (a space is ASCII, so every split point is a char boundary).
struct Words<'a> {
    rest: Option<&'a str>,
}

impl<'a> Words<'a> {
    fn new(line: &'a str) -> Words<'a> {
        Words { rest: Some(line) }
    }
}

impl<'a> Iterator for Words<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let s = self.rest?;
        match s.bytes().position(|b| b == b' ') {
            Some(i) => {
                self.rest = Some(&s[i + 1..]);
                Some(&s[..i])
            }
            None => {
                self.rest = None;
                Some(s)
            }
        }
    }
}

/// Parses a telnet timestamp token: an integer (seconds or ms by magnitude), or `sec.frac` with
/// a 1–3 digit fraction of a second (Strata exception #7). Returns `(timestamp, millis)`.
fn parse_timestamp(tok: &str) -> Result<(i64, bool), PutError> {
    let dot = tok.bytes().position(|b| b == b'.');
    let Some((int, frac)) = dot.map(|i| (&tok[..i], &tok[i + 1..])) else {
        let ts = parse_long(tok).map_err(PutError::InvalidNumber)?;
        return Ok((ts, is_millis(ts)));
    };
    let secs = parse_long(int).map_err(PutError::InvalidNumber)?;
    if frac.is_empty() {
        return Ok((secs, is_millis(secs)));
    }
    if let Some(c) = frac.chars().find(|c| !c.is_ascii_digit()) {
        return Err(PutError::InvalidNumber(format!(
            "Invalid character '{c}' in {tok}"
        )));
    }
    if frac.len() > 3 {
        return Err(PutError::InvalidNumber(format!(
            "Too many digits after the point in {tok}: at most 3 (milliseconds) are allowed"
        )));
    }
    if secs > 0 && is_millis(secs) {
        return Err(PutError::InvalidNumber(format!(
            "A fraction of a second needs a timestamp in seconds: {tok}"
        )));
    }
    // ".5" is 500 ms, ".25" is 250 ms, ".250" is 250 ms.
    let frac_ms = frac
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0i64, |acc, b| acc * 10 + i64::from(b - b'0'));
    let ms = secs
        .checked_mul(1000)
        .and_then(|v| {
            if secs < 0 {
                v.checked_sub(frac_ms)
            } else {
                v.checked_add(frac_ms)
            }
        })
        .ok_or_else(|| PutError::InvalidNumber(format!("Overflow in {tok}")))?;
    Ok((ms, true))
}

/// Parses one `put` line (terminator optional) into a point, running OpenTSDB's checks in its
/// order (`PutDataPointRpc.execute`, then `TSDB.addPoint`). The first token is not checked: [`parse_command`] did that.
pub fn parse_put_line<'a>(line: &'a [u8], cfg: &ParseConfig) -> Result<PointRef<'a>, PutError> {
    let line = std::str::from_utf8(strip_terminator(line)).map_err(|_| PutError::InvalidUtf8)?;
    match parse_put_fast(line, cfg) {
        Some(p) => Ok(p),
        None => parse_put_full(line, cfg),
    }
}

/// [`parse_put_line`] for any line, in OpenTSDB's order of checks.
pub(crate) fn parse_put_full<'a>(
    line: &'a str,
    cfg: &ParseConfig,
) -> Result<PointRef<'a>, PutError> {
    let mut words = Words::new(line);
    let _command = words.next();
    let (Some(metric), Some(ts_tok), Some(value_tok), Some(first_tag)) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(PutError::NotEnoughArguments {
            got: Words::new(line).count() - 1,
        });
    };
    if metric.is_empty() {
        return Err(PutError::EmptyMetric);
    }
    let (timestamp, millis) = parse_timestamp(ts_tok)?;
    if timestamp <= 0 {
        return Err(PutError::InvalidTimestamp(timestamp));
    }
    if value_tok.is_empty() {
        return Err(PutError::EmptyValue);
    }
    let mut tags = TagSet::default();
    for tok in std::iter::once(first_tag).chain(words) {
        if !tok.is_empty() {
            tags.add(tok)?;
        }
    }
    let value = parse_value(value_tok).map_err(PutError::InvalidNumber)?;
    if tags.spill.is_empty() {
        check_point(
            cfg,
            metric,
            timestamp,
            millis,
            value,
            tags.inline.as_slice(),
        )?;
    } else {
        let all: Vec<_> = tags.iter().collect();
        check_point(cfg, metric, timestamp, millis, value, &all)?;
    }
    debug_assert!(tags.inline.len() <= MAX_INLINE_TAGS);
    Ok(PointRef {
        metric,
        timestamp,
        millis,
        value,
        tags: tags.inline,
    })
}

/// The common, well-formed `put` line in one pass over its bytes: standard-character names,
/// an unsigned integer timestamp, an integer or plain decimal value, and distinct `k=v` tags
/// separated by single spaces. Anything else (including every line with an error) gives
/// `None` and goes through the full parser, which then decides; where both accept a line
/// they agree (`proptests::fast_put_path_agrees_with_the_full_parser`).
pub(crate) fn parse_put_fast<'a>(line: &'a str, cfg: &ParseConfig) -> Option<PointRef<'a>> {
    let b = line.as_bytes();
    let name_end = |mut i: usize| {
        while i < b.len() && STANDARD_NAME_BYTES[usize::from(b[i])] {
            i += 1;
        }
        i
    };
    let mut i = b.strip_prefix(b"put ").map(|_| 4)?;
    let end = name_end(i);
    if end == i || b.get(end) != Some(&b' ') {
        return None;
    }
    let metric = &line[i..end];
    i = end + 1;
    let mut timestamp: i64 = 0;
    let start = i;
    while i < b.len() && b[i].is_ascii_digit() && i - start < 13 {
        timestamp = timestamp * 10 + i64::from(b[i] - b'0');
        i += 1;
    }
    if i == start || b.get(i) != Some(&b' ') {
        return None;
    }
    i += 1;
    let start = i;
    while i < b.len() && b[i] != b' ' {
        i += 1;
    }
    let value = fast_value(&line[start..i])?;
    let mut tags = Tags::default();
    while b.get(i) == Some(&b' ') {
        let k0 = i + 1;
        let k1 = name_end(k0);
        if k1 == k0 || b.get(k1) != Some(&b'=') {
            return None;
        }
        let v1 = name_end(k1 + 1);
        if v1 == k1 + 1 {
            return None;
        }
        let (k, v) = (&line[k0..k1], &line[k1 + 1..v1]);
        if tags.iter().any(|(key, _)| same_name(key, k)) || !tags.push(k, v) {
            return None;
        }
        i = v1;
    }
    let millis = is_millis(timestamp);
    let valid = i == b.len()
        && !tags.is_empty()
        && tags.len() <= cfg.max_tags()
        && timestamp > 0
        && !(millis && timestamp > MAX_TIMESTAMP_MS);
    valid.then_some(PointRef {
        metric,
        timestamp,
        millis,
        value,
        tags,
    })
}

/// Refuses a timestamp the storage layer would misread.
///
/// Storage tells seconds from milliseconds by magnitude (`<= 0xFFFFFFFF` is seconds), so a
/// millisecond instant before 1970-02-19T17:02:47.296Z that is not a whole second cannot be
/// handed to it. Only a `sec.frac` timestamp with a small seconds part is one (`put m 5.5 …` is
/// 5 500 ms); OpenTSDB would store it 50 years off, Strata refuses it. Whole seconds (`5.000`)
/// are fine: [`PointRef::to_tsdb`] passes them as seconds. Run on what [`parse_put_line`]
/// returns, before storing it.
pub fn check_units(p: PointRef<'_>) -> Result<PointRef<'_>, PutError> {
    if p.millis && !is_millis(p.timestamp) && p.timestamp % 1000 != 0 {
        return Err(PutError::InvalidNumber(format!(
            "A fraction of a second needs a time after 1970-02-19T17:02:47Z: {}.{:03}",
            p.timestamp / 1000,
            p.timestamp % 1000
        )));
    }
    Ok(p)
}

/// The parts of a `put` line that change from point to point, and the text that names its
/// series; see [`parse_put_head`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PutHead<'a> {
    /// The bytes between `put ` and the next space, unchecked.
    pub metric: &'a [u8],
    /// The timestamp, in seconds or milliseconds by magnitude, as [`PointRef::timestamp`].
    pub timestamp: i64,
    /// Whether the timestamp is in milliseconds.
    pub millis: bool,
    /// The value: always a finite number.
    pub value: Value,
    /// Everything after the value's space, terminator removed: the tags as sent, unchecked.
    pub tags: &'a [u8],
}

/// Splits a `put` line into metric, timestamp, value and tag text, without looking at the
/// names: for a caller that has seen the same metric and tag text in a line that
/// [`parse_put_line`] took.
///
/// The promise: if this takes a line, and [`parse_put_line`] takes some line with the same
/// metric and tag text, then it takes this line too, to the metric and tags of that line and
/// the timestamp and value given here. The checks that do not depend on the names are all made
/// here, and only plain forms are taken: a timestamp of 1 to 13 digits that is positive and
/// within both OpenTSDB's range and that of a row's 32-bit base time, and a value that
/// [`parse_put_line`] reads the same way.
pub fn parse_put_head(line: &[u8]) -> Option<PutHead<'_>> {
    let b = strip_terminator(line).strip_prefix(b"put ")?;
    let m = b.iter().position(|&c| c == b' ')?;
    let metric = &b[..m];
    // Each number is read in the one pass that finds its end.
    let (mut timestamp, mut i) = (0i64, m + 1);
    while let Some(d) = b.get(i).filter(|d| d.is_ascii_digit()) {
        if i - m > 13 {
            return None;
        }
        timestamp = timestamp * 10 + i64::from(d - b'0');
        i += 1;
    }
    if i == m + 1 || b.get(i) != Some(&b' ') {
        return None;
    }
    let millis = is_millis(timestamp);
    let in_range = if millis {
        timestamp <= MAX_TIMESTAMP_MS && timestamp / 1000 <= i64::from(u32::MAX)
    } else {
        timestamp > 0
    };
    if !in_range {
        return None;
    }
    let (value, end) = head_value(b, i + 1)?;
    Some(PutHead {
        metric,
        timestamp,
        millis,
        value,
        tags: &b[end + 1..],
    })
}

/// The value at `b[i..]`, in one pass: what [`fast_value`] takes of the token there, and the
/// index of the space after it; `None` for anything else. (A plain decimal is always finite.)
fn head_value(b: &[u8], mut i: usize) -> Option<(Value, usize)> {
    let neg = b.get(i) == Some(&b'-');
    i += usize::from(neg);
    let start = i;
    let mut mantissa: u64 = 0;
    let mut digits = |i: &mut usize| {
        while let Some(d) = b.get(*i).filter(|d| d.is_ascii_digit()) {
            mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
            *i += 1;
        }
    };
    digits(&mut i);
    let whole = i - start;
    match b.get(i) {
        Some(b' ') if (1..=18).contains(&whole) => {
            // At most 18 digits: below 2^63.
            let v = mantissa as i64;
            Some((Value::Int(if neg { -v } else { v }), i))
        }
        Some(b'.') if whole >= 1 => {
            i += 1;
            let frac_start = i;
            digits(&mut i);
            let frac = i - frac_start;
            if frac == 0 || whole + frac > 15 || b.get(i) != Some(&b' ') {
                return None;
            }
            let v = mantissa as f64 / POW10_EXACT[frac];
            Some((Value::Float(if neg { -v } else { v }), i))
        }
        _ => None,
    }
}

/// A `put` value the fast path takes: `[-]digits` (at most 18) or a plain decimal.
pub(crate) fn fast_value(tok: &str) -> Option<Value> {
    let digits = tok.strip_prefix('-').unwrap_or(tok).as_bytes();
    if !digits.is_empty() && digits.len() <= 18 && digits.iter().all(u8::is_ascii_digit) {
        let v = digits
            .iter()
            .fold(0i64, |acc, &d| acc * 10 + i64::from(d - b'0'));
        return Some(Value::Int(if tok.starts_with('-') { -v } else { v }));
    }
    parse_plain_decimal(tok).map(Value::Float)
}

#[cfg(test)]
#[path = "telnet/tests.rs"]
mod tests;
