//! The Influx line protocol endpoints, `POST /write` (1.x) and `POST /api/v2/write` (2.x):
//! lines to points, and the answers InfluxDB gives (`docs/influx.md`).
//!
//! Each field of a line is one point: the metric is `<measurement>.<field>` and the tags stay
//! tags, every name going through [`strata_tsdb::escape_name`] (`cpu load` is stored as
//! `cpu__x20_load`). Integers (`i`) are stored as integers, floats as floats, booleans as the
//! integers 1 and 0, unsigned integers (`u`) as integers when they fit in an `i64`. Strings
//! cannot be stored and are refused per field. Timestamps are cut to milliseconds (rounded
//! down); a line without one gets the time the request arrived.
//!
//! Answers follow InfluxDB's:
//! - 1.x: good lines are stored; lines that do not parse give 400
//!   `{"error":"partial write: unable to parse '…': … dropped=0"}` (without the prefix when no
//!   line parsed); fields refused after parsing give 400 `{"error":"partial write: … dropped=N"}`.
//! - 2.x: a line that does not parse rejects the whole body with 400
//!   `{"code":"invalid","message":"unable to parse '…': …"}`; fields refused after parsing give
//!   422 `{"code":"unprocessable entity","message":"failure writing points to database: partial
//!   write: … dropped=N"}` and the rest is stored.
//! - Storage failures give 500; success gives 204.

use std::borrow::Cow;

use std::ops::Range;

use serde_json::json;
use strata_tsdb::{ErrorKind, SeriesHandle, SeriesPoint, Tsdb, Value};

use crate::batch::{PointBatch, RefusalKind, join_errors, shorten, storage_timestamp, stored_name};
use crate::known_lines::{KnownLines, LinesReader};
use crate::line_protocol::{
    FieldValue, Line, LineKind, field_value, lines, parse_line, parse_timestamp, point_range,
    skip_whitespace,
};

/// How many lines of errors an answer lists.
const MAX_LISTED_ERRORS: usize = 100;

/// How much of a line an error message quotes.
const MAX_QUOTED_LINE: usize = 512;

/// Which InfluxDB API a request came in on; the answers differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InfluxApi {
    /// `POST /write`.
    V1,
    /// `POST /api/v2/write`.
    V2,
}

/// The unit of the timestamps in a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// Nanoseconds (the default).
    Nanoseconds,
    /// Microseconds.
    Microseconds,
    /// Milliseconds.
    Milliseconds,
    /// Seconds.
    Seconds,
    /// Minutes (1.x only).
    Minutes,
    /// Hours (1.x only).
    Hours,
}

impl Precision {
    /// The `precision` parameter of `/write`: `n`/`ns`, `u`/`us`, `ms`, `s`, `m` or `h`;
    /// missing or empty means nanoseconds.
    pub fn from_v1(p: Option<&str>) -> Option<Precision> {
        Some(match p.unwrap_or("") {
            "" | "n" | "ns" => Precision::Nanoseconds,
            "u" | "us" | "µ" => Precision::Microseconds,
            "ms" => Precision::Milliseconds,
            "s" => Precision::Seconds,
            "m" => Precision::Minutes,
            "h" => Precision::Hours,
            _ => return None,
        })
    }

    /// The `precision` parameter of `/api/v2/write`: `ns`, `us`, `ms` or `s`; missing or empty
    /// means nanoseconds.
    pub fn from_v2(p: Option<&str>) -> Option<Precision> {
        Some(match p.unwrap_or("") {
            "" | "ns" => Precision::Nanoseconds,
            "us" => Precision::Microseconds,
            "ms" => Precision::Milliseconds,
            "s" => Precision::Seconds,
            _ => return None,
        })
    }

    /// The error an invalid `precision` gets.
    pub fn invalid_reply(api: InfluxApi, given: &str) -> InfluxReply {
        match api {
            InfluxApi::V1 => InfluxReply::v1_error(
                400,
                &format!("invalid precision {given:?} (use n, u, ms, s, m or h)"),
            ),
            InfluxApi::V2 => InfluxReply::v2_error(
                400,
                "invalid",
                "invalid precision; valid precision units are ns, us, ms, and s",
            ),
        }
    }

    /// Nanoseconds per unit.
    fn nanos(self) -> i64 {
        match self {
            Precision::Nanoseconds => 1,
            Precision::Microseconds => 1_000,
            Precision::Milliseconds => 1_000_000,
            Precision::Seconds => 1_000_000_000,
            Precision::Minutes => 60_000_000_000,
            Precision::Hours => 3_600_000_000_000,
        }
    }

    /// `ts` in this unit as milliseconds, rounded down; `None` when it is outside the range
    /// InfluxDB takes (nanoseconds that fit in an `i64`).
    fn to_ms(self, ts: i64) -> Option<i64> {
        let nanos = ts.checked_mul(self.nanos())?;
        Some(nanos.div_euclid(1_000_000))
    }
}

/// A field that parsed but cannot be stored, or a point storage refused.
#[derive(Debug, Clone, PartialEq)]
struct Refused {
    kind: RefusalKind,
    message: String,
}

/// How a point of [`InfluxBatch::parse_known`] reaches its series.
#[derive(Debug)]
enum Resolution {
    /// Through a handle: found in [`KnownLines`], or resolved.
    Known(SeriesHandle),
    /// By its names: the point's index in [`InfluxBatch::batch`], to resolve.
    Named(u32),
    /// Storage would not resolve it. (Boxed: the error is large and rare, and every point
    /// carries the enum.)
    Failed(Box<strata_tsdb::Error>),
}

/// A point of [`InfluxBatch::parse_known`], in body order.
#[derive(Debug)]
struct KnownPoint {
    series: Resolution,
    /// Its [`KnownLines`] key in [`InfluxBatch::keys`], the series section, a space and the
    /// field name; empty when its line has escapes or quotes, which the fast path never takes.
    key: Range<usize>,
    timestamp: i64,
    value: Value,
    source: u32,
}

/// The points of a line protocol body, and what was left out of them.
///
/// [`InfluxBatch::parse`] maps every line's names. [`InfluxBatch::parse_known`] first tries
/// each line against [`KnownLines`], by the line's series section (measurement and tags as
/// sent) and each field's key: a line whose every field is known is only scanned for its
/// values. That takes lines without backslashes and quotes, nearly all.
#[derive(Debug)]
pub struct InfluxBatch<'a> {
    batch: PointBatch<'a>,
    /// With `parse_known`: every point in body order.
    known: Vec<KnownPoint>,
    keys: Vec<u8>,
    /// Whether points are noted in `known`.
    resolving: bool,
    /// The text of each line that gave points, by source index.
    lines: Vec<&'a str>,
    parse_errors: Vec<String>,
    refused: Vec<Refused>,
    good_lines: usize,
    fields: u64,
    empty_body: bool,
}

impl<'a> InfluxBatch<'a> {
    /// Parses `body`; lines without a timestamp get `now_ms`.
    pub fn parse(body: &'a [u8], precision: Precision, now_ms: i64) -> Self {
        let mut out = Self::empty(body, false);
        let mut line = Line::default();
        for kind in lines(body) {
            let LineKind::Point(raw) = kind else {
                continue;
            };
            if let Some(text) = out.utf8(raw) {
                out.parse_full(text, &mut line, precision, now_ms);
            }
        }
        out
    }

    /// As [`InfluxBatch::parse`], taking the points of series in `known` by their handles;
    /// [`InfluxBatch::resolve`] then resolves the others.
    pub fn parse_known(
        body: &'a [u8],
        precision: Precision,
        now_ms: i64,
        tsdb: &Tsdb,
        known: &KnownLines,
    ) -> Self {
        let mut out = Self::empty(body, true);
        // Telegraf's lines carry a few fields each, 35 to 45 bytes a point: reserved for 32,
        // so that a body of thousands of points is not grown (and copied) even once.
        out.known.reserve(body.len() / 32);
        let mut known_line = KnownScan {
            line: Line::default(),
            reader: known.reader(tsdb),
            fast: FastLine::default(),
            precision,
            now_ms,
        };
        // Nearly every body is valid UTF-8 without a backslash or a quote: checked once here,
        // its lines need no check of their own, and each ends at the next `\n`.
        if let Ok(text) = std::str::from_utf8(body)
            && memchr::memchr2(b'\\', b'"', body).is_none()
        {
            for line in plain_lines(text) {
                out.add_known(line, true, &mut known_line);
            }
            return out;
        }
        for kind in lines(body) {
            let LineKind::Point(raw) = kind else {
                continue;
            };
            let Some(text) = out.utf8(raw) else {
                continue;
            };
            let plain = memchr::memchr2(b'\\', b'"', raw).is_none();
            out.add_known(text, plain, &mut known_line);
        }
        out
    }

    /// Takes a point line by the fast path when it is `plain` (no backslash or quote) and
    /// every field is known, else parses it fully.
    fn add_known(&mut self, text: &'a str, plain: bool, k: &mut KnownScan<'_, 'a>) {
        if plain && k.fast.scan(text, k.precision, k.now_ms, &k.reader) {
            self.good_lines += 1;
            self.fields += k.fast.points.len() as u64;
            let source = self.lines.len() as u32;
            self.lines.push(text);
            let timestamp = k.fast.timestamp;
            self.known
                .extend(k.fast.points.drain(..).map(|(handle, value)| KnownPoint {
                    series: Resolution::Known(handle),
                    key: 0..0,
                    timestamp,
                    value,
                    source,
                }));
        } else {
            self.parse_full(text, &mut k.line, k.precision, k.now_ms);
        }
    }

    fn empty(body: &[u8], resolving: bool) -> Self {
        InfluxBatch {
            batch: PointBatch::default(),
            known: Vec::new(),
            keys: Vec::new(),
            resolving,
            lines: Vec::new(),
            parse_errors: Vec::new(),
            refused: Vec::new(),
            good_lines: 0,
            fields: 0,
            empty_body: body.is_empty(),
        }
    }

    /// The line as text, or `None` after noting the parse error.
    fn utf8(&mut self, raw: &'a [u8]) -> Option<&'a str> {
        match std::str::from_utf8(raw) {
            Ok(t) => Some(t),
            Err(_) => {
                let lossy = String::from_utf8_lossy(raw);
                self.parse_error(&lossy, "invalid UTF-8");
                None
            }
        }
    }

    /// Parses a line fully, mapping its names.
    fn parse_full(&mut self, text: &'a str, line: &mut Line<'a>, precision: Precision, now: i64) {
        match parse_line(text, line) {
            Ok(()) => self.add_line(text, line, precision, now),
            Err(why) => self.parse_error(text, why),
        }
    }

    fn parse_error(&mut self, text: &str, why: &str) {
        self.parse_errors.push(format!(
            "unable to parse '{}': {why}",
            shorten(text, MAX_QUOTED_LINE)
        ));
    }

    fn add_line(&mut self, text: &'a str, line: &mut Line<'a>, precision: Precision, now: i64) {
        let ts_ms = match line.timestamp {
            None => now,
            Some(ts) => match precision.to_ms(ts) {
                Some(ms) => ms,
                None => return self.parse_error(text, "time outside range"),
            },
        };
        self.good_lines += 1;
        self.fields += line.fields.len() as u64;
        let source = self.lines.len();
        self.lines.push(text);
        let timestamp = match storage_timestamp(ts_ms) {
            Ok(t) => t,
            Err(why) => {
                let n = line.fields.len();
                return self.refuse(text, RefusalKind::Timestamp, n, &why);
            }
        };
        let plain = self.resolving && memchr::memchr2(b'\\', b'"', text.as_bytes()).is_none();
        let tags_start = self.batch.tags_len();
        for (k, v) in line.tags.drain(..) {
            self.batch.add_tag(stored_name(k), stored_name(v));
        }
        let tags = tags_start..self.batch.tags_len();
        let measurement = stored_name(std::mem::take(&mut line.measurement));
        let mut stored_any = false;
        for (key, value) in line.fields.drain(..) {
            let Some(stored) = value.stored() else {
                let why = match value {
                    FieldValue::UInt(u) => format!(
                        "field \"{key}\": unsigned value {u} does not fit in a signed 64-bit \
                         integer"
                    ),
                    _ => format!("field \"{key}\" is a string; only numbers can be stored"),
                };
                self.refuse(text, RefusalKind::Value, 1, &why);
                continue;
            };
            let value = stored;
            // Without escapes the key is as sent, as the fast path reads it.
            let raw_key = key.clone();
            let field = stored_name(key);
            let mut metric = String::with_capacity(measurement.len() + 1 + field.len());
            metric.push_str(&measurement);
            metric.push('.');
            metric.push_str(&field);
            let metric = self.batch.add_metric(Cow::Owned(metric));
            if self.resolving {
                let key = match text.find(' ') {
                    Some(end) if plain => {
                        let start = self.keys.len();
                        self.keys.extend_from_slice(&text.as_bytes()[..end]);
                        self.keys.push(b' ');
                        self.keys.extend_from_slice(raw_key.as_bytes());
                        start..self.keys.len()
                    }
                    _ => 0..0,
                };
                self.known.push(KnownPoint {
                    series: Resolution::Named(self.batch.len() as u32),
                    key,
                    timestamp,
                    value,
                    source: source as u32,
                });
            }
            self.batch
                .push(metric, tags.clone(), timestamp, value, source);
            stored_any = true;
        }
        if !stored_any {
            self.batch.truncate_tags(tags_start);
        }
    }

    fn refuse(&mut self, text: &str, kind: RefusalKind, count: usize, why: &str) {
        let message = format!("'{}': {why}", shorten(text, MAX_QUOTED_LINE));
        for _ in 0..count {
            self.refused.push(Refused {
                kind,
                message: message.clone(),
            });
        }
    }

    /// Resolves the points [`InfluxBatch::parse_known`] did not find in `known`, through
    /// `tsdb`, and remembers their series in `known`.
    pub fn resolve(&mut self, tsdb: &Tsdb, known: &KnownLines) {
        let names = self.batch.points();
        let mut found = Vec::new();
        for p in &mut self.known {
            let Resolution::Named(i) = p.series else {
                continue;
            };
            let Some(point) = names.get(i as usize) else {
                continue;
            };
            p.series = match tsdb.series_handle(point.metric, point.tags) {
                Ok(h) => {
                    // A plain line's field key has no space: the last one ends the section.
                    let key = &self.keys[p.key.clone()];
                    if let Some(space) = memchr::memrchr(b' ', key) {
                        found.push((&key[..space], &key[space + 1..], h.clone()));
                    }
                    Resolution::Known(h)
                }
                Err(e) => Resolution::Failed(Box::new(e)),
            };
        }
        known.insert(found);
    }

    /// The points of resolved series, for `Tsdb::write_series`, in body order.
    pub fn series_points(&self) -> Vec<SeriesPoint<'_>> {
        let mut out = Vec::with_capacity(self.known.len());
        out.extend(self.known.iter().filter_map(|p| match &p.series {
            Resolution::Known(series) => Some(SeriesPoint {
                series,
                timestamp: p.timestamp,
                value: p.value,
            }),
            _ => None,
        }));
        out
    }

    /// How many points [`InfluxBatch::parse_known`] found, resolved or not.
    pub fn known_points(&self) -> usize {
        self.known.len()
    }

    /// What storage said about each point it would not resolve.
    pub fn resolve_errors(&self) -> impl Iterator<Item = &strata_tsdb::Error> + '_ {
        self.known.iter().filter_map(|p| match &p.series {
            Resolution::Failed(e) => Some(&**e),
            _ => None,
        })
    }

    /// The points to store. For [`InfluxApi::V2`] nothing may be stored when
    /// [`InfluxBatch::rejects_all`] says so.
    pub fn points(&self) -> &PointBatch<'a> {
        &self.batch
    }

    /// Whether InfluxDB would store nothing of this body: on 2.x, any line that does not parse.
    pub fn rejects_all(&self, api: InfluxApi) -> bool {
        api == InfluxApi::V2 && !self.parse_errors.is_empty()
    }

    /// Points received: the fields of the lines that parsed, plus one per line that did not.
    pub fn received(&self) -> u64 {
        self.fields + self.parse_errors.len() as u64
    }

    /// Why points were refused before storage: one per refused field or unparsable line.
    pub fn refusals(&self) -> impl Iterator<Item = RefusalKind> + '_ {
        let syntax = std::iter::repeat_n(RefusalKind::Syntax, self.parse_errors.len());
        syntax.chain(self.refused.iter().map(|r| r.kind))
    }

    /// The answer, once the points were written with `results` (one per point of
    /// [`InfluxBatch::points`], or of [`InfluxBatch::series_points`] after `parse_known`, in
    /// order; empty when [`InfluxBatch::rejects_all`]).
    pub fn reply(&self, api: InfluxApi, results: &[strata_tsdb::Result<()>]) -> InfluxReply {
        let mut refused: Vec<String> = self.refused.iter().map(|r| r.message.clone()).collect();
        let mut stored = 0u64;
        let mut server = None;
        let mut note = |e: &strata_tsdb::Error, source: usize| {
            if e.kind() == ErrorKind::Server {
                server.get_or_insert_with(|| e.to_string());
            } else {
                let line = self.lines.get(source).copied().unwrap_or("");
                refused.push(format!("'{}': {e}", shorten(line, MAX_QUOTED_LINE)));
            }
        };
        if self.resolving {
            let mut results = results.iter();
            for p in &self.known {
                let r = match &p.series {
                    Resolution::Failed(e) => Err(&**e),
                    _ => match results.next() {
                        Some(r) => r.as_ref(),
                        None => break,
                    },
                };
                match r {
                    Ok(()) => stored += 1,
                    Err(e) => note(e, p.source as usize),
                }
            }
        } else {
            for (i, r) in results.iter().enumerate() {
                match r {
                    Ok(()) => stored += 1,
                    Err(e) => note(e, self.batch.source(i)),
                }
            }
        }
        let mut reply = match api {
            InfluxApi::V1 => self.reply_v1(&refused, server),
            InfluxApi::V2 => self.reply_v2(&refused, server),
        };
        reply.stored = stored;
        reply
    }

    fn reply_v1(&self, refused: &[String], server: Option<String>) -> InfluxReply {
        if let Some(e) = server {
            return InfluxReply::storage_failed(InfluxApi::V1, &e);
        }
        let parse = join_errors(&self.parse_errors, MAX_LISTED_ERRORS);
        if !self.parse_errors.is_empty() && self.good_lines == 0 {
            return InfluxReply::v1_error(400, &parse);
        }
        if self.parse_errors.is_empty() && refused.is_empty() {
            return InfluxReply::no_content();
        }
        let mut reasons = parse;
        if !refused.is_empty() {
            if !reasons.is_empty() {
                reasons.push('\n');
            }
            reasons.push_str(&join_errors(refused, MAX_LISTED_ERRORS));
        }
        InfluxReply::v1_error(
            400,
            &format!("partial write: {reasons} dropped={}", refused.len()),
        )
    }

    fn reply_v2(&self, refused: &[String], server: Option<String>) -> InfluxReply {
        if self.empty_body {
            return InfluxReply::v2_error(400, "invalid", "writing requires points");
        }
        if !self.parse_errors.is_empty() {
            let parse = join_errors(&self.parse_errors, MAX_LISTED_ERRORS);
            return InfluxReply::v2_error(400, "invalid", &parse);
        }
        if let Some(e) = server {
            return InfluxReply::storage_failed(InfluxApi::V2, &e);
        }
        if refused.is_empty() {
            return InfluxReply::no_content();
        }
        let message = format!(
            "failure writing points to database: partial write: {} dropped={}",
            join_errors(refused, MAX_LISTED_ERRORS),
            refused.len()
        );
        InfluxReply::v2_error(422, "unprocessable entity", &message)
    }
}

/// What [`InfluxBatch::parse_known`] keeps from line to line.
struct KnownScan<'k, 'a> {
    /// The full parse's line, reused.
    line: Line<'a>,
    reader: LinesReader<'k>,
    fast: FastLine,
    precision: Precision,
    now_ms: i64,
}

/// The point lines of `body`, which holds no backslash and no quote, as [`lines`] yields them.
fn plain_lines(body: &str) -> impl Iterator<Item = &str> + '_ {
    let mut start = 0;
    let ends = memchr::memchr_iter(b'\n', body.as_bytes()).chain(std::iter::once(body.len()));
    ends.filter_map(move |end| {
        // `start` and `end` are at ASCII bytes or the ends, so at character boundaries.
        let line = &body[start..end];
        start = end + 1;
        point_range(line.as_bytes()).map(|point| &line[point])
    })
}

/// The scan of a line whose every field is in [`KnownLines`]: its points, in field order.
#[derive(Debug, Default)]
struct FastLine {
    points: Vec<(SeriesHandle, Value)>,
    timestamp: i64,
}

impl FastLine {
    /// Reads `text` (a point line without backslashes or quotes) when every field's series is
    /// known and every value and the timestamp can be stored; `false` sends the line the full
    /// way, which also reports whatever is wrong with it. Accepts what `parse_line` accepts.
    fn scan(
        &mut self,
        text: &str,
        precision: Precision,
        now_ms: i64,
        known: &LinesReader<'_>,
    ) -> bool {
        self.points.clear();
        let b = text.as_bytes();
        let n = b.len();
        let Some(series_end) = memchr::memchr(b' ', b) else {
            return false;
        };
        let Some(mut line) = known.line(&b[..series_end]) else {
            return false;
        };
        let mut i = skip_whitespace(b, series_end + 1);
        loop {
            let Some(k_end) = memchr::memchr(b'=', &b[i.min(n)..]).map(|p| i + p) else {
                return false;
            };
            let field = &b[i..k_end];
            if field.is_empty() || field.iter().any(|&c| c == b',' || c == b' ') {
                return false;
            }
            let Some(series) = line.field(field) else {
                return false;
            };
            i = k_end + 1;
            if i >= n || matches!(b[i], b' ' | b',') {
                return false;
            }
            let Ok((value, end)) = field_value(text, i) else {
                return false;
            };
            let Some(value) = value.stored() else {
                return false;
            };
            self.points.push((series.clone(), value));
            i = end;
            match b.get(i) {
                None | Some(b' ') => break,
                Some(b',') if i + 1 < n && b[i + 1] != b' ' => i += 1,
                Some(_) => return false,
            }
        }
        let ts_ms = match parse_timestamp(text, i) {
            Ok(None) => now_ms,
            Ok(Some(ts)) => match precision.to_ms(ts) {
                Some(ms) => ms,
                None => return false,
            },
            Err(_) => return false,
        };
        match storage_timestamp(ts_ms) {
            Ok(t) => {
                self.timestamp = t;
                true
            }
            Err(_) => false,
        }
    }
}

/// The HTTP answer to a line protocol write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfluxReply {
    /// 204, 400, 422 or 500.
    pub status: u16,
    /// JSON, or empty for 204.
    pub body: Vec<u8>,
    /// Points stored.
    pub stored: u64,
}

impl InfluxReply {
    /// The answer when storage failed: 500, asking for a retry.
    pub fn storage_failed(api: InfluxApi, error: &str) -> InfluxReply {
        match api {
            InfluxApi::V1 => InfluxReply::v1_error(500, error),
            InfluxApi::V2 => {
                let message = format!("unexpected error writing points to database: {error}");
                InfluxReply::v2_error(500, "internal error", &message)
            }
        }
    }

    fn no_content() -> InfluxReply {
        InfluxReply {
            status: 204,
            body: Vec::new(),
            stored: 0,
        }
    }

    fn v1_error(status: u16, message: &str) -> InfluxReply {
        InfluxReply {
            status,
            body: json!({ "error": message }).to_string().into_bytes(),
            stored: 0,
        }
    }

    fn v2_error(status: u16, code: &str, message: &str) -> InfluxReply {
        InfluxReply {
            status,
            body: json!({ "code": code, "message": message })
                .to_string()
                .into_bytes(),
            stored: 0,
        }
    }
}

#[cfg(test)]
#[path = "influx/tests.rs"]
mod tests;
