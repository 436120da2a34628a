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
//! A request is decoded without a copy: [`RemoteWriteBatch::decode`] walks the protobuf in
//! place ([`crate::protobuf`]), and each series is resolved through [`KnownSeries`] by its
//! encoded labels, so a series seen before costs a hash lookup. The messages are also declared
//! by hand with `prost`'s derive (no `protoc`), for [`encode_write_request`].

use std::borrow::Cow;
use std::fmt::Write as _;
use std::ops::Range;

use bytes::Bytes;
use prost::Message as _;
use strata_tsdb::{ErrorKind, SeriesHandle, SeriesPoint, Tsdb, Value};

use crate::batch::{PointBatch, RefusalKind, join_errors, storage_timestamp, stored_name};
use crate::error::ProtocolError;
use crate::known_series::KnownSeries;
use crate::protobuf::{FieldReader, WireError, WireValue};

/// The bits of Prometheus' stale marker, a NaN that ends a series.
pub const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

/// How many error lines a 400 answer lists.
const MAX_LISTED_ERRORS: usize = 10;

/// The key byte of `TimeSeries.labels` (field 1, length-delimited).
const LABEL_KEY: u8 = 1 << 3 | 2;

/// The label that holds the metric name.
const METRIC_LABEL: &[u8] = b"__name__";

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

/// `prometheus.Label`.
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

/// Undoes a request body's snappy (block format). The decompressed size is checked against
/// `max_bytes` before anything is allocated for it.
pub fn decompress_write_request(body: &[u8], max_bytes: usize) -> Result<Vec<u8>, ProtocolError> {
    let mut out = Vec::new();
    let len = decompress_write_request_into(body, max_bytes, &mut out)?;
    out.truncate(len);
    Ok(out)
}

/// As [`decompress_write_request`], into `out`, which is grown as needed and never shrunk;
/// returns the length of the request at the start of `out`. A caller that keeps `out` from one
/// request to the next saves allocating and zeroing a buffer of a few hundred KiB per request,
/// and the page faults of touching it, which cost as much as decompressing it.
pub fn decompress_write_request_into(
    body: &[u8],
    max_bytes: usize,
    out: &mut Vec<u8>,
) -> Result<usize, ProtocolError> {
    let len = snap::raw::decompress_len(body).map_err(|e| ProtocolError::Snappy(e.to_string()))?;
    if len > max_bytes {
        return Err(ProtocolError::TooLarge { max: max_bytes });
    }
    if out.len() < len {
        out.resize(len, 0);
    }
    snap::raw::Decoder::new()
        .decompress(body, &mut out[..len])
        .map_err(|e| ProtocolError::Snappy(e.to_string()))
}

/// Encodes a request as Prometheus sends it (protobuf, then snappy): for tests and load tools.
pub fn encode_write_request(req: &WriteRequest) -> Vec<u8> {
    let raw = req.encode_to_vec();
    // Compressing a byte slice into a fresh vector only fails past snappy's 4 GiB limit.
    snap::raw::Encoder::new()
        .compress_vec(&raw)
        .unwrap_or_default()
}

impl From<WireError> for ProtocolError {
    fn from(e: WireError) -> Self {
        ProtocolError::Protobuf(e.0.to_owned())
    }
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

/// Where a series of the request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not resolved yet.
    Pending,
    /// Its samples are points.
    Ready,
    /// Refused or failed: none of its samples are points.
    Dead,
}

/// One series of a request, borrowing the request.
#[derive(Debug)]
struct SeriesRef<'a> {
    /// The encoded label fields: they name the series in [`KnownSeries`], and are decoded
    /// only for a series not found there.
    key: Cow<'a, [u8]>,
    /// Its storable samples in [`RemoteWriteBatch::entries`].
    entries: Range<usize>,
    /// Its samples: all, stale markers, and NaN or infinite values.
    samples: u32,
    stale: u32,
    not_finite: u32,
    state: State,
}

/// A sample that passed the value and timestamp checks.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Timestamp as storage takes it ([`storage_timestamp`]).
    timestamp: i64,
    value: f64,
}

/// A label's name and value as they are on the wire.
type RawLabel<'a> = (&'a [u8], &'a [u8]);

/// The stored metric and tags of a series.
type StoredNames<'a> = (Cow<'a, str>, Vec<(Cow<'a, str>, Cow<'a, str>)>);

/// The points of a remote write request, and what was left out of them.
#[derive(Debug)]
pub struct RemoteWriteBatch<'a> {
    series: Vec<SeriesRef<'a>>,
    entries: Vec<Entry>,
    /// By series, once resolved through storage.
    handles: Vec<Option<SeriesHandle>>,
    /// Series that storage refused to resolve, with the samples they held.
    failed: Vec<(usize, strata_tsdb::Error, u64)>,
    refused: Vec<Refused>,
    stale: u64,
    not_finite: u64,
    samples: u64,
}

impl<'a> RemoteWriteBatch<'a> {
    /// Decodes a `WriteRequest` (protobuf, after [`decompress_write_request`]) and checks every
    /// sample. Labels are decoded later, only for series not seen before.
    pub fn decode(raw: &'a [u8]) -> Result<Self, ProtocolError> {
        // A Prometheus series of one sample takes about 100 bytes.
        let guess = raw.len() / 96;
        let mut out = RemoteWriteBatch {
            series: Vec::with_capacity(guess),
            entries: Vec::with_capacity(guess),
            handles: Vec::new(),
            failed: Vec::new(),
            refused: Vec::new(),
            stale: 0,
            not_finite: 0,
            samples: 0,
        };
        let mut r = FieldReader::new(raw);
        while let Some((field, value)) = r.next_field()? {
            match (field, value) {
                (1, WireValue::Bytes(ts)) => out.add_series(ts)?,
                (1, _) => return Err(WireError("timeseries is not a message").into()),
                _ => {}
            }
        }
        out.handles = vec![None; out.series.len()];
        Ok(out)
    }

    /// Decodes one `TimeSeries`: its samples, and where its labels are.
    fn add_series(&mut self, ts: &'a [u8]) -> Result<(), WireError> {
        let index = self.series.len();
        // The label fields, as one span of `ts` while they are contiguous.
        let mut span: Option<Range<usize>> = None;
        let mut scattered: Option<Vec<u8>> = None;
        let entries_start = self.entries.len();
        let (mut samples, mut stale, mut not_finite) = (0u32, 0u32, 0u32);
        let mut r = FieldReader::new(ts);
        let mut label = |at: usize, end: usize| match (&mut span, &mut scattered) {
            (_, Some(key)) => key.extend_from_slice(&ts[at..end]),
            (Some(s), None) if s.end == at => s.end = end,
            (Some(s), None) => {
                let mut key = ts[s.clone()].to_vec();
                key.extend_from_slice(&ts[at..end]);
                scattered = Some(key);
            }
            (None, None) => span = Some(at..end),
        };
        loop {
            let at = r.position();
            // A label's key and length take a byte each: read without the general walk.
            if r.short_bytes(LABEL_KEY).is_some() {
                label(at, r.position());
                continue;
            }
            let Some((field, value)) = r.next_field()? else {
                break;
            };
            match (field, value) {
                (1, WireValue::Bytes(_)) => label(at, r.position()),
                (2, WireValue::Bytes(sample)) => {
                    let (value, timestamp) = decode_sample(sample)?;
                    samples = samples.saturating_add(1);
                    if value.to_bits() == STALE_NAN_BITS {
                        stale += 1;
                    } else if !value.is_finite() {
                        not_finite += 1;
                    } else {
                        match storage_timestamp(timestamp) {
                            Ok(timestamp) => self.entries.push(Entry { timestamp, value }),
                            Err(why) => self.refused.push(Refused {
                                series: index,
                                kind: RefusalKind::Timestamp,
                                samples: 1,
                                why,
                            }),
                        }
                    }
                }
                (1 | 2, _) => return Err(WireError("label or sample is not a message")),
                _ => {}
            }
        }
        let key = match (scattered, span) {
            (Some(key), _) => Cow::Owned(key),
            (None, Some(s)) => Cow::Borrowed(&ts[s]),
            (None, None) => Cow::Borrowed(&[][..]),
        };
        self.samples += u64::from(samples);
        self.stale += u64::from(stale);
        self.not_finite += u64::from(not_finite);
        self.series.push(SeriesRef {
            key,
            entries: entries_start..self.entries.len(),
            samples,
            stale,
            not_finite,
            state: State::Pending,
        });
        Ok(())
    }

    /// The stored metric and tags of series `i` (names escaped, empty values left out), or
    /// `Ok(Err(refusal))` when they cannot be stored (the series is then refused).
    fn names(&mut self, i: usize) -> Result<Option<StoredNames<'a>>, ProtocolError> {
        let key: &'a [u8] = match &self.series[i].key {
            // The owned key lives as long as the batch, not `'a`: copy its labels out.
            Cow::Owned(_) => return self.names_owned(i),
            Cow::Borrowed(k) => k,
        };
        let labels = decode_labels(key)?;
        Ok(self.stored_names(i, &labels))
    }

    /// [`Self::names`] for a series whose label fields were scattered (owned names).
    fn names_owned(&mut self, i: usize) -> Result<Option<StoredNames<'a>>, ProtocolError> {
        let key = self.series[i].key.to_vec();
        let labels = decode_labels(&key)?;
        let owned: Vec<(Vec<u8>, Vec<u8>)> = labels
            .iter()
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect();
        let borrowed: Vec<RawLabel<'_>> = owned.iter().map(|(n, v)| (&n[..], &v[..])).collect();
        Ok(self.stored_names(i, &borrowed).map(|(m, tags)| {
            let own = |c: Cow<'_, str>| Cow::Owned(c.into_owned());
            (
                own(m),
                tags.into_iter().map(|(k, v)| (own(k), own(v))).collect(),
            )
        }))
    }

    /// Maps decoded labels to stored names, refusing the series when it cannot be stored.
    fn stored_names<'l>(
        &mut self,
        i: usize,
        labels: &[(&'l [u8], &'l [u8])],
    ) -> Option<StoredNames<'l>> {
        let name = labels.iter().find(|(n, _)| *n == METRIC_LABEL);
        if name.is_none_or(|(_, v)| v.is_empty()) {
            self.refuse(i, |n| {
                format!("{n} samples without a metric name (__name__)")
            });
            return None;
        }
        let mut metric = None;
        let mut tags = Vec::with_capacity(labels.len());
        for &(n, v) in labels {
            let (Ok(n), Ok(v)) = (std::str::from_utf8(n), std::str::from_utf8(v)) else {
                self.refuse(i, |n| format!("{n} samples with a label that is not UTF-8"));
                return None;
            };
            if metric.is_none() && n.as_bytes() == METRIC_LABEL {
                metric = Some(stored_name(Cow::Borrowed(v)));
            } else if !v.is_empty() {
                tags.push((stored_name(Cow::Borrowed(n)), stored_name(Cow::Borrowed(v))));
            }
        }
        Some((metric.unwrap_or_default(), tags))
    }

    /// Refuses series `i` by name: every one of its samples, stale markers and bad values
    /// included, counts as refused for that, as `why(samples)` says.
    fn refuse(&mut self, i: usize, why: impl FnOnce(usize) -> String) {
        let s = &mut self.series[i];
        s.state = State::Dead;
        self.stale -= u64::from(s.stale);
        self.not_finite -= u64::from(s.not_finite);
        let n = s.samples as usize;
        self.refused.retain(|r| r.series != i);
        // In series order, as the answer lists them.
        let at = self.refused.partition_point(|r| r.series < i);
        self.refused.insert(
            at,
            Refused {
                series: i,
                kind: RefusalKind::Name,
                samples: n,
                why: why(n),
            },
        );
    }

    /// Whether series `i` must be looked at: it has samples and is not resolved yet.
    fn pending(&self, i: usize) -> bool {
        let s = &self.series[i];
        s.state == State::Pending && s.samples > 0
    }

    /// Resolves each series with samples to a storage handle: from `known` when its labels
    /// were seen before, else by mapping its names and asking `tsdb` (then `known` remembers
    /// it). A series whose names cannot be stored is refused. Fails, before anything is
    /// stored, on a label that is not a valid message.
    pub fn resolve(&mut self, tsdb: &Tsdb, known: &KnownSeries) -> Result<(), ProtocolError> {
        let pending: Vec<usize> = (0..self.series.len())
            .filter(|&i| self.pending(i))
            .collect();
        {
            let reader = known.reader(tsdb);
            let keys = pending.iter().map(|&i| &*self.series[i].key);
            let handles = &mut self.handles;
            reader.get_all(keys, |k, h| handles[pending[k]] = Some(h.clone()));
        }
        let mut misses = Vec::new();
        for i in pending {
            if self.handles[i].is_some() {
                self.series[i].state = State::Ready;
            } else {
                misses.push(i);
            }
        }
        let mut found = Vec::with_capacity(misses.len());
        for i in misses {
            let Some((metric, tags)) = self.names(i)? else {
                continue;
            };
            let s = &mut self.series[i];
            if s.entries.is_empty() {
                // Only stale markers or bad values: nothing to store.
                s.state = State::Dead;
                continue;
            }
            match tsdb.series_handle(&metric, &tags) {
                Ok(h) => {
                    found.push((Box::<[u8]>::from(&*s.key), h.clone()));
                    self.handles[i] = Some(h);
                    s.state = State::Ready;
                }
                Err(e) => {
                    s.state = State::Dead;
                    self.failed.push((i, e, s.entries.len() as u64));
                }
            }
        }
        known.insert(found);
        Ok(())
    }

    /// The points of the resolved series, for `Tsdb::write_series`; see [`Self::resolve`].
    pub fn series_points(&self) -> Vec<SeriesPoint<'_>> {
        let mut out = Vec::with_capacity(self.entries.len());
        for (s, handle) in self.series.iter().zip(&self.handles) {
            let (State::Ready, Some(series)) = (s.state, handle) else {
                continue;
            };
            out.extend(self.entries[s.entries.clone()].iter().map(|e| SeriesPoint {
                series,
                timestamp: e.timestamp,
                value: Value::Float(e.value),
            }));
        }
        out
    }

    /// The points with their stored names, for `Tsdb::write` (instead of [`Self::resolve`]).
    pub fn mapped_points(&mut self) -> Result<PointBatch<'a>, ProtocolError> {
        let mut batch = PointBatch::default();
        for i in 0..self.series.len() {
            if !self.pending(i) {
                continue;
            }
            let Some((metric, tags)) = self.names(i)? else {
                continue;
            };
            let start = batch.tags_len();
            for (k, v) in tags {
                batch.add_tag(k, v);
            }
            let tags = start..batch.tags_len();
            let metric = batch.add_metric(metric);
            let s = &mut self.series[i];
            s.state = State::Ready;
            for e in &self.entries[s.entries.clone()] {
                batch.push(metric, tags.clone(), e.timestamp, Value::Float(e.value), i);
            }
        }
        Ok(batch)
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

    /// What storage said about each series it would not resolve, with its samples.
    pub fn series_errors(&self) -> impl Iterator<Item = (&strata_tsdb::Error, u64)> + '_ {
        self.failed.iter().map(|(_, e, n)| (e, *n))
    }

    /// The series `i` in Prometheus' notation, `name{k="v",…}`, for messages.
    fn describe(&self, i: usize) -> String {
        let Some(s) = self.series.get(i) else {
            return String::new();
        };
        let labels = decode_labels(&s.key).unwrap_or_default();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let mut out = labels
            .iter()
            .find(|(n, _)| *n == METRIC_LABEL)
            .map(|(_, v)| text(v))
            .unwrap_or_default();
        out.push('{');
        let mut first = true;
        for (n, v) in labels.iter().filter(|(n, _)| *n != METRIC_LABEL) {
            if !first {
                out.push(',');
            }
            first = false;
            let _ = write!(out, "{}={:?}", text(n), text(v));
        }
        out.push('}');
        out
    }

    /// The answer, once the points were written with `results` (one per point of
    /// [`Self::series_points`] or [`Self::mapped_points`], in order): 204 when nothing was
    /// refused; 400 (not retried) naming what was refused when a sample or series was bad;
    /// 500 (retried) when storage failed.
    pub fn reply(&self, results: &[strata_tsdb::Result<()>]) -> RemoteWriteReply {
        let mut errors: Vec<String> = self
            .refused
            .iter()
            .map(|r| format!("{}: {}", self.describe(r.series), r.why))
            .collect();
        let mut server: Option<String> = None;
        for (i, e, _) in &self.failed {
            if e.kind() == ErrorKind::Server {
                server.get_or_insert_with(|| e.to_string());
            } else {
                errors.push(format!("{}: {e}", self.describe(*i)));
            }
        }
        let sources = self
            .series
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state == State::Ready)
            .flat_map(|(i, s)| std::iter::repeat_n(i, s.entries.len()));
        let mut stored = 0u64;
        for (r, source) in results.iter().zip(sources) {
            match r {
                Ok(()) => stored += 1,
                Err(e) if e.kind() == ErrorKind::Server => {
                    server.get_or_insert_with(|| e.to_string());
                }
                Err(e) => errors.push(format!("{}: {e}", self.describe(source))),
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

/// A `prometheus.Label`'s name and value; the last of a repeated field counts, as in prost.
fn decode_label(msg: &[u8]) -> Result<(&[u8], &[u8]), WireError> {
    let (mut name, mut value): (&[u8], &[u8]) = (&[], &[]);
    let mut r = FieldReader::new(msg);
    while let Some((field, v)) = r.next_field()? {
        match (field, v) {
            (1, WireValue::Bytes(b)) => name = b,
            (2, WireValue::Bytes(b)) => value = b,
            (1 | 2, _) => return Err(WireError("label name or value is not bytes")),
            _ => {}
        }
    }
    Ok((name, value))
}

/// The name and value of each label of a series' label fields (`TimeSeries` field 1).
fn decode_labels(fields: &[u8]) -> Result<Vec<RawLabel<'_>>, WireError> {
    let mut out = Vec::with_capacity(8);
    let mut r = FieldReader::new(fields);
    while let Some((_, v)) = r.next_field()? {
        if let WireValue::Bytes(label) = v {
            out.push(decode_label(label)?);
        }
    }
    Ok(out)
}

/// A `prometheus.Sample`'s value and timestamp.
#[inline]
fn decode_sample(msg: &[u8]) -> Result<(f64, i64), WireError> {
    // As every encoder writes it: the value (tag 0x09, 8 bytes), then the timestamp (tag 0x10,
    // a varint that ends the message).
    if let [0x09, b0, b1, b2, b3, b4, b5, b6, b7, 0x10, varint @ ..] = msg {
        let mut r = FieldReader::new(varint);
        if let Ok(t) = r.varint()
            && r.position() == varint.len()
        {
            let bits = u64::from_le_bytes([*b0, *b1, *b2, *b3, *b4, *b5, *b6, *b7]);
            return Ok((f64::from_bits(bits), t as i64));
        }
    }
    let (mut value, mut timestamp) = (0.0, 0);
    let mut r = FieldReader::new(msg);
    while let Some((field, v)) = r.next_field()? {
        match (field, v) {
            (1, WireValue::Fixed64(bits)) => value = f64::from_bits(bits),
            // int64 on the wire is the two's complement as a varint.
            (2, WireValue::Varint(t)) => timestamp = t as i64,
            (1 | 2, _) => return Err(WireError("sample value or timestamp of the wrong type")),
            _ => {}
        }
    }
    Ok((value, timestamp))
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
