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

use anyhow::Context;
use strata_engine::{Cell, ScanOptions};
use strata_tsdb::{ROW_SPAN_SECS, RowKey, UidKind, Value, decode_block};

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

/// Name of the engine table that holds data rows (the tsdb layer's `tsdb` table).
const DATA_TABLE: &str = "tsdb";

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
    let db = tsdb.engine();
    let Some(table) = db.table(DATA_TABLE) else {
        return Ok(0);
    };
    let start = args.start.map(to_secs).unwrap_or(0).max(0);
    let end = args.end.map(to_secs).unwrap_or(i64::MAX);
    // Rows whose hour [base, base + 3600) meets [start, end].
    let in_range = |base: u32| {
        let base = i64::from(base);
        base + i64::from(ROW_SPAN_SECS) > start && base <= end
    };
    let ranges: Vec<ScanOptions> = match &args.metric {
        None => vec![ScanOptions::default()],
        Some(m) => {
            let uid = match tsdb.uid(UidKind::Metric, m) {
                Ok(uid) => uid,
                Err(e) if e.kind() == strata_tsdb::ErrorKind::NotFound => return Ok(0),
                Err(e) => return Err(e.into()),
            };
            (0..tsdb.salt_buckets().max(1))
                .map(|salt| metric_range(salt, uid.to_bytes(), start, end))
                .collect()
        }
    };
    let limit = args.limit.unwrap_or(usize::MAX);
    let mut printed = 0;
    let mut names = Names::new(tsdb);
    for opts in ranges {
        for row in db.scan(&table, &opts).context("scanning data rows")? {
            if printed >= limit {
                return Ok(printed);
            }
            let row = row.context("reading a data row")?;
            let key = match RowKey::decode(&row.key) {
                Ok(k) => k,
                Err(e) => {
                    writeln!(out, "row {} (undecodable rowkey: {e})", hex(&row.key))?;
                    printed += 1;
                    continue;
                }
            };
            if !in_range(key.base_time) {
                continue;
            }
            write_row(out, &key, &row.cells, &mut names)?;
            printed += 1;
        }
    }
    Ok(printed)
}

/// The scan range of one salt bucket for a metric and a time range (seconds).
fn metric_range(salt: u8, metric: [u8; 3], start: i64, end: i64) -> ScanOptions {
    let mut prefix = vec![salt];
    prefix.extend_from_slice(&metric);
    let first_hour = start - start.rem_euclid(i64::from(ROW_SPAN_SECS));
    let mut from = prefix.clone();
    from.extend_from_slice(&u32::try_from(first_hour).unwrap_or(u32::MAX).to_be_bytes());
    let stop_hour = end
        .saturating_sub(end.rem_euclid(i64::from(ROW_SPAN_SECS)))
        .saturating_add(i64::from(ROW_SPAN_SECS));
    let stop = match u32::try_from(stop_hour) {
        Ok(h) => {
            let mut s = prefix;
            s.extend_from_slice(&h.to_be_bytes());
            Some(s)
        }
        // Past the last representable hour: to the end of the metric's prefix.
        Err(_) => prefix_end(&prefix),
    };
    ScanOptions {
        start: Some(from),
        stop,
        ..ScanOptions::default()
    }
}

fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// UID-to-name lookups; a UID with no name prints as its hex.
struct Names<'t> {
    tsdb: &'t strata_tsdb::Tsdb,
}

impl<'t> Names<'t> {
    fn new(tsdb: &'t strata_tsdb::Tsdb) -> Self {
        Names { tsdb }
    }

    fn name(&mut self, kind: UidKind, uid: strata_tsdb::Uid) -> String {
        self.tsdb
            .uid_name(kind, uid)
            .unwrap_or_else(|_| format!("<{} uid {}>", kind.as_str(), hex(&uid.to_bytes())))
    }
}

fn write_row(
    out: &mut impl Write,
    key: &RowKey,
    cells: &[Cell],
    names: &mut Names<'_>,
) -> anyhow::Result<()> {
    let metric = names.name(UidKind::Metric, key.tsuid.metric());
    let tags: Vec<String> = key
        .tsuid
        .tags()
        .map(|(k, v)| {
            format!(
                "{}={}",
                names.name(UidKind::Tagk, k),
                names.name(UidKind::Tagv, v)
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
        cells.len()
    )?;
    let base_ms = i64::from(key.base_time) * 1000;
    for cell in cells {
        if cell.column.is_empty() {
            write_block(out, "block", base_ms, &cell.value)?;
            continue;
        }
        // A flush's partial block: 0xFF and the engine sequence number (tsdb/FORMAT.md).
        if let [0xFF, seq @ ..] = &cell.column[..]
            && let Ok(seq) = <[u8; 8]>::try_from(seq)
        {
            let label = format!("partial block (flush seq {})", u64::from_be_bytes(seq));
            write_block(out, &label, base_ms, &cell.value)?;
            continue;
        }
        match decode_raw_cell(&cell.column, &cell.value) {
            Ok((offset, value)) => writeln!(
                out,
                "  {:<10}  raw   {}",
                offset_text(i64::from(offset)),
                value_text(value)
            )?,
            Err(e) => writeln!(
                out,
                "  column {} value {}: {e}",
                hex(&cell.column),
                hex(&cell.value)
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
) -> anyhow::Result<()> {
    let mut points = Vec::new();
    if let Err(e) = decode_block(bytes, &mut points) {
        writeln!(
            out,
            "  {label} of {} bytes does not decode: {e}",
            bytes.len()
        )?;
        return Ok(());
    }
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
            value_text(v)
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

/// Decodes a raw data cell (`tsdb/src/cell.rs`, "Format"): a 3-byte big-endian millisecond
/// offset as the column, and a flags byte (`0b0000_FLLL`: F = float, LLL = length - 1) then a
/// 1, 2, 4 or 8-byte big-endian number as the value.
pub(crate) fn decode_raw_cell(column: &[u8], value: &[u8]) -> Result<(u32, Value), String> {
    let [a, b, c] = column else {
        return Err(format!("column is {} bytes, not 3", column.len()));
    };
    let offset = u32::from_be_bytes([0, *a, *b, *c]);
    if offset >= ROW_SPAN_SECS * 1000 {
        return Err(format!("offset {offset} ms is past the row's hour"));
    }
    let Some((&flags, body)) = value.split_first() else {
        return Err("empty value".into());
    };
    if flags & !0x0f != 0 {
        return Err(format!("unknown flags {flags:#04x}"));
    }
    let len = usize::from(flags & 0x07) + 1;
    if body.len() != len {
        return Err(format!(
            "flags say {len} value bytes, the cell holds {}",
            body.len()
        ));
    }
    let float = flags & 0x08 != 0;
    let v = match (float, body) {
        (true, &[a, b, c, d]) => Value::Float(f64::from(f32::from_be_bytes([a, b, c, d]))),
        (true, &[a, b, c, d, e, f, g, h]) => {
            Value::Float(f64::from_be_bytes([a, b, c, d, e, f, g, h]))
        }
        (false, &[a]) => Value::Int(i64::from(a as i8)),
        (false, &[a, b]) => Value::Int(i64::from(i16::from_be_bytes([a, b]))),
        (false, &[a, b, c, d]) => Value::Int(i64::from(i32::from_be_bytes([a, b, c, d]))),
        (false, &[a, b, c, d, e, f, g, h]) => {
            Value::Int(i64::from_be_bytes([a, b, c, d, e, f, g, h]))
        }
        _ => return Err(format!("bad value length {len}")),
    };
    Ok((offset, v))
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
    fn raw_cells_decode_and_bad_ones_are_errors() {
        assert_eq!(
            decode_raw_cell(&[0, 0x03, 0xe8], &[0x00, 42]),
            Ok((1000, Value::Int(42)))
        );
        assert_eq!(
            decode_raw_cell(&[0, 0, 0], &[0x01, 0xff, 0xfe]),
            Ok((0, Value::Int(-2)))
        );
        let f = 42.5f32.to_be_bytes();
        assert_eq!(
            decode_raw_cell(&[0, 0, 1], &[0x0b, f[0], f[1], f[2], f[3]]),
            Ok((1, Value::Float(42.5)))
        );
        assert!(decode_raw_cell(&[0, 0], &[0, 1]).is_err());
        assert!(decode_raw_cell(&[0xff, 0xff, 0xff], &[0, 1]).is_err());
        assert!(decode_raw_cell(&[0, 0, 0], &[]).is_err());
        assert!(decode_raw_cell(&[0, 0, 0], &[0x02, 1, 2, 3]).is_err());
        assert!(decode_raw_cell(&[0, 0, 0], &[0x10, 1]).is_err());
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
        tsdb.engine().flush()?;
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
