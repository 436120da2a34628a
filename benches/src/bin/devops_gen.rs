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
//! `--interval` seconds for `--hours` hours from 2026-01-01T00:00:00Z, a one-decimal random walk
//! in 0..100 drawn from `--seed`. Series `i` goes to file `<out>.<i mod split>`, so each file
//! holds whole series in time order, as one collector connection sends them. It prints the
//! number of lines written.

use std::fs::File;
use std::io::{BufWriter, Write};

use anyhow::{Context, bail};
use rand::{Rng, SeedableRng, rngs::StdRng};

/// The 20 metric names of the devops workload.
const METRICS: [&str; 20] = [
    "cpu.user",
    "cpu.system",
    "cpu.idle",
    "cpu.iowait",
    "cpu.steal",
    "mem.used",
    "mem.free",
    "mem.cached",
    "mem.buffered",
    "disk.read_bytes",
    "disk.write_bytes",
    "disk.io_time",
    "net.bytes_recv",
    "net.bytes_sent",
    "net.err_in",
    "net.err_out",
    "load.1m",
    "load.5m",
    "proc.running",
    "proc.total",
];
/// First timestamp (2026-01-01T00:00:00Z), in seconds.
const START: i64 = 1_767_225_600;

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
    let mut values: Vec<f64> = (0..series).map(|_| rng.gen_range(0.0..100.0)).collect();
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
            *v = (*v + rng.gen_range(-1.0..1.0)).clamp(0.0, 100.0);
            let f = &mut files[i % split];
            write!(f, "put {} {ts} {v:.1}{tail}", METRICS[i % METRICS.len()])?;
            lines += 1;
        }
    }
    for mut f in files {
        f.flush()?;
    }
    println!("lines={lines}");
    Ok(())
}
