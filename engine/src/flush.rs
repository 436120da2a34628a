//! Flushes: a frozen memtable becomes one level-0 SST file per table, recorded in the
//! manifest with the WAL position it covers, after which the covered WAL segments are
//! deleted. A table with a flush fold has its rows rewritten on the way (`fold.rs`).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::error::Result;
use crate::file_name::sst_file_name;
use crate::fs::AtomicWriteError;
use crate::inner::Inner;
use crate::key::Entry;
use crate::manifest::{FileMeta, Manifest};
use crate::sst::{SstBuilder, SstReader};
use crate::state::State;

/// Where a flush hands its entries, one at a time.
type EntrySink<'a> = dyn FnMut(&Entry) -> Result<()> + 'a;

impl Inner {
    /// Writes the entries `feed` passes to its callback (ascending, unique keys) to the new
    /// SST file `id`. Returns `None` (and leaves no file) when there is no entry.
    fn write_sst(
        &self,
        table: u32,
        level: u8,
        id: u64,
        feed: &mut dyn FnMut(&mut EntrySink<'_>) -> Result<()>,
    ) -> Result<Option<(FileMeta, Arc<SstReader>)>> {
        let name = sst_file_name(id);
        let mut builder: Option<SstBuilder> = None;
        let result = (|| -> Result<Option<(FileMeta, Arc<SstReader>)>> {
            feed(&mut |entry| {
                let b = match &mut builder {
                    Some(b) => b,
                    None => builder.insert(SstBuilder::new(
                        self.fs.create(&name)?,
                        &name,
                        &self.table_options(table),
                        self.opts.clock.now_ms(),
                    )),
                };
                b.add(entry)
            })?;
            let Some(b) = builder.take() else {
                return Ok(None);
            };
            self.finish_sst(table, level, id, &name, b).map(Some)
        })();
        if result.is_err() {
            drop(builder);
            self.discard(std::iter::once(id), false);
        }
        result
    }

    /// Flushes the oldest frozen memtable; false if there was none.
    pub(crate) fn flush_oldest(&self) -> Result<bool> {
        self.flush_oldest_locked(&mut self.manifest.lock())
    }

    /// [`Inner::flush_oldest`], with the manifest's lock held.
    pub(crate) fn flush_oldest_locked(&self, manifest: &mut Manifest) -> Result<bool> {
        let Some(frozen) = self.state.read().frozen.first().cloned() else {
            return Ok(false);
        };
        // A fenced writer uploads nothing more.
        self.fs.check_writable()?;
        let start = Instant::now();
        let mut written = Vec::new();
        let mut next = manifest.clone();
        let result = (|| -> Result<(), AtomicWriteError> {
            let before = |error| AtomicWriteError {
                error,
                maybe_replaced: false,
            };
            for table in frozen.mem.table_ids() {
                let id = next.next_file_id;
                next.next_file_id += 1;
                let mem = &frozen.mem;
                let fold = self.table_options(table).flush_fold;
                let (mut folded, mut rejected) = (0u64, 0u64);
                let file = self
                    .write_sst(table, 0, id, &mut |add| match &fold {
                        Some(fold) => {
                            mem.for_each_folded(table, &*fold.0, &mut folded, &mut rejected, add)
                        }
                        None => mem.for_each(table, add),
                    })
                    .map_err(before)?;
                self.counters
                    .rows_folded
                    .fetch_add(folded, Ordering::Relaxed);
                if rejected > 0 {
                    tracing::error!(table, rows = rejected, "flush fold output rejected");
                    self.counters
                        .folds_rejected
                        .fetch_add(rejected, Ordering::Relaxed);
                }
                if let Some(file) = file {
                    written.push(file);
                }
            }
            next.last_seq = next.last_seq.max(frozen.last_seq);
            next.flushed_segment = next.flushed_segment.max(frozen.last_segment);
            next.tables = self.table_registry();
            next.files.extend(written.iter().map(|(m, _)| m.clone()));
            next.store(&*self.fs)
        })();
        if let Err(e) = result {
            // File ids are never reused. The memtable stays frozen, to be flushed again.
            manifest.next_file_id = next.next_file_id;
            self.discard(written.iter().map(|(m, _)| m.id), e.maybe_replaced);
            self.counters.flush_errors.fetch_add(1, Ordering::Relaxed);
            *self.last_flush_error.lock() = Some(e.error.to_string());
            return Err(e.error);
        }
        *manifest = next;
        self.delete_orphans(manifest);
        {
            let mut state = self.state.write();
            let mut files = (*state.files).clone();
            for (m, reader) in written {
                files.add(m.table, 0, reader);
            }
            files.sort();
            *state = Arc::new(State {
                active: state.active.clone(),
                frozen: state.frozen.iter().skip(1).cloned().collect(),
                files: Arc::new(files),
            });
        }
        self.counters.flushes.fetch_add(1, Ordering::Relaxed);
        *self.last_flush_error.lock() = None;
        self.counters
            .flush_micros
            .fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
        self.flushed.1.notify_all();
        self.wal.delete_segments_through(frozen.last_segment)?;
        Ok(true)
    }
}
