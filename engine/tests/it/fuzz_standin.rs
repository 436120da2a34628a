//! A stable-toolchain stand-in for the `read_sst` and `wal_replay` cargo-fuzz targets in
//! `fuzz/`: bounded proptest runs over arbitrary bytes and over mutations of valid files
//! (flipped bytes, truncations, inserted and deleted bytes), read raw and with their
//! checksums rewritten so the decoders behind them are reached. Nothing may panic and the
//! only error is `Error::Corruption`; a single flip or cut of a valid SST is always caught,
//! and a damaged WAL segment replays to a prefix of its records.

use std::path::Path;
use std::sync::OnceLock;

use proptest::prelude::*;
use strata_engine::{
    Compression, Db, Error, FilterMode, SyncPolicy, TableOptions, WalReplay, WriteBatch,
    fuzz_fix_sst_checksums, fuzz_fix_wal_checksums, fuzz_read_sst, fuzz_replay_wal,
};

use crate::{TestResult, options, segments, tables, test_batch};

/// Cases per property: each kind of mutation is drawn many times, and the file stays a few
/// seconds in CI.
const CASES: u32 = 192;

const SST_V1: &[u8] = include_bytes!("../../src/sst/fixtures/v1.sst");
const SST_V2: &[u8] = include_bytes!("../../src/sst/fixtures/v2.sst");
const WAL_V1: &[u8] = include_bytes!("../fixtures/wal-v1/wal-0000000000000001.log");

/// One edit of a byte string.
#[derive(Debug, Clone)]
enum Mutation {
    Flip { at: usize, bit: u8 },
    Set { at: usize, byte: u8 },
    Insert { at: usize, byte: u8 },
    Delete { at: usize },
    Truncate { at: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        (
            any::<usize>(),
            prop_oneof![Just(0u8), Just(0x80), Just(0xff), any::<u8>()]
        )
            .prop_map(|(at, byte)| Mutation::Set { at, byte }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Insert { at, byte }),
        any::<usize>().prop_map(|at| Mutation::Delete { at }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
    ]
}

fn apply(data: &mut Vec<u8>, m: &Mutation) {
    let n = data.len();
    match *m {
        Mutation::Flip { at, bit } if n > 0 => data[at % n] ^= 1 << bit,
        Mutation::Set { at, byte } if n > 0 => data[at % n] = byte,
        Mutation::Insert { at, byte } => data.insert(at % (n + 1), byte),
        Mutation::Delete { at } if n > 0 => {
            data.remove(at % n);
        }
        Mutation::Truncate { at } => data.truncate(at % (n + 1)),
        _ => {}
    }
}

fn mutated(base: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut data = base.to_vec();
    for m in mutations {
        apply(&mut data, m);
    }
    data
}

/// Reads `bytes` as an SST, raw and with its checksums rewritten; only corruption may fail.
fn check_sst(bytes: &[u8]) -> Result<usize, Error> {
    let raw = fuzz_read_sst(bytes);
    if let Err(e) = &raw {
        assert!(matches!(e, Error::Corruption { .. }), "unlisted error: {e}");
    }
    let mut fixed = bytes.to_vec();
    fuzz_fix_sst_checksums(&mut fixed);
    if let Err(e) = fuzz_read_sst(&fixed) {
        assert!(matches!(e, Error::Corruption { .. }), "unlisted error: {e}");
    }
    raw
}

/// SST files written by the engine: each compression and filter mode, small blocks, puts,
/// cell deletes and row deletes.
fn engine_ssts() -> &'static [Vec<u8>] {
    static SSTS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SSTS.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        write_ssts(dir.path()).expect("writing the SST files")
    })
}

fn write_ssts(dir: &Path) -> TestResult<Vec<Vec<u8>>> {
    let db = Db::open(dir, options(SyncPolicy::Always, 1 << 20))?;
    let modes = [
        (Compression::Lz4, FilterMode::Rows, 256),
        (Compression::Zstd(1), FilterMode::RowsAndColumns, 512),
        (Compression::None, FilterMode::None, 128),
    ];
    for (i, (compression, filter, block_bytes)) in modes.into_iter().enumerate() {
        let t = db.open_table(
            &format!("t{i}"),
            TableOptions {
                block_bytes,
                compression,
                filter,
                ..TableOptions::default()
            },
        )?;
        let mut batch = WriteBatch::new();
        for r in 0..40u32 {
            let row = format!("row{r:04}");
            for c in 0..3u32 {
                let value = format!("value {r} {c} ").repeat(1 + (r % 4) as usize);
                batch.put(
                    &t,
                    row.as_bytes(),
                    format!("c{c}").as_bytes(),
                    value.as_bytes(),
                );
            }
            match r % 7 {
                3 => batch.delete(&t, row.as_bytes(), b"c1"),
                5 => batch.delete_row(&t, row.as_bytes()),
                _ => {}
            }
        }
        db.write(&batch)?;
    }
    db.flush()?;
    let mut files: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .collect();
    files.sort();
    let ssts = files
        .iter()
        .map(std::fs::read)
        .collect::<Result<Vec<_>, _>>()?;
    assert_eq!(ssts.len(), 3, "one file per table");
    Ok(ssts)
}

fn sst_bases() -> Vec<&'static [u8]> {
    let mut v: Vec<&[u8]> = vec![SST_V1, SST_V2];
    v.extend(engine_ssts().iter().map(Vec::as_slice));
    v
}

/// A valid segment with many records, written by the engine, and its records' payloads.
fn engine_segment() -> &'static [u8] {
    static SEGMENT: OnceLock<Vec<u8>> = OnceLock::new();
    SEGMENT.get_or_init(|| write_segment().expect("writing a WAL segment"))
}

fn write_segment() -> TestResult<Vec<u8>> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), options(SyncPolicy::Always, 1 << 20))?;
    let (a, b) = tables(&db)?;
    for id in 0..12 {
        db.write(&test_batch(&a, &b, id, id % 2 == 0))?;
    }
    let mut batch = WriteBatch::new();
    batch.delete_row(&b, b"r00000001");
    batch.delete(&a, b"r00000002", b"c0");
    db.write(&batch)?;
    db.close()?;
    let segs = segments(dir.path())?;
    assert_eq!(segs.len(), 1, "one segment");
    Ok(std::fs::read(&segs[0])?)
}

/// Replays `segment`, raw and with its checksums rewritten; only corruption may fail, and
/// what replays is well formed.
fn check_wal(dir: &Path, segment: &[u8]) -> Result<WalReplay, Error> {
    let raw = fuzz_replay_wal(dir, segment);
    match &raw {
        Ok(r) => check_replay(segment, r),
        Err(e) => assert!(matches!(e, Error::Corruption { .. }), "unlisted error: {e}"),
    }
    let mut fixed = segment.to_vec();
    fuzz_fix_wal_checksums(&mut fixed);
    match fuzz_replay_wal(dir, &fixed) {
        Ok(r) => check_replay(&fixed, &r),
        Err(e) => assert!(matches!(e, Error::Corruption { .. }), "unlisted error: {e}"),
    }
    raw
}

/// The replayed records are the segment's first records, back to back after the header.
fn check_replay(segment: &[u8], r: &WalReplay) {
    let framed: usize = r.payloads.iter().map(|p| 12 + p.len()).sum();
    if r.good_len == 0 {
        assert!(r.payloads.is_empty() && r.truncate);
    } else {
        assert_eq!(r.good_len as usize, 24 + framed);
        assert_eq!(r.truncate, r.good_len as usize != segment.len());
        let mut pos = 24;
        for p in &r.payloads {
            assert_eq!(&segment[pos + 12..pos + 12 + p.len()], &p[..]);
            pos += 12 + p.len();
        }
    }
}

/// The replay of an undamaged segment.
fn full_replay(dir: &Path, segment: &[u8]) -> WalReplay {
    let r = fuzz_replay_wal(dir, segment).expect("a valid segment replays");
    assert_eq!(r.good_len as usize, segment.len());
    assert!(!r.truncate && !r.payloads.is_empty());
    r
}

/// Offsets where each record of a replay ends.
fn record_ends(r: &WalReplay) -> Vec<usize> {
    r.payloads
        .iter()
        .scan(24, |end, p| {
            *end += 12 + p.len();
            Some(*end)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn arbitrary_bytes_never_panic_the_sst_reader(
        data in prop::collection::vec(any::<u8>(), 0..1024),
        tail in prop::sample::select(vec![SST_V1, SST_V2]),
        keep in 0usize..80,
    ) {
        prop_assert!(check_sst(&data).is_err());
        // Arbitrary bytes in front of a real footer and its blocks' neighbourhood.
        let mut with_tail = data;
        with_tail.extend_from_slice(&tail[tail.len() - keep.min(tail.len())..]);
        let _ = check_sst(&with_tail);
    }

    #[test]
    fn one_flip_or_cut_of_a_valid_sst_is_corruption(
        base in prop::sample::select(sst_bases()),
        m in mutation(),
    ) {
        let data = mutated(base, std::slice::from_ref(&m));
        let got = check_sst(&data);
        if data == base {
            prop_assert!(got.is_ok());
        } else {
            prop_assert!(got.is_err(), "{m:?} went unnoticed");
        }
    }

    #[test]
    fn mutated_ssts_with_fixed_checksums_fail_cleanly(
        base in prop::sample::select(sst_bases()),
        mutations in prop::collection::vec(mutation(), 1..8),
    ) {
        let _ = check_sst(&mutated(base, &mutations));
    }

    #[test]
    fn arbitrary_bytes_never_panic_wal_replay(
        data in prop::collection::vec(any::<u8>(), 0..512),
        header in any::<bool>(),
    ) {
        let dir = tempfile::tempdir()?;
        // Behind a valid header too, so the record parser sees the bytes.
        let segment = if header {
            let mut s = WAL_V1[..24].to_vec();
            s.extend_from_slice(&data);
            s
        } else {
            data
        };
        let _ = check_wal(dir.path(), &segment);
    }

    #[test]
    fn a_cut_or_flipped_wal_segment_replays_a_prefix(
        base in prop::sample::select(vec![WAL_V1, engine_segment()]),
        m in mutation(),
    ) {
        let dir = tempfile::tempdir()?;
        let full = full_replay(dir.path(), base);
        let ends = record_ends(&full);
        let data = mutated(base, std::slice::from_ref(&m));
        let got = check_wal(dir.path(), &data);
        let replay = got.map_err(|e| TestCaseError::fail(format!("{m:?}: {e}")))?;
        prop_assert!(full.payloads.starts_with(&replay.payloads), "{m:?}: not a prefix");
        // The records that precede the first changed byte all replay.
        let first_change = base.iter().zip(&data).position(|(a, b)| a != b)
            .unwrap_or(base.len().min(data.len()));
        if first_change >= 24 {
            let intact = ends.iter().filter(|&&e| e <= first_change).count();
            prop_assert!(replay.payloads.len() >= intact, "{m:?}: lost intact records");
        }
        if data != base && data.len() <= base.len() {
            // A cut or an overwrite loses the damaged record and what follows it.
            let kept = ends.iter().filter(|&&e| e <= first_change).count();
            let expected = if first_change < 24 { 0 } else { kept };
            prop_assert_eq!(replay.payloads.len(), expected, "{:?}", m);
        }
    }

    #[test]
    fn mutated_wal_segments_with_fixed_checksums_fail_cleanly(
        base in prop::sample::select(vec![WAL_V1, engine_segment()]),
        mutations in prop::collection::vec(mutation(), 1..8),
    ) {
        let dir = tempfile::tempdir()?;
        let _ = check_wal(dir.path(), &mutated(base, &mutations));
    }
}

#[test]
fn valid_files_read_whole_and_checksum_fixing_leaves_them_alone() -> TestResult {
    for base in sst_bases() {
        assert!(check_sst(base)? > 0);
        let mut fixed = base.to_vec();
        fuzz_fix_sst_checksums(&mut fixed);
        assert!(fixed == base, "fixing a valid SST changed it");
    }
    let dir = tempfile::tempdir()?;
    for base in [WAL_V1, engine_segment()] {
        let r = full_replay(dir.path(), base);
        assert!(r.ops > 0);
        assert_eq!(check_wal(dir.path(), base)?, r);
        let mut fixed = base.to_vec();
        fuzz_fix_wal_checksums(&mut fixed);
        assert!(fixed == base, "fixing a valid WAL segment changed it");
    }
    Ok(())
}

/// A changed value behind rewritten checksums reads back: the fixers reach the decoders.
#[test]
fn a_changed_value_behind_fixed_checksums_is_read() -> TestResult {
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
    // The uncompressed table's file holds its values as written.
    let mut sst = engine_ssts()[2].clone();
    let at = find(&sst, b"value 7 1").ok_or("value not found")?;
    sst[at] = b'V';
    assert!(fuzz_read_sst(&sst).is_err());
    fuzz_fix_sst_checksums(&mut sst);
    assert_eq!(fuzz_read_sst(&sst)?, fuzz_read_sst(&engine_ssts()[2])?);

    let dir = tempfile::tempdir()?;
    let mut wal = engine_segment().to_vec();
    let at = find(&wal, b"v11-").ok_or("value not found")?;
    wal[at] = b'V';
    let full = full_replay(dir.path(), engine_segment());
    assert!(fuzz_replay_wal(dir.path(), &wal)?.payloads.len() < full.payloads.len());
    fuzz_fix_wal_checksums(&mut wal);
    let r = fuzz_replay_wal(dir.path(), &wal)?;
    assert_eq!((r.payloads.len(), r.ops), (full.payloads.len(), full.ops));
    assert_ne!(r.payloads, full.payloads);
    Ok(())
}
