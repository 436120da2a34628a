//! Integration tests of strata-tsdb, one module per topic.

mod fuzz_standin;
mod index;
mod model;
mod retention;
mod rowcompact;
mod rowcompact_crash;
mod rowcompact_faults;
mod write;

use strata_tsdb::{Tsdb, TsdbOptions};

/// Opens a database in `dir` with default options.
pub(crate) fn open(dir: &std::path::Path) -> strata_tsdb::Result<Tsdb> {
    Tsdb::open(dir, TsdbOptions::default())
}

/// The seeds a randomized test runs: by default the fixed `defaults`, so that CI runs the same
/// cases every time; `STRATA_TEST_SEED=<n>` runs seed `n` alone (to replay a failure), and
/// `STRATA_TEST_SEED=random` one new seed. The test prints each seed it runs.
pub(crate) fn test_seeds(defaults: &[u64]) -> Result<Vec<u64>, String> {
    match std::env::var("STRATA_TEST_SEED") {
        Err(_) => Ok(defaults.to_vec()),
        Ok(s) if s.trim() == "random" => Ok(vec![rand::random()]),
        Ok(s) => s
            .trim()
            .parse()
            .map(|n| vec![n])
            .map_err(|_| format!("STRATA_TEST_SEED must be a number or `random`, not {s:?}")),
    }
}

/// What tests return.
pub(crate) type TestResult = Result<(), Box<dyn std::error::Error>>;
