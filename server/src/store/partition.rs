//! Partitioned ingest (`--salt-buckets LO-HI`): several writers on one prefix, each owning a
//! range of the salt buckets and keeping its own tree (manifest, epochs, data files) under
//! `<prefix>/<tree>/`. Two things are shared through the bucket, with create-if-absent writes
//! only (`PutMode::Create`, checked at start by the probe):
//!
//! - the salt buckets: one claim object per bucket names the tree that owns it, so two
//!   writers never own one bucket, and a restarted writer with the same range takes its own
//!   tree over (fencing by epoch does the rest);
//! - UIDs: [`BucketUidAllocator`] gives a name one UID across every writer, from ranges of
//!   UIDs leased to each writer.
//!
//! ## Layout
//!
//! ```text
//! <prefix>/salt/count                    the salt bucket count, created by the first writer
//! <prefix>/salt/<bucket, 3 digits>       the tree that owns the bucket
//! <prefix>/uid/<kind>/lease/<n, 8 digits> lease n: UIDs n*1024+1 ..= (n+1)*1024 of <kind>
//! <prefix>/uid/<kind>/name/<name key>    the UID of a name of <kind>
//! <prefix>/<tree>/...                    one writer's engine files (engine/FORMAT.md)
//! ```
//!
//! `<kind>` is `metrics`, `tagk` or `tagv`; `<tree>` is `salts-LLL-HHH`. A name key keeps
//! ASCII letters, digits, `.` and `-` of the name's UTF-8 bytes and writes every other byte,
//! `_` included, as `_` and two upper-case hex digits (a leading `.` too, so no key is `.` or
//! `..`); a key longer than [`MAX_NAME_KEY`] is `#` and the name's xxh3-128 in hex instead,
//! and the name stored in the object tells names with one hash apart.
//!
//! Every object is `magic (4) | format u16 BE | body | xxh3_64 BE of all before`; the bodies
//! are in docs/operations-s3.md ("Partitioned ingest").
//!
//! ## Allocating a UID
//!
//! A writer leases UIDs per kind by creating the next lease object; when it exists, the next
//! number is tried. A new name is bound by creating its name object with the lease's next
//! UID; when that object exists (another writer bound the name first), its UID is used and
//! the leased UID stays for the next name. A retried create whose first attempt did land finds
//! its own object and reads the same UID back. UIDs left in a lease when a writer stops are
//! never used.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use parking_lot::Mutex;
use strata_engine::IoRuntime;
use strata_tsdb::{MAX_UID, Uid, UidAllocator, UidKind};

/// The salt bucket count when `salt_bucket_count` is not set (the tsdb's default).
pub const DEFAULT_SALT_BUCKETS: u8 = 20;
/// UIDs per lease: a writer that starts again wastes at most this many per kind, and a busy
/// writer creates one lease object per this many new names.
pub const LEASE_UIDS: u32 = 1024;
/// Longest name key kept readable; longer ones are hashed (S3 keys end at 1024 bytes).
pub const MAX_NAME_KEY: usize = 600;

const LEASE_MAGIC: &[u8; 4] = b"SULS";
const NAME_MAGIC: &[u8; 4] = b"SUNM";
const CLAIM_MAGIC: &[u8; 4] = b"SSCL";
const COUNT_MAGIC: &[u8; 4] = b"SSCN";
const FORMAT: u16 = 1;

/// A writer's salt buckets, `lo..=hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaltRange {
    /// First bucket.
    pub lo: u8,
    /// Last bucket.
    pub hi: u8,
}

impl SaltRange {
    /// Parses `LO-HI` (or one bucket, `N`).
    pub fn parse(s: &str) -> anyhow::Result<SaltRange> {
        let bad = || anyhow::anyhow!("bad `salt_buckets` setting {s:?}: use LO-HI, such as 0-9");
        let (lo, hi) = s.trim().split_once('-').unwrap_or((s.trim(), s.trim()));
        let lo: u8 = lo.trim().parse().map_err(|_| bad())?;
        let hi: u8 = hi.trim().parse().map_err(|_| bad())?;
        anyhow::ensure!(
            lo <= hi,
            "bad `salt_buckets` setting {s:?}: the first bucket is after the last"
        );
        Ok(SaltRange { lo, hi })
    }

    /// Checks the range against the bucket count.
    pub fn check(&self, count: u8) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.hi < count,
            "salt_buckets {self} is outside the {count} salt buckets 0-{}",
            count.saturating_sub(1)
        );
        Ok(())
    }

    /// The name of this range's tree under the prefix.
    pub fn tree(&self) -> String {
        format!("salts-{:03}-{:03}", self.lo, self.hi)
    }
}

/// The key prefix of `range`'s tree under `prefix`.
pub fn tree_prefix(prefix: &str, range: SaltRange) -> String {
    let prefix = prefix.trim_matches('/');
    if prefix.is_empty() {
        range.tree()
    } else {
        format!("{prefix}/{}", range.tree())
    }
}

impl fmt::Display for SaltRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.lo, self.hi)
    }
}

/// `magic | FORMAT | body | xxh3_64`.
fn encode(magic: &[u8; 4], body: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(body.len() + 14);
    out.extend_from_slice(magic);
    out.extend_from_slice(&FORMAT.to_be_bytes());
    out.extend_from_slice(body);
    let sum = xxhash_rust::xxh3::xxh3_64(&out);
    out.extend_from_slice(&sum.to_be_bytes());
    Bytes::from(out)
}

/// The body of an object [`encode`] wrote, or why it is not one.
fn decode<'a>(magic: &[u8; 4], bytes: &'a [u8]) -> Result<&'a [u8], String> {
    if bytes.len() < 14 {
        return Err(format!("{} bytes is too short", bytes.len()));
    }
    let (data, sum) = bytes.split_at(bytes.len() - 8);
    let sum = u64::from_be_bytes(sum.try_into().map_err(|_| "bad checksum field")?);
    if xxhash_rust::xxh3::xxh3_64(data) != sum {
        return Err("checksum mismatch".into());
    }
    if &data[..4] != magic {
        return Err(format!("bad magic {:?}", &data[..4]));
    }
    let format = u16::from_be_bytes([data[4], data[5]]);
    if format != FORMAT {
        return Err(format!("format {format}, this version reads {FORMAT}"));
    }
    Ok(&data[6..])
}

/// The object key segment of a name; see the module documentation.
pub fn name_key(name: &str) -> String {
    let mut key = String::with_capacity(name.len());
    for (i, b) in name.bytes().enumerate() {
        let keep = b.is_ascii_alphanumeric() || b == b'-' || (b == b'.' && i > 0);
        if keep {
            key.push(char::from(b));
        } else {
            key.push_str(&format!("_{b:02X}"));
        }
    }
    if key.len() > MAX_NAME_KEY {
        format!("#{:032x}", xxhash_rust::xxh3::xxh3_128(name.as_bytes()))
    } else {
        key
    }
}

/// A key under `prefix`.
fn key(prefix: &str, rest: &str) -> ObjectPath {
    let prefix = prefix.trim_matches('/');
    if prefix.is_empty() {
        ObjectPath::from(rest)
    } else {
        ObjectPath::from(format!("{prefix}/{rest}"))
    }
}

/// Creates `key` holding `data` if absent: `Ok(true)` when this call created it, `Ok(false)`
/// when it existed.
async fn create(
    store: &dyn ObjectStore,
    key: &ObjectPath,
    data: Bytes,
) -> object_store::Result<bool> {
    match store
        .put_opts(
            key,
            PutPayload::from(data),
            PutOptions::from(PutMode::Create),
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(
            object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. },
        ) => Ok(false),
        Err(e) => Err(e),
    }
}

/// GETs a whole object.
async fn get(store: &dyn ObjectStore, key: &ObjectPath) -> object_store::Result<Bytes> {
    store.get(key).await?.bytes().await
}

/// Claims `range` of the `count` salt buckets under `prefix` for the tree `range.tree()`: the
/// count object is created or must match, and each bucket's claim object is created or must
/// name this tree. A bucket another tree owns is an error naming it; claims made by this call
/// are then removed again.
pub async fn claim_salt_range(
    store: &dyn ObjectStore,
    prefix: &str,
    range: SaltRange,
    count: u8,
) -> anyhow::Result<()> {
    range.check(count)?;
    let count_key = key(prefix, "salt/count");
    if !create(store, &count_key, encode(COUNT_MAGIC, &[count])).await? {
        let bytes = get(store, &count_key).await?;
        let body = decode(COUNT_MAGIC, &bytes)
            .map_err(|e| anyhow::anyhow!("corrupt object {count_key}: {e}"))?;
        let have = body.first().copied().unwrap_or(0);
        anyhow::ensure!(
            have == count,
            "the writers of this prefix use {have} salt buckets ({count_key}); this one was \
             started with salt_bucket_count = {count}"
        );
    }
    let tree = range.tree();
    let mut created = Vec::new();
    for bucket in range.lo..=range.hi {
        let k = key(prefix, &format!("salt/{bucket:03}"));
        let mut body = vec![bucket, count];
        body.extend_from_slice(tree.as_bytes());
        if create(store, &k, encode(CLAIM_MAGIC, &body)).await? {
            created.push(k);
            continue;
        }
        let bytes = get(store, &k).await?;
        let body =
            decode(CLAIM_MAGIC, &bytes).map_err(|e| anyhow::anyhow!("corrupt object {k}: {e}"))?;
        let owner = String::from_utf8_lossy(body.get(2..).unwrap_or_default()).into_owned();
        if owner != tree {
            for k in &created {
                // Best effort: a claim left behind only keeps the bucket for this range.
                let _ = store.delete(k).await;
            }
            anyhow::bail!(
                "salt bucket {bucket} of this prefix belongs to the writer of salt buckets in \
                 tree {owner:?} ({k}); salt_buckets {range} overlaps it. Give each writer \
                 disjoint salt buckets"
            );
        }
    }
    Ok(())
}

/// The trees that own salt buckets under `prefix`, by bucket (`None` for an unclaimed one),
/// with the bucket count; `None` when no writer has claimed any.
pub async fn salt_owners(
    store: &dyn ObjectStore,
    prefix: &str,
) -> anyhow::Result<Option<(u8, Vec<Option<String>>)>> {
    let count_key = key(prefix, "salt/count");
    let bytes = match get(store, &count_key).await {
        Ok(b) => b,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let body = decode(COUNT_MAGIC, &bytes)
        .map_err(|e| anyhow::anyhow!("corrupt object {count_key}: {e}"))?;
    let count = body.first().copied().unwrap_or(0);
    let mut owners = Vec::with_capacity(usize::from(count));
    for bucket in 0..count {
        let k = key(prefix, &format!("salt/{bucket:03}"));
        match get(store, &k).await {
            Ok(bytes) => {
                let body = decode(CLAIM_MAGIC, &bytes)
                    .map_err(|e| anyhow::anyhow!("corrupt object {k}: {e}"))?;
                owners.push(Some(
                    String::from_utf8_lossy(body.get(2..).unwrap_or_default()).into_owned(),
                ));
            }
            Err(object_store::Error::NotFound { .. }) => owners.push(None),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Some((count, owners)))
}

/// Starts a one-thread [`IoRuntime`] named `name`.
fn io_runtime(name: &str) -> anyhow::Result<IoRuntime> {
    IoRuntime::start(name, 1).with_context(|| format!("starting the runtime of {name}"))
}

/// Runs `fut` on `rt` and waits for it from this thread, which may be an async worker of
/// another runtime.
fn run_on<T: Send + 'static>(
    rt: &IoRuntime,
    fut: impl Future<Output = anyhow::Result<T>> + Send + 'static,
) -> anyhow::Result<T> {
    rt.run(fut).context("the private runtime")?
}

/// The UIDs of one kind leased to this writer.
#[derive(Debug, Default, Clone, Copy)]
struct Lease {
    /// Next UID to hand out; above `last` (or 0) when none is left.
    next: u32,
    last: u32,
    /// The lease number to try creating next; 0 until the leases were listed.
    next_number: u64,
    listed: bool,
}

/// A [`UidAllocator`] that shares names' UIDs among the writers of one prefix through the
/// bucket; see the module documentation. Requests run on a private runtime, and callers wait
/// on a channel, so it may be called from an async worker thread.
#[derive(Debug)]
pub struct BucketUidAllocator {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    /// Written into lease objects, for an operator reading the bucket.
    owner: String,
    rt: IoRuntime,
    leases: [Mutex<Lease>; 3],
    lease_uids: u32,
}

impl BucketUidAllocator {
    /// An allocator on `store` under `prefix`, leasing for the writer named `owner`.
    pub fn new(
        store: Arc<dyn ObjectStore>,
        prefix: &str,
        owner: &str,
    ) -> anyhow::Result<BucketUidAllocator> {
        BucketUidAllocator::with_lease_uids(store, prefix, owner, LEASE_UIDS)
    }

    /// As `new`, with `lease_uids` UIDs per lease (tests).
    pub fn with_lease_uids(
        store: Arc<dyn ObjectStore>,
        prefix: &str,
        owner: &str,
        lease_uids: u32,
    ) -> anyhow::Result<BucketUidAllocator> {
        anyhow::ensure!(lease_uids > 0, "a lease holds at least one UID");
        let rt = io_runtime("strata-uid-alloc")?;
        Ok(BucketUidAllocator {
            store,
            prefix: prefix.trim_matches('/').to_owned(),
            owner: owner.to_owned(),
            rt,
            leases: Default::default(),
            lease_uids,
        })
    }

    /// Runs `fut` on the private runtime and waits for it from this thread.
    fn run<T: Send + 'static>(
        &self,
        fut: impl Future<Output = anyhow::Result<T>> + Send + 'static,
    ) -> anyhow::Result<T> {
        run_on(&self.rt, fut)
    }

    fn kind_key(&self, kind: UidKind, rest: &str) -> ObjectPath {
        key(&self.prefix, &format!("uid/{}/{rest}", kind.as_str()))
    }

    /// Takes the next free lease of `kind` into `lease`.
    fn take_lease(&self, kind: UidKind, lease: &mut Lease) -> anyhow::Result<()> {
        if !lease.listed {
            let store = self.store.clone();
            let dir = self.kind_key(kind, "lease");
            let listed =
                self.run(async move { Ok(store.list_with_delimiter(Some(&dir)).await?) })?;
            lease.next_number = listed
                .objects
                .iter()
                .filter_map(|o| o.location.filename()?.parse::<u64>().ok())
                .max()
                .map_or(0, |n| n + 1);
            lease.listed = true;
        }
        loop {
            let n = lease.next_number;
            let first = n * u64::from(self.lease_uids) + 1;
            if first > u64::from(MAX_UID) {
                anyhow::bail!("All Unique IDs for {kind} on 3 bytes are already assigned!");
            }
            let last = (first + u64::from(self.lease_uids) - 1).min(u64::from(MAX_UID));
            let mut body = vec![kind as u8];
            body.extend_from_slice(&n.to_be_bytes());
            body.extend_from_slice(&(first as u32).to_be_bytes());
            body.extend_from_slice(&(last as u32).to_be_bytes());
            body.extend_from_slice(self.owner.as_bytes());
            let k = self.kind_key(kind, &format!("lease/{n:08}"));
            let store = self.store.clone();
            let created = self
                .run(async move { Ok(create(&*store, &k, encode(LEASE_MAGIC, &body)).await?) })?;
            lease.next_number = n + 1;
            if created {
                tracing::info!(kind = kind.as_str(), lease = n, first, last, "leased UIDs");
                lease.next = first as u32;
                lease.last = last as u32;
                return Ok(());
            }
        }
    }

    /// The UID bound to `name`, binding it to the next leased one if it has none.
    fn bind(&self, kind: UidKind, name: &str) -> anyhow::Result<Uid> {
        let mut lease = self.leases[kind as usize].lock();
        if lease.next == 0 || lease.next > lease.last {
            self.take_lease(kind, &mut lease)?;
        }
        let uid = Uid::from_u32(lease.next).context("a lease holds an invalid UID")?;
        let mut body = vec![kind as u8];
        body.extend_from_slice(&uid.to_bytes());
        body.extend_from_slice(name.as_bytes());
        let k = self.kind_key(kind, &format!("name/{}", name_key(name)));
        let store = self.store.clone();
        let bound = self.run(async move {
            if create(&*store, &k, encode(NAME_MAGIC, &body)).await? {
                return Ok(None);
            }
            let bytes = get(&*store, &k).await?;
            let body = decode(NAME_MAGIC, &bytes)
                .map_err(|e| anyhow::anyhow!("corrupt object {k}: {e}"))?;
            let (head, stored) = body.split_at_checked(4).context("short name object")?;
            Ok(Some((
                Uid::from_bytes(&head[1..]).context("bad UID in a name object")?,
                head[0],
                stored.to_vec(),
            )))
        })?;
        match bound {
            None => {
                lease.next += 1;
                Ok(uid)
            }
            Some((theirs, k, stored)) => {
                anyhow::ensure!(
                    k == kind as u8 && stored == name.as_bytes(),
                    "the name object of {kind} {name:?} holds another name (a hash collision \
                     of a long name)"
                );
                Ok(theirs)
            }
        }
    }
}

/// The trees of the writers of one prefix, for a read replica over all of them
/// ([`strata_tsdb::Tsdb::open_read_only_trees`]): the owners come from the claim objects,
/// read again at every refresh, so the tree of a writer that starts later is found.
#[derive(Debug)]
pub struct BucketTrees {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    /// Each tree's disk cache is a directory of its name under it.
    cache_dir: std::path::PathBuf,
    /// One bound over every tree's disk cache: the setting is the replica's, not per tree.
    disk_cache: strata_engine::SharedDiskCache,
    rt: IoRuntime,
}

impl BucketTrees {
    /// The trees under `prefix` in `store`, whose disk caches hold `cache_bytes` together.
    pub fn new(
        store: Arc<dyn ObjectStore>,
        prefix: &str,
        cache_dir: std::path::PathBuf,
        cache_bytes: u64,
    ) -> anyhow::Result<BucketTrees> {
        let rt = io_runtime("strata-trees")?;
        Ok(BucketTrees {
            store,
            prefix: prefix.trim_matches('/').to_owned(),
            cache_dir,
            disk_cache: strata_engine::SharedDiskCache::new(cache_bytes),
            rt,
        })
    }
}

impl strata_tsdb::TreeSource for BucketTrees {
    fn owners(&self) -> strata_tsdb::Result<Vec<Option<String>>> {
        let (store, prefix) = (self.store.clone(), self.prefix.clone());
        run_on(&self.rt, async move { salt_owners(&*store, &prefix).await })
            .map(|o| o.map(|(_, owners)| owners).unwrap_or_default())
            .map_err(|e| {
                strata_tsdb::Error::Engine(strata_engine::Error::Io {
                    context: format!("reading the salt bucket claims under {}", self.prefix),
                    source: std::io::Error::other(format!("{e:#}")),
                })
            })
    }

    fn storage(&self, tree: &str) -> strata_tsdb::Result<strata_engine::Storage> {
        let prefix = if self.prefix.is_empty() {
            tree.to_owned()
        } else {
            format!("{}/{tree}", self.prefix)
        };
        let mut storage = strata_engine::ObjectStorage::new(
            self.store.clone(),
            prefix,
            self.cache_dir.join(tree),
            0,
        );
        storage.shared_disk_cache = Some(self.disk_cache.clone());
        Ok(strata_engine::Storage::Object(storage))
    }
}

impl UidAllocator for BucketUidAllocator {
    fn allocate(&self, kind: UidKind, name: &str, _local_max: u32) -> strata_tsdb::Result<Uid> {
        self.bind(kind, name)
            .map_err(|e| strata_tsdb::Error::UidAllocator {
                kind,
                name: name.to_owned(),
                detail: format!("{e:#}"),
            })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use object_store::memory::InMemory;

    use super::*;

    #[test]
    fn ranges_parse_and_name_their_tree() -> anyhow::Result<()> {
        let r = SaltRange::parse("10-19")?;
        assert_eq!(
            (r.lo, r.hi, r.tree()),
            (10, 19, "salts-010-019".to_string())
        );
        assert_eq!(SaltRange::parse("7")?, SaltRange { lo: 7, hi: 7 });
        assert!(SaltRange::parse("9-3").is_err());
        assert!(SaltRange::parse("a-b").is_err());
        assert!(SaltRange::parse("0-300").is_err());
        assert!(r.check(20).is_ok() && r.check(19).is_err());
        Ok(())
    }

    #[test]
    fn name_keys_are_safe_and_distinct() {
        assert_eq!(name_key("sys.cpu.user"), "sys.cpu.user");
        assert_eq!(name_key("."), "_2E");
        assert_eq!(name_key("a_b"), "a_5Fb");
        assert_eq!(name_key("a/b é"), "a_2Fb_20_C3_A9");
        let long = "x".repeat(MAX_NAME_KEY + 1);
        assert!(name_key(&long).starts_with('#'));
        assert_ne!(name_key("a_5F"), name_key("a_"));
    }

    #[test]
    fn objects_round_trip_and_damage_is_found() {
        let b = encode(NAME_MAGIC, b"body");
        assert_eq!(decode(NAME_MAGIC, &b), Ok(&b"body"[..]));
        assert!(decode(LEASE_MAGIC, &b).is_err());
        let mut bad = b.to_vec();
        bad[7] ^= 1;
        assert!(decode(NAME_MAGIC, &bad).is_err());
        assert!(decode(NAME_MAGIC, &b[..5]).is_err());
    }

    /// Two writers racing over the same names from several threads each end with one UID
    /// per name, the same in both, and no UID shared by two names.
    #[test]
    fn racing_allocators_agree_on_every_name() -> anyhow::Result<()> {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let a = Arc::new(BucketUidAllocator::with_lease_uids(
            store.clone(),
            "p",
            "a",
            7,
        )?);
        let b = Arc::new(BucketUidAllocator::with_lease_uids(
            store.clone(),
            "p",
            "b",
            7,
        )?);
        let names: Vec<String> = (0..60).map(|i| format!("name.{i}")).collect();
        let results: Vec<HashMap<String, Uid>> = std::thread::scope(|s| {
            let handles: Vec<_> = [&a, &b, &a, &b]
                .into_iter()
                .enumerate()
                .map(|(t, alloc)| {
                    let names = &names;
                    s.spawn(move || {
                        let mut got = HashMap::new();
                        // Each thread walks the names in its own order.
                        for i in 0..names.len() {
                            let n = &names[(i * (t + 1) * 7) % names.len()];
                            let uid = alloc.allocate(UidKind::Tagv, n, 0)?;
                            got.insert(n.clone(), uid);
                        }
                        Ok::<_, strata_tsdb::Error>(got)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| -> anyhow::Result<HashMap<String, Uid>> {
                    Ok(h.join().map_err(|_| anyhow::anyhow!("thread panicked"))??)
                })
                .collect::<anyhow::Result<Vec<_>>>()
        })?;
        let first = &results[0];
        for r in &results[1..] {
            for (n, uid) in r {
                if let Some(u) = first.get(n) {
                    assert_eq!(u, uid, "{n}");
                }
            }
        }
        let mut all: HashMap<String, Uid> = HashMap::new();
        for r in &results {
            all.extend(r.iter().map(|(n, u)| (n.clone(), *u)));
        }
        assert_eq!(all.len(), names.len());
        let mut uids: Vec<Uid> = all.values().copied().collect();
        uids.sort();
        uids.dedup();
        assert_eq!(uids.len(), names.len(), "a UID was given to two names");
        // Kinds are separate, and a restarted writer sees the bound names.
        let c = BucketUidAllocator::with_lease_uids(store, "p", "c", 7)?;
        assert_eq!(c.allocate(UidKind::Tagv, "name.3", 0)?, all["name.3"]);
        let m = c.allocate(UidKind::Metric, "name.3", 0)?;
        assert_eq!(m.get(), 1, "the first lease of a kind starts at 1");
        Ok(())
    }

    #[tokio::test]
    async fn salt_ranges_are_claimed_once() -> anyhow::Result<()> {
        let store = InMemory::new();
        let lo = SaltRange::parse("0-9")?;
        claim_salt_range(&store, "p", lo, 20).await?;
        // The same range again (a restart) takes its tree over.
        claim_salt_range(&store, "p", lo, 20).await?;
        let err = format!(
            "{:#}",
            claim_salt_range(&store, "p", SaltRange::parse("9-12")?, 20)
                .await
                .err()
                .context("overlap accepted")?
        );
        assert!(
            err.contains("salt bucket 9") && err.contains("salts-000-009"),
            "{err}"
        );
        let err = format!(
            "{:#}",
            claim_salt_range(&store, "p", SaltRange::parse("10-19")?, 30)
                .await
                .err()
                .context("count accepted")?
        );
        assert!(err.contains("use 20 salt buckets"), "{err}");
        claim_salt_range(&store, "p", SaltRange::parse("10-19")?, 20).await?;
        let (count, owners) = salt_owners(&store, "p").await?.context("no claims")?;
        assert_eq!(count, 20);
        assert_eq!(owners[9].as_deref(), Some("salts-000-009"));
        assert_eq!(owners[10].as_deref(), Some("salts-010-019"));
        assert_eq!(salt_owners(&store, "q").await?, None);
        Ok(())
    }
}
