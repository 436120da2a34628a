//! `--store`: the object store (an S3 bucket, or a directory standing in for one) that keeps
//! the engine's data files and manifest, with `--data-dir` as the local WAL and cache.
//!
//! - [`StoreArgs`], [`StoreConfig`], [`S3Credentials`]: the settings and their checks.
//! - [`partition`]: `--salt-buckets`, several writers on one prefix with shared UIDs.
//! - [`StoreLocation`]: the parsed `s3://bucket/prefix` or `file:///dir`.
//! - [`build_store`], [`open_store`]: the `object_store` client, and opening it with
//!   [`probe`], which refuses a store that ignores create-if-absent writes.
//! - [`RetryReads`]: S3 reads tried again after a transport failure that `object_store` does not retry.
//!
//! See docs/operations-s3.md.

mod location;
mod open;
pub mod partition;
mod probe;
mod retry;
mod settings;

pub use location::StoreLocation;
pub use open::{Retries, build_store, open_store};
pub use probe::{ProbeError, ProbeReport, ProbeScope, probe};
pub use retry::RetryReads;
pub use settings::{S3Credentials, StoreArgs, StoreConfig};
