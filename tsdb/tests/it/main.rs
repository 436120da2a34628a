//! Integration tests of strata-tsdb, one module per topic.

mod fuzz_standin;
mod index;
mod model;
mod rowcompact;
mod rowcompact_crash;
mod rowcompact_faults;
mod write;

use strata_tsdb::{Tsdb, TsdbOptions};

/// Opens a database in `dir` with default options.
pub(crate) fn open(dir: &std::path::Path) -> strata_tsdb::Result<Tsdb> {
    Tsdb::open(dir, TsdbOptions::default())
}

/// What tests return.
pub(crate) type TestResult = Result<(), Box<dyn std::error::Error>>;
