//! A read-only follower of an object-store prefix (`Db::open_read_only`) follows the writer by
//! re-reading the newest manifest version and swapping in its file set.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::error::Result;
use crate::file_name::sst_file_name;
use crate::inner::Inner;
use crate::sst::SstReader;
use crate::state::{Files, State};
use crate::table::Table;

impl Inner {
    /// Swaps in the files of the newest manifest version if it is newer than the follower's;
    /// true if it did. Files it names that are already open are kept, new ones are opened
    /// (which fetches them through the disk cache), and the rest are dropped with their cached
    /// blocks and their copies on disk.
    /// The ids of the tables whose files changed (a file added or dropped), or `None` when
    /// the manifest had not moved.
    pub(crate) fn refresh(&self) -> Result<Option<BTreeSet<u32>>> {
        if !self.follower {
            return Ok(None);
        }
        let Some(next) = self.fs.refresh_manifest()? else {
            return Ok(None);
        };
        let applied = self.apply_manifest(next);
        self.fs.manifest_applied(applied.is_ok());
        applied.map(Some)
    }

    /// Swaps in the file set of `next`, a newer manifest version; answers the ids of the
    /// tables whose files changed. On an error (a new file that could not be fetched) nothing
    /// changed.
    fn apply_manifest(&self, next: crate::manifest::Manifest) -> Result<BTreeSet<u32>> {
        let mut manifest = self.manifest.lock();
        let current = self.state.read().clone();
        let open: HashMap<u64, (u32, Arc<SstReader>)> = current
            .files
            .tables
            .iter()
            .flat_map(|(table, levels)| {
                levels
                    .iter()
                    .flatten()
                    .map(move |r| (r.file_id(), (*table, r.clone())))
            })
            .collect();
        let mut changed: BTreeSet<u32> = next
            .files
            .iter()
            .filter(|f| !open.contains_key(&f.id))
            .map(|f| f.table)
            .collect();
        changed.extend(
            open.iter()
                .filter(|(id, _)| !next.files.iter().any(|f| f.id == **id))
                .map(|(_, (table, _))| *table),
        );
        let new: Vec<(String, u64)> = next
            .files
            .iter()
            .filter(|f| !open.contains_key(&f.id))
            .map(|f| (sst_file_name(f.id), f.bytes))
            .collect();
        self.fs.prefetch(&new);
        let mut files = Files::default();
        for f in &next.files {
            let reader = match open.get(&f.id) {
                Some((_, r)) => r.clone(),
                None => Arc::new(SstReader::open(
                    self.fs.open(&sst_file_name(f.id))?,
                    f.id,
                    Some(self.cache.clone()),
                )?),
            };
            files.add(f.table, f.level, reader);
        }
        files.sort();
        {
            let mut tables = self.tables.write();
            for (id, name) in &next.tables {
                tables
                    .entry(name.clone())
                    .or_insert_with(|| Table::new(*id, name.as_str().into()));
            }
        }
        // The files' entries are numbered up to the writer's last flushed sequence number.
        self.last_seq.fetch_max(next.last_seq, Ordering::AcqRel);
        self.visible_seq.fetch_max(next.last_seq, Ordering::AcqRel);
        {
            let mut state = self.state.write();
            *state = Arc::new(State {
                active: state.active.clone(),
                frozen: state.frozen.clone(),
                files: Arc::new(files),
            });
        }
        for id in open
            .keys()
            .filter(|id| !next.files.iter().any(|f| f.id == **id))
        {
            self.cache.evict_file(*id);
            self.fs.forget(&sst_file_name(*id));
        }
        *manifest = next;
        Ok(changed)
    }
}
