//! Leveled compaction: a pure planner that picks the next compaction of a table, and the
//! rules for which entries a compaction keeps.
//!
//! Each table has its own levels. Level 0 holds flushed files, which may overlap; every deeper
//! level holds files with disjoint row ranges, and a row's data in a level is always newer
//! than its data in any deeper level. The planner, in order of priority:
//!
//! 1. When level 0 holds `l0_compaction_trigger` files, compacts *all* of them with the level-1
//!    files they overlap into level 1 (all of them, so level 0 never holds data older than
//!    level 1).
//! 2. Otherwise, for the shallowest level `i >= 1` whose bytes exceed
//!    `level_base_bytes * level_size_ratio^(i - 1)`, compacts its largest file with the files of
//!    level `i + 1` it overlaps into level `i + 1`.
//!
//! Outputs are cut at `target_file_bytes`, only between rows. A compaction keeps, per cell,
//! only its newest entry and drops the entries a newer row tombstone hides (snapshots that
//! need older versions still hold the input files). When no deeper file overlaps the inputs,
//! tombstones are dropped too.

use bytes::Bytes;

use crate::key::{Entry, EntryKind};
use crate::read::resolve_row;

/// Number of levels of a table.
pub(crate) const LEVELS: usize = 7;

/// What the planner needs to know about one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileSummary {
    /// The file id.
    pub(crate) id: u64,
    /// Its size.
    pub(crate) bytes: u64,
    /// Its first row.
    pub(crate) first_row: Bytes,
    /// Its last row.
    pub(crate) last_row: Bytes,
}

/// The size rules of the planner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PlanOptions {
    /// Level-0 file count that triggers an L0 → L1 compaction.
    pub(crate) l0_trigger: usize,
    /// Target bytes of level 1.
    pub(crate) base_bytes: u64,
    /// Growth factor of each deeper level.
    pub(crate) ratio: u64,
}

/// One compaction to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Input file ids.
    pub(crate) inputs: Vec<u64>,
    /// The level the outputs go to.
    pub(crate) output_level: usize,
    /// No file below the output level overlaps the inputs: tombstones can be dropped.
    pub(crate) bottom: bool,
}

fn overlaps(f: &FileSummary, first: &[u8], last: &[u8]) -> bool {
    &f.first_row[..] <= last && &f.last_row[..] >= first
}

/// The bounding row range of `files`.
fn range<'a>(files: impl Iterator<Item = &'a FileSummary>) -> Option<(Bytes, Bytes)> {
    files.fold(None, |acc, f| match acc {
        None => Some((f.first_row.clone(), f.last_row.clone())),
        Some((a, b)) => Some((a.min(f.first_row.clone()), b.max(f.last_row.clone()))),
    })
}

fn plan_with(levels: &[Vec<FileSummary>], from: Vec<&FileSummary>, out: usize) -> Option<Plan> {
    let (first, last) = range(from.iter().copied())?;
    let mut inputs: Vec<&FileSummary> = from;
    if let Some(next) = levels.get(out) {
        inputs.extend(next.iter().filter(|f| overlaps(f, &first, &last)));
    }
    let (first, last) = range(inputs.iter().copied())?;
    let bottom = levels
        .iter()
        .skip(out + 1)
        .flatten()
        .all(|f| !overlaps(f, &first, &last));
    Some(Plan {
        inputs: inputs.iter().map(|f| f.id).collect(),
        output_level: out,
        bottom,
    })
}

/// The next compaction of a table whose files are `levels` (level 0 first), if any is due.
pub(crate) fn plan(levels: &[Vec<FileSummary>], o: &PlanOptions) -> Option<Plan> {
    let l0 = levels.first()?;
    if l0.len() >= o.l0_trigger.max(2) {
        return plan_with(levels, l0.iter().collect(), 1);
    }
    let mut target = o.base_bytes.max(1);
    for (i, level) in levels.iter().enumerate().take(LEVELS - 1).skip(1) {
        let bytes: u64 = level.iter().map(|f| f.bytes).sum();
        if bytes > target {
            let largest = level
                .iter()
                .max_by_key(|f| (f.bytes, std::cmp::Reverse(f.id)))?;
            return plan_with(levels, vec![largest], i + 1);
        }
        target = target.saturating_mul(o.ratio.max(2));
    }
    None
}

/// A compaction of every level-0 file of a table into level 1 whatever their count (to expire
/// their rows when no write will trigger one).
pub(crate) fn plan_level0(levels: &[Vec<FileSummary>]) -> Option<Plan> {
    plan_with(levels, levels.first()?.iter().collect(), 1)
}

/// The entries of one row (ascending internal-key order) that a compaction keeps. Works in
/// place.
pub(crate) fn compact_row(mut entries: Vec<Entry>, bottom: bool) -> Vec<Entry> {
    if bottom {
        return resolve_row(entries, u64::MAX);
    }
    let marker_seq = entries
        .iter()
        .filter(|e| e.key.kind == EntryKind::DeleteRow)
        .map(|e| e.key.seq)
        .max();
    // Markers sort first, newest first: keep only the first.
    let mut marker_kept = false;
    entries.retain(|e| {
        if e.key.kind != EntryKind::DeleteRow {
            return true;
        }
        let keep = !marker_kept;
        marker_kept = true;
        keep
    });
    // The newest entry of each column decides it; older versions go.
    entries.dedup_by(|later, kept| {
        kept.key.kind != EntryKind::DeleteRow && later.key.column == kept.key.column
    });
    entries.retain(|e| {
        e.key.kind == EntryKind::DeleteRow || marker_seq.is_none_or(|m| e.key.seq >= m)
    });
    entries
}

/// Applies a table's TTL to the entries a compaction keeps of one row: puts written before
/// `expired_before` are dropped at the bottom level and turned into cell tombstones above it
/// (so that they keep hiding older versions in deeper levels).
pub(crate) fn expire(entries: Vec<Entry>, expired_before: Option<u64>, bottom: bool) -> Vec<Entry> {
    let Some(t) = expired_before else {
        return entries;
    };
    entries
        .into_iter()
        .filter_map(|mut e| {
            if e.key.kind != EntryKind::Put || e.write_ms >= t {
                return Some(e);
            }
            if bottom {
                return None;
            }
            e.key.kind = EntryKind::DeleteCell;
            e.value = Bytes::new();
            Some(e)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::InternalKey;

    fn f(id: u64, bytes: u64, first: &str, last: &str) -> FileSummary {
        FileSummary {
            id,
            bytes,
            first_row: Bytes::copy_from_slice(first.as_bytes()),
            last_row: Bytes::copy_from_slice(last.as_bytes()),
        }
    }

    const O: PlanOptions = PlanOptions {
        l0_trigger: 2,
        base_bytes: 100,
        ratio: 10,
    };

    #[test]
    fn l0_goes_to_l1_with_the_overlapping_files() {
        let levels = vec![
            vec![f(9, 10, "d", "f"), f(8, 10, "b", "c")],
            vec![f(1, 10, "a", "a"), f(2, 10, "c", "e"), f(3, 10, "g", "h")],
            vec![f(4, 10, "a", "z")],
        ];
        assert_eq!(
            plan(&levels, &O),
            Some(Plan {
                inputs: vec![9, 8, 2],
                output_level: 1,
                bottom: false,
            })
        );
        assert_eq!(plan(&levels[..1], &O).map(|p| p.bottom), Some(true));
        let one = vec![vec![f(9, 10, "d", "f")], vec![f(2, 10, "c", "e")]];
        assert_eq!(plan(&one, &O), None);
    }

    #[test]
    fn oversized_levels_push_their_largest_file_down() {
        let levels = vec![
            vec![],
            vec![f(1, 60, "a", "c"), f(2, 70, "d", "f")],
            vec![f(3, 10, "a", "b"), f(4, 10, "e", "e"), f(5, 10, "x", "y")],
        ];
        assert_eq!(
            plan(&levels, &O),
            Some(Plan {
                inputs: vec![2, 4],
                output_level: 2,
                bottom: true,
            })
        );
        let small = vec![vec![], vec![f(1, 60, "a", "c")], vec![f(3, 900, "a", "b")]];
        assert_eq!(plan(&small, &O), None);
    }

    fn e(col: &str, seq: u64, kind: EntryKind) -> Entry {
        Entry::new(
            InternalKey::new(
                Bytes::from_static(b"r"),
                Bytes::copy_from_slice(col.as_bytes()),
                seq,
                kind,
            ),
            0,
            Bytes::new(),
        )
    }

    #[test]
    fn rows_keep_newest_entries_and_tombstones_unless_bottom() {
        let mut entries = vec![
            e("", 3, EntryKind::DeleteRow),
            e("", 1, EntryKind::DeleteRow),
            e("a", 5, EntryKind::Put),
            e("a", 2, EntryKind::Put),
            e("b", 2, EntryKind::Put),
            e("c", 4, EntryKind::DeleteCell),
            e("c", 3, EntryKind::Put),
        ];
        entries.sort_by(|a, b| a.key.cmp(&b.key));
        let kept: Vec<(String, u64)> = compact_row(entries.clone(), false)
            .iter()
            .map(|e| {
                (
                    String::from_utf8_lossy(&e.key.column).into_owned(),
                    e.key.seq,
                )
            })
            .collect();
        assert_eq!(kept, vec![("".into(), 3), ("a".into(), 5), ("c".into(), 4)]);
        let bottom: Vec<u64> = compact_row(entries.clone(), true)
            .iter()
            .map(|e| e.key.seq)
            .collect();
        assert_eq!(bottom, vec![5]);
    }

    #[test]
    fn expired_puts_become_tombstones_above_the_bottom() {
        let mut old = e("a", 2, EntryKind::Put);
        old.write_ms = 5;
        let mut new = e("b", 3, EntryKind::Put);
        new.write_ms = 50;
        let entries = vec![old, new];
        let kinds = |v: Vec<Entry>| v.iter().map(|e| e.key.kind).collect::<Vec<_>>();
        assert_eq!(
            kinds(expire(entries.clone(), Some(10), false)),
            vec![EntryKind::DeleteCell, EntryKind::Put]
        );
        assert_eq!(
            kinds(expire(entries.clone(), Some(10), true)),
            vec![EntryKind::Put]
        );
        assert_eq!(kinds(expire(entries, None, true)).len(), 2);
    }
}
