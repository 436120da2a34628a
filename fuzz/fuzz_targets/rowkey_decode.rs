//! tsdb rowkeys and TSUIDs on arbitrary bytes: `RowKey::decode`, `Tsuid::from_bytes` and
//! `Tsuid::parse_hex`. Nothing may panic, the only errors are corruption (and an invalid
//! TSUID for the hex form), and whatever decodes encodes back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_tsdb::{Error, RowKey, Tsuid};

fuzz_target!(|data: &[u8]| {
    match RowKey::decode(data) {
        Ok(k) => {
            assert_eq!(k.encode(), data);
            assert_eq!(k.base_time % 3600, 0);
            assert_eq!(
                Tsuid::from_bytes(k.tsuid.as_bytes()).ok().as_ref(),
                Some(&k.tsuid)
            );
        }
        Err(e) => assert!(matches!(e, Error::Corruption { .. }), "unlisted error: {e}"),
    }
    match Tsuid::from_bytes(data) {
        Ok(t) => {
            assert_eq!(t.as_bytes(), data);
            assert_eq!(Tsuid::parse_hex(&t.to_hex()).ok().as_ref(), Some(&t));
            let mut tags: Vec<_> = t.tags().collect();
            assert_eq!(Tsuid::new(t.metric(), &mut tags).ok(), Some(t));
        }
        Err(e) => assert!(matches!(e, Error::Corruption { .. }), "unlisted error: {e}"),
    }
    if let Ok(s) = std::str::from_utf8(data) {
        match Tsuid::parse_hex(s) {
            Ok(t) => assert!(t.to_hex().eq_ignore_ascii_case(s)),
            Err(e) => assert!(
                matches!(e, Error::InvalidTsuid { .. }),
                "unlisted error: {e}"
            ),
        }
    }
});
