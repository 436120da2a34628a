//! `strata fsck` end to end, on damaged copies of real data directories: each is written by
//! `strata import`, damaged on disk or through the engine, then checked and repaired by the
//! binary, and the repaired directory served by `strata serve`.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::harness::Server;

const HOUR: i64 = 1_356_998_400;

/// Runs `strata fsck --data-dir <dir> <args…>` with stdin closed.
fn fsck(dir: &Path, args: &[&str]) -> anyhow::Result<Output> {
    Ok(Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("fsck")
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()?)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The exit code and output (stdout, then stderr) of a run.
fn run(dir: &Path, args: &[&str]) -> anyhow::Result<(i32, String)> {
    let out = fsck(dir, args)?;
    let code = out.status.code().unwrap_or(-1);
    Ok((code, format!("{}{}", text(&out.stdout), text(&out.stderr))))
}

/// Imports `points` points of `metric{host=a}`, one every 10 s from `HOUR`, into `dir`;
/// `compact` row-compacts and flushes them into SST files, otherwise they stay in the WAL.
fn import(dir: &Path, metric: &str, points: i64, compact: bool) -> anyhow::Result<()> {
    let file = tempfile::NamedTempFile::new()?;
    let lines: String = (0..points)
        .map(|i| format!("{metric} {} {i} host=a\n", HOUR + i * 10))
        .collect();
    std::fs::write(file.path(), lines)?;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata"));
    cmd.arg("import").arg("--data-dir").arg(dir);
    if !compact {
        cmd.arg("--no-compact");
    }
    let out = cmd.arg(file.path()).env("RUST_LOG", "warn").output()?;
    assert!(out.status.success(), "{}", text(&out.stderr));
    Ok(())
}

/// Points of `metric` the server at `dir` returns.
fn served(dir: &Path, metric: &str) -> anyhow::Result<usize> {
    let server = Server::start_in(dir, &[])?;
    let (status, body) = server.http(
        "GET",
        &format!(
            "/api/query?start={HOUR}&end={}&m=sum:{metric}",
            HOUR + 86_400
        ),
        b"",
    )?;
    server.stop()?;
    if status == 400 && body.contains("No such name") {
        return Ok(0);
    }
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body)?;
    Ok(v.as_array()
        .and_then(|a| a.first())
        .and_then(|s| s["dps"].as_object())
        .map_or(0, |d| d.len()))
}

/// The data table's SST files, oldest first.
fn data_files(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut names: Vec<String> = strata_engine::verify(dir)?
        .sst_files()
        .into_iter()
        .filter(|f| f.table == "tsdb")
        .map(|f| f.name)
        .collect();
    names.sort();
    Ok(names)
}

fn flip(path: &Path, offset: u64) -> anyhow::Result<()> {
    let mut bytes = std::fs::read(path)?;
    bytes[offset as usize] ^= 0x55;
    std::fs::write(path, bytes)?;
    Ok(())
}

/// Two metrics in separate data files: `a.m` (600 points) then `b.m` (300).
fn two_files() -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    import(dir.path(), "a.m", 600, true)?;
    import(dir.path(), "b.m", 300, true)?;
    Ok(dir)
}

/// `--fix --yes` repairs everything; then the directory checks clean and serves `b.m`.
fn fix_then_clean(dir: &Path) -> anyhow::Result<String> {
    let (code, out) = run(dir, &["--fix", "--yes"])?;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("after the repair:"), "{out}");
    let (code, again) = run(dir, &[])?;
    assert_eq!(code, 0, "{again}");
    assert!(again.ends_with("clean\n"), "{again}");
    assert_eq!(served(dir, "b.m")?, 300);
    let reports: Vec<_> = std::fs::read_dir(dir.join("lost+found"))?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("REPORT.txt"))
        .collect();
    assert_eq!(reports.len(), 1, "{reports:?}");
    Ok(std::fs::read_to_string(&reports[0])?)
}

#[test]
fn a_clean_directory_passes_and_a_missing_one_fails() -> anyhow::Result<()> {
    let dir = two_files()?;
    let (code, out) = run(dir.path(), &[])?;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("900 points"), "{out}");
    assert!(out.contains("2 series indexed (2 with data)"), "{out}");
    assert!(out.ends_with("clean\n"), "{out}");
    // Nothing left behind by the check.
    assert!(!dir.path().join(".fsck-view").exists());
    assert!(!dir.path().join("lost+found").exists());
    let (code, out) = run(&dir.path().join("nope"), &[])?;
    assert_eq!(code, 8, "{out}");
    assert!(out.contains("no data directory"), "{out}");
    Ok(())
}

#[test]
fn a_flipped_data_block_is_found_and_fixed_and_the_rest_is_served() -> anyhow::Result<()> {
    let dir = two_files()?;
    let files = data_files(dir.path())?;
    assert_eq!(files.len(), 2, "{files:?}");
    flip(&dir.path().join(&files[0]), 20)?;
    let (code, out) = run(dir.path(), &[])?;
    assert_eq!(code, 4, "{out}");
    assert!(
        out.contains(&format!("error   {} @0 row ", files[0])),
        "{out}"
    );
    assert!(out.contains("checksum mismatch"), "{out}");
    assert!(out.contains("run `strata fsck --fix`"), "{out}");
    let report = fix_then_clean(dir.path())?;
    assert!(report.contains(&files[0]), "{report}");
    assert_eq!(served(dir.path(), "a.m")?, 0);
    Ok(())
}

#[test]
fn a_flipped_footer_or_a_deleted_file_is_found_and_fixed() -> anyhow::Result<()> {
    for delete in [false, true] {
        let dir = two_files()?;
        let files = data_files(dir.path())?;
        let path = dir.path().join(&files[0]);
        if delete {
            std::fs::remove_file(&path)?;
        } else {
            let len = std::fs::metadata(&path)?.len();
            flip(&path, len - 30)?;
        }
        let (code, out) = run(dir.path(), &[])?;
        assert_eq!(code, 4, "{out}");
        let what = if delete { "does not exist" } else { "footer" };
        assert!(out.contains(&files[0]) && out.contains(what), "{out}");
        // The server cannot even open it.
        assert!(Server::start_in(dir.path(), &[]).is_err());
        fix_then_clean(dir.path())?;
    }
    Ok(())
}

/// The offset of the last WAL record that starts before `end` in `segment` (records follow a
/// 24-byte header, each a 4-byte length, an 8-byte checksum and the payload).
fn last_record_before(segment: &[u8], end: usize) -> usize {
    let (mut at, mut last) = (24, 24);
    while at < end {
        last = at;
        let len = u32::from_be_bytes([
            segment[at],
            segment[at + 1],
            segment[at + 2],
            segment[at + 3],
        ]);
        at += 12 + len as usize;
    }
    last
}

#[test]
fn a_torn_wal_tail_is_a_warning_and_a_bad_record_before_it_an_error() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let segment = || -> anyhow::Result<std::path::PathBuf> {
        let mut logs: Vec<_> = std::fs::read_dir(dir.path())?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        logs.sort();
        logs.pop().ok_or_else(|| anyhow::anyhow!("no WAL segment"))
    };
    import(dir.path(), "a.m", 100, false)?;
    let first_import_end = std::fs::metadata(segment()?)?.len() as usize;
    import(dir.path(), "b.m", 300, false)?;
    // The torn write: the end of the last import's batch.
    import(dir.path(), "c.m", 10, false)?;
    let last = segment()?;
    let len = std::fs::metadata(&last)?.len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&last)?
        .set_len(len - 5)?;
    let (code, out) = run(dir.path(), &[])?;
    assert_eq!(code, 0, "a torn tail is what a crash leaves: {out}");
    assert!(
        out.contains("warning ") && out.contains("torn end"),
        "{out}"
    );
    assert!(out.contains("clean (warnings: 1)"), "{out}");

    // A damaged record with good ones after it: the batch of `a.m`'s points, the last record
    // the first import wrote.
    let bytes = std::fs::read(&last)?;
    let record = last_record_before(&bytes, first_import_end);
    flip(&last, record as u64 + 12 + 20)?;
    let (code, out) = run(dir.path(), &[])?;
    assert_eq!(code, 4, "{out}");
    assert!(out.contains(&format!("@{record}")), "{out}");
    assert!(out.contains("with good records after it"), "{out}");
    fix_then_clean(dir.path())?;
    assert_eq!(served(dir.path(), "a.m")?, 0);
    Ok(())
}

/// Opens the engine in-process on `dir` and applies `damage` to it.
fn through_engine(
    dir: &Path,
    damage: impl FnOnce(&strata_engine::Db) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let db = strata_engine::Db::open(dir, strata_engine::DbOptions::default())?;
    damage(&db)?;
    db.sync_wal()?;
    Ok(())
}

fn put(
    db: &strata_engine::Db,
    table: &str,
    row: &[u8],
    col: &[u8],
    v: &[u8],
) -> anyhow::Result<()> {
    let t = db
        .table(table)
        .ok_or_else(|| anyhow::anyhow!("no table {table}"))?;
    let mut b = strata_engine::WriteBatch::new();
    b.put(&t, row, col, v);
    Ok(db.write_sync(&b)?)
}

#[test]
fn damaged_tables_are_found_with_their_keys_and_fixed() -> anyhow::Result<()> {
    let dir = two_files()?;
    let mut data_row = Vec::new();
    through_engine(dir.path(), |db| {
        // A row of `a.m` (metric UID 1, after the salt byte).
        let t = db
            .table("tsdb")
            .ok_or_else(|| anyhow::anyhow!("no data table"))?;
        for row in db.scan(&t, &strata_engine::ScanOptions::default())? {
            let row = row?;
            if row.key.get(1..4) == Some(&[0, 0, 1][..]) {
                data_row = row.key.to_vec();
                break;
            }
        }
        anyhow::ensure!(!data_row.is_empty(), "no row of a.m");
        // A compacted block that does not decode.
        put(db, "tsdb", &data_row, b"", b"\x01\x09not a block")?;
        // A dirty-row marker for a garbage key.
        put(db, "meta", b"dgarbage", b"t", &0u64.to_be_bytes())?;
        // The reverse mapping of tag value `a` (UID 1) removed.
        let u = db
            .table("uid")
            .ok_or_else(|| anyhow::anyhow!("no uid table"))?;
        let mut b = strata_engine::WriteBatch::new();
        b.delete(&u, &[0, 0, 1], b"name:tagv");
        db.write_sync(&b)?;
        Ok(())
    })?;
    let (code, out) = run(dir.path(), &["--max-problems", "2"])?;
    assert_eq!(code, 4, "{out}");
    let hex: String = data_row.iter().map(|b| format!("{b:02x}")).collect();
    let (_, all) = run(dir.path(), &["--max-problems", "0"])?;
    assert!(
        all.contains(&format!("error   table tsdb row {hex} column (empty): ")),
        "{all}"
    );
    assert!(
        all.contains("error   table meta row 6467617262616765: "),
        "{all}"
    );
    assert!(
        all.contains("error   table uid row 61 column 69643a74616776"),
        "{all}"
    );
    // Only two printed, and a note of the rest.
    assert_eq!(
        out.lines().filter(|l| l.starts_with("error")).count(),
        2,
        "{out}"
    );
    assert!(out.contains("more (--max-problems 0 prints all)"), "{out}");

    // Without a terminal to ask on, --fix refuses and changes nothing.
    let (code, out) = run(dir.path(), &["--fix"])?;
    assert_eq!(code, 8, "{out}");
    assert!(out.contains("pass --yes"), "{out}");
    assert!(!dir.path().join("lost+found").exists());

    let report = fix_then_clean(dir.path())?;
    assert!(report.contains(&hex), "{report}");
    let saved = std::fs::read_dir(dir.path().join("lost+found"))?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join(strata_tsdb::SAVED_CELLS))
        .find(|p| p.exists())
        .ok_or_else(|| anyhow::anyhow!("no saved cells"))?;
    let saved = std::fs::read_to_string(saved)?;
    assert!(saved.contains(&hex.to_uppercase()), "{saved}");
    Ok(())
}

#[test]
fn fsck_refuses_while_the_server_holds_the_directory() -> anyhow::Result<()> {
    let dir = two_files()?;
    let server = Server::start_in(dir.path(), &[])?;
    let (code, out) = run(dir.path(), &[])?;
    assert_eq!(code, 8, "{out}");
    assert!(out.contains("in use by another process"), "{out}");
    server.stop()?;
    Ok(())
}
