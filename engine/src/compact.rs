//! Running compactions: the leveled planner (`compaction.rs`) picks the input files, and
//! this merges them into new files of the output level, cut between rows at
//! `DbOptions::target_file_bytes`, and installs them in the manifest. Compactions run one at a
//! time, on their own thread, so flushes go on meanwhile.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::compaction::{self, Plan, PlanOptions};
use crate::error::{Error, Result};
use crate::expiry::{RowExpirer, file_expired};
use crate::file_name::sst_file_name;
use crate::fs::AtomicWriteError;
use crate::inner::Inner;
use crate::manifest::FileMeta;
use crate::read::{Rows, Source};
use crate::sst::{SstBuilder, SstReader};
use crate::state::State;

impl Inner {
    /// Runs the compactions the planner asks for, one at a time, until none is due.
    pub(crate) fn compact_due(&self) -> Result<()> {
        self.fs.check_writable()?;
        let o = PlanOptions {
            l0_trigger: self.opts.l0_compaction_trigger,
            base_bytes: self.opts.level_base_bytes,
            ratio: self.opts.level_size_ratio,
        };
        let _compacting = self.compaction.lock();
        loop {
            let files = self.state.read().files.clone();
            let due = files
                .tables
                .keys()
                .find_map(|&t| compaction::plan(&files.summaries(t), &o).map(|p| (t, p)));
            let Some((table, plan)) = due else {
                return Ok(());
            };
            self.compact(table, &plan, &mut |_| {})?;
        }
    }

    /// Merges every file of every table into one level (the deepest one in use, at least 1).
    /// `progress` gets `(bytes done, bytes in all)`, counted in input bytes: the bytes written
    /// so far while a table is merged, and the table's input bytes once it is done.
    pub(crate) fn compact_all(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<()> {
        self.fs.check_writable()?;
        let _compacting = self.compaction.lock();
        let files = self.state.read().files.clone();
        let total: u64 = files
            .tables
            .values()
            .flatten()
            .flatten()
            .map(|r| r.file_bytes())
            .sum();
        let mut done = 0u64;
        progress(0, total);
        for (&table, levels) in &files.tables {
            let input: u64 = levels.iter().flatten().map(|r| r.file_bytes()).sum();
            let inputs: Vec<u64> = levels.iter().flatten().map(|r| r.file_id()).collect();
            if inputs.is_empty() {
                continue;
            }
            let deepest = levels.iter().rposition(|l| !l.is_empty()).unwrap_or(0);
            let plan = Plan {
                inputs,
                output_level: deepest.max(1),
                bottom: true,
            };
            self.compact(table, &plan, &mut |written| {
                progress(done + written.min(input), total)
            })?;
            done += input;
            progress(done, total);
        }
        Ok(())
    }

    /// Expires data by its time without waiting for writes to trigger a compaction: drops
    /// the files of every table with an expiry hook whose rows have all expired, and rewrites
    /// the ones holding some expired row (level-0 ones by compacting level 0 into level 1,
    /// deeper ones alone into their own level).
    pub(crate) fn expire_due(&self) -> Result<()> {
        self.fs.check_writable()?;
        let _compacting = self.compaction.lock();
        let now = self.opts.clock.now_ms();
        let files = self.state.read().files.clone();
        for (&table, levels) in &files.tables {
            let Some(RowExpirer(hook)) = self.table_options(table).expiry else {
                continue;
            };
            let some_before = hook.some_expired_before(now);
            let due = |r: &SstReader| {
                let p = r.properties();
                file_expired(&*hook, p.max_row_ms, now)
                    || match r.next_expiry_ms() {
                        Some(at) => at <= now,
                        None => some_before.is_some_and(|b| p.min_row_ms < b),
                    }
            };
            let mut plans = Vec::new();
            if levels.first().is_some_and(|l0| l0.iter().any(|r| due(r)))
                && let Some(p) = compaction::plan_level0(&files.summaries(table))
            {
                plans.push(p);
            }
            for (level, files) in levels.iter().enumerate().skip(1) {
                for r in files.iter().filter(|r| due(r)) {
                    if plans.iter().any(|p| p.inputs.contains(&r.file_id())) {
                        continue;
                    }
                    plans.push(Plan {
                        inputs: vec![r.file_id()],
                        output_level: level,
                        bottom: false,
                    });
                }
            }
            for plan in &plans {
                self.compact(table, plan, &mut |_| {})?;
            }
        }
        Ok(())
    }

    /// Runs one compaction of `table`'s files and installs its outputs. The caller holds
    /// `compaction`, so the inputs stay as planned; flushes may add level-0 files meanwhile,
    /// which hold newer data than any input and are left alone.
    /// `written` gets the bytes of the output files finished so far.
    fn compact(&self, table: u32, plan: &Plan, written: &mut dyn FnMut(u64)) -> Result<()> {
        let start = Instant::now();
        let files = self.state.read().files.clone();
        let inputs: Vec<Arc<SstReader>> = files
            .tables
            .get(&table)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|r| plan.inputs.contains(&r.file_id()))
            .cloned()
            .collect();
        let level = u8::try_from(plan.output_level)
            .map_err(|_| Error::InvalidArgument(format!("bad level {}", plan.output_level)))?;
        // Files whose rows have all expired go without being read.
        let now = self.opts.clock.now_ms();
        let (expired, inputs): (Vec<_>, Vec<_>) = match self.table_options(table).expiry {
            Some(RowExpirer(hook)) => inputs
                .into_iter()
                .partition(|r| file_expired(&*hook, r.properties().max_row_ms, now)),
            None => (Vec::new(), inputs),
        };
        let mut outputs: Vec<(FileMeta, Arc<SstReader>)> = Vec::new();
        let result =
            self.write_compaction(table, level, &inputs, plan.bottom, &mut outputs, written);
        let mut manifest = self.manifest.lock();
        let installed = result
            .map_err(|error| AtomicWriteError {
                error,
                maybe_replaced: false,
            })
            .and_then(|()| {
                let mut next = manifest.clone();
                next.files.retain(|f| !plan.inputs.contains(&f.id));
                next.files.extend(outputs.iter().map(|(m, _)| m.clone()));
                next.store(&*self.fs)?;
                *manifest = next;
                Ok(())
            });
        if let Err(e) = installed {
            // The inputs stay live; the outputs go, now or once a later manifest is in place.
            drop(manifest);
            self.discard(outputs.iter().map(|(m, _)| m.id), e.maybe_replaced);
            return Err(e.error);
        }
        self.delete_orphans(&manifest);
        let written: u64 = outputs.iter().map(|(m, _)| m.bytes).sum();
        {
            let mut state = self.state.write();
            let mut files = (*state.files).clone();
            if let Some(levels) = files.tables.get_mut(&table) {
                for l in levels.iter_mut() {
                    l.retain(|r| !plan.inputs.contains(&r.file_id()));
                }
            }
            for (m, reader) in outputs {
                files.add(table, m.level, reader);
            }
            files.sort();
            *state = Arc::new(State {
                active: state.active.clone(),
                frozen: state.frozen.clone(),
                files: Arc::new(files),
            });
        }
        drop(manifest);
        self.discard(plan.inputs.iter().copied(), false);
        if let Some(&id) = plan.inputs.last() {
            self.fs.sync_dir(&sst_file_name(id))?;
        }
        let c = &self.counters;
        c.compactions.fetch_add(1, Ordering::Relaxed);
        c.expired_files_dropped
            .fetch_add(expired.len() as u64, Ordering::Relaxed);
        c.expired_bytes_dropped.fetch_add(
            expired.iter().map(|r| r.file_bytes()).sum(),
            Ordering::Relaxed,
        );
        self.flushed.1.notify_all();
        c.compaction_bytes_written
            .fetch_add(written, Ordering::Relaxed);
        c.compaction_micros
            .fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
        tracing::debug!(
            table,
            level,
            inputs = plan.inputs.len(),
            written,
            "compacted"
        );
        Ok(())
    }

    /// Merges `inputs` into new files of `level`, cut between rows at the target size.
    fn write_compaction(
        &self,
        table: u32,
        level: u8,
        inputs: &[Arc<SstReader>],
        bottom: bool,
        outputs: &mut Vec<(FileMeta, Arc<SstReader>)>,
        written: &mut dyn FnMut(u64),
    ) -> Result<()> {
        let sources: Vec<Source> = inputs
            .iter()
            .map(|r| Box::new(r.compaction_iter()) as Source)
            .collect();
        let mut rows = Rows::new(sources, false, u64::MAX);
        let opts = self.table_options(table);
        let now = self.opts.clock.now_ms();
        let mut expired_rows = 0u64;
        let expired = opts.ttl.map(|ttl| {
            self.opts
                .clock
                .now_ms()
                .saturating_sub(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
        });
        let mut open: Option<(u64, String, SstBuilder)> = None;
        let result = (|| -> Result<()> {
            while let Some(row) = rows.next_raw() {
                let (row, entries) = row?;
                if let Some(RowExpirer(hook)) = &opts.expiry
                    && hook.row_expires_ms(&row).is_some_and(|at| at <= now)
                {
                    expired_rows += 1;
                    continue;
                }
                let kept =
                    compaction::expire(compaction::compact_row(entries, bottom), expired, bottom);
                if kept.is_empty() {
                    continue;
                }
                let (_, _, b) = match &mut open {
                    Some(o) => o,
                    None => {
                        // Numbered under the manifest's lock, held only for this: file ids are
                        // never reused, and an unused one is harmless.
                        let id = {
                            let mut manifest = self.manifest.lock();
                            let id = manifest.next_file_id;
                            manifest.next_file_id += 1;
                            id
                        };
                        let name = sst_file_name(id);
                        let b = SstBuilder::new(
                            self.fs.create(&name)?,
                            &name,
                            &opts,
                            self.opts.clock.now_ms(),
                        );
                        open.insert((id, name, b))
                    }
                };
                for e in &kept {
                    b.add(e)?;
                }
                if b.estimated_len() >= self.opts.target_file_bytes
                    && let Some((id, name, b)) = open.take()
                {
                    outputs.push(self.finish_sst(table, level, id, &name, b)?);
                    written(outputs.iter().map(|(m, _)| m.bytes).sum());
                }
            }
            if let Some((id, name, b)) = open.take() {
                outputs.push(self.finish_sst(table, level, id, &name, b)?);
            }
            Ok(())
        })();
        if let Some((id, _, b)) = open.take() {
            drop(b);
            self.discard(std::iter::once(id), false);
        }
        self.counters
            .expired_rows_dropped
            .fetch_add(expired_rows, Ordering::Relaxed);
        result
    }
}
