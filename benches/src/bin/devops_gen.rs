//! Writes the devops workload as OpenTSDB telnet `put` lines, split into one file per
//! connection, for the peer benchmark (`benches/peers/`).
//!
//! ```text
//! cargo run -p strata-benches --release --bin devops_gen -- \
//!     --hosts 200 --hours 24 --interval 10 --seed 42 --split 4 --out /tmp/devops
//! ```
//!
//! Each host has 20 metrics with 6 tags (`host`, `dc` of 4, `rack` of 50, `os`, `arch`,
//! `team` of 10), so there are 20 × `--hosts` series; every series has a point each
//! `--interval` seconds for `--hours` hours from 2026-01-01T00:00:00Z, drawn from `--seed`. The
//! values are shaped as a host agent reports them: percentages and load averages with two
//! decimals and memory with one, as bounded random walks; byte, time and error counts as
//! monotonic integer counters (errors rarely move); process counts as integer gauges. Series `i` goes to file `<out>.<i mod split>`, so each file
//! holds whole series in time order, as one collector connection sends them. It prints the
//! number of lines written.

use std::fs::File;
use std::io::{BufWriter, Write};

use anyhow::{Context, bail};
use rand::{Rng, SeedableRng, rngs::StdRng};
use strata_benches::devops::{METRICS, START};

/// How a metric's values move.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// A random walk within `lo..=hi` by at most `step` a point, written with `decimals`.
    Gauge {
        lo: f64,
        hi: f64,
        step: f64,
        decimals: usize,
    },
    /// A counter that grows by up to `max_inc` a point, moving on a point with probability `p`.
    Counter { max_inc: u64, p: f64 },
    /// An integer walk within `lo..=hi` by at most `step`.
    Count { lo: i64, hi: i64, step: i64 },
}

/// The kind of each of [`METRICS`], in order.
const KINDS: [Kind; 20] = {
    const PCT: Kind = Kind::Gauge {
        lo: 0.0,
        hi: 100.0,
        step: 2.0,
        decimals: 2,
    };
    const MEM: Kind = Kind::Gauge {
        lo: 0.0,
        hi: 65_536.0,
        step: 64.0,
        decimals: 1,
    };
    const BYTES: Kind = Kind::Counter {
        max_inc: 1 << 20,
        p: 1.0,
    };
    const ERRORS: Kind = Kind::Counter {
        max_inc: 3,
        p: 0.01,
    };
    const LOAD: Kind = Kind::Gauge {
        lo: 0.0,
        hi: 16.0,
        step: 0.25,
        decimals: 2,
    };
    [
        PCT,
        PCT,
        PCT,
        PCT,
        PCT,
        MEM,
        MEM,
        MEM,
        MEM,
        BYTES,
        BYTES,
        Kind::Counter {
            max_inc: 10_000,
            p: 1.0,
        },
        BYTES,
        BYTES,
        ERRORS,
        ERRORS,
        LOAD,
        LOAD,
        Kind::Count {
            lo: 0,
            hi: 32,
            step: 1,
        },
        Kind::Count {
            lo: 100,
            hi: 600,
            step: 3,
        },
    ]
};

fn main() -> anyhow::Result<()> {
    let (mut hosts, mut hours, mut interval, mut seed, mut split) =
        (200usize, 24i64, 10i64, 42u64, 4usize);
    let mut out: Option<String> = None;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--hosts" => hosts = val()?.parse()?,
            "--hours" => hours = val()?.parse()?,
            "--interval" => interval = val()?.parse()?,
            "--seed" => seed = val()?.parse()?,
            "--split" => split = val()?.parse()?,
            "--out" => out = Some(val()?),
            other => bail!("unknown flag {other}"),
        }
    }
    let out = out.context("--out is required")?;
    if hosts == 0 || hours <= 0 || interval <= 0 || split == 0 {
        bail!("--hosts, --hours, --interval and --split must be above 0");
    }
    let mut files = (0..split)
        .map(|i| {
            let path = format!("{out}.{i}");
            let f = File::create(&path).with_context(|| format!("creating {path}"))?;
            Ok(BufWriter::with_capacity(1 << 20, f))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut rng = StdRng::seed_from_u64(seed);
    let series = hosts * METRICS.len();
    // Each series' current value: a float for gauges, an integer (kept in an f64, exact below
    // 2^53) for counters and counts.
    let mut values: Vec<f64> = (0..series)
        .map(|i| match KINDS[i % METRICS.len()] {
            Kind::Gauge { lo, hi, .. } => rng.gen_range(lo..=hi),
            Kind::Counter { max_inc, .. } => rng.gen_range(0..max_inc << 20) as f64,
            Kind::Count { lo, hi, .. } => rng.gen_range(lo..=hi) as f64,
        })
        .collect();
    // Each series' text after the timestamp and value, made once.
    let tails: Vec<String> = (0..hosts)
        .flat_map(|h| {
            METRICS.iter().map(move |_| {
                format!(
                    " host=host-{h:04} dc=dc-{} rack=r-{} os=linux arch=x86_64 team=t-{}\n",
                    h % 4,
                    h % 50,
                    h % 10
                )
            })
        })
        .collect();
    let mut lines: u64 = 0;
    for step in 0..hours * 3600 / interval {
        let ts = START + step * interval;
        for (i, (v, tail)) in values.iter_mut().zip(&tails).enumerate() {
            let m = i % METRICS.len();
            let f = &mut files[i % split];
            write!(f, "put {} {ts} ", METRICS[m])?;
            match KINDS[m] {
                Kind::Gauge {
                    lo,
                    hi,
                    step,
                    decimals,
                } => {
                    *v = (*v + rng.gen_range(-step..=step)).clamp(lo, hi);
                    write!(f, "{v:.decimals$}")?;
                }
                Kind::Counter { max_inc, p } => {
                    if rng.gen_bool(p) {
                        *v += rng.gen_range(0..=max_inc) as f64;
                    }
                    write!(f, "{}", *v as u64)?;
                }
                Kind::Count { lo, hi, step } => {
                    *v = (*v as i64 + rng.gen_range(-step..=step)).clamp(lo, hi) as f64;
                    write!(f, "{}", *v as i64)?;
                }
            }
            f.write_all(tail.as_bytes())?;
            lines += 1;
        }
    }
    for mut f in files {
        f.flush()?;
    }
    println!("lines={lines}");
    Ok(())
}
