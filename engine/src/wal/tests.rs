//! Unit tests of the WAL's segment handling and group commit.

use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::batch::WriteBatch;
use crate::table::Table;

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn open(dir: &Path, segment_bytes: u64) -> Result<(Wal, Vec<Vec<u8>>)> {
    let mut seen = Vec::new();
    let wal = Wal::open(dir, segment_bytes, &mut |p, _, _| {
        seen.push(p.to_vec());
        Ok(())
    })?;
    Ok((wal, seen))
}

fn batch(i: u32) -> WriteBatch {
    let t = Table::new(1, Arc::from("t"));
    let mut b = WriteBatch::new();
    b.put(&t, format!("row{i}").as_bytes(), b"c", &[7u8; 40]);
    b
}

fn write_n(wal: &Wal, from: u32, n: u32) -> Result<()> {
    for i in from..from + n {
        wal.commit(Entry::Batch(&batch(i)), false, false, &mut |_| {})?;
    }
    Ok(())
}

#[test]
fn segments_roll_over_and_replay_in_order() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (wal, seen) = open(dir.path(), 200)?;
    assert!(seen.is_empty());
    write_n(&wal, 0, 20)?;
    assert_eq!(wal.stats().batches.load(Ordering::Relaxed), 20);
    drop(wal);
    let segs = recovery::list_segments(&crate::fs::LocalFs::new(dir.path())?)?;
    assert!(
        segs.len() > 3,
        "expected rollover, got {} segments",
        segs.len()
    );
    assert_eq!(segs[0].0, 1);
    let (wal, seen) = open(dir.path(), 200)?;
    assert_eq!(seen.len(), 20);
    for (i, p) in seen.iter().enumerate() {
        let mut want = Vec::new();
        Entry::Batch(&batch(i as u32)).encode(&mut want);
        assert_eq!(p, &want);
    }
    // Appending resumes in the last segment.
    write_n(&wal, 20, 1)?;
    drop(wal);
    assert_eq!(open(dir.path(), 200)?.1.len(), 21);
    Ok(())
}

#[test]
fn damage_before_the_last_segment_is_corruption() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (wal, _) = open(dir.path(), 200)?;
    write_n(&wal, 0, 20)?;
    drop(wal);
    let segs = recovery::list_segments(&crate::fs::LocalFs::new(dir.path())?)?;
    let first = &dir.path().join(&segs[0].1);
    let mut bytes = std::fs::read(first)?;
    let n = bytes.len();
    bytes[n - 3] ^= 1;
    std::fs::write(first, &bytes)?;
    match open(dir.path(), 200) {
        Err(Error::Corruption { file, .. }) => assert!(file.ends_with("wal-0000000000000001.log")),
        other => panic!("expected corruption, got {other:?}"),
    }
    // A missing segment in the middle is corruption too.
    bytes[n - 3] ^= 1;
    std::fs::write(first, &bytes)?;
    std::fs::remove_file(dir.path().join(&segs[1].1))?;
    assert!(matches!(
        open(dir.path(), 200),
        Err(Error::Corruption { .. })
    ));
    Ok(())
}

#[test]
fn torn_header_of_the_last_segment_restarts_it() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (wal, _) = open(dir.path(), 1 << 20)?;
    write_n(&wal, 0, 3)?;
    drop(wal);
    // A crash while creating segment 2.
    let next = dir.path().join(segment_file_name(2));
    std::fs::write(&next, &encode_header(2)[..10])?;
    let (wal, seen) = open(dir.path(), 1 << 20)?;
    assert_eq!(seen.len(), 3);
    assert_eq!(std::fs::metadata(&next)?.len(), HEADER_BYTES as u64);
    write_n(&wal, 3, 1)?;
    drop(wal);
    assert_eq!(open(dir.path(), 1 << 20)?.1.len(), 4);
    Ok(())
}

#[test]
fn torn_tail_is_truncated_and_appending_resumes() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (wal, _) = open(dir.path(), 1 << 20)?;
    write_n(&wal, 0, 3)?;
    drop(wal);
    let path = dir.path().join(segment_file_name(1));
    let len = std::fs::metadata(&path)?.len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)?
        .set_len(len - 5)?;
    let (wal, seen) = open(dir.path(), 1 << 20)?;
    assert_eq!(seen.len(), 2);
    write_n(&wal, 10, 1)?;
    drop(wal);
    assert_eq!(open(dir.path(), 1 << 20)?.1.len(), 3);
    Ok(())
}

#[test]
fn concurrent_commits_are_all_written_and_applied_once() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (wal, _) = open(dir.path(), 4096)?;
    let wal = Arc::new(wal);
    let applied = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let wal = Arc::clone(&wal);
            let applied = Arc::clone(&applied);
            std::thread::spawn(move || -> Result<()> {
                for i in 0..50 {
                    wal.commit(Entry::Batch(&batch(t * 1000 + i)), true, false, &mut |ps| {
                        applied.lock().extend(ps.iter().map(|p| p.to_vec()));
                    })?;
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().map_err(|_| "writer panicked")??;
    }
    let stats = wal.stats();
    assert_eq!(stats.batches.load(Ordering::Relaxed), 200);
    assert!(stats.syncs.load(Ordering::Relaxed) <= 200 + 200);
    drop(wal);
    let (_, seen) = open(dir.path(), 4096)?;
    // Applied in exactly the log's order.
    assert_eq!(*applied.lock(), seen);
    assert_eq!(seen.len(), 200);
    Ok(())
}

#[test]
fn an_unknown_version_in_the_last_segment_is_never_erased() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (wal, _) = open(dir.path(), 1 << 20)?;
    write_n(&wal, 0, 2)?;
    drop(wal);
    let path = dir.path().join(segment_file_name(1));
    let mut bytes = std::fs::read(&path)?;
    bytes[5] = 3;
    let sum = xxhash_rust::xxh3::xxh3_64(&bytes[0..16]);
    bytes[16..24].copy_from_slice(&sum.to_be_bytes());
    std::fs::write(&path, &bytes)?;
    assert!(matches!(
        open(dir.path(), 1 << 20),
        Err(Error::Corruption { offset: 0, .. })
    ));
    assert_eq!(std::fs::read(&path)?, bytes);
    Ok(())
}

/// The payload of `batch(i)`, as the WAL hands it to `apply` and to replay.
fn payload(i: u32) -> Vec<u8> {
    let mut p = Vec::new();
    Entry::Batch(&batch(i)).encode(&mut p);
    p
}

#[test]
fn queued_commits_wait_for_a_leader_and_are_applied_in_order() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (wal, _) = open(dir.path(), 1 << 20)?;
    let applied = parking_lot::Mutex::new(Vec::new());
    let mut apply = |ps: &[&[u8]]| applied.lock().extend(ps.iter().map(|p| p.to_vec()));
    // Nobody leads: each queued record says so, and nothing is written or applied yet.
    for i in 0..3 {
        let stranded = wal.commit(Entry::Batch(&batch(i)), false, true, &mut |_| {
            panic!("a queued commit applied with no leader asked for")
        })?;
        assert!(stranded, "record {i} waits with no leader");
    }
    assert_eq!(wal.stats().batches.load(Ordering::Relaxed), 0);
    assert!(applied.lock().is_empty());
    // A waiting commit leads the queued records' group, its own last.
    assert!(!wal.commit(Entry::Batch(&batch(3)), false, false, &mut apply)?);
    assert_eq!(*applied.lock(), (0..4).map(payload).collect::<Vec<_>>());
    // Queued again, then led by the applier's call; settling with nothing queued is a no-op.
    assert!(wal.commit(Entry::Batch(&batch(4)), false, true, &mut apply)?);
    wal.lead_queued(&mut apply);
    assert!(!wal.settle(&mut apply)?);
    // And by a settle.
    assert!(wal.commit(Entry::Batch(&batch(5)), false, true, &mut apply)?);
    assert!(!wal.settle(&mut apply)?);
    applied_and_replayed_in_order(wal, dir.path(), &applied.lock(), 6)
}

/// Checks that the records `0..n` were applied in order, and replay so after a reopen.
fn applied_and_replayed_in_order(wal: Wal, dir: &Path, applied: &[Vec<u8>], n: u32) -> TestResult {
    let want: Vec<Vec<u8>> = (0..n).map(payload).collect();
    assert_eq!(applied, want);
    drop(wal);
    assert_eq!(open(dir, 1 << 20)?.1, want);
    Ok(())
}

#[test]
fn a_durable_wait_writes_and_leaves_the_apply_to_others_in_log_order() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (wal, _) = open(dir.path(), 1 << 20)?;
    let applied = parking_lot::Mutex::new(Vec::new());
    let mut apply = |ps: &[&[u8]]| applied.lock().extend(ps.iter().map(|p| p.to_vec()));
    let mut no_apply = |_: &[&[u8]]| panic!("a durable wait applied");
    // Two groups written by durable waits: in the log, nothing applied, and the caller told
    // that groups wait for an applier.
    for i in 0..2 {
        assert!(wal.commit(Entry::Batch(&batch(i)), false, true, &mut no_apply)?);
        assert!(wal.wait_written(&mut no_apply)?);
    }
    assert_eq!(wal.stats().batches.load(Ordering::Relaxed), 2);
    assert!(applied.lock().is_empty());
    // A waiting commit behind them applies both groups first, then its own.
    assert!(!wal.commit(Entry::Batch(&batch(2)), false, false, &mut apply)?);
    assert_eq!(*applied.lock(), (0..3).map(payload).collect::<Vec<_>>());
    // A read's catch-up wakes the applier and waits for it to apply what was written; with
    // nothing left it returns at once.
    assert!(wal.commit(Entry::Batch(&batch(3)), false, true, &mut no_apply)?);
    assert!(wal.wait_written(&mut no_apply)?);
    let woken = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| wal.catch_up(&|| woken.store(true, Ordering::Release)));
        while !woken.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        wal.lead_queued(&mut apply);
        reader.join().map_err(|_| "the reader panicked")
    })?;
    wal.catch_up(&|| panic!("woke the applier with nothing to apply"));
    // The applier's call applies written groups and writes queued records.
    assert!(wal.commit(Entry::Batch(&batch(4)), false, true, &mut no_apply)?);
    assert!(wal.wait_written(&mut no_apply)?);
    assert!(wal.commit(Entry::Batch(&batch(5)), false, true, &mut no_apply)?);
    wal.lead_queued(&mut apply);
    assert!(!wal.settle(&mut no_apply)?);
    let applied = applied.lock().clone();
    applied_and_replayed_in_order(wal, dir.path(), &applied, 6)
}

/// A freeze asked for by an applier waits until the memtable holds the log exactly: it
/// happens (as `apply` with no payloads) only after every written group is applied, and
/// before the next group is written.
#[test]
fn a_wanted_freeze_comes_between_groups() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (wal, _) = open(dir.path(), 1 << 20)?;
    let events = parking_lot::Mutex::new(Vec::new());
    let mut apply = |ps: &[&[u8]]| {
        let mut e = events.lock();
        if ps.is_empty() {
            e.push(format!(
                "freeze after {}",
                wal.stats().batches.load(Ordering::Relaxed)
            ));
        } else {
            e.push(format!("apply {}", ps.len()));
        }
    };
    let mut no_apply = |_: &[&[u8]]| panic!("a durable wait applied");
    assert!(wal.commit(Entry::Batch(&batch(0)), false, true, &mut no_apply)?);
    assert!(wal.wait_written(&mut no_apply)?);
    wal.want_freeze();
    // The next group's writer applies the group before, freezes, then writes.
    assert!(!wal.commit(Entry::Batch(&batch(1)), false, false, &mut apply)?);
    assert_eq!(
        *events.lock(),
        ["apply 1", "freeze after 1", "apply 1"].map(String::from)
    );
    // Asked for while a group waits to be applied, and no one writes: the applier freezes
    // right after applying it.
    assert!(wal.commit(Entry::Batch(&batch(2)), false, true, &mut no_apply)?);
    assert!(wal.wait_written(&mut no_apply)?);
    wal.want_freeze();
    wal.lead_queued(&mut apply);
    assert_eq!(events.lock().len(), 5);
    assert_eq!(events.lock()[4], "freeze after 3");
    Ok(())
}

#[test]
fn a_queued_commit_past_the_queue_limit_leads_itself() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (wal, _) = open(dir.path(), 64 << 20)?;
    let mut applied = 0usize;
    let mut queued = 0u32;
    // Each record is about 60 bytes: the limit is reached after tens of thousands.
    loop {
        let stranded = wal.commit(Entry::Batch(&batch(queued)), false, true, &mut |ps| {
            applied += ps.len()
        })?;
        queued += 1;
        if !stranded {
            break;
        }
        assert!(
            queued as usize * 40 < 2 * QUEUE_LIMIT_BYTES,
            "still only queued after {queued} records"
        );
    }
    // The record that went past the limit wrote and applied the whole queue.
    assert_eq!(applied, queued as usize);
    assert_eq!(
        wal.stats().batches.load(Ordering::Relaxed),
        u64::from(queued)
    );
    Ok(())
}

#[test]
fn a_synced_commit_never_stays_queued() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (wal, _) = open(dir.path(), 1 << 20)?;
    let mut applied = 0;
    assert!(
        !wal.commit(Entry::Batch(&batch(0)), true, true, &mut |ps| applied +=
            ps.len())?
    );
    assert_eq!(applied, 1);
    assert_eq!(wal.stats().syncs.load(Ordering::Relaxed), 1);
    Ok(())
}

/// Concurrent committers while appends fail with ENOSPC now and then: each committer of a
/// refused group gets the error, every other one succeeds, the WAL does not fail, and the log
/// replays exactly the records that succeeded, in the order they were applied.
#[test]
fn refused_groups_fail_exactly_their_committers() -> TestResult {
    use crate::fs::fault::{Fault, FaultError, FaultFile, FaultOp, Faults};

    let dir = tempfile::tempdir()?;
    let faults = Faults::new();
    let fs = faults.wrap(Arc::new(crate::fs::LocalFs::new(dir.path())?));
    let wal = Arc::new(Wal::open_from(fs, 2048, 1, &mut |_, _, _| Ok(()))?);
    for after in [3, 10, 17, 40, 41, 90] {
        faults.arm(
            Fault::new(FaultOp::Write, FaultError::NoSpace)
                .on(FaultFile::Wal)
                .after(after)
                .torn(),
        );
    }
    let applied = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let wal = Arc::clone(&wal);
            let applied = Arc::clone(&applied);
            std::thread::spawn(move || {
                let mut ok = Vec::new();
                let mut refused = 0;
                for i in 0..60 {
                    let b = batch(t * 1000 + i);
                    let r = wal.commit(Entry::Batch(&b), i % 7 == 0, false, &mut |ps| {
                        applied.lock().extend(ps.iter().map(|p| p.to_vec()));
                    });
                    match r {
                        Ok(_) => ok.push(payload(t * 1000 + i)),
                        Err(e) => {
                            assert!(no_space(&e), "{e}");
                            refused += 1;
                        }
                    }
                }
                (ok, refused)
            })
        })
        .collect();
    let mut ok = Vec::new();
    let mut refused = 0;
    for t in threads {
        let (o, r) = t.join().map_err(|_| "committer panicked")?;
        ok.extend(o);
        refused += r;
    }
    assert!(!wal.has_failed());
    assert!(refused > 0);
    assert_eq!(wal.stats().refused.load(Ordering::Relaxed), refused);
    drop(wal);
    let (_, seen) = open(dir.path(), 2048)?;
    assert_eq!(*applied.lock(), seen, "replayed as applied");
    let (mut seen, mut ok) = (seen, ok);
    seen.sort();
    ok.sort();
    assert_eq!(seen, ok, "replayed exactly the records that succeeded");
    Ok(())
}

/// A batch of `puts` cells of 40 bytes each: about 60 bytes a cell.
fn big_batch(i: u32, puts: u32) -> WriteBatch {
    let t = Table::new(1, Arc::from("t"));
    let mut b = WriteBatch::new();
    for k in 0..puts {
        b.put(&t, format!("row{i}.{k}").as_bytes(), b"c", &[i as u8; 40]);
    }
    b
}

#[test]
fn taken_batches_are_logged_as_copied_ones_and_lend_their_buffers_on() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (wal, _) = open(dir.path(), 64 << 20)?;
    let applied = parking_lot::Mutex::new(Vec::new());
    let mut apply = |ps: &[&[u8]]| applied.lock().extend(ps.iter().map(|p| p.to_vec()));
    // Small and large records in one group: runs of small ones are copied into the queue and
    // written together, large taken ones written from the batch's own buffer, all back to
    // back in ticket order.
    let batches: Vec<WriteBatch> = (0..7)
        .map(|i| match i % 3 {
            0 => big_batch(i, 2000),
            _ => batch(i),
        })
        .collect();
    assert!(batches[0].approximate_bytes() >= TAKE_FROM);
    let mut want = Vec::new();
    for (i, b) in batches.iter().enumerate() {
        let mut p = Vec::new();
        Entry::Batch(b).encode(&mut p);
        want.push(p);
        if i % 2 == 0 {
            let mut taken = b.clone();
            assert!(wal.commit_batch(&mut taken, false, true, &mut apply)?);
            assert!(taken.is_empty(), "a taken batch is left empty");
        } else {
            assert!(wal.commit(Entry::Batch(b), false, true, &mut apply)?);
        }
    }
    assert!(!wal.settle(&mut apply)?);
    assert_eq!(*applied.lock(), want);
    // A small batch is copied and keeps its own buffer; a large one is left with the buffer
    // of a large batch written before.
    let mut small = batch(7);
    let own = small.capacity();
    let mut large = big_batch(8, 2000);
    for b in [&small, &large] {
        let mut p = Vec::new();
        Entry::Batch(b).encode(&mut p);
        want.push(p);
    }
    assert!(!wal.commit_batch(&mut small, false, false, &mut apply)?);
    assert!(small.is_empty());
    assert_eq!(small.capacity(), own);
    assert!(!wal.commit_batch(&mut large, false, false, &mut apply)?);
    assert!(large.is_empty());
    assert!(
        large.capacity() >= TAKE_FROM,
        "capacity {}",
        large.capacity()
    );
    assert_eq!(*applied.lock(), want);
    drop(wal);
    assert_eq!(open(dir.path(), 64 << 20)?.1, want);
    Ok(())
}

/// The record seed of the segment `file`.
fn segment_seed(file: &[u8]) -> std::result::Result<u64, String> {
    segment::decode_header(file)
        .map(|h| h.seed)
        .map_err(|e| format!("{e:?}"))
}

/// The names in `dir` of the segments and of the recycled files, each sorted.
fn wal_files(dir: &Path) -> std::io::Result<(Vec<String>, Vec<String>)> {
    let mut segments = Vec::new();
    let mut recycled = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let name = e?.file_name().to_string_lossy().into_owned();
        if name.starts_with("wal-") {
            segments.push(name);
        } else if name.starts_with("recycled-") {
            recycled.push(name);
        }
    }
    segments.sort();
    recycled.sort();
    Ok((segments, recycled))
}

/// A WAL in `dir` whose current segment is a recycled file holding one new record, the
/// last returned, with old records past it; and that segment's path. Records 0..20 are
/// covered first, then records from 20 on are written until one lands in a recycled file.
fn into_a_recycled_segment(
    dir: &Path,
) -> Result<(Wal, u32, std::path::PathBuf), Box<dyn std::error::Error>> {
    let (mut wal, _) = open(dir, 200)?;
    wal.set_recycle_limit(2);
    write_n(&wal, 0, 20)?;
    let (segments, _) = wal_files(dir)?;
    assert!(segments.len() > 4, "{segments:?}");
    wal.delete_segments_through(u64::MAX)?;
    let (segments, recycled) = wal_files(dir)?;
    assert_eq!(segments.len(), 1, "only the current segment is left");
    assert_eq!(recycled.len(), 2, "the newest covered ones are kept");
    let first_kept = segments[0].clone();
    let mut last = 20;
    loop {
        write_n(&wal, last, 1)?;
        if wal_files(dir)?.1.len() == 1 {
            break;
        }
        last += 1;
        assert!(last < 30, "no roll took a recycled file");
    }
    let (segments, _) = wal_files(dir)?;
    let current = dir.join(segments.last().ok_or("no segment")?);
    let written = HEADER_BYTES + RECORD_HEADER_BYTES + payload(last).len();
    assert!(
        std::fs::metadata(&current)?.len() > written as u64,
        "the recycled file has its old records past the new one"
    );
    assert_eq!(segments[0], first_kept);
    Ok((wal, last, current))
}

/// After a clean close (`crash` false) or none, a log whose current segment is a recycled
/// file replays a run of records ending with the newest and starting in the segment that was
/// current when the others were covered, never one of the recycled file's old records.
fn recycled_files_replay_only_their_new_records(crash: bool) -> TestResult {
    let dir = tempfile::tempdir()?;
    let (wal, last, current) = into_a_recycled_segment(dir.path())?;
    if crash {
        // No clean close: the current segment keeps its old records past its end.
        std::mem::forget(wal);
    } else {
        // A close marks where the log ends, and cuts nothing off.
        let len = std::fs::metadata(&current)?.len();
        drop(wal);
        assert_eq!(std::fs::metadata(&current)?.len(), len);
        let file = std::fs::read(&current)?;
        let records: Vec<&[u8]> = segment::RecordIter::new(&file, segment_seed(&file)?).collect();
        assert_eq!(records, [&payload(last)[..], END_PAYLOAD]);
    }
    let (_, seen) = open(dir.path(), 200)?;
    let start = (0..20)
        .find(|&i| seen.first() == Some(&payload(i)))
        .ok_or("the log does not start with one of records 0..20")?;
    assert!(start > 0);
    let want: Vec<Vec<u8>> = (start..=last).map(payload).collect();
    assert_eq!(seen, want);
    Ok(())
}

#[test]
fn recycled_files_replay_only_their_new_records_after_a_close() -> TestResult {
    recycled_files_replay_only_their_new_records(false)
}

#[test]
fn recycled_files_replay_only_their_new_records_after_a_crash() -> TestResult {
    recycled_files_replay_only_their_new_records(true)
}

#[test]
fn dropping_recycled_files_cuts_the_old_bytes_off_the_current_segment() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (wal, last, current) = into_a_recycled_segment(dir.path())?;
    wal.drop_recycled()?;
    let written = HEADER_BYTES + RECORD_HEADER_BYTES + payload(last).len();
    assert_eq!(std::fs::metadata(&current)?.len(), written as u64);
    assert!(wal_files(dir.path())?.1.is_empty());
    // The segment is now read to its end, as a new one: a close adds no end record.
    write_n(&wal, last + 1, 1)?;
    drop(wal);
    let file = std::fs::read(&current)?;
    let records: Vec<&[u8]> = segment::RecordIter::new(&file, segment_seed(&file)?).collect();
    assert_eq!(records, [&payload(last)[..], &payload(last + 1)[..]]);
    let (_, seen) = open(dir.path(), 200)?;
    assert_eq!(seen.last(), Some(&payload(last + 1)));
    assert_eq!(seen.iter().filter(|p| **p == payload(last)).count(), 1);
    Ok(())
}

#[test]
fn recycled_files_outlive_a_reopen_until_dropped() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (mut wal, _) = open(dir.path(), 200)?;
    wal.set_recycle_limit(3);
    write_n(&wal, 0, 20)?;
    wal.delete_segments_through(u64::MAX)?;
    drop(wal);
    assert_eq!(wal_files(dir.path())?.1.len(), 3);
    let (mut wal, _) = open(dir.path(), 200)?;
    wal.set_recycle_limit(3);
    write_n(&wal, 20, 4)?;
    let (segments, recycled) = wal_files(dir.path())?;
    assert_eq!(
        recycled.len() + segments.len(),
        4,
        "rolls took recycled files"
    );
    assert!(recycled.len() < 3);
    wal.drop_recycled()?;
    assert!(wal_files(dir.path())?.1.is_empty());
    write_n(&wal, 24, 4)?;
    drop(wal);
    let (_, seen) = open(dir.path(), 200)?;
    assert_eq!(seen.last(), Some(&payload(27)));
    Ok(())
}

#[test]
fn a_lower_limit_at_open_deletes_the_extra_recycled_files() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (mut wal, _) = open(dir.path(), 200)?;
    wal.set_recycle_limit(3);
    write_n(&wal, 0, 20)?;
    wal.delete_segments_through(u64::MAX)?;
    drop(wal);
    let (mut wal, _) = open(dir.path(), 200)?;
    wal.set_recycle_limit(1);
    assert_eq!(wal_files(dir.path())?.1.len(), 1);
    wal.set_recycle_limit(0);
    assert!(wal_files(dir.path())?.1.is_empty());
    Ok(())
}

/// A segment made from a recycled file ends at an end record before anything is written to
/// it: a process that exits before its next group or its close (a worker thread still holding
/// the database, say) leaves a log that ends there, not one with a torn tail of old records.
#[test]
fn a_new_recycled_segment_ends_at_its_end_record_before_any_write() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (mut wal, _) = open(dir.path(), 200)?;
    wal.set_recycle_limit(2);
    write_n(&wal, 0, 20)?;
    wal.delete_segments_through(u64::MAX)?;
    let number = wal.roll_now()?;
    assert_eq!(
        wal_files(dir.path())?.1.len(),
        1,
        "the roll took a recycled file"
    );
    std::mem::forget(wal);
    let file = std::fs::read(dir.path().join(segment_file_name(number)))?;
    assert!(
        file.len() > HEADER_BYTES + RECORD_HEADER_BYTES + END_PAYLOAD.len(),
        "old bytes follow"
    );
    let mut it = segment::RecordIter::new(&file, segment_seed(&file)?);
    assert_eq!(it.next(), Some(END_PAYLOAD));
    let (_, seen) = open(dir.path(), 200)?;
    assert_eq!(seen.last(), Some(&payload(19)));
    Ok(())
}

#[test]
fn a_recycled_segment_before_the_last_ends_at_its_end_record() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (mut wal, _) = open(dir.path(), 200)?;
    wal.set_recycle_limit(2);
    let mut want = Vec::new();
    // Records larger than the ones after, one a segment: each recycled file keeps old bytes
    // past what its next use writes.
    for i in 0..10 {
        wal.commit(Entry::Batch(&big_batch(i, 3)), false, false, &mut |_| {})?;
    }
    wal.delete_segments_through(u64::MAX)?;
    let mut last = 20;
    while !wal_files(dir.path())?.1.is_empty() {
        write_n(&wal, last, 1)?;
        last += 1;
        assert!(last < 30, "no roll took both recycled files");
    }
    write_n(&wal, last, 1)?;
    let (segments, _) = wal_files(dir.path())?;
    assert_eq!(segments.len(), 3, "{segments:?}");
    let middle = std::fs::read(dir.path().join(&segments[1]))?;
    let records: Vec<&[u8]> = segment::RecordIter::new(&middle, segment_seed(&middle)?).collect();
    assert_eq!(records.last(), Some(&END_PAYLOAD));
    let used: usize = records.iter().map(|p| RECORD_HEADER_BYTES + p.len()).sum();
    assert!(
        middle.len() > HEADER_BYTES + used,
        "old bytes follow the end record"
    );
    // A crash: no close cuts anything.
    std::mem::forget(wal);
    let mut p = Vec::new();
    Entry::Batch(&big_batch(9, 3)).encode(&mut p);
    want.push(p);
    want.extend((20..=last).map(payload));
    let (_, seen) = open(dir.path(), 200)?;
    assert_eq!(seen, want);
    Ok(())
}

#[test]
fn a_flush_keeps_as_many_recycled_files_as_it_covered() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (mut wal, _) = open(dir.path(), 200)?;
    wal.set_recycle_limit(16);
    write_n(&wal, 0, 20)?;
    let covered = wal_files(dir.path())?.0.len() - 1;
    assert!(covered > 3, "{covered}");
    wal.delete_segments_through(u64::MAX)?;
    assert_eq!(wal_files(dir.path())?.1.len(), covered);
    // A memtable whose log took one segment: one recycled file is enough for the next.
    let before = wal_files(dir.path())?.0.len();
    while wal_files(dir.path())?.0.len() == before {
        write_n(&wal, 20, 1)?;
    }
    wal.delete_segments_through(u64::MAX)?;
    let (segments, recycled) = wal_files(dir.path())?;
    assert_eq!((segments.len(), recycled.len()), (1, 1));
    Ok(())
}

/// The background syncer of a long interval syncs once enough bytes are written, and not for
/// fewer: a segment roll then has little to write out while every writer waits for it.
#[test]
fn the_syncer_syncs_early_once_enough_is_written() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (wal, _) = open(dir.path(), 1 << 30)?;
    let wal = Arc::new(wal);
    Wal::spawn_syncer(&wal, Duration::from_secs(3600))?;
    let syncs = || wal.stats().syncs.load(Ordering::Relaxed);
    let opened = syncs();
    // Each batch of 2000 puts is about 100 KB.
    let per_batch = big_batch(0, 2000).data().len() as u64;
    let below = SYNC_AHEAD_BYTES / per_batch - 1;
    for _ in 0..below {
        wal.commit_batch(&mut big_batch(0, 2000), false, false, &mut |_| {})?;
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        syncs(),
        opened,
        "synced before the bytes or the interval called for it"
    );
    for _ in 0..3 {
        wal.commit_batch(&mut big_batch(0, 2000), false, false, &mut |_| {})?;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while syncs() == opened {
        assert!(std::time::Instant::now() < deadline, "no early sync");
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}
