//! Data points as the write path takes them.

use crate::value::Value;

/// A point that borrows its strings, so ingest can hand over slices of a parsed line or JSON
/// body without allocating.
///
/// `S` is the tag string type: `&str` by default, `String` when borrowing an owned [`Point`].
#[derive(Debug, Clone, Copy)]
pub struct PointRef<'a, S = &'a str> {
    /// Metric name.
    pub metric: &'a str,
    /// Tag pairs `(key, value)`, in any order. Repeating a pair exactly is tolerated.
    pub tags: &'a [(S, S)],
    /// Timestamp as sent: seconds when `<= 0xFFFFFFFF`, else milliseconds.
    pub timestamp: i64,
    /// The value.
    pub value: Value,
}

/// An owned point.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Metric name.
    pub metric: String,
    /// Tag pairs `(key, value)`.
    pub tags: Vec<(String, String)>,
    /// Timestamp as sent: seconds when `<= 0xFFFFFFFF`, else milliseconds.
    pub timestamp: i64,
    /// The value.
    pub value: Value,
}

impl Point {
    /// Borrows the point for [`crate::Tsdb::write`].
    pub fn as_ref(&self) -> PointRef<'_, String> {
        PointRef {
            metric: &self.metric,
            tags: &self.tags,
            timestamp: self.timestamp,
            value: self.value,
        }
    }
}
