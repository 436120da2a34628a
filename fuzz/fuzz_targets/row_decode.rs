//! tsdb data rows on arbitrary cells: the bytes are cut into cells (main-block, raw, partial
//! block and arbitrary columns; values as given, blocks optionally with a rewritten checksum),
//! sorted by column as the engine returns them, and decoded with `decode_row`. Nothing may
//! panic; points must strictly increase inside the row's hour; the only errors are corrupt
//! cells and corrupt blocks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_engine::Cell;
use strata_tsdb::{Error, decode_row, fix_block_checksum};

/// Takes `n` bytes (or what is left) from the front of `data`.
fn take<'a>(data: &mut &'a [u8], n: usize) -> &'a [u8] {
    let (head, rest) = data.split_at(n.min(data.len()));
    *data = rest;
    head
}

fuzz_target!(|data: &[u8]| {
    let mut data = data;
    let hour = take(&mut data, 2);
    let hour = u32::from(u16::from_be_bytes([
        hour.first().copied().unwrap_or(0),
        hour.get(1).copied().unwrap_or(0),
    ]));
    let base_time = 1_700_000_000 / 3600 * 3600 + hour * 3600;
    let mut cells: Vec<Cell> = Vec::new();
    while let [kind, ..] = *take(&mut data, 1) {
        let column = match kind % 4 {
            0 => Vec::new(),
            1 => take(&mut data, 3).to_vec(),
            2 => [&[0xff][..], take(&mut data, 8)].concat(),
            _ => {
                let n = take(&mut data, 1)
                    .first()
                    .map_or(0, |n| usize::from(n % 12));
                take(&mut data, n).to_vec()
            }
        };
        let len = take(&mut data, 1).first().map_or(0, |n| usize::from(*n));
        let mut value = take(&mut data, len).to_vec();
        if kind & 0x80 != 0 {
            fix_block_checksum(&mut value);
        }
        cells.push(Cell {
            column: column.into(),
            value: value.into(),
        });
    }
    cells.sort_by(|a, b| a.column.cmp(&b.column));
    cells.dedup_by(|a, b| a.column == b.column);
    match decode_row(base_time, &cells) {
        Ok(points) => {
            let start = i64::from(base_time) * 1000;
            assert!(points.windows(2).all(|w| w[0].0 < w[1].0));
            assert!(
                points
                    .iter()
                    .all(|p| (start..start + 3_600_000).contains(&p.0))
            );
        }
        Err(e) => assert!(
            matches!(e, Error::Corruption { .. } | Error::Block(_)),
            "unlisted error: {e}"
        ),
    }
});
