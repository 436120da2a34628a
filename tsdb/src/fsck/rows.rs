//! Checks of the data rows, and the decoding of a damaged row part by part.

use std::collections::HashSet;

use strata_engine::{Cell, Db, ScanOptions, Table};

use super::meta_rows::{Index, unnamed_uids};
use super::uids::UidMaps;
use super::{FsckRemedy, FsckReport};
use crate::cell::{
    COLUMN_LEN, PARTIAL_COLUMN_LEN, PARTIAL_TAG, decode_column, decode_row, decode_row_block,
    decode_value, merge_points,
};
use crate::error::Result;
use crate::rowkey::{RowKey, Tsuid, salt_of};
use crate::tsdb::DATA_TABLE;
use crate::value::Value;

/// Reads every data row, reporting rowkeys and cells that do not decode, rows in the wrong
/// salt bucket, and series that are not indexed or whose UIDs have no name.
pub(super) fn check(
    db: &Db,
    table: &Table,
    buckets: Option<u8>,
    uids: &UidMaps,
    index: &Index,
    report: &mut FsckReport,
) -> Result<()> {
    let opts = ScanOptions {
        skip_cache_fill: true,
        ..ScanOptions::default()
    };
    // Each series is checked against the index and the UID table once, at its first row.
    let mut seen: HashSet<Tsuid> = HashSet::new();
    for row in db.scan(table, &opts)? {
        let row = row?;
        report.counts.rows += 1;
        report.counts.cells += row.cells.len() as u64;
        let rk = match RowKey::decode(&row.key) {
            Ok(rk) => rk,
            Err(e) => {
                report.add(
                    DATA_TABLE,
                    &row.key,
                    None,
                    e.to_string(),
                    FsckRemedy::DeleteRow,
                );
                continue;
            }
        };
        if let Some(b) = buckets
            && salt_of(&rk.tsuid, b) != rk.salt
        {
            report.add(
                DATA_TABLE,
                &row.key,
                None,
                format!(
                    "the row has salt {}, but its series is in bucket {}: queries cannot find it",
                    rk.salt,
                    salt_of(&rk.tsuid, b)
                ),
                FsckRemedy::None,
            );
        }
        let (points, bad) = decode_parts(rk.base_time, &row.cells);
        for (i, detail) in bad {
            let column = row.cells.get(i).map(|c| &c.column[..]);
            report.add(DATA_TABLE, &row.key, column, detail, FsckRemedy::RewriteRow);
        }
        report.counts.points += points.len() as u64;
        if let Some(&newest) = points.last() {
            let entry = report.newest.entry(rk.tsuid.clone()).or_insert(newest);
            if newest.0 > entry.0 {
                *entry = newest;
            }
        }
        if seen.contains(&rk.tsuid) {
            continue;
        }
        if !index.tsuids.contains(&rk.tsuid) {
            report.add(
                DATA_TABLE,
                &row.key,
                None,
                format!("series {} is not in the series index", rk.tsuid.to_hex()),
                FsckRemedy::IndexSeries,
            );
            // An indexed series' UIDs were checked with the index.
            if let Some(detail) = unnamed_uids(&rk.tsuid, uids) {
                report.add(DATA_TABLE, &row.key, None, detail, FsckRemedy::None);
            }
        }
        seen.insert(rk.tsuid);
    }
    report.counts.data_series = seen.len() as u64;
    Ok(())
}

/// The cells of a row that do not decode: index into the row's cells, and what is wrong.
pub(super) type BadCells = Vec<(usize, String)>;

/// The points of a data row's parts that decode, merged as `cell::decode_row` merges them,
/// and the cells that do not.
pub(super) fn decode_parts(base_time: u32, cells: &[Cell]) -> (Vec<(i64, Value)>, BadCells) {
    let whole = match decode_row(base_time, cells) {
        Ok(points) => return (points, Vec::new()),
        Err(e) => e,
    };
    let base_ms = i64::from(base_time) * 1000;
    let mut bad = Vec::new();
    let mut blocks: Option<Vec<(i64, Value)>> = None;
    let mut raw = Vec::new();
    for (i, cell) in cells.iter().enumerate() {
        let col = &cell.column[..];
        let is_main = col.is_empty() && i == 0;
        let is_partial = col.len() == PARTIAL_COLUMN_LEN && col.first() == Some(&PARTIAL_TAG);
        if is_main || is_partial {
            match decode_row_block(base_time, &cell.value) {
                Ok(points) => {
                    blocks = Some(match blocks {
                        None => points,
                        Some(older) => merge_points(&older, &points),
                    });
                }
                Err(e) => bad.push((i, e.to_string())),
            }
        } else if col.len() == COLUMN_LEN {
            match decode_column(col).and_then(|off| {
                decode_value(col, &cell.value).map(|v| (base_ms + i64::from(off), v))
            }) {
                Ok(p) => raw.push(p),
                Err(e) => bad.push((i, e.to_string())),
            }
        } else {
            bad.push((
                i,
                format!(
                    "a column of {} bytes is neither a block's nor a raw cell's",
                    col.len()
                ),
            ));
        }
    }
    if bad.is_empty() {
        // Every part decodes on its own, so the parts do not fit together.
        bad.push((0, whole.to_string()));
    }
    let points = match blocks {
        None => raw,
        Some(b) => merge_points(&b, &raw),
    };
    (points, bad)
}
