use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::memory::InMemory;
use roaring::RoaringBitmap;
use strata_engine::{ObjectStorage, Storage};

use super::*;
use crate::annotation::Annotation;
use crate::point::PointRef;
use crate::read::ReadRequest;
use crate::uid::UidKind;
use crate::value::Value;

fn tempdir() -> Result<tempfile::TempDir> {
    tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))
}

/// A tsdb on its own local directories over `store`: a writer, or a replica.
struct Node {
    tsdb: Tsdb,
    _dirs: [tempfile::TempDir; 2],
}

fn node(store: &Arc<InMemory>, replica: bool) -> Result<Node> {
    node_with(store, replica, 1 << 30, Duration::from_secs(60))
}

/// [`node`] with a disk cache of `cache_bytes` and superseded files deleted after
/// `delete_delay`.
fn node_with(
    store: &Arc<InMemory>,
    replica: bool,
    cache_bytes: u64,
    delete_delay: Duration,
) -> Result<Node> {
    let (dir, cache) = (tempdir()?, tempdir()?);
    let mut opts = TsdbOptions::default();
    let mut storage = ObjectStorage::new(store.clone(), "db", cache.path(), cache_bytes);
    storage.delete_delay = delete_delay;
    opts.db.storage = Storage::Object(storage);
    let tsdb = if replica {
        Tsdb::open_read_only(dir.path(), opts)?
    } else {
        Tsdb::open(dir.path(), opts)?
    };
    Ok(Node {
        tsdb,
        _dirs: [dir, cache],
    })
}

const T0: i64 = 1_700_000_000;

/// Writes `n` points of `metric` on `host` from `T0` (the value of point i is i * 7).
fn put(t: &Tsdb, metric: &str, host: &str, n: i64) -> Result<()> {
    let tags = [("host", host)];
    let points: Vec<PointRef<'_>> = (0..n)
        .map(|i| PointRef {
            metric,
            tags: &tags,
            timestamp: T0 + i * 10,
            value: Value::Int(i * 7),
        })
        .collect();
    for r in t.write(&points) {
        r?;
    }
    Ok(())
}

/// A host and its series' points.
type HostPoints = (String, Vec<(i64, Value)>);

/// Every point of `metric`, per host.
fn points(t: &Tsdb, metric: &str) -> Result<Vec<HostPoints>> {
    let req = ReadRequest::metric(metric, &[], T0 * 1000, (T0 + 1_000_000) * 1000);
    Ok(t.read(&req)?
        .into_iter()
        .map(|s| (s.tags[0].1.clone(), s.points))
        .collect())
}

fn want(host: &str, n: i64) -> HostPoints {
    let points = (0..n)
        .map(|i| ((T0 + i * 10) * 1000, Value::Int(i * 7)))
        .collect();
    (host.to_string(), points)
}

/// A writer with `n` points of `metric` on host `a`, flushed, and a replica of it.
fn writer_and_replica(store: &Arc<InMemory>, metric: &str, n: i64) -> Result<(Node, Node)> {
    let w = node(store, false)?;
    put(&w.tsdb, metric, "a", n)?;
    w.tsdb.flush()?;
    let r = node(store, true)?;
    Ok((w, r))
}

#[test]
fn a_replica_follows_the_writers_flushes_with_new_names_and_series() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let (w, r) = writer_and_replica(&store, "m.one", 30)?;
    let r = &r.tsdb;
    assert!(r.is_read_only() && !w.tsdb.is_read_only());
    assert_eq!(points(r, "m.one")?, vec![want("a", 30)]);
    assert!(!r.refresh()?, "nothing new");

    // New points, a new tag value and a new metric: unseen until flushed and refreshed.
    put(&w.tsdb, "m.one", "b", 5)?;
    put(&w.tsdb, "m.two", "a", 3)?;
    assert!(!r.refresh()?);
    assert_eq!(r.suggest(UidKind::Metric, "m.", 10), vec!["m.one"]);
    w.tsdb.flush()?;
    assert!(r.refresh()?);
    assert_eq!(points(r, "m.one")?, vec![want("a", 30), want("b", 5)]);
    assert_eq!(points(r, "m.two")?, vec![want("a", 3)]);
    assert_eq!(r.suggest(UidKind::Metric, "m.", 10), vec!["m.one", "m.two"]);
    assert_eq!(r.suggest(UidKind::Tagv, "", 10), vec!["a", "b"]);
    assert_eq!(r.series_count(), 3);
    // The newest point of a series that moved on since the replica last looked.
    let id = r.series_id(&r.series_tsuid(0).ok_or(no_database_yet())?);
    assert_eq!(id, Some(0));
    put(&w.tsdb, "m.one", "a", 40)?;
    w.tsdb.flush()?;
    assert_eq!(
        r.series_info(0)?.and_then(|s| s.last),
        Some(((T0 + 290) * 1000, Value::Int(29 * 7)))
    );
    assert!(r.refresh()?);
    assert_eq!(
        r.series_info(0)?.and_then(|s| s.last),
        Some(((T0 + 390) * 1000, Value::Int(39 * 7)))
    );
    // The writer's compactions reach the replica too.
    w.tsdb.rowcompact_all()?;
    w.tsdb.compact_all()?;
    assert!(r.refresh()?);
    assert_eq!(points(r, "m.one")?, vec![want("a", 40), want("b", 5)]);
    let stats = r.replica_stats().ok_or(no_database_yet())?;
    // Names and series were loaded again for the new series and after the row compaction
    // (its dirty markers went), not for the new points of a known series in its open row.
    assert_eq!(
        (stats.refreshes, stats.changes, stats.loads, stats.errors),
        (5, 3, 2, 0)
    );
    assert_eq!(w.tsdb.replica_stats(), None);
    assert!(!w.tsdb.refresh()?, "a writer has nothing to refresh");
    Ok(())
}

/// Every write path of a replica says it is read-only, and changes nothing.
#[test]
fn a_replica_refuses_every_write() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let (_w, r) = writer_and_replica(&store, "m", 3)?;
    let r = &r.tsdb;
    let read_only = |e: Error| {
        assert!(
            matches!(&e, Error::Engine(strata_engine::Error::ReadOnly(_))),
            "{e:?}"
        );
        assert!(e.to_string().contains("read-only"), "{e}");
    };
    let tags = [("host", "a")];
    let known = PointRef {
        metric: "m",
        tags: &tags,
        timestamp: T0 + 5,
        value: Value::Int(1),
    };
    let unknown = PointRef {
        metric: "new",
        ..known
    };
    for res in r.write(&[known, unknown]) {
        read_only(res.err().ok_or(no_database_yet())?);
    }
    for res in r.write_sync(&[known]) {
        read_only(res.err().ok_or(no_database_yet())?);
    }
    read_only(r.series_handle("m", &tags).err().ok_or(no_database_yet())?);
    read_only(
        r.assign_uid(UidKind::Metric, "x")
            .err()
            .ok_or(no_database_yet())?,
    );
    read_only(
        r.rename_uid(UidKind::Metric, "m", "n")
            .err()
            .ok_or(no_database_yet())?,
    );
    let mut ids = RoaringBitmap::new();
    ids.insert(0);
    read_only(r.delete(&ids, 0, i64::MAX).err().ok_or(no_database_yet())?);
    let note = Annotation {
        start_time: T0,
        description: "d".into(),
        ..Annotation::default()
    };
    read_only(r.put_annotation(&note).err().ok_or(no_database_yet())?);
    read_only(r.rowcompact_all().err().ok_or(no_database_yet())?);
    for e in [r.flush().err(), r.compact_all().err()] {
        read_only(e.ok_or(no_database_yet())?);
    }
    assert_eq!(r.uid(UidKind::Metric, "new").ok(), None);
    assert_eq!(r.uid(UidKind::Metric, "n").ok(), None);
    assert_eq!(points(r, "m")?, vec![want("a", 3)]);
    Ok(())
}

#[test]
fn a_replica_of_an_empty_prefix_says_no_database_yet() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let e = node(&store, true).err().ok_or(no_database_yet())?;
    assert!(is_no_database_yet(&e), "{e:?}");
    assert!(e.to_string().contains("no database yet"), "{e}");
    // A new database's settings row is a synced write, which over an object store is in the
    // bucket when the writer's open returns: a replica then opens an empty database.
    let w = node(&store, false)?;
    let r = node(&store, true)?;
    assert_eq!(r.tsdb.series_count(), 0);
    put(&w.tsdb, "m", "a", 1)?;
    w.tsdb.flush()?;
    assert!(r.tsdb.refresh()?);
    assert_eq!(points(&r.tsdb, "m")?, vec![want("a", 1)]);
    assert_eq!(points(&node(&store, true)?.tsdb, "m")?, vec![want("a", 1)]);
    Ok(())
}

/// The cost of a refresh that loads the names and the index again, at 100k series: run with
/// `cargo test --release -p strata-tsdb refresh_cost -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement"]
fn refresh_cost_at_100k_series() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let w = node(&store, false)?;
    let hosts: Vec<String> = (0..1000).map(|h| format!("host{h}")).collect();
    let cpus: Vec<String> = (0..100).map(|c| format!("cpu{c}")).collect();
    for host in &hosts {
        let tags: Vec<[(&str, &str); 2]> = cpus
            .iter()
            .map(|c| [("host", host.as_str()), ("cpu", c.as_str())])
            .collect();
        let points: Vec<PointRef<'_>> = tags
            .iter()
            .map(|t| PointRef {
                metric: "sys.cpu.user",
                tags: t,
                timestamp: T0,
                value: Value::Int(1),
            })
            .collect();
        for res in w.tsdb.write(&points) {
            res?;
        }
    }
    w.tsdb.flush()?;
    w.tsdb.compact_all()?;
    let started = Instant::now();
    let r = node(&store, true)?;
    eprintln!(
        "open at {} series: {:?}",
        r.tsdb.series_count(),
        started.elapsed()
    );
    put(&w.tsdb, "m.new", "a", 1)?;
    w.tsdb.flush()?;
    for _ in 0..3 {
        let started = Instant::now();
        assert!(r.tsdb.refresh()?);
        let stats = r.tsdb.replica_stats().ok_or(no_database_yet())?;
        eprintln!(
            "refresh: {:?}, of which names and index {} ms",
            started.elapsed(),
            stats.last_load_micros / 1000
        );
        put(&w.tsdb, "m.new", "a", 1)?;
        w.tsdb.flush()?;
    }
    assert_eq!(r.tsdb.series_count(), 100_001);
    Ok(())
}

/// Runs an object-store future to completion on this thread. The in-memory store never waits
/// on I/O, so polling until ready finishes at once, with no runtime.
fn block<T>(f: impl Future<Output = object_store::Result<T>>) -> Result<T> {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v.map_err(|e| Error::InvalidArgument(e.to_string()));
        }
    }
}

/// A refresh that cannot fetch the writer's new file fails and counts, the replica keeps
/// serving what it had, and the next refresh catches up.
#[test]
fn a_failed_refresh_keeps_the_last_state_and_is_tried_again() -> Result<()> {
    use object_store::path::Path as ObjectPath;
    use object_store::{ObjectStore, ObjectStoreExt};
    let store = Arc::new(InMemory::new());
    let (w, r) = writer_and_replica(&store, "m", 3)?;
    let r = &r.tsdb;
    let ssts = || -> Result<Vec<ObjectPath>> {
        let listed = block(store.list_with_delimiter(Some(&ObjectPath::from("db/sst"))))?;
        Ok(listed.objects.into_iter().map(|o| o.location).collect())
    };
    let before = ssts()?;
    put(&w.tsdb, "m", "b", 4)?;
    w.tsdb.flush()?;
    // One file per table the flush wrote to.
    let new: Vec<ObjectPath> = ssts()?
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert!(!new.is_empty());
    let mut saved = Vec::new();
    for path in &new {
        saved.push(block(async { store.get(path).await?.bytes().await })?);
        block(store.delete(path))?;
    }
    assert!(r.refresh().is_err());
    assert_eq!(points(r, "m")?, vec![want("a", 3)]);
    let stats = r.replica_stats().ok_or(no_database_yet())?;
    assert_eq!((stats.refreshes, stats.errors), (0, 1));
    for (path, bytes) in new.iter().zip(saved) {
        block(store.put(path, bytes.into()))?;
    }
    assert!(r.refresh()?);
    assert_eq!(points(r, "m")?, vec![want("a", 3), want("b", 4)]);
    let stats = r.replica_stats().ok_or(no_database_yet())?;
    assert_eq!((stats.refreshes, stats.changes, stats.errors), (1, 1, 1));
    Ok(())
}

/// A replica whose open files the writer has since deleted (superseded for longer than the
/// writer's delete delay while the replica did not refresh) takes in the writer's newest
/// files when a read meets a missing one, and reads again.
#[test]
fn a_read_of_files_the_writer_deleted_catches_up_and_reads_again() -> Result<()> {
    let store = Arc::new(InMemory::new());
    let w = node_with(&store, false, 1 << 30, Duration::ZERO)?;
    put(&w.tsdb, "m", "a", 30)?;
    w.tsdb.flush()?;
    // No disk cache: every data block the replica reads comes from the store.
    let r = node_with(&store, true, 0, Duration::from_secs(60))?;
    let r = &r.tsdb;
    put(&w.tsdb, "m", "a", 40)?;
    w.tsdb.flush()?;
    w.tsdb.compact_all()?;
    // One more manifest version, at which the writer deletes what the compaction replaced.
    put(&w.tsdb, "n", "a", 1)?;
    w.tsdb.flush()?;
    r.drop_caches()?;
    assert_eq!(points(r, "m")?, vec![want("a", 40)]);
    Ok(())
}
