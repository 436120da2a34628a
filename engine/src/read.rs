//! Merging entries of several sources (memtables and SSTs) into visible rows.
//!
//! Every source yields entries in internal-key order (or its exact reverse for a reverse scan).
//! The merge interleaves them into one stream in that order, then each row's entries are
//! resolved at the snapshot sequence number: a cell is visible if its newest entry with
//! `seq <= snapshot` is a put that is not older than the row's newest visible row tombstone (a
//! tombstone and a cell of one batch share a seq; the memtable already resolved those, so a tie
//! means the cell was written after the tombstone).

use bytes::Bytes;

use crate::error::Result;
use crate::key::{Entry, EntryKind};

/// A source of entries in (possibly reversed) internal-key order.
pub(crate) type Source = Box<dyn Iterator<Item = Result<Entry>> + Send>;

/// Merges sources by internal key.
pub(crate) struct Merge {
    sources: Vec<Source>,
    heads: Vec<Option<Entry>>,
    reverse: bool,
    started: bool,
    failed: bool,
}

impl std::fmt::Debug for Merge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Merge")
            .field("sources", &self.sources.len())
            .field("reverse", &self.reverse)
            .finish_non_exhaustive()
    }
}

impl Merge {
    /// A merge of `sources`, all ascending, or all descending if `reverse`.
    pub(crate) fn new(sources: Vec<Source>, reverse: bool) -> Merge {
        let heads = sources.iter().map(|_| None).collect();
        Merge {
            sources,
            heads,
            reverse,
            started: false,
            failed: false,
        }
    }

    fn refill(&mut self, i: usize) -> Result<()> {
        self.heads[i] = self.sources[i].next().transpose()?;
        Ok(())
    }
}

impl Iterator for Merge {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if self.failed {
            return None;
        }
        if !self.started {
            self.started = true;
            for i in 0..self.sources.len() {
                if let Err(e) = self.refill(i) {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
        let mut best: Option<usize> = None;
        for (i, head) in self.heads.iter().enumerate() {
            let Some(h) = head else { continue };
            let better = match best.and_then(|b| self.heads[b].as_ref()) {
                None => true,
                Some(b) if self.reverse => h.key > b.key,
                Some(b) => h.key < b.key,
            };
            if better {
                best = Some(i);
            }
        }
        let i = best?;
        let entry = self.heads[i].take();
        if let Err(e) = self.refill(i) {
            self.failed = true;
            return Some(Err(e));
        }
        entry.map(Ok)
    }
}

/// The visible puts of one row at `snapshot_seq`, given the row's entries in ascending
/// internal-key order. Each returned entry is the cell's deciding put.
pub(crate) fn resolve_row(entries: &[Entry], snapshot_seq: u64) -> Vec<Entry> {
    let row_deleted = entries
        .iter()
        .filter(|e| e.key.kind == EntryKind::DeleteRow && e.key.seq <= snapshot_seq)
        .map(|e| e.key.seq)
        .max();
    let mut out = Vec::new();
    let mut last_column: Option<&Bytes> = None;
    for e in entries {
        if e.key.kind == EntryKind::DeleteRow || e.key.seq > snapshot_seq {
            continue;
        }
        if last_column == Some(&e.key.column) {
            continue; // An older version of a decided cell.
        }
        last_column = Some(&e.key.column);
        if e.key.kind == EntryKind::Put && row_deleted.is_none_or(|d| e.key.seq >= d) {
            out.push(e.clone());
        }
    }
    out
}

/// Groups a merged stream into rows and resolves each, skipping rows with no visible cell.
pub(crate) struct Rows {
    merge: Merge,
    pending: Option<Entry>,
    snapshot_seq: u64,
    reverse: bool,
    done: bool,
}

impl std::fmt::Debug for Rows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rows")
            .field("merge", &self.merge)
            .field("snapshot_seq", &self.snapshot_seq)
            .finish_non_exhaustive()
    }
}

impl Rows {
    /// Rows of the merged `sources` visible at `snapshot_seq`.
    pub(crate) fn new(sources: Vec<Source>, reverse: bool, snapshot_seq: u64) -> Rows {
        Rows {
            merge: Merge::new(sources, reverse),
            pending: None,
            snapshot_seq,
            reverse,
            done: false,
        }
    }

    /// The next row's key and every entry of it (ascending), without resolving it.
    pub(crate) fn next_raw(&mut self) -> Option<Result<(Bytes, Vec<Entry>)>> {
        if self.done {
            return None;
        }
        let first = match self.pending.take() {
            Some(e) => e,
            None => match self.merge.next()? {
                Ok(e) => e,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            },
        };
        let row = first.key.row.clone();
        let mut entries = vec![first];
        loop {
            match self.merge.next() {
                None => break,
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Some(Ok(e)) if e.key.row == row => entries.push(e),
                Some(Ok(e)) => {
                    self.pending = Some(e);
                    break;
                }
            }
        }
        if self.reverse {
            entries.reverse();
        }
        Some(Ok((row, entries)))
    }
}

impl Iterator for Rows {
    /// A row key and its visible cells (deciding puts), ascending by column.
    type Item = Result<(Bytes, Vec<Entry>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (row, entries) = match self.next_raw()? {
                Ok(r) => r,
                Err(e) => return Some(Err(e)),
            };
            let cells = resolve_row(&entries, self.snapshot_seq);
            if !cells.is_empty() {
                return Some(Ok((row, cells)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::InternalKey;

    fn e(row: &str, col: &str, seq: u64, kind: EntryKind, v: &str) -> Entry {
        Entry::new(
            InternalKey::new(
                Bytes::copy_from_slice(row.as_bytes()),
                Bytes::copy_from_slice(col.as_bytes()),
                seq,
                kind,
            ),
            0,
            Bytes::copy_from_slice(v.as_bytes()),
        )
    }

    fn source(mut v: Vec<Entry>, reverse: bool) -> Source {
        v.sort_by(|a, b| a.key.cmp(&b.key));
        if reverse {
            v.reverse();
        }
        Box::new(v.into_iter().map(Ok))
    }

    fn collect(reverse: bool, snap: u64) -> Vec<(String, Vec<(String, String)>)> {
        let newer = vec![
            e("a", "x", 5, EntryKind::DeleteRow, ""),
            e("a", "y", 6, EntryKind::Put, "ay6"),
            e("b", "x", 7, EntryKind::DeleteCell, ""),
        ];
        let older = vec![
            e("a", "x", 1, EntryKind::Put, "ax1"),
            e("b", "x", 2, EntryKind::Put, "bx2"),
            e("b", "y", 3, EntryKind::Put, "by3"),
            e("c", "z", 4, EntryKind::Put, "cz4"),
        ];
        Rows::new(
            vec![source(newer, reverse), source(older, reverse)],
            reverse,
            snap,
        )
        .map(|r| {
            let (row, cells) = r.expect("in-memory sources");
            (
                String::from_utf8_lossy(&row).into_owned(),
                cells
                    .iter()
                    .map(|c| {
                        (
                            String::from_utf8_lossy(&c.key.column).into_owned(),
                            String::from_utf8_lossy(&c.value).into_owned(),
                        )
                    })
                    .collect(),
            )
        })
        .collect()
    }

    fn s(row: &str, cells: &[(&str, &str)]) -> (String, Vec<(String, String)>) {
        (
            row.to_owned(),
            cells
                .iter()
                .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn merges_and_resolves_at_snapshots() {
        let latest = vec![
            s("a", &[("y", "ay6")]),
            s("b", &[("y", "by3")]),
            s("c", &[("z", "cz4")]),
        ];
        assert_eq!(collect(false, 100), latest);
        let mut rev = latest.clone();
        rev.reverse();
        assert_eq!(collect(true, 100), rev);
        assert_eq!(
            collect(false, 4),
            vec![
                s("a", &[("x", "ax1")]),
                s("b", &[("x", "bx2"), ("y", "by3")]),
                s("c", &[("z", "cz4")]),
            ]
        );
        assert_eq!(collect(false, 0), vec![]);
    }
}
