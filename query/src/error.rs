//! The query crate's error type. Each message is OpenTSDB's wording where clients may match on it.

/// Errors from parsing and evaluating queries.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A time string (start, end, relative, absolute) could not be parsed (§e.1).
    #[error("{message}")]
    InvalidTime {
        /// The offending input, as given.
        input: String,
        /// OpenTSDB's full message, which names the input.
        message: String,
    },
    /// The query has no start time.
    #[error("Missing start time")]
    MissingStart,
    /// The query's end is not after its start.
    #[error("End time [{end_ms}] must be greater than the start time [{start_ms}]")]
    EndBeforeStart {
        /// Parsed start, ms.
        start_ms: i64,
        /// Parsed end, ms.
        end_ms: i64,
    },
    /// A duration (`1h`, `5m`, `500ms`) could not be parsed (§e.1).
    #[error("{message}")]
    InvalidDuration {
        /// The offending input.
        input: String,
        /// OpenTSDB's full message, which names the input.
        message: String,
    },
    /// A downsample specifier is malformed (§e.4).
    #[error("{message}")]
    InvalidDownsample {
        /// The offending specifier.
        spec: String,
        /// OpenTSDB's full message.
        message: String,
    },
    /// The named aggregator does not exist (names are case-sensitive).
    #[error("No such name for 'aggregator': '{0}'")]
    UnknownAggregator(String),
    /// A fill policy would emit more buckets than the limit allows.
    #[error("Too many downsample buckets to fill: {buckets} exceeds the limit of {limit}")]
    TooManyBuckets {
        /// Buckets the query range would need.
        buckets: i64,
        /// The limit.
        limit: i64,
    },
    /// The `scalar` fill policy parses but cannot be evaluated.
    #[error("Unsupported fill policy: scalar")]
    UnsupportedFill,
    /// A malformed request (bad JSON, bad `m=` syntax, bad filter, missing field): HTTP 400.
    #[error("{message}")]
    BadRequest {
        /// OpenTSDB's message.
        message: String,
        /// Extra detail for the error body's `details`, if any.
        details: Option<String>,
    },
    /// A metric, tag key or tag value named by the query does not exist (HTTP 400).
    #[error("{0}")]
    NoSuchName(String),
    /// The query would read more series or data points than configured (HTTP 413).
    #[error("{0}")]
    LimitExceeded(String),
    /// Reading storage failed (HTTP 500).
    #[error("{0}")]
    Storage(String),
    /// The query ran past [`crate::QueryLimits::timeout`] (HTTP 408, OpenTSDB's
    /// `tsd.query.timeout` status).
    #[error(
        "Sorry, the query timed out after {elapsed_ms} ms, more than our limit of {limit_ms} ms. Please try filtering using more tags or decrease your time range."
    )]
    Timeout {
        /// The configured limit, ms.
        limit_ms: u64,
        /// Time spent when the check fired, ms.
        elapsed_ms: u64,
    },
    /// Writing an Arrow or Parquet result failed (HTTP 500).
    #[error("Encoding the result failed: {0}")]
    Encode(String),
}

/// How an error maps to an HTTP status class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request was wrong (400).
    Client,
    /// Something failed on the server side (500).
    Server,
}

impl Error {
    /// The status category of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidTime { .. }
            | Error::MissingStart
            | Error::EndBeforeStart { .. }
            | Error::InvalidDuration { .. }
            | Error::InvalidDownsample { .. }
            | Error::UnknownAggregator(_)
            | Error::TooManyBuckets { .. }
            | Error::UnsupportedFill
            | Error::BadRequest { .. }
            | Error::NoSuchName(_)
            | Error::LimitExceeded(_)
            | Error::Timeout { .. } => ErrorKind::Client,
            Error::Storage(_) | Error::Encode(_) => ErrorKind::Server,
        }
    }

    /// The HTTP status OpenTSDB answers this error with.
    pub fn status(&self) -> u16 {
        match self {
            Error::LimitExceeded(_) => 413,
            Error::Timeout { .. } => 408,
            Error::Storage(_) | Error::Encode(_) => 500,
            _ => 400,
        }
    }

    /// The error body's `details`: a bad request's own; for a name that does not resolve its
    /// message again, as OpenTSDB's; for a limit, the settings that set it.
    pub fn details(&self) -> Option<String> {
        match self {
            Error::BadRequest { details, .. } => details.clone(),
            Error::NoSuchName(message) => Some(message.clone()),
            Error::LimitExceeded(_) => Some(
                "The limits are the server settings query_max_series (series per sub-query) \
                 and query_max_data_points (data points per query, OpenTSDB's \
                 tsd.query.limits.data_points.default)"
                    .to_owned(),
            ),
            _ => None,
        }
    }

    /// A 400 error with a message and no details.
    pub(crate) fn bad_request(message: impl Into<String>) -> Error {
        Error::BadRequest {
            message: message.into(),
            details: None,
        }
    }
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_repeat_unresolved_names_and_name_the_limits() {
        let e = Error::NoSuchName("No such name for 'metrics': 'x'".to_owned());
        assert_eq!(
            e.details().as_deref(),
            Some("No such name for 'metrics': 'x'")
        );
        let e = Error::LimitExceeded("too many".to_owned());
        let details = e.details().unwrap_or_default();
        assert!(details.contains("query_max_data_points"), "{details}");
        assert!(details.contains("query_max_series"), "{details}");
        assert_eq!(Error::MissingStart.details(), None);
    }
}
