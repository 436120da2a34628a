//! How any block (data, index, filter, properties) is stored in an SST file.
//!
//! ## Format
//!
//! ```text
//! +---------------------------+-------------------+---------------------+
//! | payload (handle.len bytes) | compression u8    | checksum u64 BE     |
//! +---------------------------+-------------------+---------------------+
//! ```
//!
//! 1. `compression` is 0 (none: the payload is the raw block), 1 (LZ4 block format) or 2 (zstd
//!    frame). For 1 and 2 the payload is `raw_len u32 BE | compressed bytes`, and decompressing
//!    must yield exactly `raw_len` bytes.
//! 2. `checksum = xxh3_64(payload ‖ compression byte)`; it is verified before anything is
//!    decompressed or decoded.
//! 3. A block handle (offset, len) names the payload; the 9-byte trailer follows it.
//! 4. A writer falls back to `compression = 0` when compressing does not save space.

use bytes::Bytes;
use xxhash_rust::xxh3::xxh3_64;

use crate::error::{Error, Result};
use crate::options::Compression;

/// Bytes of the trailer after each block's payload.
pub(crate) const TRAILER_LEN: usize = 9;

/// A raw block larger than this cannot be valid; it bounds the allocation a (checksummed but
/// hostile) `raw_len` can cause.
const MAX_RAW_LEN: usize = 1 << 30;

const NONE: u8 = 0;
const LZ4: u8 = 1;
const ZSTD: u8 = 2;

/// Compresses `raw` and appends payload and trailer to `out`. Returns the payload length.
pub(crate) fn encode(raw: &[u8], compression: Compression, out: &mut Vec<u8>) -> Result<usize> {
    let start = out.len();
    let compressed = match compression {
        Compression::None => None,
        Compression::Lz4 => Some((LZ4, lz4_flex::block::compress(raw))),
        Compression::Zstd(level) => Some((
            ZSTD,
            zstd::bulk::compress(raw, level).map_err(|e| Error::io("zstd compression", e))?,
        )),
    };
    let code = match compressed {
        Some((code, bytes)) if bytes.len() + 4 < raw.len() && raw.len() <= MAX_RAW_LEN => {
            out.extend_from_slice(&(raw.len() as u32).to_be_bytes());
            out.extend_from_slice(&bytes);
            code
        }
        _ => {
            out.extend_from_slice(raw);
            NONE
        }
    };
    let payload_len = out.len() - start;
    out.push(code);
    let checksum = xxh3_64(&out[start..]);
    out.extend_from_slice(&checksum.to_be_bytes());
    Ok(payload_len)
}

/// Verifies and decompresses a stored block: `stored` is payload plus trailer, read from
/// `offset` of `file`.
pub(crate) fn decode(stored: &[u8], file: &str, offset: u64, what: &str) -> Result<Bytes> {
    let bad = |detail: String| Error::corruption(file, offset, format!("{what} block: {detail}"));
    let Some(payload_len) = stored.len().checked_sub(TRAILER_LEN) else {
        return Err(bad("shorter than its trailer".into()));
    };
    let (covered, sum) = stored.split_at(payload_len + 1);
    let mut want = [0u8; 8];
    want.copy_from_slice(sum);
    let want = u64::from_be_bytes(want);
    let got = xxh3_64(covered);
    if got != want {
        return Err(bad(format!(
            "checksum mismatch: stored {want:#018x}, computed {got:#018x}"
        )));
    }
    let payload = &covered[..payload_len];
    let code = covered[payload_len];
    if code == NONE {
        return Ok(Bytes::copy_from_slice(payload));
    }
    if payload.len() < 4 {
        return Err(bad("compressed payload without its length".into()));
    }
    let mut raw_len = [0u8; 4];
    raw_len.copy_from_slice(&payload[..4]);
    let raw_len = u32::from_be_bytes(raw_len) as usize;
    if raw_len > MAX_RAW_LEN {
        return Err(bad(format!("raw length {raw_len} is too large")));
    }
    let body = &payload[4..];
    let raw = match code {
        LZ4 => lz4_flex::block::decompress(body, raw_len)
            .map_err(|e| bad(format!("lz4 decompression failed: {e}")))?,
        ZSTD => zstd::bulk::decompress(body, raw_len)
            .map_err(|e| bad(format!("zstd decompression failed: {e}")))?,
        other => return Err(bad(format!("unknown compression type {other}"))),
    };
    if raw.len() != raw_len {
        return Err(bad(format!(
            "decompressed to {} bytes, expected {raw_len}",
            raw.len()
        )));
    }
    Ok(Bytes::from(raw))
}
