//! The offline commands end to end: `strata import`, `strata scan`, `strata compact`.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output};

use crate::harness::Server;

/// Runs `strata <args…> --data-dir <dir>` and returns its output.
fn strata(dir: &Path, args: &[&str]) -> anyhow::Result<Output> {
    Ok(Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .env("RUST_LOG", "warn")
        .output()?)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Writes the import files: a plain one with a bad line 3, and a gzip one.
fn write_inputs(dir: &Path) -> anyhow::Result<(String, String)> {
    let plain = dir.join("a.txt");
    std::fs::write(
        &plain,
        "sys.cpu 1356998400 1 host=a\n\
         sys.cpu 1356998460 2 host=a\r\n\
         sys.cpu 1356998520 oops host=a\n\
         \n\
         sys.cpu 1356998580 4.5 host=a\n",
    )?;
    let gz = dir.join("b.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    for i in 0..100 {
        writeln!(enc, "sys.cpu {} {i} host=b", 1_356_998_400 + i * 10)?;
    }
    std::fs::write(&gz, enc.finish()?)?;
    Ok((plain.display().to_string(), gz.display().to_string()))
}

#[test]
fn import_reads_plain_and_gzip_reports_bad_lines_and_the_server_serves_the_points()
-> anyhow::Result<()> {
    let inputs = tempfile::tempdir()?;
    let (plain, gz) = write_inputs(inputs.path())?;
    let data = tempfile::tempdir()?;
    let out = strata(data.path(), &["import", &plain, &gz])?;
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    // One rejected line: the import says so and exits non-zero, but keeps the good points.
    assert!(!out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("imported 103 points from 104 lines"),
        "{stdout}"
    );
    assert!(stdout.contains("1 lines rejected"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "{plain}:3: invalid value: Invalid character 'o' in oops"
        )),
        "{stdout}"
    );
    // 2013 is long closed: the import row-compacted it.
    assert!(stdout.contains("row-compacted 2 rows"), "{stdout}");
    assert!(stderr.contains("1 lines were rejected"), "{stderr}");

    let server = Server::start_in(data.path(), &[])?;
    let (status, body) = server.http(
        "GET",
        "/api/query?start=1356998000&end=1357002000&m=sum:sys.cpu%7Bhost=a%7D",
        b"",
    )?;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body)?;
    let dps = &v[0]["dps"];
    assert_eq!(dps["1356998400"].as_f64(), Some(1.0), "{body}");
    assert_eq!(dps["1356998460"].as_f64(), Some(2.0));
    assert_eq!(dps["1356998580"].as_f64(), Some(4.5));
    assert_eq!(dps.as_object().map(|o| o.len()), Some(3));
    let (status, body) = server.http(
        "GET",
        "/api/query?start=1356998000&end=1357002000&m=sum:sys.cpu%7Bhost=b%7D",
        b"",
    )?;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(v[0]["dps"].as_object().map(|o| o.len()), Some(100));

    // While the server holds the directory, offline commands refuse. (They do not wait for
    // the lock: the server keeps it until it is stopped below, so one that waited would
    // never return.)
    let out = strata(data.path(), &["import", &plain])?;
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("in use by another process"),
        "{}",
        text(&out.stderr)
    );
    let out = strata(data.path(), &["compact"])?;
    assert!(!out.status.success());
    let status = server.stop()?;
    assert!(status.success(), "{status}");
    Ok(())
}

#[test]
fn scan_shows_raw_cells_and_compact_turns_them_into_blocks() -> anyhow::Result<()> {
    let inputs = tempfile::tempdir()?;
    let (plain, _) = write_inputs(inputs.path())?;
    let data = tempfile::tempdir()?;
    let out = strata(data.path(), &["import", "--no-compact", &plain])?;
    assert!(!text(&out.stdout).contains("row-compacted"));

    let out = strata(data.path(), &["scan", "--metric", "sys.cpu"])?;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let scan = text(&out.stdout);
    assert!(
        scan.contains(
            "metric=sys.cpu base=2013-01-01T00:00:00Z (1356998400) tags={host=a} cells=3"
        ),
        "{scan}"
    );
    assert!(scan.contains("+60.000s    raw   int    2"), "{scan}");
    assert!(scan.contains("+180.000s   raw   float  4.5"), "{scan}");
    assert!(scan.ends_with("1 rows\n"), "{scan}");
    // Nothing in a later hour, nothing for an unknown metric.
    let out = strata(data.path(), &["scan", "--start", "1357002000"])?;
    assert_eq!(text(&out.stdout), "0 rows\n");
    let out = strata(data.path(), &["scan", "--metric", "nope"])?;
    assert_eq!(text(&out.stdout), "0 rows\n");
    // A mistyped directory is an error, not a new database.
    let missing = data.path().join("nope");
    let out = strata(&missing, &["scan"])?;
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("no data directory"),
        "{}",
        text(&out.stderr)
    );
    assert!(!missing.exists());

    let out = strata(data.path(), &["compact"])?;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(report.contains("rows compacted 1"), "{report}");
    assert!(report.contains("cells folded 3"), "{report}");

    let out = strata(data.path(), &["scan", "--limit", "5"])?;
    let scan = text(&out.stdout);
    assert!(scan.contains("cells=1"), "{scan}");
    assert!(scan.contains("block v1, 3 points"), "{scan}");
    assert!(scan.contains("+180.000s   block float  4.5"), "{scan}");
    assert!(!scan.contains(" raw "), "{scan}");
    Ok(())
}
