//! OpenTSDB's own statistics: the `/api/stats` JSON and the telnet `stats` lines
//! (OpenTSDB's `StatsRpc` and `StatsCollector`).
//!
//! Both list the same records: `tsd.<name>`, a value and extra tags; every record also gets
//! `host=<hostname>`. Where OpenTSDB has a statistic with the same meaning its name is used
//! (`tsd.rpc.received`, `tsd.rpc.errors`, `tsd.connectionmgr.connections`,
//! `tsd.datapoints.added`, `tsd.http.latency_*`); Strata's storage counters follow as
//! `tsd.storage.*`. Latencies are in milliseconds, at the resolution of the `/metrics`
//! histogram's buckets (each a power of two times 0.1 ms).

use crate::metrics::{self, Metrics, reason};
use crate::shared::Shared;

/// One statistic: `tsd.<name>`, its value and its extra tags (besides `host`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stat {
    /// The name after `tsd.`.
    pub(crate) name: &'static str,
    /// The value, already formatted.
    pub(crate) value: String,
    /// Extra tags, e.g. `("type", "put")`.
    pub(crate) tags: Vec<(&'static str, String)>,
}

fn stat(name: &'static str, value: impl ToString, tags: &[(&'static str, &str)]) -> Stat {
    Stat {
        name,
        value: value.to_string(),
        tags: tags.iter().map(|&(k, v)| (k, v.to_string())).collect(),
    }
}

/// Every statistic now.
pub(crate) fn collect(shared: &Shared) -> Vec<Stat> {
    let m = &shared.metrics;
    let mut out = Vec::new();
    out.extend(rpc_stats(m));
    let t = shared.tsdb.stats();
    out.push(stat(
        "datapoints.added",
        t.points_written,
        &[("type", "all")],
    ));
    out.push(stat(
        "uid.assigned",
        t.uids_assigned_metrics,
        &[("kind", "metrics")],
    ));
    out.push(stat(
        "uid.assigned",
        t.uids_assigned_tagk,
        &[("kind", "tagk")],
    ));
    out.push(stat(
        "uid.assigned",
        t.uids_assigned_tagv,
        &[("kind", "tagv")],
    ));
    out.push(stat("storage.series", t.series_count, &[]));
    out.push(stat(
        "compaction.count",
        t.rows_compacted,
        &[("type", "rows")],
    ));
    out.push(stat(
        "compaction.count",
        t.rowcompact_cells_folded,
        &[("type", "cells")],
    ));
    let e = shared.tsdb.engine_stats();
    out.push(stat("storage.memtable.bytes", e.memtable_bytes, &[]));
    for (i, level) in e.levels.iter().enumerate() {
        let l = i.to_string();
        out.push(stat("storage.level.files", level.files, &[("level", &l)]));
        out.push(stat("storage.level.bytes", level.bytes, &[("level", &l)]));
    }
    out.push(stat("storage.write_stalls", e.write_stalls, &[]));
    out.push(stat("storage.flushes", e.flushes, &[]));
    out.push(stat("storage.compactions", e.compactions, &[]));
    out.push(stat("storage.cache", e.cache_hits, &[("type", "hits")]));
    out.push(stat("storage.cache", e.cache_misses, &[("type", "misses")]));
    out.push(stat("storage.wal.bytes", e.wal_bytes, &[]));
    out.push(stat("storage.wal.syncs", e.wal_syncs, &[]));
    out.push(stat("storage.wal.queue.bytes", e.wal_queue_bytes, &[]));
    out.push(stat("storage.write_failed", u64::from(e.write_failed), &[]));
    out.push(stat("storage.wal.refused", e.wal_batches_refused, &[]));
    out.push(stat("storage.errors", e.flush_errors, &[("type", "flush")]));
    out.push(stat(
        "storage.errors",
        e.compaction_errors,
        &[("type", "compaction")],
    ));
    out.push(stat(
        "storage.errors",
        t.rowcompact_errors,
        &[("type", "rowcompact")],
    ));
    out
}

/// The connection, RPC and latency statistics, from the Prometheus counters.
fn rpc_stats(m: &Metrics) -> Vec<Stat> {
    let mut out = vec![
        stat(
            "connectionmgr.connections",
            m.connections_open.get(),
            &[("type", "open")],
        ),
        stat(
            "connectionmgr.connections",
            m.connections.with_label_values(&[metrics::TELNET]).get()
                + m.connections.with_label_values(&[metrics::HTTP]).get(),
            &[("type", "total")],
        ),
        stat(
            "connectionmgr.connections",
            m.connections_refused.get(),
            &[("type", "rejected")],
        ),
        stat(
            "rpc.received",
            m.telnet_commands.get(),
            &[("type", "telnet")],
        ),
        stat("rpc.received", m.http_requests(), &[("type", "http")]),
        stat(
            "rpc.received",
            m.telnet.received.get() + m.http.received.get(),
            &[("type", "put")],
        ),
    ];
    // OpenTSDB's four put error classes.
    let count = |reasons: &[&str]| -> u64 {
        reasons
            .iter()
            .map(|r| m.rejected_count(metrics::TELNET, r) + m.rejected_count(metrics::HTTP, r))
            .sum()
    };
    for (kind, reasons) in [
        ("hbase_errors", &[reason::STORAGE][..]),
        ("invalid_values", &[reason::BAD_VALUE][..]),
        (
            "illegal_arguments",
            &[
                reason::BAD_SYNTAX,
                reason::BAD_NAME,
                reason::BAD_TIMESTAMP,
                reason::BAD_TAGS,
                reason::OTHER,
                reason::EXPIRED,
            ][..],
        ),
        ("unknown_metrics", &[reason::UNKNOWN_NAME][..]),
    ] {
        out.push(stat("rpc.errors", count(reasons), &[("type", kind)]));
    }
    let quantiles = m.latency_quantiles_ms(&[0.5, 0.75, 0.9, 0.95]);
    for (name, ms) in [
        "http.latency_50pct",
        "http.latency_75pct",
        "http.latency_90pct",
        "http.latency_95pct",
    ]
    .into_iter()
    .zip(quantiles)
    {
        out.push(stat(name, ms, &[("type", "all")]));
    }
    out.push(stat(
        "http.put.sync_timeouts",
        m.put_sync_timeouts.get(),
        &[],
    ));
    out
}

/// The host name every statistic is tagged with: the kernel's, else `localhost`.
pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The `/api/stats` body: `[{"metric":"tsd.…","timestamp":<s>,"value":"<v>","tags":{…}}…]`.
pub(crate) fn to_json(stats: &[Stat], host: &str, timestamp: u64) -> serde_json::Value {
    stats
        .iter()
        .map(|s| {
            let mut tags = serde_json::Map::new();
            tags.insert("host".into(), host.into());
            for (k, v) in &s.tags {
                tags.insert((*k).into(), v.as_str().into());
            }
            serde_json::json!({
                "metric": format!("tsd.{}", s.name),
                "timestamp": timestamp,
                "value": s.value,
                "tags": tags,
            })
        })
        .collect()
}

/// The telnet `stats` reply: `tsd.<name> <epoch-s> <value> host=<host>[ k=v…]` lines.
pub(crate) fn to_lines(stats: &[Stat], host: &str, timestamp: u64) -> String {
    let mut out = String::new();
    for s in stats {
        out.push_str(&format!(
            "tsd.{} {timestamp} {} host={host}",
            s.name, s.value
        ));
        for (k, v) in &s.tags {
            out.push_str(&format!(" {k}={v}"));
        }
        out.push('\n');
    }
    out
}

/// `/api/stats` for `shared`, now.
pub(crate) fn json_now(shared: &Shared) -> serde_json::Value {
    to_json(&collect(shared), &shared.host, now_secs())
}

/// The telnet `stats` reply for `shared`, now.
pub(crate) fn lines_now(shared: &Shared) -> String {
    to_lines(&collect(shared), &shared.host, now_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_lines_carry_the_same_records() -> anyhow::Result<()> {
        let m = Metrics::new()?;
        m.telnet.received.inc_by(5);
        m.http.rejected(reason::BAD_VALUE);
        let stats = rpc_stats(&m);
        let json = to_json(&stats, "box", 1_700_000_000);
        let put = json
            .as_array()
            .and_then(|a| {
                a.iter()
                    .find(|s| s["metric"] == "tsd.rpc.received" && s["tags"]["type"] == "put")
            })
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            put,
            serde_json::json!({
                "metric": "tsd.rpc.received",
                "timestamp": 1_700_000_000u64,
                "value": "5",
                "tags": {"host": "box", "type": "put"},
            })
        );
        let lines = to_lines(&stats, "box", 1_700_000_000);
        assert!(
            lines.contains("tsd.rpc.received 1700000000 5 host=box type=put\n"),
            "{lines}"
        );
        assert!(lines.contains("tsd.rpc.errors 1700000000 1 host=box type=invalid_values\n"));
        assert_eq!(lines.lines().count(), stats.len());
        Ok(())
    }
}
