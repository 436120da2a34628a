//! The parsed data point, borrowed from the input, and the value and timestamp parsing shared
//! by the telnet and HTTP put paths (OpenTSDB's `Tags.parseLong`, `Tags.looksLikeInteger`,
//! `Const.SECOND_MASK`). The point checks are tsdb's ([`strata_tsdb::check_point`]).

use std::fmt::Write as _;

use strata_tsdb::{PointError, Value};

use crate::config::{MAX_INLINE_TAGS, ParseConfig};

/// The largest timestamp OpenTSDB accepts in milliseconds (year 2286).
pub const MAX_TIMESTAMP_MS: i64 = strata_tsdb::MAX_MS_TIMESTAMP;

/// Timestamps with any of these bits set are milliseconds, others seconds (`Const.SECOND_MASK`).
const SECOND_MASK: u64 = 0xFFFF_FFFF_0000_0000;

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
    pub value: Value,
    /// The tags, in the order they were sent, without duplicates.
    pub tags: Tags<'a>,
}

impl<'a> PointRef<'a> {
    /// The point as the storage layer takes it; borrows everything.
    pub fn to_tsdb(&self) -> strata_tsdb::PointRef<'_> {
        // Storage tells seconds from milliseconds by magnitude, so a small millisecond time is
        // passed as seconds; the parsers let only whole seconds through, so dividing is exact.
        let timestamp = if self.millis && !is_millis(self.timestamp) {
            self.timestamp / 1000
        } else {
            self.timestamp
        };
        strata_tsdb::PointRef {
            metric: self.metric,
            tags: self.tags.as_slice(),
            timestamp,
            value: self.value,
        }
    }

    /// The timestamp in milliseconds since the epoch.
    pub fn ts_ms(&self) -> i64 {
        if self.millis {
            self.timestamp
        } else {
            self.timestamp.saturating_mul(1000)
        }
    }
}

/// Whether OpenTSDB reads the integer timestamp `ts` as milliseconds (magnitude rule, `Const.SECOND_MASK`).
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

/// Parses a value as OpenTSDB's `Tags.looksLikeInteger` decides: integer unless the text holds `.`, `e` or `E`. NaN and infinities
/// are returned as floats here and rejected by [`check_point`].
pub(crate) fn parse_value(s: &str) -> Result<Value, String> {
    if looks_like_integer(s) {
        parse_long(s).map(Value::Int)
    } else {
        parse_float(s).map(Value::Float)
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

/// The checks of OpenTSDB's `TSDB.addPoint` with the parser's settings: see
/// [`strata_tsdb::check_point`]. `tags` holds every distinct tag, which may be more than fit
/// inline.
pub(crate) fn check_point(
    cfg: &ParseConfig,
    metric: &str,
    timestamp: i64,
    millis: bool,
    value: Value,
    tags: &[(&str, &str)],
) -> Result<(), PointError> {
    strata_tsdb::check_point(
        cfg.name_rules(),
        cfg.max_tags(),
        metric,
        timestamp,
        millis,
        value,
        tags,
    )
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
        assert_eq!(parse_value("42"), Ok(Value::Int(42)));
        assert_eq!(parse_value("42.5"), Ok(Value::Float(42.5)));
        assert_eq!(parse_value("1e3"), Ok(Value::Float(1000.0)));
        assert_eq!(parse_value("1E3"), Ok(Value::Float(1000.0)));
        assert_eq!(parse_value("1.5f"), Ok(Value::Float(1.5)));
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
        assert_eq!(parse_value("1e400"), Ok(Value::Float(f64::INFINITY)));
    }

    #[test]
    fn magnitude_rule() {
        assert!(!is_millis(4_294_967_295));
        assert!(is_millis(4_294_967_296));
        assert!(is_millis(1_700_000_000_000));
        assert!(!is_millis(1_700_000_000));
    }

    /// A float that survives a round trip through `f32` is described in 4 bytes, as
    /// OpenTSDB 2.4 stores it; any other float in 8, an integer in the fewest that hold it.
    #[test]
    fn fits_in_f32() {
        let cfg = ParseConfig::default();
        let described = |v| {
            check_point(&cfg, "m", 10_000_000_000_000, true, v, &[("h", "a")])
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(described(Value::Float(42.5)).contains("/11 "));
        assert!(described(Value::Float(42.1)).contains("/15 "));
        assert!(described(Value::Int(1)).contains("value=[1]/0 "));
    }

    #[test]
    fn check_point_order_and_texts() {
        let cfg = ParseConfig::default();
        let tags = [("host", "a")];
        let err =
            check_point(&cfg, "m", 10_000_000_000_000, true, Value::Int(42), &tags).unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad timestamp=10000000000000 when trying to add value=[42]/0 to metric=m, tags={host=a}"
        );
        let err = check_point(
            &cfg,
            "m",
            10_000_000_000_000,
            true,
            Value::Float(42.5),
            &tags,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad timestamp=10000000000000 when trying to add value=[66, 42, 0, 0]/11 to metric=m, \
             tags={host=a}"
        );
        let err =
            check_point(&cfg, "m", 10_000_000_000_000, true, Value::Int(300), &tags).unwrap_err();
        assert!(err.to_string().contains("value=[1, 44]/1 "), "{err}");
        let err = check_point(&cfg, "m", 1, false, Value::Float(f64::NAN), &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "value is NaN or Infinite: NaN for metric=m timestamp=1"
        );
        let err =
            check_point(&cfg, "m", 1, false, Value::Float(f64::NEG_INFINITY), &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "value is NaN or Infinite: -Infinity for metric=m timestamp=1"
        );
        let err = check_point(&cfg, "m", 1, false, Value::Int(1), &[]).unwrap_err();
        assert_eq!(err.to_string(), "Need at least one tag (metric=m, tags={})");
        let err = check_point(&cfg, "m", 1, false, Value::Int(1), &[("host", "")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Invalid tag value with key [host]: empty string"
        );
        let err = check_point(&cfg, "m", 1, false, Value::Int(1), &[("a b", "x")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Invalid tag name with value [x] (\"a b\"): illegal character:  "
        );
    }

    fn check_metric(cfg: &ParseConfig, metric: &str) -> Result<(), PointError> {
        check_point(cfg, metric, 1, false, Value::Int(1), &[("host", "a")])
    }

    #[test]
    fn allowed_characters() {
        let cfg = ParseConfig::default();
        for ok in ["sys.cpu-user_0/x", "Москва", "中国", "Ünïcödé"] {
            assert_eq!(check_metric(&cfg, ok), Ok(()), "{ok}");
        }
        for (bad, ch) in [
            ("a:b", ':'),
            ("a{", '{'),
            ("x٣", '٣'),
            ("e🙂", '🙂'),
            ("q\"", '"'),
        ] {
            let err = check_metric(&cfg, bad).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("Invalid metric name (\"{bad}\"): illegal character: {ch}")
            );
        }
        let cfg = ParseConfig::default().with_allowed_special_chars(":!");
        assert_eq!(check_metric(&cfg, "a:b!"), Ok(()));
    }

    #[test]
    fn ts_ms_normalises() {
        let mut p = PointRef {
            metric: "m",
            timestamp: 5,
            millis: false,
            value: Value::Int(1),
            tags: Tags::default(),
        };
        assert_eq!(p.ts_ms(), 5000);
        p.millis = true;
        assert_eq!(p.ts_ms(), 5);
    }
}
