//! Errors of the write protocols.
//!
//! The `Display` text of [`PutError`] is the exact telnet reply line (without the trailing `\n`),
//! and that of [`PutPointError`] the `error` HTTP `/api/put?details` echoes for a point. Clients
//! match on these strings, so they are copied from OpenTSDB 2.4.1 (`PutDataPointRpc`,
//! `IncomingDataPoint`, `Tags.parseLong`; see `docs/compat.md` for where Strata differs).
//! The checks of a point's names, tags, timestamp and value (`TSDB.addPoint`) are
//! [`strata_tsdb::check_point`], with their errors [`PointError`].

use std::sync::Arc;

use serde::Serialize;
use strata_tsdb::{PointError, Rejection};

/// Who is at fault for an error, so the server can map it to a status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The client sent something invalid (HTTP 400).
    Client,
    /// The request body is larger than allowed (HTTP 413).
    TooLarge,
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

impl PutError {
    /// Why the line's point was refused.
    pub fn rejection(&self) -> Rejection {
        match self {
            PutError::NotEnoughArguments { .. } | PutError::InvalidUtf8 => Rejection::Syntax,
            PutError::EmptyMetric => Rejection::Name,
            PutError::InvalidTimestamp(_) => Rejection::Timestamp,
            // The timestamp and the value share this variant; both are malformed numbers.
            PutError::InvalidNumber(_) | PutError::EmptyValue => Rejection::Value,
            PutError::InvalidTag(_) | PutError::DuplicateTag { .. } => Rejection::Tags,
            PutError::Point(p) => p.rejection(),
        }
    }
}

/// Why one point of an `/api/put` body was not stored. `Display` is OpenTSDB's `error` text
/// for the point in the `?details` reply.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum PutPointError {
    /// The element is JSON `null`.
    #[error("Unexpected exception")]
    Null,
    /// No metric, or an empty one.
    #[error("Metric name was empty")]
    EmptyMetric,
    /// No timestamp, or one that is not positive.
    #[error("Invalid timestamp")]
    InvalidTimestamp,
    /// No value, or an empty one.
    #[error("Empty value")]
    EmptyValue,
    /// The value is not a number.
    #[error("Unable to parse value to a number")]
    InvalidValue,
    /// No tags.
    #[error("Missing tags")]
    MissingTags,
    /// The point failed the storage-layer checks.
    #[error(transparent)]
    Point(#[from] PointError),
    /// Storage refused the point.
    #[error("{}", storage_detail(.0))]
    Storage(Arc<strata_tsdb::Error>),
    /// The write failed without an answer from storage (it panicked); holds what is known.
    #[error("writing a put batch failed: {0}")]
    Internal(String),
}

/// The `?details` text of a point storage refused. A name without a UID while auto-create is
/// off is OpenTSDB's `Unknown metric`, whichever kind of name it is (`PutDataPointRpc` catches
/// `NoSuchUniqueName` for all three).
fn storage_detail(e: &strata_tsdb::Error) -> String {
    match e {
        strata_tsdb::Error::NoSuchName { .. } => "Unknown metric".into(),
        e => e.to_string(),
    }
}

impl PutPointError {
    /// Why the point was refused.
    pub fn rejection(&self) -> Rejection {
        match self {
            PutPointError::Null => Rejection::Other,
            PutPointError::EmptyMetric => Rejection::Name,
            PutPointError::InvalidTimestamp => Rejection::Timestamp,
            PutPointError::EmptyValue | PutPointError::InvalidValue => Rejection::Value,
            PutPointError::MissingTags => Rejection::Tags,
            PutPointError::Point(p) => p.rejection(),
            PutPointError::Storage(e) => e.rejection(),
            PutPointError::Internal(_) => Rejection::Storage,
        }
    }

    /// Who is at fault, as tsdb's errors say it: what status and which part of OpenTSDB's
    /// reply a failed point maps to.
    pub fn kind(&self) -> strata_tsdb::ErrorKind {
        match self {
            PutPointError::Storage(e) => e.kind(),
            PutPointError::Internal(_) => strata_tsdb::ErrorKind::Server,
            _ => strata_tsdb::ErrorKind::Client,
        }
    }
}

impl From<strata_tsdb::Error> for PutPointError {
    fn from(e: strata_tsdb::Error) -> Self {
        match e {
            strata_tsdb::Error::Point(p) => PutPointError::Point(p),
            e => PutPointError::Storage(Arc::new(e)),
        }
    }
}

impl PartialEq for PutPointError {
    /// Storage errors compare by their text (they hold I/O errors, which have no equality).
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (PutPointError::Point(a), PutPointError::Point(b)) => a == b,
            (PutPointError::Storage(a), PutPointError::Storage(b)) => {
                a.to_string() == b.to_string()
            }
            (PutPointError::Internal(a), PutPointError::Internal(b)) => a == b,
            (a, b) => {
                std::mem::discriminant(a) == std::mem::discriminant(b)
                    && !matches!(
                        a,
                        PutPointError::Point(_)
                            | PutPointError::Storage(_)
                            | PutPointError::Internal(_)
                    )
            }
        }
    }
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
        error_json(self.status(), &self.to_string(), self.details().as_deref())
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

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: ErrorInner<'a>,
}

#[derive(Serialize)]
struct ErrorInner<'a> {
    code: u16,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<&'a str>,
}

/// OpenTSDB's error body: `{"error":{"code":<status>,"message":"<msg>"[,"details":"<d>"]}}`.
pub fn error_json(code: u16, message: &str, details: Option<&str>) -> Vec<u8> {
    let details = details.filter(|d| !d.is_empty());
    let body = ErrorBody {
        error: ErrorInner {
            code,
            message,
            details,
        },
    };
    // Serialising these plain structs cannot fail; fall back to an empty object regardless.
    serde_json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec())
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
