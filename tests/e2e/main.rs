//! End-to-end tests: start the real `strata` binary on a loopback port and talk to it the way
//! clients do.

mod api;
mod cli;
mod compat;
mod exact_values;
mod export;
mod fsck;
mod grafana;
mod harness;
mod http_put;
mod limits;
mod metrics;
mod promql;
mod protocol;
mod readme_tour;
mod telnet_put;
mod ui;
