//! `strata export`: the points an OpenTSDB query selects, as a Parquet file (the offline twin of
//! `GET /api/export?format=parquet`).

use std::io::{Read, Write};
use std::path::PathBuf;

use anyhow::Context;

use strata_server::{Config, StorageArgs};

/// `strata export` flags.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ExportArgs {
    #[command(flatten)]
    pub(crate) storage: StorageArgs,
    /// The query in `/api/query` GET form, e.g. `start=1h-ago&m=sum:cpu.user{host=*}`.
    #[arg(long, conflicts_with = "json")]
    pub(crate) query: Option<String>,
    /// A file holding the query in `/api/query` POST JSON form (`-` reads stdin).
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Where to write the Parquet file (`-` writes stdout).
    #[arg(long, short)]
    pub(crate) out: PathBuf,
}

/// Runs `strata export`.
pub(crate) fn run(args: &ExportArgs) -> anyhow::Result<()> {
    let (method, query, body) = match (&args.query, &args.json) {
        (Some(q), None) => (strata_query::QueryMethod::Get, q.clone(), Vec::new()),
        (None, Some(path)) => {
            let mut body = Vec::new();
            if path.as_os_str() == "-" {
                std::io::stdin().read_to_end(&mut body)?;
            } else {
                body = std::fs::read(path)
                    .with_context(|| format!("reading the query from {}", path.display()))?;
            }
            (strata_query::QueryMethod::Post, String::new(), body)
        }
        _ => anyhow::bail!("give the query with --query 'start=…&m=…' or --json FILE"),
    };
    let config = Config::resolve_storage(&args.storage)?;
    let (_lock, tsdb) = super::open::open_existing(&config)?;
    let limits = strata_query::QueryLimits {
        timeout: None,
        ..strata_query::QueryLimits::default()
    };
    let now_ms = strata_server::now_ms();
    let mut out = Vec::new();
    let spinner = super::progress::Bar::spinner("querying");
    let results = strata_query::parse_request(method, &query, &body)
        .and_then(|q| strata_query::execute_with_limits(&tsdb, &q, now_ms, &limits))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    spinner.finish();
    let bar = super::progress::Bar::points("writing");
    let total = results.iter().map(|r| r.points.len() as u64).sum();
    let summary = strata_query::write_parquet_with_progress(&results, &mut out, &mut |done| {
        bar.update(done, total)
    })
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    bar.finish();
    if args.out.as_os_str() == "-" {
        std::io::stdout().write_all(&out)?;
    } else {
        std::fs::write(&args.out, &out)
            .with_context(|| format!("writing {}", args.out.display()))?;
    }
    eprintln!(
        "exported {} points of {} series to {}",
        summary.rows,
        summary.series,
        args.out.display()
    );
    Ok(())
}
