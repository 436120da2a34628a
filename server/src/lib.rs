//! Strata's server: one port for OpenTSDB's telnet and HTTP protocols, the HTTP API, the graph
//! page and `/metrics`.

mod api;
mod body;
pub mod compact;
pub mod config;
mod http;
pub mod metrics;
mod promql;
pub mod put;
mod resp;
pub mod server;
mod shared;
mod stats;
mod telnet;
mod ui;
mod unwind;
mod version;
mod write;

pub use api::request::now_ms;
