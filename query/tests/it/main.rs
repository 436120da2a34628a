//! Integration tests of strata-query against a real tsdb in a temporary directory.

mod api_query;
mod formats;
mod fuzz_standin;
mod newest;
mod parallel;

/// Answers an `/api/query` request on the calling thread: the status and the response body.
fn answer(
    tsdb: &strata_tsdb::Tsdb,
    method: strata_query::QueryMethod,
    query_string: &str,
    body: &[u8],
    now_ms: i64,
    limits: &strata_query::QueryLimits,
) -> (u16, Vec<u8>) {
    let request = strata_query::QueryRequest::new(method, query_string, body, now_ms);
    let r = strata_query::handle_query(tsdb, &request, limits, &strata_query::run_inline);
    (r.status, r.body)
}

/// Answers a POST `/api/query` with `body` at `now_ms`: the status and the response body.
fn post_query(
    tsdb: &strata_tsdb::Tsdb,
    body: &str,
    now_ms: i64,
    limits: &strata_query::QueryLimits,
) -> (u16, Vec<u8>) {
    answer(
        tsdb,
        strata_query::QueryMethod::Post,
        "",
        body.as_bytes(),
        now_ms,
        limits,
    )
}
