//! Reading a whole SST file to verify it, and rewriting what can be read of a damaged one
//! (for `crate::verify`).
//!
//! [`SstReader::open`] has already checked the footer and decoded the index, filter and
//! properties blocks. [`SstReader::check`] then reads every data block on its own, so one bad
//! block does not hide the state of the others, and compares what the blocks hold with what
//! the index, the filter and the properties say about them.

use bytes::Bytes;

use super::builder::SstBuilder;
use super::properties::Properties;
use super::reader::SstReader;
use crate::error::{Error, Result};
use crate::key::{Entry, InternalKey};

/// One thing wrong with an SST file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SstProblem {
    /// The byte offset in the file of the block concerned.
    pub(crate) offset: u64,
    /// The row it concerns: for a data block, the last row the index names for it.
    pub(crate) row: Option<Bytes>,
    /// What is wrong.
    pub(crate) detail: String,
    /// The entries of a data block cannot be read (they are lost). When false, the blocks are
    /// readable and only what the file says about them is wrong; rewriting the file fixes it.
    pub(crate) lost: bool,
}

/// The result of [`SstReader::check`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SstCheck {
    /// Data blocks read.
    pub(crate) blocks: u64,
    /// Entries in the blocks that were read whole.
    pub(crate) entries: u64,
    /// Everything found wrong, in file order.
    pub(crate) problems: Vec<SstProblem>,
}

impl SstCheck {
    fn problem(&mut self, offset: u64, row: Option<Bytes>, detail: String, lost: bool) {
        self.problems.push(SstProblem {
            offset,
            row,
            detail,
            lost,
        });
    }
}

/// What is wrong, without the file and offset a corruption error repeats.
fn detail(e: &Error) -> String {
    match e {
        Error::Corruption { detail, .. } => detail.clone(),
        other => other.to_string(),
    }
}

/// Reads every entry of data block `i`; fails if any of it cannot be read.
fn read_block(reader: &SstReader, i: usize) -> Result<Vec<Entry>> {
    let index = reader.index()?;
    let Some(entry) = index.get(i) else {
        return Ok(Vec::new());
    };
    let mut it = reader.block(entry.handle, false)?.iter();
    let mut out = Vec::new();
    while let Some(e) = it.next_entry()? {
        out.push(e);
    }
    Ok(out)
}

impl SstReader {
    /// Reads every data block, bypassing the cache, and checks: each block's checksum and
    /// decoding, key order within and across blocks, each block's last key against the index,
    /// that the row filter holds every row, and (when every block was read) the properties
    /// against the entries.
    pub(crate) fn check(&self) -> SstCheck {
        let mut check = SstCheck::default();
        let footer = self.footer();
        let index = match self.index() {
            Ok(index) => index,
            Err(e) => {
                check.problem(footer.index.offset, None, detail(&e), true);
                return check;
            }
        };
        let mut seen = Properties::empty(self.properties().creation_ms);
        let mut prev: Option<InternalKey> = None;
        let mut lost_any = false;
        let mut filter_misses = 0u64;
        let mut first_miss: Option<Bytes> = None;
        for (i, ie) in index.iter().enumerate() {
            check.blocks += 1;
            let offset = ie.handle.offset;
            let entries = match read_block(self, i) {
                Ok(entries) => entries,
                Err(e) => {
                    lost_any = true;
                    check.problem(offset, Some(ie.last_key.row.clone()), detail(&e), true);
                    continue;
                }
            };
            let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
                lost_any = true;
                check.problem(
                    offset,
                    Some(ie.last_key.row.clone()),
                    "empty data block".into(),
                    true,
                );
                continue;
            };
            if prev.as_ref().is_some_and(|p| p >= &first.key) {
                lost_any = true;
                check.problem(
                    offset,
                    Some(first.key.row.clone()),
                    "data block: its first key does not sort after the previous block's last key"
                        .into(),
                    true,
                );
            }
            if last.key != ie.last_key {
                check.problem(
                    offset,
                    Some(last.key.row.clone()),
                    "index block: the last key it names for this data block is not the block's"
                        .into(),
                    false,
                );
            }
            for e in &entries {
                let new_row = seen.entry_count == 0 || seen.last_row != e.key.row;
                seen.observe(e);
                if new_row && !self.may_contain_row(&e.key.row).unwrap_or(false) {
                    filter_misses += 1;
                    first_miss.get_or_insert_with(|| e.key.row.clone());
                }
            }
            check.entries += entries.len() as u64;
            prev = Some(last.key.clone());
        }
        if let Some(row) = first_miss {
            check.problem(
                footer.filter.offset,
                Some(row),
                format!(
                    "filter block or row range: {filter_misses} rows are in the data blocks \
                     but a lookup would skip the file for them"
                ),
                false,
            );
        }
        if !lost_any {
            let props = self.properties();
            let mut diffs = Vec::new();
            let mut cmp = |what: &str, stored: u64, found: u64| {
                if stored != found {
                    diffs.push(format!("{what} {stored}, blocks hold {found}"));
                }
            };
            cmp("entry count", props.entry_count, seen.entry_count);
            cmp(
                "tombstone count",
                props.tombstone_count,
                seen.tombstone_count,
            );
            cmp(
                "row tombstone count",
                props.row_tombstone_count,
                seen.row_tombstone_count,
            );
            cmp("smallest sequence number", props.min_seq, seen.min_seq);
            cmp("largest sequence number", props.max_seq, seen.max_seq);
            cmp("oldest write time", props.min_write_ms, seen.min_write_ms);
            cmp("newest write time", props.max_write_ms, seen.max_write_ms);
            if props.first_row != seen.first_row || props.last_row != seen.last_row {
                diffs.push("row range differs from the rows the blocks hold".into());
            }
            if !diffs.is_empty() {
                check.problem(
                    footer.props.offset,
                    None,
                    format!("properties block: {}", diffs.join("; ")),
                    false,
                );
            }
        }
        check
    }

    /// Adds every entry of the blocks that can be read whole to `builder`, in order, skipping a
    /// block that cannot be read and an entry that does not sort after the one before it.
    /// Returns the number of entries added.
    pub(crate) fn salvage_into(&self, builder: &mut SstBuilder) -> Result<u64> {
        let blocks = self.index()?.len();
        let mut last: Option<InternalKey> = None;
        let mut added = 0;
        for i in 0..blocks {
            let Ok(entries) = read_block(self, i) else {
                continue;
            };
            for e in entries {
                if last.as_ref().is_some_and(|l| l >= &e.key) {
                    continue;
                }
                builder.add(&e)?;
                last = Some(e.key);
                added += 1;
            }
        }
        Ok(added)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::fs::{FileSystem, MemFs};
    use crate::key::EntryKind;
    use crate::options::TableOptions;

    fn entries(n: u32) -> Vec<Entry> {
        (0..n)
            .map(|i| {
                Entry::new(
                    InternalKey::new(
                        format!("row{i:05}").into_bytes(),
                        b"c".to_vec(),
                        u64::from(i) + 1,
                        EntryKind::Put,
                    ),
                    1000 + u64::from(i),
                    vec![7u8; 100],
                )
            })
            .collect()
    }

    /// Writes `entries` to `name` in small blocks (so the file has many).
    fn write(fs: &MemFs, name: &str, entries: &[Entry]) -> Result<()> {
        let opts = TableOptions {
            block_bytes: 1024,
            ..TableOptions::default()
        };
        let mut b = SstBuilder::new(fs.create(name)?, name, &opts, 1);
        for e in entries {
            b.add(e)?;
        }
        b.finish()?;
        Ok(())
    }

    fn open(fs: &MemFs, name: &str) -> Result<Arc<SstReader>> {
        Ok(Arc::new(SstReader::open(fs.open(name)?, 1, None)?))
    }

    #[test]
    fn a_good_file_checks_clean() -> Result<()> {
        let fs = MemFs::new();
        write(&fs, "a.sst", &entries(200))?;
        let check = open(&fs, "a.sst")?.check();
        assert_eq!(check.entries, 200);
        assert!(check.blocks > 5, "{check:?}");
        assert_eq!(check.problems, vec![]);
        Ok(())
    }

    #[test]
    fn a_bad_block_is_reported_and_the_rest_is_salvaged() -> Result<()> {
        let fs = MemFs::new();
        let all = entries(200);
        write(&fs, "a.sst", &all)?;
        let reader = open(&fs, "a.sst")?;
        let index = reader.index()?;
        let second = index[1].handle;
        let mut bytes = fs.get("a.sst").unwrap_or_default();
        bytes[second.offset as usize + 3] ^= 0x40;
        fs.put("b.sst", bytes);

        let check = open(&fs, "b.sst")?.check();
        assert_eq!(check.problems.len(), 1, "{check:?}");
        let p = &check.problems[0];
        assert_eq!(p.offset, second.offset);
        assert_eq!(p.row.as_ref(), Some(&index[1].last_key.row));
        assert!(p.lost);
        assert!(p.detail.contains("checksum"), "{}", p.detail);

        let mut b = SstBuilder::new(fs.create("c.sst")?, "c.sst", &TableOptions::default(), 1);
        let added = open(&fs, "b.sst")?.salvage_into(&mut b)?;
        b.finish()?;
        let lost = all.len() as u64 - added;
        assert!(lost > 0 && lost < 30, "{lost}");
        let rewritten = open(&fs, "c.sst")?;
        let check = rewritten.check();
        assert_eq!(check.problems, vec![]);
        assert_eq!(check.entries, added);
        Ok(())
    }

    #[test]
    fn properties_that_disagree_with_the_blocks_are_found_and_a_rewrite_fixes_them() -> Result<()> {
        use super::super::footer::{BlockHandle, FOOTER_LEN, Footer};
        use crate::block::trailer;
        use crate::options::Compression;

        let fs = MemFs::new();
        write(&fs, "a.sst", &entries(50))?;
        let reader = open(&fs, "a.sst")?;
        let footer = reader.footer();
        let mut props = reader.properties().clone();
        props.entry_count += 1;
        props.max_seq = 1000;
        // The file with its properties block replaced (and the footer pointing at it).
        let bytes = fs.get("a.sst").unwrap_or_default();
        let mut out = bytes[..footer.props.offset as usize].to_vec();
        let len = trailer::encode(&props.encode(), Compression::None, &mut out)?;
        let footer = Footer {
            props: BlockHandle {
                offset: footer.props.offset,
                len: len as u64,
            },
            ..footer
        };
        out.extend_from_slice(&footer.encode());
        assert_eq!(
            out.len() - FOOTER_LEN,
            (footer.props.end().unwrap_or(0)) as usize
        );
        fs.put("b.sst", out);

        let check = open(&fs, "b.sst")?.check();
        assert_eq!(check.problems.len(), 1, "{check:?}");
        let p = &check.problems[0];
        assert_eq!(p.offset, footer.props.offset);
        assert!(!p.lost);
        assert!(
            p.detail.contains("entry count 51, blocks hold 50"),
            "{}",
            p.detail
        );
        assert!(
            p.detail.contains("largest sequence number 1000"),
            "{}",
            p.detail
        );

        let mut b = SstBuilder::new(fs.create("c.sst")?, "c.sst", &TableOptions::default(), 1);
        assert_eq!(open(&fs, "b.sst")?.salvage_into(&mut b)?, 50);
        b.finish()?;
        assert_eq!(open(&fs, "c.sst")?.check().problems, vec![]);
        Ok(())
    }
}
