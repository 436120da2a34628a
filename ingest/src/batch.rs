//! Points parsed from the foreign protocols (remote write, line protocol), held in one batch
//! that borrows from the request, and the timestamp rule they share.

use std::borrow::Cow;
use std::ops::Range;

use strata_tsdb::{PointRef, Value, escape_name};

/// Why a point or line was refused before storage, for the server's metric labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusalKind {
    /// The line or message is malformed.
    Syntax,
    /// A required name is missing or empty.
    Name,
    /// The timestamp cannot be stored.
    Timestamp,
    /// The value cannot be stored (a string, an unsigned integer past `i64`, NaN, infinity).
    Value,
}

/// One point of a [`PointBatch`]: indexes into the batch's metrics and tags.
#[derive(Debug, Clone)]
struct Entry {
    metric: u32,
    tags: Range<u32>,
    timestamp: i64,
    value: Value,
    source: u32,
}

/// Points ready for `Tsdb::write`, with names borrowed from the request where no escape
/// was needed. Each point remembers its source (a series or a line) for error messages.
#[derive(Debug, Default)]
pub struct PointBatch<'a> {
    metrics: Vec<Cow<'a, str>>,
    tags: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    entries: Vec<Entry>,
}

impl<'a> PointBatch<'a> {
    /// The points, as the storage layer takes them.
    pub fn points(&self) -> Vec<PointRef<'_, Cow<'a, str>>> {
        self.entries
            .iter()
            .map(|e| PointRef {
                metric: &self.metrics[e.metric as usize],
                tags: &self.tags[e.tags.start as usize..e.tags.end as usize],
                timestamp: e.timestamp,
                value: e.value,
            })
            .collect()
    }

    /// How many points the batch holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the batch holds no points.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The source (series or line index) of point `i`.
    pub fn source(&self, i: usize) -> usize {
        self.entries.get(i).map_or(0, |e| e.source as usize)
    }

    /// Adds a metric name; returns its index for [`PointBatch::push`].
    pub(crate) fn add_metric(&mut self, metric: Cow<'a, str>) -> u32 {
        self.metrics.push(metric);
        (self.metrics.len() - 1) as u32
    }

    /// Where the next tag added will go.
    pub(crate) fn tags_len(&self) -> u32 {
        self.tags.len() as u32
    }

    /// Adds a tag pair.
    pub(crate) fn add_tag(&mut self, key: Cow<'a, str>, value: Cow<'a, str>) {
        self.tags.push((key, value));
    }

    /// Drops the tags from `len` on (a source that produced no point).
    pub(crate) fn truncate_tags(&mut self, len: u32) {
        self.tags.truncate(len as usize);
    }

    /// Adds a point whose timestamp was checked by [`storage_timestamp`].
    pub(crate) fn push(
        &mut self,
        metric: u32,
        tags: Range<u32>,
        timestamp: i64,
        value: Value,
        source: usize,
    ) {
        self.entries.push(Entry {
            metric,
            tags,
            timestamp,
            value,
            source: source as u32,
        });
    }
}

/// The timestamp as the storage layer takes it, for an instant in milliseconds.
///
/// Storage reads timestamps up to `0xFFFFFFFF` as seconds, so an early instant goes in as
/// seconds when it is a whole second, and is refused when it is not (an instant in the first
/// 50 days of 1970 with milliseconds). Negative instants are refused too. Storage checks the
/// upper bound (year 2106) itself.
pub(crate) fn storage_timestamp(ts_ms: i64) -> Result<i64, String> {
    if ts_ms < 0 {
        return Err(format!("timestamp {ts_ms} ms is before 1970"));
    }
    if ts_ms > 0xFFFF_FFFF {
        return Ok(ts_ms);
    }
    if ts_ms % 1000 == 0 {
        Ok(ts_ms / 1000)
    } else {
        Err(format!(
            "timestamp {ts_ms} ms: a fraction of a second needs a time after 1970-02-19T17:02:47Z"
        ))
    }
}

/// A foreign name as stored: [`escape_name`], borrowing from the request where it can.
pub(crate) fn stored_name(name: Cow<'_, str>) -> Cow<'_, str> {
    match name {
        Cow::Borrowed(s) => escape_name(s),
        Cow::Owned(s) => match escape_name(&s) {
            Cow::Borrowed(_) => Cow::Owned(s),
            Cow::Owned(escaped) => Cow::Owned(escaped),
        },
    }
}

/// Cuts `s` to at most `max` bytes on a character boundary, marking the cut.
pub(crate) fn shorten(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max {
        return Cow::Borrowed(s);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &s[..end]))
}

/// Joins error messages with `\n`, listing at most `max` of them.
pub(crate) fn join_errors(errors: &[String], max: usize) -> String {
    let mut out = errors
        .iter()
        .take(max)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("\n");
    if errors.len() > max {
        out.push_str(&format!("\n… and {} more", errors.len() - max));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_reach_storage_as_the_same_instant() {
        assert_eq!(storage_timestamp(1_700_000_000_123), Ok(1_700_000_000_123));
        assert_eq!(storage_timestamp(5_000), Ok(5));
        assert_eq!(storage_timestamp(0), Ok(0));
        assert_eq!(storage_timestamp(0x1_0000_0000), Ok(0x1_0000_0000));
        assert!(storage_timestamp(5_500).is_err());
        assert!(storage_timestamp(-1).is_err());
    }

    #[test]
    fn names_borrow_when_they_can() {
        assert!(matches!(
            stored_name(Cow::Borrowed("cpu")),
            Cow::Borrowed("cpu")
        ));
        assert_eq!(stored_name(Cow::Owned("a b".into())), "a__x20_b");
        assert_eq!(shorten("añb", 2), "a…");
        assert_eq!(
            join_errors(&["a".into(), "b".into(), "c".into()], 2),
            "a\nb\n… and 1 more"
        );
    }
}
