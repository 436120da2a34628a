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
//! |   4B   | u16 = 1 | u16 = 0  |       u64       |       u64       |
//! +--------+---------+----------+-----------------+-----------------+
//! ```
//!
//! It is checked in the order magic, checksum, version, reserved bits, then the number is
//! compared with the file name. Records follow back to back up to the end of the file:
//!
//! ```text
//! +-------------+----------------------------+-------------------+
//! | length  u32 | xxh3_64(length ++ payload) | payload           |
//! |             |            u64             | `length` bytes    |
//! +-------------+----------------------------+-------------------+
//! ```
//!
//! `length` is 1 ..= 2^30. The checksum covers the 4 length bytes and the payload, so a record
//! is either whole and valid or rejected. The payload's first byte is its type:
//!
//! - `1`, table creation: `1 | table id (varint) | table name (UTF-8, rest of the payload)`.
//! - `2`, write batch: `2 | op count (varint) | ops`, the ops encoded as in `batch.rs`: each is
//!   `kind u8 | table varint | row len varint | row | [column len varint | column] |
//!   [value len varint | value]` (column for put and delete, value for put only). The count
//!   must match the ops exactly, with no trailing bytes.
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

mod entry;
pub(crate) mod recovery;
pub(crate) mod segment;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::error::{Error, Result};

pub(crate) use entry::{DecodedEntry, Entry, decode_entry};
use segment::{HEADER_BYTES, MAX_PAYLOAD_BYTES, encode_header, frame_record, segment_file_name};

/// Queued records past this many bytes make [`Wal::commit`] wait even when asked only to
/// queue: a bound on the memory and on how far the applied state trails the queue.
const QUEUE_LIMIT_BYTES: usize = 4 << 20;

/// Counters of the WAL.
#[derive(Debug, Default)]
pub(crate) struct WalStats {
    /// Bytes appended, headers included.
    pub(crate) bytes: AtomicU64,
    /// Fsyncs of segment files.
    pub(crate) syncs: AtomicU64,
    /// Batch records written.
    pub(crate) batches: AtomicU64,
}

/// The open write-ahead log.
pub(crate) struct Wal {
    dir: PathBuf,
    segment_bytes: u64,
    queue: Mutex<Queue>,
    queue_cv: Condvar,
    out: Mutex<Segment>,
    stats: WalStats,
}

/// The segment being appended to. Only the commit leader, `sync` and the background syncer
/// lock it.
#[derive(Debug)]
struct Segment {
    number: u64,
    path: PathBuf,
    file: Arc<File>,
    len: u64,
    /// Bytes were written since the last fsync.
    dirty: bool,
}

/// Records waiting for the next group commit.
#[derive(Debug, Default)]
struct Queue {
    /// Framed records, back to back.
    buf: Vec<u8>,
    /// Each record's payload range in `buf`.
    payloads: Vec<Range<usize>>,
    /// Number of batch records in `buf`.
    batches: u64,
    /// Some waiter needs an fsync.
    sync: bool,
    /// Ticket of the next record to be queued.
    next_ticket: u64,
    /// Every ticket below this has been committed (or failed).
    done: u64,
    /// A leader is writing a group.
    leader: bool,
    /// After a failed write, tickets from this one on fail, and so does every later commit.
    failed: Option<(u64, String)>,
    /// The buffers of the group before, emptied, for the next group to queue into: fresh ones
    /// would fault their pages in again as they grow.
    spare: (Vec<u8>, Vec<Range<usize>>),
}

impl Wal {
    /// Opens the WAL in `dir`, replaying every good record into `apply` in order (see the
    /// module rules), and prepares the last segment for appending.
    #[cfg(test)]
    pub(crate) fn open(
        dir: &Path,
        segment_bytes: u64,
        apply: &mut recovery::ReplayFn<'_>,
    ) -> Result<Wal> {
        Wal::open_from(dir, segment_bytes, 1, apply)
    }

    /// Like `open`, but an empty log starts at segment `first` rather than 1.
    pub(crate) fn open_from(
        dir: &Path,
        segment_bytes: u64,
        first: u64,
        apply: &mut recovery::ReplayFn<'_>,
    ) -> Result<Wal> {
        let tail = recovery::recover(dir, apply)?;
        let out = match tail {
            None => create_segment(dir, first.max(1))?,
            Some(t) if t.good_len == 0 => create_segment(dir, t.number)?,
            Some(t) => {
                let file = OpenOptions::new()
                    .write(true)
                    .open(&t.path)
                    .map_err(|e| Error::io(format!("opening {}", t.path.display()), e))?;
                if t.truncate {
                    file.set_len(t.good_len)
                        .and_then(|()| file.sync_all())
                        .map_err(|e| Error::io(format!("truncating {}", t.path.display()), e))?;
                }
                let mut file = file;
                std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(t.good_len))
                    .map_err(|e| Error::io(format!("seeking {}", t.path.display()), e))?;
                Segment {
                    number: t.number,
                    path: t.path,
                    file: Arc::new(file),
                    len: t.good_len,
                    dirty: false,
                }
            }
        };
        Ok(Wal {
            dir: dir.to_path_buf(),
            segment_bytes,
            queue: Mutex::new(Queue::default()),
            queue_cv: Condvar::new(),
            out: Mutex::new(out),
            stats: WalStats::default(),
        })
    }

    /// The WAL's counters.
    pub(crate) fn stats(&self) -> &WalStats {
        &self.stats
    }

    /// Bytes of records queued and not yet taken by a group.
    pub(crate) fn queued_bytes(&self) -> u64 {
        self.queue.lock().buf.len() as u64
    }

    /// Appends `entry`. Returns once it is written (and fsynced when `sync`), or with
    /// `queue` (and not `sync`) once it waits in the queue while its queue is not too long:
    /// it is written and applied later, in order, by the current commit leader or, when this
    /// returns true, by whoever [`Wal::lead_queued`] next (the caller's applier, to be woken).
    ///
    /// Concurrent callers are grouped: the first waiter becomes the leader, writes every queued
    /// record with one write and at most one fsync, then calls its `apply` with every payload
    /// of the group in log order, while still leader, so that the in-memory state is updated
    /// in exactly the log's order. Followers return once their group is done. After a failed
    /// write the WAL's state on disk is unknown, so every later commit fails.
    pub(crate) fn commit(
        &self,
        entry: Entry<'_>,
        sync: bool,
        queue: bool,
        apply: &mut dyn FnMut(&[&[u8]]),
    ) -> Result<bool> {
        if entry.max_encoded_len() > MAX_PAYLOAD_BYTES {
            return Err(Error::InvalidArgument(format!(
                "write batch of about {} bytes exceeds the limit of {MAX_PAYLOAD_BYTES}",
                entry.max_encoded_len()
            )));
        }
        let mut q = self.queue.lock();
        if let Some((_, msg)) = &q.failed {
            return Err(Error::Closed(msg.clone()));
        }
        let ticket = q.next_ticket;
        q.next_ticket += 1;
        let range = frame_record(&mut q.buf, |out| entry.encode(out));
        q.payloads.push(range);
        q.batches += u64::from(entry.is_batch());
        q.sync |= sync;
        if queue && !sync && q.buf.len() <= QUEUE_LIMIT_BYTES {
            return Ok(!q.leader);
        }
        self.wait_or_lead(q, ticket, apply)
    }

    /// Waits until every record queued so far is written and applied, leading their groups
    /// if no one else does. Fails if one of them failed. Returns true if records queued
    /// meanwhile wait with no leader (see [`Wal::commit`]).
    pub(crate) fn settle(&self, apply: &mut dyn FnMut(&[&[u8]])) -> Result<bool> {
        let q = self.queue.lock();
        match q.next_ticket.checked_sub(1) {
            Some(last) if q.done <= last => self.wait_or_lead(q, last, apply),
            _ => Ok(false),
        }
    }

    /// Writes and applies queued records, group after group, until the queue is empty;
    /// returns at once if another caller leads.
    pub(crate) fn lead_queued(&self, apply: &mut dyn FnMut(&[&[u8]])) {
        let mut q = self.queue.lock();
        while !q.leader && q.done < q.next_ticket {
            q = self.run_group(q, apply);
        }
    }

    /// Waits until `ticket` is done, leading its group if no one else leads. Returns its
    /// outcome, and whether records queued after it now wait with no leader.
    fn wait_or_lead<'a>(
        &'a self,
        mut q: MutexGuard<'a, Queue>,
        ticket: u64,
        apply: &mut dyn FnMut(&[&[u8]]),
    ) -> Result<bool> {
        while q.leader && q.done <= ticket {
            self.queue_cv.wait(&mut q);
        }
        if q.done <= ticket {
            // No leader and our record still queued: lead its group (it holds every queued
            // record, so ours too).
            q = self.run_group(q, apply);
        }
        match &q.failed {
            Some((from, msg)) if *from <= ticket => Err(Error::Closed(msg.clone())),
            _ => Ok(!q.leader && q.done < q.next_ticket),
        }
    }

    /// Leads one group: every record queued now. Call with no leader active. Returns with the
    /// queue locked again and leadership given up.
    fn run_group<'a>(
        &'a self,
        mut q: MutexGuard<'a, Queue>,
        apply: &mut dyn FnMut(&[&[u8]]),
    ) -> MutexGuard<'a, Queue> {
        if q.failed.is_some() {
            // Queued while the failing group was written: fail everything still queued.
            q.done = q.next_ticket;
            q.buf.clear();
            q.payloads.clear();
            q.batches = 0;
            q.sync = false;
            self.queue_cv.notify_all();
            return q;
        }
        q.leader = true;
        let first = q.done;
        let upto = q.next_ticket;
        let (spare_buf, spare_payloads) = std::mem::take(&mut q.spare);
        let buf = std::mem::replace(&mut q.buf, spare_buf);
        let payloads = std::mem::replace(&mut q.payloads, spare_payloads);
        let batches = std::mem::take(&mut q.batches);
        let group_sync = std::mem::take(&mut q.sync);
        drop(q);

        let result = self.write_group(&buf, group_sync, batches);
        if result.is_ok() {
            let slices: Vec<&[u8]> = payloads.iter().map(|r| &buf[r.clone()]).collect();
            apply(&slices);
        }

        let mut q = self.queue.lock();
        q.leader = false;
        q.done = upto;
        if let Err(e) = &result {
            tracing::error!(error = %e, "WAL write failed; refusing further writes");
            q.failed = Some((first, format!("WAL write failed: {e}")));
        } else if q.spare.0.capacity() < buf.capacity() {
            let (mut buf, mut payloads) = (buf, payloads);
            buf.clear();
            payloads.clear();
            q.spare = (buf, payloads);
        }
        self.queue_cv.notify_all();
        q
    }

    fn write_group(&self, buf: &[u8], sync: bool, batches: u64) -> Result<()> {
        let mut out = self.out.lock();
        if out.len > HEADER_BYTES as u64 && out.len + buf.len() as u64 > self.segment_bytes {
            self.roll(&mut out)?;
        }
        (&*out.file)
            .write_all(buf)
            .map_err(|e| Error::io(format!("appending to {}", out.path.display()), e))?;
        out.len += buf.len() as u64;
        out.dirty = true;
        self.stats
            .bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.stats.batches.fetch_add(batches, Ordering::Relaxed);
        if sync {
            self.sync_locked(&mut out)?;
        }
        Ok(())
    }

    /// Starts segment `number + 1` (rule 2).
    fn roll(&self, out: &mut Segment) -> Result<()> {
        // Always fsync, even if not dirty: the background syncer may have cleared the flag
        // while its fsync is still running.
        self.sync_locked(out)?;
        let next = create_segment(&self.dir, out.number + 1)?;
        self.stats
            .bytes
            .fetch_add(HEADER_BYTES as u64, Ordering::Relaxed);
        tracing::debug!(segment = next.number, "started WAL segment");
        *out = next;
        Ok(())
    }

    fn sync_locked(&self, out: &mut Segment) -> Result<()> {
        out.file
            .sync_data()
            .map_err(|e| Error::io(format!("fsyncing {}", out.path.display()), e))?;
        out.dirty = false;
        self.stats.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Runs `f` while no group is being written or applied: `f` holds the commit leadership,
    /// so the in-memory state matches the log exactly while it runs.
    pub(crate) fn quiesce<R>(&self, f: impl FnOnce() -> R) -> R {
        let mut q = self.queue.lock();
        while q.leader {
            self.queue_cv.wait(&mut q);
        }
        q.leader = true;
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
        let mut out = self.out.lock();
        self.roll(&mut out)?;
        Ok(out.number)
    }

    /// Deletes every segment numbered `through` or lower, except the current one, in
    /// ascending order, then fsyncs the directory.
    pub(crate) fn delete_segments_through(&self, through: u64) -> Result<()> {
        let current = self.out.lock().number;
        delete_segments_through(&self.dir, through.min(current.saturating_sub(1)))
    }

    /// Fsyncs everything written so far.
    pub(crate) fn sync(&self) -> Result<()> {
        let mut out = self.out.lock();
        self.sync_locked(&mut out)
    }

    /// Fsyncs if anything was written since the last fsync, without blocking writers during
    /// the fsync.
    fn sync_if_dirty(&self) -> Result<()> {
        let (file, path) = {
            let mut out = self.out.lock();
            if !out.dirty {
                return Ok(());
            }
            // A write after this point sets `dirty` again, so it is never skipped.
            out.dirty = false;
            (Arc::clone(&out.file), out.path.clone())
        };
        if let Err(e) = file.sync_data() {
            self.out.lock().dirty = true;
            return Err(Error::io(format!("fsyncing {}", path.display()), e));
        }
        self.stats.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Starts a thread that fsyncs every `interval` while `wal` is alive.
    pub(crate) fn spawn_syncer(wal: &Arc<Wal>, interval: Duration) -> Result<()> {
        let weak: Weak<Wal> = Arc::downgrade(wal);
        std::thread::Builder::new()
            .name("strata-wal-sync".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(interval);
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
            .field("dir", &self.dir)
            .field("segment_bytes", &self.segment_bytes)
            .field("segment", &self.out.try_lock().map(|o| o.number))
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// Creates (or recreates) segment `number` holding just its header, durably.
fn create_segment(dir: &Path, number: u64) -> Result<Segment> {
    let path = dir.join(segment_file_name(number));
    let io = |e| Error::io(format!("creating {}", path.display()), e);
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&path)
        .map_err(io)?;
    file.write_all(&encode_header(number)).map_err(io)?;
    file.sync_all().map_err(io)?;
    sync_dir(dir)?;
    Ok(Segment {
        number,
        path,
        file: Arc::new(file),
        len: HEADER_BYTES as u64,
        dirty: false,
    })
}

/// Deletes the segments of `dir` numbered `through` or lower, in ascending order.
pub(crate) fn delete_segments_through(dir: &Path, through: u64) -> Result<()> {
    let mut any = false;
    for (n, path) in recovery::list_segments(dir)? {
        if n > through {
            break;
        }
        std::fs::remove_file(&path)
            .map_err(|e| Error::io(format!("deleting {}", path.display()), e))?;
        any = true;
    }
    if any {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Fsyncs a directory so that a file created in it survives a crash.
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format!("fsyncing directory {}", dir.display()), e))
}

#[cfg(test)]
mod tests;
