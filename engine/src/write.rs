//! The write path: committing batches through the WAL's group commit, applying each
//! committed group to the active memtable, freezing the memtable when it is full, and stalling
//! writers while flushes and level-0 compactions fall behind.
//!
//! Writes are appended to the WAL (`wal.rs`) and applied, in log order, to the active
//! memtable, each batch with the next sequence number. A memtable that passes its freeze size
//! (see [`Inner::freeze_at`]) freezes: the WAL rolls to a new segment at that point, so the
//! frozen memtable covers exactly the segments before it. Writers stall while
//! `DbOptions::max_frozen_memtables` frozen memtables wait, or while a table's level 0 holds
//! `DbOptions::l0_stall_files` files. A stall in which no flush finishes for
//! [`WRITE_STALL_LIMIT`] ends with the write refused (`Error::Backpressure`): the storage
//! under the flushes is failing (an object store out of reach), and a client is better told
//! to retry than held without end. Memory stays bounded by the frozen memtables either way.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::inner::Inner;
use crate::memtable::Memtable;
use crate::state::{Frozen, State};
use crate::wal::{DecodedEntry, Entry as WalEntry, decode_entry};

/// How many times the fixed cost of its rows a memtable's entries may take before it freezes,
/// when that is more than `DbOptions::memtable_bytes` (see `Inner::freeze_at`).
const ENTRIES_PER_ROW_BYTE: u64 = 2;
/// Past this many times the base size, a memtable's entries may take only half its rows'
/// cost. Each series writes into the next memtable within moments of a freeze, so at a
/// million series the rows of two such memtables are in memory at once, and the frozen one's
/// size sets the peak; with fewer series the memtable stays below this and keeps the fewer
/// flushes.
const LARGE_MEMTABLE: u64 = 8;
/// The longest a write waits in a stall in which no flush finishes; see the module doc.
pub const WRITE_STALL_LIMIT: Duration = Duration::from_secs(10);

/// The most a memtable grows past `DbOptions::memtable_bytes` for rows of few entries: with
/// strata's default 32 MiB, 512 MiB, about what a million rows take with the few dozen
/// entries each that make a flush fold worth its while. Each flush of such a memtable writes
/// every row again, and the rows' later compactions copy each once per flush, so halving the
/// flushes halves that work at the cost of one more large memtable in memory.
const MEMTABLE_GROWTH: u64 = 16;

/// [`Inner::freeze_at`] for a memtable of base size `base` whose rows cost `row_bytes`.
fn freeze_size(base: u64, row_bytes: u64) -> u64 {
    let wanted = row_bytes.saturating_mul(ENTRIES_PER_ROW_BYTE + 1);
    let large = base.saturating_mul(LARGE_MEMTABLE);
    let large_rows = row_bytes.saturating_add(row_bytes / 2);
    let wanted = wanted.min(large_rows.max(large));
    wanted.clamp(base, base.saturating_mul(MEMTABLE_GROWTH))
}

impl Inner {
    /// Commits `entry` through the WAL (see `Wal::commit`). Returns whether queued batches
    /// are left with no commit leader: the caller wakes the apply thread for them, or settles.
    pub(crate) fn commit(&self, entry: WalEntry<'_>, sync: bool, queue: bool) -> Result<bool> {
        self.wal.commit(entry, sync, queue, &mut |payloads| {
            self.apply_group(payloads)
        })
    }

    /// [`Inner::commit`] of a batch whose buffer the WAL keeps (see `Wal::commit_batch`).
    pub(crate) fn commit_batch(
        &self,
        batch: &mut WriteBatch,
        sync: bool,
        queue: bool,
    ) -> Result<bool> {
        self.wal.commit_batch(batch, sync, queue, &mut |payloads| {
            self.apply_group(payloads)
        })
    }

    /// Wakes the apply thread if `stranded`: queued batches wait with no commit leader.
    pub(crate) fn wake_applier(&self, stranded: bool) {
        if stranded {
            self.applier.wake();
        }
    }

    /// Applies a written group of WAL payloads to the active memtable, in log order. Runs as
    /// the WAL's applier, one group at a time.
    ///
    /// A memtable that grows past its freeze size asks the WAL to freeze it (see
    /// `Wal::want_freeze`), which calls this with no payloads once the memtable holds the log
    /// exactly: only then may it freeze, as freezing rolls the log.
    pub(crate) fn apply_group(&self, payloads: &[&[u8]]) {
        let active = self.state.read().active.clone();
        if payloads.is_empty() {
            if active.approximate_bytes() >= self.freeze_at(&active)
                && let Err(e) = self.freeze()
            {
                tracing::warn!(error = %e, "could not freeze the memtable; the next write tries again");
            }
            return;
        }
        let now = self.opts.clock.now_ms();
        let mut seq = self.last_seq.load(Ordering::Relaxed);
        for payload in payloads {
            match decode_entry(payload) {
                Ok(DecodedEntry::Batch(ops)) => {
                    seq += 1;
                    active.apply_all(&ops, seq, now);
                }
                Ok(DecodedEntry::Table { .. } | DecodedEntry::End) => {}
                // We encoded these bytes ourselves a moment ago.
                Err(e) => tracing::error!(error = %e, "undecodable WAL payload of our own"),
            }
        }
        self.last_seq.store(seq, Ordering::Relaxed);
        self.visible_seq.store(seq, Ordering::Release);
        if active.approximate_bytes() >= self.freeze_at(&active) {
            self.wal.want_freeze();
        }
    }

    /// The size at which `mem` freezes: `DbOptions::memtable_bytes`, or more when most of
    /// that would go to rows rather than entries. With many rows of few entries each (a
    /// million series, each written every few seconds), a flush at the base size would write
    /// every row with one or two entries, and every compaction after it would copy each row
    /// once per flush; so a memtable grows until its entries take [`ENTRIES_PER_ROW_BYTE`]
    /// times what its rows cost (half, past [`LARGE_MEMTABLE`] times the base size), up to
    /// [`MEMTABLE_GROWTH`] times the base size.
    fn freeze_at(&self, mem: &Memtable) -> u64 {
        freeze_size(self.opts.memtable_bytes as u64, mem.row_bytes())
    }

    /// Freezes the active memtable (if it holds anything) and rolls the WAL. Call only as
    /// the WAL's commit leader.
    pub(crate) fn freeze(&self) -> Result<()> {
        let active = self.state.read().active.clone();
        if active.is_empty() {
            return Ok(());
        }
        tracing::debug!(
            bytes = active.approximate_bytes(),
            row_bytes = active.row_bytes(),
            "memtable frozen"
        );
        let segment = self.wal.roll_now()?;
        {
            let mut state = self.state.write();
            let mut frozen = state.frozen.clone();
            let next = Arc::new(Memtable::after(&active));
            frozen.push(Frozen {
                mem: active,
                last_segment: segment - 1,
                last_seq: self.last_seq.load(Ordering::Relaxed),
            });
            *state = Arc::new(State {
                active: next,
                frozen,
                files: state.files.clone(),
            });
        }
        self.signal.wake();
        Ok(())
    }

    /// Freezes the active memtable, which grew to twice its size because the freeze in
    /// [`Inner::apply_group`] failed (the WAL could not start a segment, say on a full disk).
    /// A write is refused with the error while this fails, rather than let memory grow.
    pub(crate) fn freeze_overgrown(&self) -> Result<()> {
        let frozen = self
            .wal
            .quiesce(&mut |payloads| self.apply_group(payloads), || self.freeze());
        // Batches queued while this held the commit leadership wait for the apply thread.
        self.wake_applier(true);
        frozen
    }

    /// What a write must attend to first: whether it must wait (too many frozen memtables wait
    /// for a flush, or a table's level 0 holds too many files), and whether the active
    /// memtable grew to twice its size (see [`Inner::freeze_overgrown`]).
    fn pressure(&self) -> (bool, bool) {
        let state = self.state.read();
        let l0_limit = self
            .opts
            .l0_stall_files
            .max(self.opts.l0_compaction_trigger.max(2) + 1);
        // Frozen memtables are bounded in number, and in bytes when they grew past the base
        // size (see `freeze_at`): one of any size may wait, more only within what the base
        // size allows.
        let frozen_bytes: u64 = state.frozen.iter().map(|f| f.mem.approximate_bytes()).sum();
        let max_frozen = self.opts.max_frozen_memtables.max(1);
        let stall = state.frozen.len() >= max_frozen
            || (state.frozen.len() >= 2
                && frozen_bytes
                    >= (self.opts.memtable_bytes as u64).saturating_mul(max_frozen as u64))
            || state
                .files
                .tables
                .values()
                .any(|levels| levels.first().is_some_and(|l0| l0.len() >= l0_limit));
        let overgrown =
            state.active.approximate_bytes() >= self.freeze_at(&state.active).saturating_mul(2);
        (stall, overgrown)
    }

    /// True while writes must wait (see [`Inner::pressure`]).
    pub(crate) fn must_stall(&self) -> bool {
        self.pressure().0
    }

    /// Waits while [`Inner::must_stall`], unless the WAL failed (the write is refused then),
    /// and refuses the write with `Error::Backpressure` once it waited [`WRITE_STALL_LIMIT`]
    /// without a flush finishing. Returns whether the active memtable is overgrown (see
    /// [`Inner::pressure`]).
    pub(crate) fn stall_if_needed(&self) -> Result<bool> {
        let (stall, overgrown) = self.pressure();
        if !stall {
            return Ok(overgrown);
        }
        let start = Instant::now();
        self.counters.write_stalls.fetch_add(1, Ordering::Relaxed);
        tracing::warn!("writes stalled: waiting for memtable flushes or level-0 compactions");
        let (mx, cv) = &self.flushed;
        let mut g = mx.lock();
        let mut flushes = self.counters.flushes.load(Ordering::Relaxed);
        let mut progress = start;
        let mut refused = None;
        while self.must_stall() && !self.wal.has_failed() {
            cv.wait_for(&mut g, Duration::from_millis(10));
            let now = self.counters.flushes.load(Ordering::Relaxed);
            if now != flushes {
                (flushes, progress) = (now, Instant::now());
            } else if progress.elapsed() >= WRITE_STALL_LIMIT {
                let cause = self.last_flush_error.lock().clone();
                refused = Some(Error::Backpressure {
                    waited_secs: start.elapsed().as_secs(),
                    cause: cause.unwrap_or_else(|| "none".into()),
                });
                break;
            }
        }
        drop(g);
        self.counters
            .write_stall_micros
            .fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
        match refused {
            Some(e) => {
                self.counters.writes_refused.fetch_add(1, Ordering::Relaxed);
                Err(e)
            }
            None => Ok(self.pressure().1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// Few rows: the base size. Rows of a few entries: three times the rows' cost, until that
    /// passes eight times the base, then one and a half times, never past sixteen times the
    /// base.
    #[test]
    fn memtables_of_many_rows_grow_less_once_large() {
        let base = 32 * MIB;
        assert_eq!(freeze_size(base, MIB), base);
        assert_eq!(freeze_size(base, 20 * MIB), 60 * MIB);
        assert_eq!(freeze_size(base, 80 * MIB), 240 * MIB);
        assert_eq!(freeze_size(base, 100 * MIB), 256 * MIB);
        assert_eq!(freeze_size(base, 127 * MIB), 256 * MIB);
        assert_eq!(freeze_size(base, 180 * MIB), 270 * MIB);
        assert_eq!(freeze_size(base, 200 * MIB), 300 * MIB);
        assert_eq!(freeze_size(base, 400 * MIB), 512 * MIB);
    }
}
