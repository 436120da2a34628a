//! The operator's offline commands end to end: `strata uid`, `strata query`, `strata delete`.

use std::path::Path;
use std::process::{Command, Output};

use anyhow::ensure;

use crate::harness::Server;

/// Runs `strata <command> --data-dir <dir> <args…>` and returns its standard output.
fn strata(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let (command, rest) = args.split_first().unwrap_or((&"", &[]));
    let out: Output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg(command)
        .arg("--data-dir")
        .arg(dir)
        .args(rest)
        .env("RUST_LOG", "warn")
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    ensure!(
        out.status.success(),
        "strata {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(stdout)
}

/// A data directory holding `cli.cpu` for hosts a and b, and `cli.mem` for host b.
fn data() -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    let input = dir.path().join("in.txt");
    std::fs::write(
        &input,
        "cli.cpu 1700000000 1 host=a\n\
         cli.cpu 1700000060 2.5 host=a\n\
         cli.cpu 1700000000 5 host=b\n\
         cli.mem 1700000000 7 host=c\n",
    )?;
    let data = dir.path().join("data");
    let input = input.to_string_lossy().into_owned();
    strata(&data, &["import", &input])?;
    Ok(dir)
}

#[test]
fn query_prints_points_as_opentsdb_and_as_json() -> anyhow::Result<()> {
    let dir = data()?;
    let data = dir.path().join("data");
    let out = strata(
        &data,
        &[
            "query",
            "1699999000",
            "1700001000",
            "sum",
            "cli.cpu",
            "host=a",
        ],
    )?;
    assert_eq!(
        out,
        "cli.cpu 1700000000000 1 {host=a}\ncli.cpu 1700000060000 2.5 {host=a}\n"
    );
    let out = strata(
        &data,
        &["query", "1699999000", "1700001000", "sum", "cli.cpu"],
    )?;
    assert_eq!(
        out,
        "cli.cpu 1700000000000 6 {}\ncli.cpu 1700000060000 2.5 {}\n"
    );
    let out = strata(
        &data,
        &[
            "query",
            "--format",
            "json",
            "1699999000",
            "1700001000",
            "none",
            "cli.cpu",
        ],
    )?;
    let v: serde_json::Value = serde_json::from_str(&out)?;
    assert_eq!(v.as_array().map(Vec::len), Some(2), "{v}");
    assert_eq!(v[0]["tags"]["host"], "a");
    assert_eq!(v[0]["dps"]["1700000060"], 2.5);
    assert_eq!(v[1]["dps"]["1700000000"], 5);
    Ok(())
}

#[test]
fn uid_grep_assign_rename_delete() -> anyhow::Result<()> {
    let dir = data()?;
    let data = dir.path().join("data");
    assert_eq!(
        strata(&data, &["uid", "grep", "metrics", "^cli\\."])?,
        "metrics cli.cpu: [0, 0, 1]\nmetrics cli.mem: [0, 0, 2]\n"
    );
    assert_eq!(
        strata(&data, &["uid", "grep", "CPU", "-i"])?,
        "metrics cli.cpu: [0, 0, 1]\n"
    );
    assert_eq!(
        strata(&data, &["uid", "assign", "metrics", "new.one", "new.two"])?,
        "metrics new.one: [0, 0, 3]\nmetrics new.two: [0, 0, 4]\n"
    );
    assert_eq!(
        strata(&data, &["uid", "rename", "metrics", "new.one", "renamed"])?,
        "metrics renamed: [0, 0, 3]\n"
    );
    strata(&data, &["uid", "delete", "metrics", "new.two"])?;
    assert_eq!(
        strata(&data, &["uid", "grep", "metrics", "."])?,
        "metrics cli.cpu: [0, 0, 1]\nmetrics cli.mem: [0, 0, 2]\nmetrics renamed: [0, 0, 3]\n"
    );
    // A name a series uses is not deleted.
    assert!(strata(&data, &["uid", "delete", "metrics", "cli.cpu"]).is_err());
    Ok(())
}

#[test]
fn delete_removes_series_from_query_suggest_and_lookup() -> anyhow::Result<()> {
    let dir = data()?;
    let data = dir.path().join("data");
    let out = strata(&data, &["delete", "cli.cpu", "host=b"])?;
    assert!(
        out.contains("deleted 1 series of cli.cpu (1 points)"),
        "{out}"
    );
    // Host b is gone from the sum, and the one series left keeps its tags.
    let out = strata(
        &data,
        &["query", "1699999000", "1700001000", "sum", "cli.cpu"],
    )?;
    assert_eq!(
        out,
        "cli.cpu 1700000000000 1 {host=a}\ncli.cpu 1700000060000 2.5 {host=a}\n"
    );
    let out = strata(&data, &["delete", "cli.cpu"])?;
    assert!(out.contains("deleted unused metrics cli.cpu"), "{out}");
    assert!(out.contains("deleted unused tagv a"), "{out}");
    let fsck = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["fsck", "--data-dir"])
        .arg(&data)
        .output()?;
    assert_eq!(fsck.status.code(), Some(0), "{fsck:?}");

    let server = Server::start_in(&data, &[])?;
    let (status, body) = server.http("GET", "/api/suggest?type=metrics&q=cli", b"")?;
    assert_eq!(status, 200);
    assert_eq!(body, r#"["cli.mem"]"#);
    let (_, body) = server.http("GET", "/api/suggest?type=tagv&q=", b"")?;
    assert_eq!(body, r#"["c"]"#);
    let (status, body) = server.http("GET", "/api/search/lookup?m=cli.cpu", b"")?;
    assert_ne!(status, 200, "{body}");
    let (_, body) = server.http("GET", "/api/search/lookup?m={host=*}", b"")?;
    let v: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(v["totalResults"], 1, "{body}");
    assert_eq!(v["results"][0]["metric"], "cli.mem", "{body}");
    Ok(())
}
