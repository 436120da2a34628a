//! tsdb blocks on arbitrary bytes, as they are and with the trailing checksum rewritten so the
//! decoder behind it is reached: `decode_block`, `decode_block_columns` and `decode_block_into`
//! must agree, fail only with decode errors and leave their output as documented, and decoded
//! points must round-trip through `encode_block`. The same bytes are also read as a list of
//! points, which must round-trip through the encoder and all three decoders.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_tsdb::{
    BlockError, Value, decode_block, decode_block_columns, decode_block_into, encode_block,
    fix_block_checksum,
};

fn check(bytes: &[u8]) -> Result<Vec<(i64, Value)>, BlockError> {
    let mut a = vec![(1, Value::Int(1))];
    let res = decode_block(bytes, &mut a).map(|()| a.split_off(1));
    assert_eq!(a.len(), 1, "decode_block touched the points before its own");
    let (mut ts, mut vals) = (vec![2], vec![Value::Int(2)]);
    let res_cols = decode_block_columns(bytes, &mut ts, &mut vals).map(|()| {
        ts[1..]
            .iter()
            .zip(&vals[1..])
            .map(|(t, v)| (*t, *v))
            .collect::<Vec<_>>()
    });
    assert!(ts[0] == 2 && vals[0] == Value::Int(2));
    if res_cols.is_err() {
        assert!(ts.len() == 1 && vals.len() == 1);
    }
    assert_eq!(res, res_cols);
    let n = res.as_ref().map_or(64, Vec::len);
    let (mut ts, mut vals) = (vec![0; n], vec![Value::Int(0); n]);
    match decode_block_into(bytes, &mut ts, &mut vals) {
        Ok(m) => {
            let got: Vec<_> = ts
                .iter()
                .zip(&vals)
                .map(|(t, v)| (*t, *v))
                .take(m)
                .collect();
            assert_eq!(Ok(&got), res.as_ref());
        }
        Err(BlockError::BufferTooSmall { needed, .. }) => assert!(res.is_err() && needed > n),
        Err(e) => assert_eq!(Err(&e), res.as_ref()),
    }
    match &res {
        Ok(points) => {
            assert!(points.windows(2).all(|w| w[0].0 < w[1].0));
            let mut bytes = Vec::new();
            encode_block(points, &mut bytes).expect("decoded points encode");
            let mut again = Vec::new();
            decode_block(&bytes, &mut again).expect("a re-encoded block decodes");
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
    res
}

/// Reads `data` as points: each 11 bytes are a timestamp step (u16, at least 1), a kind and
/// eight value bytes.
fn points(data: &[u8]) -> Vec<(i64, Value)> {
    let mut t = i64::from_be_bytes(
        data.get(..8)
            .map_or([0; 8], |b| b.try_into().unwrap_or([0; 8])),
    );
    let mut out = Vec::new();
    for c in data.get(8..).unwrap_or_default().chunks_exact(11) {
        let bits = u64::from_be_bytes(c[3..11].try_into().unwrap_or([0; 8]));
        let v = match c[2] % 4 {
            0 => Value::Int(bits as i64),
            1 => Value::Int(i64::from(c[10] as i8)),
            2 => Value::Float(f64::from_bits(bits)),
            _ => Value::Float(f64::from(c[10] as i8) / 10.0),
        };
        out.push((t, v));
        let step = i64::from(u16::from_be_bytes([c[0], c[1]]).max(1));
        match t.checked_add(step) {
            Some(next) => t = next,
            None => break,
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let _ = check(data);
    let mut fixed = data.to_vec();
    fix_block_checksum(&mut fixed);
    let _ = check(&fixed);
    let pts = points(data);
    let mut bytes = Vec::new();
    encode_block(&pts, &mut bytes).expect("increasing points encode");
    assert_eq!(check(&bytes).as_ref(), Ok(&pts));
});
