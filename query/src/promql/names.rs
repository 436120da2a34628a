//! Names between PromQL and storage.
//!
//! A stored metric name is the PromQL label `__name__`, and each tag is a label of the same
//! name. Remote write and the line protocol store foreign names through
//! [`strata_tsdb::escape_name`] (`localhost:9090` is stored as `localhost__x3A_9090`), so PromQL
//! shows each stored name through [`strata_tsdb::unescape_name`], and looks a PromQL name up
//! as its escaped form (`docs/prometheus.md`, "Names"). A stored name that no escape produced
//! (`put m 1 1 host=a__xZ` over telnet) is shown as it is, and is found under that name too.
//! Prometheus 3 takes any UTF-8 name (quoted: `{"cpu.user"}`), so every stored name can be
//! shown.
//!
//! OpenTSDB names usually contain dots (`sys.cpu.user`), which bare PromQL identifiers cannot.
//! [`quote_dotted_names`] turns a dotted name written bare, as VictoriaMetrics' MetricsQL and
//! OpenTSDB users write it, into PromQL's quoted form before parsing.

use std::borrow::Cow;

use strata_tsdb::{escape_name, unescape_name};

/// The PromQL name or value of a stored metric name, tag name or tag value.
pub(crate) fn prom_name(stored: &str) -> Cow<'_, str> {
    unescape_name(stored).unwrap_or(Cow::Borrowed(stored))
}

/// The stored names that show as the PromQL name or value `prom` under [`prom_name`]: its
/// escaped form, and `prom` itself when that is not an escaped form (a name stored by other
/// means, shown as it is). One name, nearly always.
pub(crate) fn stored_names(prom: &str) -> StoredNames<'_> {
    let escaped = escape_name(prom);
    let literal = (escaped != prom && unescape_name(prom).is_none()).then_some(prom);
    StoredNames { escaped, literal }
}

/// The result of [`stored_names`].
#[derive(Debug, Clone)]
pub(crate) struct StoredNames<'a> {
    escaped: Cow<'a, str>,
    literal: Option<&'a str>,
}

impl StoredNames<'_> {
    /// Each stored name, the escaped form first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> {
        std::iter::once(&*self.escaped).chain(self.literal)
    }

    /// Whether `stored` is one of the names.
    pub(crate) fn contains(&self, stored: &str) -> bool {
        self.iter().any(|n| n == stored)
    }
}

/// Keywords after which a parenthesis holds label names.
const LABEL_LIST_KEYWORDS: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

fn ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b':'
}

fn ident_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b':'
}

/// Rewrites each bare dotted name (`cpu.user`) into PromQL's quoted form: a metric name
/// becomes a quoted name inside a selector (`{"cpu.user"}`, or `{"cpu.user", host="a"}` when
/// matchers follow), and a label name inside braces or a label list is quoted (`"host.name"`).
/// Valid PromQL never has a dot right after an identifier, so every valid query is left as it is.
pub(crate) fn quote_dotted_names(query: &str) -> Cow<'_, str> {
    let b = query.as_bytes();
    if !b.contains(&b'.') {
        return Cow::Borrowed(query);
    }
    let mut out = String::with_capacity(query.len() + 16);
    let mut changed = false;
    let mut braces = 0usize;
    // For each open parenthesis: whether it holds label names.
    let mut parens: Vec<bool> = Vec::new();
    let mut after_label_keyword = false;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        match c {
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' | b'\'' | b'`' => {
                i += 1;
                while i < b.len() && b[i] != c {
                    if b[i] == b'\\' && c != b'`' {
                        i += 1;
                    }
                    i += 1;
                }
                i = (i + 1).min(b.len());
                after_label_keyword = false;
            }
            b'{' => {
                braces += 1;
                i += 1;
            }
            b'}' => {
                braces = braces.saturating_sub(1);
                i += 1;
            }
            b'(' => {
                parens.push(after_label_keyword);
                after_label_keyword = false;
                i += 1;
            }
            b')' => {
                parens.pop();
                i += 1;
            }
            c if c.is_ascii_digit()
                || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) =>
            {
                // A number or a duration, dots included.
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.' || b[i] == b'_')
                {
                    i += 1;
                }
                after_label_keyword = false;
            }
            c if ident_start(c) => {
                while i < b.len() && ident_char(b[i]) {
                    i += 1;
                }
                let mut dotted = false;
                while i + 1 < b.len() && b[i] == b'.' && ident_char(b[i + 1]) {
                    dotted = true;
                    i += 1;
                    while i < b.len() && ident_char(b[i]) {
                        i += 1;
                    }
                }
                let name = &query[start..i];
                if !dotted {
                    after_label_keyword = LABEL_LIST_KEYWORDS.contains(&name);
                    out.push_str(name);
                    continue;
                }
                changed = true;
                after_label_keyword = false;
                if braces > 0 || parens.last().copied().unwrap_or(false) {
                    out.push('"');
                    out.push_str(name);
                    out.push('"');
                    continue;
                }
                let mut j = i;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                if b.get(j) == Some(&b'{') {
                    out.push_str("{\"");
                    out.push_str(name);
                    out.push_str("\",");
                    braces += 1;
                    i = j + 1;
                } else {
                    out.push_str("{\"");
                    out.push_str(name);
                    out.push_str("\"}");
                }
                continue;
            }
            c if c.is_ascii_whitespace() => i += 1,
            _ => {
                after_label_keyword = false;
                i += 1;
            }
        }
        // Copy what was scanned as it is (multi-byte characters included).
        let mut end = i.max(start + 1).min(b.len());
        while !query.is_char_boundary(end) {
            end += 1;
        }
        out.push_str(&query[start..end]);
        i = end;
    }
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(query)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_names_show_as_written() {
        let stored = |s| {
            stored_names(s)
                .iter()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(stored("host"), ["host"]);
        assert_eq!(
            stored("localhost:9090"),
            ["localhost__x3A_9090", "localhost:9090"]
        );
        assert_eq!(stored("x__xy"), ["x__x5F__xy", "x__xy"]);
        // An escaped form is shown unescaped, so it is not also looked up as it is.
        assert_eq!(stored("a__x3A_b"), ["a__x5F__x3A_b"]);
        for s in [
            "host",
            "localhost:9090",
            "x__xy",
            "a__x3A_b",
            "+Inf",
            "caf\u{e9}",
        ] {
            for n in stored_names(s).iter() {
                assert_eq!(prom_name(n), s, "{n}");
            }
        }
        assert_eq!(prom_name("a__xZ"), "a__xZ");
    }

    #[test]
    fn dotted_names_are_quoted() {
        let q = |s| quote_dotted_names(s).into_owned();
        assert_eq!(q("cpu.user"), r#"{"cpu.user"}"#);
        assert_eq!(q(r#"cpu.user{host="a.b"}"#), r#"{"cpu.user",host="a.b"}"#);
        assert_eq!(q("cpu.user {}"), r#"{"cpu.user",}"#);
        assert_eq!(
            q("sum(avg_over_time(cpu.user[1m]))"),
            r#"sum(avg_over_time({"cpu.user"}[1m]))"#
        );
        assert_eq!(
            q("avg by (dc.name) (x{host.id=~\"a.*\"}) + on(a.b) y.z offset 1.5m"),
            r#"avg by ("dc.name") (x{"host.id"=~"a.*"}) + on("a.b") {"y.z"} offset 1.5m"#
        );
        // Valid PromQL is left as it is, numbers and strings with dots included.
        for s in [
            "rate(x[5m]) * 1.5e3 + .5",
            r#"x{a="b.c"} # a comment. with dots"#,
            "sum by (a) (x) / 0.25",
            "x ^ 2",
        ] {
            assert!(matches!(quote_dotted_names(s), Cow::Borrowed(_)), "{s}");
        }
        assert_eq!(q("sys.cpu.0 > 1"), r#"{"sys.cpu.0"} > 1"#);
        assert_eq!(q("é + a.b"), "é + {\"a.b\"}");
    }

    #[test]
    fn quoted_names_parse() {
        for s in [
            "cpu.user{host=\"a\"}[5m]",
            "sum by (dc.x) (cpu.user)",
            "a.b {}",
        ] {
            let quoted = quote_dotted_names(s);
            assert!(
                promql_parser::parser::parse(&quoted).is_ok(),
                "{s} -> {quoted}"
            );
        }
    }
}
