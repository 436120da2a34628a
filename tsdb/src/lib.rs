//! strata-tsdb: the time-series layer of Strata, on top of strata-engine.
//!
//! It speaks points and series: UIDs, salted rowkeys, raw and compacted cell codecs, the
//! series index, the write and read paths, and the row compactor (`rowcompact`).

mod annotation;
mod background;
mod block;
mod cell;
mod clock;
mod delete;
mod error;
mod expire;
mod fetch;
mod filter;
mod fold;
mod forget;
mod fsck;
mod inspect;
mod lookup;
mod meta;
mod name_escape;
mod point;
mod point_columns;
mod policy;
mod read;
mod replica;
mod retention;
mod rowcompact;
mod rowkey;
mod series_cache;
mod series_index;
mod stats;
mod store;
#[cfg(feature = "testing")]
mod testing;
mod trees;
mod tsdb;
mod uid;
mod uid_alloc;
mod uid_kind;
mod validate;
mod value;

pub use annotation::{Annotation, annotation_time_ms};
pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{BlockError, Error, ErrorKind, PointError, Rejection, Result};
pub use expire::Expirer;
pub use filter::{Filter, FilterKind};
pub use forget::PurgeReport;
pub use fsck::{
    FsckCounts, FsckProblem, FsckRemedy, FsckRepaired, FsckReport, SAVED_CELLS, fsck, fsck_repair,
};
pub use inspect::{InspectRequest, StoredCell, StoredRow};
pub use name_escape::{escape_name, unescape_name};
pub use point::{Point, PointRef};
pub use point_columns::{PointColumns, ValueColumn};
pub use read::{ReadRequest, Series, SeriesColumns, SeriesPoints};
pub use replica::{Refresher, ReplicaStats, is_no_database_yet};
pub use retention::{Retention, RetentionRule, format_retention, glob_match, parse_retention};
pub use rowcompact::{RowCompactStats, RowCompactor};
pub use rowkey::{ROW_SPAN_SECS, RowKey, Tsuid, salt_of};
pub use stats::TsdbStats;
/// Cache hints, for the protocols' lookups over many series as for the engine's.
pub use strata_engine::hint;
#[cfg(feature = "testing")]
pub use testing::{decode_row, fix_block_checksum, partial_block_cell, raw_cell};
pub use trees::TreeSource;
pub use tsdb::{SeriesHandle, SeriesInfo, SeriesNames, SeriesPoint, Tsdb, TsdbOptions};
pub use uid::{MAX_UID, Uid};
pub use uid_alloc::UidAllocator;
pub use uid_kind::UidKind;
pub use validate::{MAX_MS_TIMESTAMP, NameRules, STANDARD_NAME_BYTES, check_point};

pub use block::{
    BLOCK_VERSION, MAX_POINTS, block_len, decode_block, decode_block_columns, decode_block_into,
    encode_block,
};
pub use value::Value;
