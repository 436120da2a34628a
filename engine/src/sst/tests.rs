use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;

use super::footer::{FOOTER_LEN, FORMAT_VERSION, Footer, MAGIC};
use super::*;
use crate::block::tests::sorted_entries;
use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, LocalFs, MemFs};
use crate::key::{Entry, EntryKind, InternalKey};
use crate::options::{Compression, FilterMode, TableOptions};

/// Builds an SST in memory (the exhaustive corruption tests need no disk I/O).
fn build(entries: &[Entry], opts: &TableOptions) -> Result<(Vec<u8>, SstInfo)> {
    let fs = MemFs::new();
    let mut b = SstBuilder::new(fs.create("t.sst")?, "t.sst", opts, 1234);
    for e in entries {
        b.add(e)?;
    }
    let info = b.finish()?;
    let bytes = fs.get("t.sst").unwrap_or_default();
    assert_eq!(info.file_bytes, bytes.len() as u64);
    Ok((bytes, info))
}

fn open(bytes: &[u8], cache: Option<Arc<BlockCache>>) -> Result<Arc<SstReader>> {
    let fs = MemFs::new();
    fs.put("t.sst", bytes.to_vec());
    let file = fs.open("t.sst")?;
    Ok(Arc::new(SstReader::open(file, 7, cache)?))
}

fn read_all(r: &Arc<SstReader>, range: RowRange, reverse: bool) -> Result<Vec<Entry>> {
    let it: SstIter = r.iter(range, reverse);
    it.collect()
}

/// What `SstReader::get` must return, computed from the entry list.
fn model_get(entries: &[Entry], row: &[u8], column: &[u8], snap: u64) -> Option<Entry> {
    let visible = |e: &&Entry| &e.key.row[..] == row && e.key.seq <= snap;
    let marker = entries
        .iter()
        .filter(visible)
        .filter(|e| e.key.kind == EntryKind::DeleteRow)
        .max_by_key(|e| e.key.seq);
    let cell = entries
        .iter()
        .filter(visible)
        .filter(|e| e.key.kind != EntryKind::DeleteRow && &e.key.column[..] == column)
        .max_by_key(|e| e.key.seq);
    match (marker, cell) {
        (Some(m), Some(c)) => Some(if m.key.seq > c.key.seq { m } else { c }.clone()),
        (m, c) => c.or(m).cloned(),
    }
}

fn options() -> impl Strategy<Value = TableOptions> {
    (
        prop_oneof![Just(1usize), 64..400usize],
        prop_oneof![
            Just(Compression::None),
            Just(Compression::Lz4),
            Just(Compression::Zstd(1))
        ],
        prop_oneof![
            Just(FilterMode::None),
            Just(FilterMode::Rows),
            Just(FilterMode::RowsAndColumns)
        ],
    )
        .prop_map(|(block_bytes, compression, filter)| TableOptions {
            block_bytes,
            compression,
            filter,
            ttl: None,
            flush_fold: None,
            expiry: None,
            rows_grow: true,
        })
}

fn fail(e: Error) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn sst_round_trip_matches_model(
        entries in sorted_entries(150),
        opts in options(),
        probes in sorted_entries(8),
        bounds in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..3), 2),
    ) {
        let (bytes, info) = build(&entries, &opts).map_err(fail)?;
        let r = open(&bytes, Some(Arc::new(BlockCache::new(1 << 20)))).map_err(fail)?;
        prop_assert_eq!(r.properties(), &info.properties);
        prop_assert_eq!(r.properties().entry_count, entries.len() as u64);

        // Everything, both ways.
        prop_assert_eq!(&read_all(&r, RowRange::all(), false).map_err(fail)?, &entries);
        let mut rev = read_all(&r, RowRange::all(), true).map_err(fail)?;
        rev.reverse();
        prop_assert_eq!(&rev, &entries);

        // A row range, both ways, and half-open ranges.
        let (lo, hi) = (&bounds[0], &bounds[1]);
        let ranges = [
            RowRange::new(lo, hi),
            RowRange { start: Some(Bytes::copy_from_slice(lo)), end: None },
            RowRange { start: None, end: Some(Bytes::copy_from_slice(hi)) },
        ];
        for range in ranges {
            let want: Vec<Entry> = entries
                .iter()
                .filter(|e| range.start.as_ref().is_none_or(|s| e.key.row >= *s))
                .filter(|e| range.end.as_ref().is_none_or(|s| e.key.row < *s))
                .cloned()
                .collect();
            prop_assert_eq!(&read_all(&r, range.clone(), false).map_err(fail)?, &want);
            let mut rev = read_all(&r, range.clone(), true).map_err(fail)?;
            rev.reverse();
            prop_assert_eq!(&rev, &want);
        }

        // Point lookups at several snapshots, for present and absent cells.
        for e in entries.iter().chain(probes.iter()) {
            prop_assert!(!entries.iter().any(|x| x.key.row == e.key.row) || r.may_contain_row(&e.key.row).map_err(fail)?);
            for snap in [0, e.key.seq, e.key.seq + 1, u64::MAX] {
                let got = r.get(&e.key.row, &e.key.column, snap).map_err(fail)?;
                prop_assert_eq!(got, model_get(&entries, &e.key.row, &e.key.column, snap));
            }
        }
    }
}

fn sample_entries() -> Vec<Entry> {
    let mut v = Vec::new();
    for row in 0..40u32 {
        let r = format!("row{row:04}").into_bytes();
        if row % 7 == 0 {
            v.push(Entry::new(
                InternalKey::new(r.clone(), Vec::new(), 50, EntryKind::DeleteRow),
                9,
                Vec::new(),
            ));
        }
        for col in 0..5u32 {
            let c = col.to_be_bytes().to_vec();
            v.push(Entry::new(
                InternalKey::new(r.clone(), c.clone(), 60, EntryKind::Put),
                10,
                format!("v{row}.{col}").into_bytes(),
            ));
            v.push(Entry::new(
                InternalKey::new(r.clone(), c, 40, EntryKind::DeleteCell),
                8,
                Vec::new(),
            ));
        }
    }
    v
}

/// The start of the region (data block, index, filter, properties block or footer) that holds
/// byte `pos` of a well-formed file.
fn region_start(bytes: &[u8], reader: &SstReader, pos: u64) -> Result<u64> {
    let len = bytes.len() as u64;
    let footer_at = len - FOOTER_LEN as u64;
    let footer = Footer::decode(&bytes[footer_at as usize..], "t.sst", len)?;
    let mut starts: Vec<u64> = reader.index()?.iter().map(|e| e.handle.offset).collect();
    starts.extend([
        footer.index.offset,
        footer.filter.offset,
        footer.props.offset,
        footer_at,
    ]);
    Ok(starts.into_iter().filter(|&s| s <= pos).max().unwrap_or(0))
}

/// Opens and reads everything (scans and gets), returning the first error.
fn read_everything(bytes: &[u8], entries: &[Entry]) -> Result<()> {
    let r = open(bytes, None)?;
    let all = read_all(&r, RowRange::all(), false)?;
    let rev = read_all(&r, RowRange::all(), true)?;
    for e in entries {
        r.get(&e.key.row, &e.key.column, u64::MAX)?;
    }
    // No error: the data must be exactly right.
    assert_eq!(all, entries);
    assert_eq!(rev.len(), entries.len());
    Ok(())
}

#[test]
fn every_flipped_byte_is_reported_as_corruption_of_its_block() -> Result<()> {
    let entries = sample_entries();
    for (compression, filter) in [
        (Compression::None, FilterMode::RowsAndColumns),
        (Compression::Lz4, FilterMode::Rows),
    ] {
        let opts = TableOptions {
            block_bytes: 512,
            compression,
            filter,
            ttl: None,
            flush_fold: None,
            expiry: None,
            rows_grow: true,
        };
        let (bytes, _) = build(&entries, &opts)?;
        let good = open(&bytes, None)?;
        assert!(
            good.index()?.len() > 3,
            "the sample spans several data blocks"
        );
        read_everything(&bytes, &entries)?;
        for pos in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[pos] ^= 0x04;
            let want = region_start(&bytes, &good, pos as u64)?;
            match read_everything(&bad, &entries) {
                Err(Error::Corruption { file, offset, .. }) => {
                    assert_eq!(file, "t.sst");
                    assert_eq!(offset, want, "flip at {pos}");
                }
                other => panic!("flip at {pos}: expected corruption, got {other:?}"),
            }
        }
    }
    Ok(())
}

#[test]
fn truncated_files_are_corruption() -> Result<()> {
    let entries = sample_entries();
    let (bytes, _) = build(&entries, &TableOptions::default())?;
    for cut in 0..bytes.len() {
        match open(&bytes[..cut], None) {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, "t.sst"),
            other => panic!("cut at {cut}: expected corruption, got {other:?}"),
        }
    }
    Ok(())
}

#[test]
fn empty_sst() -> Result<()> {
    let (bytes, info) = build(&[], &TableOptions::default())?;
    assert_eq!(bytes.len(), 3 * 9 + 4 + 14 + 9 * 8 + 2 + 2 * 8 + FOOTER_LEN);
    let r = open(&bytes, None)?;
    assert_eq!(r.properties(), &info.properties);
    assert_eq!(r.properties(), &Properties::empty(1234));
    assert_eq!(r.properties().creation_ms, 1234);
    assert!(!r.may_contain_row(b"")?);
    assert!(r.get(b"a", b"b", u64::MAX)?.is_none());
    assert!(read_all(&r, RowRange::all(), false)?.is_empty());
    assert!(read_all(&r, RowRange::all(), true)?.is_empty());
    assert!(read_all(&r, RowRange::new(b"a", b"z"), true)?.is_empty());
    Ok(())
}

#[test]
fn builder_rejects_out_of_order_entries() -> Result<()> {
    let fs = MemFs::new();
    let mut b = SstBuilder::new(fs.create("t.sst")?, "t.sst", &TableOptions::default(), 0);
    let e = |row: &str, seq| {
        Entry::new(
            InternalKey::new(row.as_bytes().to_vec(), b"c".to_vec(), seq, EntryKind::Put),
            0,
            b"v".to_vec(),
        )
    };
    assert_eq!(b.estimated_len(), 4);
    b.add(&e("b", 5))?;
    assert!(b.estimated_len() > 4);
    assert!(b.add(&e("b", 5)).is_err());
    assert!(b.add(&e("b", 6)).is_err());
    assert!(b.add(&e("a", 1)).is_err());
    b.add(&e("b", 4))?;
    let bad_marker = Entry::new(
        InternalKey::new(b"c".to_vec(), b"x".to_vec(), 1, EntryKind::DeleteRow),
        0,
        Vec::new(),
    );
    assert!(b.add(&bad_marker).is_err());
    Ok(())
}

/// A compaction feeds the builder keys that share their input blocks' buffers. The builder
/// keeps its index (a key per output block) and first row until it finishes; had it kept
/// them shared, every input block behind an output block would have stayed in memory until
/// the end of the file, a whole file's worth of blocks at once.
#[test]
fn the_builder_keeps_no_input_buffer() -> Result<()> {
    // Rows `row-00000` … with column `c`, back to back in one buffer.
    let mut buffer = Vec::new();
    for i in 0..2000 {
        buffer.extend_from_slice(format!("row-{i:05}c").as_bytes());
    }
    let buffer = Bytes::from(buffer);
    let entries: Vec<Entry> = (0..2000)
        .map(|i| {
            let at = i * 10;
            let key = InternalKey::new(
                buffer.slice(at..at + 9),
                buffer.slice(at + 9..at + 10),
                1,
                EntryKind::Put,
            );
            Entry::new(key, 0, b"value".to_vec())
        })
        .collect();
    let opts = TableOptions {
        block_bytes: 256,
        ..TableOptions::default()
    };
    let fs = MemFs::new();
    let mut b = SstBuilder::new(fs.create("t.sst")?, "t.sst", &opts, 0);
    for e in &entries {
        b.add(e)?;
    }
    let shares = |k: &Bytes| buffer.as_ptr_range().contains(&k.as_ptr());
    assert!(b.index.len() > 10, "{} blocks", b.index.len());
    for entry in &b.index {
        assert!(!shares(&entry.last_key.row) && !shares(&entry.last_key.column));
    }
    assert!(!shares(&b.props.first_row));
    b.finish()?;
    Ok(())
}

#[test]
fn gets_honour_row_tombstones_and_use_the_cache() -> Result<()> {
    let entries = sample_entries();
    let opts = TableOptions {
        block_bytes: 256,
        ..TableOptions::default()
    };
    let (bytes, info) = build(&entries, &opts)?;
    assert_eq!(info.properties.row_tombstone_count, 6);
    assert_eq!(info.properties.tombstone_count, 6 + 200);
    assert_eq!((info.properties.min_seq, info.properties.max_seq), (40, 60));
    assert_eq!(
        (info.properties.min_write_ms, info.properties.max_write_ms),
        (8, 10)
    );
    assert_eq!(&info.properties.first_row[..], b"row0000");
    assert_eq!(&info.properties.last_row[..], b"row0039");
    let cache = Arc::new(BlockCache::new(1 << 20));
    let r = open(&bytes, Some(cache.clone()))?;
    let col = 3u32.to_be_bytes();
    // Newest version.
    let got = r.get(b"row0001", &col, u64::MAX)?.map(|e| e.value);
    assert_eq!(got.as_deref(), Some(&b"v1.3"[..]));
    // Row 7 was deleted at seq 50: at snapshot 55 the marker decides, at 45 the cell delete.
    assert_eq!(
        r.get(b"row0007", &col, 55)?.map(|e| e.key.kind),
        Some(EntryKind::DeleteRow)
    );
    assert_eq!(
        r.get(b"row0007", &col, 45)?.map(|e| e.key.kind),
        Some(EntryKind::DeleteCell)
    );
    assert_eq!(r.get(b"row0001", &col, 39)?, None);
    assert_eq!(r.get(b"row0001", b"nope", u64::MAX)?, None);
    assert_eq!(r.get(b"zzz", &col, u64::MAX)?, None);
    assert!(!r.may_contain_row(b"zzz")?);
    let before = cache.stats();
    r.get(b"row0001", &col, u64::MAX)?;
    let after = cache.stats();
    assert!(after.hits > before.hits);
    assert!(after.used_bytes > 0);
    Ok(())
}

#[test]
fn written_to_and_read_from_local_disk() -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
    let fs = LocalFs::new(dir.path())?;
    let entries = sample_entries();
    let mut b = SstBuilder::new(
        fs.create("000001.sst")?,
        "000001.sst",
        &TableOptions::default(),
        1,
    );
    for e in &entries {
        b.add(e)?;
    }
    let info = b.finish()?;
    let file = fs.open("000001.sst")?;
    assert_eq!(file.len(), info.file_bytes);
    let r = Arc::new(SstReader::open(file, 1, None)?);
    assert_eq!(r.name(), "000001.sst");
    assert_eq!((r.file_id(), r.file_bytes()), (1, info.file_bytes));
    assert_eq!(read_all(&r, RowRange::all(), false)?, entries);
    Ok(())
}

/// A committed SST of format version 1 (`sample_entries`, no compression, row and cell filters),
/// written before version 2 stopped sharing column bytes between entries. It must stay readable.
const FIXTURE_V1: &[u8] = include_bytes!("fixtures/v1.sst");

/// The same entries and options in format version 2, written before version 3 added the row
/// times to the properties. It must stay readable.
const FIXTURE_V2: &[u8] = include_bytes!("fixtures/v2.sst");

/// The same entries and options in the current format, version 3. Regenerate with
/// `STRATA_BLESS_FIXTURES=1 cargo test -p strata-engine format_v3` only together with a format
/// version bump (then keep this file as the old version's fixture).
const FIXTURE_V3: &[u8] = include_bytes!("fixtures/v3.sst");

fn fixture_options() -> TableOptions {
    TableOptions {
        block_bytes: 1024,
        compression: Compression::None,
        filter: FilterMode::RowsAndColumns,
        ttl: None,
        flush_fold: None,
        expiry: None,
        rows_grow: true,
    }
}

fn check_fixture(bytes: &[u8], version: u32) -> Result<()> {
    let entries = sample_entries();
    let r = open(bytes, None)?;
    assert_eq!(read_all(&r, RowRange::all(), false)?, entries);
    let mut rev = read_all(&r, RowRange::all(), true)?;
    rev.reverse();
    assert_eq!(rev, entries);
    for e in &entries {
        let want = model_get(&entries, &e.key.row, &e.key.column, u64::MAX);
        assert_eq!(r.get(&e.key.row, &e.key.column, u64::MAX)?, want);
    }
    assert_eq!(r.properties().creation_ms, 1234);
    assert_eq!(&bytes[bytes.len() - 12..bytes.len() - 8], b"STSB");
    assert_eq!(
        &bytes[bytes.len() - 16..bytes.len() - 12],
        &version.to_be_bytes()
    );
    Ok(())
}

#[test]
fn format_v1_fixture_still_reads() -> Result<()> {
    check_fixture(FIXTURE_V1, 1)
}

#[test]
fn format_v2_fixture_still_reads() -> Result<()> {
    check_fixture(FIXTURE_V2, 2)?;
    // Version 2 files do not know their rows' times: never dropped whole, always rewritten.
    let p = open(FIXTURE_V2, None)?.properties().clone();
    assert_eq!((p.min_row_ms, p.max_row_ms), (0, u64::MAX));
    Ok(())
}

#[test]
fn format_v3_fixture_reads_and_is_reproduced() -> Result<()> {
    let (bytes, _) = build(&sample_entries(), &fixture_options())?;
    if std::env::var_os("STRATA_BLESS_FIXTURES").is_some() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/sst/fixtures/v3.sst");
        std::fs::write(path, &bytes).map_err(|e| Error::io("blessing the fixture", e))?;
        return Ok(());
    }
    check_fixture(FIXTURE_V3, FORMAT_VERSION)?;
    // Written with no expiry hook: no row has a known time.
    let p = open(FIXTURE_V3, None)?.properties().clone();
    assert_eq!((p.min_row_ms, p.max_row_ms), (u64::MAX, u64::MAX));
    assert!(
        bytes == FIXTURE_V3,
        "the SST writer's output changed: bump FORMAT_VERSION and add a new fixture"
    );
    Ok(())
}

proptest! {
    /// The decoders behind the checksums never panic on arbitrary bytes (the checksum is
    /// recomputed, so the bytes reach the decoder).
    #[test]
    fn metadata_decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = super::index::decode(&bytes, bytes.len() as u64);
        let _ = super::filter::decode(Bytes::from(bytes.clone()));
        let _ = Properties::decode(&bytes, FORMAT_VERSION);
        let _ = InternalKey::decode_from(&mut bytes.as_slice());
        if bytes.len() >= FOOTER_LEN {
            let mut footer = bytes[..FOOTER_LEN].to_vec();
            footer[48..52].copy_from_slice(&FORMAT_VERSION.to_be_bytes());
            footer[52..56].copy_from_slice(&MAGIC);
            let sum = xxhash_rust::xxh3::xxh3_64(&footer[..56]);
            footer[56..].copy_from_slice(&sum.to_be_bytes());
            let _ = Footer::decode(&footer, "t.sst", bytes.len() as u64);
        }
    }

    /// Whole files with random damage (several overwritten bytes, then a cut) either fail with
    /// `Corruption` or read back exactly.
    #[test]
    fn damaged_files_fail_cleanly(
        damage in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
        do_cut in any::<bool>(),
    ) {
        let entries = sample_entries();
        let opts = TableOptions { block_bytes: 700, ..TableOptions::default() };
        let (mut bytes, _) = build(&entries, &opts).map_err(fail)?;
        for (at, v) in damage {
            let i = at.index(bytes.len());
            bytes[i] = v;
        }
        if do_cut {
            bytes.truncate(cut.index(bytes.len()));
        }
        match read_everything(&bytes, &entries) {
            Ok(()) | Err(Error::Corruption { .. }) => {}
            Err(other) => prop_assert!(false, "unexpected error {other}"),
        }
    }
}

#[test]
fn works_when_the_cache_cannot_hold_index_and_filters() -> Result<()> {
    let entries = sample_entries();
    let opts = TableOptions {
        block_bytes: 300,
        filter: FilterMode::RowsAndColumns,
        ..TableOptions::default()
    };
    let (bytes, _) = build(&entries, &opts)?;
    // 16 shards of 40 bytes: nothing fits, so every lookup re-reads and re-verifies.
    let cache = Arc::new(BlockCache::new(16 * 40));
    let r = open(&bytes, Some(cache.clone()))?;
    assert_eq!(read_all(&r, RowRange::all(), false)?, entries);
    assert_eq!(
        read_all(&r, RowRange::new(b"row0003", b"row0005"), true)?.len(),
        2 * 10
    );
    for e in &entries {
        assert!(r.may_contain_row(&e.key.row)?);
        let want = model_get(&entries, &e.key.row, &e.key.column, u64::MAX);
        assert_eq!(r.get(&e.key.row, &e.key.column, u64::MAX)?, want);
    }
    assert_eq!(cache.stats().hits, 0);
    assert_eq!(cache.stats().used_bytes, 0);
    Ok(())
}

#[cfg(feature = "testing")]
#[test]
fn fuzz_entry_point_reads_good_files_and_rejects_damage() -> Result<()> {
    let entries = sample_entries();
    let (mut bytes, _) = build(&entries, &TableOptions::default())?;
    assert_eq!(super::fuzz_read_sst(&bytes)?, entries.len());
    bytes[10] ^= 1;
    assert!(matches!(
        super::fuzz_read_sst(&bytes),
        Err(Error::Corruption { offset: 0, .. })
    ));
    assert!(super::fuzz_read_sst(b"").is_err());
    Ok(())
}

#[test]
fn readers_and_caches_are_shareable_across_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<SstReader>();
    send_sync::<BlockCache>();
    send::<SstIter>();
    send::<SstBuilder>();
}
