//! Integration tests of strata-query against a real tsdb in a temporary directory.

mod api_query;
mod formats;
mod newest;
mod parallel;
