//! Strata's server: one port for OpenTSDB's telnet and HTTP protocols, the HTTP API, the graph
//! page and `/metrics`.

mod api;
pub mod auth;
pub mod compact;
pub mod config;
mod http;
pub mod metrics;
mod promql;
pub mod put;
pub mod server;
mod stats;
mod telnet;
pub mod tls;
mod ui;
mod unwind;
mod version;
mod write;

pub use api::now_ms;
