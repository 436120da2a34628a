//! Verification of a database in an object store (`strata fsck --store`): the manifest
//! version chain and the SST objects, read without taking the prefix over.

use std::collections::BTreeSet;
use std::path::Path;

use super::{ManifestState, Remedy, Severity, VerifyCounts, VerifyReport, files};
use crate::error::Result;
use crate::file_name::parse_sst_file_name;
use crate::fs::LocalFs;
use crate::fs::object::{ObjectFs, Role};
use crate::options::ObjectStorage;

/// Reads the database in `storage` and reports what is wrong; changes nothing in the bucket
/// and claims no epoch, so a writer may keep running on it. `scratch` is an empty local
/// directory for the cache of the SST objects read (`storage.cache_dir` is used as given).
///
/// - Every manifest version object decodes (magic, format, checksum, its number), and the
///   epochs never go back from one version to the next. A damaged version is an error; the
///   newest one must read, since a writer or a replica opening the prefix reads it.
/// - Every SST the newest version names exists, and reads cleanly block by block, as
///   [`super::verify`] checks a local file; levels below 0 do not overlap.
/// - An SST object no version names is a warning: a flush or compaction that crashed (or is
///   uploading now) left it, and a writer's open deletes it once it is older than the grace
///   period. No finding on a bucket has a remedy: `strata fsck --fix` repairs local
///   directories only.
///
/// Fails only if the bucket cannot be listed.
pub fn verify_object_store(storage: &ObjectStorage, scratch: &Path) -> Result<VerifyReport> {
    let fs = ObjectFs::new(LocalFs::new(scratch)?, storage.clone(), Role::Follower)?;
    let mut report = VerifyReport {
        dir: scratch.to_path_buf(),
        counts: VerifyCounts::default(),
        findings: Vec::new(),
        manifest: ManifestState::Absent,
        ssts: Vec::new(),
        orphans: Vec::new(),
        segments: Default::default(),
    };
    let versions = fs.versions()?;
    let mut named = BTreeSet::new();
    let mut last_epoch = 0;
    for (i, &(version, _)) in versions.iter().enumerate() {
        let newest = i + 1 == versions.len();
        let name = fs.version_name(version);
        match fs.read_version(version) {
            Ok(Some(record)) => {
                if record.epoch < last_epoch {
                    report.add(
                        Severity::Error,
                        &name,
                        Some(16),
                        None,
                        format!(
                            "written by epoch {}, after a version of epoch {last_epoch}",
                            record.epoch
                        ),
                        Remedy::None,
                    );
                }
                last_epoch = last_epoch.max(record.epoch);
                named.extend(record.manifest.files.iter().map(|f| f.id));
                if newest {
                    report.manifest = ManifestState::Read(record.manifest);
                }
            }
            // Deleted since the list: a writer superseded it.
            Ok(None) => {}
            Err(e) => {
                report.add_error(&name, &e, Remedy::None);
                if newest {
                    report.manifest = ManifestState::Damaged;
                }
            }
        }
    }
    let objects = fs.sst_objects()?;
    let names: BTreeSet<String> = objects.iter().map(|(n, _)| n.clone()).collect();
    if let ManifestState::Read(m) = &report.manifest {
        let m = m.clone();
        files::check_manifest_and_files(&fs, &names, &m, &mut report);
    }
    for (name, bytes) in &objects {
        let Some(id) = parse_sst_file_name(name) else {
            continue;
        };
        if !named.contains(&id) {
            report.add(
                Severity::Warning,
                &fs.sst_object_name(name),
                None,
                None,
                format!(
                    "no manifest version names this object ({bytes} bytes): a crashed or \
                     running flush or compaction left it, and a writer's open deletes it once \
                     it is older than the grace period"
                ),
                Remedy::None,
            );
        }
    }
    // Findings name objects by their key in the bucket.
    for f in &mut report.findings {
        if parse_sst_file_name(&f.file).is_some() {
            f.file = fs.sst_object_name(&f.file);
        }
    }
    Ok(report)
}
