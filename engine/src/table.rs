//! The handle to a table.

use std::sync::Arc;

/// A handle to a table, cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub(crate) id: u32,
    pub(crate) name: Arc<str>,
}

impl Table {
    pub(crate) fn new(id: u32, name: Arc<str>) -> Table {
        Table { id, name }
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn id(&self) -> u32 {
        self.id
    }
}
