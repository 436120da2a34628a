//! The end-to-end load tool: sends an OpenTSDB telnet workload to a running server over N
//! connections, waits until every point is queryable through `/api/query`, and prints the
//! ingest rate, the server's CPU seconds per million points and its peak RSS.
//!
//! ```text
//! cargo run -p strata-benches --release --bin load -- \
//!     --addr 127.0.0.1:4242 --pid <server pid> --hosts 200 --hours 24 --connections 4
//! cargo run -p strata-benches --release --bin load -- --file devops.telnet --pid <pid>
//! ```
//!
//! Without `--file`, it generates the devops shape of the peer benchmark (`benches/peers/`) in memory: `--hosts` hosts ×
//! 20 metrics with 6 tags each, one point per 10 s, for `--hours` hours, seeded by `--seed`.
//! Each connection sends a contiguous share of the lines.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rand::{Rng, SeedableRng, rngs::StdRng};
use strata_benches::devops::{METRICS, START, STEP};

#[derive(Debug)]
struct Args {
    addr: String,
    file: Option<String>,
    pid: Option<u32>,
    hosts: usize,
    hours: i64,
    connections: usize,
    seed: u64,
    timeout_s: u64,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut a = Args {
        addr: "127.0.0.1:4242".into(),
        file: None,
        pid: None,
        hosts: 200,
        hours: 1,
        connections: 4,
        seed: 42,
        timeout_s: 600,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--addr" => a.addr = val()?,
            "--file" => a.file = Some(val()?),
            "--pid" => a.pid = Some(val()?.parse()?),
            "--hosts" => a.hosts = val()?.parse()?,
            "--hours" => a.hours = val()?.parse()?,
            "--connections" => a.connections = val()?.parse::<usize>()?.max(1),
            "--seed" => a.seed = val()?.parse()?,
            "--timeout" => a.timeout_s = val()?.parse()?,
            "-h" | "--help" => {
                println!("see the module docs at the top of benches/src/bin/load.rs");
                std::process::exit(0);
            }
            other => bail!("unknown flag {other}"),
        }
    }
    Ok(a)
}

/// The devops workload as telnet lines, time-ordered.
fn generate(hosts: usize, hours: i64, seed: u64) -> Vec<u8> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut values: Vec<f64> = (0..hosts * METRICS.len())
        .map(|_| rng.gen_range(0.0..100.0))
        .collect();
    let mut out = Vec::with_capacity(hosts * METRICS.len() * (hours as usize) * 360 * 110);
    for step in 0..hours * 3600 / STEP {
        let ts = START + step * STEP;
        for h in 0..hosts {
            for (m, metric) in METRICS.iter().enumerate() {
                let v = &mut values[h * METRICS.len() + m];
                *v = (*v + rng.gen_range(-1.0..1.0)).clamp(0.0, 100.0);
                let _ = writeln!(
                    out,
                    "put {metric} {ts} {:.1} host=host-{h:04} dc=dc-{} rack=r-{} os=linux arch=x86_64 team=t-{}",
                    v,
                    h % 4,
                    h % 50,
                    h % 10
                );
            }
        }
    }
    out
}

/// Splits `data` into `n` pieces by series (metric and tags), keeping each piece's lines in
/// order, as the peer benchmark's split files are: every series is sent by one connection, so
/// each connection's points of a series arrive in time order.
fn split_lines(data: &[u8], n: usize) -> Vec<Vec<u8>> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let n = n.max(1);
    let mut parts = vec![Vec::with_capacity(data.len() / n + 1); n];
    for line in data.split_inclusive(|&b| b == b'\n') {
        // `put metric ts value tags…`: the series is the metric and the tags.
        let mut words = line.split(|&b| b == b' ');
        let mut h = DefaultHasher::new();
        words.next();
        words.next().hash(&mut h);
        words.next();
        words.next();
        for w in words {
            w.hash(&mut h);
        }
        parts[(h.finish() % n as u64) as usize].extend_from_slice(line);
    }
    parts
}

/// Per metric: how many points, and the first and last timestamp, from the `put` lines.
fn expected_counts(data: &[u8]) -> BTreeMap<String, (u64, i64, i64)> {
    let mut out: BTreeMap<String, (u64, i64, i64)> = BTreeMap::new();
    for line in data.split(|&b| b == b'\n') {
        let mut tok = line.split(|&b| b == b' ').filter(|t| !t.is_empty());
        if tok.next() != Some(b"put") {
            continue;
        }
        let (Some(m), Some(ts)) = (tok.next(), tok.next()) else {
            continue;
        };
        let ts: i64 = std::str::from_utf8(ts)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let e = out
            .entry(String::from_utf8_lossy(m).into_owned())
            .or_insert((0, i64::MAX, i64::MIN));
        e.0 += 1;
        e.1 = e.1.min(ts);
        e.2 = e.2.max(ts);
    }
    out
}

fn http_post(addr: &str, path: &str, body: &str) -> anyhow::Result<String> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)?;
    let (_, body) = resp.split_once("\r\n\r\n").context("bad HTTP response")?;
    Ok(body.to_string())
}

/// Points of `metric` in `[start, end]` that the server can answer for.
fn queryable(addr: &str, metric: &str, start: i64, end: i64) -> anyhow::Result<u64> {
    let q = format!(
        r#"{{"start":{start},"end":{end},"queries":[{{"aggregator":"sum","metric":"{metric}","downsample":"0all-count","tags":{{"host":"*"}}}}]}}"#
    );
    let body = http_post(addr, "/api/query", &q)?;
    // Sum every number that follows `":` inside "dps" objects; the answer is small.
    let mut total = 0.0;
    for group in body.split("\"dps\":{").skip(1) {
        let dps = group.split('}').next().unwrap_or("");
        for kv in dps.split(',') {
            if let Some((_, v)) = kv.split_once(':') {
                total += v.trim().parse::<f64>().unwrap_or(0.0);
            }
        }
    }
    Ok(total as u64)
}

/// (utime + stime seconds, VmHWM bytes) of a process, from /proc.
fn proc_usage(pid: u32) -> Option<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let hwm_kb: u64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    // Linux reports CPU times in clock ticks of 1/100 s on every platform Strata runs on.
    Some((ticks / 100.0, hwm_kb * 1024))
}

fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let data = match &args.file {
        Some(f) => std::fs::read(f).with_context(|| format!("reading {f}"))?,
        None => {
            eprintln!(
                "generating {} hosts × {} metrics × {} h (seed {})",
                args.hosts,
                METRICS.len(),
                args.hours,
                args.seed
            );
            generate(args.hosts, args.hours, args.seed)
        }
    };
    let expected = expected_counts(&data);
    let total: u64 = expected.values().map(|e| e.0).sum();
    eprintln!(
        "{total} points in {} metrics, {} bytes",
        expected.len(),
        data.len()
    );
    let parts = split_lines(&data, args.connections);
    let cpu_before = args.pid.and_then(proc_usage).map_or(0.0, |u| u.0);
    let started = Instant::now();
    std::thread::scope(|s| -> anyhow::Result<()> {
        let handles: Vec<_> = parts
            .into_iter()
            .map(|part| {
                let addr = args.addr.clone();
                s.spawn(move || -> anyhow::Result<()> {
                    let mut conn = TcpStream::connect(&addr)?;
                    for chunk in part.chunks(1 << 20) {
                        conn.write_all(chunk)?;
                    }
                    conn.shutdown(std::net::Shutdown::Write)?;
                    // Drain error replies until the server closes.
                    let mut sink = Vec::new();
                    let _ = conn.read_to_end(&mut sink);
                    if !sink.is_empty() {
                        eprintln!(
                            "server replies: {}",
                            String::from_utf8_lossy(&sink[..sink.len().min(500)])
                        );
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join()
                .map_err(|_| anyhow::anyhow!("sender thread panicked"))??;
        }
        Ok(())
    })?;
    let sent = started.elapsed();
    let deadline = started + Duration::from_secs(args.timeout_s);
    loop {
        let mut seen = 0;
        for (metric, (_, first, last)) in &expected {
            seen += queryable(&args.addr, metric, *first, *last)?;
        }
        if seen >= total {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "only {seen} of {total} points queryable after {} s",
                args.timeout_s
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let elapsed = started.elapsed();
    let rate = total as f64 / elapsed.as_secs_f64();
    println!("points            {total}");
    println!("sent in           {:.2} s", sent.as_secs_f64());
    println!("all queryable in  {:.2} s", elapsed.as_secs_f64());
    println!("ingest rate       {rate:.0} points/s");
    if let Some((cpu, hwm)) = args.pid.and_then(proc_usage) {
        println!(
            "server CPU        {:.2} s per million points",
            (cpu - cpu_before) / (total as f64 / 1e6)
        );
        println!("server peak RSS   {:.1} MiB", hwm as f64 / (1 << 20) as f64);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_lines_split_at_line_boundaries_and_count() {
        let data = generate(3, 1, 1);
        let expected = expected_counts(&data);
        assert_eq!(expected.len(), 20);
        assert_eq!(expected.values().map(|e| e.0).sum::<u64>(), 3 * 20 * 360);
        let parts = split_lines(&data, 4);
        assert_eq!(parts.iter().map(|p| p.len()).sum::<usize>(), data.len());
        for p in &parts {
            assert!(p.is_empty() || p.ends_with(b"\n"));
        }
        // Every series goes to exactly one part.
        let mut owner: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
        for (i, p) in parts.iter().enumerate() {
            for line in p.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                let words: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
                let mut series = words[1].to_vec();
                for w in &words[4..] {
                    series.extend_from_slice(w);
                }
                assert_eq!(*owner.entry(series).or_insert(i), i);
            }
        }
        assert!(
            parts.iter().all(|p| !p.is_empty()),
            "60 series spread over 4 parts"
        );
    }
}
