//! Self-monitoring: the Prometheus registry behind `/metrics`.
//!
//! Ingest counters (points received, stored and rejected by reason, per protocol), connection
//! counts and per-endpoint HTTP latency are counted as they happen. The engine's and the tsdb
//! layer's own counters (`EngineStats`, `TsdbStats`) are copied into gauges when `/metrics` is
//! scraped, so the storage crates stay free of Prometheus. Names carry their unit
//! (`_bytes`, `_seconds`, `_total`).

use prometheus::{
    Gauge, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};
use strata_tsdb::Rejection;

/// The protocol label of telnet ingest.
pub(crate) const TELNET: &str = "telnet";
/// The protocol label of HTTP ingest.
pub(crate) const HTTP: &str = "http";
/// The protocol label of Prometheus remote write.
pub(crate) const REMOTE_WRITE: &str = "remote_write";
/// The protocol label of the Influx line protocol (both APIs).
pub(crate) const INFLUX: &str = "influx";

/// Where a connection was when it timed out: the values of the `phase` label.
pub(crate) mod phase {
    /// A new connection sent nothing (`header_timeout_ms`).
    pub(crate) const FIRST_BYTE: &str = "first_byte";
    /// An HTTP request's header did not arrive in time (`header_timeout_ms`).
    pub(crate) const HTTP_HEADER: &str = "http_header";
    /// An HTTP connection waited too long for its next request (`http_idle_timeout_ms`).
    pub(crate) const HTTP_IDLE: &str = "http_idle";
    /// An HTTP request body paused too long (`http_idle_timeout_ms`).
    pub(crate) const HTTP_BODY: &str = "http_body";
    /// A telnet connection sent nothing for too long (`telnet_idle_timeout_ms`).
    pub(crate) const TELNET_IDLE: &str = "telnet_idle";
    /// Every phase.
    pub(crate) const ALL: [&str; 5] = [FIRST_BYTE, HTTP_HEADER, HTTP_IDLE, HTTP_BODY, TELNET_IDLE];
}

/// Why a point was rejected: the values of the `reason` label.
pub mod reason {
    /// The line or object had the wrong shape (too few tokens, not UTF-8).
    pub const BAD_SYNTAX: &str = "bad_syntax";
    /// An empty metric, tag key or tag value, or one with an illegal character.
    pub(crate) const BAD_NAME: &str = "bad_name";
    /// A missing, non-positive, malformed or out-of-range timestamp.
    pub(crate) const BAD_TIMESTAMP: &str = "bad_timestamp";
    /// A missing or malformed value, or NaN/infinity.
    pub(crate) const BAD_VALUE: &str = "bad_value";
    /// No tag, too many tags, a malformed or duplicate tag.
    pub(crate) const BAD_TAGS: &str = "bad_tags";
    /// A name with no UID while auto-creation is off.
    pub(crate) const UNKNOWN_NAME: &str = "unknown_name";
    /// The storage engine failed to commit the point.
    pub(crate) const STORAGE: &str = "storage";
    /// Anything else.
    pub(crate) const OTHER: &str = "other";
    /// The point was older than its metric's retention.
    pub(crate) const EXPIRED: &str = "expired";
    /// Every reason, for exporting zeros and for `/api/stats`.
    pub(crate) const ALL: [&str; 9] = [
        BAD_SYNTAX,
        BAD_NAME,
        BAD_TIMESTAMP,
        BAD_VALUE,
        BAD_TAGS,
        UNKNOWN_NAME,
        STORAGE,
        OTHER,
        EXPIRED,
    ];
}

/// The HTTP endpoints latency is recorded for; anything else is `other`.
pub(crate) const ENDPOINTS: [&str; 17] = [
    "put",
    "write",
    "influx/write",
    "influx/v2/write",
    "query",
    "query/last",
    "suggest",
    "stats",
    "version",
    "aggregators",
    "config/filters",
    "dropcaches",
    "admin/compact",
    "search/lookup",
    "uid/assign",
    "metrics",
    "other",
];

/// Upper bounds of the request latency histogram, in seconds: 100 µs to about 26 s, doubling.
/// Puts take well under a millisecond; large queries and `admin/compact` take seconds.
fn latency_buckets() -> Vec<f64> {
    (0..19).map(|i| 1e-4 * f64::from(1u32 << i)).collect()
}

/// Ingest counters of one protocol, resolved once so the hot path does no label lookups.
#[derive(Clone)]
pub(crate) struct ProtocolCounters {
    /// Points received (parsed or not).
    pub(crate) received: IntCounter,
    /// Points stored.
    pub(crate) stored: IntCounter,
    protocol: &'static str,
    rejected: IntCounterVec,
}

impl ProtocolCounters {
    /// Counts one rejected point.
    pub(crate) fn rejected(&self, reason: &str) {
        self.rejected_by(reason, 1);
    }

    /// Counts `n` rejected points.
    pub(crate) fn rejected_by(&self, reason: &str, n: u64) {
        if n > 0 {
            self.rejected
                .with_label_values(&[self.protocol, reason])
                .inc_by(n);
        }
    }
}

/// The registry and every metric in it.
pub(crate) struct Metrics {
    registry: Registry,
    /// Telnet ingest counters.
    pub(crate) telnet: ProtocolCounters,
    /// HTTP `/api/put` ingest counters.
    pub(crate) http: ProtocolCounters,
    /// Prometheus remote write ingest counters.
    pub(crate) remote_write: ProtocolCounters,
    /// Influx line protocol ingest counters.
    pub(crate) influx: ProtocolCounters,
    /// Remote write stale markers, which are not stored (nor counted as received).
    pub(crate) remote_write_stale: IntCounter,
    rejected: IntCounterVec,
    /// Connections open now.
    pub(crate) connections_open: IntGauge,
    /// Connections accepted, by protocol.
    pub(crate) connections: IntCounterVec,
    /// Connections refused because `max_connections` were open.
    pub(crate) connections_refused: IntCounter,
    /// Connections closed by a timeout, by phase (see [`phase`]).
    pub(crate) connections_timed_out: IntCounterVec,
    /// Telnet commands received (put lines included).
    pub(crate) telnet_commands: IntCounter,
    /// `/api/put?sync&sync_timeout` requests answered before the write was durable.
    pub(crate) put_sync_timeouts: IntCounter,
    /// Panics caught in a telnet batch or an HTTP request, by protocol: each is a bug,
    /// answered with an error instead of a dropped connection.
    pub(crate) ingest_panics: IntCounterVec,
    /// HTTP request latency by endpoint.
    pub(crate) request_duration: HistogramVec,
    engine: EngineGauges,
    tsdb: TsdbGauges,
    /// Requests and telnet commands refused by authentication, by protocol and
    /// [`auth_refusal`] kind.
    pub(crate) auth_refused: IntCounterVec,
}

/// The kinds of refusal `strata_auth_refused_total` counts.
pub(crate) mod auth_refusal {
    /// No credentials, or ones that match no token (HTTP 401, telnet `AUTH_FAIL` or a command
    /// before `auth`).
    pub(crate) const UNAUTHENTICATED: &str = "unauthenticated";
    /// A known client without the role (HTTP 403).
    pub(crate) const FORBIDDEN: &str = "forbidden";
}

impl Metrics {
    /// Counts a refusal by authentication on `protocol`.
    pub(crate) fn count_auth_refusal(&self, protocol: &str, err: &crate::auth::AuthError) {
        let kind = match err {
            crate::auth::AuthError::Forbidden { .. } => auth_refusal::FORBIDDEN,
            _ => auth_refusal::UNAUTHENTICATED,
        };
        self.auth_refused.with_label_values(&[protocol, kind]).inc();
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// Gauges that mirror `EngineStats` at scrape time.
struct EngineGauges {
    memtable_bytes: IntGauge,
    frozen_memtables: IntGauge,
    level_files: IntGaugeVec,
    level_bytes: IntGaugeVec,
    write_stalls: IntGauge,
    write_stall_seconds: Gauge,
    flushes: IntGauge,
    flush_seconds: Gauge,
    rows_folded: IntGauge,
    folds_rejected: IntGauge,
    compactions: IntGauge,
    compaction_seconds: Gauge,
    compaction_written_bytes: IntGauge,
    cache_hits: IntGauge,
    cache_misses: IntGauge,
    cache_bytes: IntGauge,
    wal_bytes: IntGauge,
    wal_syncs: IntGauge,
    wal_queue_bytes: IntGauge,
    batches_written: IntGauge,
    write_failed: IntGauge,
    wal_batches_refused: IntGauge,
    flush_errors: IntGauge,
    flush_failing: IntGauge,
    writes_refused: IntGauge,
    compaction_errors: IntGauge,
    expired_files_dropped: IntGauge,
    expired_dropped_bytes: IntGauge,
    expired_rows_dropped: IntGauge,
    store_requests: IntGaugeVec,
    store_bytes: IntGaugeVec,
    store_cache_hits: IntGauge,
    store_cache_misses: IntGauge,
    store_cache_bytes: IntGauge,
    store_manifest_version: IntGauge,
    store_epoch: IntGauge,
    store_fenced: IntGauge,
    replica_manifest_version: IntGauge,
    replica_refreshes: IntGauge,
    replica_refresh_errors: IntGauge,
    replica_changes: IntGauge,
    replica_loads: IntGauge,
    replica_refresh_age: Gauge,
    replica_load_seconds: Gauge,
}

/// Gauges that mirror `TsdbStats` at scrape time.
struct TsdbGauges {
    points_written: IntGauge,
    write_batches: IntGauge,
    points_rejected: IntGaugeVec,
    uids_assigned: IntGaugeVec,
    series_created: IntGauge,
    series: IntGauge,
    points_read: IntGauge,
    rows_read: IntGauge,
    rows_compacted: IntGauge,
    rowcompact_cells_folded: IntGauge,
    rowcompact_failures: IntGauge,
    rowcompact_errors: IntGauge,
}

/// Builds and registers metrics, remembering the first registration error.
struct Builder<'r> {
    registry: &'r Registry,
}

impl Builder<'_> {
    fn register<C: prometheus::core::Collector + Clone + 'static>(
        &self,
        c: prometheus::Result<C>,
    ) -> prometheus::Result<C> {
        let c = c?;
        self.registry.register(Box::new(c.clone()))?;
        Ok(c)
    }

    fn counter(&self, name: &str, help: &str) -> prometheus::Result<IntCounter> {
        self.register(IntCounter::new(name, help))
    }

    fn counter_vec(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
    ) -> prometheus::Result<IntCounterVec> {
        self.register(IntCounterVec::new(Opts::new(name, help), labels))
    }

    fn gauge(&self, name: &str, help: &str) -> prometheus::Result<IntGauge> {
        self.register(IntGauge::new(name, help))
    }

    fn gauge_f(&self, name: &str, help: &str) -> prometheus::Result<Gauge> {
        self.register(Gauge::new(name, help))
    }

    fn gauge_vec(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
    ) -> prometheus::Result<IntGaugeVec> {
        self.register(IntGaugeVec::new(Opts::new(name, help), labels))
    }
}

impl Metrics {
    /// Creates the registry with every metric registered and every label set that is known up
    /// front exported at zero.
    pub(crate) fn new() -> prometheus::Result<Metrics> {
        let registry = Registry::new();
        let b = Builder {
            registry: &registry,
        };
        let received = b.counter_vec(
            "strata_points_received_total",
            "Data points received, by protocol (before validation).",
            &["protocol"],
        )?;
        let stored = b.counter_vec(
            "strata_points_stored_total",
            "Data points stored, by protocol.",
            &["protocol"],
        )?;
        let rejected = b.counter_vec(
            "strata_points_rejected_total",
            "Data points rejected, by protocol and reason.",
            &["protocol", "reason"],
        )?;
        let protocol = |p: &'static str| ProtocolCounters {
            received: received.with_label_values(&[p]),
            stored: stored.with_label_values(&[p]),
            protocol: p,
            rejected: rejected.clone(),
        };
        let connections = b.counter_vec(
            "strata_connections_total",
            "Connections accepted, by protocol.",
            &["protocol"],
        )?;
        let connections_timed_out = b.counter_vec(
            "strata_connections_timed_out_total",
            "Connections closed because a client was too slow, by phase: first_byte, \
             http_header, http_idle, http_body, telnet_idle.",
            &["phase"],
        )?;
        for p in phase::ALL {
            connections_timed_out.with_label_values(&[p]);
        }
        let ingest_panics = b.counter_vec(
            "strata_ingest_panics_total",
            "Panics (bugs) caught in a telnet batch or an HTTP request and answered with an \
             error, by protocol.",
            &["protocol"],
        )?;
        for p in [TELNET, HTTP] {
            connections.with_label_values(&[p]);
            ingest_panics.with_label_values(&[p]);
        }
        for p in [TELNET, HTTP, REMOTE_WRITE, INFLUX] {
            for r in reason::ALL {
                rejected.with_label_values(&[p, r]);
            }
        }
        let request_duration = b.register(HistogramVec::new(
            HistogramOpts::new(
                "strata_http_request_duration_seconds",
                "HTTP request latency, by endpoint.",
            )
            .buckets(latency_buckets()),
            &["endpoint"],
        ))?;
        let engine = EngineGauges {
            memtable_bytes: b.gauge(
                "strata_engine_memtable_bytes",
                "Bytes held by the active and frozen memtables.",
            )?,
            frozen_memtables: b.gauge(
                "strata_engine_frozen_memtables",
                "Frozen memtables waiting to be flushed.",
            )?,
            level_files: b.gauge_vec(
                "strata_engine_level_files",
                "SST files per LSM level.",
                &["level"],
            )?,
            level_bytes: b.gauge_vec(
                "strata_engine_level_bytes",
                "SST bytes per LSM level.",
                &["level"],
            )?,
            write_stalls: b.gauge("strata_engine_write_stalls", "Times a writer stalled.")?,
            write_stall_seconds: b.gauge_f(
                "strata_engine_write_stall_seconds",
                "Total time writers spent stalled.",
            )?,
            flushes: b.gauge("strata_engine_flushes", "Memtable flushes completed.")?,
            flush_seconds: b
                .gauge_f("strata_engine_flush_seconds", "Total time spent flushing.")?,
            rows_folded: b.gauge(
                "strata_engine_flush_rows_folded",
                "Rows a flush wrote as one block instead of one cell per point.",
            )?,
            folds_rejected: b.gauge(
                "strata_engine_flush_folds_rejected",
                "Rows whose flush fold broke the engine's contract and were flushed unfolded.",
            )?,
            compactions: b.gauge("strata_engine_compactions", "Compactions completed.")?,
            compaction_seconds: b.gauge_f(
                "strata_engine_compaction_seconds",
                "Total time spent compacting.",
            )?,
            compaction_written_bytes: b.gauge(
                "strata_engine_compaction_written_bytes",
                "Bytes written by compactions.",
            )?,
            cache_hits: b.gauge("strata_engine_cache_hits", "Block cache hits.")?,
            cache_misses: b.gauge("strata_engine_cache_misses", "Block cache misses.")?,
            cache_bytes: b.gauge(
                "strata_engine_cache_bytes",
                "Bytes held by the block cache.",
            )?,
            wal_bytes: b.gauge("strata_engine_wal_bytes", "Bytes appended to the WAL.")?,
            wal_syncs: b.gauge("strata_engine_wal_syncs", "WAL fsyncs.")?,
            wal_queue_bytes: b.gauge(
                "strata_engine_wal_queue_bytes",
                "Bytes of queued telnet batches not yet written to the WAL and applied.",
            )?,
            batches_written: b
                .gauge("strata_engine_batches_written", "Write batches committed.")?,
            write_failed: b.gauge(
                "strata_engine_write_failed",
                "1 once a WAL write or fsync failed: writes are refused until a restart.",
            )?,
            wal_batches_refused: b.gauge(
                "strata_engine_wal_batches_refused",
                "Write batches refused because the disk was full.",
            )?,
            flush_errors: b.gauge(
                "strata_engine_flush_errors",
                "Memtable flushes that failed and were retried.",
            )?,
            flush_failing: b.gauge(
                "strata_engine_flush_failing",
                "1 while the last memtable flush failed (the store is out of reach, say).",
            )?,
            writes_refused: b.gauge(
                "strata_engine_writes_refused",
                "Writes refused after stalling with no flush finishing (backpressure).",
            )?,
            compaction_errors: b.gauge(
                "strata_engine_compaction_errors",
                "Compactions that failed and were retried.",
            )?,
            expired_files_dropped: b.gauge(
                "strata_engine_expired_files_dropped",
                "SST files deleted unread because all their rows were past the retention.",
            )?,
            expired_dropped_bytes: b.gauge(
                "strata_engine_expired_dropped_bytes",
                "Bytes of the SST files deleted unread for retention.",
            )?,
            expired_rows_dropped: b.gauge(
                "strata_engine_expired_rows_dropped",
                "Rows past the retention that compactions left out.",
            )?,
            store_requests: b.gauge_vec(
                "strata_store_requests",
                "Requests made to the object store (--store), by kind: get, put, head, list, delete.",
                &["kind"],
            )?,
            store_bytes: b.gauge_vec(
                "strata_store_bytes",
                "Bytes moved to and from the object store, by direction: read, written.",
                &["direction"],
            )?,
            store_cache_hits: b.gauge(
                "strata_store_cache_hits",
                "SST reads served by the local disk cache of the object store.",
            )?,
            store_cache_misses: b.gauge(
                "strata_store_cache_misses",
                "SST reads that went to the object store.",
            )?,
            store_cache_bytes: b.gauge(
                "strata_store_cache_bytes",
                "Bytes of SST files in the local disk cache of the object store.",
            )?,
            store_manifest_version: b.gauge(
                "strata_store_manifest_version",
                "The newest manifest version this server wrote or read in the object store.",
            )?,
            store_epoch: b.gauge(
                "strata_store_epoch",
                "This writer's epoch on the object-store prefix (0 for a follower).",
            )?,
            store_fenced: b.gauge(
                "strata_store_fenced",
                "1 when a newer writer took over the object-store prefix and writes are refused.",
            )?,
            replica_manifest_version: b.gauge(
                "strata_store_replica_manifest_version",
                "The manifest version a read replica serves (0 on a writer); compare with the \
                 writer's strata_store_manifest_version for its lag.",
            )?,
            replica_refreshes: b.gauge(
                "strata_store_replica_refreshes",
                "Refreshes of a read replica (--read-only) that read the manifest head.",
            )?,
            replica_refresh_errors: b.gauge(
                "strata_store_replica_refresh_errors",
                "Refreshes of a read replica that failed; it serves its last state meanwhile.",
            )?,
            replica_changes: b.gauge(
                "strata_store_replica_changes",
                "Refreshes of a read replica that found newly flushed or compacted files.",
            )?,
            replica_loads: b.gauge(
                "strata_store_replica_loads",
                "Loads of a read replica's UID maps and series index, done when names, series \
                 or newest points changed; new data rows alone need none.",
            )?,
            replica_refresh_age: b.gauge_f(
                "strata_store_replica_refresh_age_seconds",
                "Seconds since a read replica's last successful refresh (0 on a writer).",
            )?,
            replica_load_seconds: b.gauge_f(
                "strata_store_replica_load_seconds",
                "How long a read replica's last load of the UID maps and series index took.",
            )?,
        };
        let tsdb = TsdbGauges {
            points_written: b.gauge(
                "strata_tsdb_points_written",
                "Points stored by the tsdb layer.",
            )?,
            write_batches: b.gauge(
                "strata_tsdb_write_batches",
                "Write batches committed by the tsdb layer.",
            )?,
            points_rejected: b.gauge_vec(
                "strata_tsdb_points_rejected",
                "Points the tsdb layer rejected, by reason.",
                &["reason"],
            )?,
            uids_assigned: b.gauge_vec(
                "strata_tsdb_uids_assigned",
                "UIDs assigned since start, by kind.",
                &["kind"],
            )?,
            series_created: b.gauge("strata_tsdb_series_created", "Series created since start.")?,
            series: b.gauge("strata_tsdb_series", "Series in the index.")?,
            points_read: b.gauge("strata_tsdb_points_read", "Points returned by reads.")?,
            rows_read: b.gauge("strata_tsdb_rows_read", "Data rows read.")?,
            rows_compacted: b.gauge(
                "strata_tsdb_rows_compacted",
                "Data rows the row compactor rewrote as one block.",
            )?,
            rowcompact_cells_folded: b.gauge(
                "strata_tsdb_rowcompact_cells_folded",
                "Raw cells the row compactor folded into blocks.",
            )?,
            rowcompact_failures: b.gauge(
                "strata_tsdb_rowcompact_failures",
                "Data rows the row compactor could not decode.",
            )?,
            rowcompact_errors: b.gauge(
                "strata_tsdb_rowcompact_errors",
                "Background row-compaction passes that failed in storage and were retried.",
            )?,
        };
        Ok(Metrics {
            telnet: protocol(TELNET),
            http: protocol(HTTP),
            remote_write: protocol(REMOTE_WRITE),
            influx: protocol(INFLUX),
            remote_write_stale: b.counter(
                "strata_remote_write_stale_markers_total",
                "Remote write stale markers received; they end a series and are not stored.",
            )?,
            rejected,
            connections_open: b.gauge("strata_connections_open", "Connections open now.")?,
            connections,
            connections_refused: b.counter(
                "strata_connections_refused_total",
                "Connections refused because max_connections were open and no slot came free \
                 in time.",
            )?,
            connections_timed_out,
            telnet_commands: b.counter(
                "strata_telnet_commands_total",
                "Telnet command lines received, put lines included.",
            )?,
            put_sync_timeouts: b.counter(
                "strata_http_put_sync_timeouts_total",
                "/api/put?sync requests answered when sync_timeout expired.",
            )?,
            ingest_panics,
            request_duration,
            engine,
            tsdb,
            auth_refused: b.counter_vec(
                "strata_auth_refused_total",
                "Requests and telnet commands refused by authentication, by protocol and kind \
                 (unauthenticated: no or unknown credentials; forbidden: a missing role).",
                &["protocol", "kind"],
            )?,
            registry,
        })
    }

    /// Points rejected so far by `protocol` and `reason`.
    pub(crate) fn rejected_count(&self, protocol: &str, reason: &str) -> u64 {
        self.rejected.with_label_values(&[protocol, reason]).get()
    }

    /// Records one HTTP request's latency under its endpoint (`other` when unknown).
    pub(crate) fn observe_request(&self, endpoint: &str, seconds: f64) {
        let endpoint = ENDPOINTS
            .iter()
            .find(|e| **e == endpoint)
            .copied()
            .unwrap_or("other");
        self.request_duration
            .with_label_values(&[endpoint])
            .observe(seconds);
    }

    /// Requests served so far, over every endpoint.
    pub(crate) fn http_requests(&self) -> u64 {
        ENDPOINTS
            .iter()
            .map(|e| {
                self.request_duration
                    .with_label_values(&[e])
                    .get_sample_count()
            })
            .sum()
    }

    /// Latency quantiles over every endpoint, in milliseconds: for each quantile, the upper
    /// bound of the histogram bucket that holds it (0 when nothing has been served yet).
    pub(crate) fn latency_quantiles_ms(&self, quantiles: &[f64]) -> Vec<f64> {
        use prometheus::core::Metric as _;
        let bounds = latency_buckets();
        let mut cumulative = vec![0u64; bounds.len()];
        let mut total = 0u64;
        for e in ENDPOINTS {
            let m = self.request_duration.with_label_values(&[e]).metric();
            let h = m.get_histogram();
            total += h.get_sample_count();
            for (c, b) in cumulative.iter_mut().zip(h.get_bucket()) {
                *c += b.get_cumulative_count();
            }
        }
        quantiles
            .iter()
            .map(|q| {
                if total == 0 {
                    return 0.0;
                }
                let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
                let i = cumulative
                    .iter()
                    .position(|&c| c >= rank)
                    .unwrap_or(bounds.len() - 1);
                bounds[i] * 1000.0
            })
            .collect()
    }

    /// Copies the storage counters into their gauges and renders everything in the Prometheus
    /// text format.
    pub(crate) fn render(&self, tsdb: &strata_tsdb::Tsdb) -> String {
        self.refresh(tsdb);
        let mut out = String::new();
        if let Err(e) = TextEncoder::new().encode_utf8(&self.registry.gather(), &mut out) {
            tracing::warn!(error = %e, "encoding /metrics failed");
        }
        out
    }

    /// The content type of [`Metrics::render`]'s output.
    pub(crate) fn content_type() -> &'static str {
        prometheus::TEXT_FORMAT
    }

    fn refresh(&self, tsdb: &strata_tsdb::Tsdb) {
        let e = tsdb.engine_stats();
        let g = &self.engine;
        let secs = |micros: u64| micros as f64 / 1e6;
        g.memtable_bytes.set(gauge_value(e.memtable_bytes));
        g.frozen_memtables.set(gauge_value(e.frozen_memtables));
        for (i, level) in e.levels.iter().enumerate() {
            let l = i.to_string();
            g.level_files
                .with_label_values(&[&l])
                .set(gauge_value(level.files));
            g.level_bytes
                .with_label_values(&[&l])
                .set(gauge_value(level.bytes));
        }
        g.write_stalls.set(gauge_value(e.write_stalls));
        g.write_stall_seconds.set(secs(e.write_stall_micros));
        g.flushes.set(gauge_value(e.flushes));
        g.flush_seconds.set(secs(e.flush_micros));
        g.rows_folded.set(gauge_value(e.rows_folded));
        g.folds_rejected.set(gauge_value(e.folds_rejected));
        g.compactions.set(gauge_value(e.compactions));
        g.compaction_seconds.set(secs(e.compaction_micros));
        g.compaction_written_bytes
            .set(gauge_value(e.compaction_bytes_written));
        g.cache_hits.set(gauge_value(e.cache_hits));
        g.cache_misses.set(gauge_value(e.cache_misses));
        g.cache_bytes.set(gauge_value(e.cache_bytes));
        g.wal_bytes.set(gauge_value(e.wal_bytes));
        g.wal_syncs.set(gauge_value(e.wal_syncs));
        g.wal_queue_bytes.set(gauge_value(e.wal_queue_bytes));
        g.batches_written.set(gauge_value(e.batches_written));
        g.write_failed.set(i64::from(e.write_failed));
        g.wal_batches_refused
            .set(gauge_value(e.wal_batches_refused));
        g.flush_errors.set(gauge_value(e.flush_errors));
        g.flush_failing.set(i64::from(e.flush_failing));
        g.writes_refused.set(gauge_value(e.writes_refused));
        g.compaction_errors.set(gauge_value(e.compaction_errors));
        g.expired_files_dropped
            .set(gauge_value(e.expired_files_dropped));
        g.expired_dropped_bytes
            .set(gauge_value(e.expired_bytes_dropped));
        g.expired_rows_dropped
            .set(gauge_value(e.expired_rows_dropped));
        let o = &e.object;
        for (kind, n) in [
            ("get", o.gets),
            ("put", o.puts),
            ("head", o.heads),
            ("list", o.lists),
            ("delete", o.deletes),
        ] {
            g.store_requests
                .with_label_values(&[kind])
                .set(gauge_value(n));
        }
        for (direction, n) in [("read", o.bytes_read), ("written", o.bytes_written)] {
            g.store_bytes
                .with_label_values(&[direction])
                .set(gauge_value(n));
        }
        g.store_cache_hits.set(gauge_value(o.disk_cache_hits));
        g.store_cache_misses.set(gauge_value(o.disk_cache_misses));
        g.store_cache_bytes.set(gauge_value(o.disk_cache_bytes));
        g.store_manifest_version
            .set(gauge_value(o.manifest_version));
        g.store_epoch.set(gauge_value(o.epoch));
        g.store_fenced.set(i64::from(o.fenced));
        let replica = tsdb.replica_stats();
        let r = replica.unwrap_or_default();
        g.replica_manifest_version.set(match replica {
            Some(_) => gauge_value(o.manifest_version),
            None => 0,
        });
        g.replica_refreshes.set(gauge_value(r.refreshes));
        g.replica_refresh_errors.set(gauge_value(r.errors));
        g.replica_changes.set(gauge_value(r.changes));
        g.replica_loads.set(gauge_value(r.loads));
        let age_ms = replica.map_or(0, |r| {
            tsdb.options().clock.now_ms().saturating_sub(r.last_ok_ms)
        });
        g.replica_refresh_age.set(age_ms as f64 / 1000.0);
        g.replica_load_seconds.set(secs(r.last_load_micros));

        let s = tsdb.stats();
        let t = &self.tsdb;
        t.points_written.set(gauge_value(s.points_written));
        t.write_batches.set(gauge_value(s.write_batches));
        for (r, v) in [
            (reason::BAD_NAME, s.rejected_invalid_name),
            (reason::BAD_TAGS, s.rejected_bad_tags),
            (reason::BAD_TIMESTAMP, s.rejected_bad_timestamp),
            (reason::BAD_VALUE, s.rejected_not_finite),
            (reason::UNKNOWN_NAME, s.rejected_unknown_name),
            (reason::STORAGE, s.rejected_storage),
            (reason::OTHER, s.rejected_other),
            (reason::EXPIRED, s.rejected_expired),
        ] {
            t.points_rejected
                .with_label_values(&[r])
                .set(gauge_value(v));
        }
        for (k, v) in [
            ("metrics", s.uids_assigned_metrics),
            ("tagk", s.uids_assigned_tagk),
            ("tagv", s.uids_assigned_tagv),
        ] {
            t.uids_assigned.with_label_values(&[k]).set(gauge_value(v));
        }
        t.series_created.set(gauge_value(s.series_created));
        t.series.set(gauge_value(s.series_count));
        t.points_read.set(gauge_value(s.points_read));
        t.rows_read.set(gauge_value(s.rows_read));
        t.rows_compacted.set(gauge_value(s.rows_compacted));
        t.rowcompact_cells_folded
            .set(gauge_value(s.rowcompact_cells_folded));
        t.rowcompact_failures
            .set(gauge_value(s.rowcompact_failures));
        t.rowcompact_errors.set(gauge_value(s.rowcompact_errors));
    }
}

/// A counter as an `IntGauge` value (saturating; counters never get near `i64::MAX`).
fn gauge_value(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The reason label of a refused point.
pub fn rejection_reason(r: Rejection) -> &'static str {
    match r {
        Rejection::Syntax => reason::BAD_SYNTAX,
        Rejection::Name => reason::BAD_NAME,
        Rejection::Tags => reason::BAD_TAGS,
        Rejection::Timestamp => reason::BAD_TIMESTAMP,
        Rejection::Value => reason::BAD_VALUE,
        Rejection::UnknownName => reason::UNKNOWN_NAME,
        Rejection::Storage => reason::STORAGE,
        Rejection::Expired => reason::EXPIRED,
        _ => reason::OTHER,
    }
}

/// The reason label of a point remote write or the line protocol refused before storage.
pub(crate) fn refusal_reason(kind: strata_ingest::RefusalKind) -> &'static str {
    use strata_ingest::RefusalKind as K;
    match kind {
        K::Syntax => reason::BAD_SYNTAX,
        K::Name => reason::BAD_NAME,
        K::Timestamp => reason::BAD_TIMESTAMP,
        K::Value => reason::BAD_VALUE,
        _ => reason::OTHER,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_show_up_in_the_text_format() -> anyhow::Result<()> {
        let m = Metrics::new()?;
        m.telnet.received.inc_by(3);
        m.telnet.stored.inc_by(2);
        m.telnet.rejected(reason::BAD_VALUE);
        m.observe_request("put", 0.002);
        m.observe_request("no/such/endpoint", 0.002);
        m.connections_refused.inc();
        m.auth_refused
            .with_label_values(&[HTTP, auth_refusal::FORBIDDEN])
            .inc();
        let dir = tempfile::tempdir()?;
        let tsdb = strata_tsdb::Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default())?;
        let text = m.render(&tsdb);
        assert!(
            text.contains("strata_points_received_total{protocol=\"telnet\"} 3"),
            "{text}"
        );
        assert!(text.contains("strata_points_stored_total{protocol=\"telnet\"} 2"));
        assert!(
            text.contains(
                "strata_points_rejected_total{protocol=\"telnet\",reason=\"bad_value\"} 1"
            )
        );
        assert!(
            text.contains("strata_points_rejected_total{protocol=\"http\",reason=\"storage\"} 0")
        );
        assert!(text.contains("strata_http_request_duration_seconds_count{endpoint=\"put\"} 1"));
        assert!(text.contains("strata_http_request_duration_seconds_count{endpoint=\"other\"} 1"));
        assert!(text.contains("strata_connections_refused_total 1"));
        assert!(
            text.contains("strata_auth_refused_total{kind=\"forbidden\",protocol=\"http\"} 1"),
            "{text}"
        );
        assert!(text.contains("strata_engine_memtable_bytes "));
        assert!(text.contains("strata_engine_wal_queue_bytes 0"));
        assert!(text.contains("strata_tsdb_series 0"));
        assert_eq!(m.rejected_count(TELNET, reason::BAD_VALUE), 1);
        assert_eq!(m.http_requests(), 2);
        Ok(())
    }

    #[test]
    fn latency_quantiles_come_from_the_buckets() -> anyhow::Result<()> {
        let m = Metrics::new()?;
        assert_eq!(m.latency_quantiles_ms(&[0.5]), vec![0.0]);
        for _ in 0..9 {
            m.observe_request("put", 0.00005);
        }
        m.observe_request("query", 0.003);
        let q = m.latency_quantiles_ms(&[0.5, 0.9, 0.95, 1.0]);
        // 0.05 ms falls in the first bucket (<= 0.1 ms); 3 ms in the one up to 3.2 ms.
        assert_eq!(q[0], 0.1);
        assert_eq!(q[1], 0.1);
        assert!((q[2] - 3.2).abs() < 1e-9, "{q:?}");
        assert!((q[3] - 3.2).abs() < 1e-9, "{q:?}");
        Ok(())
    }

    #[test]
    fn rejection_reasons_are_classified() {
        use strata_ingest::{PutError, PutPointError};
        let put = |e: PutError| rejection_reason(e.rejection());
        let http = |e: PutPointError| rejection_reason(e.rejection());
        assert_eq!(
            put(PutError::NotEnoughArguments { got: 1 }),
            reason::BAD_SYNTAX
        );
        assert_eq!(put(PutError::InvalidTimestamp(0)), reason::BAD_TIMESTAMP);
        assert_eq!(put(PutError::InvalidTag("x".into())), reason::BAD_TAGS);
        let no_tags = strata_tsdb::PointError::NoTags { metric: "m".into() };
        assert_eq!(
            rejection_reason(strata_tsdb::Error::from(no_tags).rejection()),
            reason::BAD_TAGS
        );
        assert_eq!(http(PutPointError::InvalidTimestamp), reason::BAD_TIMESTAMP);
        assert_eq!(http(PutPointError::InvalidValue), reason::BAD_VALUE);
        let bad_name = strata_tsdb::PointError::IllegalCharacter {
            what: "metric name".into(),
            name: "a b".into(),
            ch: ' ',
        };
        assert_eq!(http(bad_name.into()), reason::BAD_NAME);
        assert_eq!(http(PutPointError::Null), reason::OTHER);
    }
}
