//! The offline commands (`import`, `scan`, `compact`, `export`, `fsck`, `backup`, `restore`)
//! and what they share with `serve`: the data-directory lock, opening the database and progress
//! bars.

pub(crate) mod backup;
pub(crate) mod compact;
pub(crate) mod dir_lock;
pub(crate) mod export;
pub(crate) mod fsck;
pub(crate) mod import;
pub(crate) mod open;
pub(crate) mod progress;
pub(crate) mod scan;
