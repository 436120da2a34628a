//! End-to-end tests: start the real `strata` binary on a loopback port and talk to it the way
//! clients do.

mod harness;
mod http_put;
mod protocol;
mod telnet_put;
