use std::pin::Pin;
use std::task::{Context, Poll};

use super::*;

#[test]
fn recycle_keeps_the_allocation() {
    let v: Vec<PointRef<'static>> = Vec::with_capacity(100);
    let at = v.as_ptr() as usize;
    let w: Vec<PointRef<'_>> = recycle(v);
    assert!(w.is_empty() && w.capacity() >= 100);
    assert_eq!(w.as_ptr() as usize, at);
}

/// A connection's known series are found by their text whether or not they come in the
/// order of the round before, and forgotten when the series epoch changes.
#[test]
fn known_series_are_found_in_any_order() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let tsdb = strata_tsdb::Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default())?;
    let mut known = KnownSeries::default();
    let mut key = Vec::new();
    let series = [("m", "h=a"), ("m", "h=b"), ("m2", "h=a"), ("m", "h=a x=y")];
    let mut numbers = Vec::new();
    for (metric, tags) in series {
        assert_eq!(
            known.find(metric.as_bytes(), tags.as_bytes(), &mut key),
            None
        );
        assert_eq!(
            key,
            format!("{metric} {tags}").as_bytes(),
            "the key is left built"
        );
        let pairs: Vec<(&str, &str)> = tags.split(' ').filter_map(|t| t.split_once('=')).collect();
        let handle = tsdb.series_handle(metric, &pairs)?;
        numbers.push(known.add(&key, handle));
    }
    assert_eq!(numbers, [Some(0), Some(1), Some(2), Some(3)]);
    // The same order again (the guesses), then others (the index).
    let orders = [[0, 1, 2, 3], [0, 1, 2, 3], [3, 1, 0, 2], [2, 2, 1, 3]];
    for order in orders {
        for i in order {
            let (metric, tags) = series[i];
            let found = known.find(metric.as_bytes(), tags.as_bytes(), &mut key);
            assert_eq!(found, Some(i as u32), "{metric} {tags}");
        }
    }
    // Tags that are a prefix of another series' tags are another series. (A metric never
    // holds a space: `parse_put_head` ends it at the first one.)
    assert_eq!(known.find(b"m", b"h=a x", &mut key), None);
    assert_eq!(known.find(b"m", b"h=a ", &mut key), None);
    known.start_batch(known.epoch + 1);
    assert_eq!(known.find(b"m", b"h=a", &mut key), None);
    assert!(known.is_empty());
    Ok(())
}

/// Issue 21: the cache of known series filled up in the middle of a batch and was emptied
/// while the batch still held numbers of series in it; a later point then named a series
/// past the end (a panic that dropped the connection and its batch) or another series.
/// Here a batch mixes known series and new ones across the bound, and every point must
/// land on its own series.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_across_the_known_series_bound_stores_every_point() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let tsdb = strata_tsdb::Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default())?;
    let (shared, _keep) = Shared::for_test(tsdb.clone())?;
    let mut session = Session::new(shared);
    session.known.max = 4;
    let mut replies: Vec<u8> = Vec::new();
    // Host `h` always writes the value `h`: a point on the wrong series shows.
    let batches: [&[u32]; 4] = [
        &[0, 1, 2],
        // 0 and 1 known; 3 fills the cache; 4 and 5 find it full; then known and unknown
        // series again.
        &[0, 3, 4, 1, 5, 0, 4, 3, 2],
        // Starts with a full cache, which is emptied first.
        &[5, 4, 3, 2, 1, 0, 6, 7],
        &[7, 6, 0],
    ];
    let mut expected: std::collections::BTreeMap<u32, Vec<i64>> = Default::default();
    for (b, hosts) in batches.iter().enumerate() {
        let text: Vec<String> = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let ts = 1_356_998_400 + (b * 100 + i) as i64;
                expected.entry(*h).or_default().push(ts * 1000);
                format!("put m {ts} {h} host=h{h}")
            })
            .collect();
        let lines: Vec<&[u8]> = text.iter().map(|l| l.as_bytes()).collect();
        assert!(session.handle_lines(&lines, &mut replies).await);
        assert!(session.known.handles.len() <= 4);
    }
    session.settle();
    assert_eq!(String::from_utf8_lossy(&replies), "");
    let ids = tsdb.find_series("m", &[])?;
    let mut got: std::collections::BTreeMap<u32, Vec<i64>> = Default::default();
    for s in tsdb.read(&strata_tsdb::ReadRequest::ids(&ids, 0, i64::MAX))? {
        let host: u32 = s.tags[0].1.trim_start_matches('h').parse()?;
        for (ts, v) in &s.points {
            assert_eq!(
                *v,
                Value::Int(i64::from(host)),
                "a point of h{host} at {ts}"
            );
        }
        got.insert(host, s.points.iter().map(|p| p.0).collect());
    }
    assert_eq!(got, expected);
    Ok(())
}

/// A batch that panics (a bug) half-way, after some of its points were written, is
/// stored again without the series cache: nothing lost, nothing doubled, no reply, the
/// panic counted. If the second try panics too, every put line of the batch gets an error
/// line, and the connection goes on with the next batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_panics_is_stored_again_or_refused() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let tsdb = strata_tsdb::Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default())?;
    let (shared, _keep) = Shared::for_test(tsdb.clone())?;
    let panics = shared.metrics.ingest_panics.with_label_values(&["telnet"]);
    let mut session = Session::new(shared);
    let mut replies: Vec<u8> = Vec::new();
    let batch = |ts: i64, hosts: std::ops::Range<u32>| -> Vec<String> {
        hosts.map(|h| format!("put m {ts} {h} host=h{h}")).collect()
    };
    let lines =
        |text: &[String]| -> Vec<Vec<u8>> { text.iter().map(|l| l.clone().into_bytes()).collect() };
    // h0..h2 become known series.
    let first = lines(&batch(1_356_998_400, 0..3));
    let refs: Vec<&[u8]> = first.iter().map(Vec::as_slice).collect();
    assert!(session.handle_lines(&refs, &mut replies).await);
    // Known (h0..h2) and new (h3..h5) series; the known ones are written, then it panics.
    session.inject_panics = 1;
    let second = lines(&batch(1_356_998_410, 0..6));
    let refs: Vec<&[u8]> = second.iter().map(Vec::as_slice).collect();
    assert!(session.handle_lines(&refs, &mut replies).await);
    assert_eq!(String::from_utf8_lossy(&replies), "");
    assert_eq!(panics.get(), 1);
    // Both tries panic: one error line per put line, and the `version` after them.
    session.inject_panics = 2;
    let mut third = lines(&batch(1_356_998_420, 0..2));
    third.push(b"version".to_vec());
    let refs: Vec<&[u8]> = third.iter().map(Vec::as_slice).collect();
    assert!(session.handle_lines(&refs, &mut replies).await);
    let text = String::from_utf8_lossy(&replies).into_owned();
    let errors: Vec<&str> = text.lines().take(2).collect();
    assert_eq!(errors, [INTERNAL_ERROR_REPLY.trim_end(); 2], "{text}");
    assert!(
        text.lines()
            .nth(2)
            .is_some_and(|l| l.starts_with("net.opentsdb"))
    );
    assert_eq!(panics.get(), 3);
    // The connection carries on as before.
    let fourth = lines(&batch(1_356_998_430, 0..6));
    let refs: Vec<&[u8]> = fourth.iter().map(Vec::as_slice).collect();
    replies.clear();
    assert!(session.handle_lines(&refs, &mut replies).await);
    session.settle();
    assert_eq!(String::from_utf8_lossy(&replies), "");
    let ids = tsdb.find_series("m", &[])?;
    let mut got = std::collections::BTreeMap::new();
    for s in tsdb.read(&strata_tsdb::ReadRequest::ids(&ids, 0, i64::MAX))? {
        got.insert(
            s.tags[0].1.clone(),
            s.points.iter().map(|p| p.0 / 1000).collect(),
        );
    }
    // The refused batch's first try wrote h0 and h1 before it panicked: the replies
    // said the points may not be stored, not that they were not.
    let expect = |h: u32| -> (String, Vec<i64>) {
        let ts = match h {
            0 | 1 => vec![1_356_998_400, 1_356_998_410, 1_356_998_420, 1_356_998_430],
            2 => vec![1_356_998_400, 1_356_998_410, 1_356_998_430],
            _ => vec![1_356_998_410, 1_356_998_430],
        };
        (format!("h{h}"), ts)
    };
    let want: std::collections::BTreeMap<String, Vec<i64>> = (0..6).map(expect).collect();
    assert_eq!(got, want);
    Ok(())
}

/// A panic while handling a read's lines outside a put batch leaves the connection open:
/// an error line, the panic counted, and the lines after it are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_outside_a_batch_keeps_the_connection() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let tsdb = strata_tsdb::Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default())?;
    let (shared, _keep) = Shared::for_test(tsdb.clone())?;
    // Two reads: the guard catches the first, the second is served as usual.
    let (mut client, server) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(server);
    let conn = tokio::spawn(serve_lines(read, write, shared.clone()));
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    client
        .write_all(b"put m 1356998400 1 host=a\ntest-panic\n")
        .await?;
    let (client_read, mut client_write) = tokio::io::split(client);
    let mut replies = tokio::io::BufReader::new(client_read).lines();
    // A bound, so that a reply that never comes fails the test instead of hanging it.
    let within = std::time::Duration::from_secs(60);
    let first = tokio::time::timeout(within, replies.next_line()).await??;
    assert_eq!(
        first.as_deref(),
        Some(INTERNAL_ERROR_LINES_REPLY.trim_end())
    );
    client_write
        .write_all(b"put m 1356998410 2 host=a\nversion\nexit\n")
        .await?;
    let version = tokio::time::timeout(within, replies.next_line())
        .await??
        .unwrap_or_default();
    assert!(version.starts_with("net.opentsdb"), "{version}");
    conn.await??;
    let panics = shared.metrics.ingest_panics.with_label_values(&["telnet"]);
    assert_eq!(panics.get(), 1);
    // The put before the panic was not handled (the error line said so); the one after
    // was.
    let ids = tsdb.find_series("m", &[])?;
    let series = tsdb.read(&strata_tsdb::ReadRequest::ids(&ids, 0, i64::MAX))?;
    let points: Vec<i64> = series[0].points.iter().map(|p| p.0).collect();
    assert_eq!(points, vec![1_356_998_410_000]);
    Ok(())
}

/// A peer that does not read its replies: once a reply has waited past the reply timeout,
/// the connection stops replying and goes on storing the lines it reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_never_reads_replies_is_still_read() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let tsdb = strata_tsdb::Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default())?;
    let (shared, _keep) = Shared::for_test(tsdb.clone())?;
    let mut session = Session::new(shared);
    session.reply_timeout = std::time::Duration::from_millis(50);
    // Room for 8 bytes of replies, and nobody reads them.
    let (mut peer, _unread) = tokio::io::duplex(8);
    let bad: [&[u8]; 2] = [b"put m 1356998400 x h=a", b"put m 1356998400 1 h=a"];
    assert!(session.handle_lines(&bad, &mut peer).await);
    assert!(!session.writable);
    let next: [&[u8]; 2] = [b"put m 1356998410 2 h=a", b"put m x"];
    assert!(session.handle_lines(&next, &mut peer).await);
    let ids = tsdb.find_series("m", &[])?;
    let series = tsdb.read(&strata_tsdb::ReadRequest::ids(&ids, 0, i64::MAX))?;
    let points: Vec<i64> = series[0].points.iter().map(|p| p.0).collect();
    assert_eq!(points, vec![1_356_998_400_000, 1_356_998_410_000]);
    Ok(())
}

/// A peer that no longer takes replies: every write fails.
struct Gone;

impl AsyncWrite for Gone {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Senders that close right after their last line never read the error replies; a reply
/// that cannot be sent must not stop the lines after it from being stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_after_a_failed_reply_are_still_stored() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let tsdb = strata_tsdb::Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default())?;
    let (shared, _keep) = Shared::for_test(tsdb.clone())?;
    let mut session = Session::new(shared);
    let mut peer = Gone;
    // A bad line makes a reply, which fails to go out.
    let first: [&[u8]; 2] = [b"put m 1356998400 x h=a", b"put m 1356998400 1 h=a"];
    assert!(session.handle_lines(&first, &mut peer).await);
    assert!(!session.writable);
    // The next chunk is still parsed and stored.
    let second: [&[u8]; 2] = [b"put m 1356998410 2 h=a", b"bad command"];
    assert!(session.handle_lines(&second, &mut peer).await);
    let ids = tsdb.find_series("m", &[])?;
    let series = tsdb.read(&strata_tsdb::ReadRequest::ids(&ids, 0, i64::MAX))?;
    let points: Vec<i64> = series[0].points.iter().map(|p| p.0).collect();
    assert_eq!(points, vec![1_356_998_400_000, 1_356_998_410_000]);
    Ok(())
}

/// A bulk sender keeps the next chunk ready, so its connection's reads never wait; it
/// must still let the worker's other tasks (the queries) run between its chunks. Before
/// it yielded on its own, a connection whose reads were always ready kept its worker
/// until tokio's budget of 128 reads ran out: tens of milliseconds with 64 KiB chunks,
/// and here, with a reader that never waits, until the end of the input.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_bulk_sender_lets_other_tasks_run() -> anyhow::Result<()> {
    const LINES: u64 = 400_000;
    let dir = tempfile::tempdir()?;
    let tsdb = strata_tsdb::Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default())?;
    let (shared, _keep) = Shared::for_test(tsdb)?;
    let mut text = Vec::new();
    for i in 0..LINES {
        let line = format!("put m {} {i} host=h{}\n", 1_356_998_400 + i / 8, i % 8);
        text.extend_from_slice(line.as_bytes());
    }
    // A byte slice is always ready to read, like the socket of a sender that stays
    // ahead of the server.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let conn = tokio::spawn({
        let (shared, done) = (shared.clone(), done.clone());
        async move {
            let served = serve_lines(std::io::Cursor::new(text), tokio::io::sink(), shared);
            let result = served.await;
            done.store(true, std::sync::atomic::Ordering::Release);
            result
        }
    });
    // Spawned, the probe shares the one worker with the connection (the test's own body
    // runs on another thread); it notes how many lines were stored in each of the
    // connection's turns.
    let probe = tokio::spawn({
        let shared = shared.clone();
        async move {
            let stored = &shared.metrics.telnet.stored;
            let (mut last, mut longest_turn, mut turns) = (0, 0, 0);
            loop {
                let finished = done.load(std::sync::atomic::Ordering::Acquire);
                let now = stored.get();
                longest_turn = longest_turn.max(now - last);
                turns += u64::from(now > last);
                last = now;
                if finished {
                    return (turns, longest_turn);
                }
                tokio::task::yield_now().await;
            }
        }
    });
    conn.await??;
    let (turns, longest_turn) = probe.await?;
    assert_eq!(shared.metrics.telnet.stored.get(), LINES);
    assert!(
        longest_turn <= LINES / 4 && turns >= 4,
        "{turns} turns; one stored {longest_turn} lines"
    );
    Ok(())
}
