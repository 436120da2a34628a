//! Backups end to end: `POST /api/admin/backup` while telnet ingest runs, `strata restore`,
//! `strata fsck` on the restored copy, and the offline `strata backup`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use anyhow::{Context, ensure};

use crate::harness::Server;

/// First timestamp of the test series, in seconds.
const T0: i64 = 1_700_000_000;
/// Points sent between two acknowledgements.
const BATCH: u64 = 50;

fn strata(args: &[&str]) -> anyhow::Result<Output> {
    Ok(Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()?)
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn path(p: &Path) -> anyhow::Result<&str> {
    p.to_str().context("a non-UTF-8 temporary path")
}

/// Sends points `0, 1, 2, …` of `bk.points` over telnet, one second apart, and after every
/// [`BATCH`] of them a `version` command: its reply comes only once the points before it are
/// stored, so `acked` counts the points the server has acknowledged.
fn ingest(server: &Server, acked: &AtomicU64, stop: &AtomicBool) -> anyhow::Result<()> {
    let mut conn = server.connect()?;
    let mut replies = BufReader::new(conn.try_clone()?);
    let mut next = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let mut lines = String::new();
        for i in next..next + BATCH {
            lines.push_str(&format!("put bk.points {} {i} host=a\n", T0 + i as i64));
        }
        lines.push_str("version\n");
        conn.write_all(lines.as_bytes())?;
        let mut reply = String::new();
        for _ in 0..2 {
            reply.clear();
            replies.read_line(&mut reply)?;
            ensure!(!reply.starts_with("put:"), "telnet error: {reply}");
        }
        next += BATCH;
        acked.store(next, Ordering::Release);
    }
    Ok(())
}

#[test]
fn online_backup_under_ingest_restores_every_acknowledged_point() -> anyhow::Result<()> {
    let scratch = tempfile::tempdir()?;
    let (data, backup, restored) = (
        scratch.path().join("data"),
        scratch.path().join("backup"),
        scratch.path().join("restored"),
    );
    let server = Arc::new(Server::start_in(&data, &[])?);
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (server, acked, stop) = (server.clone(), acked.clone(), stop.clone());
        std::thread::spawn(move || ingest(&server, &acked, &stop))
    };
    while acked.load(Ordering::Acquire) < 2_000 {
        ensure!(!writer.is_finished(), "the writer stopped early");
        std::thread::yield_now();
    }
    let before = acked.load(Ordering::Acquire);
    let body = serde_json::json!({ "to": path(&backup)? }).to_string();
    let (status, reply) = server.http("POST", "/api/admin/backup", body.as_bytes())?;
    ensure!(status == 200, "{status} {reply}");
    let summary: serde_json::Value = serde_json::from_str(&reply)?;
    // Writes go on after the backup, and are not in it.
    let during = acked.load(Ordering::Acquire);
    while acked.load(Ordering::Acquire) < during + 500 {
        ensure!(!writer.is_finished(), "the writer stopped early");
        std::thread::yield_now();
    }
    stop.store(true, Ordering::Relaxed);
    writer
        .join()
        .map_err(|_| anyhow::anyhow!("writer panicked"))??;
    assert!(summary["sequence"].as_u64().unwrap_or(0) > 0, "{summary}");
    assert!(
        summary["filesLinked"].as_u64().unwrap_or(0) > 0,
        "{summary}"
    );
    assert_eq!(summary["filesCopied"], 0, "{summary}");

    let out = strata(&[
        "restore",
        "--from",
        path(&backup)?,
        "--data-dir",
        path(&restored)?,
    ])?;
    ensure!(out.status.success(), "restore: {}", text(&out));
    assert!(text(&out).contains("restored"), "{}", text(&out));
    let out = strata(&["fsck", "--data-dir", path(&restored)?])?;
    assert_eq!(out.status.code(), Some(0), "fsck: {}", text(&out));

    let copy = Server::start_in(&restored, &[])?;
    let end_ms = (T0 + 1_000_000) * 1000;
    let series = copy.query_raw("bk.points", &[("host", "a")], T0 * 1000, end_ms)?;
    ensure!(series.len() == 1, "{series:?}");
    let points = &series[0].1;
    let n = points.len() as u64;
    assert!(
        n >= before,
        "{n} points restored, {before} acknowledged before the backup"
    );
    for (i, (ts, v)) in points.iter().enumerate() {
        assert_eq!(*ts, (T0 + i as i64) * 1000, "no gap: point {i}");
        assert_eq!(v.as_u64(), Some(i as u64));
    }
    Ok(())
}

#[test]
fn bad_backup_requests_get_opentsdb_errors() -> anyhow::Result<()> {
    let server = Server::start()?;
    for body in [
        "{}",
        r#"{"to": 3}"#,
        r#"{"to": "relative/dir"}"#,
        r#"{"to": "/proc/strata-cannot-write-here"}"#,
        "not json",
    ] {
        let (status, reply) = server.http("POST", "/api/admin/backup", body.as_bytes())?;
        assert_eq!(status, 400, "{body}: {reply}");
        let v: serde_json::Value = serde_json::from_str(&reply)?;
        assert_eq!(v["error"]["code"], 400, "{body}: {reply}");
        assert!(v["error"]["message"].is_string(), "{reply}");
    }
    let (status, _) = server.http("GET", "/api/admin/backup", b"")?;
    assert_eq!(status, 405);
    Ok(())
}

/// The numbers before `word` in a `strata backup` summary line.
fn count(summary: &str, word: &str) -> anyhow::Result<u64> {
    let at = summary
        .find(word)
        .with_context(|| format!("no {word:?} in {summary}"))?;
    let number = summary[..at]
        .trim_end()
        .rsplit(' ')
        .next()
        .context("no number")?;
    Ok(number.parse()?)
}

#[test]
fn offline_backup_twice_copies_only_new_files() -> anyhow::Result<()> {
    let scratch = tempfile::tempdir()?;
    let (data, backup, input) = (
        scratch.path().join("data"),
        scratch.path().join("backup"),
        scratch.path().join("in.txt"),
    );
    std::fs::write(
        &input,
        "bk.off 1700000000 1 host=a\nbk.off 1700000060 2 host=b\n",
    )?;
    let out = strata(&["import", "--data-dir", path(&data)?, path(&input)?])?;
    ensure!(out.status.success(), "{}", text(&out));
    let first = strata(&["backup", "--data-dir", path(&data)?, "--to", path(&backup)?])?;
    ensure!(first.status.success(), "{}", text(&first));
    let first = text(&first);
    let files = count(&first, "files linked")?;
    assert!(files > 0, "{first}");
    assert_eq!(count(&first, "already there")?, 0, "{first}");

    std::fs::write(&input, "bk.off 1700003600 3 host=c\n")?;
    let out = strata(&[
        "import",
        "--no-compact",
        "--data-dir",
        path(&data)?,
        path(&input)?,
    ])?;
    ensure!(out.status.success(), "{}", text(&out));
    let second = strata(&["backup", "--data-dir", path(&data)?, "--to", path(&backup)?])?;
    ensure!(second.status.success(), "{}", text(&second));
    let second = text(&second);
    assert!(count(&second, "already there")? > 0, "{second}");
    let new = count(&second, "files linked")? + count(&second, "copied,")?;
    assert!(
        new > 0 && new < files + count(&second, "already there")?,
        "{second}"
    );

    // Restoring it gives all three points, and a restore into a non-empty directory needs
    // --force.
    let restored = scratch.path().join("restored");
    let out = strata(&[
        "restore",
        "--from",
        path(&backup)?,
        "--data-dir",
        path(&restored)?,
    ])?;
    ensure!(out.status.success(), "{}", text(&out));
    let again = strata(&[
        "restore",
        "--from",
        path(&backup)?,
        "--data-dir",
        path(&restored)?,
    ])?;
    assert!(!again.status.success());
    assert!(text(&again).contains("--force"), "{}", text(&again));
    let forced = strata(&[
        "restore",
        "--force",
        "--from",
        path(&backup)?,
        "--data-dir",
        path(&restored)?,
    ])?;
    ensure!(forced.status.success(), "{}", text(&forced));
    let server = Server::start_in(&restored, &[])?;
    let mut total = 0;
    for host in ["a", "b", "c"] {
        let series = server.query_raw(
            "bk.off",
            &[("host", host)],
            1_699_000_000_000,
            1_800_000_000_000,
        )?;
        total += series.iter().map(|s| s.1.len()).sum::<usize>();
    }
    assert_eq!(total, 3);
    Ok(())
}

#[test]
fn offline_backup_of_a_served_directory_points_to_the_endpoint() -> anyhow::Result<()> {
    let scratch = tempfile::tempdir()?;
    let data = scratch.path().join("data");
    let _server = Server::start_in(&data, &[])?;
    let to = scratch.path().join("backup");
    let out = strata(&["backup", "--data-dir", path(&data)?, "--to", path(&to)?])?;
    assert!(!out.status.success());
    assert!(text(&out).contains("/api/admin/backup"), "{}", text(&out));
    Ok(())
}
