//! The offline commands (`import`, `scan`, `compact`, `export`, `fsck`) and what they share with `serve`: the
//! data-directory lock and opening the database.

pub(crate) mod compact;
pub(crate) mod dir_lock;
pub(crate) mod export;
pub(crate) mod fsck;
pub(crate) mod import;
pub(crate) mod open;
pub(crate) mod scan;
