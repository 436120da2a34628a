//! Acting on a [`VerifyReport`]: [`CheckView`] opens the database as [`repair`] would leave
//! it, in a scratch directory, and [`repair`] changes the directory itself.
//!
//! Both treat each file alike: a live SST that reads cleanly is kept (the view hard-links it),
//! one with unreadable blocks is rewritten under the same name with the entries of its
//! readable blocks (the same id keeps its place among the level-0 files, which reads consult
//! newest id first), and one that does not open or is missing is dropped from the manifest.
//! A damaged WAL segment is rewritten with its readable records, and a missing one in the
//! middle of the log is created empty.

use std::path::{Path, PathBuf};

use crate::db::Db;
use crate::error::{Error, Result};
use crate::file_name::{MANIFEST_NAME, segment_file_name, sst_file_name};
use crate::fs::{FileSystem, LocalFs};
use crate::manifest::FileMeta;
use crate::options::{DbOptions, TableOptions};
use crate::sst::{SstBuilder, SstReader};

use super::{ManifestState, SegmentAction, SstAction, VerifyReport, wal};

/// The scratch directory of a [`CheckView`], inside the database directory (so hard links
/// work). Removed when the view is dropped, and at the next view's start if a crash left it.
const VIEW_DIR: &str = ".fsck-view";
/// Suffix of a rewritten SST while it is written, before it replaces the original.
const REWRITE_SUFFIX: &str = ".rewrite";

/// The database as [`repair`] would leave it, opened in a scratch directory inside the
/// database directory without changing any file of the database. Live files that read
/// cleanly are hard-linked (copied where links fail), damaged ones rewritten, and WAL segments
/// copied. Compactions are off, so the view writes nothing more; the scratch directory is
/// removed when the view is dropped.
#[derive(Debug)]
pub struct CheckView {
    // Declared first, so it closes before the directory goes.
    db: Db,
    _scratch: Scratch,
}

#[derive(Debug)]
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            tracing::warn!(dir = %self.0.display(), error = %e, "could not remove the scratch directory");
        }
    }
}

impl CheckView {
    /// Opens the view of `report`'s directory with `opts` (their compaction settings are
    /// overridden). Fails if the manifest does not decode.
    pub fn open(report: &VerifyReport, opts: DbOptions) -> Result<CheckView> {
        let manifest = match &report.manifest {
            ManifestState::Damaged => {
                return Err(Error::corruption(
                    MANIFEST_NAME,
                    0,
                    "the manifest does not decode, so the database cannot be opened",
                ));
            }
            ManifestState::Absent => None,
            ManifestState::Read(m) => Some(m.clone()),
        };
        let path = report.dir.join(VIEW_DIR);
        if path.exists() {
            std::fs::remove_dir_all(&path)
                .map_err(|e| Error::io(format!("removing {}", path.display()), e))?;
        }
        let scratch = Scratch(path);
        let src = LocalFs::new(&report.dir)?;
        let dst = LocalFs::new(&scratch.0)?;
        if let Some(mut m) = manifest {
            let mut files = Vec::new();
            for (f, action) in &report.ssts {
                let name = sst_file_name(f.id);
                match action {
                    SstAction::Keep => {
                        link_or_copy(&report.dir.join(&name), &scratch.0.join(&name))?;
                        files.push(f.clone());
                    }
                    SstAction::Rewrite => {
                        if let Some(bytes) = salvage(&src, f.id, &dst, &name)? {
                            files.push(FileMeta { bytes, ..f.clone() });
                        }
                    }
                    SstAction::Move | SstAction::Drop => {}
                }
            }
            m.files = files;
            m.store(&dst)?;
        }
        for (number, action) in &report.segments {
            let name = segment_file_name(*number);
            let (from, to) = (report.dir.join(&name), scratch.0.join(&name));
            let bytes = match action {
                SegmentAction::Keep => {
                    std::fs::copy(&from, &to)
                        .map_err(|e| Error::io(format!("copying {}", from.display()), e))?;
                    continue;
                }
                SegmentAction::Rewrite => rewritten_segment(&from, *number),
                SegmentAction::Create => wal::empty(*number),
            };
            std::fs::write(&to, bytes)
                .map_err(|e| Error::io(format!("writing {}", to.display()), e))?;
        }
        let opts = DbOptions {
            l0_compaction_trigger: usize::MAX,
            l0_stall_files: usize::MAX,
            level_base_bytes: u64::MAX,
            ..opts
        };
        let db = Db::open(&scratch.0, opts)?;
        Ok(CheckView {
            db,
            _scratch: scratch,
        })
    }

    /// The database.
    pub fn db(&self) -> &Db {
        &self.db
    }
}

/// Hard-links `from` to `to`, or copies it where links are not possible.
fn link_or_copy(from: &Path, to: &Path) -> Result<()> {
    if std::fs::hard_link(from, to).is_ok() {
        return Ok(());
    }
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| Error::io(format!("copying {}", from.display()), e))
}

/// Writes the entries of the readable blocks of SST `id` in `src` to `name` in `dst`. Returns
/// the new file's size, or `None` (and no file) if no block could be read.
fn salvage(src: &LocalFs, id: u64, dst: &LocalFs, name: &str) -> Result<Option<u64>> {
    let reader = SstReader::open(src.open(&sst_file_name(id))?, id, None)?;
    let creation_ms = reader.properties().creation_ms;
    let mut builder = SstBuilder::new(
        dst.create(name)?,
        name,
        &TableOptions::default(),
        creation_ms,
    );
    let added = reader.salvage_into(&mut builder)?;
    let info = builder.finish()?;
    if added == 0 {
        dst.delete(name)?;
        return Ok(None);
    }
    Ok(Some(info.file_bytes))
}

/// The readable records of the segment at `path` under a fresh header (just the header if
/// the file cannot be read).
fn rewritten_segment(path: &Path, number: u64) -> Vec<u8> {
    match std::fs::read(path) {
        Ok(file) => {
            let scan = wal::scan(&file, number);
            wal::rewrite(&file, number, &scan)
        }
        Err(_) => wal::empty(number),
    }
}

/// One change [`repair`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repaired {
    /// The file's name in the database directory.
    pub file: String,
    /// What was done.
    pub action: String,
    /// Where the damaged original went, if it was moved or copied.
    pub saved_to: Option<PathBuf>,
    /// Why: the findings about the file.
    pub reason: String,
}

/// Acts on `report` in its directory, saving what cannot be read under `lost_found` (created
/// if missing), so that the database opens and reads cleanly: see [`super::Remedy`]. Findings
/// with no remedy are left. The caller must keep every writer off the directory.
pub fn repair(report: &VerifyReport, lost_found: &Path) -> Result<Vec<Repaired>> {
    std::fs::create_dir_all(lost_found)
        .map_err(|e| Error::io(format!("creating {}", lost_found.display()), e))?;
    let dir = &report.dir;
    let fs = LocalFs::new(dir)?;
    let reason = |file: &str| {
        let details: Vec<&str> = report
            .findings
            .iter()
            .filter(|f| f.file == file)
            .map(|f| f.detail.as_str())
            .collect();
        match details.as_slice() {
            [] => String::new(),
            [one] => (*one).to_owned(),
            [first, rest @ ..] => format!("{first} (and {} more)", rest.len()),
        }
    };
    let mut done = Vec::new();
    let mut note = |file: &str, action: String, saved: bool| {
        done.push(Repaired {
            file: file.to_owned(),
            action,
            saved_to: saved.then(|| lost_found.join(file)),
            reason: reason(file),
        });
    };
    if let ManifestState::Read(m) = &report.manifest {
        let mut next = m.clone();
        next.files.clear();
        let mut changed = false;
        let mut to_move = Vec::new();
        let mut rewritten = Vec::new();
        for (f, action) in &report.ssts {
            let name = sst_file_name(f.id);
            match action {
                SstAction::Keep => next.files.push(f.clone()),
                SstAction::Drop => {
                    changed = true;
                    note(&name, "dropped from the manifest".into(), false);
                }
                SstAction::Move => {
                    changed = true;
                    to_move.push(name.clone());
                    note(
                        &name,
                        "moved to lost+found and dropped from the manifest".into(),
                        true,
                    );
                }
                SstAction::Rewrite => {
                    changed = true;
                    let tmp = format!("{name}{REWRITE_SUFFIX}");
                    fs.delete(&tmp)?;
                    to_move.push(name.clone());
                    match salvage(&fs, f.id, &fs, &tmp)? {
                        Some(bytes) => {
                            next.files.push(FileMeta { bytes, ..f.clone() });
                            rewritten.push((tmp, name.clone()));
                            note(
                                &name,
                                "rewritten with the entries of its readable blocks; the original \
                                 moved to lost+found"
                                    .into(),
                                true,
                            );
                        }
                        None => note(
                            &name,
                            "no block could be read: moved to lost+found and dropped from the \
                             manifest"
                                .into(),
                            true,
                        ),
                    }
                }
            }
        }
        for name in &to_move {
            move_file(&dir.join(name), &lost_found.join(name))?;
        }
        for (tmp, name) in &rewritten {
            fs.rename(tmp, name)?;
        }
        fs.sync_dir("the repaired SSTs")?;
        if changed {
            next.store(&fs)?;
        }
    }
    // Files no manifest names (every SST file, when there is no manifest yet).
    for name in &report.orphans {
        move_file(&dir.join(name), &lost_found.join(name))?;
        note(name, "moved to lost+found".into(), true);
    }
    fs.sync_dir("the moved files")?;
    for (number, action) in &report.segments {
        let name = segment_file_name(*number);
        let path = dir.join(&name);
        let bytes = match action {
            SegmentAction::Keep => continue,
            SegmentAction::Rewrite => {
                let saved = std::fs::copy(&path, lost_found.join(&name)).is_ok();
                note(
                    &name,
                    "rewritten with its readable records; the original copied to lost+found".into(),
                    saved,
                );
                rewritten_segment(&path, *number)
            }
            SegmentAction::Create => {
                note(&name, "created empty".into(), false);
                wal::empty(*number)
            }
        };
        fs.write_atomic(&name, &bytes)?;
    }
    sync_dir(lost_found)?;
    Ok(done)
}

/// Moves `from` to `to` (in the same file system).
fn move_file(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to)
        .map_err(|e| Error::io(format!("moving {} to {}", from.display(), to.display()), e))
}

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format!("syncing directory {}", dir.display()), e))
}
