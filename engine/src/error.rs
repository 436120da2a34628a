//! The engine's error type.

use std::io;
use std::sync::Arc;

/// Result alias for the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Who is at fault for an error, so API layers derive the HTTP status and the metric label
/// from [`Error::kind`] alone, without matching variants or message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The caller asked for something invalid.
    Client,
    /// The thing asked for does not exist.
    NotFound,
    /// The engine or the machine failed.
    Server,
    /// The engine refuses writes for now: the disk is full, or the write-ahead log failed and
    /// only a restart writes again. Reads still work (HTTP 503).
    Unavailable,
}

/// An engine error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An I/O operation failed.
    #[error("I/O error while {context}: {source}")]
    Io {
        /// What the engine was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Stored bytes failed a checksum or could not be decoded.
    #[error("corruption in {file} at offset {offset}: {detail}")]
    Corruption {
        /// The file that holds the bad bytes.
        file: String,
        /// The byte offset in that file.
        offset: u64,
        /// What was wrong.
        detail: String,
    },
    /// An argument was invalid.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The named table does not exist.
    #[error("no such table: {0}")]
    NoSuchTable(String),
    /// The database has been closed, or a background failure made it read-only.
    #[error("database is closed: {0}")]
    Closed(String),
    /// A write or fsync of the write-ahead log failed earlier (the cause), so the log's state
    /// on disk is unknown: every write is refused until a restart recovers from the files.
    #[error("writes are refused until a restart: the write-ahead log failed: {0}")]
    WalFailed(#[source] Arc<Error>),
}

impl Error {
    /// The category of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidArgument(_) => ErrorKind::Client,
            Error::NoSuchTable(_) => ErrorKind::NotFound,
            Error::WalFailed(_) => ErrorKind::Unavailable,
            Error::Io { source, .. } if source.kind() == io::ErrorKind::StorageFull => {
                ErrorKind::Unavailable
            }
            Error::Io { .. } | Error::Corruption { .. } | Error::Closed(_) => ErrorKind::Server,
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn corruption(
        file: impl Into<String>,
        offset: u64,
        detail: impl Into<String>,
    ) -> Error {
        Error::Corruption {
            file: file.into(),
            offset,
            detail: detail.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_a_kind() {
        let io = |kind| Error::io("writing", io::Error::from(kind));
        let cases = [
            (Error::InvalidArgument("x".into()), ErrorKind::Client),
            (Error::NoSuchTable("t".into()), ErrorKind::NotFound),
            (io(io::ErrorKind::StorageFull), ErrorKind::Unavailable),
            (io(io::ErrorKind::PermissionDenied), ErrorKind::Server),
            (Error::corruption("f", 3, "bad"), ErrorKind::Server),
            (Error::Closed("dropped".into()), ErrorKind::Server),
            (
                Error::WalFailed(Arc::new(io(io::ErrorKind::Other))),
                ErrorKind::Unavailable,
            ),
        ];
        for (e, kind) in cases {
            assert_eq!(e.kind(), kind, "{e}");
        }
    }
}
