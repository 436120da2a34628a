//! The parsed data point, borrowed from the input, and the value, timestamp and point checks
//! shared by the telnet and HTTP put paths (`shared/spec/opentsdb.md` §a.2–a.4, §b.3 step 8).

use std::fmt::Write as _;

use crate::config::ParseConfig;
use crate::error::PointError;

/// How many tags a [`PointRef`] holds inline. `ParseConfig::with_max_tags` is capped at this.
pub const MAX_INLINE_TAGS: usize = 16;

/// The largest timestamp OpenTSDB accepts in milliseconds (year 2286).
pub const MAX_TIMESTAMP_MS: i64 = 9_999_999_999_999;

/// Timestamps with any of these bits set are milliseconds, others seconds (`Const.SECOND_MASK`).
const SECOND_MASK: u64 = 0xFFFF_FFFF_0000_0000;

/// A data point value: OpenTSDB decides integer versus float from the text (§a.3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    /// A signed 64-bit integer (the text had none of `.`, `e`, `E`).
    Int(i64),
    /// A finite float.
    Float(f64),
}

impl Num {
    /// Whether this float survives a round trip through `f32` (OpenTSDB 2.4 then stores 4 bytes).
    pub fn fits_in_f32(&self) -> bool {
        match *self {
            Num::Int(_) => false,
            Num::Float(v) => f64::from(v as f32) == v,
        }
    }

    /// The value as OpenTSDB would encode it, plus its qualifier flags.
    fn encoded(&self) -> (Vec<u8>, u8) {
        match *self {
            Num::Int(v) => {
                let bytes = if let Ok(b) = i8::try_from(v) {
                    b.to_be_bytes().to_vec()
                } else if let Ok(s) = i16::try_from(v) {
                    s.to_be_bytes().to_vec()
                } else if let Ok(i) = i32::try_from(v) {
                    i.to_be_bytes().to_vec()
                } else {
                    v.to_be_bytes().to_vec()
                };
                let flags = (bytes.len() - 1) as u8;
                (bytes, flags)
            }
            Num::Float(v) if self.fits_in_f32() => {
                ((v as f32).to_bits().to_be_bytes().to_vec(), 0x8 | 0x3)
            }
            Num::Float(v) => (v.to_bits().to_be_bytes().to_vec(), 0x8 | 0x7),
        }
    }
}

/// Up to [`MAX_INLINE_TAGS`] `(key, value)` pairs stored inline, in the order they were sent.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Tags<'a> {
    pairs: [(&'a str, &'a str); MAX_INLINE_TAGS],
    len: u8,
}

impl std::fmt::Debug for Tags<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl Default for Tags<'_> {
    fn default() -> Self {
        Tags {
            pairs: [("", ""); MAX_INLINE_TAGS],
            len: 0,
        }
    }
}

impl<'a> Tags<'a> {
    /// The pairs as a slice.
    pub fn as_slice(&self) -> &[(&'a str, &'a str)] {
        &self.pairs[..usize::from(self.len)]
    }

    /// Iterates over the pairs in the order they were sent.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &'a str)> + '_ {
        self.as_slice().iter().copied()
    }

    /// The number of pairs.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Whether there are no pairs.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The value for `key`, if present.
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// Appends a pair; returns `false` (and drops it) when full.
    pub(crate) fn push(&mut self, key: &'a str, value: &'a str) -> bool {
        let i = usize::from(self.len);
        if i == MAX_INLINE_TAGS {
            return false;
        }
        self.pairs[i] = (key, value);
        self.len += 1;
        true
    }
}

/// One data point, borrowing its names from the input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PointRef<'a> {
    /// The metric name.
    pub metric: &'a str,
    /// The timestamp as sent: seconds or milliseconds, see [`PointRef::millis`]. A telnet
    /// `sec.frac` timestamp is converted to milliseconds here.
    pub timestamp: i64,
    /// Whether [`PointRef::timestamp`] is in milliseconds.
    pub millis: bool,
    /// The value.
    pub value: Num,
    /// The tags, in the order they were sent, without duplicates.
    pub tags: Tags<'a>,
}

impl PointRef<'_> {
    /// The timestamp in milliseconds since the epoch.
    pub fn ts_ms(&self) -> i64 {
        if self.millis {
            self.timestamp
        } else {
            self.timestamp.saturating_mul(1000)
        }
    }
}

/// Whether OpenTSDB reads the integer timestamp `ts` as milliseconds (magnitude rule, §a.4).
pub fn is_millis(ts: i64) -> bool {
    (ts as u64) & SECOND_MASK != 0
}

/// Parses an integer like OpenTSDB's `Tags.parseLong`; the error is Java's message.
pub(crate) fn parse_long(s: &str) -> Result<i64, String> {
    let bytes = s.as_bytes();
    let Some(&first) = bytes.first() else {
        return Err("Empty string".to_owned());
    };
    let signed = first == b'+' || first == b'-';
    if signed && bytes.len() == 1 {
        return Err(format!("Just a sign, no value: {s}"));
    }
    // Java counts UTF-16 units; that count never exceeds the byte count.
    let max = if signed { 20 } else { 19 };
    if bytes.len() > max && s.encode_utf16().count() > max {
        return Err(format!("Value too long: {s}"));
    }
    let digits = if signed { &s[1..] } else { s };
    // Accumulate negatively so that i64::MIN parses, as Java does.
    let mut v: i64 = 0;
    let mut overflow = false;
    for c in digits.chars() {
        let Some(d) = c.to_digit(10) else {
            return Err(format!("Invalid character '{c}' in {s}"));
        };
        match v.checked_mul(10).and_then(|m| m.checked_sub(i64::from(d))) {
            Some(n) => v = n,
            None => overflow = true,
        }
    }
    if overflow {
        return Err(format!("Overflow in {s}"));
    }
    if first == b'-' {
        Ok(v)
    } else {
        v.checked_neg().ok_or_else(|| format!("Overflow in {s}"))
    }
}

/// OpenTSDB's `Tags.looksLikeInteger`: no `.`, `e` or `E` in the text.
pub(crate) fn looks_like_integer(s: &str) -> bool {
    !s.bytes().any(|b| matches!(b, b'.' | b'e' | b'E'))
}

/// Parses a float roughly as Java's `Double.parseDouble` does (surrounding control characters
/// and spaces trimmed, an optional `f`/`F`/`d`/`D` suffix); the error is Java's message.
pub(crate) fn parse_float(s: &str) -> Result<f64, String> {
    if let Some(v) = parse_plain_decimal(s) {
        return Ok(v);
    }
    let t = s.trim_matches(|c: char| c <= ' ');
    if t.is_empty() {
        return Err("empty String".to_owned());
    }
    let body = t.strip_suffix(['f', 'F', 'd', 'D']).unwrap_or(t);
    // Rust also accepts `inf`/`nan` spellings that Java does not; they never reach here with a
    // `.`/`e`, but guard anyway so only digits, signs, dots and exponents are parsed.
    let plain = body
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    match body.parse::<f64>() {
        Ok(v) if plain => Ok(v),
        _ if t.bytes().filter(|&b| b == b'.').count() > 1 => Err("multiple points".to_owned()),
        _ => Err(format!("For input string: \"{s}\"")),
    }
}

/// The powers of ten an f64 holds exactly, for dividing a decimal's digits.
pub(crate) const POW10_EXACT: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// The common float spelling, `[-]digits.digits` with at most 15 digits in all, parsed
/// exactly: the digits as an integer below 2^53 divided by a power of ten up to 10^15, both
/// exact in an f64, so the one correctly rounded division equals the correctly rounded parse
/// of the text. `None` for anything else, which takes the general path.
pub(crate) fn parse_plain_decimal(s: &str) -> Option<f64> {
    let (neg, digits) = match s.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        b => (false, b),
    };
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    let mut mantissa: u64 = 0;
    let mut n_digits = 0;
    let mut frac_digits: Option<usize> = None;
    for &b in digits {
        match b {
            b'0'..=b'9' => {
                mantissa = mantissa * 10 + u64::from(b - b'0');
                n_digits += 1;
                if let Some(f) = &mut frac_digits {
                    *f += 1;
                }
            }
            b'.' if frac_digits.is_none() => frac_digits = Some(0),
            _ => return None,
        }
    }
    // Digits on both sides of the point: "5." and ".5" take the general path.
    let frac = frac_digits?;
    if frac == 0 || n_digits == frac || n_digits > 15 {
        return None;
    }
    let v = mantissa as f64 / POW10_EXACT[frac];
    Some(if neg { -v } else { v })
}

/// Parses a value per §a.3: integer unless the text holds `.`, `e` or `E`. NaN and infinities
/// are returned as floats here and rejected by [`check_point`].
pub(crate) fn parse_value(s: &str) -> Result<Num, String> {
    if looks_like_integer(s) {
        parse_long(s).map(Num::Int)
    } else {
        parse_float(s).map(Num::Float)
    }
}

/// Formats tags like Java's `Map.toString`: `{k=v, k2=v2}`.
pub(crate) fn java_map<'t>(tags: impl IntoIterator<Item = (&'t str, &'t str)>) -> String {
    let mut out = String::from("{");
    for (i, (k, v)) in tags.into_iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{k}={v}");
    }
    out.push('}');
    out
}

/// Checks a name against §a.2.
/// ASCII bytes every configuration allows in names: letters, digits, `-`, `_`, `.`, `/`.
pub(crate) static STANDARD_NAME_BYTES: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b'/');
        b += 1;
    }
    t
};

pub(crate) fn check_name(
    cfg: &ParseConfig,
    what: impl FnOnce() -> String,
    name: &str,
) -> Result<(), PointError> {
    if name.is_empty() {
        return Err(PointError::EmptyName { what: what() });
    }
    // Nearly every name is plain ASCII from the standard set: check those bytes with a table
    // and fall back to the per-character rules only for the rest.
    if name.bytes().all(|b| STANDARD_NAME_BYTES[usize::from(b)]) {
        return Ok(());
    }
    match name.chars().find(|&c| !cfg.is_allowed_char(c)) {
        None => Ok(()),
        Some(ch) => Err(PointError::IllegalCharacter {
            what: what(),
            name: name.to_owned(),
            ch,
        }),
    }
}

/// The checks of OpenTSDB's `TSDB.addPoint`, in its order (§b.3 step 8): NaN/Inf, timestamp
/// range, no tags, too many tags, metric characters, then each tag key and value.
/// `tags` holds every distinct tag, which may be more than fit inline.
pub(crate) fn check_point(
    cfg: &ParseConfig,
    metric: &str,
    timestamp: i64,
    millis: bool,
    value: Num,
    tags: &[(&str, &str)],
) -> Result<(), PointError> {
    if let Num::Float(v) = value
        && !v.is_finite()
    {
        let value = if v.is_nan() {
            "NaN"
        } else if v > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        };
        return Err(PointError::NotFinite {
            value,
            metric: metric.to_owned(),
            timestamp,
        });
    }
    if millis && !(0..=MAX_TIMESTAMP_MS).contains(&timestamp) {
        let (bytes, flags) = value.encoded();
        let value_bytes = format!("{:?}", bytes.iter().map(|&b| b as i8).collect::<Vec<_>>());
        return Err(PointError::BadTimestamp {
            timestamp,
            value_bytes,
            flags,
            metric: metric.to_owned(),
            tags: java_map(tags.iter().copied()),
        });
    }
    if tags.is_empty() {
        return Err(PointError::NoTags {
            metric: metric.to_owned(),
        });
    }
    if tags.len() > cfg.max_tags() {
        return Err(PointError::TooManyTags {
            count: tags.len(),
            max: cfg.max_tags(),
            tags: java_map(tags.iter().copied()),
        });
    }
    check_name(cfg, || "metric name".to_owned(), metric)?;
    for &(k, v) in tags {
        check_name(cfg, || format!("tag name with value [{v}]"), k)?;
        check_name(cfg, || format!("tag value with key [{k}]"), v)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The exact fast path agrees with the general parse, bit for bit, on every text it
        /// takes, and takes the usual gauge spellings.
        #[test]
        fn plain_decimals_parse_as_rust_does(
            neg in any::<bool>(),
            int in "[0-9]{0,12}",
            frac in "[0-9]{0,12}",
            dot in any::<bool>(),
        ) {
            let s = format!("{}{int}{}{frac}", if neg { "-" } else { "" }, if dot { "." } else { "" });
            if let Some(v) = parse_plain_decimal(&s) {
                let want: f64 = s.parse().map_err(|e| TestCaseError::fail(format!("{s}: {e}")))?;
                prop_assert_eq!(v.to_bits(), want.to_bits(), "{}", s);
            }
            if dot && !int.is_empty() && !frac.is_empty() && int.len() + frac.len() <= 15 {
                prop_assert!(parse_plain_decimal(&s).is_some(), "{}", s);
            }
        }
    }

    #[test]
    fn parse_long_matches_java() {
        assert_eq!(parse_long("42"), Ok(42));
        assert_eq!(parse_long("+42"), Ok(42));
        assert_eq!(parse_long("-42"), Ok(-42));
        assert_eq!(parse_long("9223372036854775807"), Ok(i64::MAX));
        assert_eq!(parse_long("-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(
            parse_long("9223372036854775808").unwrap_err(),
            "Overflow in 9223372036854775808"
        );
        assert_eq!(
            parse_long("9999999999999999999").unwrap_err(),
            "Overflow in 9999999999999999999"
        );
        assert_eq!(
            parse_long("10000000000000000000").unwrap_err(),
            "Value too long: 10000000000000000000"
        );
        assert_eq!(parse_long("-").unwrap_err(), "Just a sign, no value: -");
        assert_eq!(parse_long("").unwrap_err(), "Empty string");
        assert_eq!(
            parse_long("abc").unwrap_err(),
            "Invalid character 'a' in abc"
        );
        assert_eq!(
            parse_long("NaN").unwrap_err(),
            "Invalid character 'N' in NaN"
        );
        assert_eq!(parse_long("1٣").unwrap_err(), "Invalid character '٣' in 1٣");
    }

    #[test]
    fn values_follow_the_text_rule() {
        assert_eq!(parse_value("42"), Ok(Num::Int(42)));
        assert_eq!(parse_value("42.5"), Ok(Num::Float(42.5)));
        assert_eq!(parse_value("1e3"), Ok(Num::Float(1000.0)));
        assert_eq!(parse_value("1E3"), Ok(Num::Float(1000.0)));
        assert_eq!(parse_value("1.5f"), Ok(Num::Float(1.5)));
        assert_eq!(parse_value("1.2.3").unwrap_err(), "multiple points");
        assert_eq!(parse_value("1.x").unwrap_err(), "For input string: \"1.x\"");
        assert_eq!(
            parse_value("Infinity").unwrap_err(),
            "Invalid character 'I' in Infinity"
        );
        assert_eq!(
            parse_value("inf.0").unwrap_err(),
            "For input string: \"inf.0\""
        );
        assert_eq!(parse_value("1e400"), Ok(Num::Float(f64::INFINITY)));
    }

    #[test]
    fn magnitude_rule() {
        assert!(!is_millis(4_294_967_295));
        assert!(is_millis(4_294_967_296));
        assert!(is_millis(1_700_000_000_000));
        assert!(!is_millis(1_700_000_000));
    }

    #[test]
    fn fits_in_f32() {
        assert!(Num::Float(42.5).fits_in_f32());
        assert!(!Num::Float(42.1).fits_in_f32());
        assert!(!Num::Int(1).fits_in_f32());
    }

    #[test]
    fn check_point_order_and_texts() {
        let cfg = ParseConfig::default();
        let tags = [("host", "a")];
        let err =
            check_point(&cfg, "m", 10_000_000_000_000, true, Num::Int(42), &tags).unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad timestamp=10000000000000 when trying to add value=[42]/0 to metric=m, tags={host=a}"
        );
        let err =
            check_point(&cfg, "m", 10_000_000_000_000, true, Num::Float(42.5), &tags).unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad timestamp=10000000000000 when trying to add value=[66, 42, 0, 0]/11 to metric=m, \
             tags={host=a}"
        );
        let err =
            check_point(&cfg, "m", 10_000_000_000_000, true, Num::Int(300), &tags).unwrap_err();
        assert!(err.to_string().contains("value=[1, 44]/1 "), "{err}");
        let err = check_point(&cfg, "m", 1, false, Num::Float(f64::NAN), &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "value is NaN or Infinite: NaN for metric=m timestamp=1"
        );
        let err = check_point(&cfg, "m", 1, false, Num::Float(f64::NEG_INFINITY), &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "value is NaN or Infinite: -Infinity for metric=m timestamp=1"
        );
        let err = check_point(&cfg, "m", 1, false, Num::Int(1), &[]).unwrap_err();
        assert_eq!(err.to_string(), "Need at least one tag (metric=m, tags={})");
        let err = check_point(&cfg, "m", 1, false, Num::Int(1), &[("host", "")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Invalid tag value with key [host]: empty string"
        );
        let err = check_point(&cfg, "m", 1, false, Num::Int(1), &[("a b", "x")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Invalid tag name with value [x] (\"a b\"): illegal character:  "
        );
    }

    #[test]
    fn allowed_characters() {
        let cfg = ParseConfig::default();
        for ok in ["sys.cpu-user_0/x", "Москва", "中国", "Ünïcödé"] {
            assert_eq!(
                check_name(&cfg, || "metric name".into(), ok),
                Ok(()),
                "{ok}"
            );
        }
        for (bad, ch) in [
            ("a:b", ':'),
            ("a{", '{'),
            ("x٣", '٣'),
            ("e🙂", '🙂'),
            ("q\"", '"'),
        ] {
            let err = check_name(&cfg, || "metric name".into(), bad).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("Invalid metric name (\"{bad}\"): illegal character: {ch}")
            );
        }
        let cfg = ParseConfig::default().with_allowed_special_chars(":!");
        assert_eq!(check_name(&cfg, || "metric name".into(), "a:b!"), Ok(()));
    }

    #[test]
    fn ts_ms_normalises() {
        let mut p = PointRef {
            metric: "m",
            timestamp: 5,
            millis: false,
            value: Num::Int(1),
            tags: Tags::default(),
        };
        assert_eq!(p.ts_ms(), 5000);
        p.millis = true;
        assert_eq!(p.ts_ms(), 5);
    }
}
