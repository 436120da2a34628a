//! Annotations: short notes on a point in time, global or attached to one series (OpenTSDB's
//! `/api/annotation`), kept in their own engine table `annotation`.
//!
//! ## Format
//!
//! One row per annotation, one column `a`:
//!
//! ```text
//! global:  row = 0x00 | time (8)                                  column "a" → value
//! series:  row = 0x01 | tsuid length (2, BE u16) | tsuid | time (8)  column "a" → value
//!
//! time  = the start time in milliseconds (a start time of at most u32::MAX is seconds and is
//!         multiplied by 1000 first), as a BE u64 with the sign bit flipped, so byte order is
//!         time order for every i64
//!
//! value = version (u8 = 1)
//!       | start_time (8, BE i64, as given: seconds or ms)
//!       | end_time   (8, BE i64, 0 = none)
//!       | description (string) | notes (string)
//!       | custom count (4, BE u32) | count × (key (string) | value (string))
//! string = length (4, BE u32) | UTF-8 bytes
//! ```
//!
//! 1. The scope byte and the tsuid length keep the annotations of one series (or the global
//!    ones) in one contiguous key range, ordered by start time, so a time-range read is one
//!    range scan, and one TSUID's range never holds another TSUID's rows.
//! 2. A start time in seconds and the same instant in milliseconds name the same annotation
//!    (OpenTSDB keeps them apart; Strata does not, so a range read never sees duplicates).
//! 3. The value repeats the start time as it was given, so it reads back unchanged.
//! 4. The decoder checks the version and that the value is consumed exactly; anything else is
//!    `Corruption`.
//! 5. The engine checksums WAL records and SST blocks, so the value carries no checksum.

use std::collections::BTreeMap;

use strata_engine::{Db, ScanOptions, Table, TableOptions, WriteBatch};

use crate::error::{Error, Result};
use crate::rowkey::Tsuid;
use crate::tsdb::Tsdb;

/// Name of the annotation table.
pub(crate) const ANNOTATION_TABLE: &str = "annotation";
/// The one column of an annotation row.
const COLUMN: &[u8] = b"a";
/// Scope byte of global annotations.
const GLOBAL: u8 = 0x00;
/// Scope byte of per-series annotations.
const SERIES: u8 = 0x01;
/// Version byte of the value encoding.
const VERSION: u8 = 1;

/// One annotation. Field names follow OpenTSDB's JSON (`startTime`, `endTime`, …) in the HTTP
/// layer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Annotation {
    /// The series, as upper-case hex TSUID; `None` for a global annotation.
    pub tsuid: Option<String>,
    /// Start, Unix epoch seconds (or milliseconds when above `u32::MAX`); must be >= 1.
    pub start_time: i64,
    /// End, same units; 0 when there is none.
    pub end_time: i64,
    /// A one-line description (what graphs show).
    pub description: String,
    /// Longer notes.
    pub notes: String,
    /// User key/values.
    pub custom: BTreeMap<String, String>,
}

/// A start or end time in milliseconds: OpenTSDB treats values above `u32::MAX` as
/// milliseconds and smaller ones as seconds.
pub fn annotation_time_ms(t: i64) -> i64 {
    if t > i64::from(u32::MAX) || t < 0 {
        t
    } else {
        t * 1000
    }
}

fn scope_prefix(tsuid: Option<&Tsuid>) -> Result<Vec<u8>> {
    match tsuid {
        None => Ok(vec![GLOBAL]),
        Some(t) => {
            let b = t.as_bytes();
            let len = u16::try_from(b.len()).map_err(|_| Error::InvalidTsuid {
                tsuid: t.to_hex(),
                detail: "too long".into(),
            })?;
            let mut k = Vec::with_capacity(3 + b.len() + 8);
            k.push(SERIES);
            k.extend_from_slice(&len.to_be_bytes());
            k.extend_from_slice(b);
            Ok(k)
        }
    }
}

fn time_key(ms: i64) -> [u8; 8] {
    ((ms as u64) ^ (1 << 63)).to_be_bytes()
}

fn row_key(tsuid: Option<&Tsuid>, start_time: i64) -> Result<Vec<u8>> {
    let mut k = scope_prefix(tsuid)?;
    k.extend_from_slice(&time_key(annotation_time_ms(start_time)));
    Ok(k)
}

fn parse_tsuid(tsuid: Option<&str>) -> Result<Option<Tsuid>> {
    match tsuid {
        None | Some("") => Ok(None),
        Some(s) => Tsuid::parse_hex(s).map(Some),
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Encodes the value of an annotation row (the tsuid lives in the key).
pub(crate) fn encode_value(a: &Annotation) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(1 + 16 + 12 + a.description.len() + a.notes.len() + 16 * a.custom.len());
    out.push(VERSION);
    out.extend_from_slice(&a.start_time.to_be_bytes());
    out.extend_from_slice(&a.end_time.to_be_bytes());
    put_str(&mut out, &a.description);
    put_str(&mut out, &a.notes);
    out.extend_from_slice(&(a.custom.len() as u32).to_be_bytes());
    for (k, v) in &a.custom {
        put_str(&mut out, k);
        put_str(&mut out, v);
    }
    out
}

struct Reader<'a> {
    buf: &'a [u8],
    key: &'a [u8],
}

impl Reader<'_> {
    fn bad(&self, detail: &str) -> Error {
        Error::corruption("annotation", self.key, detail)
    }

    fn take(&mut self, n: usize) -> Result<&[u8]> {
        if self.buf.len() < n {
            return Err(self.bad("value is truncated"));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn i64(&mut self) -> Result<i64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    fn string(&mut self) -> Result<String> {
        let n = self.u32()? as usize;
        let b = self.take(n)?.to_vec();
        String::from_utf8(b).map_err(|_| self.bad("string is not UTF-8"))
    }
}

/// Decodes an annotation row value; `key` is the rowkey, for errors only.
pub(crate) fn decode_value(key: &[u8], value: &[u8], tsuid: Option<String>) -> Result<Annotation> {
    let mut r = Reader { buf: value, key };
    let version = r.take(1)?[0];
    if version != VERSION {
        return Err(r.bad(&format!("version {version}, expected {VERSION}")));
    }
    let start_time = r.i64()?;
    let end_time = r.i64()?;
    let description = r.string()?;
    let notes = r.string()?;
    let count = r.u32()?;
    let mut custom = BTreeMap::new();
    for _ in 0..count {
        let k = r.string()?;
        let v = r.string()?;
        custom.insert(k, v);
    }
    if !r.buf.is_empty() {
        return Err(r.bad("trailing bytes after the value"));
    }
    Ok(Annotation {
        tsuid,
        start_time,
        end_time,
        description,
        notes,
        custom,
    })
}

/// The TSUID hex of a series row key (`0x01 | len | tsuid | time`).
fn tsuid_of_key(key: &[u8]) -> Result<Option<String>> {
    match key {
        [GLOBAL, rest @ ..] if rest.len() == 8 => Ok(None),
        [SERIES, a, b, rest @ ..] => {
            let len = usize::from(u16::from_be_bytes([*a, *b]));
            if rest.len() != len + 8 {
                return Err(Error::corruption(
                    "annotation",
                    key,
                    "rowkey length does not match its tsuid length",
                ));
            }
            Ok(Some(Tsuid::from_bytes(&rest[..len])?.to_hex()))
        }
        _ => Err(Error::corruption("annotation", key, "bad rowkey")),
    }
}

impl Tsdb {
    /// Whether an annotation was ever stored (the table exists); a query skips its per-series
    /// annotation lookups when not.
    pub fn has_annotations(&self) -> bool {
        !self.annotation_tables().is_empty()
    }

    /// The annotation tables a read looks at: on a replica over partitioned writers every
    /// tree's (each writer keeps the annotations posted to it), else this database's.
    fn annotation_tables(&self) -> Vec<(Db, Table)> {
        let store = self.store();
        let dbs = match &store.trees {
            None => vec![store.db.clone()],
            Some(trees) => trees
                .set
                .read()
                .trees
                .iter()
                .map(|t| t.db.clone())
                .collect(),
        };
        dbs.into_iter()
            .filter_map(|db| db.table(ANNOTATION_TABLE).map(|t| (db, t)))
            .collect()
    }

    /// The annotations of the rows `opts` scans in every table of
    /// [`Tsdb::annotation_tables`], in key order; where two trees hold the same key (one
    /// annotation posted to two writers), the first tree's.
    fn scan_annotations(
        &self,
        opts: &ScanOptions,
        tsuid_of: impl Fn(&[u8]) -> Result<Option<String>>,
    ) -> Result<Vec<Annotation>> {
        let mut found: Vec<(Box<[u8]>, Annotation)> = Vec::new();
        for (db, table) in self.annotation_tables() {
            for row in db.scan(&table, opts)? {
                let row = row?;
                let tsuid = tsuid_of(&row.key)?;
                for cell in row.cells.iter().filter(|c| c.column == COLUMN) {
                    let a = decode_value(&row.key, &cell.value, tsuid.clone())?;
                    found.push((row.key.to_vec().into_boxed_slice(), a));
                }
            }
        }
        // Stable: of equal keys the first tree's comes first, and is the one kept.
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found.dedup_by(|later, first| later.0 == first.0);
        Ok(found.into_iter().map(|(_, a)| a).collect())
    }

    fn annotation_table(&self, create: bool) -> Result<Option<Table>> {
        let db = &self.store().db;
        match db.table(ANNOTATION_TABLE) {
            Some(t) => Ok(Some(t)),
            None if create => Ok(Some(
                db.open_table(ANNOTATION_TABLE, TableOptions::default())?,
            )),
            None => Ok(None),
        }
    }

    /// Stores `a`, replacing any annotation with the same TSUID and start time. The write is
    /// fsynced before this returns. Fails on a start time below 1 or a malformed TSUID.
    pub fn put_annotation(&self, a: &Annotation) -> Result<()> {
        if a.start_time < 1 {
            return Err(Error::InvalidArgument("Missing start time".into()));
        }
        let tsuid = parse_tsuid(a.tsuid.as_deref())?;
        let key = row_key(tsuid.as_ref(), a.start_time)?;
        let Some(table) = self.annotation_table(true)? else {
            return Err(Error::InvalidArgument("no annotation table".into()));
        };
        let mut batch = WriteBatch::new();
        batch.put(&table, &key, COLUMN, &encode_value(a));
        Ok(self.store().db.write_sync(&batch)?)
    }

    /// The annotation of `tsuid` (hex; `None` or empty = global) starting at `start_time`.
    pub fn get_annotation(
        &self,
        tsuid: Option<&str>,
        start_time: i64,
    ) -> Result<Option<Annotation>> {
        let ts = parse_tsuid(tsuid)?;
        let key = row_key(ts.as_ref(), start_time)?;
        for (db, table) in self.annotation_tables() {
            if let Some(v) = db.get(&table, &key, COLUMN)? {
                return Ok(Some(decode_value(&key, &v, ts.map(|t| t.to_hex()))?));
            }
        }
        Ok(None)
    }

    /// Deletes one annotation; true when it existed.
    pub fn delete_annotation(&self, tsuid: Option<&str>, start_time: i64) -> Result<bool> {
        let ts = parse_tsuid(tsuid)?;
        let Some(table) = self.annotation_table(false)? else {
            return Ok(false);
        };
        let key = row_key(ts.as_ref(), start_time)?;
        if self.store().db.get(&table, &key, COLUMN)?.is_none() {
            return Ok(false);
        }
        let mut batch = WriteBatch::new();
        batch.delete_row(&table, &key);
        self.store().db.write_sync(&batch)?;
        Ok(true)
    }

    /// The annotations of `tsuid` (hex; `None` or empty = the global ones) whose start time,
    /// in milliseconds (see [`annotation_time_ms`]), lies in `[start_ms, end_ms]`, in start
    /// time order.
    pub fn annotations(
        &self,
        tsuid: Option<&str>,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<Vec<Annotation>> {
        let ts = parse_tsuid(tsuid)?;
        if end_ms < start_ms {
            return Ok(Vec::new());
        }
        let hex = ts.as_ref().map(Tsuid::to_hex);
        let opts = range_scan(ts.as_ref(), start_ms, end_ms)?;
        self.scan_annotations(&opts, |_| Ok(hex.clone()))
    }

    /// Deletes the annotations [`Tsdb::annotations`] would return; answers how many.
    pub fn delete_annotations(
        &self,
        tsuid: Option<&str>,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<usize> {
        let ts = parse_tsuid(tsuid)?;
        let Some(table) = self.annotation_table(false)? else {
            return Ok(0);
        };
        if end_ms < start_ms {
            return Ok(0);
        }
        let mut opts = range_scan(ts.as_ref(), start_ms, end_ms)?;
        opts.keys_only = true;
        let mut batch = WriteBatch::new();
        for row in self.store().db.scan(&table, &opts)? {
            batch.delete_row(&table, &row?.key);
        }
        let n = batch.len();
        if n > 0 {
            self.store().db.write_sync(&batch)?;
        }
        Ok(n)
    }

    /// Every annotation, global ones first, then per series in TSUID order (for tools).
    pub fn all_annotations(&self) -> Result<Vec<Annotation>> {
        self.scan_annotations(&ScanOptions::default(), tsuid_of_key)
    }
}

/// The scan over `[start_ms, end_ms]` of one scope.
fn range_scan(tsuid: Option<&Tsuid>, start_ms: i64, end_ms: i64) -> Result<ScanOptions> {
    let prefix = scope_prefix(tsuid)?;
    let mut start = prefix.clone();
    start.extend_from_slice(&time_key(start_ms));
    let mut stop = prefix.clone();
    match end_ms.checked_add(1) {
        Some(e) => stop.extend_from_slice(&time_key(e)),
        None => {
            // End of the scope: the scope prefix's successor.
            stop = prefix;
            while let Some(last) = stop.pop() {
                if last < 0xff {
                    stop.push(last + 1);
                    break;
                }
            }
        }
    }
    Ok(ScanOptions::range(&start, &stop))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::point::PointRef;
    use crate::tsdb::TsdbOptions;
    use crate::value::Value;

    fn note(tsuid: Option<&str>, start: i64, text: &str) -> Annotation {
        Annotation {
            tsuid: tsuid.map(str::to_string),
            start_time: start,
            end_time: 0,
            description: text.into(),
            notes: String::new(),
            custom: BTreeMap::new(),
        }
    }

    fn open(dir: &std::path::Path) -> Result<(Tsdb, String)> {
        let db = Tsdb::open(dir, TsdbOptions::default())?;
        let tags = [("host", "a")];
        for r in db.write_sync(&[PointRef {
            metric: "m",
            tags: &tags,
            timestamp: 1_356_998_400,
            value: Value::Int(1),
        }]) {
            r?;
        }
        let tsuid = db
            .series_info(0)?
            .map(|s| s.tsuid.to_hex())
            .unwrap_or_default();
        Ok((db, tsuid))
    }

    fn tempdir() -> Result<tempfile::TempDir> {
        tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))
    }

    #[test]
    fn annotation_put_get_delete_and_survive_reopen() -> Result<()> {
        let dir = tempdir()?;
        let tsuid;
        {
            let (db, t) = open(dir.path())?;
            tsuid = t;
            assert_eq!(db.get_annotation(None, 1_356_998_400)?, None);
            let mut a = note(Some(&tsuid), 1_356_998_400, "deploy");
            a.custom.insert("owner".into(), "ops".into());
            a.end_time = 1_356_998_500;
            db.put_annotation(&a)?;
            db.put_annotation(&note(None, 1_356_998_400, "global"))?;
            assert_eq!(
                db.get_annotation(Some(&tsuid.to_lowercase()), 1_356_998_400)?,
                Some(a)
            );
            // The same instant in milliseconds names the same annotation.
            assert_eq!(
                db.get_annotation(None, 1_356_998_400_000)?
                    .map(|a| a.description),
                Some("global".into())
            );
        }
        let db = Tsdb::open(dir.path(), TsdbOptions::default())?;
        let got = db.get_annotation(Some(&tsuid), 1_356_998_400)?;
        assert_eq!(got.map(|a| a.custom.len()), Some(1));
        assert!(db.delete_annotation(Some(&tsuid), 1_356_998_400)?);
        assert!(!db.delete_annotation(Some(&tsuid), 1_356_998_400)?);
        assert_eq!(db.get_annotation(Some(&tsuid), 1_356_998_400)?, None);
        assert!(db.get_annotation(None, 1_356_998_400)?.is_some());
        Ok(())
    }

    #[test]
    fn annotation_ranges_are_per_scope_and_ordered() -> Result<()> {
        let dir = tempdir()?;
        let (db, tsuid) = open(dir.path())?;
        for t in [300, 100, 200, 400] {
            db.put_annotation(&note(Some(&tsuid), t, &format!("s{t}")))?;
            db.put_annotation(&note(None, t, &format!("g{t}")))?;
        }
        // A TSUID that extends the first one must not show up in its range.
        let longer = format!("{tsuid}000002000002");
        db.put_annotation(&note(Some(&longer), 250, "other"))?;
        let names = |v: Vec<Annotation>| v.into_iter().map(|a| a.description).collect::<Vec<_>>();
        assert_eq!(
            names(db.annotations(Some(&tsuid), 150_000, 300_000)?),
            vec!["s200", "s300"]
        );
        assert_eq!(
            names(db.annotations(None, 0, i64::MAX)?),
            vec!["g100", "g200", "g300", "g400"]
        );
        assert_eq!(
            names(db.annotations(None, 500_000, 100_000)?),
            Vec::<String>::new()
        );
        assert_eq!(db.delete_annotations(None, 0, 250_000)?, 2);
        assert_eq!(
            names(db.annotations(None, 0, i64::MAX)?),
            vec!["g300", "g400"]
        );
        assert_eq!(db.all_annotations()?.len(), 2 + 4 + 1);
        Ok(())
    }

    #[test]
    fn annotation_bad_input_is_a_client_error() -> Result<()> {
        let dir = tempdir()?;
        let (db, _) = open(dir.path())?;
        let e = db.put_annotation(&note(None, 0, "x")).err();
        assert_eq!(e.map(|e| e.kind()), Some(crate::ErrorKind::Client));
        let e = db.put_annotation(&note(Some("zz"), 10, "x")).err();
        assert_eq!(e.map(|e| e.kind()), Some(crate::ErrorKind::Client));
        assert!(db.annotations(Some("0"), 0, 1).is_err());
        assert!(db.all_annotations()?.is_empty());
        Ok(())
    }

    #[test]
    fn annotation_decoder_rejects_bad_bytes() {
        let a = note(None, 5, "x");
        let v = encode_value(&a);
        for cut in 0..v.len() {
            assert!(decode_value(b"k", &v[..cut], None).is_err());
        }
        let mut longer = v.clone();
        longer.push(0);
        assert!(decode_value(b"k", &longer, None).is_err());
        let mut bad_version = v;
        bad_version[0] = 9;
        assert!(decode_value(b"k", &bad_version, None).is_err());
    }

    proptest! {
        #[test]
        fn annotation_value_round_trips(
            start in any::<i64>(),
            end in any::<i64>(),
            description in ".*",
            notes in ".*",
            custom in proptest::collection::btree_map(".*", ".*", 0..4),
        ) {
            let a = Annotation { tsuid: None, start_time: start, end_time: end, description, notes, custom };
            prop_assert_eq!(decode_value(b"k", &encode_value(&a), None).ok(), Some(a));
        }

        #[test]
        fn annotation_time_key_order_is_time_order(a in any::<i64>(), b in any::<i64>()) {
            prop_assert_eq!(a.cmp(&b), time_key(a).cmp(&time_key(b)));
        }
    }
}
