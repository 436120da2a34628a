//! Fault injection for tests: a [`FileSystem`] layer that fails chosen file operations.
//!
//! A [`Faults`] handle is shared by a test and a database (through `DbOptions::faults`). The
//! test arms [`Fault`]s, each naming an operation, the kind of file it hits, how many matching
//! operations succeed first, and the error (EIO or ENOSPC). The layer sits on the real local
//! file system, so a test reopens the same files afterwards with no faults at all.
//!
//! What a failing operation leaves behind:
//! - a write: nothing, or with [`Fault::torn`] the first half of its bytes;
//! - an fsync of a WAL segment: the bytes written to it since its last good fsync are zeroed,
//!   as Linux may drop dirty pages whose writeback failed and then report the next fsync clean
//!   (PostgreSQL's "fsyncgate");
//! - anything else: nothing.
//!
//! A sticky fault keeps failing every later matching operation until [`Faults::clear`]: a full
//! disk that has space again once cleared.
//!
//! Without the `testing` feature only the inert default handle exists.

use std::sync::Arc;

use super::FileSystem;

/// Faults to inject into a database's file operations (tests only; see the module docs).
/// The default handle injects nothing; with the `testing` feature, `Faults::new` makes one
/// that a test can arm.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    #[cfg(any(test, feature = "testing"))]
    plan: Option<Arc<parking_lot::Mutex<inject::Plan>>>,
}

impl Faults {
    /// `fs`, behind the fault layer if this handle is armable.
    pub(crate) fn wrap(&self, fs: Arc<dyn FileSystem>) -> Arc<dyn FileSystem> {
        #[cfg(any(test, feature = "testing"))]
        if let Some(plan) = &self.plan {
            return Arc::new(inject::FaultFs {
                inner: fs,
                plan: plan.clone(),
            });
        }
        fs
    }
}

#[cfg(any(test, feature = "testing"))]
pub use inject::{Fault, FaultError, FaultFile, FaultOp};

#[cfg(any(test, feature = "testing"))]
mod inject {
    use std::io;
    use std::sync::Arc;
    use std::thread::ThreadId;

    use bytes::Bytes;
    use parking_lot::Mutex;

    use super::Faults;
    use crate::error::{Error, Result};
    use crate::fs::{FileSystem, LogFile, RandomAccessFile, WritableFile};

    /// A file operation a fault can hit.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum FaultOp {
        /// Creating a file (SST, manifest temporary, WAL segment).
        Create,
        /// Writing to a file.
        Write,
        /// Fsyncing a file (including the sync that finishes an SST or manifest).
        Sync,
        /// Fsyncing the directory, for the creation, rename or deletion of a file.
        SyncDir,
        /// Renaming a file (the manifest switch); the kind is the target's.
        Rename,
    }

    /// The kind of file a fault hits.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum FaultFile {
        /// Every file.
        Any,
        /// WAL segments.
        Wal,
        /// SST files.
        Sst,
        /// The manifest and its temporary.
        Manifest,
    }

    /// The error a fault returns.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum FaultError {
        /// EIO.
        Io,
        /// ENOSPC: the disk is full.
        NoSpace,
    }

    /// One armed fault.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Fault {
        /// The operation it fails.
        pub op: FaultOp,
        /// The kind of file.
        pub file: FaultFile,
        /// How many matching operations succeed before it fires.
        pub after: u64,
        /// The error.
        pub error: FaultError,
        /// A failing write writes the first half of its bytes first.
        pub torn: bool,
        /// Once fired, it fails every later matching operation until cleared.
        pub sticky: bool,
    }

    impl Fault {
        /// Fails the next `op` on any file with `error`, once.
        pub fn new(op: FaultOp, error: FaultError) -> Fault {
            Fault {
                op,
                file: FaultFile::Any,
                after: 0,
                error,
                torn: false,
                sticky: false,
            }
        }

        /// Only on files of `kind`.
        pub fn on(self, kind: FaultFile) -> Fault {
            Fault { file: kind, ..self }
        }

        /// Lets `n` matching operations succeed first.
        pub fn after(self, n: u64) -> Fault {
            Fault { after: n, ..self }
        }

        /// Tears the failing write.
        pub fn torn(self) -> Fault {
            Fault { torn: true, ..self }
        }

        /// Keeps failing until cleared.
        pub fn sticky(self) -> Fault {
            Fault {
                sticky: true,
                ..self
            }
        }
    }

    #[derive(Debug, Default)]
    pub(super) struct Plan {
        armed: Vec<Armed>,
        /// The thread of every fault fired, in order.
        fired: Vec<ThreadId>,
    }

    #[derive(Debug)]
    struct Armed {
        fault: Fault,
        /// Matching operations seen before it fired.
        seen: u64,
        fired: bool,
    }

    impl Faults {
        /// A handle with no fault armed; give it to a database through `DbOptions::faults`.
        pub fn new() -> Faults {
            Faults {
                plan: Some(Arc::default()),
            }
        }

        /// Arms `fault`, beside those already armed.
        pub fn arm(&self, fault: Fault) {
            if let Some(p) = &self.plan {
                p.lock().armed.push(Armed {
                    fault,
                    seen: 0,
                    fired: false,
                });
            }
        }

        /// Disarms every fault (the full disk has space again).
        pub fn clear(&self) {
            if let Some(p) = &self.plan {
                p.lock().armed.clear();
            }
        }

        /// How many operations failed by injection so far.
        pub fn fired(&self) -> u64 {
            self.plan
                .as_ref()
                .map_or(0, |p| p.lock().fired.len() as u64)
        }

        /// How many operations of the calling thread failed by injection so far.
        pub fn fired_on_this_thread(&self) -> u64 {
            let me = std::thread::current().id();
            self.plan.as_ref().map_or(0, |p| {
                p.lock().fired.iter().filter(|t| **t == me).count() as u64
            })
        }
    }

    fn kind_of(name: &str) -> Option<FaultFile> {
        if name.starts_with("wal-") {
            Some(FaultFile::Wal)
        } else if name.ends_with(".sst") {
            Some(FaultFile::Sst)
        } else if name.starts_with(crate::file_name::MANIFEST_NAME) {
            Some(FaultFile::Manifest)
        } else {
            None
        }
    }

    impl Plan {
        /// Counts an operation and returns the fault it hits, if any.
        fn check(&mut self, op: FaultOp, name: &str) -> Option<Fault> {
            let kind = kind_of(name);
            let mut hit = None;
            for a in &mut self.armed {
                let f = a.fault;
                if f.op != op || !(f.file == FaultFile::Any || Some(f.file) == kind) {
                    continue;
                }
                let fire = if a.fired {
                    f.sticky
                } else if a.seen == f.after {
                    a.fired = true;
                    true
                } else {
                    a.seen += 1;
                    false
                };
                if fire && hit.is_none() {
                    hit = Some(f);
                }
            }
            if hit.is_some() {
                self.fired.push(std::thread::current().id());
            }
            hit
        }
    }

    fn injected(f: &Fault, op: FaultOp, name: &str) -> Error {
        let errno = match f.error {
            FaultError::Io => 5,
            FaultError::NoSpace => 28,
        };
        Error::io(
            format!("{op:?} of {name} (injected)"),
            io::Error::from_raw_os_error(errno),
        )
    }

    /// The layer itself.
    #[derive(Debug)]
    pub(super) struct FaultFs {
        pub(super) inner: Arc<dyn FileSystem>,
        pub(super) plan: Arc<Mutex<Plan>>,
    }

    impl FaultFs {
        fn check(&self, op: FaultOp, name: &str) -> Result<()> {
            match self.plan.lock().check(op, name) {
                Some(f) => Err(injected(&f, op, name)),
                None => Ok(()),
            }
        }
    }

    impl FileSystem for FaultFs {
        fn create(&self, name: &str) -> Result<Box<dyn WritableFile>> {
            self.check(FaultOp::Create, name)?;
            Ok(Box::new(FaultWritable {
                inner: self.inner.create(name)?,
                name: name.to_owned(),
                plan: self.plan.clone(),
            }))
        }

        fn open(&self, name: &str) -> Result<Arc<dyn RandomAccessFile>> {
            self.inner.open(name)
        }

        fn list(&self) -> Result<Vec<String>> {
            self.inner.list()
        }

        fn delete(&self, name: &str) -> Result<()> {
            self.inner.delete(name)
        }

        fn rename(&self, from: &str, to: &str) -> Result<()> {
            self.check(FaultOp::Rename, to)?;
            self.inner.rename(from, to)
        }

        fn sync_dir(&self, name: &str) -> Result<()> {
            self.check(FaultOp::SyncDir, name)?;
            self.inner.sync_dir(name)
        }

        fn create_log(&self, name: &str) -> Result<Arc<dyn LogFile>> {
            self.check(FaultOp::Create, name)?;
            Ok(Arc::new(FaultLog {
                inner: self.inner.create_log(name)?,
                name: name.to_owned(),
                plan: self.plan.clone(),
                lens: Mutex::new(LogLens::default()),
            }))
        }

        fn open_log(&self, name: &str) -> Result<Arc<dyn LogFile>> {
            let len = self.inner.open(name)?.len();
            Ok(Arc::new(FaultLog {
                inner: self.inner.open_log(name)?,
                name: name.to_owned(),
                plan: self.plan.clone(),
                lens: Mutex::new(LogLens {
                    written: len,
                    synced: len,
                }),
            }))
        }
    }

    #[derive(Debug)]
    struct FaultWritable {
        inner: Box<dyn WritableFile>,
        name: String,
        plan: Arc<Mutex<Plan>>,
    }

    impl FaultWritable {
        fn check(&self, op: FaultOp) -> Option<Fault> {
            self.plan.lock().check(op, &self.name)
        }
    }

    impl WritableFile for FaultWritable {
        fn append(&mut self, data: &[u8]) -> Result<()> {
            if let Some(f) = self.check(FaultOp::Write) {
                if f.torn {
                    self.inner.append(&data[..data.len() / 2])?;
                    // A prefix written by a failed write still reaches the file.
                    self.inner.sync()?;
                }
                return Err(injected(&f, FaultOp::Write, &self.name));
            }
            self.inner.append(data)
        }

        fn sync(&mut self) -> Result<()> {
            match self.check(FaultOp::Sync) {
                Some(f) => Err(injected(&f, FaultOp::Sync, &self.name)),
                None => self.inner.sync(),
            }
        }

        fn len(&self) -> u64 {
            self.inner.len()
        }

        fn finish(self: Box<Self>) -> Result<()> {
            match self.check(FaultOp::Sync) {
                Some(f) => Err(injected(&f, FaultOp::Sync, &self.name)),
                None => self.inner.finish(),
            }
        }
    }

    /// How far a WAL segment was written and how far it was last synced.
    #[derive(Debug, Default)]
    struct LogLens {
        written: u64,
        synced: u64,
    }

    #[derive(Debug)]
    struct FaultLog {
        inner: Arc<dyn LogFile>,
        name: String,
        plan: Arc<Mutex<Plan>>,
        lens: Mutex<LogLens>,
    }

    impl FaultLog {
        fn wrote(&self, end: u64) {
            let mut l = self.lens.lock();
            l.written = l.written.max(end);
        }
    }

    impl LogFile for FaultLog {
        fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
            let hit = self.plan.lock().check(FaultOp::Write, &self.name);
            if let Some(f) = hit {
                if f.torn {
                    let half = &data[..data.len() / 2];
                    self.inner.write_at(offset, half)?;
                    self.wrote(offset + half.len() as u64);
                }
                return Err(injected(&f, FaultOp::Write, &self.name));
            }
            self.inner.write_at(offset, data)?;
            self.wrote(offset + data.len() as u64);
            Ok(())
        }

        fn sync(&self) -> Result<()> {
            let hit = self.plan.lock().check(FaultOp::Sync, &self.name);
            let lens = self.lens.lock();
            if let Some(f) = hit {
                // The kernel forgets the unsynced bytes: what reads back (and what a restart
                // finds) is what was there before them.
                let lost = lens.written.saturating_sub(lens.synced);
                if lost > 0 {
                    let zeros = Bytes::from(vec![0u8; lost as usize]);
                    self.inner.write_at(lens.synced, &zeros)?;
                    self.inner.sync()?;
                }
                return Err(injected(&f, FaultOp::Sync, &self.name));
            }
            let upto = lens.written;
            drop(lens);
            self.inner.sync()?;
            let mut lens = self.lens.lock();
            lens.synced = lens.synced.max(upto);
            Ok(())
        }

        fn truncate(&self, len: u64) -> Result<()> {
            self.inner.truncate(len)?;
            let mut l = self.lens.lock();
            l.written = l.written.min(len);
            l.synced = l.synced.min(len);
            Ok(())
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::fs::MemFs;

        #[test]
        fn faults_fire_on_the_nth_matching_operation_and_stick_if_asked() -> Result<()> {
            let faults = Faults::new();
            let fs = faults.wrap(Arc::new(MemFs::new()));
            faults.arm(
                Fault::new(FaultOp::Write, FaultError::NoSpace)
                    .on(FaultFile::Sst)
                    .after(1),
            );
            let mut wal = fs.create("wal-x")?;
            wal.append(b"ok")?;
            let mut f = fs.create("1.sst")?;
            f.append(b"first")?;
            let e = f.append(b"second").err();
            assert!(
                matches!(&e, Some(Error::Io { source, .. }) if source.kind() == io::ErrorKind::StorageFull),
                "{e:?}"
            );
            f.append(b"third")?;
            assert_eq!(faults.fired(), 1);
            assert_eq!(faults.fired_on_this_thread(), 1);

            faults.arm(Fault::new(FaultOp::Create, FaultError::Io).sticky());
            assert!(fs.create("2.sst").is_err());
            assert!(fs.create_log("wal-y").is_err());
            faults.clear();
            fs.create("2.sst")?;
            assert_eq!(faults.fired(), 3);
            Ok(())
        }

        #[test]
        fn a_failed_log_sync_loses_the_unsynced_bytes_and_a_torn_write_leaves_half() -> Result<()> {
            let mem = MemFs::new();
            let faults = Faults::new();
            let fs = faults.wrap(Arc::new(mem.clone()));
            let log = fs.create_log("wal-1")?;
            log.write_at(0, b"head")?;
            log.sync()?;
            log.write_at(4, b"body")?;
            faults.arm(Fault::new(FaultOp::Sync, FaultError::Io).on(FaultFile::Wal));
            assert!(log.sync().is_err());
            assert_eq!(mem.get("wal-1").as_deref(), Some(&b"head\0\0\0\0"[..]));
            // The next fsync succeeds, and reports nothing of the lost bytes.
            log.sync()?;
            faults.arm(Fault::new(FaultOp::Write, FaultError::Io).torn());
            assert!(log.write_at(8, b"tail").is_err());
            assert_eq!(mem.get("wal-1").as_deref(), Some(&b"head\0\0\0\0ta"[..]));
            Ok(())
        }
    }
}
