//! Integration tests of strata-query against a real tsdb in a temporary directory.

mod api_query;
mod formats;
mod fuzz_standin;
mod newest;
mod parallel;

/// Answers a POST `/api/query` with `body` at `now_ms`: the status and the response body.
fn post_query(
    tsdb: &strata_tsdb::Tsdb,
    body: &str,
    now_ms: i64,
    limits: &strata_query::QueryLimits,
) -> (u16, Vec<u8>) {
    strata_query::handle_query_method(
        tsdb,
        strata_query::QueryMethod::Post,
        "",
        body.as_bytes(),
        now_ms,
        limits,
    )
}
