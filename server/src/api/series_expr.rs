//! The `metric{tagk=tagv,...}` series expression of `/api/search/lookup`, `/api/query/last`
//! and `/api/uid/tsmeta` (OpenTSDB's `Tags.parseWithMetric`).

/// A parsed series expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SeriesExpr {
    /// The metric; `None` when the expression starts with `{` (or is empty).
    pub(crate) metric: Option<String>,
    /// `(key, value)` pairs in the order given; either side may be empty or `*`.
    pub(crate) tags: Vec<(String, String)>,
}

/// Parses `metric`, `metric{k=v,...}` or `{k=v,...}`. Spaces around names are trimmed.
pub(crate) fn parse(s: &str) -> Result<SeriesExpr, String> {
    let s = s.trim();
    let (metric, rest) = match s.find('{') {
        None => {
            if s.contains('}') {
                return Err(format!("unbalanced braces in {s:?}"));
            }
            (s, None)
        }
        Some(i) => {
            let Some(inner) = s[i + 1..].strip_suffix('}') else {
                return Err(format!("missing '}}' at the end of {s:?}"));
            };
            (&s[..i], Some(inner))
        }
    };
    let metric = metric.trim();
    let mut tags = Vec::new();
    if let Some(inner) = rest {
        if inner.contains(['{', '}']) {
            return Err(format!("unbalanced braces in {s:?}"));
        }
        for pair in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((k, v)) = pair.split_once('=') else {
                return Err(format!("invalid tag {pair:?}: no '='"));
            };
            let (k, v) = (k.trim(), v.trim());
            if k.is_empty() && v.is_empty() {
                return Err(format!("invalid tag {pair:?}: empty key and value"));
            }
            tags.push((k.to_string(), v.to_string()));
        }
    }
    Ok(SeriesExpr {
        metric: (!metric.is_empty()).then(|| metric.to_string()),
        tags,
    })
}

/// True for a side of a pair that means "any": empty or `*`.
pub(crate) fn is_any(s: &str) -> bool {
    s.is_empty() || s == "*"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn series_expressions_parse() {
        assert_eq!(
            parse("sys.cpu.user{host=*, dc=lga}"),
            Ok(SeriesExpr {
                metric: Some("sys.cpu.user".into()),
                tags: pairs(&[("host", "*"), ("dc", "lga")])
            })
        );
        assert_eq!(
            parse("{=web01,host=}"),
            Ok(SeriesExpr {
                metric: None,
                tags: pairs(&[("", "web01"), ("host", "")])
            })
        );
        assert_eq!(
            parse("m"),
            Ok(SeriesExpr {
                metric: Some("m".into()),
                tags: vec![]
            })
        );
        assert_eq!(parse("m{}").map(|e| e.tags.len()), Ok(0));
        for bad in ["m{host=a", "m}", "m{host}", "m{=}", "m{a=b}{c=d}"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(is_any("*") && is_any("") && !is_any("a"));
    }
}
