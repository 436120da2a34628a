//! The three UID namespaces, apart from the UID table so that errors and counters can name
//! a kind without depending on the table.

use std::fmt;

/// The three UID namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum UidKind {
    /// Metric names (`metrics`).
    Metric,
    /// Tag keys (`tagk`).
    Tagk,
    /// Tag values (`tagv`).
    Tagv,
}

impl UidKind {
    /// Every kind.
    pub const ALL: [UidKind; 3] = [UidKind::Metric, UidKind::Tagk, UidKind::Tagv];

    /// The name used in storage and messages: `metrics`, `tagk`, `tagv`.
    pub fn as_str(self) -> &'static str {
        match self {
            UidKind::Metric => "metrics",
            UidKind::Tagk => "tagk",
            UidKind::Tagv => "tagv",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    pub(crate) fn id_column(self) -> &'static [u8] {
        match self {
            UidKind::Metric => b"id:metrics",
            UidKind::Tagk => b"id:tagk",
            UidKind::Tagv => b"id:tagv",
        }
    }

    pub(crate) fn name_column(self) -> &'static [u8] {
        match self {
            UidKind::Metric => b"name:metrics",
            UidKind::Tagk => b"name:tagk",
            UidKind::Tagv => b"name:tagv",
        }
    }

    pub(crate) fn max_column(self) -> &'static [u8] {
        match self {
            UidKind::Metric => b"max:metrics",
            UidKind::Tagk => b"max:tagk",
            UidKind::Tagv => b"max:tagv",
        }
    }
}

impl fmt::Display for UidKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
