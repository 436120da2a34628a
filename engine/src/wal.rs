//! The write-ahead log: segmented, checksummed, with group commit.
//!
//! ## Format
//!
//! The WAL is a sequence of segment files `wal-<n>.log` in the database directory, where `<n>`
//! is the segment number as exactly 16 lowercase hex digits. Numbers start at 1 and are
//! contiguous. All integers are big-endian.
//!
//! A segment starts with a 24-byte header:
//!
//! ```text
//! 0        4         6          8                 16                24
//! +--------+---------+----------+-----------------+-----------------+
//! | "SWAL" | version | reserved | segment number  | xxh3 of 0..16   |
//! |   4B   | u16 = 2 | u16 = 0  |       u64       |       u64       |
//! +--------+---------+----------+-----------------+-----------------+
//! ```
//!
//! Version 2 is written. Version 1 segments are still read: they differ only in the seed of
//! their records' checksums, which is 0 (see below).
//!
//! It is checked in the order magic, checksum, version, reserved bits, then the number is
//! compared with the file name. Records follow back to back up to the end of the file:
//!
//! ```text
//! +-------------+----------------------------+-------------------+
//! | length  u32 | xxh3_64(length ++ payload) | payload           |
//! |             |   seeded, see below, u64   | `length` bytes    |
//! +-------------+----------------------------+-------------------+
//! ```
//!
//! `length` is 1 ..= 2^30. The checksum covers the 4 length bytes and the payload, so a record
//! is either whole and valid or rejected. It is XXH3-64 with the segment number as its seed
//! (version 2; version 1 used seed 0), so a record is valid only in the segment it was
//! written to: the old records of a recycled file (rule 8) fail in its new segment. The payload's first byte is its type:
//!
//! - `1`, table creation: `1 | table id (varint) | table name (UTF-8, rest of the payload)`.
//! - `2`, write batch: `2 | op count (varint) | ops`, the ops encoded as in `batch.rs`: each is
//!   `kind u8 | table varint | row len varint | row | [column len varint | column] |
//!   [value len varint | value]` (column for put and delete, value for put only). The count
//!   must match the ops exactly, with no trailing bytes.
//! - `3`, end of segment (version 2): the single byte `3`. See rule 8.
//!
//! Varints are unsigned LEB128.
//!
//! ## Rules
//!
//! 1. A record never spans segments. A group of records written together goes to one segment;
//!    a new segment is started before a group once the current one holds records and the
//!    group would take it past `DbOptions::wal_segment_bytes`.
//! 2. Before a new segment is created, the previous one is fsynced. The new one is created
//!    with its header, fsynced, and the directory is fsynced.
//! 3. Recovery reads the segments in number order and replays every record that passes its
//!    checksum. A missing number in the sequence is corruption.
//! 4. A torn or corrupt record in any segment but the last is corruption (`Error::Corruption`
//!    with file and offset): by rule 2 a crash cannot tear a segment that has a successor.
//! 5. In the last segment, the first torn or corrupt record ends the log: it and everything
//!    after it are cut off (logged as a warning) and appending resumes there. A torn or
//!    corrupt header (short, bad magic or bad checksum) of the last segment means the crash
//!    hit its creation: it is rewritten empty. A header with a valid checksum but an unknown
//!    version or set reserved bits is always an error, so a newer WAL is never erased. Only writes that were not yet acknowledged as durable can be lost this way, unless
//!    the disk itself corrupted synced bytes.
//! 6. A record that passes its checksum but whose payload does not decode is corruption.
//! 7. When a memtable freezes, the WAL is rolled to a new segment while no group is being
//!    written, so every record of the frozen memtable lies in segments before the new one.
//!    Once the memtable's SST files and the manifest naming the last covered segment are
//!    durable, the covered segments are deleted in ascending order (so the remaining numbers
//!    stay contiguous after a crash). The current segment is never deleted. When no segment is
//!    left, numbering resumes after the manifest's last covered segment.
//! 8. The newest covered segments, as many as a flush covers up to
//!    `DbOptions::wal_recycle_segments`, are not deleted but renamed
//!    `recycled-<old number>.log` (older recycled files past that number are deleted), and a
//!    new segment is made from one of them when there is one: its new header, followed by an
//!    end record (see below), is written and fsynced, then it is renamed to its segment's
//!    name and the directory fsynced. So a crash leaves either a recycled file (ignored by
//!    recovery, kept for reuse at the next open) or a segment whose header names it. Its new
//!    records are written over the old ones, which stay past the segment's end and fail
//!    their checksums (another seed), so recovery ends the segment there (rule 5). Before
//!    the next segment is started, a recycled segment gets an end record (payload the single
//!    byte `3`) and is fsynced: recovery reads a segment no further than its end record, so
//!    rule 4 holds for what comes before it. In the last
//!    segment, appending resumes at its end record, writing over it and what follows (no
//!    warning: that is where the log ends). An fsync through
//!    `Db::sync_wal` (and a close) writes an end record after the last group too, without
//!    counting it in the segment, so a reopen after it finds where the log ends; the next
//!    group writes over it. A writer that reuses files writes over pages the page cache
//!    already holds, where new files must be given new pages and deleted ones freed.
//!    `Db::compact_all` deletes the recycled files, and cuts a recycled current segment back
//!    to its records; from then on it is read as a new file is, to its end.
//!
//! ## Failures
//!
//! The WAL's promise is that an acknowledged write is on disk as its sync policy says, and
//! Linux may drop the dirty pages of a failed fsync and report the next fsync clean. So:
//!
//! 1. A failed fsync (of a group, a roll, [`Wal::sync`] or the background syncer) **fails the
//!    WAL**: every commit not yet acknowledged and every later one is refused with
//!    `Error::WalFailed` carrying the cause, and so is every later sync. Reads go on. Only a
//!    restart, which recovers from what is on disk, writes again.
//! 2. A group whose append fails with ENOSPC is **refused** without failing the WAL when the
//!    segment can be cut back to its length before the append (so no byte of the group can be
//!    replayed) and every record of the group still has its committer waiting: each of them
//!    gets the error, and the next group appends at the same place. Once the disk has space,
//!    commits succeed again. The same holds when creating the next segment fails with ENOSPC
//!    and the half-made file could be deleted.
//! 3. Any other failed write, truncate or segment creation fails the WAL, as does an ENOSPC
//!    append in a group holding a record whose committer was already told it was queued
//!    (`Db::write_queued`): that committer can no longer be told.

pub(crate) mod entry;
pub(crate) mod recovery;
pub(crate) mod segment;

use std::collections::VecDeque;
use std::io;
use std::ops::Range;
#[cfg(test)]
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, LogFile};
use crate::inner::Signal;

use crate::file_name::{parse_recycled_file_name, recycled_file_name, segment_file_name};
use entry::END_PAYLOAD;
use entry::frame_batch_in_place;
pub(crate) use entry::{DecodedEntry, Entry, decode_entry};
use segment::{
    HEADER_BYTES, MAX_PAYLOAD_BYTES, RECORD_HEADER_BYTES, encode_header, frame_record, seal_record,
};

/// Queued records past this many bytes make [`Wal::commit`] wait even when asked only to
/// queue: a bound on the memory and on how far the applied state trails the queue.
const QUEUE_LIMIT_BYTES: usize = 4 << 20;

/// Once this many bytes are written since the last fsync, the background syncer is woken
/// without waiting for its interval. A segment roll fsyncs the segment as the commit leader,
/// and every writer waits for that fsync with the CPU idle; under heavy ingest an interval's
/// worth of writes is tens of MiB for the disk to take. Synced in steps of this size, the
/// segment has little left to write out when it rolls.
const SYNC_AHEAD_BYTES: u64 = 8 << 20;

/// Counters of the WAL.
#[derive(Debug, Default)]
pub(crate) struct WalStats {
    /// Bytes appended, headers included.
    pub(crate) bytes: AtomicU64,
    /// Fsyncs of segment files.
    pub(crate) syncs: AtomicU64,
    /// Batch records written.
    pub(crate) batches: AtomicU64,
    /// Records of groups refused without failing the WAL (rule 2 of `## Failures`).
    pub(crate) refused: AtomicU64,
}

/// The open write-ahead log.
pub(crate) struct Wal {
    fs: Arc<dyn FileSystem>,
    segment_bytes: u64,
    queue: Mutex<Queue>,
    queue_cv: Condvar,
    out: Mutex<Segment>,
    /// Set once `Queue::failed` is: read without the queue's lock.
    failed: AtomicBool,
    /// Set by [`Wal::close`]: the log's end is marked, and a drop after it writes nothing.
    closed: AtomicBool,
    /// `Queue::written` and `Queue::done`, for [`Wal::catch_up`] to read without the lock.
    written_mirror: AtomicU64,
    done_mirror: AtomicU64,
    /// The memtable asked to be frozen (see [`Wal::want_freeze`]).
    freeze_wanted: AtomicBool,
    /// Wakes the background syncer before its interval (see [`SYNC_AHEAD_BYTES`]).
    sync_ahead: Arc<Signal>,
    /// Held across every fsync and the failure it may record, so that no fsync can succeed
    /// (and report bytes durable) between another one's failure and that failure being
    /// recorded: the second fsync of a file whose first failed succeeds without the lost
    /// bytes. Taken after `out`, before `queue`.
    sync_lock: Mutex<()>,
    /// The number of the segment being appended to, the seed records are sealed with when
    /// queued: a group written after a roll reseals the ones sealed for the segment before.
    seed: AtomicU64,
    /// Covered segments kept for reuse, renamed `recycled-<n>.log` (see rule 8), oldest first.
    recycled: Mutex<Vec<String>>,
    /// How many covered segments [`Wal::delete_segments_through`] keeps for reuse.
    recycle_limit: usize,
    stats: WalStats,
}

/// The segment being appended to. Only the commit leader, `sync` and the background syncer
/// lock it.
#[derive(Debug)]
struct Segment {
    number: u64,
    file: Arc<dyn LogFile>,
    len: u64,
    /// Bytes written since the last fsync began.
    unsynced: u64,
    /// The file is a recycled one and may hold bytes of its earlier use past `len`.
    stale: bool,
}

/// Spare batch buffers are kept up to this many, and this many bytes in all: enough for a
/// full queue of batches of [`TAKE_FROM`] bytes, so that buffers go round rather than being
/// freed and allocated again.
const SPARE_BUFFERS: usize = 64;
const SPARE_BYTES: usize = 2 * QUEUE_LIMIT_BYTES;
/// Batches from this size are queued in their own buffers (see [`Wal::commit_batch`]);
/// smaller ones are copied into the queue's buffer, which costs less than passing a buffer
/// round for them.
const TAKE_FROM: usize = 64 << 10;

/// A record waiting in the queue: framed in the queue's buffer, or in a batch's own buffer
/// (see [`Wal::commit_batch`]), which is written and applied from where the batch encoded it.
#[derive(Debug)]
enum QueuedRecord {
    /// The record's range in `Queue::buf`, frame and payload, and the seed it is sealed with.
    Shared(Range<usize>, u64),
    Own {
        buf: Vec<u8>,
        /// The record, frame and payload, in `buf`.
        framed: Range<usize>,
        seed: u64,
    },
}

impl QueuedRecord {
    /// Seals the record again with `seed` if it was sealed for another segment.
    fn reseal(&mut self, shared: &mut [u8], seed: u64) {
        match self {
            QueuedRecord::Shared(r, s) if *s != seed => {
                seal_record(&mut shared[r.clone()], seed);
                *s = seed;
            }
            QueuedRecord::Own {
                buf,
                framed,
                seed: s,
            } if *s != seed => {
                seal_record(&mut buf[framed.clone()], seed);
                *s = seed;
            }
            _ => {}
        }
    }

    /// The whole record, from the queue's buffer `shared` or its own.
    fn bytes<'a>(&'a self, shared: &'a [u8]) -> &'a [u8] {
        match self {
            QueuedRecord::Shared(r, _) => &shared[r.clone()],
            QueuedRecord::Own { buf, framed, .. } => &buf[framed.clone()],
        }
    }

    fn payload<'a>(&'a self, shared: &'a [u8]) -> &'a [u8] {
        &self.bytes(shared)[RECORD_HEADER_BYTES..]
    }
}

/// Records waiting for the next group commit.
#[derive(Debug, Default)]
struct Queue {
    /// Framed records copied in, back to back.
    buf: Vec<u8>,
    /// The records, in ticket order.
    records: Vec<QueuedRecord>,
    /// Bytes of `records`, frames included.
    bytes: usize,
    /// Number of batch records in `records`.
    batches: u64,
    /// Some waiter needs an fsync.
    sync: bool,
    /// A record in `buf` was acknowledged as queued: its committer does not wait for it.
    detached: bool,
    /// Ticket of the next record to be queued.
    next_ticket: u64,
    /// Every ticket below this has been committed (or failed): written and applied.
    done: u64,
    /// Every ticket below this is in the log file (or failed). Never below `done`: the
    /// tickets between wait in `unapplied`.
    written: u64,
    /// A leader is writing a group.
    leader: bool,
    /// An applier is applying the groups of `unapplied`.
    applying: bool,
    /// Groups written and not yet applied, in log order.
    unapplied: VecDeque<WrittenGroup>,
    /// Bytes of the records in `unapplied`.
    unapplied_bytes: usize,
    /// Groups refused without failing the WAL, each kept until all its committers took the
    /// error (they all wait: a group with a detached record fails the WAL instead).
    refused: Vec<Refused>,
    /// After the WAL failed, tickets from this one on fail, and so does every later commit.
    failed: Option<(u64, Arc<Error>)>,
    /// The buffers of the group before, emptied, for the next group to queue into: fresh ones
    /// would fault their pages in again as they grow.
    spare_buf: Vec<u8>,
    spare_records: Vec<QueuedRecord>,
    /// Buffers of batches written before, emptied, for the batches committed next (see
    /// [`SPARE_BUFFERS`]).
    spare: Vec<Vec<u8>>,
}

impl Queue {
    /// Keeps `buf`, emptied, for a later batch, if there is room.
    fn keep_spare(&mut self, mut buf: Vec<u8>) {
        let kept: usize = self.spare.iter().map(Vec::capacity).sum();
        if self.spare.len() < SPARE_BUFFERS && kept + buf.capacity() <= SPARE_BYTES {
            buf.clear();
            self.spare.push(buf);
        }
    }
}

/// A group written (or failed), waiting to be applied in log order.
#[derive(Debug)]
struct WrittenGroup {
    /// The queue's buffer of the group, and its records (none if the group failed).
    buf: Vec<u8>,
    records: Vec<QueuedRecord>,
    /// Bytes of `records`, frames included.
    bytes: usize,
    /// Every ticket below this is done once the group is applied.
    upto: u64,
}

/// A group refused without failing the WAL.
#[derive(Debug)]
struct Refused {
    tickets: Range<u64>,
    /// Committers yet to take the error.
    left: u64,
    error: Error,
}

/// Why a group or a roll failed, and whether it left the log as it was before.
type GroupError = (Error, bool);

impl Wal {
    /// Opens the WAL in `dir`, replaying every good record into `apply` in order (see the
    /// module rules), and prepares the last segment for appending.
    #[cfg(test)]
    pub(crate) fn open(
        dir: &Path,
        segment_bytes: u64,
        apply: &mut recovery::ReplayFn<'_>,
    ) -> Result<Wal> {
        let fs = Arc::new(crate::fs::LocalFs::new(dir)?);
        Wal::open_from(fs, segment_bytes, 1, apply)
    }

    /// Like `open`, on the files of `fs`, and an empty log starts at segment `first` rather
    /// than 1.
    pub(crate) fn open_from(
        fs: Arc<dyn FileSystem>,
        segment_bytes: u64,
        first: u64,
        apply: &mut recovery::ReplayFn<'_>,
    ) -> Result<Wal> {
        let tail = recovery::recover(&*fs, apply)?;
        let recycled = recycled_files(&*fs)?;
        let out = match tail {
            None => create_segment(&*fs, first.max(1)).map_err(|(e, _)| e)?,
            Some(t) if t.good_len == 0 => create_segment(&*fs, t.number).map_err(|(e, _)| e)?,
            Some(t) => {
                let file = fs.open_log(&t.name)?;
                if t.truncate {
                    file.truncate(t.good_len)?;
                    file.sync()?;
                }
                Segment {
                    number: t.number,
                    file,
                    len: t.good_len,
                    unsynced: 0,
                    stale: t.ended,
                }
            }
        };
        let out_number = out.number;
        Ok(Wal {
            fs,
            segment_bytes,
            queue: Mutex::new(Queue::default()),
            queue_cv: Condvar::new(),
            out: Mutex::new(out),
            failed: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            written_mirror: AtomicU64::new(0),
            done_mirror: AtomicU64::new(0),
            freeze_wanted: AtomicBool::new(false),
            sync_ahead: Arc::default(),
            sync_lock: Mutex::new(()),
            seed: AtomicU64::new(out_number),
            recycled: Mutex::new(recycled),
            recycle_limit: 0,
            stats: WalStats::default(),
        })
    }

    /// Keeps up to `segments` covered segments for reuse (see rule 8) from now on, deleting
    /// the oldest recycled files past that.
    pub(crate) fn set_recycle_limit(&mut self, segments: usize) {
        self.recycle_limit = segments;
        let recycled = self.recycled.get_mut();
        let extra = recycled.len().saturating_sub(segments);
        for name in recycled.drain(..extra) {
            if let Err(e) = self.fs.delete(&name) {
                tracing::warn!(error = %e, file = %name, "could not delete a recycled WAL segment");
            }
        }
    }

    /// The WAL's counters.
    pub(crate) fn stats(&self) -> &WalStats {
        &self.stats
    }

    /// Bytes of records queued and not yet taken by a group.
    pub(crate) fn queued_bytes(&self) -> u64 {
        self.queue.lock().bytes as u64
    }

    /// Whether the WAL failed (see `## Failures`): it refuses every write until a restart.
    pub(crate) fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// The error a write gets from a failed WAL.
    fn failure(&self) -> Option<Error> {
        if !self.has_failed() {
            return None;
        }
        let q = self.queue.lock();
        q.failed
            .as_ref()
            .map(|(_, cause)| Error::WalFailed(cause.clone()))
    }

    /// Fails the WAL with `cause` (unless it failed already), from the first ticket not yet
    /// done, and returns the error writes now get.
    fn fail(&self, cause: Error) -> Error {
        let mut q = self.queue.lock();
        let from = q.done;
        let e = self.fail_locked(&mut q, from, cause);
        self.queue_cv.notify_all();
        e
    }

    fn fail_locked(&self, q: &mut Queue, from: u64, cause: Error) -> Error {
        let cause = match &q.failed {
            Some((_, first)) => first.clone(),
            None => {
                tracing::error!(
                    error = %cause,
                    "the WAL failed: writes are refused until a restart recovers from the files"
                );
                let cause = Arc::new(cause);
                q.failed = Some((from, cause.clone()));
                self.failed.store(true, Ordering::Relaxed);
                cause
            }
        };
        Error::WalFailed(cause)
    }

    /// Appends `entry`. Returns once it is written (and fsynced when `sync`), or with
    /// `queue` (and not `sync`) once it waits in the queue while its queue is not too long:
    /// it is written and applied later, in order, by the current commit leader or, when this
    /// returns true, by whoever [`Wal::lead_queued`] next (the caller's applier, to be woken).
    ///
    /// Concurrent callers are grouped: the first waiter becomes the leader, writes every queued
    /// record with one write and at most one fsync, then calls its `apply` with every payload
    /// of the group in log order, while still leader, so that the in-memory state is updated
    /// in exactly the log's order. Followers return once their group is done. A failed group
    /// is refused or fails the WAL (see `## Failures`).
    pub(crate) fn commit(
        &self,
        entry: Entry<'_>,
        sync: bool,
        queue: bool,
        apply: &mut dyn FnMut(&[&[u8]]),
    ) -> Result<bool> {
        check_size(&entry)?;
        let mut q = self.queue.lock();
        if let Some((_, cause)) = &q.failed {
            return Err(Error::WalFailed(cause.clone()));
        }
        let seed = self.seed.load(Ordering::Relaxed);
        let payload = frame_record(&mut q.buf, seed, |out| entry.encode(out));
        let record = QueuedRecord::Shared(payload.start - RECORD_HEADER_BYTES..payload.end, seed);
        self.enqueue(q, record, entry.is_batch(), sync, queue, apply)
    }

    /// [`Wal::commit`] of `batch`, without copying it when it is large: the record is framed
    /// in the room the batch keeps before its operations, and its buffer is queued as it is.
    /// `batch` is left empty, with the buffer of a batch written before when there is one,
    /// whether or not the commit succeeds.
    pub(crate) fn commit_batch(
        &self,
        batch: &mut WriteBatch,
        sync: bool,
        queue: bool,
        apply: &mut dyn FnMut(&[&[u8]]),
    ) -> Result<bool> {
        if batch.data().len() < TAKE_FROM {
            let committed = self.commit(Entry::Batch(batch), sync, queue, apply);
            batch.clear();
            return committed;
        }
        check_size(&Entry::Batch(batch))?;
        let count = batch.count();
        let mut buf = batch.take_buffer(Vec::new());
        let seed = self.seed.load(Ordering::Relaxed);
        let framed = frame_batch_in_place(&mut buf, count, seed);
        let mut q = self.queue.lock();
        if let Some(spare) = q.spare.pop() {
            batch.take_buffer(spare);
        }
        if let Some((_, cause)) = &q.failed {
            return Err(Error::WalFailed(cause.clone()));
        }
        let record = QueuedRecord::Own { buf, framed, seed };
        self.enqueue(q, record, true, sync, queue, apply)
    }

    /// Queues `record` (a batch if `is_batch`) and commits as [`Wal::commit`] says.
    fn enqueue<'a>(
        &'a self,
        mut q: MutexGuard<'a, Queue>,
        record: QueuedRecord,
        is_batch: bool,
        sync: bool,
        queue: bool,
        apply: &mut dyn FnMut(&[&[u8]]),
    ) -> Result<bool> {
        let ticket = q.next_ticket;
        q.next_ticket += 1;
        q.bytes += record.bytes(&q.buf).len();
        q.records.push(record);
        q.batches += u64::from(is_batch);
        q.sync |= sync;
        if queue && !sync && q.bytes <= QUEUE_LIMIT_BYTES {
            q.detached = true;
            return Ok(!q.leader);
        }
        self.wait_or_lead(q, ticket, true, apply)
    }

    /// Waits until every record queued so far is written and applied, leading their groups
    /// if no one else does. Fails if one of those it waited for failed. Returns true if
    /// records queued meanwhile wait with no leader (see [`Wal::commit`]).
    pub(crate) fn settle(&self, apply: &mut dyn FnMut(&[&[u8]])) -> Result<bool> {
        let q = self.queue.lock();
        match q.next_ticket.checked_sub(1) {
            Some(last) if q.done <= last => self.wait_or_lead(q, last, false, apply),
            _ => Ok(false),
        }
    }

    /// Waits until every record queued before the call is in the log file, as its sync
    /// policy says, writing their group itself if no one else does; they are perhaps not yet
    /// applied ([`Wal::catch_up`] waits for that). Fails if one of them failed. Returns true
    /// if written groups (or queued records) wait with no one to apply (or write) them: the
    /// caller wakes its applier.
    ///
    /// A committer that needs its records only durable answers while they are applied, and
    /// takes its next request meanwhile: no wait for the apply, nor for the wake-up of
    /// another thread to write them.
    pub(crate) fn wait_written(&self, apply: &mut dyn FnMut(&[&[u8]])) -> Result<bool> {
        let mut q = self.queue.lock();
        let Some(last) = q.next_ticket.checked_sub(1) else {
            return Ok(false);
        };
        while q.written <= last {
            if q.leader {
                self.queue_cv.wait(&mut q);
            } else {
                q = self.write_step(q, apply);
            }
        }
        match &q.failed {
            Some((from, cause)) if *from <= last => Err(Error::WalFailed(cause.clone())),
            _ => Ok(Self::stranded(&q)),
        }
    }

    /// Waits until every record in the log file is applied: a read that starts after it sees
    /// every write acknowledged by [`Wal::wait_written`]. Cheap when there is nothing to wait
    /// for. Applies nothing itself, as readers may run at background priority: while the
    /// groups wait with no one applying them, it calls `wake` to wake the caller's applier.
    /// Never call it while writing or applying.
    pub(crate) fn catch_up(&self, wake: &dyn Fn()) {
        let written = self.written_mirror.load(Ordering::Acquire);
        if self.done_mirror.load(Ordering::Acquire) >= written {
            return;
        }
        let mut q = self.queue.lock();
        while q.done < written {
            if !q.applying {
                wake();
            }
            self.queue_cv.wait(&mut q);
        }
    }

    /// Asks for the memtable to be frozen as soon as it holds the log exactly (see
    /// [`Wal::apply_backlog`]): an applier cannot roll the log, as a later group may be in it.
    pub(crate) fn want_freeze(&self) {
        self.freeze_wanted.store(true, Ordering::Release);
    }

    /// Writes and applies queued records, group after group, until none is left; returns
    /// at once if others write and apply them.
    pub(crate) fn lead_queued(&self, apply: &mut dyn FnMut(&[&[u8]])) {
        let mut q = self.queue.lock();
        loop {
            if !q.applying && !q.unapplied.is_empty() {
                q = self.apply_backlog(q, apply, false);
            } else if !q.leader && q.written < q.next_ticket {
                q = self.write_step(q, apply);
            } else {
                break;
            }
        }
    }

    /// Whether records wait with no one to write them, or written groups with no one to
    /// apply them.
    fn stranded(q: &Queue) -> bool {
        (!q.leader && q.written < q.next_ticket) || (!q.applying && !q.unapplied.is_empty())
    }

    /// Waits until `ticket` is done, writing and applying its group if no one else does.
    /// Returns its outcome (`own`: the caller committed `ticket` and takes its group's
    /// refusal), and whether records or groups now wait with no one for them.
    fn wait_or_lead<'a>(
        &'a self,
        mut q: MutexGuard<'a, Queue>,
        ticket: u64,
        own: bool,
        apply: &mut dyn FnMut(&[&[u8]]),
    ) -> Result<bool> {
        while q.done <= ticket {
            if q.written <= ticket && !q.leader {
                // Our record still queued, and no one writing: write its group (it holds
                // every queued record, so ours too).
                q = self.write_step(q, apply);
            } else if q.written > ticket && !q.applying {
                q = self.apply_backlog(q, apply, false);
            } else {
                self.queue_cv.wait(&mut q);
            }
        }
        if own && let Some(i) = q.refused.iter().position(|r| r.tickets.contains(&ticket)) {
            let r = &mut q.refused[i];
            let e = copy_error(&r.error);
            r.left -= 1;
            if r.left == 0 {
                q.refused.swap_remove(i);
            }
            return Err(e);
        }
        match &q.failed {
            Some((from, cause)) if *from <= ticket => Err(Error::WalFailed(cause.clone())),
            _ => Ok(Self::stranded(&q)),
        }
    }

    /// Writes one group, every record queued now, as the leader. Call with no leader active.
    /// Returns with the queue locked again and leadership given up; the group waits in
    /// `unapplied` (as an empty group when it failed, so that `done` passes it in order).
    ///
    /// Writing and applying are separate steps, so that one group is written (and its
    /// durable committers answered) while the groups before are applied. Each step is taken
    /// by one thread at a time, and groups are applied in the order they were written.
    fn write_step<'a>(
        &'a self,
        mut q: MutexGuard<'a, Queue>,
        apply: &mut dyn FnMut(&[&[u8]]),
    ) -> MutexGuard<'a, Queue> {
        if q.failed.is_some() {
            // Queued while the failing group was written: fail everything still queued.
            let upto = q.next_ticket;
            q.buf.clear();
            q.records.clear();
            q.bytes = 0;
            q.batches = 0;
            q.sync = false;
            q.detached = false;
            self.push_written(&mut q, Vec::new(), Vec::new(), 0, upto);
            self.queue_cv.notify_all();
            return q;
        }
        q.leader = true;
        if q.unapplied_bytes > QUEUE_LIMIT_BYTES || self.freeze_wanted.load(Ordering::Acquire) {
            // The appliers fall behind (catch up, to bound the memory the groups hold), or
            // the memtable wants to freeze, which needs the groups before applied.
            q = self.apply_backlog(q, apply, true);
        }
        let first = q.written;
        let upto = q.next_ticket;
        let spare_buf = std::mem::take(&mut q.spare_buf);
        let mut buf = std::mem::replace(&mut q.buf, spare_buf);
        let spare_records = std::mem::take(&mut q.spare_records);
        let mut records = std::mem::replace(&mut q.records, spare_records);
        let bytes = std::mem::take(&mut q.bytes);
        let batches = std::mem::take(&mut q.batches);
        let group_sync = std::mem::take(&mut q.sync);
        let detached = std::mem::take(&mut q.detached);
        drop(q);

        let result = self.write_group(&mut buf, &mut records, bytes, group_sync, batches);
        let mut q = self.queue.lock();
        q.leader = false;
        match result {
            Ok(()) => {
                self.push_written(&mut q, buf, records, bytes, upto);
            }
            Err((e, clean)) => {
                if clean && !detached {
                    tracing::warn!(error = %e, batches, "WAL append failed; its batches are refused");
                    self.stats
                        .refused
                        .fetch_add(upto - first, Ordering::Relaxed);
                    q.refused.push(Refused {
                        tickets: first..upto,
                        left: upto - first,
                        error: e,
                    });
                } else {
                    self.fail_locked(&mut q, first, e);
                }
                self.push_written(&mut q, Vec::new(), Vec::new(), 0, upto);
            }
        }
        self.queue_cv.notify_all();
        q
    }

    /// Queues a group written through ticket `upto` for the appliers.
    fn push_written(
        &self,
        q: &mut Queue,
        buf: Vec<u8>,
        records: Vec<QueuedRecord>,
        bytes: usize,
        upto: u64,
    ) {
        q.unapplied_bytes += bytes;
        q.unapplied.push_back(WrittenGroup {
            buf,
            records,
            bytes,
            upto,
        });
        q.written = upto;
        self.written_mirror.store(upto, Ordering::Release);
    }

    /// Applies the written groups, in log order, until none is left; returns at once if
    /// another thread applies them, unless `leading` (the caller holds the leadership and
    /// waits for that thread). Returns with the queue locked again.
    ///
    /// Once no group is left, and no one else writes (or the caller is the one who would),
    /// the memtable holds the log exactly: if it asked to freeze (see [`Wal::want_freeze`]),
    /// `apply` is called with no payloads to freeze it, and it may roll the log.
    fn apply_backlog<'a>(
        &'a self,
        mut q: MutexGuard<'a, Queue>,
        apply: &mut dyn FnMut(&[&[u8]]),
        leading: bool,
    ) -> MutexGuard<'a, Queue> {
        while q.applying {
            if !leading {
                return q;
            }
            self.queue_cv.wait(&mut q);
        }
        q.applying = true;
        while let Some(group) = q.unapplied.pop_front() {
            drop(q);
            if !group.records.is_empty() {
                let slices: Vec<&[u8]> = group
                    .records
                    .iter()
                    .map(|r| r.payload(&group.buf))
                    .collect();
                apply(&slices);
            }
            q = self.queue.lock();
            q.done = group.upto;
            self.done_mirror.store(group.upto, Ordering::Release);
            self.recycle(&mut q, group);
            self.queue_cv.notify_all();
        }
        if self.freeze_wanted.load(Ordering::Acquire) && (leading || !q.leader) {
            let took = !q.leader;
            q.leader = true;
            drop(q);
            if self.freeze_wanted.swap(false, Ordering::AcqRel) {
                apply(&[]);
            }
            q = self.queue.lock();
            if took {
                q.leader = false;
            }
        }
        q.applying = false;
        self.queue_cv.notify_all();
        q
    }

    /// Keeps an applied group's buffers for the groups to come.
    fn recycle(&self, q: &mut Queue, group: WrittenGroup) {
        let WrittenGroup {
            mut buf,
            mut records,
            bytes,
            ..
        } = group;
        q.unapplied_bytes -= bytes;
        for r in records.drain(..) {
            if let QueuedRecord::Own { buf, .. } = r {
                q.keep_spare(buf);
            }
        }
        if q.spare_records.capacity() < records.capacity() {
            q.spare_records = records;
        }
        if q.spare_buf.capacity() < buf.capacity() {
            buf.clear();
            q.spare_buf = buf;
        }
    }

    fn write_group(
        &self,
        shared: &mut [u8],
        records: &mut [QueuedRecord],
        bytes: usize,
        sync: bool,
        batches: u64,
    ) -> Result<(), GroupError> {
        let mut out = self.out.lock();
        if out.len > HEADER_BYTES as u64 && out.len + bytes as u64 > self.segment_bytes {
            self.roll(&mut out)?;
        }
        // Records queued before a roll were sealed for the segment before.
        for r in records.iter_mut() {
            r.reseal(shared, out.number);
        }
        let (shared, records) = (&*shared, &*records);
        let at = out.len;
        if let Err(e) = write_records(&*out.file, at, shared, records) {
            // Cut off whatever part of the group reached the file, so that none of it can be
            // replayed and the next group appends at the same place.
            let cut = out.file.truncate(at);
            if let Err(t) = &cut {
                tracing::warn!(error = %t, "could not cut a failed WAL append off");
            }
            let clean = no_space(&e) && cut.is_ok();
            return Err((e, clean));
        }
        out.len += bytes as u64;
        let before = out.unsynced;
        out.unsynced += bytes as u64;
        if before < SYNC_AHEAD_BYTES && out.unsynced >= SYNC_AHEAD_BYTES {
            self.sync_ahead.wake();
        }
        self.stats.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        self.stats.batches.fetch_add(batches, Ordering::Relaxed);
        if sync {
            self.sync_locked(&mut out).map_err(|e| (e, false))?;
        }
        Ok(())
    }

    /// Starts segment `number + 1` (rule 2), in a recycled file when one is kept (rule 8).
    fn roll(&self, out: &mut Segment) -> Result<(), GroupError> {
        if out.stale {
            // Rule 8: the records of the file's earlier life follow, so the segment says
            // where it ends (cutting them off would free the pages the next use writes over).
            // If the new segment cannot be made, the next group writes over the end record.
            self.mark_end(out)?;
        }
        // Always fsync, even if nothing is unsynced: the background syncer may have cleared
        // the count while its fsync is still running.
        self.sync_locked(out).map_err(|e| (e, false))?;
        let number = out.number + 1;
        let reused = self.recycled.lock().pop();
        let next = match reused {
            Some(old) => reuse_segment(&*self.fs, &old, number)?,
            None => create_segment(&*self.fs, number)?,
        };
        let end = if next.stale { END_RECORD_BYTES } else { 0 };
        self.stats
            .bytes
            .fetch_add((HEADER_BYTES + end) as u64, Ordering::Relaxed);
        tracing::debug!(
            segment = next.number,
            recycled = next.stale,
            "started WAL segment"
        );
        *out = next;
        self.seed.store(number, Ordering::Relaxed);
        Ok(())
    }

    /// Writes an end record at the end of `out`, a recycled segment, without counting it in
    /// its length: the next group writes over it (rule 8).
    fn mark_end(&self, out: &Segment) -> Result<(), GroupError> {
        let mut end = Vec::with_capacity(END_RECORD_BYTES);
        frame_end_record(&mut end, out.number);
        out.file.write_at(out.len, &end).map_err(|e| (e, false))?;
        self.stats
            .bytes
            .fetch_add(end.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn sync_locked(&self, out: &mut Segment) -> Result<()> {
        self.fsync(&*out.file)?;
        out.unsynced = 0;
        Ok(())
    }

    /// Fsyncs `file`, unless the WAL has failed; a failure is recorded before any other
    /// fsync can run (see `sync_lock`).
    fn fsync(&self, file: &dyn LogFile) -> Result<()> {
        let _one_at_a_time = self.sync_lock.lock();
        if let Some(e) = self.failure() {
            return Err(e);
        }
        if let Err(e) = file.sync() {
            return Err(self.fail(e));
        }
        self.stats.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Runs `f` while no group is being written or applied: `f` holds the commit leadership,
    /// so the in-memory state matches the log exactly while it runs.
    pub(crate) fn quiesce<R>(&self, apply: &mut dyn FnMut(&[&[u8]]), f: impl FnOnce() -> R) -> R {
        let mut q = self.queue.lock();
        while q.leader {
            self.queue_cv.wait(&mut q);
        }
        q.leader = true;
        // The groups written before are applied first.
        let q = self.apply_backlog(q, apply, true);
        drop(q);
        let r = f();
        let mut q = self.queue.lock();
        q.leader = false;
        self.queue_cv.notify_all();
        r
    }

    /// Starts a new segment now and returns its number. Call it only while holding the commit
    /// leadership (from a commit's `apply` or inside [`Wal::quiesce`]).
    pub(crate) fn roll_now(&self) -> Result<u64> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        let mut out = self.out.lock();
        match self.roll(&mut out) {
            Ok(()) => Ok(out.number),
            Err((e, true)) => Err(e),
            Err((e, false)) => {
                drop(out);
                Err(self.fail(e))
            }
        }
    }

    /// Deletes every segment numbered `through` or lower, except the current one, in
    /// ascending order, then fsyncs the directory. The newest of them are kept for reuse
    /// instead (rule 8): as many as were covered, up to the recycle limit, which is what the
    /// log of the next memtable will take if it is like this one. Recycled files past that
    /// number are deleted, oldest first.
    pub(crate) fn delete_segments_through(&self, through: u64) -> Result<()> {
        let current = self.out.lock().number;
        let through = through.min(current.saturating_sub(1));
        let covered: Vec<(u64, String)> = recovery::list_segments(&*self.fs)?
            .into_iter()
            .take_while(|(n, _)| *n <= through)
            .collect();
        let Some((_, last)) = covered.last() else {
            return Ok(());
        };
        let keep = self.recycle_limit.min(covered.len());
        let mut recycled = self.recycled.lock();
        for (i, (n, name)) in covered.iter().enumerate() {
            if i >= covered.len() - keep {
                let to = recycled_file_name(*n);
                self.fs.rename(name, &to)?;
                recycled.push(to);
            } else {
                self.fs.delete(name)?;
            }
        }
        let extra = recycled.len().saturating_sub(keep);
        for name in recycled.drain(..extra) {
            self.fs.delete(&name)?;
        }
        drop(recycled);
        self.fs.sync_dir(last)?;
        Ok(())
    }

    /// Deletes the segments kept for reuse, and the old bytes of a reused one being appended
    /// to, giving their disk space back.
    pub(crate) fn drop_recycled(&self) -> Result<()> {
        let names = std::mem::take(&mut *self.recycled.lock());
        for name in &names {
            self.fs.delete(name)?;
        }
        if let Some(name) = names.last() {
            self.fs.sync_dir(name)?;
        }
        self.cut_stale_tail()
    }

    /// Cuts the bytes of a recycled file's earlier use off the current segment, so that the
    /// log takes no more disk than its records. Its records stay; the segment is then read as
    /// a new file is, to its end.
    fn cut_stale_tail(&self) -> Result<()> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        let mut out = self.out.lock();
        if !out.stale {
            return Ok(());
        }
        // A failed cut leaves the segment as it was, old bytes and end record included.
        out.file.truncate(out.len)?;
        // Until this fsync a crash may still find the old bytes, which fail their checksums
        // in this segment and are cut off as a torn tail is.
        self.sync_locked(&mut out)?;
        out.stale = false;
        Ok(())
    }

    /// Fsyncs everything written so far. Fails, and fails the WAL, if the fsync fails.
    pub(crate) fn sync(&self) -> Result<()> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        let mut out = self.out.lock();
        if out.stale {
            // So that a reopen after it finds where the log ends, not a recycled file's old
            // records (it would warn of a torn tail); the next group writes over it.
            self.mark_end(&out).map_err(|(e, _)| e)?;
        }
        self.sync_locked(&mut out)
    }

    /// Marks where the log ends and fsyncs it, once; later calls, and the drop, write nothing.
    /// The database calls it before it gives up its directory: the last handle to the WAL may
    /// be dropped later (on a background thread), and by then another open of the directory
    /// may be appending to the same segment, where a late end record would cut its records
    /// off.
    pub(crate) fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) || self.has_failed() {
            return;
        }
        if let Err(e) = self.sync() {
            tracing::debug!(error = %e, "could not sync the WAL on closing it");
        }
    }

    /// Fsyncs if anything was written since the last fsync, without blocking writers during
    /// the fsync. A failed fsync fails the WAL: the bytes it covered may be gone, and the
    /// next fsync would not say so.
    fn sync_if_dirty(&self) -> Result<()> {
        if self.has_failed() {
            return Ok(());
        }
        let file = {
            let mut out = self.out.lock();
            if out.unsynced == 0 {
                return Ok(());
            }
            // A write after this point counts again, so it is never skipped.
            out.unsynced = 0;
            Arc::clone(&out.file)
        };
        self.fsync(&*file)
    }

    /// Starts a thread that fsyncs every `interval` while `wal` is alive, and sooner once
    /// [`SYNC_AHEAD_BYTES`] are written since the last fsync.
    pub(crate) fn spawn_syncer(wal: &Arc<Wal>, interval: Duration) -> Result<()> {
        let weak: Weak<Wal> = Arc::downgrade(wal);
        // Not the WAL itself: the thread holds it only while it syncs, so that dropping the
        // database's last handle drops the WAL.
        let ahead = Arc::clone(&wal.sync_ahead);
        std::thread::Builder::new()
            .name("strata-wal-sync".into())
            .spawn(move || {
                loop {
                    // A spurious wake-up only syncs early.
                    ahead.wait_for(interval);
                    let Some(wal) = weak.upgrade() else { break };
                    if let Err(e) = wal.sync_if_dirty() {
                        tracing::error!(error = %e, "background WAL fsync failed");
                    }
                }
            })
            .map_err(|e| Error::io("spawning the WAL sync thread", e))?;
        Ok(())
    }
}

impl std::fmt::Debug for Wal {
    // Not derived: the queue holds record bytes that would flood a debug print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal")
            .field("fs", &self.fs)
            .field("segment_bytes", &self.segment_bytes)
            .field("segment", &self.out.try_lock().map(|o| o.number))
            .field("failed", &self.has_failed())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// Writes `records` back to back from `at`: each run of records in the queue's buffer
/// `shared` (contiguous there, as they were copied in ticket order) with one write, each
/// batch in its own buffer with another. On failure a prefix of them may have been written.
fn write_records(
    file: &dyn LogFile,
    at: u64,
    shared: &[u8],
    records: &[QueuedRecord],
) -> Result<()> {
    let mut pos = at;
    let mut run: Option<Range<usize>> = None;
    for r in records {
        match r {
            QueuedRecord::Shared(range, _) => match &mut run {
                Some(run) => run.end = range.end,
                None => run = Some(range.clone()),
            },
            QueuedRecord::Own { buf, framed, .. } => {
                if let Some(run) = run.take() {
                    file.write_at(pos, &shared[run.clone()])?;
                    pos += run.len() as u64;
                }
                file.write_at(pos, &buf[framed.clone()])?;
                pos += framed.len() as u64;
            }
        }
    }
    if let Some(run) = run {
        file.write_at(pos, &shared[run])?;
    }
    Ok(())
}

/// Refuses an entry too large for one record.
fn check_size(entry: &Entry<'_>) -> Result<()> {
    let len = entry.max_encoded_len();
    if len > MAX_PAYLOAD_BYTES {
        return Err(Error::InvalidArgument(format!(
            "write batch of about {len} bytes exceeds the limit of {MAX_PAYLOAD_BYTES}"
        )));
    }
    Ok(())
}

/// Whether `e` says the disk is full.
fn no_space(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == io::ErrorKind::StorageFull)
}

/// A copy of a refused group's error for each of its committers: the same context and OS
/// error.
fn copy_error(e: &Error) -> Error {
    match e {
        Error::Io { context, source } => Error::Io {
            context: context.clone(),
            source: match source.raw_os_error() {
                Some(code) => io::Error::from_raw_os_error(code),
                None => io::Error::new(source.kind(), source.to_string()),
            },
        },
        other => Error::Io {
            context: "appending to the WAL".into(),
            source: io::Error::other(other.to_string()),
        },
    }
}

/// Creates (or recreates) segment `number` holding just its header, durably. On failure the
/// half-made file is deleted: left there, it would make a torn tail of the segment before it
/// look like corruption (rule 4). The flag says whether the failure was ENOSPC and the file
/// is gone for sure.
fn create_segment(fs: &dyn FileSystem, number: u64) -> Result<Segment, GroupError> {
    let name = segment_file_name(number);
    let made = (|| {
        let file = fs.create_log(&name)?;
        file.write_at(0, &encode_header(number))?;
        file.sync()?;
        fs.sync_dir(&name)?;
        Ok::<_, Error>(file)
    })();
    made_segment(fs, made, number, false, &[&name])
}

/// The segment `number` whose making ended with `made`, its file holding old bytes past the
/// header if `stale`. On failure the files `names` are deleted, and the error's flag says
/// whether the failure was ENOSPC and they are gone for sure.
fn made_segment(
    fs: &dyn FileSystem,
    made: Result<Arc<dyn LogFile>>,
    number: u64,
    stale: bool,
    names: &[&str],
) -> Result<Segment, GroupError> {
    match made {
        Ok(file) => Ok(Segment {
            number,
            file,
            len: HEADER_BYTES as u64,
            unsynced: 0,
            stale,
        }),
        Err(e) => {
            let mut gone = Ok(());
            for name in names {
                gone = gone.and_then(|()| fs.delete(name));
            }
            if let Some(name) = names.last() {
                gone = gone.and_then(|()| fs.sync_dir(name));
            }
            if let Err(d) = &gone {
                tracing::warn!(error = %d, segment = number, "could not delete a half-made WAL segment");
            }
            let clean = no_space(&e) && gone.is_ok();
            Err((e, clean))
        }
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        self.close();
    }
}

/// Bytes of a framed end record.
const END_RECORD_BYTES: usize = RECORD_HEADER_BYTES + END_PAYLOAD.len();

/// Appends segment `number`'s end record (rule 8) to `out`.
fn frame_end_record(out: &mut Vec<u8>, number: u64) {
    frame_record(out, number, |o| o.extend_from_slice(END_PAYLOAD));
}

/// Makes the recycled file `old` segment `number`: its header and an end record are written
/// and fsynced before the rename, so a crash leaves either a recycled file or a segment that
/// names itself. Its old records stay past the end record and fail their checksums there
/// (rule 8). A failure is one of creating the segment (see `create_segment`): the file is
/// deleted.
fn reuse_segment(fs: &dyn FileSystem, old: &str, number: u64) -> Result<Segment, GroupError> {
    let name = segment_file_name(number);
    let made = (|| {
        let file = fs.open_log(old)?;
        // The end record goes with the header, so the segment says where its log ends even if
        // the process exits before any group or close marks it: the old records then never
        // read as a torn tail.
        let mut start = encode_header(number).to_vec();
        frame_end_record(&mut start, number);
        file.write_at(0, &start)?;
        file.sync()?;
        fs.rename(old, &name)?;
        fs.sync_dir(&name)?;
        Ok::<_, Error>(file)
    })();
    made_segment(fs, made, number, true, &[old, &name])
}

/// The recycled segments of `fs` (see rule 8), oldest first.
fn recycled_files(fs: &dyn FileSystem) -> Result<Vec<String>> {
    let mut names: Vec<(u64, String)> = fs
        .list()?
        .into_iter()
        .filter_map(|name| Some((parse_recycled_file_name(&name)?, name)))
        .collect();
    names.sort_unstable();
    Ok(names.into_iter().map(|(_, name)| name).collect())
}

/// Deletes the segments of `fs` numbered `through` or lower, in ascending order.
pub(crate) fn delete_segments_through(fs: &dyn FileSystem, through: u64) -> Result<()> {
    let mut last = None;
    for (n, name) in recovery::list_segments(fs)? {
        if n > through {
            break;
        }
        fs.delete(&name)?;
        last = Some(name);
    }
    if let Some(name) = last {
        fs.sync_dir(&name)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
