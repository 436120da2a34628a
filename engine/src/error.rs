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
    /// A newer writer opened this database's object-store prefix: this one may no longer
    /// change it, and refuses every write until it is reopened. Reads go on.
    #[error(
        "writer fenced on {prefix}: this writer holds epoch {epoch}, but a writer with epoch \
         {newer_epoch} or later took over the prefix; writes are refused, reads go on"
    )]
    Fenced {
        /// The object-store prefix.
        prefix: String,
        /// This writer's epoch.
        epoch: u64,
        /// The epoch of the newer writer (at least).
        newer_epoch: u64,
    },
    /// The database is a read-only follower (`Db::open_read_only`).
    #[error("the database is read-only: {0}")]
    ReadOnly(String),
    /// A write waited for memtable flushes while the memtables were full, and no flush
    /// finished for [`crate::WRITE_STALL_LIMIT`]: the store under the flushes fails (an
    /// object store out of reach, say). The write is refused rather than held without end;
    /// it may be retried later. Reads go on.
    #[error(
        "writes held back: the memtables are full and no flush finished for {waited_secs} s \
         (last flush error: {cause}); retry later"
    )]
    Backpressure {
        /// How long the write waited.
        waited_secs: u64,
        /// The last flush's error, or `none` if the flushes are slow rather than failing.
        cause: String,
    },
}

impl Error {
    /// The category of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidArgument(_) => ErrorKind::Client,
            Error::NoSuchTable(_) => ErrorKind::NotFound,
            Error::WalFailed(_) | Error::Fenced { .. } | Error::Backpressure { .. } => {
                ErrorKind::Unavailable
            }
            Error::ReadOnly(_) => ErrorKind::Client,
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
            (
                Error::Fenced {
                    prefix: "p".into(),
                    epoch: 1,
                    newer_epoch: 2,
                },
                ErrorKind::Unavailable,
            ),
            (Error::ReadOnly("follower".into()), ErrorKind::Client),
        ];
        for (e, kind) in cases {
            assert_eq!(e.kind(), kind, "{e}");
        }
    }
}
