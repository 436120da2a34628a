//! strata-tsdb: the time-series layer of Strata, on top of strata-engine.
//!
//! It speaks points and series: UIDs, salted rowkeys, raw and compacted cell codecs, the
//! series index, the write and read paths, and the row compactor (`rowcompact`).
