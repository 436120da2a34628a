//! The Influx line protocol tokenizer: splits a body into lines and parses one line into its
//! measurement, tags, fields and timestamp, with the protocol's escaping rules:
//!
//! - a measurement ends at an unescaped `,` or space; `\,` and `\ ` stand for the character;
//! - tag keys, tag values and field keys end at an unescaped `,`, `=` or space; `\,`, `\=` and
//!   `\ ` stand for the character;
//! - any other backslash is a literal backslash, as in InfluxDB;
//! - a string field value is quoted; inside it `\"` and `\\` stand for `"` and `\`, and it may
//!   span lines;
//! - integers end in `i`, unsigned integers in `u`, booleans are `t`, `T`, `true`, `True`,
//!   `TRUE` and the `f` forms; anything else numeric is a float;
//! - lines starting with `#` (after spaces) are comments; blank lines are skipped; a `\r`
//!   before the `\n` is ignored.
//!
//! The error texts are InfluxDB's, because clients show them.

use std::borrow::Cow;

use strata_tsdb::Value;

use crate::point::parse_plain_decimal;

/// The characters a measurement escapes.
const MEASUREMENT_ESCAPES: &[u8] = b", ";
/// The characters tag keys, tag values and field keys escape.
const KEY_ESCAPES: &[u8] = b",= ";

/// A field value as sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum FieldValue {
    /// A float (no suffix).
    Float(f64),
    /// An integer (`i` suffix).
    Int(i64),
    /// An unsigned integer (`u` suffix).
    UInt(u64),
    /// A boolean.
    Bool(bool),
    /// A quoted string; its text is not needed.
    Str,
}

impl FieldValue {
    /// The value as stored: integers as integers, floats as floats, booleans as 1 and 0, and
    /// unsigned integers as integers when they fit; `None` for a string or a larger unsigned.
    pub(crate) fn stored(self) -> Option<Value> {
        Some(match self {
            FieldValue::Float(f) => Value::Float(f),
            FieldValue::Int(i) => Value::Int(i),
            FieldValue::Bool(b) => Value::Int(i64::from(b)),
            FieldValue::UInt(u) => Value::Int(i64::try_from(u).ok()?),
            FieldValue::Str => return None,
        })
    }
}

/// One parsed line. Names are unescaped and borrow from the line where they can.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Line<'a> {
    pub(crate) measurement: Cow<'a, str>,
    pub(crate) tags: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    pub(crate) fields: Vec<(Cow<'a, str>, FieldValue)>,
    /// The timestamp as sent, in the request's precision.
    pub(crate) timestamp: Option<i64>,
}

/// What a line of the body is.
#[derive(Debug, PartialEq)]
pub(crate) enum LineKind<'a> {
    /// Blank or a comment.
    Skip,
    /// A point line, leading whitespace removed.
    Point(&'a [u8]),
}

/// Splits `body` into lines the way InfluxDB does: a `\n` ends a line unless it is escaped
/// or inside a quoted field value. Yields each line (without its `\n`) classified.
pub(crate) fn lines(body: &[u8]) -> impl Iterator<Item = LineKind<'_>> + '_ {
    let mut pos = 0;
    std::iter::from_fn(move || {
        if pos >= body.len() {
            return None;
        }
        let end = line_end(body, pos);
        let line = &body[pos..end];
        pos = end + 1;
        Some(match point_range(line) {
            None => LineKind::Skip,
            Some(point) => LineKind::Point(&line[point]),
        })
    })
}

/// The bytes of the point in `line` (without its `\n`), after a trailing `\r` is dropped
/// and leading whitespace skipped; `None` for a blank line or a comment.
pub(crate) fn point_range(line: &[u8]) -> Option<std::ops::Range<usize>> {
    let end = match line {
        [rest @ .., b'\r'] => rest.len(),
        _ => line.len(),
    };
    let start = skip_whitespace(&line[..end], 0);
    match line[..end].get(start) {
        None | Some(b'#') => None,
        Some(_) => Some(start..end),
    }
}

/// The index of the `\n` ending the line that starts at `start`, or the body's length.
fn line_end(b: &[u8], start: usize) -> usize {
    // Most lines hold neither a quote nor a backslash, so the next `\n` ends them.
    let next = memchr::memchr(b'\n', &b[start..]).map_or(b.len(), |i| start + i);
    if memchr::memchr2(b'"', b'\\', &b[start..next]).is_none() {
        return next;
    }
    let (mut i, mut in_fields, mut quoted) = (start, false, false);
    let (mut equals, mut commas) = (0usize, 0usize);
    while i < b.len() {
        match b[i] {
            b'\\' => {
                i += 2;
                continue;
            }
            b' ' if !quoted => in_fields = true,
            b'=' if in_fields && !quoted => equals += 1,
            b',' if in_fields && !quoted => commas += 1,
            // A quote counts only where a field value starts or ends.
            b'"' if in_fields && equals > commas => quoted = !quoted,
            b'\n' if !quoted => return i,
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// Skips spaces, tabs and NULs, as InfluxDB does between sections.
pub(crate) fn skip_whitespace(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | 0) {
        i += 1;
    }
    i
}

/// The index of the first unescaped byte of `stops` from `i` on, or the length.
fn scan_until(b: &[u8], mut i: usize, escapes: &[u8], stops: &[u8]) -> usize {
    while i < b.len() {
        let c = b[i];
        if c == b'\\' && i + 1 < b.len() && escapes.contains(&b[i + 1]) {
            i += 2;
            continue;
        }
        if stops.contains(&c) {
            return i;
        }
        i += 1;
    }
    i
}

/// `raw` with each backslash before one of `escapes` removed.
fn unescape<'a>(raw: &'a str, escapes: &[u8]) -> Cow<'a, str> {
    if !raw.contains('\\') {
        return Cow::Borrowed(raw);
    }
    let b = raw.as_bytes();
    let mut out = String::with_capacity(raw.len());
    let (mut last, mut i) = (0, 0);
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() && escapes.contains(&b[i + 1]) {
            // Both bytes are ASCII, so these are character boundaries.
            out.push_str(&raw[last..i]);
            last = i + 1;
            i += 2;
        } else {
            i += 1;
        }
    }
    out.push_str(&raw[last..]);
    Cow::Owned(out)
}

/// Parses one point line (leading whitespace already removed) into `out`, which is cleared
/// first. The error is InfluxDB's reason text.
pub(crate) fn parse_line<'a>(line: &'a str, out: &mut Line<'a>) -> Result<(), &'static str> {
    out.tags.clear();
    out.fields.clear();
    out.timestamp = None;
    let b = line.as_bytes();
    let n = b.len();
    if b.first() == Some(&b',') {
        return Err("missing measurement");
    }
    let m_end = scan_until(b, 0, MEASUREMENT_ESCAPES, b", ");
    if m_end >= n {
        return Err("missing fields");
    }
    out.measurement = unescape(&line[..m_end], MEASUREMENT_ESCAPES);
    let mut i = m_end + 1;
    if b[m_end] == b',' {
        i = parse_tags(line, i, out)?;
    }
    i = skip_whitespace(b, i);
    if i >= n {
        return Err("missing fields");
    }
    i = parse_fields(line, i, out)?;
    out.timestamp = parse_timestamp(line, i)?;
    Ok(())
}

/// Parses what follows the fields from `i` on: whitespace, then the timestamp if any.
pub(crate) fn parse_timestamp(line: &str, mut i: usize) -> Result<Option<i64>, &'static str> {
    let b = line.as_bytes();
    let n = b.len();
    i = skip_whitespace(b, i);
    if i >= n {
        return Ok(None);
    }
    let start = i;
    if b[i] == b'-' {
        i += 1;
    }
    let digits = i;
    // Accumulated negatively, so that i64::MIN parses too.
    let mut neg_ts: i64 = 0;
    while i < n && b[i] != b' ' {
        if !b[i].is_ascii_digit() {
            return Err("bad timestamp");
        }
        neg_ts = neg_ts
            .checked_mul(10)
            .and_then(|t| t.checked_sub(i64::from(b[i] - b'0')))
            .ok_or("bad timestamp")?;
        i += 1;
    }
    if i == digits {
        return Err("bad timestamp");
    }
    let ts = if digits == start {
        neg_ts.checked_neg().ok_or("bad timestamp")?
    } else {
        neg_ts
    };
    if b[i..].iter().any(|&c| c != b' ') {
        return Err("point is invalid");
    }
    Ok(Some(ts))
}

/// Parses `k=v[,k=v…]` up to the space before the fields; returns the index after the space.
fn parse_tags<'a>(line: &'a str, mut i: usize, out: &mut Line<'a>) -> Result<usize, &'static str> {
    let b = line.as_bytes();
    let n = b.len();
    loop {
        if i >= n || matches!(b[i], b' ' | b',' | b'=') {
            return Err("missing tag key");
        }
        let k_end = scan_until(b, i, KEY_ESCAPES, b"=, ");
        if k_end >= n || b[k_end] != b'=' {
            return Err("missing tag value");
        }
        let key = &line[i..k_end];
        i = k_end + 1;
        if i >= n || matches!(b[i], b' ' | b',') {
            return Err("missing tag value");
        }
        let v_end = scan_until(b, i, KEY_ESCAPES, b"=, ");
        if v_end >= n {
            return Err("missing fields");
        }
        if b[v_end] == b'=' {
            return Err("invalid tag format");
        }
        // Unescaping is one-to-one on keys, so comparing unescaped keys finds the duplicates.
        let key = unescape(key, KEY_ESCAPES);
        if out.tags.iter().any(|(k, _)| *k == key) {
            return Err("duplicate tags");
        }
        out.tags.push((key, unescape(&line[i..v_end], KEY_ESCAPES)));
        i = v_end + 1;
        if b[v_end] == b' ' {
            return Ok(i);
        }
    }
}

/// Parses `k=v[,k=v…]`; returns the index after the last value.
fn parse_fields<'a>(
    line: &'a str,
    mut i: usize,
    out: &mut Line<'a>,
) -> Result<usize, &'static str> {
    let b = line.as_bytes();
    let n = b.len();
    loop {
        let k_end = scan_until(b, i, KEY_ESCAPES, b"=, ");
        if k_end == i {
            return Err(if b[i] == b'=' {
                "missing field key"
            } else {
                "invalid field format"
            });
        }
        if k_end >= n || b[k_end] != b'=' {
            return Err("invalid field format");
        }
        let key = unescape(&line[i..k_end], KEY_ESCAPES);
        i = k_end + 1;
        if i >= n || matches!(b[i], b' ' | b',') {
            return Err("missing field value");
        }
        let (value, end) = field_value(line, i)?;
        out.fields.push((key, value));
        i = end;
        match b.get(i) {
            None | Some(b' ') => return Ok(i),
            Some(b',') if i + 1 < n && b[i + 1] != b' ' => i += 1,
            Some(_) => return Err("invalid field format"),
        }
    }
}

/// Parses the field value at `i`; returns it and the index after it.
pub(crate) fn field_value(line: &str, i: usize) -> Result<(FieldValue, usize), &'static str> {
    let b = line.as_bytes();
    if b[i] == b'"' {
        let mut j = i + 1;
        loop {
            match b.get(j) {
                None => return Err("unbalanced quotes"),
                Some(b'\\') => j += 2,
                Some(b'"') => return Ok((FieldValue::Str, j + 1)),
                Some(_) => j += 1,
            }
        }
    }
    let end = b[i..]
        .iter()
        .position(|&c| c == b',' || c == b' ')
        .map_or(b.len(), |p| i + p);
    let token = &line[i..end];
    let value = match b[i] {
        b'0'..=b'9' | b'-' | b'.' | b'N' | b'n' => number(token)?,
        _ => FieldValue::Bool(boolean(token).ok_or("invalid boolean")?),
    };
    Ok((value, end))
}

/// A numeric field value: `<int>i`, `<uint>u` or a float.
fn number(token: &str) -> Result<FieldValue, &'static str> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    if let Some(int) = token.strip_suffix('i') {
        if !digits(int.strip_prefix('-').unwrap_or(int)) {
            return Err("invalid number");
        }
        return int
            .parse()
            .map(FieldValue::Int)
            .map_err(|_| "unable to parse integer: value out of range");
    }
    if let Some(uint) = token.strip_suffix('u') {
        if !digits(uint) {
            return Err("invalid number");
        }
        return uint
            .parse()
            .map(FieldValue::UInt)
            .map_err(|_| "unable to parse unsigned: value out of range");
    }
    // Most floats are short decimals (`54.7`), parsed exactly without the general parser.
    if let Some(v) = parse_plain_decimal(token) {
        return Ok(FieldValue::Float(v));
    }
    let plain = token
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'));
    if !plain || !token.bytes().any(|c| c.is_ascii_digit()) {
        return Err("invalid number");
    }
    match token.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(FieldValue::Float(v)),
        Ok(_) => Err("invalid float"),
        Err(_) => Err("invalid number"),
    }
}

/// A boolean field value, in one of the spellings InfluxDB takes.
fn boolean(token: &str) -> Option<bool> {
    match token {
        "t" | "T" | "true" | "True" | "TRUE" => Some(true),
        "f" | "F" | "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
#[path = "line_protocol/tests.rs"]
mod tests;
