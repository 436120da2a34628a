//! strata-query: the OpenTSDB query model, parsers, execution pipeline and query endpoints.
