//! `strata scan`: a human-readable dump of data rows, for debugging storage.
//!
//! Each row prints its decoded rowkey (salt, metric, base time, tags), then each cell: raw
//! cells as `offset type value`, and a row's compacted block (the empty column) as a header
//! line followed by its decoded points. Offsets are from the row's base time. A cell that does
//! not decode is printed as such, with its bytes in hex; the scan goes on.
//!
//! ```text
//! row salt=3 metric=sys.cpu.user base=2013-01-01T00:00:00Z (1356998400) tags={cpu=0, host=a}
//!   +0.000s     raw   int    42
//!   block v1, 120 points, 95 bytes (0.79 B/point)
//!   +0.000s     block float  42.5
//! ```

use std::io::Write;
use std::ops::ControlFlow;

use anyhow::Context;
use strata_tsdb::{InspectRequest, StoredCell, StoredRow, UidKind, Value};

use strata_server::{Config, StorageArgs};

/// `strata scan` flags.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ScanArgs {
    #[command(flatten)]
    pub(crate) storage: StorageArgs,
    /// Only rows of this metric.
    #[arg(long)]
    pub(crate) metric: Option<String>,
    /// Only rows whose hour ends after this time: epoch seconds, or milliseconds when longer
    /// than 10 digits.
    #[arg(long)]
    pub(crate) start: Option<i64>,
    /// Only rows whose hour starts at or before this time (same units as --start).
    #[arg(long)]
    pub(crate) end: Option<i64>,
    /// Print at most this many rows.
    #[arg(long)]
    pub(crate) limit: Option<usize>,
}

/// A query-style time in seconds: more than 10 digits is milliseconds.
fn to_secs(t: i64) -> i64 {
    if t.unsigned_abs() >= 10_000_000_000 {
        t.div_euclid(1000)
    } else {
        t
    }
}

/// Runs `strata scan`, writing to stdout.
pub(crate) fn run(args: &ScanArgs) -> anyhow::Result<()> {
    let config = Config::resolve_storage(&args.storage)?;
    let (_lock, tsdb) = super::open::open_existing(&config)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let result = scan(&tsdb, args, &mut out)
        .and_then(|rows| Ok(writeln!(out, "{rows} rows")?))
        .and_then(|()| Ok(out.flush()?));
    match result {
        // `strata scan | head`: the reader has seen enough.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(())
        }
        r => r,
    }
}

/// Writes the rows `args` selects to `out`; returns how many.
pub(crate) fn scan(
    tsdb: &strata_tsdb::Tsdb,
    args: &ScanArgs,
    out: &mut impl Write,
) -> anyhow::Result<usize> {
    let req = InspectRequest {
        metric: args.metric.as_deref(),
        start_s: args.start.map(to_secs).unwrap_or(0),
        end_s: args.end.map(to_secs).unwrap_or(i64::MAX),
    };
    let limit = args.limit.unwrap_or(usize::MAX);
    let mut printed = 0;
    if limit == 0 {
        return Ok(0);
    }
    tsdb.inspect_rows(&req, |row| -> anyhow::Result<ControlFlow<()>> {
        write_row(out, &row, tsdb)?;
        printed += 1;
        Ok(if printed >= limit {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    })
    .context("scanning data rows")?;
    Ok(printed)
}

/// The name of a UID; a UID with no name prints as its hex.
fn name(tsdb: &strata_tsdb::Tsdb, kind: UidKind, uid: strata_tsdb::Uid) -> String {
    tsdb.uid_name(kind, uid)
        .unwrap_or_else(|_| format!("<{} uid {}>", kind.as_str(), hex(&uid.to_bytes())))
}

fn write_row(
    out: &mut impl Write,
    row: &StoredRow,
    tsdb: &strata_tsdb::Tsdb,
) -> anyhow::Result<()> {
    let key = match &row.rowkey {
        Ok(k) => k,
        Err(e) => {
            writeln!(out, "row {} (undecodable rowkey: {e})", hex(&row.key))?;
            return Ok(());
        }
    };
    let metric = name(tsdb, UidKind::Metric, key.tsuid.metric());
    let tags: Vec<String> = key
        .tsuid
        .tags()
        .map(|(k, v)| {
            format!(
                "{}={}",
                name(tsdb, UidKind::Tagk, k),
                name(tsdb, UidKind::Tagv, v)
            )
        })
        .collect();
    writeln!(
        out,
        "row salt={} metric={metric} base={} ({}) tags={{{}}} cells={}",
        key.salt,
        iso8601(i64::from(key.base_time)),
        key.base_time,
        tags.join(", "),
        row.cells.len()
    )?;
    let base_ms = i64::from(key.base_time) * 1000;
    for cell in &row.cells {
        match cell {
            StoredCell::Raw { offset_ms, value } => writeln!(
                out,
                "  {:<10}  raw   {}",
                offset_text(i64::from(*offset_ms)),
                value_text(*value)
            )?,
            StoredCell::Block {
                flush_seq,
                bytes,
                points,
            } => {
                let label = match flush_seq {
                    None => "block".to_string(),
                    Some(seq) => format!("partial block (flush seq {seq})"),
                };
                write_block(out, &label, base_ms, bytes, points)?;
            }
            StoredCell::Bad {
                column,
                value,
                error,
            } => writeln!(
                out,
                "  column {} value {}: {error}",
                hex(column),
                hex(value)
            )?,
        }
    }
    Ok(())
}

fn write_block(
    out: &mut impl Write,
    label: &str,
    base_ms: i64,
    bytes: &[u8],
    points: &strata_tsdb::Result<Vec<(i64, Value)>>,
) -> anyhow::Result<()> {
    let points = match points {
        Ok(p) => p,
        Err(e) => {
            writeln!(
                out,
                "  {label} of {} bytes does not decode: {e}",
                bytes.len()
            )?;
            return Ok(());
        }
    };
    let version = bytes.first().copied().unwrap_or_default();
    writeln!(
        out,
        "  {label} v{version}, {} points, {} bytes ({:.2} B/point)",
        points.len(),
        bytes.len(),
        bytes.len() as f64 / points.len().max(1) as f64
    )?;
    for (ts, v) in points {
        writeln!(
            out,
            "  {:<10}  block {}",
            offset_text(ts - base_ms),
            value_text(*v)
        )?;
    }
    Ok(())
}

/// `+S.mmms` from a millisecond offset.
fn offset_text(ms: i64) -> String {
    format!(
        "{}{}.{:03}s",
        if ms < 0 { "-" } else { "+" },
        ms.unsigned_abs() / 1000,
        ms.unsigned_abs() % 1000
    )
}

fn value_text(v: Value) -> String {
    match v {
        Value::Int(i) => format!("int    {i}"),
        Value::Float(f) => format!("float  {f:?}"),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `YYYY-MM-DDTHH:MM:SSZ` for epoch seconds (proleptic Gregorian, UTC).
pub(crate) fn iso8601(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates_match_known_instants() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(1_356_998_400), "2013-01-01T00:00:00Z");
        assert_eq!(iso8601(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(iso8601(4_102_444_799), "2099-12-31T23:59:59Z");
    }

    #[test]
    fn scan_prints_raw_cells_then_blocks_after_row_compaction() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let tsdb = strata_tsdb::Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default())?;
        let tags = [("host", "a")];
        let points: Vec<strata_tsdb::PointRef<'_>> = [(1_356_998_400, 1), (1_356_998_401, 2)]
            .into_iter()
            .map(|(timestamp, v)| strata_tsdb::PointRef {
                metric: "sys.cpu",
                tags: &tags,
                timestamp,
                value: Value::Int(v),
            })
            .collect();
        for r in tsdb.write(&points) {
            r?;
        }
        let args = |metric: Option<&str>, start: Option<i64>| ScanArgs {
            storage: StorageArgs::default(),
            metric: metric.map(str::to_owned),
            start,
            end: None,
            limit: None,
        };
        let mut out = Vec::new();
        assert_eq!(scan(&tsdb, &args(Some("sys.cpu"), None), &mut out)?, 1);
        let text = String::from_utf8(out)?;
        assert!(
            text.contains("metric=sys.cpu base=2013-01-01T00:00:00Z (1356998400) tags={host=a}"),
            "{text}"
        );
        assert!(text.contains("+1.000s     raw   int    2"), "{text}");
        // A flush folds the raw cells into a partial block.
        tsdb.flush()?;
        let mut out = Vec::new();
        scan(&tsdb, &args(None, None), &mut out)?;
        let text = String::from_utf8(out)?;
        assert!(text.contains("partial block (flush seq "), "{text}");
        assert!(text.contains("2 points"), "{text}");
        assert!(text.contains("+1.000s     block int    2"), "{text}");
        // Other metrics and later hours select nothing.
        assert_eq!(scan(&tsdb, &args(Some("nope"), None), &mut Vec::new())?, 0);
        assert_eq!(
            scan(&tsdb, &args(None, Some(1_357_002_000)), &mut Vec::new())?,
            0
        );
        tsdb.rowcompact_all()?;
        let mut out = Vec::new();
        scan(&tsdb, &args(None, None), &mut out)?;
        let text = String::from_utf8(out)?;
        assert!(text.contains("block v1, 2 points"), "{text}");
        assert!(text.contains("+1.000s     block int    2"), "{text}");
        Ok(())
    }
}
