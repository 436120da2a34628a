//! `strata fsck`: checks a data directory offline and, with `--fix`, repairs it.
//!
//! The checks live in the libraries: `strata_engine::verify` reads the engine's files, and
//! `strata_tsdb::fsck` the time-series tables, over a `strata_engine::CheckView` of the
//! directory that leaves out what cannot be read (so one bad file does not stop the rest from
//! being checked). This command prints what they find and, with `--fix`, asks, then has them
//! repair it, saving whatever they move or delete in `lost+found/fsck-<time>/` inside the data
//! directory with a `REPORT.txt` of what was done and why.
//!
//! With `--store s3://bucket/prefix`, it checks the bucket instead, as a read replica reads
//! it (no epoch is claimed, nothing is written, a writer may keep running):
//! `strata_engine::verify_object_store` reads the manifest versions and the SST objects, and
//! `strata_tsdb::fsck` the tables over a read-only open of the bucket. Objects no manifest
//! version names are warnings. `--fix` is refused on a bucket. On a prefix of partitioned
//! writers (`serve --salt-buckets`), every writer's tree is checked.
//!
//! Exit status, as e2fsck's: 0 no problems (warnings allowed), 1 problems found and all
//! repaired, 4 problems left, 8 fsck itself failed.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use strata_engine::{CheckView, Db, DbOptions, Severity, VerifyReport};
use strata_tsdb::{FsckRemedy, FsckReport};

use super::dir_lock::DirLock;
use strata_server::store::{StoreArgs, StoreConfig};
use strata_server::{Config, StorageArgs};

/// Exit status: nothing wrong.
pub(crate) const EXIT_CLEAN: i32 = 0;
/// Exit status: problems were found and all of them repaired.
pub(crate) const EXIT_REPAIRED: i32 = 1;
/// Exit status: problems were found and some are left.
pub(crate) const EXIT_PROBLEMS: i32 = 4;
/// Exit status: fsck could not run.
pub(crate) const EXIT_FAILED: i32 = 8;

/// The folder inside the data directory that receives what a repair moves or deletes.
pub(crate) const LOST_FOUND: &str = "lost+found";
/// Repair rounds of the time-series tables: one fix can reveal another (a deleted bad UID cell
/// leaves a name without its UID), and the second round repairs that.
const TSDB_ROUNDS: usize = 3;

/// `strata fsck` flags.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct FsckArgs {
    #[command(flatten)]
    pub(crate) storage: StorageArgs,
    #[command(flatten)]
    pub(crate) store: BucketArgs,
    /// Repair what can be repaired without guessing, moving what cannot be read to
    /// lost+found/ in the data directory. Asks first, unless --yes.
    #[arg(long)]
    pub(crate) fix: bool,
    /// With --fix, repair without asking.
    #[arg(long)]
    pub(crate) yes: bool,
    /// Print at most this many problems; 0 prints all.
    #[arg(long, default_value_t = 20)]
    pub(crate) max_problems: usize,
}

/// The flags that name a bucket to check instead of a data directory: `serve`'s, without
/// those that only a running server uses.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct BucketArgs {
    /// Check the bucket `s3://bucket/prefix` (as `serve --store` names it) instead of a data
    /// directory; on a prefix of partitioned writers, every writer's tree. Credentials come
    /// from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.
    #[arg(long, env = "STRATA_STORE")]
    pub(crate) store: Option<String>,
    /// The S3 endpoint of a server other than AWS, as `serve --s3-endpoint` [default: AWS S3].
    #[arg(long, env = "STRATA_S3_ENDPOINT")]
    pub(crate) s3_endpoint: Option<String>,
    /// The S3 region [default: AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1].
    #[arg(long, env = "STRATA_S3_REGION")]
    pub(crate) s3_region: Option<String>,
}

impl BucketArgs {
    fn store_args(&self) -> StoreArgs {
        StoreArgs {
            store: self.store.clone(),
            s3_endpoint: self.s3_endpoint.clone(),
            s3_region: self.s3_region.clone(),
            ..StoreArgs::default()
        }
    }
}

/// One problem or warning, as printed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Line {
    error: bool,
    /// The file, or the table of a tsdb problem.
    place: String,
    /// `@offset`, `row <hex>`, `column <hex>` as known.
    at: String,
    detail: String,
    remedy: Option<String>,
}

/// What a check of a data directory found.
#[derive(Debug)]
pub(crate) struct Check {
    engine: VerifyReport,
    /// The tsdb report, or why the tables could not be checked.
    tsdb: Result<FsckReport, String>,
}

impl Check {
    /// Checks `dir`; changes nothing in it (the view's scratch directory comes and goes).
    pub(crate) fn run(dir: &Path, opts: &DbOptions) -> anyhow::Result<Check> {
        let engine = strata_engine::verify(dir)?;
        let tsdb = match CheckView::open(&engine, opts.clone()) {
            Ok(view) => strata_tsdb::fsck(view.db()).map_err(|e| e.to_string()),
            Err(e) => Err(format!("the time-series tables cannot be checked: {e}")),
        };
        Ok(Check { engine, tsdb })
    }

    /// Errors of the engine plus problems of the tables (a table check that could not run
    /// counts as one).
    pub(crate) fn problems(&self) -> usize {
        self.engine.errors()
            + match &self.tsdb {
                Ok(r) => r.problems.len(),
                Err(_) => 1,
            }
    }

    fn repairable(&self) -> usize {
        self.engine.repairable() + self.tsdb.as_ref().map_or(0, FsckReport::repairable)
    }

    fn lines(&self) -> Vec<Line> {
        let mut lines = Vec::new();
        for f in &self.engine.findings {
            let mut at = Vec::new();
            if let Some(o) = f.offset {
                at.push(format!("@{o}"));
            }
            if let Some(r) = &f.row {
                at.push(format!("row {}", hex(r)));
            }
            lines.push(Line {
                error: f.severity == Severity::Error,
                place: f.file.clone(),
                at: at.join(" "),
                detail: f.detail.clone(),
                remedy: (f.remedy != strata_engine::Remedy::None)
                    .then(|| f.remedy.describe().to_owned()),
            });
        }
        match &self.tsdb {
            Ok(r) => {
                for p in &r.problems {
                    let mut at = format!("row {}", hex(&p.row));
                    match p.column.as_deref() {
                        Some([]) => at.push_str(" column (empty)"),
                        Some(c) => at.push_str(&format!(" column {}", hex(c))),
                        None => {}
                    }
                    lines.push(Line {
                        error: true,
                        place: format!("table {}", p.table),
                        at,
                        detail: p.detail.clone(),
                        remedy: (p.remedy != FsckRemedy::None).then(|| p.remedy.describe()),
                    });
                }
            }
            Err(e) => lines.push(Line {
                error: true,
                place: "tables".into(),
                at: String::new(),
                detail: e.clone(),
                remedy: None,
            }),
        }
        // Errors first, each kind in the order found.
        lines.sort_by_key(|l| !l.error);
        lines
    }

    /// Prints the counts, then at most `max` problems (0: all), errors first.
    pub(crate) fn print(&self, out: &mut impl Write, max: usize) -> std::io::Result<()> {
        let c = &self.engine.counts;
        writeln!(
            out,
            "engine: {} SST files ({} bytes, {} blocks, {} entries), {} WAL segments ({} records)",
            c.sst_files, c.sst_bytes, c.blocks, c.entries, c.wal_segments, c.wal_records
        )?;
        if let Ok(r) = &self.tsdb {
            let c = &r.counts;
            writeln!(
                out,
                "tables: {} data rows ({} cells, {} points), {} series indexed ({} with data), \
                 {} UIDs, {} dirty-row markers",
                c.rows, c.cells, c.points, c.series, c.data_series, c.uids, c.markers
            )?;
        }
        let lines = self.lines();
        let warnings = lines.iter().filter(|l| !l.error).count();
        let shown = if max == 0 {
            lines.len()
        } else {
            max.min(lines.len())
        };
        for l in &lines[..shown] {
            let kind = if l.error { "error  " } else { "warning" };
            write!(out, "{kind} {}", l.place)?;
            if !l.at.is_empty() {
                write!(out, " {}", l.at)?;
            }
            write!(out, ": {}", l.detail)?;
            match &l.remedy {
                Some(r) => writeln!(out, " [--fix: {r}]")?,
                None => writeln!(out)?,
            }
        }
        if shown < lines.len() {
            writeln!(
                out,
                "... and {} more (--max-problems 0 prints all)",
                lines.len() - shown
            )?;
        }
        match self.problems() {
            0 if warnings == 0 => writeln!(out, "clean"),
            0 => writeln!(out, "clean (warnings: {warnings})"),
            n => writeln!(
                out,
                "problems: {n} ({} repairable), warnings: {warnings}",
                self.repairable()
            ),
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The engine options for the checks and repairs: the storage flags', fsyncing every write
/// of a repair.
fn db_options(config: &Config) -> anyhow::Result<DbOptions> {
    let mut opts = DbOptions {
        sync: strata_engine::SyncPolicy::Always,
        ..DbOptions::default()
    };
    opts.memtable_bytes = usize::try_from(config.memtable_mb << 20)?;
    opts.block_cache_bytes = usize::try_from(config.cache_mb << 20)?;
    Ok(opts)
}

/// Runs `strata fsck`; returns the exit status.
pub(crate) fn run(args: &FsckArgs) -> i32 {
    match run_checked(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("strata fsck: {e:#}");
            EXIT_FAILED
        }
    }
}

fn run_checked(args: &FsckArgs) -> anyhow::Result<i32> {
    let config = Config::resolve_storage(&args.storage)?;
    let store_args = args.store.store_args();
    if let Some(store) = StoreConfig::resolve(&store_args, &|k| std::env::var(k).ok())? {
        return check_bucket(args, store, &db_options(&config)?);
    }
    let dir = &config.data_dir;
    anyhow::ensure!(dir.is_dir(), "no data directory at {}", dir.display());
    let _lock = DirLock::acquire(dir)?;
    let opts = db_options(&config)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(out, "strata fsck {}", dir.display())?;
    let check = Check::run(dir, &opts)?;
    check.print(&mut out, args.max_problems)?;
    let problems = check.problems();
    if problems == 0 {
        return Ok(EXIT_CLEAN);
    }
    if !args.fix {
        writeln!(
            out,
            "run `strata fsck --fix` to repair what can be repaired"
        )?;
        return Ok(EXIT_PROBLEMS);
    }
    let repairable = check.repairable();
    if repairable == 0 {
        writeln!(
            out,
            "nothing can be repaired without guessing; nothing changed"
        )?;
        return Ok(EXIT_PROBLEMS);
    }
    out.flush()?;
    if !args.yes && !confirm(repairable)? {
        writeln!(out, "nothing changed")?;
        return Ok(EXIT_PROBLEMS);
    }
    let lost = lost_found_dir(dir)?;
    let started = now_secs();
    let done = repair(dir, &check, &lost, &opts)?;
    let after = Check::run(dir, &opts)?;
    write_report(&lost, dir, started, &done, &after)?;
    writeln!(
        out,
        "repairs made: {}; what they moved or deleted is in {}",
        done.len(),
        lost.display()
    )?;
    writeln!(out, "after the repair:")?;
    after.print(&mut out, args.max_problems)?;
    Ok(if after.problems() == 0 {
        EXIT_REPAIRED
    } else {
        EXIT_PROBLEMS
    })
}

/// `strata fsck --store`: checks the bucket, reading it as a replica does; see the module doc.
/// On a prefix of partitioned writers (it holds salt bucket claims), each writer's tree is
/// checked in turn.
fn check_bucket(args: &FsckArgs, mut store: StoreConfig, opts: &DbOptions) -> anyhow::Result<i32> {
    anyhow::ensure!(
        !args.fix,
        "--fix repairs data directories only, not a bucket ({}): run fsck without --fix to see \
         its problems; objects no manifest version names are deleted by the next writer's open",
        store.location
    );
    // Only reads: the start-up probe lists the prefix and writes nothing.
    store.read_only = true;
    let bucket = crate::open_bucket(&store)?;
    let prefix = store.location.prefix();
    let owners = crate::block_on(strata_server::store::partition::salt_owners(
        &*bucket, prefix,
    ))??;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(out, "strata fsck {}", store.location)?;
    let partitioned = owners.is_some();
    let trees: Vec<String> = match owners {
        None => vec![prefix.to_owned()],
        Some((count, owners)) => {
            let mut trees: Vec<String> = owners.iter().flatten().cloned().collect();
            trees.sort();
            trees.dedup();
            let unclaimed = owners.iter().filter(|o| o.is_none()).count();
            writeln!(
                out,
                "partitioned writers: {} trees over {count} salt buckets ({unclaimed} unclaimed)",
                trees.len()
            )?;
            let under = |t: &String| match prefix.trim_matches('/') {
                "" => t.clone(),
                p => format!("{p}/{t}"),
            };
            trees.iter().map(under).collect()
        }
    };
    let mut problems = 0;
    for tree in &trees {
        if partitioned {
            writeln!(out, "tree {tree}:")?;
        }
        let check = check_tree(&bucket, tree, opts)?;
        check.print(&mut out, args.max_problems)?;
        problems += check.problems();
    }
    Ok(if problems == 0 {
        EXIT_CLEAN
    } else {
        EXIT_PROBLEMS
    })
}

/// Checks the database under `prefix` of `bucket`: its objects, then its tables.
fn check_tree(
    bucket: &std::sync::Arc<dyn strata_engine::object_store::ObjectStore>,
    prefix: &str,
    opts: &DbOptions,
) -> anyhow::Result<Check> {
    let scratch = Scratch::new()?;
    let storage = |cache: &str| {
        strata_engine::ObjectStorage::new(
            bucket.clone(),
            prefix,
            scratch.0.join(cache),
            BUCKET_CHECK_CACHE_BYTES,
        )
    };
    let engine = strata_engine::verify_object_store(&storage("cache"), &scratch.0.join("engine"))?;
    let tsdb = if engine.manifest_readable() {
        let opts = DbOptions {
            storage: strata_engine::Storage::Object(storage("db-cache")),
            ..opts.clone()
        };
        match Db::open_read_only(scratch.0.join("db"), opts) {
            Ok(db) => strata_tsdb::fsck(&db).map_err(|e| e.to_string()),
            Err(e) => Err(format!("the time-series tables cannot be checked: {e}")),
        }
    } else {
        Err(
            "the time-series tables cannot be checked: the newest manifest version does not read"
                .into(),
        )
    };
    Ok(Check { engine, tsdb })
}

/// The bound of the disk cache of the SST objects a bucket check reads: files past half of
/// it are read by ranges, uncached.
const BUCKET_CHECK_CACHE_BYTES: u64 = 1 << 30;

/// A temporary directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> anyhow::Result<Scratch> {
        let path =
            std::env::temp_dir().join(format!("strata-fsck-{}-{}", std::process::id(), now_secs()));
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Scratch(path))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Asks on the terminal whether to repair; refuses when stdin is not a terminal.
fn confirm(repairable: usize) -> anyhow::Result<bool> {
    let stdin = std::io::stdin();
    anyhow::ensure!(
        stdin.is_terminal(),
        "--fix needs a terminal to ask for confirmation on; pass --yes to repair without asking"
    );
    eprint!("{repairable} problems; move them to lost+found? [y/N] ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    stdin.lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A new `lost+found/fsck-<UTC time>` folder for this repair.
fn lost_found_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    let stamp: String = super::scan::iso8601(now_secs())
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect();
    let base = dir.join(LOST_FOUND);
    for n in 0..1000 {
        let name = match n {
            0 => format!("fsck-{stamp}"),
            n => format!("fsck-{stamp}-{n}"),
        };
        let path = base.join(name);
        if !path.exists() {
            std::fs::create_dir_all(&path)
                .with_context(|| format!("creating {}", path.display()))?;
            return Ok(path);
        }
    }
    anyhow::bail!("no free folder name in {}", base.display())
}

/// One line of the report file.
type Done = (String, String, String);

/// Repairs the engine's files, then the time-series tables; returns `(what, action, why)`
/// for each change.
fn repair(dir: &Path, check: &Check, lost: &Path, opts: &DbOptions) -> anyhow::Result<Vec<Done>> {
    let mut done: Vec<Done> = Vec::new();
    for r in strata_engine::repair(&check.engine, lost)? {
        done.push((r.file, r.action, r.reason));
    }
    if !check.engine.manifest_readable() {
        return Ok(done);
    }
    let db = Db::open(dir, opts.clone()).context("opening the repaired database")?;
    for _ in 0..TSDB_ROUNDS {
        let report = strata_tsdb::fsck(&db)?;
        if report.repairable() == 0 {
            break;
        }
        for r in strata_tsdb::fsck_repair(&db, &report, lost)? {
            let what = if r.row.is_empty() {
                format!("table {}", r.table)
            } else {
                format!("table {} row {}", r.table, hex(&r.row))
            };
            done.push((what, r.action, r.reason));
        }
    }
    db.close()?;
    Ok(done)
}

/// Writes `REPORT.txt` in `lost`: when, what was done and why, and what is left.
fn write_report(
    lost: &Path,
    dir: &Path,
    started: i64,
    done: &[Done],
    after: &Check,
) -> anyhow::Result<()> {
    let mut text = Vec::new();
    writeln!(
        text,
        "strata fsck --fix of {} at {}",
        dir.display(),
        super::scan::iso8601(started)
    )?;
    writeln!(
        text,
        "Files moved here keep their names; cells deleted or rewritten in the tables are in {} \
         (table row column value, hex).",
        strata_tsdb::SAVED_CELLS
    )?;
    writeln!(text)?;
    for (what, action, why) in done {
        writeln!(text, "{what}: {action}")?;
        if !why.is_empty() {
            writeln!(text, "    why: {why}")?;
        }
    }
    writeln!(text)?;
    writeln!(text, "after the repair:")?;
    after.print(&mut text, 0)?;
    let path = lost.join("REPORT.txt");
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}
