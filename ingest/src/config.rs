//! Parser settings shared by the telnet and HTTP put paths.

use strata_tsdb::NameRules;

/// How many tags a [`crate::PointRef`] holds inline. `ParseConfig::with_max_tags` is capped at this.
pub const MAX_INLINE_TAGS: usize = 16;

/// OpenTSDB's default `tsd.storage.max_tags`.
pub const DEFAULT_MAX_TAGS: usize = 8;

/// OpenTSDB's telnet line limit in bytes (terminator excluded).
pub const DEFAULT_MAX_LINE_LEN: usize = 1024;

/// Settings for validating points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseConfig {
    max_tags: usize,
    rules: NameRules,
}

impl Default for ParseConfig {
    fn default() -> Self {
        ParseConfig {
            max_tags: DEFAULT_MAX_TAGS,
            rules: NameRules::default(),
        }
    }
}

impl ParseConfig {
    /// The defaults: 8 tags, no extra characters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `tsd.storage.max_tags`. The value is clamped to `1..=MAX_INLINE_TAGS` (16), because
    /// points keep their tags inline without allocating.
    pub fn with_max_tags(mut self, max_tags: usize) -> Self {
        self.max_tags = max_tags.clamp(1, MAX_INLINE_TAGS);
        self
    }

    /// Sets `tsd.core.tag.allow_specialchars`: each character of `chars` is also allowed in
    /// metric names, tag keys and tag values.
    pub fn with_allowed_special_chars(mut self, chars: &str) -> Self {
        let mut extra: Vec<char> = chars.chars().collect();
        extra.sort_unstable();
        extra.dedup();
        self.rules = NameRules { extra_chars: extra };
        self
    }

    /// The maximum number of tags per point.
    pub fn max_tags(&self) -> usize {
        self.max_tags
    }

    /// The characters names may hold.
    pub fn name_rules(&self) -> &NameRules {
        &self.rules
    }
}
