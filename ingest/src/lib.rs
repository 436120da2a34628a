//! strata-ingest: the OpenTSDB write protocols (telnet `put` and HTTP `/api/put`).
