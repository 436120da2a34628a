//! Entry points for the fuzz targets in `fuzz/` and their proptest stand-ins (feature
//! `testing`): the row decoder over arbitrary cells, and builders of the cells it reads.

use bytes::Bytes;
use strata_engine::Cell;

use crate::cell;
use crate::error::Result;
use crate::value::Value;

/// Decodes the points of one data row (`cells` sorted by column, as the engine returns them):
/// the main block, the partial blocks and the raw cells merged, later parts winning.
pub fn decode_row(base_time: u32, cells: &[Cell]) -> Result<Vec<(i64, Value)>> {
    cell::decode_row(base_time, cells)
}

/// The raw cell of a point `offset_ms` after its row's base time.
pub fn raw_cell(offset_ms: u32, value: Value) -> Cell {
    Cell {
        column: Bytes::copy_from_slice(&cell::encode_column(offset_ms)),
        value: Bytes::copy_from_slice(cell::encode_value(value).as_bytes()),
    }
}

/// The cell of a partial block written by the flush whose highest sequence number is `seq`.
pub fn partial_block_cell(seq: u64, block: Vec<u8>) -> Cell {
    Cell {
        column: Bytes::copy_from_slice(&cell::partial_column(seq)),
        value: Bytes::from(block),
    }
}

/// Rewrites a block's trailing checksum to match its bytes, so that a mutated block reaches
/// the decoder behind it. Bytes shorter than the checksum are left alone.
pub fn fix_block_checksum(block: &mut [u8]) {
    if let Some(body) = block.len().checked_sub(4) {
        let sum = xxhash_rust::xxh3::xxh3_64(&block[..body]) as u32;
        block[body..].copy_from_slice(&sum.to_be_bytes());
    }
}

impl crate::Tsdb {
    /// The engine database under the tsdb, for tests that inspect or damage its tables.
    pub fn engine_for_testing(&self) -> &strata_engine::Db {
        &self.store().db
    }
}
