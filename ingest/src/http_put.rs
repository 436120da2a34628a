//! `/api/put` bodies: gzip decoding and JSON parsing into per-point results
//! (OpenTSDB's `PutDataPointRpc` and `IncomingDataPoint`).
//!
//! A body is one object or an array of objects with `metric`, `timestamp`, `value` and `tags`;
//! unknown fields are ignored and a repeated field replaces the earlier one, as with Jackson.
//! String fields also take numbers and booleans (as their text), `value` keeps its text and is
//! parsed as on telnet, and `timestamp` takes an integer, a quoted integer or a float (truncated).
//! Structural errors reject the whole body; everything else rejects one point with OpenTSDB's
//! message, and the other points stay good. Strata differs in that an unparseable or out-of-range
//! `timestamp` rejects only its point (`Invalid timestamp`) where Jackson rejects the whole body.

use std::borrow::Cow;
use std::io::Read as _;
use std::ops::Range;

use crate::config::ParseConfig;
use strata_tsdb::{PointError, Value};

use crate::error::{BodyError, PutPointError};
use crate::json::{JsonError, Reader, Scalar};
use crate::point::{PointRef, Tags, check_point, is_millis, parse_value};
use crate::put_response::{DatapointEcho, PutFailure};

/// Decodes a request body: gunzips it when `gzip` is set (`Content-Encoding: gzip`), and
/// enforces `max_bytes` on the (decompressed) size. An empty gzip body stays empty.
pub fn decode_body(body: &[u8], gzip: bool, max_bytes: usize) -> Result<Cow<'_, [u8]>, BodyError> {
    if !gzip || body.is_empty() {
        if body.len() > max_bytes {
            return Err(BodyError::TooLarge { max: max_bytes });
        }
        return Ok(Cow::Borrowed(body));
    }
    let mut out = Vec::new();
    let limit = u64::try_from(max_bytes)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    flate2::read::MultiGzDecoder::new(body)
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| BodyError::Gzip(e.to_string()))?;
    if out.len() > max_bytes {
        return Err(BodyError::TooLarge { max: max_bytes });
    }
    Ok(Cow::Owned(out))
}

/// A point that passed validation; its tags are a range of [`ParsedPut::tags`].
#[derive(Debug)]
struct GoodPoint<'a> {
    metric: Cow<'a, str>,
    timestamp: i64,
    value: Value,
    tags: Range<usize>,
}

/// The outcome of parsing an `/api/put` body: the good points and the failures, in body order.
#[derive(Debug)]
pub struct ParsedPut<'a> {
    good: Vec<GoodPoint<'a>>,
    tags: Vec<(Cow<'a, str>, Option<Cow<'a, str>>)>,
    failures: Vec<PutFailure>,
    total: usize,
}

impl ParsedPut<'_> {
    /// The good points, borrowed.
    pub fn points(&self) -> impl Iterator<Item = PointRef<'_>> + '_ {
        self.good.iter().map(|p| {
            let mut tags = Tags::default();
            for (k, v) in &self.tags[p.tags.clone()] {
                tags.push(k, v.as_deref().unwrap_or_default());
            }
            PointRef {
                metric: &p.metric,
                timestamp: p.timestamp,
                millis: is_millis(p.timestamp),
                value: p.value,
                tags,
            }
        })
    }

    /// How many points passed validation.
    pub fn good_count(&self) -> usize {
        self.good.len()
    }

    /// The rejected points, in body order.
    pub fn failures(&self) -> &[PutFailure] {
        &self.failures
    }

    /// How many points the body held.
    pub fn total(&self) -> usize {
        self.total
    }
}

/// What one object in the body held.
#[derive(Default)]
struct RawPoint<'a> {
    metric: Option<Cow<'a, str>>,
    /// `None` when missing, null, or not a valid long (OpenTSDB then sees 0).
    timestamp: Option<i64>,
    value: Option<Cow<'a, str>>,
    tags: Option<Range<usize>>,
}

fn scalar_text(s: Scalar<'_>) -> Option<Cow<'_, str>> {
    match s {
        Scalar::Null => None,
        Scalar::Bool(b) => Some(Cow::Borrowed(if b { "true" } else { "false" })),
        Scalar::Num(n) => Some(Cow::Borrowed(n)),
        Scalar::Str(s) => Some(s),
    }
}

/// A timestamp field as Jackson reads a `long`: integers, quoted integers, floats truncated.
fn timestamp_of(s: Scalar<'_>) -> Option<i64> {
    match s {
        Scalar::Null | Scalar::Bool(_) => None,
        Scalar::Str(t) => t.trim().parse::<i64>().ok(),
        Scalar::Num(n) => n.parse::<i64>().ok().or_else(|| {
            let f = n.parse::<f64>().ok()?;
            // i64::MAX as f64 rounds up to 2^63, so the upper bound is exclusive.
            (f.is_finite() && f >= i64::MIN as f64 && f < i64::MAX as f64).then_some(f as i64)
        }),
    }
}

struct BodyParser<'a, 'c> {
    cfg: &'c ParseConfig,
    out: ParsedPut<'a>,
}

impl<'a> BodyParser<'a, '_> {
    /// Reads one element of the body; the cursor is on `{` or `null`.
    fn point(&mut self, r: &mut Reader<'a>) -> Result<(), JsonError> {
        let index = self.out.total;
        self.out.total += 1;
        if r.peek() == Some(b'n') {
            r.scalar("datapoint")?;
            self.out.failures.push(PutFailure {
                index,
                datapoint: DatapointEcho::default(),
                error: PutPointError::Null,
            });
            return Ok(());
        }
        if r.peek() != Some(b'{') {
            return r.error("expected a datapoint object");
        }
        let tags_start = self.out.tags.len();
        let mut raw = RawPoint::default();
        let tags = &mut self.out.tags;
        r.object(|r, key| {
            match &*key {
                "metric" => raw.metric = scalar_text(r.scalar("metric")?),
                "timestamp" => raw.timestamp = timestamp_of(r.scalar("timestamp")?),
                "value" => raw.value = scalar_text(r.scalar("value")?),
                "tags" => {
                    tags.truncate(tags_start);
                    raw.tags = None;
                    if r.peek() == Some(b'n') {
                        r.scalar("tags")?;
                    } else if r.peek() == Some(b'{') {
                        r.object(|r, k| {
                            let v = scalar_text(r.scalar("tag value")?);
                            match tags[tags_start..].iter_mut().find(|(old, _)| *old == k) {
                                Some(slot) => slot.1 = v,
                                None => tags.push((k, v)),
                            }
                            Ok(())
                        })?;
                        raw.tags = Some(tags_start..tags.len());
                    } else {
                        return r.error("expected an object for 'tags'");
                    }
                }
                _ => r.skip_value(2)?,
            }
            Ok(())
        })?;
        self.finish_point(index, raw);
        Ok(())
    }

    /// Validates a parsed object in OpenTSDB's order and files it as good or failed.
    fn finish_point(&mut self, index: usize, raw: RawPoint<'a>) {
        let ts = raw.timestamp.unwrap_or(0);
        match self.validate(&raw, ts) {
            Ok(value) => {
                let (Some(metric), Some(tags)) = (raw.metric, raw.tags) else {
                    return; // validate() guarantees both.
                };
                self.out.good.push(GoodPoint {
                    metric,
                    timestamp: ts,
                    value,
                    tags,
                });
            }
            Err(error) => {
                let tags = raw.tags.clone().map(|range| {
                    self.out.tags[range]
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.as_ref().map(|v| v.to_string())))
                        .collect()
                });
                let datapoint = DatapointEcho {
                    metric: raw.metric.map(Cow::into_owned),
                    timestamp: ts,
                    value: raw.value.map(Cow::into_owned),
                    tags,
                };
                if let Some(range) = raw.tags {
                    self.out.tags.truncate(range.start);
                }
                self.out.failures.push(PutFailure {
                    index,
                    datapoint,
                    error,
                });
            }
        }
    }

    fn validate(&self, raw: &RawPoint<'a>, ts: i64) -> Result<Value, PutPointError> {
        let metric = raw.metric.as_deref().filter(|m| !m.is_empty());
        let Some(metric) = metric else {
            return Err(PutPointError::EmptyMetric);
        };
        if ts <= 0 {
            return Err(PutPointError::InvalidTimestamp);
        }
        let Some(value) = raw.value.as_deref().filter(|v| !v.is_empty()) else {
            return Err(PutPointError::EmptyValue);
        };
        let tags = raw
            .tags
            .clone()
            .map(|r| &self.out.tags[r])
            .unwrap_or_default();
        if tags.is_empty() {
            return Err(PutPointError::MissingTags);
        }
        let value = parse_value(value).map_err(|_| PutPointError::InvalidValue)?;
        let pairs: Vec<(&str, &str)> = tags
            .iter()
            .map(|(k, v)| (&**k, v.as_deref().unwrap_or_default()))
            .collect();
        check_point(self.cfg, metric, ts, is_millis(ts), value, &pairs).map_err(|e| {
            // A JSON null tag value reads as "" above; report it as Java would.
            match e {
                PointError::EmptyName { what }
                    if tags.iter().any(|(k, v)| {
                        v.is_none() && what == format!("tag value with key [{k}]")
                    }) =>
                {
                    PutPointError::Point(PointError::NullName { what })
                }
                e => PutPointError::Point(e),
            }
        })?;
        Ok(value)
    }
}

/// Parses an `/api/put` body (already decoded by [`decode_body`]). Whole-body problems are
/// errors; per-point problems land in [`ParsedPut::failures`].
pub fn parse_put_body<'a>(body: &'a [u8], cfg: &ParseConfig) -> Result<ParsedPut<'a>, BodyError> {
    let text = std::str::from_utf8(body)
        .map_err(|e| BodyError::Malformed(format!("invalid UTF-8: {e}")))?;
    // Java's String.trim(): every char <= ' '.
    let trimmed = text.trim_matches(|c: char| c <= ' ');
    let mut reader = Reader::new(trimmed);
    let mut p = BodyParser {
        cfg,
        out: ParsedPut {
            good: Vec::new(),
            tags: Vec::new(),
            failures: Vec::new(),
            total: 0,
        },
    };
    let result = match trimmed.as_bytes().first() {
        None => return Err(BodyError::MissingContent),
        Some(b'{') => p.point(&mut reader),
        Some(b'[') => reader.array(|r| p.point(r)),
        Some(_) => return Err(BodyError::NotObjectOrArray),
    };
    result
        .and_then(|()| reader.end())
        .map_err(|JsonError(msg)| BodyError::Malformed(msg))?;
    if p.out.total == 0 {
        return Err(BodyError::NoDatapoints);
    }
    Ok(p.out)
}

#[cfg(test)]
#[path = "http_put/tests.rs"]
mod tests;
