use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::coding::get_varint;
use crate::options::Compression;

/// Random entries in internal-key order, without duplicate keys.
pub(crate) fn sorted_entries(max: usize) -> impl Strategy<Value = Vec<Entry>> {
    let one = (
        proptest::collection::vec(0u8..4, 0..4),
        proptest::collection::vec(0u8..4, 0..3),
        0u64..50,
        0u8..6,
        any::<u64>(),
        // Mostly cell-sized values, and some of a compacted row's size, which start restart
        // points by bytes (`RESTART_BYTES`) before `RESTART_INTERVAL` entries.
        prop_oneof![
            9 => proptest::collection::vec(any::<u8>(), 0..12),
            1 => proptest::collection::vec(any::<u8>(), 300..900),
        ],
    );
    proptest::collection::vec(one, 0..max).prop_map(|raw| {
        let mut v: Vec<Entry> = raw
            .into_iter()
            .map(|(row, col, seq, kind, ms, value)| {
                let kind = match kind {
                    0 => EntryKind::DeleteRow,
                    1 => EntryKind::DeleteCell,
                    _ => EntryKind::Put,
                };
                let (col, value) = match kind {
                    EntryKind::DeleteRow => (Vec::new(), Vec::new()),
                    EntryKind::DeleteCell => (col, Vec::new()),
                    EntryKind::Put => (col, value),
                };
                Entry::new(InternalKey::new(row, col, seq, kind), ms, value)
            })
            .collect();
        v.sort_by(|a, b| a.key.cmp(&b.key));
        // A cell (or a row marker) has at most one entry per seq, as in a real engine.
        v.dedup_by(|a, b| {
            let marker = |k: &InternalKey| k.kind == EntryKind::DeleteRow;
            (&a.key.row, &a.key.column, a.key.seq, marker(&a.key))
                == (&b.key.row, &b.key.column, b.key.seq, marker(&b.key))
        });
        v
    })
}

fn build(entries: &[Entry]) -> Result<Block> {
    let mut b = BlockBuilder::new();
    for e in entries {
        b.add(e);
    }
    Block::new(Bytes::from(b.finish()), Arc::from("t.sst"), 0)
}

fn collect_forward(mut it: BlockIter) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    while let Some(e) = it.next_entry()? {
        out.push(e);
    }
    Ok(out)
}

fn collect_reverse(mut it: BlockRevIter) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    while let Some(e) = it.prev_entry()? {
        out.push(e);
    }
    Ok(out)
}

proptest! {
    /// A builder that got a finished block's buffer back builds the next block exactly as a
    /// fresh one does.
    #[test]
    fn a_recycled_buffer_builds_the_same_block(first in sorted_entries(40), second in sorted_entries(40)) {
        let mut b = BlockBuilder::new();
        for e in &first {
            b.add(e);
        }
        let old = b.finish();
        b.recycle(old);
        for e in &second {
            b.add(e);
        }
        let mut fresh = BlockBuilder::new();
        for e in &second {
            fresh.add(e);
        }
        prop_assert_eq!(b.finish(), fresh.finish());
    }

    #[test]
    fn block_round_trip_seek_and_reverse(entries in sorted_entries(80), probe in sorted_entries(6)) {
        let block = build(&entries).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let fwd = collect_forward(block.iter()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&fwd, &entries);
        let mut rev = collect_reverse(block.rev_iter()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        rev.reverse();
        prop_assert_eq!(&rev, &entries);

        let targets = entries.iter().chain(probe.iter()).map(|e| e.key.clone());
        for target in targets {
            let mut it = block.iter();
            it.seek(&target).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let got = collect_forward(it).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let want: Vec<Entry> = entries.iter().filter(|e| e.key >= target).cloned().collect();
            prop_assert_eq!(got, want);

            for inclusive in [false, true] {
                let mut it = block.rev_iter();
                it.seek_before(&target, inclusive).map_err(|e| TestCaseError::fail(e.to_string()))?;
                let got = collect_reverse(it).map_err(|e| TestCaseError::fail(e.to_string()))?;
                let want: Vec<Entry> = entries
                    .iter()
                    .rev()
                    .filter(|e| e.key < target || (inclusive && e.key == target))
                    .cloned()
                    .collect();
                prop_assert_eq!(got, want);
            }
        }
    }

    #[test]
    fn trailer_round_trips_every_compression(raw in proptest::collection::vec(0u8..3, 0..3000)) {
        for c in [Compression::None, Compression::Lz4, Compression::Zstd(3)] {
            let mut out = vec![7u8; 5];
            let n = trailer::encode(&raw, c, &mut out).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(out.len(), 5 + n + trailer::TRAILER_LEN);
            let back = trailer::decode(&out[5..], "t.sst", 5, "data").map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&back[..], &raw[..]);
        }
    }

    #[test]
    fn inlined_varint_agrees_with_the_reference(bytes in proptest::collection::vec(any::<u8>(), 0..14), v in any::<u64>()) {
        let mut encoded = Vec::new();
        put_varint(&mut encoded, v);
        for input in [&bytes[..], &encoded[..]] {
            let (mut a, mut b) = (input, input);
            let fast = varint(&mut a);
            let reference = get_varint(&mut b);
            prop_assert_eq!(fast.is_ok(), reference.is_ok());
            if let (Ok(x), Ok(y)) = (fast, reference) {
                prop_assert_eq!(x, y);
                prop_assert_eq!(a, b);
            }
        }
    }

    #[test]
    fn block_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(block) = Block::new(Bytes::from(bytes), Arc::from("t.sst"), 0) {
            let _ = collect_forward(block.iter());
            let _ = collect_reverse(block.rev_iter());
            let _ = block.iter().seek(&InternalKey::seek_row(b"\x01"));
        }
    }
}

#[test]
fn flipped_bytes_fail_the_checksum() -> Result<()> {
    let raw: Vec<u8> = (0..2000u32).flat_map(|i| (i % 7).to_be_bytes()).collect();
    for c in [Compression::None, Compression::Lz4, Compression::Zstd(1)] {
        let mut out = Vec::new();
        trailer::encode(&raw, c, &mut out)?;
        for i in 0..out.len() {
            let mut bad = out.clone();
            bad[i] ^= 0x10;
            match trailer::decode(&bad, "x.sst", 4096, "data") {
                Err(Error::Corruption { file, offset, .. }) => {
                    assert_eq!((file.as_str(), offset), ("x.sst", 4096));
                }
                other => panic!("flip at {i} with {c:?}: expected corruption, got {other:?}"),
            }
        }
        assert!(trailer::decode(&out[..out.len() - 1], "x.sst", 0, "data").is_err());
        assert!(trailer::decode(&out[..3], "x.sst", 0, "data").is_err());
    }
    Ok(())
}

#[test]
fn restart_points_follow_entry_bytes_as_well_as_entry_counts() -> Result<()> {
    let entry = |i: u32, len: usize| {
        let key = InternalKey::new(i.to_be_bytes().to_vec(), b"c".to_vec(), 1, EntryKind::Put);
        Entry::new(key, 0, vec![7u8; len])
    };
    // Small entries: one restart point per 16 entries.
    let small: Vec<Entry> = (0..40).map(|i| entry(i, 8)).collect();
    assert_eq!(build(&small)?.num_restarts(), 3);
    // 1,100-byte values: two entries pass `RESTART_BYTES`, so every other entry is a restart
    // point; each is found by a seek and the order holds both ways.
    let large: Vec<Entry> = (0..40).map(|i| entry(i, 1100)).collect();
    let block = build(&large)?;
    assert_eq!(block.num_restarts(), 20);
    assert_eq!(collect_forward(block.iter())?, large);
    let mut rev = collect_reverse(block.rev_iter())?;
    rev.reverse();
    assert_eq!(rev, large);
    for (i, e) in large.iter().enumerate() {
        let mut it = block.iter();
        it.seek(&e.key)?;
        assert_eq!(collect_forward(it)?, large[i..].to_vec());
    }
    Ok(())
}

#[test]
fn empty_block() -> Result<()> {
    let block = build(&[])?;
    assert_eq!(block.num_restarts(), 0);
    assert!(block.iter().next_entry()?.is_none());
    assert!(block.rev_iter().prev_entry()?.is_none());
    let mut it = block.iter();
    it.seek(&InternalKey::seek_row(b"a"))?;
    assert!(it.next_entry()?.is_none());
    Ok(())
}
