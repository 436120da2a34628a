//! End-to-end tests: start the real `strata` binary on a loopback port and talk to it the way
//! clients do.

mod api;
mod cli;
mod exact_values;
mod export;
mod fsck;
mod grafana;
mod harness;
mod http_put;
mod metrics;
mod promql;
mod protocol;
mod telnet_put;
