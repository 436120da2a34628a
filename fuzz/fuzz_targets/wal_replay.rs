//! WAL replay on arbitrary bytes: `fuzz_replay_wal` replays the bytes as the only segment of
//! a WAL, as `Db::open` does (decoding every good record and applying its batch), first as
//! they are and then with the header's and the records' checksums rewritten, so mutations
//! reach the record and batch decoders. Nothing may panic, the only error is
//! `Error::Corruption`, and what replays is the segment's first records, back to back.
//! Seeds: `engine/tests/fixtures/wal-v1/`.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use strata_engine::{Error, fuzz_fix_wal_checksums, fuzz_replay_wal};

/// One directory per fuzzing process, reused by every input.
fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("strata-fuzz-wal-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("creating the fuzz directory");
        d
    })
}

fn check(segment: &[u8]) {
    match fuzz_replay_wal(dir(), segment) {
        Ok(r) => {
            if r.good_len == 0 {
                assert!(r.payloads.is_empty() && r.truncate);
                return;
            }
            let mut pos = 24;
            for p in &r.payloads {
                assert_eq!(&segment[pos + 12..pos + 12 + p.len()], &p[..]);
                pos += 12 + p.len();
            }
            assert_eq!(r.good_len, pos as u64);
            assert_eq!(r.truncate, pos != segment.len());
        }
        Err(e) => assert!(matches!(e, Error::Corruption { .. }), "unlisted error: {e}"),
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    let mut fixed = data.to_vec();
    fuzz_fix_wal_checksums(&mut fixed);
    if fixed != data {
        check(&fixed);
    }
});
