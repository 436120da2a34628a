//! Who picks the UID of a new name: this database's own counter (the default), or an allocator
//! shared by several writers, so that a name gets one UID in all of them (partitioned ingest,
//! where each writer owns some salt buckets and keeps its own tree).

use std::fmt;

use crate::error::Result;
use crate::uid::Uid;
use crate::uid_kind::UidKind;

/// Picks the UID of a name this database has not seen. The UID table calls it under its
/// assignment lock, for each new name once, and then records the mapping as it records its
/// own assignments.
///
/// An implementation shared by several databases must return the same UID for a name to all
/// of them, and never one UID for two names. It may block on I/O; it is called from the
/// write path, which may run on an async runtime's worker thread, so it must not enter a
/// runtime of its own from the calling thread.
pub trait UidAllocator: Send + Sync + fmt::Debug {
    /// The UID of `name` of `kind`. `local_max` is the largest UID this database holds for
    /// `kind`.
    fn allocate(&self, kind: UidKind, name: &str, local_max: u32) -> Result<Uid>;
}
