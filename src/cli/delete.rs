//! `strata delete METRIC [tagk=tagv …]`: deletes whole series offline, from the data, the
//! series index and suggest (`Tsdb::purge_series`). With no tags every series of the metric
//! goes, and with it the metric's name; with tags, the series whose tags match them all (tag
//! values may be `a|b` alternatives or `*` globs, as in a query).

use anyhow::{Context, bail};
use strata_server::{Config, StorageArgs};
use strata_tsdb::{Filter, FilterKind};

/// `strata delete` flags.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct DeleteArgs {
    #[command(flatten)]
    pub(crate) storage: StorageArgs,
    /// The metric.
    pub(crate) metric: String,
    /// `tagk=tagv` filters; a series is deleted when it matches every one.
    pub(crate) tags: Vec<String>,
}

/// Runs `strata delete`.
pub(crate) fn run(args: &DeleteArgs) -> anyhow::Result<()> {
    let mut filters = Vec::new();
    for t in &args.tags {
        let Some((k, v)) = t.split_once('=') else {
            bail!("a tag filter is tagk=tagv, not {t:?}");
        };
        let kind = if v.contains('*') {
            FilterKind::Wildcard
        } else {
            FilterKind::LiteralOr
        };
        filters.push(Filter::new(kind, k, v, true).with_context(|| format!("filter {t}"))?);
    }
    let config = Config::resolve_storage(&args.storage)?;
    let (_lock, tsdb) = super::open::open_existing(&config)?;
    let ids = tsdb
        .find_series(&args.metric, &filters)
        .with_context(|| format!("finding the series of {}", args.metric))?;
    let report = tsdb.purge_series(&ids)?;
    tsdb.sync()?;
    println!(
        "deleted {} series of {} ({} points)",
        report.series, args.metric, report.points
    );
    for (kind, name) in &report.uids {
        println!("deleted unused {} {name}", kind.as_str());
    }
    Ok(())
}
