//! The offline commands (`import`, `scan`, `compact`, `export`, `fsck`, `backup`, `restore`,
//! `uid`, `query`, `delete`)
//! and what they share with `serve`: the data-directory lock, opening the database and progress
//! bars.

pub(crate) mod backup;
pub(crate) mod compact;
pub(crate) mod delete;
pub(crate) mod dir_lock;
pub(crate) mod export;
pub(crate) mod flusher;
pub(crate) mod fsck;
pub(crate) mod import;
pub(crate) mod open;
pub(crate) mod progress;
pub(crate) mod query;
pub(crate) mod replica;
pub(crate) mod scan;
pub(crate) mod uid;
