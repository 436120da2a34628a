//! Prometheus remote write 1.0 (`POST /api/v1/write`): a snappy-compressed (block format)
//! protobuf `prometheus.WriteRequest`, mapped to points (`docs/prometheus.md`).
//!
//! - `__name__` is the metric; every other label with a non-empty value is a tag (Prometheus
//!   treats an empty label value as an absent label). Names and values go through
//!   [`strata_tsdb::escape_name`], which leaves Prometheus' usual names alone and escapes the
//!   characters OpenTSDB does not allow (`localhost:9090` is stored as `localhost__x3A_9090`).
//! - Sample values are stored as floats with all their bits, timestamps in milliseconds.
//! - A stale marker (the NaN `0x7ff0000000000002`) is not a value and is not stored. Other NaN
//!   and infinite values cannot be stored (OpenTSDB refuses them); they are skipped and counted,
//!   and the request still succeeds, because they are valid Prometheus data that a retry or a
//!   400 cannot fix.
//! - Exemplars, native histograms and metadata (not part of 1.0) are ignored.
//!
//! The messages are declared here by hand with `prost`'s derive, so no `protoc` is needed.

use std::borrow::Cow;
use std::fmt::Write as _;

use bytes::Bytes;
use prost::Message as _;
use strata_tsdb::{ErrorKind, Value};

use crate::batch::{PointBatch, RefusalKind, join_errors, storage_timestamp, stored_name};
use crate::error::ProtocolError;

/// The bits of Prometheus' stale marker, a NaN that ends a series.
pub const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

/// How many error lines a 400 answer lists.
const MAX_LISTED_ERRORS: usize = 10;

/// `prometheus.WriteRequest`. Field 3 (metadata) is skipped on decode.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WriteRequest {
    /// The series, each with its labels and samples.
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}

/// `prometheus.TimeSeries`. Exemplars (3) and histograms (4) are skipped on decode.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeSeries {
    /// The labels, `__name__` among them, sorted by name.
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    /// The samples, oldest first.
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
}

/// `prometheus.Label`. The strings are decoded as bytes that share the request's buffer (no
/// copy, no allocation per label) and checked for UTF-8 when mapped.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Label {
    /// The label name.
    #[prost(bytes = "bytes", tag = "1")]
    pub name: Bytes,
    /// The label value.
    #[prost(bytes = "bytes", tag = "2")]
    pub value: Bytes,
}

/// `prometheus.Sample`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// The value.
    #[prost(double, tag = "1")]
    pub value: f64,
    /// Milliseconds since the epoch.
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// Decodes a request body: snappy (block format), then protobuf. The decompressed size is
/// checked against `max_bytes` before anything is allocated for it.
pub fn decode_write_request(body: &[u8], max_bytes: usize) -> Result<WriteRequest, ProtocolError> {
    let len = snap::raw::decompress_len(body).map_err(|e| ProtocolError::Snappy(e.to_string()))?;
    if len > max_bytes {
        return Err(ProtocolError::TooLarge { max: max_bytes });
    }
    let raw = snap::raw::Decoder::new()
        .decompress_vec(body)
        .map_err(|e| ProtocolError::Snappy(e.to_string()))?;
    WriteRequest::decode(Bytes::from(raw)).map_err(|e| ProtocolError::Protobuf(e.to_string()))
}

/// Encodes a request as Prometheus sends it (protobuf, then snappy): for tests and load tools.
pub fn encode_write_request(req: &WriteRequest) -> Vec<u8> {
    let raw = req.encode_to_vec();
    // Compressing a byte slice into a fresh vector only fails past snappy's 4 GiB limit.
    snap::raw::Encoder::new()
        .compress_vec(&raw)
        .unwrap_or_default()
}

/// A sample that was not turned into a point.
#[derive(Debug, Clone, PartialEq)]
struct Refused {
    series: usize,
    kind: RefusalKind,
    /// How many samples this refusal covers.
    samples: usize,
    why: String,
}

/// The points of a [`WriteRequest`], and what was left out of them.
#[derive(Debug)]
pub struct RemoteWriteBatch<'a> {
    req: &'a WriteRequest,
    batch: PointBatch<'a>,
    refused: Vec<Refused>,
    stale: u64,
    not_finite: u64,
    samples: u64,
}

impl<'a> RemoteWriteBatch<'a> {
    /// Maps every sample of `req` to a point.
    pub fn new(req: &'a WriteRequest) -> Self {
        let mut out = RemoteWriteBatch {
            req,
            batch: PointBatch::default(),
            refused: Vec::new(),
            stale: 0,
            not_finite: 0,
            samples: 0,
        };
        for (i, ts) in req.timeseries.iter().enumerate() {
            out.add_series(i, ts);
        }
        out
    }

    fn add_series(&mut self, index: usize, ts: &'a TimeSeries) {
        self.samples += ts.samples.len() as u64;
        if ts.samples.is_empty() {
            return;
        }
        let refuse = |kind, why: String| Refused {
            series: index,
            kind,
            samples: ts.samples.len(),
            why,
        };
        let name = ts.labels.iter().find(|l| l.name == "__name__");
        let Some(name) = name.filter(|l| !l.value.is_empty()) else {
            let why = format!(
                "{} samples without a metric name (__name__)",
                ts.samples.len()
            );
            return self.refused.push(refuse(RefusalKind::Name, why));
        };
        let start = self.batch.tags_len();
        let mut metric = "";
        for l in &ts.labels {
            let (Ok(n), Ok(v)) = (std::str::from_utf8(&l.name), std::str::from_utf8(&l.value))
            else {
                self.batch.truncate_tags(start);
                let why = format!(
                    "{} samples with a label that is not UTF-8",
                    ts.samples.len()
                );
                return self.refused.push(refuse(RefusalKind::Name, why));
            };
            if std::ptr::eq(l, name) {
                metric = v;
            } else if !v.is_empty() {
                self.batch
                    .add_tag(stored_name(Cow::Borrowed(n)), stored_name(Cow::Borrowed(v)));
            }
        }
        let metric = self.batch.add_metric(stored_name(Cow::Borrowed(metric)));
        let tags = start..self.batch.tags_len();
        for s in &ts.samples {
            if s.value.to_bits() == STALE_NAN_BITS {
                self.stale += 1;
                continue;
            }
            if !s.value.is_finite() {
                self.not_finite += 1;
                continue;
            }
            match storage_timestamp(s.timestamp) {
                Ok(t) => self
                    .batch
                    .push(metric, tags.clone(), t, Value::Float(s.value), index),
                Err(why) => self.refused.push(Refused {
                    series: index,
                    kind: RefusalKind::Timestamp,
                    samples: 1,
                    why,
                }),
            }
        }
    }

    /// The points to store.
    pub fn points(&self) -> &PointBatch<'a> {
        &self.batch
    }

    /// Samples in the request, stale markers included.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Stale markers, which are not stored.
    pub fn stale_markers(&self) -> u64 {
        self.stale
    }

    /// NaN and infinite samples (stale markers aside), which cannot be stored and were skipped.
    pub fn not_finite(&self) -> u64 {
        self.not_finite
    }

    /// The kind of each sample refused before storage.
    pub fn refusals(&self) -> impl Iterator<Item = RefusalKind> + '_ {
        self.refused
            .iter()
            .flat_map(|r| std::iter::repeat_n(r.kind, r.samples))
    }

    /// The series `i` in Prometheus' notation, `name{k="v",…}`, for messages.
    fn describe(&self, i: usize) -> String {
        let Some(ts) = self.req.timeseries.get(i) else {
            return String::new();
        };
        let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
        let mut out = ts
            .labels
            .iter()
            .find(|l| l.name == "__name__")
            .map(|l| text(&l.value))
            .unwrap_or_default();
        out.push('{');
        let mut first = true;
        for l in ts.labels.iter().filter(|l| l.name != "__name__") {
            if !first {
                out.push(',');
            }
            first = false;
            let _ = write!(out, "{}={:?}", text(&l.name), text(&l.value));
        }
        out.push('}');
        out
    }

    /// The answer, once the points were written with `results` (one per point, in order):
    /// 204 when nothing was refused; 400 (not retried) naming what was refused when a sample
    /// or point was bad; 500 (retried) when storage failed.
    pub fn reply(&self, results: &[strata_tsdb::Result<()>]) -> RemoteWriteReply {
        let mut errors: Vec<String> = self
            .refused
            .iter()
            .map(|r| format!("{}: {}", self.describe(r.series), r.why))
            .collect();
        let mut server: Option<String> = None;
        let mut stored = 0u64;
        for (i, r) in results.iter().enumerate() {
            match r {
                Ok(()) => stored += 1,
                Err(e) if e.kind() == ErrorKind::Server => {
                    server.get_or_insert_with(|| e.to_string());
                }
                Err(e) => errors.push(format!("{}: {e}", self.describe(self.batch.source(i)))),
            }
        }
        if let Some(e) = server {
            return RemoteWriteReply {
                status: 500,
                body: format!("storage failed, retry: {e}\n"),
                stored,
            };
        }
        if errors.is_empty() {
            return RemoteWriteReply {
                status: 204,
                body: String::new(),
                stored,
            };
        }
        RemoteWriteReply {
            status: 400,
            body: format!(
                "{stored} of {} samples stored; refused:\n{}\n",
                self.samples - self.stale - self.not_finite,
                join_errors(&errors, MAX_LISTED_ERRORS)
            ),
            stored,
        }
    }
}

/// The HTTP answer to a remote write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteWriteReply {
    /// 204, 400 or 500.
    pub status: u16,
    /// Plain text; empty on success.
    pub body: String,
    /// Points stored.
    pub stored: u64,
}

#[cfg(test)]
#[path = "remote_write/tests.rs"]
mod tests;
