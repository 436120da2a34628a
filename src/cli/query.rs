//! `strata query`: OpenTSDB's command-line query, offline.
//!
//! ```text
//! strata query START [END] AGG [rate] [counter[,max[,reset]]] [downsample SPEC] METRIC [tagk=tagv …] [AGG … more queries]
//! ```
//!
//! as OpenTSDB's `tsdb query` (its `downsample N FUNC` form, N in seconds, is taken too). Each
//! point prints as `metric timestamp_ms value {tagk=tagv, …}`, as OpenTSDB's tool does; with
//! `--format json` the output is `/api/query`'s JSON. The arguments become the `m=` parameters
//! of a `/api/query` GET, so the semantics are the HTTP API's.

use std::io::Write;

use anyhow::{Context, bail};
use strata_server::{Config, StorageArgs};
use strata_tsdb::Value;

/// `strata query` flags.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct QueryArgs {
    #[command(flatten)]
    pub(crate) storage: StorageArgs,
    /// Output: `text` (one point per line) or `json` (as `/api/query`).
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub(crate) format: String,
    /// START [END] AGG [rate] [counter[,max[,reset]]] [downsample SPEC] METRIC [tagk=tagv …] …
    #[arg(required = true, num_args = 1..)]
    pub(crate) args: Vec<String>,
}

/// Turns the command-line words into a `/api/query` GET query string.
pub(crate) fn query_string(words: &[String]) -> anyhow::Result<String> {
    let is_agg = |w: &str| strata_query::aggregator_names().any(|a| a == w);
    let mut it = words.iter().map(String::as_str).peekable();
    let start = it.next().context("missing the start time")?;
    let mut params = vec![format!("start={}", encode(start))];
    if let Some(end) = it.next_if(|w| !is_agg(w)) {
        params.push(format!("end={}", encode(end)));
    }
    while let Some(agg) = it.next() {
        if !is_agg(agg) {
            bail!("expected an aggregator, got {agg:?}");
        }
        let mut m = agg.to_string();
        if it.next_if_eq(&"rate").is_some() {
            m.push_str(":rate");
            if let Some(opts) = it.next_if(|w| w.starts_with("counter")) {
                m.push_str(&format!("{{{opts}}}"));
            }
        }
        if it.next_if_eq(&"downsample").is_some() {
            let spec = it
                .next()
                .context("downsample needs a spec such as 1m-avg")?;
            if spec.contains('-') {
                m.push_str(&format!(":{spec}"));
            } else {
                let func = it.next().context("downsample N needs a function")?;
                m.push_str(&format!(":{spec}s-{func}"));
            }
        }
        let metric = it.next().context("missing the metric")?;
        let mut tags = Vec::new();
        while let Some(tag) = it.next_if(|w| w.contains('=')) {
            tags.push(tag);
        }
        m.push(':');
        m.push_str(metric);
        if !tags.is_empty() {
            m.push_str(&format!("{{{}}}", tags.join(",")));
        }
        params.push(format!("m={}", encode(&m)));
    }
    if !params.iter().any(|p| p.starts_with("m=")) {
        bail!("no query: give an aggregator and a metric, e.g. `1h-ago sum sys.cpu.user`");
    }
    Ok(params.join("&"))
}

/// Escapes what a query string would read as a separator or an escape.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '%' | '&' | '+' | '#' | ' ' => out.push_str(&format!("%{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Runs `strata query`.
pub(crate) fn run(args: &QueryArgs) -> anyhow::Result<()> {
    let qs = query_string(&args.args)?;
    let q = strata_query::parse_get(&strata_query::parse_query_string(&qs))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let config = Config::resolve_storage(&args.storage)?;
    let (_lock, tsdb) = super::open::open_existing(&config)?;
    let limits = strata_query::QueryLimits {
        timeout: None,
        ..strata_query::QueryLimits::default()
    };
    let groups = strata_query::execute_with_limits(&tsdb, &q, strata_server::now_ms(), &limits)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if args.format == "json" {
        out.write_all(&strata_query::render(&q, &groups))?;
        writeln!(out)?;
    } else {
        for g in &groups {
            let tags: Vec<String> = g.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let tags = format!("{{{}}}", tags.join(", "));
            for (ts, v) in &g.points {
                match v {
                    Value::Int(i) => writeln!(out, "{} {ts} {i} {tags}", g.metric)?,
                    Value::Float(f) => writeln!(out, "{} {ts} {f:?} {tags}", g.metric)?,
                }
            }
        }
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qs(words: &str) -> anyhow::Result<String> {
        query_string(&words.split(' ').map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn opentsdb_cli_words_become_a_get_query() -> anyhow::Result<()> {
        assert_eq!(
            qs("1h-ago sum sys.cpu.user host=web01")?,
            "start=1h-ago&m=sum:sys.cpu.user{host=web01}"
        );
        assert_eq!(
            qs("1356998400 1357000000 max rate counter,100 downsample 1m-avg m a=1 b=2")?,
            "start=1356998400&end=1357000000&m=max:rate{counter,100}:1m-avg:m{a=1,b=2}"
        );
        assert_eq!(
            qs("2h-ago sum downsample 60 max x avg y")?,
            "start=2h-ago&m=sum:60s-max:x&m=avg:y"
        );
        assert_eq!(qs("1h-ago sum m k=a&b")?, "start=1h-ago&m=sum:m{k=a%26b}");
        assert!(qs("1h-ago").is_err());
        assert!(qs("1h-ago 2h-ago nosuchagg m").is_err());
        Ok(())
    }
}
