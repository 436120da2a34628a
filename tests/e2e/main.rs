//! End-to-end tests: start the real `strata` binary on a loopback port and talk to it the way
//! clients do.

mod api;
mod auth_tls;
mod backup;
mod cli;
mod compat;
mod exact_values;
mod export;
mod fsck;
mod grafana;
mod harness;
mod http_put;
mod influx;
mod limits;
mod metrics;
mod operator_cli;
mod promql;
mod protocol;
mod readme_tour;
mod remote_write;
mod retention;
mod s3;
mod s3_faults;
mod s3_parts;
mod seaweed;
mod settings;
mod telnet_put;
mod ui;
