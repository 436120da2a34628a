//! OpenTSDB's rules for names, tag sets and write timestamps (OpenTSDB docs: `user_guide/writing`,
//! `api_http/put`).
//!
//! Names are UTF-8 end to end (`docs/compat.md` #1): a name is checked char by char, and is
//! never re-encoded.

use crate::cell::encode_value;
use crate::error::{PointError, format_tags};
use crate::value::Value;

type Result<T> = std::result::Result<T, PointError>;

/// Largest millisecond timestamp accepted on write (year 2286).
pub const MAX_MS_TIMESTAMP: i64 = 9_999_999_999_999;

/// Timestamps above this are milliseconds, at or below it seconds (`Const.SECOND_MASK`).
pub(crate) const MAX_SECOND_TIMESTAMP: i64 = 0xFFFF_FFFF;

/// The characters a name may hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameRules {
    /// Extra characters allowed besides `a-zA-Z0-9-_./` and Unicode letters
    /// (OpenTSDB's `tsd.core.tag.allow_specialchars`).
    pub extra_chars: Vec<char>,
}

impl NameRules {
    /// True when `c` may appear in a metric, tag key or tag value.
    pub fn allows(&self, c: char) -> bool {
        c.is_ascii_alphanumeric()
            || matches!(c, '-' | '_' | '.' | '/')
            || c.is_alphabetic()
            || self.extra_chars.contains(&c)
    }

    /// Checks one name. `what` builds the noun of the error message lazily.
    pub(crate) fn check(&self, name: &str, what: impl FnOnce() -> String) -> Result<()> {
        if name.is_empty() {
            return Err(PointError::EmptyName { what: what() });
        }
        // Nearly every name is plain ASCII from the standard set: check those bytes with a
        // table, and take the per-character rules only for the rest.
        if name.bytes().all(|b| STANDARD_NAME_BYTES[usize::from(b)]) {
            return Ok(());
        }
        match name.chars().find(|&c| !self.allows(c)) {
            None => Ok(()),
            Some(ch) => Err(PointError::IllegalCharacter {
                what: what(),
                name: name.to_string(),
                ch,
            }),
        }
    }

    /// Checks a metric name (`Invalid metric name ...`).
    pub fn check_metric(&self, name: &str) -> Result<()> {
        self.check(name, || "metric name".to_string())
    }

    /// Checks a tag key and its value, with OpenTSDB's write-path nouns.
    pub fn check_tag(&self, key: &str, value: &str) -> Result<()> {
        self.check(key, || format!("tag name with value [{value}]"))?;
        self.check(value, || format!("tag value with key [{key}]"))
    }
}

/// ASCII bytes every configuration allows in names: letters, digits, `-`, `_`, `.`, `/`.
pub static STANDARD_NAME_BYTES: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b'/');
        b += 1;
    }
    t
};

/// Refuses NaN and the infinities, which OpenTSDB does not store.
pub(crate) fn check_finite(value: Value, metric: &str, timestamp: i64) -> Result<()> {
    match value {
        Value::Float(v) if !v.is_finite() => Err(PointError::NotFinite {
            value: v,
            metric: metric.to_owned(),
            timestamp,
        }),
        _ => Ok(()),
    }
}

/// The checks of OpenTSDB's `TSDB.addPoint`, in its order: NaN or infinity, the range of a
/// millisecond timestamp, no tags, too many tags, the metric's characters, then each tag key
/// and value. `tags` holds every distinct tag. Protocol parsers call this to answer with
/// OpenTSDB's first error for a point; [`crate::Tsdb::write`] runs the same rules.
pub fn check_point(
    rules: &NameRules,
    max_tags: usize,
    metric: &str,
    timestamp: i64,
    millis: bool,
    value: Value,
    tags: &[(&str, &str)],
) -> Result<()> {
    check_finite(value, metric, timestamp)?;
    if millis && !(0..=MAX_MS_TIMESTAMP).contains(&timestamp) {
        return Err(PointError::BadTimestamp {
            timestamp,
            value: encode_value(value).describe(),
            metric: metric.to_owned(),
            tags: format_tags(tags),
        });
    }
    if tags.is_empty() {
        return Err(PointError::NoTags {
            metric: metric.to_owned(),
        });
    }
    if tags.len() > max_tags {
        return Err(PointError::TooManyTags {
            count: tags.len(),
            max: max_tags,
            tags: format_tags(tags),
        });
    }
    rules.check_metric(metric)?;
    for &(k, v) in tags {
        rules.check_tag(k, v)?;
    }
    Ok(())
}

/// Normalizes a write timestamp to milliseconds. Values above `0xFFFFFFFF` are milliseconds,
/// others seconds (a magnitude rule, OpenTSDB docs: `user_guide/writing`). `describe_value` renders
/// the value for the error message.
pub(crate) fn timestamp_to_ms<S: AsRef<str>>(
    timestamp: i64,
    metric: &str,
    tags: &[(S, S)],
    describe_value: impl FnOnce() -> String,
) -> Result<i64> {
    if timestamp < 0 {
        return Err(PointError::NegativeTimestamp {
            timestamp,
            value: describe_value(),
            metric: metric.to_string(),
            tags: format_tags(tags),
        });
    }
    if timestamp <= MAX_SECOND_TIMESTAMP {
        return Ok(timestamp * 1000);
    }
    // The row's base time is 4 bytes of seconds, so instants past 2106-02-07 cannot be stored
    // (OpenTSDB wraps them silently; we refuse them).
    if timestamp > MAX_MS_TIMESTAMP || timestamp / 1000 > i64::from(u32::MAX) {
        return Err(PointError::BadTimestamp {
            timestamp,
            value: describe_value(),
            metric: metric.to_string(),
            tags: format_tags(tags),
        });
    }
    Ok(timestamp)
}

/// Checks the tag count (1..=max distinct keys) and that no key repeats with another value.
/// An exact repeat of a pair is tolerated, as on OpenTSDB's telnet.
pub(crate) fn check_tag_set<S: AsRef<str>>(
    metric: &str,
    tags: &[(S, S)],
    max_tags: usize,
) -> Result<()> {
    if tags.is_empty() {
        return Err(PointError::NoTags {
            metric: metric.to_string(),
        });
    }
    for (i, (k, v)) in tags.iter().enumerate() {
        for (k2, v2) in &tags[..i] {
            if k.as_ref() == k2.as_ref() && v.as_ref() != v2.as_ref() {
                return Err(PointError::DuplicateTag {
                    pair: format!("{}={}", k.as_ref(), v.as_ref()),
                    tags: format_tags(tags),
                });
            }
        }
    }
    let distinct = tags
        .iter()
        .enumerate()
        .filter(|(i, (k, _))| !tags[..*i].iter().any(|(k2, _)| k2.as_ref() == k.as_ref()))
        .count();
    if distinct > max_tags {
        return Err(PointError::TooManyTags {
            count: distinct,
            max: max_tags,
            tags: format_tags(tags),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_opentsdb_rules() {
        let r = NameRules::default();
        assert!(r.check_metric("sys.cpu-0_user/x").is_ok());
        assert!(r.check_metric("Система.中国").is_ok());
        let e = r.check_metric("sys cpu").err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("Invalid metric name (\"sys cpu\"): illegal character:  ")
        );
        let e = r.check_metric("").err().map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some("Invalid metric name: empty string"));
        let e = r.check_tag("host", "a=b").err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("Invalid tag value with key [host] (\"a=b\"): illegal character: =")
        );
        let e = r.check_tag("ho st", "a").err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("Invalid tag name with value [a] (\"ho st\"): illegal character:  ")
        );
        // Emoji and non-letter digits from other scripts are rejected.
        assert!(r.check_metric("cpu😀").is_err());
        assert!(r.check_metric("cpu١").is_err());
        let r = NameRules {
            extra_chars: vec![' ', '@'],
        };
        assert!(r.check_metric("a b@c").is_ok());
    }

    #[test]
    fn timestamp_magnitude_rule() {
        let t: &[(&str, &str)] = &[("host", "a")];
        let d = || "[42]/0".to_string();
        assert_eq!(
            timestamp_to_ms(1356998400, "m", t, d).ok(),
            Some(1356998400000)
        );
        assert_eq!(
            timestamp_to_ms(0xFFFF_FFFF, "m", t, d).ok(),
            Some(0xFFFF_FFFF * 1000)
        );
        assert_eq!(
            timestamp_to_ms(4294967296, "m", t, d).ok(),
            Some(4294967296)
        );
        assert_eq!(
            timestamp_to_ms(4_294_967_295_999, "m", t, d).ok(),
            Some(4_294_967_295_999)
        );
        assert!(timestamp_to_ms(4_294_967_296_000, "m", t, d).is_err());
        let e = timestamp_to_ms(MAX_MS_TIMESTAMP + 1, "m", t, d)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some(
                "bad timestamp=10000000000000 when trying to add value=[42]/0 to metric=m, tags={host=a}"
            )
        );
        let e = timestamp_to_ms(-1, "m", t, d).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some(
                "negative  timestamp=-1 when trying to add value=[42]/0 to metric=m, tags={host=a}"
            )
        );
    }

    #[test]
    fn tag_sets() {
        let none: &[(&str, &str)] = &[];
        assert_eq!(
            check_tag_set("m", none, 8)
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("Need at least one tag (metric=m, tags={})")
        );
        assert!(check_tag_set("m", &[("a", "1"), ("a", "1")], 1).is_ok());
        assert_eq!(
            check_tag_set("m", &[("a", "1"), ("a", "2")], 8)
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("duplicate tag: a=2, tags={a=1, a=2}")
        );
        assert_eq!(
            check_tag_set("m", &[("a", "1"), ("b", "2")], 1)
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("Too many tags: 2 maximum allowed: 1, tags: {a=1, b=2}")
        );
    }
}
