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

use serde_json::json;
use strata_tsdb::{ErrorKind, Value};

use crate::batch::{PointBatch, RefusalKind, join_errors, shorten, storage_timestamp, stored_name};
use crate::line_protocol::{FieldValue, Line, LineKind, lines, parse_line};

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

/// The points of a line protocol body, and what was left out of them.
#[derive(Debug)]
pub struct InfluxBatch<'a> {
    batch: PointBatch<'a>,
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
        let mut out = InfluxBatch {
            batch: PointBatch::default(),
            lines: Vec::new(),
            parse_errors: Vec::new(),
            refused: Vec::new(),
            good_lines: 0,
            fields: 0,
            empty_body: body.is_empty(),
        };
        let mut line = Line::default();
        for kind in lines(body) {
            let LineKind::Point(raw) = kind else {
                continue;
            };
            let text = match std::str::from_utf8(raw) {
                Ok(t) => t,
                Err(_) => {
                    let lossy = String::from_utf8_lossy(raw);
                    out.parse_error(&lossy, "invalid UTF-8");
                    continue;
                }
            };
            match parse_line(text, &mut line) {
                Ok(()) => out.add_line(text, &mut line, precision, now_ms),
                Err(why) => out.parse_error(text, why),
            }
        }
        out
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
        let tags_start = self.batch.tags_len();
        for (k, v) in line.tags.drain(..) {
            self.batch.add_tag(stored_name(k), stored_name(v));
        }
        let tags = tags_start..self.batch.tags_len();
        let measurement = stored_name(std::mem::take(&mut line.measurement));
        let mut stored_any = false;
        for (key, value) in line.fields.drain(..) {
            let value = match value {
                FieldValue::Float(f) => Value::Float(f),
                FieldValue::Int(i) => Value::Int(i),
                FieldValue::Bool(b) => Value::Int(i64::from(b)),
                FieldValue::UInt(u) => match i64::try_from(u) {
                    Ok(i) => Value::Int(i),
                    Err(_) => {
                        let why = format!(
                            "field \"{key}\": unsigned value {u} does not fit in a signed 64-bit \
                             integer"
                        );
                        self.refuse(text, RefusalKind::Value, 1, &why);
                        continue;
                    }
                },
                FieldValue::Str => {
                    let why = format!("field \"{key}\" is a string; only numbers can be stored");
                    self.refuse(text, RefusalKind::Value, 1, &why);
                    continue;
                }
            };
            let field = stored_name(key);
            let mut metric = String::with_capacity(measurement.len() + 1 + field.len());
            metric.push_str(&measurement);
            metric.push('.');
            metric.push_str(&field);
            let metric = self.batch.add_metric(Cow::Owned(metric));
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

    /// The answer, once the points were written with `results` (one per point, in order; empty
    /// when [`InfluxBatch::rejects_all`]).
    pub fn reply(&self, api: InfluxApi, results: &[strata_tsdb::Result<()>]) -> InfluxReply {
        let mut refused: Vec<String> = self.refused.iter().map(|r| r.message.clone()).collect();
        let mut stored = 0u64;
        let mut server = None;
        for (i, r) in results.iter().enumerate() {
            match r {
                Ok(()) => stored += 1,
                Err(e) if e.kind() == ErrorKind::Server => {
                    server.get_or_insert_with(|| e.to_string());
                }
                Err(e) => {
                    let line = self.lines.get(self.batch.source(i)).copied().unwrap_or("");
                    refused.push(format!("'{}': {e}", shorten(line, MAX_QUOTED_LINE)));
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
            return InfluxReply::v1_error(500, &e);
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
            let message = format!("unexpected error writing points to database: {e}");
            return InfluxReply::v2_error(500, "internal error", &message);
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
