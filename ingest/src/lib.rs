//! strata-ingest: the OpenTSDB write protocols (telnet `put` and HTTP `/api/put`).
//!
//! Parsers work on byte slices and return [`PointRef`]s that borrow from the input; a telnet
//! line allocates nothing unless it is rejected. Error texts are OpenTSDB 2.4.1's, because
//! clients match on them (`shared/spec/opentsdb.md` §b.3, §c.2).
//!
//! - [`parse_command`], [`parse_put_line`], [`LineSplitter`]: the telnet protocol.
//! - [`decode_body`], [`parse_put_body`], [`PutResponse`]: HTTP `/api/put`.

mod config;
mod error;
mod http_put;
mod json;
mod line_splitter;
mod point;
mod put_response;
mod telnet;

pub use config::{DEFAULT_MAX_LINE_LEN, DEFAULT_MAX_TAGS, ParseConfig};
pub use error::{BodyError, Error, ErrorKind, LineTooLong, PointError, PutError, Result};
pub use http_put::{DatapointEcho, ParsedPut, PutFailure, decode_body, parse_put_body};
pub use line_splitter::LineSplitter;
pub use point::{MAX_INLINE_TAGS, MAX_TIMESTAMP_MS, Num, PointRef, Tags, is_millis};
pub use put_response::{PutResponse, ReplyMode, error_json};
pub use telnet::{
    COMMAND_NAMES, Command, PutHead, help_reply, parse_command, parse_put_head, parse_put_line,
    unknown_command_reply,
};

#[cfg(test)]
mod proptests;
