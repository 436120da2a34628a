//! The names of the files in a database directory, in one place: the manifest, SST files
//! and WAL segments. The formats are in the modules that own them (`manifest`, `sst`, `wal`).

/// The manifest's file name.
pub(crate) const MANIFEST_NAME: &str = "MANIFEST";

/// The name of SST file `id`.
pub(crate) fn sst_file_name(id: u64) -> String {
    format!("{id:016x}.sst")
}

/// The id in an SST file name, if `name` is one.
pub(crate) fn parse_sst_file_name(name: &str) -> Option<u64> {
    let hex = name.strip_suffix(".sst")?;
    if hex.len() != 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// The file name of WAL segment `number`.
pub(crate) fn segment_file_name(number: u64) -> String {
    format!("wal-{number:016x}.log")
}

/// The segment number in a file name, if the name is exactly `wal-<16 lowercase hex>.log`.
pub(crate) fn parse_segment_file_name(name: &str) -> Option<u64> {
    parse_numbered(name, "wal-")
}

/// The number in `name` if it is exactly `<prefix><16 lowercase hex>.log`.
fn parse_numbered(name: &str, prefix: &str) -> Option<u64> {
    let hex = name.strip_prefix(prefix)?.strip_suffix(".log")?;
    if hex.len() != 16 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// The name a covered WAL segment `number` is kept under for reuse.
pub(crate) fn recycled_file_name(number: u64) -> String {
    format!("recycled-{number:016x}.log")
}

/// The old segment number in a recycled segment's file name, if `name` is one.
pub(crate) fn parse_recycled_file_name(name: &str) -> Option<u64> {
    parse_numbered(name, "recycled-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sst_names_round_trip() {
        assert_eq!(parse_sst_file_name(&sst_file_name(42)), Some(42));
        assert_eq!(parse_sst_file_name("42.sst"), None);
        assert_eq!(parse_sst_file_name("MANIFEST"), None);
    }

    #[test]
    fn file_names_round_trip() {
        assert_eq!(segment_file_name(0x1f), "wal-000000000000001f.log");
        assert_eq!(
            parse_segment_file_name("wal-000000000000001f.log"),
            Some(0x1f)
        );
        assert_eq!(parse_segment_file_name("wal-000000000000001F.log"), None);
        assert_eq!(parse_segment_file_name("wal-1f.log"), None);
        assert_eq!(parse_segment_file_name("stub.log"), None);
        assert_eq!(recycled_file_name(0x1f), "recycled-000000000000001f.log");
        assert_eq!(
            parse_recycled_file_name(&recycled_file_name(0x1f)),
            Some(0x1f)
        );
        assert_eq!(parse_recycled_file_name(&segment_file_name(0x1f)), None);
        assert_eq!(parse_segment_file_name(&recycled_file_name(0x1f)), None);
    }
}
