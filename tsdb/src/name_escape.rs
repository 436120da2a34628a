//! The reversible mapping from foreign names (Prometheus labels, Influx measurements, tags and
//! fields) to OpenTSDB names (`docs/prometheus.md`, "Names").
//!
//! OpenTSDB names hold ASCII letters and digits, `-`, `_`, `.`, `/` and Unicode letters
//! (OpenTSDB docs: `user_guide/writing`). Prometheus label values and Influx names can hold any
//! character, so every other character `c` is written as `__x` + the upper-case hex digits of
//! its code point (at least two) + `_`: `localhost:9090` becomes `localhost__x3A_9090`. A
//! literal `_` that starts the marker `__x` in the input is escaped itself (`__x5F_`), so the
//! marker always starts an escape and the mapping can be undone. A name without the marker and
//! without disallowed characters, which is nearly every name, maps to itself.
//!
//! The mapping ignores `tsd.core.tag.allow_specialchars`, so a name is stored the same way
//! whatever the server's configuration.

use std::borrow::Cow;
use std::fmt::Write as _;

/// The marker that starts an escape.
const MARKER: &str = "__x";

/// Whether `c` passes through unescaped: the characters OpenTSDB allows in every configuration.
fn passes(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/') || c.is_alphabetic()
}

/// ASCII bytes that pass through: letters, digits, `-`, `_`, `.`, `/`.
static ASCII_PASSES: [bool; 128] = {
    let mut t = [false; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b'/');
        b += 1;
    }
    t
};

/// The OpenTSDB name for a foreign name. Borrows when the name maps to itself.
pub fn escape_name(name: &str) -> Cow<'_, str> {
    let needs = |i: usize, c: char| !passes(c) || (c == '_' && name[i..].starts_with(MARKER));
    // Nearly every name is ASCII that passes: check those bytes with a table first.
    let bytes = name.as_bytes();
    let ascii_prefix = bytes
        .iter()
        .enumerate()
        .position(|(i, &b)| {
            b >= 0x80
                || !ASCII_PASSES[usize::from(b)]
                || (b == b'_' && bytes[i..].starts_with(b"__x"))
        })
        .unwrap_or(bytes.len());
    // The prefix is ASCII, so it ends on a character boundary.
    let rest = &name[ascii_prefix..];
    let Some(first) = rest
        .char_indices()
        .find(|&(i, c)| needs(ascii_prefix + i, c))
    else {
        return Cow::Borrowed(name);
    };
    let start = ascii_prefix + first.0;
    let mut out = String::with_capacity(name.len() + 8);
    out.push_str(&name[..start]);
    for (i, c) in name[start..].char_indices() {
        if needs(start + i, c) {
            let _ = write!(out, "{MARKER}{:02X}_", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The foreign name an OpenTSDB name was mapped from, or `None` when `name` is not the output
/// of [`escape_name`] (a name written by other means, such as `put m 1 1 host=a__xZ`).
pub fn unescape_name(name: &str) -> Option<Cow<'_, str>> {
    if !name.contains(MARKER) {
        return name.chars().all(passes).then_some(Cow::Borrowed(name));
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find(MARKER) {
        out.push_str(&rest[..at]);
        let tail = &rest[at + MARKER.len()..];
        let end = tail.find('_')?;
        let hex = &tail[..end];
        if !(2..=6).contains(&hex.len())
            || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'A'..=b'F'))
        {
            return None;
        }
        out.push(char::from_u32(u32::from_str_radix(hex, 16).ok()?)?);
        rest = &tail[end + 1..];
    }
    out.push_str(rest);
    // Only the one spelling escape_name produces decodes (no `__x3a_`, no escaped letters).
    (escape_name(&out) == name).then_some(Cow::Owned(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn common_names_map_to_themselves() {
        for n in [
            "http_requests_total",
            "node_xfs_block_map_read_ops_total",
            "pg_stat_database_xact_commit",
            "127.0.0.1",
            "/api/v1/query",
            "go1.22.1",
            "Москва",
            "__name__",
        ] {
            assert_eq!(escape_name(n), Cow::Borrowed(n));
            assert_eq!(unescape_name(n).as_deref(), Some(n));
        }
    }

    #[test]
    fn documented_examples() {
        let cases = [
            ("localhost:9090", "localhost__x3A_9090"),
            (
                "job:http_requests:rate5m",
                "job__x3A_http_requests__x3A_rate5m",
            ),
            ("+Inf", "__x2B_Inf"),
            ("a b", "a__x20_b"),
            ("a,b=c", "a__x2C_b__x3D_c"),
            ("x__xy", "x__x5F__xy"),
            ("cpu🙂", "cpu__x1F642_"),
            ("tab\t", "tab__x09_"),
        ];
        for (from, to) in cases {
            assert_eq!(escape_name(from), to, "{from}");
            assert_eq!(unescape_name(to).as_deref(), Some(from), "{to}");
        }
    }

    #[test]
    fn other_spellings_do_not_decode() {
        for n in [
            "a__x3a_",
            "a__x3A",
            "a__xZZ_",
            "a__x0041_",
            "a__x41_",
            "a__x110000_",
            "a b",
        ] {
            assert_eq!(unescape_name(n), None, "{n}");
        }
    }

    proptest! {
        /// Every name maps to a valid OpenTSDB name and back to itself.
        #[test]
        fn round_trips(name in "\\PC*|[_x:a ]{0,12}|.*") {
            let escaped = escape_name(&name);
            prop_assert!(escaped.chars().all(passes), "{:?}", escaped);
            let back = unescape_name(&escaped).map(Cow::into_owned);
            prop_assert_eq!(back, Some(name));
        }

        /// Two different names never map to one.
        #[test]
        fn is_injective(a in "[_x3A:b]{0,10}", b in "[_x3A:b]{0,10}") {
            if a != b {
                prop_assert_ne!(escape_name(&a), escape_name(&b));
            }
        }
    }
}
