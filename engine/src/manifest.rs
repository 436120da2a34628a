//! The manifest: which SST files are live, the table registry and how much of the WAL they
//! cover. It is rewritten whole on every change with [`FileSystem::write_atomic`], so after a
//! crash it holds either the old or the new state.
//!
//! ## Format
//!
//! The file `MANIFEST`; fixed-width integers big-endian, varints unsigned LEB128:
//!
//! ```text
//! +--------+---------+----------+-------------+------+------------------------------+
//! | "SMAN" | version | reserved | body length | body | xxh3_64 of everything before |
//! |   4B   | u16 = 1 | u16 = 0  |     u32     |      |            u64               |
//! +--------+---------+----------+-------------+------+------------------------------+
//!
//! body = next_file_id | last_seq | flushed_segment
//!      | table count | (table id | name length | name UTF-8)*
//!      | file count  | (table id | level u8 | file id | file bytes)*
//! ```
//!
//! - `next_file_id`: the next SST file id; file `id` is named `<id as 16 lowercase hex>.sst`.
//! - `last_seq`: every batch up to this sequence number is in the SST files; batches replayed
//!   from the WAL at open are numbered from `last_seq + 1`.
//! - `flushed_segment`: every WAL segment up to this number is covered by the SST files (0:
//!   none); such segments are deleted at open if a crash left them.
//! - The table registry is kept because the WAL records that created tables get deleted.
//!
//! Decoding checks the length, magic, checksum, version and reserved bits, body length, then
//! every field; trailing bytes are corruption. Every failure is `Error::Corruption`.

use std::collections::BTreeMap;

use crate::coding::{Cursor, put_varint};
use crate::error::{Error, Result};
use crate::file_name::MANIFEST_NAME;
use crate::fs::{AtomicWriteError, FileSystem};

const MAGIC: &[u8; 4] = b"SMAN";
const VERSION: u16 = 1;
/// Magic, version, reserved, body length.
const HEADER_BYTES: usize = 12;

/// One live SST file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileMeta {
    /// The table the file belongs to.
    pub(crate) table: u32,
    /// Its LSM level.
    pub(crate) level: u8,
    /// Its id; the file is named by [`crate::file_name::sst_file_name`].
    pub(crate) id: u64,
    /// Its size in bytes.
    pub(crate) bytes: u64,
}

/// The whole persisted state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Manifest {
    /// The next file id to hand out.
    pub(crate) next_file_id: u64,
    /// Every entry with a seq up to this one is in the SST files.
    pub(crate) last_seq: u64,
    /// Every WAL segment up to this number is covered by the SST files (0: none).
    pub(crate) flushed_segment: u64,
    /// Table id → name.
    pub(crate) tables: BTreeMap<u32, String>,
    /// The live files.
    pub(crate) files: Vec<FileMeta>,
}

impl Manifest {
    /// Encodes the manifest file.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        put_varint(&mut body, self.next_file_id);
        put_varint(&mut body, self.last_seq);
        put_varint(&mut body, self.flushed_segment);
        put_varint(&mut body, self.tables.len() as u64);
        for (id, name) in &self.tables {
            put_varint(&mut body, u64::from(*id));
            put_varint(&mut body, name.len() as u64);
            body.extend_from_slice(name.as_bytes());
        }
        put_varint(&mut body, self.files.len() as u64);
        for f in &self.files {
            put_varint(&mut body, u64::from(f.table));
            body.push(f.level);
            put_varint(&mut body, f.id);
            put_varint(&mut body, f.bytes);
        }
        let mut out = Vec::with_capacity(HEADER_BYTES + body.len() + 8);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(&body);
        let sum = xxhash_rust::xxh3::xxh3_64(&out);
        out.extend_from_slice(&sum.to_be_bytes());
        out
    }

    /// Decodes a manifest file; errors are `Error::Corruption` naming `file`.
    pub(crate) fn decode(bytes: &[u8], file: &str) -> Result<Manifest> {
        let bad = |offset: usize, detail: &str| Error::corruption(file, offset as u64, detail);
        if bytes.len() < HEADER_BYTES + 8 {
            return Err(bad(0, "manifest is too short"));
        }
        if &bytes[..4] != MAGIC {
            return Err(bad(0, "bad manifest magic"));
        }
        let (data, sum) = bytes.split_at(bytes.len() - 8);
        let mut want = [0u8; 8];
        want.copy_from_slice(sum);
        if xxhash_rust::xxh3::xxh3_64(data) != u64::from_be_bytes(want) {
            return Err(bad(data.len(), "manifest checksum mismatch"));
        }
        let version = u16::from_be_bytes([bytes[4], bytes[5]]);
        if version != VERSION || bytes[6] != 0 || bytes[7] != 0 {
            return Err(bad(4, "unsupported manifest version"));
        }
        let body_len = u32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
        if body_len != data.len() - HEADER_BYTES {
            return Err(bad(8, "manifest body length mismatch"));
        }
        let body = &data[HEADER_BYTES..];
        let mut c = Cursor(body);
        let at = |c: &Cursor<'_>| HEADER_BYTES + body.len() - c.0.len();
        let mut m = Manifest {
            next_file_id: c.varint().ok_or_else(|| bad(at(&c), "bad next file id"))?,
            last_seq: c.varint().ok_or_else(|| bad(at(&c), "bad last seq"))?,
            flushed_segment: c.varint().ok_or_else(|| bad(at(&c), "bad WAL segment"))?,
            ..Manifest::default()
        };
        let tables = c.varint().ok_or_else(|| bad(at(&c), "bad table count"))?;
        for _ in 0..tables {
            let id = c.varint_u32().ok_or_else(|| bad(at(&c), "bad table id"))?;
            let name = c
                .bytes()
                .and_then(|n| std::str::from_utf8(n).ok())
                .ok_or_else(|| bad(at(&c), "bad table name"))?;
            m.tables.insert(id, name.to_owned());
        }
        let files = c.varint().ok_or_else(|| bad(at(&c), "bad file count"))?;
        for _ in 0..files {
            let table = c
                .varint_u32()
                .ok_or_else(|| bad(at(&c), "bad file table"))?;
            let level = c.byte().ok_or_else(|| bad(at(&c), "bad file level"))?;
            let id = c.varint().ok_or_else(|| bad(at(&c), "bad file id"))?;
            let bytes = c.varint().ok_or_else(|| bad(at(&c), "bad file size"))?;
            m.files.push(FileMeta {
                table,
                level,
                id,
                bytes,
            });
        }
        if !c.0.is_empty() {
            return Err(bad(at(&c), "trailing bytes in the manifest"));
        }
        Ok(m)
    }

    /// Loads the manifest from `fs`, by the scheme of its backend; `None` if there is none yet.
    pub(crate) fn load(fs: &dyn FileSystem) -> Result<Option<Manifest>> {
        fs.load_manifest()
    }

    /// Loads the single `MANIFEST` file (the local scheme); `None` if there is none yet.
    pub(crate) fn load_file(fs: &(impl FileSystem + ?Sized)) -> Result<Option<Manifest>> {
        if !fs.list()?.iter().any(|n| n == MANIFEST_NAME) {
            return Ok(None);
        }
        let file = fs.open(MANIFEST_NAME)?;
        let bytes = file.read_at(0, usize::try_from(file.len()).unwrap_or(usize::MAX))?;
        Manifest::decode(&bytes, MANIFEST_NAME).map(Some)
    }

    /// Atomically replaces the manifest in `fs` with this one. On failure the error says
    /// whether the file may hold this manifest after all.
    pub(crate) fn store(&self, fs: &dyn FileSystem) -> Result<(), AtomicWriteError> {
        fs.store_manifest(self)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::fs::MemFs;

    fn sample() -> Manifest {
        Manifest {
            next_file_id: 7,
            last_seq: 1234,
            flushed_segment: 3,
            tables: [(1, "a".to_owned()), (2, "tsdb-uid".to_owned())].into(),
            files: vec![
                FileMeta {
                    table: 1,
                    level: 0,
                    id: 5,
                    bytes: 999,
                },
                FileMeta {
                    table: 2,
                    level: 1,
                    id: 6,
                    bytes: 1 << 40,
                },
            ],
        }
    }

    #[test]
    fn round_trips_through_a_file_system() -> Result<()> {
        let fs = MemFs::new();
        assert_eq!(Manifest::load(&fs)?, None);
        sample().store(&fs)?;
        assert_eq!(Manifest::load(&fs)?, Some(sample()));
        let mut next = sample();
        next.files.pop();
        next.store(&fs)?;
        assert_eq!(Manifest::load(&fs)?, Some(next));
        Ok(())
    }

    #[test]
    fn every_flipped_byte_is_corruption() {
        let bytes = sample().encode();
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(
                matches!(Manifest::decode(&b, "M"), Err(Error::Corruption { .. })),
                "byte {i}"
            );
        }
        for len in 0..bytes.len() {
            assert!(Manifest::decode(&bytes[..len], "M").is_err());
        }
    }

    /// Format v1, frozen: `sample()` must keep encoding to exactly these bytes, and they must
    /// keep decoding.
    const V1_FIXTURE: &str = "534d414e000100000000002107d20903020101610208747364622d75696402010005e7070201068080808080200fd8d3112c33f19c";

    #[test]
    fn format_v1_fixture_is_reproduced_and_reads() -> Result<()> {
        assert_eq!(crate::coding::to_hex(&sample().encode()), V1_FIXTURE);
        let bytes = crate::coding::from_hex(V1_FIXTURE);
        assert_eq!(Manifest::decode(&bytes, "M")?, sample());
        Ok(())
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Manifest::decode(&bytes, "M");
        }
    }
}
