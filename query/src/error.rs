//! The query crate's error type. Each message is OpenTSDB's wording where clients may match on it.

/// Errors from parsing and evaluating queries.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A time string (start, end, relative, absolute) could not be parsed (OpenTSDB docs:
    /// `user_guide/query/dates`).
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
    /// A duration (`1h`, `5m`, `500ms`) could not be parsed (OpenTSDB docs:
    /// `user_guide/query/dates`).
    #[error("{message}")]
    InvalidDuration {
        /// The offending input.
        input: String,
        /// OpenTSDB's full message, which names the input.
        message: String,
    },
    /// A downsample specifier is malformed (OpenTSDB docs: `user_guide/query/downsampling`).
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
    /// A PromQL query uses a part of PromQL that Strata does not evaluate; the message names
    /// it (HTTP 400, Prometheus' `bad_data`).
    #[error("{0}")]
    Unsupported(String),
    /// A PromQL query failed while it ran, as Prometheus' `execution` errors do (HTTP 422):
    /// two series with the same labels in one vector, ambiguous vector matching.
    #[error("{0}")]
    Execution(String),
}

/// What an error is, for the HTTP status it is answered with and the label it is counted under,
/// so that API layers need not match on variants or on messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The request was wrong (400).
    Client,
    /// The request names a metric, tag or TSUID that does not exist. OpenTSDB answers such a
    /// query with 400, and so does Strata.
    NotFound,
    /// The query reads more series or data points than the server allows (413).
    LimitExceeded,
    /// The query ran past the server's timeout (408).
    Timeout,
    /// Something failed on the server side (500).
    Server,
}

impl ErrorKind {
    /// The HTTP status of an error of this kind.
    pub fn status(self) -> u16 {
        match self {
            ErrorKind::Client | ErrorKind::NotFound => 400,
            ErrorKind::LimitExceeded => 413,
            ErrorKind::Timeout => 408,
            ErrorKind::Server => 500,
        }
    }

    /// A short label for metrics: `client`, `not_found`, `limit`, `timeout` or `server`.
    pub fn label(self) -> &'static str {
        match self {
            ErrorKind::Client => "client",
            ErrorKind::NotFound => "not_found",
            ErrorKind::LimitExceeded => "limit",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Server => "server",
        }
    }
}

impl Error {
    /// What this error is.
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
            | Error::Unsupported(_)
            | Error::Execution(_) => ErrorKind::Client,
            Error::NoSuchName(_) => ErrorKind::NotFound,
            Error::LimitExceeded(_) => ErrorKind::LimitExceeded,
            Error::Timeout { .. } => ErrorKind::Timeout,
            Error::Storage(_) | Error::Encode(_) => ErrorKind::Server,
        }
    }

    /// The HTTP status OpenTSDB answers this error with.
    pub fn status(&self) -> u16 {
        self.kind().status()
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

    /// Every variant answers with the status it had before `kind` decided it.
    #[test]
    fn statuses_follow_the_kind() {
        let cases = [
            (Error::MissingStart, 400, "client"),
            (Error::UnknownAggregator("x".into()), 400, "client"),
            (Error::NoSuchName("x".into()), 400, "not_found"),
            (Error::LimitExceeded("x".into()), 413, "limit"),
            (
                Error::Timeout {
                    limit_ms: 1,
                    elapsed_ms: 2,
                },
                408,
                "timeout",
            ),
            (Error::Storage("x".into()), 500, "server"),
            (Error::Encode("x".into()), 500, "server"),
            (Error::Execution("x".into()), 400, "client"),
        ];
        for (e, status, label) in cases {
            assert_eq!(e.status(), status, "{e:?}");
            assert_eq!(e.kind().label(), label, "{e:?}");
        }
    }

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
