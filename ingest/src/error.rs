//! Errors of the write protocols.
//!
//! The `Display` text of [`PutError`] is the exact telnet reply line (without the trailing `\n`),
//! and the `Display` text of [`PointError`] is the message OpenTSDB's `TSDB.addPoint` puts in its
//! `IllegalArgumentException`, which HTTP `/api/put?details` echoes verbatim. Clients match on
//! these strings, so they are copied from OpenTSDB 2.4.1 (see `shared/spec/opentsdb.md` §b.3, §c.2).

/// Who is at fault for an error, so the server can map it to a status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The client sent something invalid (HTTP 400).
    Client,
    /// The request body is larger than allowed (HTTP 413).
    TooLarge,
}

/// A point failed the checks OpenTSDB runs in `TSDB.addPoint` (§b.3 step 8).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PointError {
    /// The float value is NaN or infinite.
    #[error("value is NaN or Infinite: {value} for metric={metric} timestamp={timestamp}")]
    NotFinite {
        /// Java's rendering of the value: `NaN`, `Infinity` or `-Infinity`.
        value: &'static str,
        /// The metric name.
        metric: String,
        /// The timestamp as sent.
        timestamp: i64,
    },
    /// A millisecond timestamp above 9 999 999 999 999.
    #[error(
        "bad timestamp={timestamp} when trying to add value={value_bytes}/{flags} to \
         metric={metric}, tags={tags}"
    )]
    BadTimestamp {
        /// The timestamp as sent.
        timestamp: i64,
        /// The encoded value bytes in Java's `Arrays.toString` form, e.g. `[42]`.
        value_bytes: String,
        /// OpenTSDB's qualifier flags for the value (length - 1, plus 8 for floats).
        flags: u8,
        /// The metric name.
        metric: String,
        /// The tags in Java's map form, `{k=v, k2=v2}`.
        tags: String,
    },
    /// The point has no tags.
    #[error("Need at least one tag (metric={metric}, tags={{}})")]
    NoTags {
        /// The metric name.
        metric: String,
    },
    /// More tags than `max_tags`.
    #[error("Too many tags: {count} maximum allowed: {max}, tags: {tags}")]
    TooManyTags {
        /// How many distinct tags the point has.
        count: usize,
        /// The configured maximum.
        max: usize,
        /// The tags in Java's map form.
        tags: String,
    },
    /// A name holds a character outside the allowed set (§a.2).
    #[error("Invalid {what} (\"{name}\"): illegal character: {ch}")]
    IllegalCharacter {
        /// `metric name`, `tag name with value [<v>]` or `tag value with key [<k>]`.
        what: String,
        /// The offending name.
        name: String,
        /// The first illegal character.
        ch: char,
    },
    /// A name is empty.
    #[error("Invalid {what}: empty string")]
    EmptyName {
        /// What the name is, as in [`PointError::IllegalCharacter`].
        what: String,
    },
    /// A tag value is JSON `null` (HTTP only).
    #[error("Invalid {what}: null")]
    NullName {
        /// What the name is, as in [`PointError::IllegalCharacter`].
        what: String,
    },
}

/// A telnet `put` line was rejected. `Display` is the reply line without its `\n`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PutError {
    /// Fewer than four arguments after `put` (step 1).
    #[error("put: illegal argument: not enough arguments (need least 4, got {got})")]
    NotEnoughArguments {
        /// Tokens after `put`, empty ones included.
        got: usize,
    },
    /// The metric token is empty (step 2).
    #[error("put: illegal argument: empty metric name")]
    EmptyMetric,
    /// The timestamp or the value is not a number (steps 3 and 7). Holds Java's message.
    #[error("put: invalid value: {0}")]
    InvalidNumber(String),
    /// The timestamp is zero or negative (step 4).
    #[error("put: illegal argument: invalid timestamp: {0}")]
    InvalidTimestamp(i64),
    /// The value token is empty (step 5).
    #[error("put: illegal argument: empty value")]
    EmptyValue,
    /// A tag token is not `k=v` with both sides non-empty (step 6).
    #[error("put: illegal argument: invalid tag: {0}")]
    InvalidTag(String),
    /// The same tag key with a different value (step 6).
    #[error("put: illegal argument: duplicate tag: {tag}, tags={tags}")]
    DuplicateTag {
        /// The offending token.
        tag: String,
        /// The tags parsed before it, in Java's map form.
        tags: String,
    },
    /// The line is not UTF-8 (Strata stores names as UTF-8, exception #1).
    #[error("put: illegal argument: the line is not valid UTF-8")]
    InvalidUtf8,
    /// The point failed the storage-layer checks (step 8).
    #[error("put: illegal argument: {0}")]
    Point(#[from] PointError),
}

/// A telnet line exceeded the maximum length. The connection should be closed, as OpenTSDB does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("error: line too long: longer than {max} bytes")]
pub struct LineTooLong {
    /// The configured maximum line length in bytes (terminator excluded).
    pub max: usize,
}

/// An `/api/put` body was rejected as a whole; nothing from it may be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BodyError {
    /// The body is empty.
    #[error("Missing request content")]
    MissingContent,
    /// The first non-blank character is not `{` or `[`.
    #[error("The JSON must start as an object or an array")]
    NotObjectOrArray,
    /// The JSON is malformed or has the wrong shape; holds the parser's message.
    #[error("Unable to parse the given JSON")]
    Malformed(String),
    /// The body is `[]`.
    #[error("No datapoints found in content")]
    NoDatapoints,
    /// The gzip stream is corrupt; holds the decoder's message.
    #[error("Unable to decompress the request content")]
    Gzip(String),
    /// The (decompressed) body exceeds the configured maximum.
    #[error("Request content is too large")]
    TooLarge {
        /// The maximum in bytes.
        max: usize,
    },
}

impl BodyError {
    /// The category of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            BodyError::TooLarge { .. } => ErrorKind::TooLarge,
            _ => ErrorKind::Client,
        }
    }

    /// The HTTP status code OpenTSDB answers with.
    pub fn status(&self) -> u16 {
        match self.kind() {
            ErrorKind::Client => 400,
            ErrorKind::TooLarge => 413,
        }
    }

    /// The `details` field of the error JSON, if any.
    pub fn details(&self) -> Option<String> {
        match self {
            BodyError::Malformed(d) | BodyError::Gzip(d) => Some(d.clone()),
            BodyError::TooLarge { max } => Some(format!("The limit is {max} bytes")),
            _ => None,
        }
    }

    /// The OpenTSDB error body, `{"error":{"code":..,"message":..[,"details":..]}}`.
    pub fn to_json(&self) -> Vec<u8> {
        crate::put_response::error_json(self.status(), &self.to_string(), self.details().as_deref())
    }
}

/// A remote write or line protocol request was rejected as a whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The body is not snappy (block format); holds the decoder's message.
    #[error("the body is not snappy-compressed: {0}")]
    Snappy(String),
    /// The decompressed body is not a `prometheus.WriteRequest`; holds the decoder's message.
    #[error("the body is not a protobuf WriteRequest: {0}")]
    Protobuf(String),
    /// The decompressed body exceeds the configured maximum.
    #[error("the decompressed body is larger than the {max} byte limit")]
    TooLarge {
        /// The maximum in bytes.
        max: usize,
    },
}

impl ProtocolError {
    /// The category of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ProtocolError::TooLarge { .. } => ErrorKind::TooLarge,
            _ => ErrorKind::Client,
        }
    }

    /// The HTTP status code: 400, or 413 when too large.
    pub fn status(&self) -> u16 {
        match self.kind() {
            ErrorKind::Client => 400,
            ErrorKind::TooLarge => 413,
        }
    }
}

/// Any error of this crate.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A telnet `put` line was rejected.
    #[error(transparent)]
    Put(#[from] PutError),
    /// A telnet line was too long.
    #[error(transparent)]
    LineTooLong(#[from] LineTooLong),
    /// An HTTP put body was rejected.
    #[error(transparent)]
    Body(#[from] BodyError),
    /// A remote write or line protocol body was rejected.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
}

impl Error {
    /// The category of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Body(b) => b.kind(),
            Error::Protocol(p) => p.kind(),
            Error::Put(_) | Error::LineTooLong(_) => ErrorKind::Client,
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
