//! Checks of the manifest and the SST files it names (see `crate::verify`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bytes::Bytes;

use super::{Remedy, Severity, SstAction, VerifyReport};
use crate::compaction::LEVELS;
use crate::file_name::{MANIFEST_NAME, sst_file_name};
use crate::fs::FileSystem;
use crate::manifest::{FileMeta, Manifest};
use crate::sst::SstReader;

/// The manifest's own consistency.
fn check_manifest(m: &Manifest, report: &mut VerifyReport) {
    let mut seen = BTreeSet::new();
    for f in &m.files {
        let name = sst_file_name(f.id);
        let mut problem = |detail: String| {
            report.add(
                Severity::Error,
                MANIFEST_NAME,
                None,
                None,
                detail,
                Remedy::None,
            );
        };
        if !seen.insert(f.id) {
            problem(format!("names file {name} twice"));
        }
        if f.id >= m.next_file_id {
            problem(format!(
                "names file {name}, at or past its next file id {}",
                m.next_file_id
            ));
        }
        if !m.tables.contains_key(&f.table) {
            problem(format!("file {name} belongs to unknown table {}", f.table));
        }
        if usize::from(f.level) >= LEVELS {
            problem(format!(
                "file {name} is on level {}, past the last",
                f.level
            ));
        }
    }
}

/// Checks the manifest `m`, every file it names (`names` are the files there are), and its
/// levels, recording what repair does with each file.
pub(super) fn check_manifest_and_files(
    fs: &dyn FileSystem,
    names: &BTreeSet<String>,
    m: &Manifest,
    report: &mut VerifyReport,
) {
    check_manifest(m, report);
    let mut ranges = Vec::new();
    for f in &m.files {
        let (action, range) = check_live_file(fs, names, f, report);
        report.ssts.push((f.clone(), action));
        if let Some((first, last)) = range {
            ranges.push((f, first, last));
        }
    }
    check_levels(m, &ranges, report);
}

/// Opens and checks one SST file; `remedy` is what repairing a file that cannot be read does.
/// Returns the reader if the file opened, and whether every block was read.
pub(super) fn check_file(
    fs: &dyn FileSystem,
    name: &str,
    id: u64,
    remedy: Remedy,
    report: &mut VerifyReport,
) -> Option<(Arc<SstReader>, bool)> {
    let reader = match fs
        .open(name)
        .and_then(|file| SstReader::open(file, id, None))
    {
        Ok(r) => Arc::new(r),
        Err(e) => {
            report.add_error(name, &e, remedy);
            return None;
        }
    };
    report.counts.sst_files += 1;
    report.counts.sst_bytes += reader.file_bytes();
    let check = reader.check();
    report.counts.blocks += check.blocks;
    report.counts.entries += check.entries;
    let rewrite = if remedy == Remedy::None {
        Remedy::None
    } else {
        Remedy::RewriteFile
    };
    let clean = check.problems.is_empty();
    for p in check.problems {
        report.add(
            Severity::Error,
            name,
            Some(p.offset),
            p.row.as_deref(),
            p.detail,
            rewrite,
        );
    }
    Some((reader, clean))
}

/// Checks a file the manifest names; returns what repair does with it, and the file's row
/// range if it reads cleanly and is not empty.
fn check_live_file(
    fs: &dyn FileSystem,
    names: &BTreeSet<String>,
    f: &FileMeta,
    report: &mut VerifyReport,
) -> (SstAction, Option<(Bytes, Bytes)>) {
    let name = sst_file_name(f.id);
    if !names.contains(&name) {
        report.add(
            Severity::Error,
            &name,
            None,
            None,
            "the manifest names this file, but it does not exist",
            Remedy::DropFromManifest,
        );
        return (SstAction::Drop, None);
    }
    let Some((reader, clean)) = check_file(fs, &name, f.id, Remedy::MoveFile, report) else {
        return (SstAction::Move, None);
    };
    if !clean {
        return (SstAction::Rewrite, None);
    }
    if reader.file_bytes() != f.bytes {
        report.add(
            Severity::Warning,
            &name,
            None,
            None,
            format!(
                "the file has {} bytes, the manifest says {}",
                reader.file_bytes(),
                f.bytes
            ),
            Remedy::None,
        );
    }
    let p = reader.properties();
    let range = (p.entry_count > 0).then(|| (p.first_row.clone(), p.last_row.clone()));
    (SstAction::Keep, range)
}

/// The files of one level below 0 of one table must cover disjoint row ranges: a read looks
/// up one file per level. `files` are the clean files with their row ranges.
fn check_levels(m: &Manifest, files: &[(&FileMeta, Bytes, Bytes)], report: &mut VerifyReport) {
    // (table, level) -> (first row, last row, file id) of its files.
    type Ranges<'a> = BTreeMap<(u32, u8), Vec<(&'a Bytes, &'a Bytes, u64)>>;
    let mut levels: Ranges<'_> = BTreeMap::new();
    for (f, first, last) in files {
        if f.level > 0 {
            levels
                .entry((f.table, f.level))
                .or_default()
                .push((first, last, f.id));
        }
    }
    for ((table, level), mut files) in levels {
        files.sort();
        for pair in files.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if b.0 <= a.1 {
                let table = m.tables.get(&table).cloned().unwrap_or_default();
                report.add(
                    Severity::Error,
                    &sst_file_name(b.2),
                    None,
                    Some(b.0),
                    format!(
                        "its rows overlap those of {} on level {level} of table {table:?}",
                        sst_file_name(a.2)
                    ),
                    Remedy::None,
                );
            }
        }
    }
}
