//! strata-ingest: the write protocols: OpenTSDB's telnet `put` and HTTP `/api/put`,
//! Prometheus remote write and the Influx line protocol.
//!
//! Parsers work on byte slices and return [`PointRef`]s that borrow from the input; a telnet
//! line allocates nothing unless it is rejected. Error texts are OpenTSDB 2.4.1's, because
//! clients match on them (`PutDataPointRpc`, `TSDB.addPoint`). Points carry tsdb's
//! [`strata_tsdb::Value`], and their checks are tsdb's [`strata_tsdb::check_point`].
//!
//! - [`parse_command`], [`parse_put_line`], [`LineSplitter`]: the telnet protocol.
//! - [`decode_body`], [`parse_put_body`], [`PutResponse`]: HTTP `/api/put`.
//! - [`decompress_write_request`], [`RemoteWriteBatch`], [`KnownSeries`]: Prometheus remote
//!   write 1.0.
//! - [`InfluxBatch`], [`Precision`], [`KnownLines`]: the Influx line protocol (`/write`,
//!   `/api/v2/write`).
//!
//! Remote write and the line protocol map names with [`strata_tsdb::escape_name`] and hand
//! the storage layer a [`PointBatch`] of its own point type.

mod batch;
mod config;
mod error;
mod http_put;
mod influx;
mod json;
mod known_lines;
mod known_series;
mod line_protocol;
mod line_splitter;
mod point;
mod protobuf;
mod put_response;
mod remote_write;
mod telnet;

pub use batch::{PointBatch, RefusalKind};
pub use config::{DEFAULT_MAX_LINE_LEN, DEFAULT_MAX_TAGS, MAX_INLINE_TAGS, ParseConfig};
pub use error::{
    BodyError, Error, ErrorKind, LineTooLong, ProtocolError, PutError, PutPointError, Result,
    error_json,
};
pub use http_put::{ParsedPut, decode_body, parse_put_body};
pub use influx::{InfluxApi, InfluxBatch, InfluxReply, Precision};
pub use known_lines::KnownLines;
pub use known_series::KnownSeries;
pub use line_splitter::LineSplitter;
pub use point::{MAX_TIMESTAMP_MS, PointRef, Tags, is_millis};
pub use put_response::{DatapointEcho, PutFailure, PutResponse, ReplyMode};
pub use remote_write::{
    Label, RemoteWriteBatch, RemoteWriteReply, STALE_NAN_BITS, Sample, TimeSeries, WriteRequest,
    decompress_write_request, decompress_write_request_into, encode_write_request,
};
pub use telnet::{
    COMMAND_NAMES, Command, PutHead, check_units, help_reply, parse_command, parse_put_head,
    parse_put_line, unknown_command_reply,
};

#[cfg(test)]
mod proptests;
