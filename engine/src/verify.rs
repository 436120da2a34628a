//! Offline verification and repair of a database directory (`strata fsck`).
//!
//! [`verify`] reads every file the engine owns and changes none of them:
//!
//! - the manifest: it decodes, its file ids are unique and below its next id, and every file it
//!   names belongs to a known table and exists;
//! - every SST file the manifest names: footer, index, filter and properties blocks on open,
//!   then every data block (checksum, decoding, key order within and across blocks), each
//!   block's last key against the index, every row against the row filter, the properties
//!   against the entries, and that the files of a level below 0 do not overlap;
//! - every WAL segment that recovery would replay: header, every record's checksum and
//!   payload, and that the numbers are contiguous.
//!
//! A [`Finding`] is an error when the database cannot be opened, reads would fail or data has
//! been lost, and a warning when the state is one a crash leaves behind and the next open
//! cleans up:
//!
//! 1. A torn or corrupt end of the *last* WAL segment is a warning: recovery drops it, and
//!    only writes never acknowledged as durable can be in it. A damaged record with good
//!    records after it (see `verify/wal.rs`), a record in an earlier segment, or a record that
//!    passes its checksum but does not decode, is an error.
//! 2. A damaged header of the last segment with nothing readable after it is a warning (the
//!    crash hit its creation).
//! 3. An SST file the manifest does not name is a warning: an interrupted flush or compaction
//!    left it, and the next open deletes it.
//! 4. An SST whose size differs from the manifest's record of it, but which reads cleanly, is
//!    a warning.
//!
//! [`CheckView`] opens the database as [`repair`] would leave it, without changing the
//! directory, so that checks of the data itself can run over everything that is readable.
//! [`repair`] moves what cannot be read into a folder the caller names (`lost+found`), and
//! leaves a directory that opens: see [`Remedy`] for what it does about each finding.

mod files;
mod object;
mod view;
mod wal;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::file_name::{MANIFEST_NAME, parse_sst_file_name, sst_file_name};
use crate::fs::{FileSystem, LocalFs};
use crate::manifest::{FileMeta, Manifest};

pub use object::verify_object_store;
pub use view::{CheckView, Repaired, repair};

/// The most missing WAL segments [`repair`] creates empty to close a gap. A wider gap is
/// more likely a stray file name than lost segments.
const MAX_GAP_FILL: u64 = 1024;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// The database cannot be opened, a read would fail, or data has been lost.
    Error,
    /// A state a crash leaves behind, which the next open cleans up.
    Warning,
}

/// What [`repair`] does about a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Remedy {
    /// Nothing: the fix would be a guess. The finding stays.
    None,
    /// The file is moved to the lost+found folder, and dropped from the manifest if it names
    /// it.
    MoveFile,
    /// The readable entries of the file are written to a new file that replaces it in the
    /// manifest; the old file is moved to the lost+found folder.
    RewriteFile,
    /// The manifest stops naming the (missing) file.
    DropFromManifest,
    /// The segment is copied to the lost+found folder and rewritten with only its readable
    /// records, so recovery replays those and the segments after it.
    RewriteSegment,
    /// The missing segment is created empty, so recovery replays the segments after it.
    CreateSegment,
}

impl Remedy {
    /// What the remedy does, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Remedy::None => "left as is",
            Remedy::MoveFile => "move the file to lost+found",
            Remedy::RewriteFile => "rewrite the readable entries, move the file to lost+found",
            Remedy::DropFromManifest => "drop the file from the manifest",
            Remedy::RewriteSegment => {
                "rewrite the readable records, copy the segment to lost+found"
            }
            Remedy::CreateSegment => "create the segment empty",
        }
    }
}

/// One thing found wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// How bad it is.
    pub severity: Severity,
    /// The file's name in the database directory.
    pub file: String,
    /// Where in the file, when known.
    pub offset: Option<u64>,
    /// The row concerned, when known: for a data block, the last row the index names for it.
    pub row: Option<Vec<u8>>,
    /// What is wrong.
    pub detail: String,
    /// What [`repair`] does about it.
    pub remedy: Remedy,
}

/// What [`verify`] read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerifyCounts {
    /// SST files opened.
    pub sst_files: u64,
    /// Their bytes.
    pub sst_bytes: u64,
    /// Data blocks read.
    pub blocks: u64,
    /// Entries in the data blocks read whole.
    pub entries: u64,
    /// WAL segments read.
    pub wal_segments: u64,
    /// WAL records that passed their checksum and decoded.
    pub wal_records: u64,
}

/// A live SST file, as the manifest records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SstFileInfo {
    /// The file's name in the database directory.
    pub name: String,
    /// The name of the table it belongs to (empty if the manifest does not know the table).
    pub table: String,
    /// Its level.
    pub level: u8,
    /// Its size as the manifest records it.
    pub bytes: u64,
}

/// The manifest as [`verify`] found it.
#[derive(Debug, Clone)]
enum ManifestState {
    /// There is none: a database that has never flushed.
    Absent,
    /// It does not decode.
    Damaged,
    Read(Manifest),
}

/// What [`repair`] does with a live SST file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SstAction {
    Keep,
    Rewrite,
    Move,
    Drop,
}

/// What [`repair`] does with a WAL segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SegmentAction {
    Keep,
    Rewrite,
    Create,
}

/// Everything [`verify`] found, and what [`repair`] and [`CheckView`] need to act on it.
#[derive(Debug, Clone)]
pub struct VerifyReport {
    dir: PathBuf,
    /// What was read.
    pub counts: VerifyCounts,
    /// What was found wrong, in the order checked.
    pub findings: Vec<Finding>,
    manifest: ManifestState,
    /// Each live file and what to do with it.
    ssts: Vec<(FileMeta, SstAction)>,
    /// SST files the manifest does not name.
    orphans: Vec<String>,
    /// WAL segments recovery would replay, by number, and those to create.
    segments: BTreeMap<u64, SegmentAction>,
}

impl VerifyReport {
    /// The database directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The number of errors.
    pub fn errors(&self) -> usize {
        self.count(Severity::Error)
    }

    /// The number of warnings.
    pub fn warnings(&self) -> usize {
        self.count(Severity::Warning)
    }

    fn count(&self, severity: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }

    /// The findings [`repair`] acts on.
    pub fn repairable(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.remedy != Remedy::None)
            .count()
    }

    /// False if the manifest does not decode: then nothing can be opened.
    pub fn manifest_readable(&self) -> bool {
        !matches!(self.manifest, ManifestState::Damaged)
    }

    /// The live SST files, as the manifest records them.
    pub fn sst_files(&self) -> Vec<SstFileInfo> {
        let tables = match &self.manifest {
            ManifestState::Read(m) => m.tables.clone(),
            _ => BTreeMap::new(),
        };
        self.ssts
            .iter()
            .map(|(f, _)| SstFileInfo {
                name: sst_file_name(f.id),
                table: tables.get(&f.table).cloned().unwrap_or_default(),
                level: f.level,
                bytes: f.bytes,
            })
            .collect()
    }

    fn add(
        &mut self,
        severity: Severity,
        file: &str,
        offset: Option<u64>,
        row: Option<&[u8]>,
        detail: impl Into<String>,
        remedy: Remedy,
    ) {
        self.findings.push(Finding {
            severity,
            file: file.to_owned(),
            offset,
            row: row.map(<[u8]>::to_vec),
            detail: detail.into(),
            remedy,
        });
    }

    /// Records an engine error about `file`, taking the offset out of a corruption error.
    fn add_error(&mut self, file: &str, e: &Error, remedy: Remedy) {
        let (offset, detail) = match e {
            Error::Corruption { offset, detail, .. } => (Some(*offset), detail.clone()),
            other => (None, other.to_string()),
        };
        self.add(Severity::Error, file, offset, None, detail, remedy);
    }
}

/// Reads every file of the database in `dir` and reports what is wrong; changes nothing. The
/// caller must keep every writer off the directory meanwhile. Fails only if `dir` cannot be
/// listed or is not a database directory.
pub fn verify(dir: impl AsRef<Path>) -> Result<VerifyReport> {
    let dir = dir.as_ref();
    if !dir.is_dir() {
        return Err(Error::InvalidArgument(format!(
            "no database directory at {}",
            dir.display()
        )));
    }
    let fs = LocalFs::new(dir)?;
    let names: BTreeSet<String> = fs.list()?.into_iter().collect();
    let mut report = VerifyReport {
        dir: dir.to_path_buf(),
        counts: VerifyCounts::default(),
        findings: Vec::new(),
        manifest: ManifestState::Absent,
        ssts: Vec::new(),
        orphans: Vec::new(),
        segments: BTreeMap::new(),
    };
    if names.contains(MANIFEST_NAME) {
        report.manifest = match Manifest::load(&fs) {
            Ok(Some(m)) => ManifestState::Read(m),
            Ok(None) => ManifestState::Absent,
            Err(e) => {
                report.add_error(MANIFEST_NAME, &e, Remedy::None);
                ManifestState::Damaged
            }
        };
    }
    let manifest = match &report.manifest {
        ManifestState::Read(m) => Some(m.clone()),
        _ => None,
    };
    let live: BTreeSet<u64> = manifest
        .iter()
        .flat_map(|m| m.files.iter().map(|f| f.id))
        .collect();
    if let Some(m) = &manifest {
        files::check_manifest_and_files(&fs, &names, m, &mut report);
    }
    let damaged = matches!(report.manifest, ManifestState::Damaged);
    for name in &names {
        let Some(id) = parse_sst_file_name(name) else {
            continue;
        };
        if damaged {
            // Without a manifest nothing can say which files are live: each is checked on
            // its own, and left alone.
            files::check_file(&fs, name, id, Remedy::None, &mut report);
        } else if !live.contains(&id) {
            report.add(
                Severity::Warning,
                name,
                None,
                None,
                "the manifest does not name this file: an interrupted flush or compaction left \
                 it, and the next open deletes it",
                Remedy::MoveFile,
            );
            report.orphans.push(name.clone());
        }
    }
    let flushed = manifest.as_ref().map_or(0, |m| m.flushed_segment);
    wal::check_wal(dir, flushed, !damaged, &mut report)?;
    Ok(report)
}

#[cfg(test)]
mod tests;
