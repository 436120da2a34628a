//! Telnet `put` end to end: lines in, points stored, errors replied on the same connection.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;

use strata_tsdb::{Tsdb, TsdbOptions, Value};

use crate::harness::Server;

/// Sends `version` and reads up to its two reply lines. Replies keep line order, and a
/// connection's pending puts are written before a later command is answered, so everything
/// before this call is stored once it returns. Returns the lines that came before.
pub(crate) fn barrier(
    conn: &mut TcpStream,
    reader: &mut BufReader<TcpStream>,
) -> anyhow::Result<Vec<String>> {
    conn.write_all(b"version\n")?;
    let mut before = Vec::new();
    loop {
        let mut line = String::new();
        anyhow::ensure!(reader.read_line(&mut line)? > 0, "connection closed");
        if line.starts_with("net.opentsdb.tools ") {
            line.clear();
            reader.read_line(&mut line)?;
            return Ok(before);
        }
        before.push(line);
    }
}

/// Each series of a metric: its tags and its points.
type Series = (Vec<(String, String)>, Vec<(i64, Value)>);

fn read_all(dir: &std::path::Path, metric: &str) -> anyhow::Result<Vec<Series>> {
    let tsdb = Tsdb::open(dir, TsdbOptions::default())?;
    let mut out: Vec<_> = tsdb
        .read(&strata_tsdb::ReadRequest::metric(
            metric,
            &[],
            0,
            i64::MAX / 2,
        ))?
        .into_iter()
        .map(|s| (s.tags, s.points))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

#[test]
fn put_lines_are_stored_and_bad_lines_get_opentsdb_errors() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Server::start_in(dir.path(), &[])?;
    let mut conn = server.connect()?;
    let mut reader = BufReader::new(conn.try_clone()?);
    // tcollector style: \r\n, double and trailing spaces.
    conn.write_all(b"put sys.cpu.user 1356998400 42.5 host=web01  cpu=0 \r\n")?;
    conn.write_all(b"put sys.cpu.user 1356998410000 43 host=web01 cpu=0\n")?;
    conn.write_all(b"put sys.cpu.user 1356998400 1 host=web02\n")?;
    conn.write_all(b"put sys.cpu.user\n")?;
    conn.write_all(b"put sys.cpu.user 1356998400 1\n")?;
    conn.write_all(b"put sys.cpu.user notatime 1 host=a\n")?;
    conn.write_all(b"put sys.cpu.user 1356998400 1 host=a b\n")?;
    conn.write_all(b"put sys.cpu user 1356998400 1 host=a\n")?;
    conn.write_all(b"put sys.cpu.user 1356998420 44 host=web01 cpu=0\n")?;
    let errors = barrier(&mut conn, &mut reader)?;
    assert_eq!(
        errors,
        vec![
            "put: illegal argument: not enough arguments (need least 4, got 1)\n".to_string(),
            "put: illegal argument: not enough arguments (need least 4, got 3)\n".to_string(),
            "put: invalid value: Invalid character 'n' in notatime\n".to_string(),
            "put: illegal argument: invalid tag: b\n".to_string(),
            "put: invalid value: Invalid character 'u' in user\n".to_string(),
        ]
    );
    drop(conn);
    let status = server.stop()?;
    assert!(status.success(), "strata exited with {status:?}");

    let series = read_all(dir.path(), "sys.cpu.user")?;
    assert_eq!(series.len(), 2, "{series:?}");
    let (tags, points) = &series[0];
    assert_eq!(tags.len(), 2);
    assert!(tags.contains(&("host".to_string(), "web01".to_string())));
    assert_eq!(
        points,
        &vec![
            (1_356_998_400_000, Value::Float(42.5)),
            (1_356_998_410_000, Value::Int(43)),
            (1_356_998_420_000, Value::Int(44)),
        ]
    );
    assert_eq!(series[1].1, vec![(1_356_998_400_000, Value::Int(1))]);
    Ok(())
}

#[test]
fn lines_sent_right_before_close_are_stored() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Server::start_in(dir.path(), &[])?;
    {
        // A Python sender: probe, then send and close without reading; no final newline.
        drop(server.connect()?);
        let mut conn = server.connect()?;
        for i in 0..500 {
            writeln!(conn, "put m.close {} {i} host=h", 1_356_998_400 + i)?;
        }
        conn.write_all(b"put m.close 1356999999 7 host=h")?;
    }
    // A second connection's barrier does not order the first one: poll the server until it
    // has stored the first connection's lines.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let stored = || -> anyhow::Result<f64> {
        let (_, text) = server.http("GET", "/metrics", b"")?;
        Ok(
            crate::metrics::sample(&text, "strata_points_stored_total{protocol=\"telnet\"}")
                .unwrap_or(0.0),
        )
    };
    while stored()? < 501.0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let status = server.stop()?;
    assert!(status.success(), "strata exited with {status:?}");
    let series = read_all(dir.path(), "m.close")?;
    assert_eq!(series.len(), 1);
    assert_eq!(series[0].1.len(), 501);
    Ok(())
}

#[test]
fn kill_9_loses_nothing_acknowledged_with_fsync_always() -> anyhow::Result<()> {
    kill_9_after_replies(&["--fsync", "always"])
}

/// With the default fsync interval, a reply still means the points before it are in the WAL
/// file: a process crash (not a machine crash) loses none of them, though they were queued.
#[test]
fn kill_9_loses_nothing_a_reply_followed_with_the_default_fsync() -> anyhow::Result<()> {
    kill_9_after_replies(&[])
}

/// Rounds of puts each followed by a reply, more puts in flight, `kill -9`: every point
/// before the last reply is there after a restart, in order.
fn kill_9_after_replies(args: &[&str]) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Server::start_in(dir.path(), args)?;
    let mut conn = server.connect()?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut acked = 0;
    for round in 0..20 {
        for i in 0..100 {
            let n = round * 100 + i;
            writeln!(conn, "put m.crash {} {n} host=h", 1_356_998_400 + n)?;
        }
        assert!(barrier(&mut conn, &mut reader)?.is_empty());
        acked = (round + 1) * 100;
    }
    // More writes in flight, then SIGKILL.
    for n in acked..acked + 100 {
        writeln!(conn, "put m.crash {} {n} host=h", 1_356_998_400 + n)?;
    }
    drop(server);
    let series = read_all(dir.path(), "m.crash")?;
    assert_eq!(series.len(), 1);
    let points = &series[0].1;
    assert!(points.len() >= acked as usize, "{} < {acked}", points.len());
    for (i, (ts, v)) in points.iter().enumerate() {
        assert_eq!(*ts, (1_356_998_400 + i as i64) * 1000);
        assert_eq!(*v, Value::Int(i as i64));
    }
    Ok(())
}

/// A connection remembers the series it sent by their text: such lines skip the name checks,
/// so a rename must make it forget them, and replies still come in line order when storage
/// refuses a line that parsed.
#[test]
fn known_series_follow_a_rename_and_replies_keep_line_order() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Server::start_in(dir.path(), &[])?;
    let mut conn = server.connect()?;
    let mut reader = BufReader::new(conn.try_clone()?);
    conn.write_all(b"put m.known 1356998400 1 host=a\n")?;
    assert!(barrier(&mut conn, &mut reader)?.is_empty());
    // Known now: taken without its names being looked at again.
    conn.write_all(b"put m.known 1356998410 2 host=a\n")?;
    assert!(barrier(&mut conn, &mut reader)?.is_empty());
    let (status, body) = server.http(
        "POST",
        "/api/uid/rename",
        br#"{"metric":"m.known","name":"m.renamed"}"#,
    )?;
    assert_eq!(status, 200, "{body}");
    // The same text now names a new metric.
    conn.write_all(b"put m.known 1356998420 3 host=a\n")?;
    // Storage refuses the first line (a name OpenTSDB does not allow), the parser the
    // second; the replies come in that order.
    conn.write_all(b"put m|bad 1356998400 1 host=a\n")?;
    conn.write_all(b"put m.known 1356998430 x host=a\n")?;
    conn.write_all(b"put m.known 1356998440 5 host=a\n")?;
    let errors = barrier(&mut conn, &mut reader)?;
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("m|bad"), "{errors:?}");
    assert_eq!(
        errors[1],
        "put: invalid value: Invalid character 'x' in x\n"
    );
    drop(conn);
    let status = server.stop()?;
    assert!(status.success(), "strata exited with {status:?}");
    let host_a = vec![("host".to_string(), "a".to_string())];
    assert_eq!(
        read_all(dir.path(), "m.renamed")?,
        vec![(
            host_a.clone(),
            vec![
                (1_356_998_400_000, Value::Int(1)),
                (1_356_998_410_000, Value::Int(2))
            ]
        )]
    );
    assert_eq!(
        read_all(dir.path(), "m.known")?,
        vec![(
            host_a,
            vec![
                (1_356_998_420_000, Value::Int(3)),
                (1_356_998_440_000, Value::Int(5))
            ]
        )]
    );
    Ok(())
}

/// Points of series a connection has sent before are queued for storage, not waited for; a
/// reply still comes only once every point before it can be read. Here from other
/// connections, round after round, with the query right after the reply.
#[test]
fn a_reply_comes_after_the_points_before_it_are_readable() -> anyhow::Result<()> {
    let server = Server::start()?;
    let mut conns = Vec::new();
    for _ in 0..2 {
        let conn = server.connect()?;
        let reader = BufReader::new(conn.try_clone()?);
        conns.push((conn, reader));
    }
    let base = 1_356_998_400i64;
    let mut sent = 0u64;
    for round in 0..20i64 {
        for (c, (conn, reader)) in conns.iter_mut().enumerate() {
            let mut lines = String::new();
            for host in 0..200 {
                let ts = base + round * 10;
                lines.push_str(&format!(
                    "put e2e.queued {ts} {round} host=h{host} conn=c{c}\n"
                ));
            }
            conn.write_all(lines.as_bytes())?;
            sent += 200;
            assert!(barrier(conn, reader)?.is_empty());
            let body = format!(
                r#"{{"start":{base},"end":{},"queries":[{{"metric":"e2e.queued","aggregator":"sum","downsample":"0all-count"}}]}}"#,
                base + 3600
            );
            let (status, text) = server.http("POST", "/api/query", body.as_bytes())?;
            assert_eq!(status, 200, "{text}");
            let v: serde_json::Value = serde_json::from_str(&text)?;
            let count: f64 = v[0]["dps"]
                .as_object()
                .map(|d| d.values().filter_map(serde_json::Value::as_f64).sum())
                .unwrap_or(0.0);
            assert_eq!(count as u64, sent, "round {round}, connection {c}");
        }
    }
    Ok(())
}

/// Issue 21: a connection that sent more than 65,536 distinct series crashed at the bound of
/// its series cache (a panic, a broken pipe, the batch lost). Here one connection sends
/// 200,000 series twice over; every point is stored, on its own series.
#[test]
fn a_connection_with_200k_series_stores_every_point() -> anyhow::Result<()> {
    const SERIES: u64 = 200_000;
    let server = Server::start()?;
    let mut conn = server.connect()?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let base = 1_356_998_400u64;
    for round in 0..2 {
        let mut lines = String::new();
        for i in 0..SERIES {
            lines.push_str(&format!(
                "put e2e.card {} {i} host=h{i} dc=d{}\n",
                base + round * 10,
                i % 7
            ));
            if lines.len() >= 1 << 20 {
                conn.write_all(lines.as_bytes())?;
                lines.clear();
            }
        }
        conn.write_all(lines.as_bytes())?;
    }
    assert_eq!(barrier(&mut conn, &mut reader)?, Vec::<String>::new());
    let body = format!(
        r#"{{"start":{base},"end":{},"queries":[
            {{"metric":"e2e.card","aggregator":"sum","downsample":"0all-count"}},
            {{"metric":"e2e.card","aggregator":"sum","downsample":"0all-sum"}}]}}"#,
        base + 3600
    );
    let (status, text) = server.http("POST", "/api/query", body.as_bytes())?;
    assert_eq!(status, 200, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text)?;
    // Both sums are integers well inside f64's exact range, however they are written.
    let only = |q: usize| -> Option<f64> {
        let dps = v[q]["dps"].as_object()?;
        (dps.len() == 1).then(|| dps.values().next()?.as_f64())?
    };
    assert_eq!(only(0), Some((2 * SERIES) as f64), "{text}");
    // Host i wrote i in both rounds: a point on another host's series changes the sum.
    assert_eq!(only(1), Some((SERIES * (SERIES - 1)) as f64), "{text}");
    let (status, text) = server.http("GET", "/metrics", b"")?;
    assert_eq!(status, 200, "{text}");
    let sample = |name| crate::metrics::sample(&text, name);
    assert_eq!(sample("strata_tsdb_series"), Some(SERIES as f64));
    assert_eq!(
        sample("strata_points_stored_total{protocol=\"telnet\"}"),
        Some((2 * SERIES) as f64)
    );
    Ok(())
}
