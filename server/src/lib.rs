//! strata-server: one port for OpenTSDB's telnet and HTTP protocols (sniffed from the first
//! byte), HTTP routing and CORS, the OpenTSDB and Prometheus HTTP APIs, the telnet session,
//! the graph page and `/metrics`. Parsing and the put path are `strata-ingest`'s, queries
//! `strata-query`'s; the handlers here are thin.
//!
//! - [`serve`]: runs the server over an open database until SIGINT or SIGTERM.
//! - [`Config`], [`ServeArgs`], [`StorageArgs`]: its settings, from a file, the environment and
//!   flags.
//! - [`backup`], [`restore`]: behind `POST /api/admin/backup`, `strata backup` and
//!   `strata restore`.
//! - [`compact_all`]: the full compaction behind `POST /api/admin/compact` and `strata compact`.
//! - [`store`]: `--store`, the object store behind the engine, and its start-up probe.
//! - [`rejection_reason`], [`reason`]: the `reason` labels rejected points are counted by.

mod api;
pub mod auth;
mod backup;
mod body;
mod compact;
mod config;
mod http;
mod metrics;
mod promql;
mod put;
mod resp;
mod server;
mod shared;
mod stats;
pub mod store;
mod telnet;
pub mod tls;
mod ui;
mod unwind;
mod version;
mod write;

pub use api::request::now_ms;
pub use backup::{BackupError, BackupReport, LOCK_FILE, backup, check_target, restore};
pub use compact::{CompactReport, compact_all, compact_all_with_progress};
pub use config::{Config, Cors, Mode, ServeArgs, StorageArgs, TlsFiles};
pub use metrics::{reason, rejection_reason};
pub use server::serve;
