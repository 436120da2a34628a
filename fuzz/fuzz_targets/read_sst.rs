//! SST files on arbitrary bytes: `fuzz_read_sst` opens the bytes as a file and reads all of
//! it (both scan directions, a get of every cell, with and without a block cache), first as
//! they are and then with every checksum their structure locates rewritten, so mutations reach
//! the block, index, filter and properties decoders. Nothing may panic, and the only error is
//! `Error::Corruption`. Seeds: `engine/src/sst/fixtures/*.sst`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_engine::{Error, fuzz_fix_sst_checksums, fuzz_read_sst};

fn check(bytes: &[u8]) {
    if let Err(e) = fuzz_read_sst(bytes) {
        assert!(matches!(e, Error::Corruption { .. }), "unlisted error: {e}");
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    let mut fixed = data.to_vec();
    fuzz_fix_sst_checksums(&mut fixed);
    if fixed != data {
        check(&fixed);
    }
});
