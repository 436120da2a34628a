//! The data table's flush fold: a memtable flush writes each row's raw cells as one block.
//!
//! Without it, every point reaches level 0 as its own entry (a 3-byte column and a 2–9 byte
//! value, plus the entry's framing), and every compaction after that copies each point again,
//! until the row compactor reads them all back to fold the closed hour into a block. With it,
//! the flush hands each row's entries to [`RowFold`], which encodes the raw cells it holds as
//! one *partial block* (`cell::partial_column`): level 0 and every later compaction handle one
//! entry per row and flush instead of one per point, and the row compactor merges a few
//! blocks instead of hundreds of cells.
//!
//! What a fold keeps and writes, for one row of one frozen memtable (entries in internal-key
//! order, see `strata_engine::FlushFold`):
//!
//! * row tombstones are kept; raw puts older than the newest one are dropped (it hides them);
//! * a put at the empty column (a main block written by the row compactor or a delete) is
//!   kept;
//! * of each raw column's puts, the newest is folded;
//! * the folded points become one block at column `0xFF | seq`, where `seq` is the highest
//!   sequence number among the folded cells: above the kept tombstones and main blocks they
//!   follow, so it is newer than all of them for the engine, and later than every older
//!   partial block of the row for `cell::decode_row`.
//!
//! A row holding a cell delete, a column of another shape, or a value that does not decode is
//! written unfolded; none of these is written by this crate's current code.

use strata_engine::{FlushFold, FoldEntry, FoldKind, FoldOut};

use crate::block::encode_block;
use crate::cell::{COLUMN_LEN, decode_column, decode_value, partial_column};
use crate::rowkey::{ROWKEY_HEAD_LEN, SALT_LEN};
use crate::uid::UID_LEN;
use crate::value::Value;

/// The data table's [`FlushFold`].
#[derive(Debug, Default)]
pub(crate) struct RowFold;

impl FlushFold for RowFold {
    fn fold(&self, row: &[u8], entries: &[FoldEntry<'_>]) -> Option<Vec<FoldOut>> {
        fold_row(row, entries)
    }
}

/// The fold of one row; `None` leaves it as it is.
fn fold_row(row: &[u8], entries: &[FoldEntry<'_>]) -> Option<Vec<FoldOut>> {
    if row.len() < ROWKEY_HEAD_LEN {
        return None;
    }
    let at = SALT_LEN + UID_LEN;
    let base_time = u32::from_be_bytes(row[at..at + 4].try_into().ok()?);
    let base_ms = i64::from(base_time) * 1000;
    let mut out = Vec::new();
    let mut points: Vec<(i64, Value)> = Vec::with_capacity(entries.len());
    // Row tombstones sort first, newest first: the first one decides what they hide.
    let hidden_below = entries
        .first()
        .filter(|e| e.kind == FoldKind::DeleteRow)
        .map_or(0, |e| e.seq);
    let mut last_column: Option<&[u8]> = None;
    let mut seq = 0;
    for (i, e) in entries.iter().enumerate() {
        match e.kind {
            FoldKind::DeleteRow => out.push(FoldOut::Keep(i)),
            FoldKind::DeleteCell => return None,
            FoldKind::Put if e.column.is_empty() => out.push(FoldOut::Keep(i)),
            FoldKind::Put if e.column.len() == COLUMN_LEN => {
                // A tie with the tombstone is the same batch, where the put came later.
                if e.seq < hidden_below || last_column == Some(e.column) {
                    continue;
                }
                last_column = Some(e.column);
                let off = decode_column(e.column).ok()?;
                let value = decode_value(e.column, e.value).ok()?;
                points.push((base_ms + i64::from(off), value));
                seq = seq.max(e.seq);
            }
            FoldKind::Put => return None,
        }
    }
    if points.is_empty() {
        return None;
    }
    let mut block = Vec::new();
    encode_block(&points, &mut block).ok()?;
    out.push(FoldOut::Put {
        column: partial_column(seq).to_vec(),
        value: block,
        seq,
    });
    Some(out)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use strata_engine::Cell;

    use super::*;
    use crate::cell::{decode_row, encode_column, encode_value};

    const BASE: u32 = 7200;

    fn rowkey() -> Vec<u8> {
        let mut k = vec![3u8, 0, 0, 1];
        k.extend_from_slice(&BASE.to_be_bytes());
        k.extend_from_slice(&[0, 0, 1, 0, 0, 2]);
        k
    }

    struct Owned {
        column: Vec<u8>,
        value: Vec<u8>,
        seq: u64,
        kind: FoldKind,
    }

    fn raw(off: u32, v: i64, seq: u64) -> Owned {
        Owned {
            column: encode_column(off).to_vec(),
            value: encode_value(Value::Int(v)).as_bytes().to_vec(),
            seq,
            kind: FoldKind::Put,
        }
    }

    fn view(entries: &[Owned]) -> Vec<FoldEntry<'_>> {
        entries
            .iter()
            .map(|e| FoldEntry {
                column: &e.column,
                value: &e.value,
                seq: e.seq,
                kind: e.kind,
            })
            .collect()
    }

    /// The cells a read would see after the fold, given the input rows' entries.
    fn cells_after(entries: &[Owned], out: &[FoldOut]) -> Vec<Cell> {
        out.iter()
            .filter_map(|o| match o {
                FoldOut::Keep(i) if entries[*i].kind == FoldKind::Put => Some(Cell {
                    column: Bytes::from(entries[*i].column.clone()),
                    value: Bytes::from(entries[*i].value.clone()),
                }),
                FoldOut::Keep(_) => None,
                FoldOut::Put { column, value, .. } => Some(Cell {
                    column: Bytes::from(column.clone()),
                    value: Bytes::from(value.clone()),
                }),
            })
            .collect()
    }

    #[test]
    fn raw_cells_become_one_block_with_the_newest_version_of_each() {
        // Internal-key order: columns ascending, newest first within a column.
        let entries = vec![raw(0, 1, 4), raw(0, 9, 2), raw(1000, 2, 3), raw(2500, 3, 7)];
        let out = fold_row(&rowkey(), &view(&entries)).expect("folds");
        assert_eq!(out.len(), 1);
        let FoldOut::Put { column, seq, .. } = &out[0] else {
            panic!("a new block: {out:?}");
        };
        assert_eq!(*seq, 7);
        assert_eq!(column[..], partial_column(7));
        let cells = cells_after(&entries, &out);
        let base_ms = i64::from(BASE) * 1000;
        assert_eq!(
            decode_row(BASE, &cells).expect("decodes"),
            vec![
                (base_ms, Value::Int(1)),
                (base_ms + 1000, Value::Int(2)),
                (base_ms + 2500, Value::Int(3)),
            ]
        );
    }

    #[test]
    fn a_row_tombstone_and_main_block_are_kept_and_hide_older_cells() {
        let mut main = Vec::new();
        encode_block(&[(7_200_500, Value::Int(50))], &mut main).expect("encodes");
        let entries = vec![
            Owned {
                column: vec![],
                value: vec![],
                seq: 5,
                kind: FoldKind::DeleteRow,
            },
            Owned {
                column: vec![],
                value: main,
                seq: 5,
                kind: FoldKind::Put,
            },
            raw(0, 1, 3),
            raw(1000, 2, 6),
        ];
        let out = fold_row(&rowkey(), &view(&entries)).expect("folds");
        assert_eq!(out[..2], [FoldOut::Keep(0), FoldOut::Keep(1)]);
        let cells = cells_after(&entries, &out);
        assert_eq!(
            decode_row(BASE, &cells).expect("decodes"),
            vec![(7_200_500, Value::Int(50)), (7_201_000, Value::Int(2))]
        );
    }

    #[test]
    fn rows_it_does_not_understand_are_left_alone() {
        let delete_cell = vec![
            raw(0, 1, 3),
            Owned {
                column: encode_column(1000).to_vec(),
                value: vec![],
                seq: 4,
                kind: FoldKind::DeleteCell,
            },
        ];
        assert!(fold_row(&rowkey(), &view(&delete_cell)).is_none());
        let odd_column = vec![Owned {
            column: vec![1, 2],
            value: vec![0, 1],
            seq: 1,
            kind: FoldKind::Put,
        }];
        assert!(fold_row(&rowkey(), &view(&odd_column)).is_none());
        let bad_value = vec![Owned {
            column: encode_column(5).to_vec(),
            value: vec![0x10, 1],
            seq: 1,
            kind: FoldKind::Put,
        }];
        assert!(fold_row(&rowkey(), &view(&bad_value)).is_none());
        assert!(fold_row(&[1, 2], &view(&[raw(0, 1, 1)])).is_none());
        // Only tombstones: nothing to fold.
        let tombstone = vec![Owned {
            column: vec![],
            value: vec![],
            seq: 1,
            kind: FoldKind::DeleteRow,
        }];
        assert!(fold_row(&rowkey(), &view(&tombstone)).is_none());
    }
}
