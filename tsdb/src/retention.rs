//! Retention settings: how long each metric's points are kept, by their data time.
//!
//! A [`Retention`] has a global duration and per-metric rules, each a metric glob (`*` matches
//! any run of characters, `?` one character) and a duration; the first rule that matches a
//! metric decides it, and a metric no rule matches uses the global duration. A duration of
//! `None` keeps points forever, so a rule with `0`/`none` exempts its metrics from the global
//! duration. Durations are written as OpenTSDB writes relative times: a positive integer and
//! a unit, `ms`, `s`, `m`, `h`, `d`, `w`, `n` (30 days) or `y` (365 days).

use std::fmt;
use std::time::Duration;

/// One per-metric rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionRule {
    /// The metric glob.
    pub metric: String,
    /// How long the matching metrics' points are kept (`None`: forever).
    pub keep: Option<Duration>,
}

/// How long points are kept, per metric. The default keeps everything forever.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retention {
    /// For metrics no rule matches (`None`: forever).
    pub global: Option<Duration>,
    /// Rules in order; the first match wins.
    pub rules: Vec<RetentionRule>,
}

impl Retention {
    /// Whether nothing ever expires.
    pub fn is_forever(&self) -> bool {
        self.global.is_none() && self.rules.iter().all(|r| r.keep.is_none())
    }

    /// How long `metric`'s points are kept (`None`: forever).
    pub fn for_metric(&self, metric: &str) -> Option<Duration> {
        match self.rules.iter().find(|r| glob_match(&r.metric, metric)) {
            Some(r) => r.keep,
            None => self.global,
        }
    }

    /// Every duration some metric may get: the rules up to the first that matches every
    /// name, and the global one if no rule does.
    fn durations(&self) -> impl Iterator<Item = Option<Duration>> + '_ {
        let catch_all = self
            .rules
            .iter()
            .position(|r| r.metric.chars().all(|c| c == '*'));
        let rules = &self.rules[..catch_all.map_or(self.rules.len(), |i| i + 1)];
        rules
            .iter()
            .map(|r| r.keep)
            .chain(catch_all.is_none().then_some(self.global))
    }

    /// The longest retention of any metric (`None` if some metric is kept forever).
    pub fn longest(&self) -> Option<Duration> {
        self.durations()
            .try_fold(Duration::ZERO, |acc, d| d.map(|d| acc.max(d)))
    }

    /// The shortest retention of any metric (`None` if every metric is kept forever).
    pub fn shortest(&self) -> Option<Duration> {
        self.durations().flatten().min()
    }
}

/// Parses a retention duration: `<n><unit>` (see the module doc), or `0`, `none` or
/// `forever` for no limit (`None`).
pub fn parse_retention(s: &str) -> Result<Option<Duration>, String> {
    let t = s.trim();
    if t == "0" || t.eq_ignore_ascii_case("none") || t.eq_ignore_ascii_case("forever") {
        return Ok(None);
    }
    let split = t
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("retention {s:?} has no unit (ms, s, m, h, d, w, n or y)"))?;
    let (n, unit) = t.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("retention {s:?} must start with a whole number"))?;
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 7 * 86_400_000,
        "n" => 30 * 86_400_000,
        "y" => 365 * 86_400_000,
        _ => {
            return Err(format!(
                "retention {s:?} has an unknown unit {unit:?} (ms, s, m, h, d, w, n or y)"
            ));
        }
    };
    if n == 0 {
        return Ok(None);
    }
    let ms = n
        .checked_mul(unit_ms)
        .ok_or_else(|| format!("retention {s:?} is too long"))?;
    Ok(Some(Duration::from_millis(ms)))
}

/// Prints a duration as [`parse_retention`] reads it, in the largest unit that divides it.
pub fn format_retention(d: Option<Duration>) -> String {
    let Some(d) = d else {
        return "none".to_string();
    };
    let ms = d.as_millis();
    for (unit, size) in [
        ("y", 365 * 86_400_000u128),
        ("w", 7 * 86_400_000),
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms >= size && ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

impl fmt::Display for Retention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "global {}", format_retention(self.global))?;
        for r in &self.rules {
            write!(f, ", {} {}", r.metric, format_retention(r.keep))?;
        }
        Ok(())
    }
}

/// Whether `name` matches `pattern`, where `*` matches any run of characters (also none) and
/// `?` exactly one. Linear-time backtracking over the last `*`.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    // Where the last `*` was, and the name position it is now assumed to stop at.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(&c) if c == '?' || c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests;
