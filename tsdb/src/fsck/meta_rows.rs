//! Checks of the `meta` table's series index (`i`, `s`, `l` rows) and dirty-row markers (`d`
//! rows); see `meta.rs` for the format.

use std::collections::{BTreeMap, HashMap, HashSet};

use strata_engine::{Db, Row, ScanOptions, Table};

use super::uids::UidMaps;
use super::{FsckRemedy, FsckReport};
use crate::error::Result;
use crate::meta;
use crate::rowkey::{RowKey, Tsuid, salt_of};
use crate::tsdb::META_TABLE;
use crate::uid_kind::UidKind;

/// The series index as the `i` rows hold it.
#[derive(Debug, Default)]
pub(super) struct Index {
    /// Every TSUID an `i` row holds.
    pub(super) tsuids: HashSet<Tsuid>,
}

/// Reads the `meta` table, reporting index rows and markers that are wrong.
pub(super) fn check(
    db: &Db,
    table: &Table,
    buckets: Option<u8>,
    uids: &UidMaps,
    report: &mut FsckReport,
) -> Result<Index> {
    let mut by_id: BTreeMap<u32, Tsuid> = BTreeMap::new();
    let mut by_tsuid: HashMap<Tsuid, u32> = HashMap::new();
    let mut lasts: Vec<(Vec<u8>, u32)> = Vec::new();
    // Deleted series (`meta.rs` rule 5): they hold their id, and nothing else is checked.
    let mut gone: BTreeMap<u32, Tsuid> = BTreeMap::new();
    let rebuild = |report: &mut FsckReport, row: &[u8], col: &[u8], detail: String| {
        report.add(META_TABLE, row, Some(col), detail, FsckRemedy::RebuildIndex);
    };
    for row in db.scan(table, &ScanOptions::default())? {
        let row = row?;
        match row.key.first() {
            Some(&meta::DIRTY_PREFIX) => check_marker(&row, buckets, report),
            Some(&meta::SERIES_BY_ID_PREFIX) => {
                let col = meta::SERIES_TSUID_COLUMN;
                let id = match meta::decode_id_key(&row.key) {
                    Ok(id) => id,
                    Err(e) => {
                        rebuild(report, &row.key, col, e.to_string());
                        continue;
                    }
                };
                let Some(cell) = row.cells.iter().find(|c| c.column == col) else {
                    rebuild(
                        report,
                        &row.key,
                        col,
                        "the series row has no tsuid column".into(),
                    );
                    continue;
                };
                let is_gone = row
                    .cells
                    .iter()
                    .any(|c| c.column == meta::SERIES_GONE_COLUMN);
                match Tsuid::from_bytes(&cell.value) {
                    Ok(tsuid) if is_gone => {
                        gone.insert(id, tsuid);
                    }
                    Ok(tsuid) => {
                        by_id.insert(id, tsuid);
                    }
                    Err(e) => rebuild(report, &row.key, col, e.to_string()),
                }
            }
            Some(&meta::LAST_PREFIX) => {
                let col = meta::LAST_COLUMN;
                let id = meta::decode_id_key(&row.key);
                let cell = row.cells.iter().find(|c| c.column == col);
                let decoded = cell.map(|c| meta::decode_last(&row.key, &c.value));
                match (id, decoded) {
                    (Ok(id), Some(Ok(_))) => lasts.push((row.key.to_vec(), id)),
                    (Err(e), _) | (_, Some(Err(e))) => {
                        rebuild(report, &row.key, col, e.to_string())
                    }
                    // A row with no `last` cell is skipped by the loader.
                    (Ok(_), None) => {}
                }
            }
            Some(&meta::SERIES_BY_TSUID_PREFIX) => {
                let col = meta::SERIES_ID_COLUMN;
                let tsuid = Tsuid::from_bytes(&row.key[1..]);
                let cell = row.cells.iter().find(|c| c.column == col);
                let id = cell.and_then(|c| <[u8; 4]>::try_from(&c.value[..]).ok());
                match (tsuid, id) {
                    (Ok(tsuid), Some(id)) => {
                        by_tsuid.insert(tsuid, u32::from_be_bytes(id));
                    }
                    (Err(e), _) => rebuild(report, &row.key, col, e.to_string()),
                    (Ok(_), None) => rebuild(
                        report,
                        &row.key,
                        col,
                        "the series id is missing or not 4 bytes".into(),
                    ),
                }
            }
            _ => {}
        }
    }
    report.counts.series = by_id.len() as u64;
    check_ids(&by_id, &gone, &by_tsuid, uids, report);
    for (key, id) in lasts {
        if !by_id.contains_key(&id) {
            rebuild(
                report,
                &key,
                meta::LAST_COLUMN,
                format!("the last point of series id {id}, which is not in the index"),
            );
        }
    }
    Ok(Index {
        tsuids: by_id.into_values().collect(),
    })
}

/// Dense ids, one id per TSUID, `s` rows agreeing with `i` rows, UIDs with names.
fn check_ids(
    by_id: &BTreeMap<u32, Tsuid>,
    gone: &BTreeMap<u32, Tsuid>,
    by_tsuid: &HashMap<Tsuid, u32>,
    uids: &UidMaps,
    report: &mut FsckReport,
) {
    let id_key = |id: u32| meta::key(meta::SERIES_BY_ID_PREFIX, &id.to_be_bytes());
    let tsuid_key = |t: &Tsuid| meta::key(meta::SERIES_BY_TSUID_PREFIX, t.as_bytes());
    let mut first_id: HashMap<&Tsuid, u32> = HashMap::new();
    for (expected, (&id, tsuid)) in by_id.iter().enumerate() {
        let col = Some(meta::SERIES_TSUID_COLUMN);
        let rebuild = FsckRemedy::RebuildIndex;
        // A gap is reported once, at the first id after it; deleted series fill their ids.
        let expected = expected + gone.range(..id).count();
        let before = |i: u32| by_id.contains_key(&i) || gone.contains_key(&i);
        if usize::try_from(id).ok() != Some(expected) && !before(id - 1) {
            report.add(
                META_TABLE,
                &id_key(id),
                col,
                format!("series ids are not dense: id {id} follows a gap"),
                rebuild.clone(),
            );
        }
        if let Some(first) = first_id.insert(tsuid, id) {
            report.add(
                META_TABLE,
                &id_key(id),
                col,
                format!("series {} has ids {first} and {id}", tsuid.to_hex()),
                rebuild.clone(),
            );
            continue;
        }
        match by_tsuid.get(tsuid) {
            Some(s) if *s == id => {}
            Some(s) => report.add(
                META_TABLE,
                &tsuid_key(tsuid),
                Some(meta::SERIES_ID_COLUMN),
                format!(
                    "series {} has id {id}, but its s row says {s}",
                    tsuid.to_hex()
                ),
                rebuild.clone(),
            ),
            None => report.add(
                META_TABLE,
                &tsuid_key(tsuid),
                Some(meta::SERIES_ID_COLUMN),
                format!("series {} has id {id}, but no s row", tsuid.to_hex()),
                rebuild.clone(),
            ),
        }
        if let Some(detail) = unnamed_uids(tsuid, uids) {
            report.add(META_TABLE, &id_key(id), col, detail, FsckRemedy::None);
        }
    }
    for (tsuid, id) in by_tsuid {
        if !first_id.contains_key(tsuid) {
            report.add(
                META_TABLE,
                &tsuid_key(tsuid),
                Some(meta::SERIES_ID_COLUMN),
                format!(
                    "series {} has an s row (id {id}), but no i row",
                    tsuid.to_hex()
                ),
                FsckRemedy::RebuildIndex,
            );
        }
    }
}

/// Which UIDs of `tsuid` have no name, if any.
pub(super) fn unnamed_uids(tsuid: &Tsuid, uids: &UidMaps) -> Option<String> {
    let mut missing = Vec::new();
    if !uids.named(UidKind::Metric, tsuid.metric()) {
        missing.push(format!("metric {}", tsuid.metric()));
    }
    for (k, v) in tsuid.tags() {
        if !uids.named(UidKind::Tagk, k) {
            missing.push(format!("tagk {k}"));
        }
        if !uids.named(UidKind::Tagv, v) {
            missing.push(format!("tagv {v}"));
        }
    }
    (!missing.is_empty()).then(|| {
        format!(
            "series {} uses UIDs that have no name: {}",
            tsuid.to_hex(),
            missing.join(", ")
        )
    })
}

/// A marker's row must be a well-formed data rowkey in its series' bucket.
fn check_marker(row: &Row, buckets: Option<u8>, report: &mut FsckReport) {
    report.counts.markers += 1;
    let detail = match RowKey::decode(&row.key[1..]) {
        Ok(rk) => match buckets {
            Some(b) if salt_of(&rk.tsuid, b) != rk.salt => format!(
                "the marked rowkey has salt {}, but its series is in bucket {}",
                rk.salt,
                salt_of(&rk.tsuid, b)
            ),
            _ => return,
        },
        Err(e) => format!("the marked rowkey is malformed: {e}"),
    };
    report.add(META_TABLE, &row.key, None, detail, FsckRemedy::DeleteRow);
}
