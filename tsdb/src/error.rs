//! The tsdb error type.
//!
//! Messages that clients match on are OpenTSDB 2.4's texts (those of its `Tags.validateString`,
//! `IncomingDataPoints.checkMetricAndTags`, `TSDB.addPointInternal` and `UniqueId`), so the API
//! layers can forward `to_string()` unchanged.

use std::sync::Arc;

use crate::uid_kind::UidKind;

/// Result alias for the tsdb layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Who is at fault for an error, so API layers can map it to a status code without matching
/// deep variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The caller sent something invalid (HTTP 400).
    Client,
    /// A name, UID or series does not exist.
    NotFound,
    /// Storage or an internal invariant failed (HTTP 500).
    Server,
    /// Storage refuses writes for now: the disk is full, or the engine's write-ahead log
    /// failed and only a restart writes again (HTTP 503). Reads still work.
    Unavailable,
}

/// A point failed the checks of OpenTSDB's `TSDB.addPoint` (names, tag set, timestamp,
/// value). The `Display` text is OpenTSDB's message, which HTTP `/api/put?details` echoes and
/// telnet clients see after `put: illegal argument: `.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PointError {
    /// A metric, tag key or tag value is empty.
    #[error("Invalid {what}: empty string")]
    EmptyName {
        /// `metric name`, `tag name with value [<tagv>]` or `tag value with key [<tagk>]`.
        what: String,
    },
    /// A metric, tag key or tag value holds a character outside the allowed set.
    #[error("Invalid {what} (\"{name}\"): illegal character: {ch}")]
    IllegalCharacter {
        /// `metric name`, `tag name with value [<tagv>]` or `tag value with key [<tagk>]`.
        what: String,
        /// The offending name.
        name: String,
        /// The first illegal character.
        ch: char,
    },
    /// A point has no tag.
    #[error("Need at least one tag (metric={metric}, tags={{}})")]
    NoTags {
        /// The point's metric.
        metric: String,
    },
    /// A point has more tags than allowed.
    #[error("Too many tags: {count} maximum allowed: {max}, tags: {tags}")]
    TooManyTags {
        /// Number of tags sent.
        count: usize,
        /// The configured maximum.
        max: usize,
        /// The tags, as `{k=v, k=v}`.
        tags: String,
    },
    /// The same tag key appears twice with different values.
    #[error("duplicate tag: {pair}, tags={tags}")]
    DuplicateTag {
        /// The second `k=v` pair.
        pair: String,
        /// The tags, as `{k=v, k=v}`.
        tags: String,
    },
    /// A float value is NaN or infinite.
    #[error(
        "value is NaN or Infinite: {} for metric={metric} timestamp={timestamp}",
        java_double(*.value)
    )]
    NotFinite {
        /// The value.
        value: f64,
        /// The point's metric.
        metric: String,
        /// The timestamp as sent.
        timestamp: i64,
    },
    /// A timestamp is negative.
    #[error(
        "negative  timestamp={timestamp} when trying to add value={value} to metric={metric}, tags={tags}"
    )]
    NegativeTimestamp {
        /// The timestamp as sent.
        timestamp: i64,
        /// The value as `[bytes]/flags`.
        value: String,
        /// The point's metric.
        metric: String,
        /// The tags, as `{k=v, k=v}`.
        tags: String,
    },
    /// A millisecond timestamp is past 9 999 999 999 999.
    #[error(
        "bad timestamp={timestamp} when trying to add value={value} to metric={metric}, tags={tags}"
    )]
    BadTimestamp {
        /// The timestamp as sent.
        timestamp: i64,
        /// The value as `[bytes]/flags`.
        value: String,
        /// The point's metric.
        metric: String,
        /// The tags, as `{k=v, k=v}`.
        tags: String,
    },
    /// A name is JSON `null` (HTTP only): `Tags.validateString`'s message for a null.
    #[error("Invalid {what}: null")]
    NullName {
        /// What the name is, as in [`PointError::IllegalCharacter`].
        what: String,
    },
    /// The point is already older than its metric's retention, so it would never be read.
    #[error(
        "point is older than the retention of {retention} for metric={metric} timestamp={timestamp}"
    )]
    Expired {
        /// The point's metric.
        metric: String,
        /// The timestamp as sent.
        timestamp: i64,
        /// The metric's retention, as configured (`90d`).
        retention: String,
    },
    /// The point's series is in a salt bucket another writer owns (partitioned ingest).
    #[error(
        "salt bucket {salt} of this series (metric={metric}) is not owned by this writer, which \
         owns salt buckets {lo}-{hi} of {buckets}: send the point to the writer that owns \
         bucket {salt}"
    )]
    NotOwned {
        /// The point's metric.
        metric: String,
        /// The series' salt bucket.
        salt: u8,
        /// First bucket this writer owns.
        lo: u8,
        /// Last bucket this writer owns.
        hi: u8,
        /// The salt bucket count.
        buckets: u8,
    },
}

impl PointError {
    /// Why the point was refused.
    pub fn rejection(&self) -> Rejection {
        match self {
            PointError::EmptyName { .. }
            | PointError::IllegalCharacter { .. }
            | PointError::NullName { .. } => Rejection::Name,
            PointError::NoTags { .. }
            | PointError::TooManyTags { .. }
            | PointError::DuplicateTag { .. } => Rejection::Tags,
            PointError::NegativeTimestamp { .. } | PointError::BadTimestamp { .. } => {
                Rejection::Timestamp
            }
            PointError::NotFinite { .. } => Rejection::Value,
            PointError::Expired { .. } => Rejection::Expired,
            PointError::NotOwned { .. } => Rejection::Other,
        }
    }
}

/// Why a point was refused: what rejected points are counted by (the `reason` label of
/// `/metrics`, the `tsd.storage.rejected_*` statistics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rejection {
    /// The line or object had the wrong shape (a protocol parser's refusal).
    Syntax,
    /// An empty metric, tag key or tag value, or one with an illegal character.
    Name,
    /// No tag, too many tags, a malformed or duplicate tag.
    Tags,
    /// A missing, non-positive, malformed or out-of-range timestamp.
    Timestamp,
    /// A missing or malformed value, or NaN/infinity.
    Value,
    /// A name with no UID while auto-creation is off.
    UnknownName,
    /// Storage failed to commit the point.
    Storage,
    /// The point was older than its metric's retention.
    Expired,
    /// Anything else.
    Other,
}

/// A tsdb error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The storage engine failed.
    #[error(transparent)]
    Engine(#[from] strata_engine::Error),
    /// The engine failed to commit a write batch; every point of the batch gets a copy.
    #[error("write failed: {0}")]
    WriteFailed(#[source] Arc<strata_engine::Error>),
    /// A point failed OpenTSDB's checks (`TSDB.addPoint`).
    #[error(transparent)]
    Point(#[from] PointError),
    /// A name has no UID (and auto-creation is off, or this is a read).
    #[error("No such name for '{kind}': '{name}'")]
    NoSuchName {
        /// The UID kind.
        kind: UidKind,
        /// The unknown name.
        name: String,
    },
    /// A UID has no name.
    #[error("No such unique ID for '{kind}': {uid}")]
    NoSuchUid {
        /// The UID kind.
        kind: UidKind,
        /// The UID in upper-case hex.
        uid: String,
    },
    /// A rename target or an explicit assignment names an existing UID.
    #[error("Name already exists with UID: {uid}")]
    NameExists {
        /// The UID kind.
        kind: UidKind,
        /// The existing name.
        name: String,
        /// Its UID in upper-case hex.
        uid: String,
    },
    /// Every UID of a kind is taken.
    #[error("All Unique IDs for {kind} on 3 bytes are already assigned!")]
    UidsExhausted {
        /// The UID kind.
        kind: UidKind,
    },
    /// Every dense series id is taken.
    #[error("all {count} series ids are already assigned")]
    SeriesExhausted {
        /// Number of series.
        count: u64,
    },
    /// A TSUID given by a client is not valid hex of the right shape.
    #[error("invalid TSUID {tsuid:?}: {detail}")]
    InvalidTsuid {
        /// The TSUID as sent.
        tsuid: String,
        /// What was wrong.
        detail: String,
    },
    /// A tag value filter could not be built.
    #[error("invalid {filter} filter {expr:?}: {detail}")]
    InvalidFilter {
        /// The filter type.
        filter: &'static str,
        /// The expression.
        expr: String,
        /// What was wrong.
        detail: String,
    },
    /// An argument was invalid (time range, option value).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The shared UID allocator could not give a new name its UID (its store failed or
    /// holds something unexpected).
    #[error("cannot allocate a UID for {kind} {name:?}: {detail}")]
    UidAllocator {
        /// The UID kind.
        kind: UidKind,
        /// The new name.
        name: String,
        /// What failed.
        detail: String,
    },
    /// Stored bytes could not be decoded.
    #[error("corrupt {what} {key}: {detail}")]
    Corruption {
        /// What was being decoded (`rowkey`, `cell`, `uid row`, `meta row`).
        what: &'static str,
        /// The row or column, in hex.
        key: String,
        /// What was wrong.
        detail: String,
    },
    /// A compacted row block could not be decoded (or encoded).
    #[error("corrupt row block: {0}")]
    Block(#[from] BlockError),
}

/// Errors from encoding or decoding a block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BlockError {
    /// Encode input whose timestamps do not strictly increase.
    #[error("timestamps must strictly increase: point {index} has ts {ts} after {prev}")]
    NotIncreasing {
        /// Index of the offending point.
        index: usize,
        /// Timestamp of the point before it.
        prev: i64,
        /// Its timestamp.
        ts: i64,
    },
    /// More points than [`MAX_POINTS`](crate::MAX_POINTS) (on encode, or claimed by a block).
    #[error("block has {count} points, more than the maximum {max}")]
    TooManyPoints {
        /// Points given or claimed.
        count: u64,
        /// The limit.
        max: usize,
    },
    /// The block ends before a field does.
    #[error("block truncated at byte {offset}: need {needed} bytes, {available} left")]
    Truncated {
        /// Byte offset of the field.
        offset: usize,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left in the block.
        available: usize,
    },
    /// Unknown format version.
    #[error("unsupported block version {got} (expected {expected})")]
    BadVersion {
        /// Version byte found.
        got: u8,
        /// Version this code reads.
        expected: u8,
    },
    /// The stored checksum does not match the bytes.
    #[error("block checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch {
        /// Checksum in the block.
        stored: u32,
        /// Checksum of the bytes read.
        computed: u32,
    },
    /// A varint longer than 10 bytes or above `u64::MAX`.
    #[error("bad varint at byte {offset}")]
    BadVarint {
        /// Byte offset where the varint starts.
        offset: usize,
    },
    /// A bit width above 64.
    #[error("bad bit width {width} at byte {offset}")]
    BadWidth {
        /// Byte offset of the width.
        offset: usize,
        /// The width found.
        width: u8,
    },
    /// An unknown tag byte.
    #[error("unknown {what} {tag} at byte {offset}")]
    BadTag {
        /// Byte offset of the tag.
        offset: usize,
        /// Which tag.
        what: &'static str,
        /// The tag found.
        tag: u8,
    },
    /// Fields that parse but contradict the format's invariants.
    #[error("corrupt block at byte {offset}: {what}")]
    Corrupt {
        /// Byte offset of the field (or column) at fault.
        offset: usize,
        /// What is wrong.
        what: &'static str,
    },
    /// The caller's buffers are shorter than the block
    /// ([`decode_block_into`](crate::decode_block_into)).
    #[error("block has {needed} points, the buffers hold {available}")]
    BufferTooSmall {
        /// Points in the block.
        needed: usize,
        /// Slots in the smaller buffer.
        available: usize,
    },
    /// Bytes left over after the last column.
    #[error("{extra} unexpected bytes after the value column at byte {offset}")]
    TrailingBytes {
        /// Where the extra bytes start.
        offset: usize,
        /// How many there are.
        extra: usize,
    },
}

impl Error {
    /// The category of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Engine(e) => engine_kind(e),
            Error::WriteFailed(e) => engine_kind(e),
            Error::Point(_)
            | Error::NameExists { .. }
            | Error::InvalidTsuid { .. }
            | Error::InvalidFilter { .. }
            | Error::InvalidArgument(_) => ErrorKind::Client,
            Error::NoSuchName { .. } | Error::NoSuchUid { .. } => ErrorKind::NotFound,
            Error::UidAllocator { .. } => ErrorKind::Unavailable,
            Error::UidsExhausted { .. }
            | Error::SeriesExhausted { .. }
            | Error::Corruption { .. }
            | Error::Block(_) => ErrorKind::Server,
        }
    }

    /// Why a point this error refused was refused.
    pub fn rejection(&self) -> Rejection {
        match self {
            Error::Point(p) => p.rejection(),
            Error::NoSuchName { .. } => Rejection::UnknownName,
            Error::Engine(_) | Error::WriteFailed(_) => Rejection::Storage,
            _ => Rejection::Other,
        }
    }

    pub(crate) fn corruption(what: &'static str, key: &[u8], detail: impl Into<String>) -> Error {
        Error::Corruption {
            what,
            key: hex_upper(key),
            detail: detail.into(),
        }
    }
}

fn engine_kind(e: &strata_engine::Error) -> ErrorKind {
    match e.kind() {
        strata_engine::ErrorKind::Client => ErrorKind::Client,
        strata_engine::ErrorKind::NotFound => ErrorKind::NotFound,
        strata_engine::ErrorKind::Server => ErrorKind::Server,
        strata_engine::ErrorKind::Unavailable => ErrorKind::Unavailable,
    }
}

/// Prints a non-finite double as Java does (`NaN`, `Infinity`, `-Infinity`).
fn java_double(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v.is_infinite() {
        if v > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
    } else {
        v.to_string()
    }
}

/// Upper-case hex of `bytes`, as OpenTSDB prints UIDs and TSUIDs.
pub(crate) fn hex_upper(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

/// Formats tags as OpenTSDB prints a tag map: `{k=v, k=v}`.
pub(crate) fn format_tags<S: AsRef<str>>(tags: &[(S, S)]) -> String {
    let mut s = String::from("{");
    for (i, (k, v)) in tags.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(k.as_ref());
        s.push('=');
        s.push_str(v.as_ref());
    }
    s.push('}');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_match_opentsdb() {
        let e = Error::UidsExhausted {
            kind: UidKind::Metric,
        };
        assert_eq!(
            e.to_string(),
            "All Unique IDs for metrics on 3 bytes are already assigned!"
        );
        assert_eq!(e.kind(), ErrorKind::Server);
        let e = Error::NoSuchName {
            kind: UidKind::Tagv,
            name: "web01".into(),
        };
        assert_eq!(e.to_string(), "No such name for 'tagv': 'web01'");
        assert_eq!(e.kind(), ErrorKind::NotFound);
        let e = Error::from(PointError::NoTags {
            metric: "sys.cpu".into(),
        });
        assert_eq!(
            e.to_string(),
            "Need at least one tag (metric=sys.cpu, tags={})"
        );
        assert_eq!(e.kind(), ErrorKind::Client);
    }

    #[test]
    fn non_finite_values_print_as_java() {
        let e = |v| PointError::NotFinite {
            value: v,
            metric: "m".into(),
            timestamp: 1,
        };
        assert_eq!(
            e(f64::NEG_INFINITY).to_string(),
            "value is NaN or Infinite: -Infinity for metric=m timestamp=1"
        );
        assert!(e(f64::INFINITY).to_string().contains(" Infinity "));
        assert!(e(f64::NAN).to_string().contains(" NaN "));
    }

    #[test]
    fn handles_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<crate::Tsdb>();
        check::<Error>();
    }

    #[test]
    fn hex_and_tags_format() {
        assert_eq!(hex_upper(&[0, 0, 0x2a]), "00002A");
        assert_eq!(format_tags(&[("a", "1"), ("b", "2")]), "{a=1, b=2}");
    }

    #[test]
    fn engine_errors_keep_their_kind() {
        let e: Error = strata_engine::Error::InvalidArgument("x".into()).into();
        assert_eq!(e.kind(), ErrorKind::Client);
        let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
        let e = Error::WriteFailed(Arc::new(strata_engine::Error::Io {
            context: "appending".into(),
            source: full,
        }));
        assert_eq!(e.kind(), ErrorKind::Unavailable);
    }
}
