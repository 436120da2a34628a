//! A stable-toolchain stand-in for the `block_decode`, `row_decode` and `rowkey_decode`
//! cargo-fuzz targets in `fuzz/`: bounded proptest runs over arbitrary bytes and over
//! mutations of valid encodings (flipped bytes, truncations, inserted and deleted bytes), with
//! block checksums rewritten so the decoder behind them is reached. Nothing may panic; the
//! three block decoders agree; errors are the listed ones; and valid encodings round-trip.

use std::collections::BTreeMap;

use proptest::prelude::*;
use strata_engine::Cell;
use strata_tsdb::{
    BlockError, Error, RowKey, Tsuid, Uid, Value, decode_block, decode_block_columns,
    decode_block_into, decode_row, encode_block, fix_block_checksum, partial_block_cell, raw_cell,
};

/// Cases per property: each kind of mutation is drawn many times, and the file stays a few
/// seconds in CI.
const CASES: u32 = 256;
/// Milliseconds in a row's hour.
const HOUR_MS: u32 = 3_600_000;

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

fn mutated(base: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut data = base.to_vec();
    for m in mutations {
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
    data
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::Int),
        (-1000i64..1000).prop_map(Value::Int),
        any::<u64>().prop_map(|b| Value::Float(f64::from_bits(b))),
        (-100_000i64..100_000, 0i32..4).prop_map(|(m, k)| Value::Float(m as f64 / 10f64.powi(k))),
    ]
}

/// Points with strictly increasing timestamps anywhere in the i64 range.
fn points(max: usize) -> impl Strategy<Value = Vec<(i64, Value)>> {
    (
        any::<i64>(),
        prop::collection::vec(
            (prop_oneof![Just(1u64), Just(1000), any::<u64>()], value()),
            0..max,
        ),
    )
        .prop_map(|(start, steps)| {
            let mut t = start;
            let mut out = Vec::new();
            for (step, v) in steps {
                out.push((t, v));
                match t.checked_add_unsigned(step.max(1)) {
                    Some(next) => t = next,
                    None => break,
                }
            }
            out
        })
}

fn encode(points: &[(i64, Value)]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_block(points, &mut out).expect("points with increasing timestamps encode");
    out
}

/// Decodes `bytes` with all three block decoders, checks they agree, that only decode errors
/// come back, and that decoded points round-trip through the encoder.
fn check_block(bytes: &[u8]) -> Result<Vec<(i64, Value)>, BlockError> {
    let mut a = vec![(1, Value::Int(1))];
    let res_a = decode_block(bytes, &mut a).map(|()| a.split_off(1));
    assert_eq!(a.len(), 1, "decode_block touched the points before its own");
    let (mut ts, mut vals) = (vec![2], vec![Value::Int(2)]);
    let res_b = decode_block_columns(bytes, &mut ts, &mut vals).map(|()| {
        ts[1..]
            .iter()
            .zip(&vals[1..])
            .map(|(t, v)| (*t, *v))
            .collect::<Vec<_>>()
    });
    assert!(ts[0] == 2 && vals[0] == Value::Int(2));
    if res_b.is_err() {
        assert!(
            ts.len() == 1 && vals.len() == 1,
            "decode_block_columns left points behind"
        );
    }
    assert_eq!(res_a, res_b);
    let n = res_a.as_ref().map_or(64, Vec::len);
    let (mut ts, mut vals) = (vec![0; n], vec![Value::Int(0); n]);
    match decode_block_into(bytes, &mut ts, &mut vals) {
        Ok(m) => {
            let got: Vec<_> = ts
                .iter()
                .zip(&vals)
                .map(|(t, v)| (*t, *v))
                .take(m)
                .collect();
            assert_eq!(Ok(&got), res_a.as_ref());
        }
        Err(BlockError::BufferTooSmall { needed, .. }) => assert!(res_a.is_err() && needed > n),
        Err(e) => assert_eq!(Err(&e), res_a.as_ref()),
    }
    match &res_a {
        Ok(points) => {
            assert!(
                points.windows(2).all(|w| w[0].0 < w[1].0),
                "timestamps must increase"
            );
            let mut again = Vec::new();
            decode_block(&encode(points), &mut again).expect("a re-encoded block decodes");
            assert!(&again == points, "decoded points do not round-trip");
        }
        Err(e) => assert!(
            !matches!(
                e,
                BlockError::NotIncreasing { .. } | BlockError::BufferTooSmall { .. }
            ),
            "not a decode error: {e}"
        ),
    }
    res_a
}

/// As `check_block`, on `bytes` and on `bytes` with a rewritten checksum.
fn check_block_both(bytes: &[u8]) -> Result<Vec<(i64, Value)>, BlockError> {
    let mut fixed = bytes.to_vec();
    fix_block_checksum(&mut fixed);
    let _ = check_block(&fixed);
    check_block(bytes)
}

/// Rowkeys and TSUIDs: anything that decodes encodes back to the same bytes, and the only
/// error is corruption.
fn check_rowkey(bytes: &[u8]) -> Option<RowKey> {
    match RowKey::decode(bytes) {
        Ok(k) => {
            assert_eq!(k.encode(), bytes);
            assert_eq!(k.base_time % 3600, 0);
            let t = Tsuid::from_bytes(k.tsuid.as_bytes()).expect("a decoded TSUID is valid");
            assert_eq!(Tsuid::parse_hex(&t.to_hex()).ok().as_ref(), Some(&t));
            assert_eq!(Tsuid::parse_hex(&t.to_hex().to_lowercase()).ok(), Some(t));
            Some(k)
        }
        Err(e) => {
            assert!(matches!(e, Error::Corruption { .. }), "unlisted error: {e}");
            None
        }
    }
}

fn check_tsuid(bytes: &[u8]) {
    match Tsuid::from_bytes(bytes) {
        Ok(t) => {
            assert_eq!(t.as_bytes(), bytes);
            let tags: Vec<_> = t.tags().collect();
            let mut sorted = tags.clone();
            sorted.sort_unstable();
            sorted.dedup_by_key(|p| p.0);
            assert_eq!(tags, sorted);
            assert_eq!(Tsuid::new(t.metric(), &mut sorted.clone()).ok(), Some(t));
        }
        Err(e) => assert!(matches!(e, Error::Corruption { .. }), "unlisted error: {e}"),
    }
    if let Ok(s) = std::str::from_utf8(bytes) {
        match Tsuid::parse_hex(s) {
            Ok(t) => assert!(t.to_hex().eq_ignore_ascii_case(s)),
            Err(e) => assert!(
                matches!(e, Error::InvalidTsuid { .. }),
                "unlisted error: {e}"
            ),
        }
    }
}

fn uid() -> impl Strategy<Value = Uid> {
    prop_oneof![1u32..4, 1u32..=strata_tsdb::MAX_UID]
        .prop_map(|n| Uid::from_u32(n).expect("a UID in range"))
}

fn rowkey() -> impl Strategy<Value = RowKey> {
    (
        any::<u8>(),
        uid(),
        any::<u32>(),
        prop::collection::btree_map(uid(), uid(), 1..5),
    )
        .prop_map(|(salt, metric, t, tags)| {
            let mut tags: Vec<_> = tags.into_iter().collect();
            RowKey {
                salt,
                base_time: t - t % 3600,
                tsuid: Tsuid::new(metric, &mut tags).expect("unique tag keys"),
            }
        })
}

/// The logical order of rowkeys: salt, metric, base time, then the tag pairs.
fn logical(k: &RowKey) -> (u8, Uid, u32, Vec<(Uid, Uid)>) {
    (
        k.salt,
        k.tsuid.metric(),
        k.base_time,
        k.tsuid.tags().collect(),
    )
}

/// Decodes a row and checks the result: points strictly increase inside the row's hour, and
/// the only errors are corrupt cells and corrupt blocks.
fn check_row(base_time: u32, cells: &[Cell]) -> Option<Vec<(i64, Value)>> {
    match decode_row(base_time, cells) {
        Ok(points) => {
            let start = i64::from(base_time) * 1000;
            assert!(points.windows(2).all(|w| w[0].0 < w[1].0));
            assert!(
                points
                    .iter()
                    .all(|p| (start..start + i64::from(HOUR_MS)).contains(&p.0))
            );
            Some(points)
        }
        Err(e) => {
            assert!(
                matches!(e, Error::Corruption { .. } | Error::Block(_)),
                "unlisted error: {e}"
            );
            None
        }
    }
}

/// A cell column: the main block's, a raw point's, a partial block's, or anything.
fn column() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(Vec::new()),
        (0u32..HOUR_MS + 10).prop_map(|o| o.to_be_bytes()[1..].to_vec()),
        any::<u64>().prop_map(|s| {
            let mut c = vec![0xff];
            c.extend_from_slice(&s.to_be_bytes());
            c
        }),
        prop::collection::vec(any::<u8>(), 0..12),
    ]
}

/// A cell value: a raw value's encoding, a block of points in or near the hour, or anything;
/// possibly mutated.
fn cell_value(base_ms: i64) -> impl Strategy<Value = Vec<u8>> {
    let valid = prop_oneof![
        value().prop_map(|v| raw_cell(0, v).value.to_vec()),
        prop::collection::btree_map(-5i64..i64::from(HOUR_MS) + 5, value(), 0..20).prop_map(
            move |pts| encode(
                &pts.into_iter()
                    .map(|(t, v)| (base_ms + t, v))
                    .collect::<Vec<_>>()
            )
        ),
        prop::collection::vec(any::<u8>(), 0..24),
    ];
    (
        valid,
        prop::collection::vec(mutation(), 0..3),
        any::<bool>(),
    )
        .prop_map(|(v, ms, fix)| {
            let mut v = mutated(&v, &ms);
            if fix && !ms.is_empty() {
                fix_block_checksum(&mut v);
            }
            v
        })
}

fn row_cells() -> impl Strategy<Value = (u32, Vec<Cell>)> {
    (0u32..1000).prop_flat_map(|hour| {
        let base_time = 1_700_000_000 / 3600 * 3600 + hour * 3600;
        let cells =
            prop::collection::btree_map(column(), cell_value(i64::from(base_time) * 1000), 0..6)
                .prop_map(|m| {
                    m.into_iter()
                        .map(|(c, v)| Cell {
                            column: c.into(),
                            value: v.into(),
                        })
                        .collect()
                });
        (Just(base_time), cells)
    })
}

/// A row built from layers of points in one hour, oldest first: the main block, partial blocks
/// and raw cells, as the row compactor, flushes and writes leave them.
#[derive(Debug, Clone)]
struct Layers {
    main: Option<BTreeMap<u32, Value>>,
    partials: Vec<BTreeMap<u32, Value>>,
    raw: BTreeMap<u32, Value>,
}

fn layer() -> impl Strategy<Value = BTreeMap<u32, Value>> {
    prop::collection::btree_map(prop_oneof![0u32..64, 0..HOUR_MS], value(), 0..24)
}

fn layers() -> impl Strategy<Value = Layers> {
    (
        prop::option::of(layer()),
        prop::collection::vec(layer(), 0..3),
        layer(),
    )
        .prop_map(|(main, partials, raw)| Layers {
            main,
            partials,
            raw,
        })
}

fn block_of(base_ms: i64, layer: &BTreeMap<u32, Value>) -> Vec<u8> {
    let pts: Vec<_> = layer
        .iter()
        .map(|(o, v)| (base_ms + i64::from(*o), *v))
        .collect();
    encode(&pts)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn arbitrary_bytes_never_panic_the_block_decoders(
        data in prop::collection::vec(any::<u8>(), 0..256),
        version in any::<bool>(),
    ) {
        let mut data = data;
        if version && !data.is_empty() {
            data[0] = strata_tsdb::BLOCK_VERSION;
        }
        let _ = check_block_both(&data);
    }

    #[test]
    fn blocks_round_trip(points in points(300)) {
        let bytes = encode(&points);
        let got = check_block_both(&bytes);
        prop_assert!(got.as_ref() == Ok(&points));
    }

    #[test]
    fn mutated_blocks_fail_cleanly(
        points in points(120),
        mutations in prop::collection::vec(mutation(), 1..5),
    ) {
        let base = encode(&points);
        let data = mutated(&base, &mutations);
        let raw = check_block_both(&data);
        if data != base {
            prop_assert!(raw.is_err(), "the checksum missed {:?}", mutations);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_rowkey_decoders(
        data in prop::collection::vec(any::<u8>(), 0..40),
        hex in "[0-9a-fA-F]{0,40}|\\PC{0,20}",
    ) {
        check_rowkey(&data);
        check_tsuid(&data);
        check_tsuid(hex.as_bytes());
    }

    #[test]
    fn rowkeys_round_trip_and_sort_by_their_fields(
        a in rowkey(),
        b in rowkey(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        for k in [&a, &b] {
            let bytes = k.encode();
            let decoded = check_rowkey(&bytes);
            prop_assert_eq!(decoded.as_ref(), Some(k));
            check_tsuid(k.tsuid.as_bytes());
            check_tsuid(k.tsuid.to_hex().as_bytes());
        }
        prop_assert_eq!(a.encode().cmp(&b.encode()), logical(&a).cmp(&logical(&b)));
        check_rowkey(&mutated(&a.encode(), &mutations));
        check_tsuid(&mutated(a.tsuid.as_bytes(), &mutations));
    }

    #[test]
    fn arbitrary_rows_never_panic_the_row_decoder((base_time, cells) in row_cells()) {
        check_row(base_time, &cells);
    }

    #[test]
    fn layered_rows_decode_to_the_newest_point_at_each_instant(
        hour in 0u32..1000,
        layers in layers(),
        seqs in prop::collection::btree_set(any::<u64>(), 3),
    ) {
        let base_time = 1_700_000_000 / 3600 * 3600 + hour * 3600;
        let base_ms = i64::from(base_time) * 1000;
        let mut cells = Vec::new();
        let mut model = BTreeMap::new();
        if let Some(main) = &layers.main {
            cells.push(Cell { column: Vec::new().into(), value: block_of(base_ms, main).into() });
            model.extend(main.iter().map(|(o, v)| (*o, *v)));
        }
        for p in layers.partials.iter().take(seqs.len()) {
            model.extend(p.iter().map(|(o, v)| (*o, *v)));
        }
        cells.extend(layers.raw.iter().map(|(o, v)| raw_cell(*o, *v)));
        cells.extend(
            layers.partials.iter().zip(&seqs).map(|(p, seq)| partial_block_cell(*seq, block_of(base_ms, p))),
        );
        model.extend(layers.raw.iter().map(|(o, v)| (*o, *v)));
        let want: Vec<_> = model.iter().map(|(o, v)| (base_ms + i64::from(*o), *v)).collect();
        let got = check_row(base_time, &cells);
        prop_assert!(got.as_ref() == Some(&want), "{:?} != {:?}", got, want);
    }
}
