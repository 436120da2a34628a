//! Tag value filters (OpenTSDB docs: `user_guide/query/filters`), compiled once and matched against
//! tag value names.
//!
//! The series index turns each filter into a union of the postings of the tag values it
//! accepts (see `SeriesIndex::find`).

use std::fmt;

use regex::Regex;

use crate::error::{Error, Result};

/// The filter types of OpenTSDB 2.4, plus `not_key` (`docs/compat.md` #10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FilterKind {
    /// `literal_or`: value is one of a `|`-separated list (case-sensitive).
    LiteralOr,
    /// `iliteral_or`: as `literal_or`, ignoring case.
    ILiteralOr,
    /// `not_literal_or`: key present and value not in the list.
    NotLiteralOr,
    /// `not_iliteral_or`: as `not_literal_or`, ignoring case.
    NotILiteralOr,
    /// `wildcard`: a `*` glob (`docs/compat.md` #6: anchored where there is no `*`).
    Wildcard,
    /// `iwildcard`: as `wildcard`, ignoring case.
    IWildcard,
    /// `regexp`: an unanchored regular expression search.
    Regexp,
    /// `not_key`: the series does not have the tag key.
    NotKey,
}

impl FilterKind {
    /// Every kind.
    pub const ALL: [FilterKind; 8] = [
        FilterKind::LiteralOr,
        FilterKind::ILiteralOr,
        FilterKind::NotLiteralOr,
        FilterKind::NotILiteralOr,
        FilterKind::Wildcard,
        FilterKind::IWildcard,
        FilterKind::Regexp,
        FilterKind::NotKey,
    ];

    /// The JSON `type` name.
    pub fn as_str(self) -> &'static str {
        match self {
            FilterKind::LiteralOr => "literal_or",
            FilterKind::ILiteralOr => "iliteral_or",
            FilterKind::NotLiteralOr => "not_literal_or",
            FilterKind::NotILiteralOr => "not_iliteral_or",
            FilterKind::Wildcard => "wildcard",
            FilterKind::IWildcard => "iwildcard",
            FilterKind::Regexp => "regexp",
            FilterKind::NotKey => "not_key",
        }
    }

    /// Parses a type name, ignoring ASCII case (URI filters are case-insensitive).
    pub fn parse(s: &str) -> Option<FilterKind> {
        FilterKind::ALL
            .into_iter()
            .find(|k| k.as_str().eq_ignore_ascii_case(s))
    }
}

impl fmt::Display for FilterKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone)]
enum Matcher {
    /// Values, lower-cased when the filter ignores case.
    Literals(Vec<String>),
    Glob(Glob),
    Regex(Regex),
    None,
}

/// A compiled tag value filter on one tag key.
#[derive(Debug, Clone)]
pub struct Filter {
    tagk: String,
    kind: FilterKind,
    expr: String,
    group_by: bool,
    matcher: Matcher,
}

impl Filter {
    /// Compiles a filter. Errors name the filter type and the expression.
    pub fn new(kind: FilterKind, tagk: &str, expr: &str, group_by: bool) -> Result<Filter> {
        let bad = |detail: &str| Error::InvalidFilter {
            filter: kind.as_str(),
            expr: expr.to_string(),
            detail: detail.to_string(),
        };
        if tagk.is_empty() {
            return Err(bad("empty tag key"));
        }
        let fold = matches!(
            kind,
            FilterKind::ILiteralOr | FilterKind::NotILiteralOr | FilterKind::IWildcard
        );
        let matcher = match kind {
            FilterKind::LiteralOr
            | FilterKind::ILiteralOr
            | FilterKind::NotLiteralOr
            | FilterKind::NotILiteralOr => {
                let vals: Vec<String> = expr
                    .split('|')
                    .filter(|v| !v.is_empty())
                    .map(|v| {
                        if fold {
                            v.to_lowercase()
                        } else {
                            v.to_string()
                        }
                    })
                    .collect();
                if vals.is_empty() {
                    return Err(bad("no value to match"));
                }
                Matcher::Literals(vals)
            }
            FilterKind::Wildcard | FilterKind::IWildcard => {
                if !expr.contains('*') {
                    return Err(bad("a wildcard filter needs at least one '*'"));
                }
                let pattern = if fold {
                    expr.to_lowercase()
                } else {
                    expr.to_string()
                };
                Matcher::Glob(Glob::new(&pattern))
            }
            FilterKind::Regexp => {
                Matcher::Regex(Regex::new(expr).map_err(|e| bad(&e.to_string()))?)
            }
            FilterKind::NotKey => Matcher::None,
        };
        Ok(Filter {
            tagk: tagk.to_string(),
            kind,
            expr: expr.to_string(),
            group_by,
            matcher,
        })
    }

    /// The tag key.
    pub fn tagk(&self) -> &str {
        &self.tagk
    }

    /// The filter type.
    pub fn kind(&self) -> FilterKind {
        self.kind
    }

    /// The expression as given.
    pub fn expr(&self) -> &str {
        &self.expr
    }

    /// Whether the query groups by this filter's key.
    pub fn group_by(&self) -> bool {
        self.group_by
    }

    /// The literal values of a `literal_or` filter (the ones resolved to UIDs directly).
    pub(crate) fn literals(&self) -> Option<&[String]> {
        match (&self.matcher, self.kind) {
            (Matcher::Literals(v), FilterKind::LiteralOr) => Some(v),
            _ => None,
        }
    }

    /// Whether every value passes (a wildcard of only `*`): then having the key is enough.
    pub(crate) fn matches_every_value(&self) -> bool {
        matches!(self.kind, FilterKind::Wildcard | FilterKind::IWildcard)
            && self.expr.chars().all(|c| c == '*')
    }

    /// Whether a series whose value for this key is `value` passes. `not_key` never passes a
    /// series that has the key.
    pub fn matches_value(&self, value: &str) -> bool {
        let folded;
        let v = if matches!(
            self.kind,
            FilterKind::ILiteralOr | FilterKind::NotILiteralOr | FilterKind::IWildcard
        ) {
            folded = value.to_lowercase();
            folded.as_str()
        } else {
            value
        };
        match &self.matcher {
            Matcher::Literals(list) => {
                let found = list.iter().any(|l| l == v);
                match self.kind {
                    FilterKind::NotLiteralOr | FilterKind::NotILiteralOr => !found,
                    _ => found,
                }
            }
            Matcher::Glob(g) => g.matches(v),
            Matcher::Regex(r) => r.is_match(v),
            Matcher::None => false,
        }
    }

    /// Whether a series with these tags passes (the brute-force definition the index must
    /// agree with, apart from the union of `literal_or` filters on one key).
    pub fn matches_tags<S: AsRef<str>>(&self, tags: &[(S, S)]) -> bool {
        let v = tags
            .iter()
            .find(|(k, _)| k.as_ref() == self.tagk)
            .map(|(_, v)| v.as_ref());
        match (self.kind, v) {
            (FilterKind::NotKey, v) => v.is_none(),
            (_, Some(v)) => self.matches_value(v),
            (_, None) => false,
        }
    }
}

/// A `*` glob: without a leading `*` it is anchored at the start, without a trailing `*` at the
/// end.
#[derive(Debug, Clone)]
struct Glob {
    first: String,
    middle: Vec<String>,
    last: String,
}

impl Glob {
    fn new(pattern: &str) -> Glob {
        let parts: Vec<&str> = pattern.split('*').collect();
        // `pattern` holds a '*', so there are at least two parts.
        let first = parts.first().copied().unwrap_or_default().to_string();
        let last = if parts.len() > 1 {
            parts.last().copied().unwrap_or_default().to_string()
        } else {
            String::new()
        };
        let middle = if parts.len() > 2 {
            parts[1..parts.len() - 1]
                .iter()
                .filter(|p| !p.is_empty())
                .map(|p| p.to_string())
                .collect()
        } else {
            Vec::new()
        };
        Glob {
            first,
            middle,
            last,
        }
    }

    fn matches(&self, v: &str) -> bool {
        if !v.starts_with(&self.first) {
            return false;
        }
        let pos = self.first.len();
        if v.len() < pos + self.last.len() || !v.ends_with(&self.last) {
            return false;
        }
        let end = v.len() - self.last.len();
        let mut rest = &v[pos..end];
        for m in &self.middle {
            match rest.find(m.as_str()) {
                Some(i) => rest = &rest[i + m.len()..],
                None => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(kind: FilterKind, expr: &str) -> Filter {
        Filter::new(kind, "host", expr, false).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn glob_semantics() {
        let w = |p: &str, v: &str| f(FilterKind::Wildcard, p).matches_value(v);
        assert!(w("web*", "web01"));
        assert!(!w("web*", "xweb01"));
        assert!(w("*01", "web01"));
        assert!(!w("*01", "web012"));
        assert!(w("*eb*", "web01"));
        assert!(w("*", "anything"));
        assert!(w("**", ""));
        assert!(w("web*com", "web.example.com"));
        assert!(!w("web*com", "xweb1com2"));
        assert!(!w("ab*ba", "aba"));
        assert!(w("ab*ba", "abba"));
        assert!(w("a*b*c", "a-b-c"));
        assert!(!w("a*b*c", "a-c-b"));
        assert!(!w("Web*", "web01"));
        assert!(f(FilterKind::IWildcard, "Web*").matches_value("WEB01"));
    }

    #[test]
    fn literals_and_regex() {
        assert!(f(FilterKind::LiteralOr, "a|b").matches_value("b"));
        assert!(!f(FilterKind::LiteralOr, "a|b").matches_value("B"));
        assert!(f(FilterKind::ILiteralOr, "a|b").matches_value("B"));
        assert!(f(FilterKind::NotLiteralOr, "a|b").matches_value("c"));
        assert!(!f(FilterKind::NotILiteralOr, "a|b").matches_value("A"));
        assert!(f(FilterKind::Regexp, "eb0").matches_value("web01"));
        assert!(Filter::new(FilterKind::LiteralOr, "h", "|", false).is_err());
        assert!(Filter::new(FilterKind::Wildcard, "h", "web", false).is_err());
        assert!(Filter::new(FilterKind::Regexp, "h", "(", false).is_err());
        assert_eq!(FilterKind::parse("Literal_Or"), Some(FilterKind::LiteralOr));
        assert_eq!(FilterKind::parse("nope"), None);
        let nk = f(FilterKind::NotKey, "");
        assert!(nk.matches_tags(&[("dc", "x")]));
        assert!(!nk.matches_tags(&[("host", "x")]));
        assert!(!f(FilterKind::NotLiteralOr, "a").matches_tags(&[("dc", "x")]));
    }
}
