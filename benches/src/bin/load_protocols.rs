//! Load tool for the collectors' protocols: sends the devops workload as Prometheus remote
//! write requests or Influx line protocol bodies to a running server over N keep-alive
//! connections, and prints points/s and the server's CPU seconds.
//!
//! ```text
//! cargo run -p strata-benches --release --bin load_protocols -- \
//!     --proto remote-write --addr 127.0.0.1:4242 --pid <server pid> --hours 24
//! cargo run -p strata-benches --release --bin load_protocols -- \
//!     --proto influx --addr 127.0.0.1:8428 --path /write --pid <vm pid>
//! ```
//!
//! The workload is the devops shape of the peer benchmark (`benches/peers/`) generated in memory (as `load` does):
//! `--hosts` hosts × 20 metrics with 6 tags, one point per 10 s for `--hours` hours, seeded by
//! `--seed`. Remote write sends Prometheus-style requests: `--batch` samples (default 2000,
//! Prometheus' `max_samples_per_send`), one sample per series, metric names with `_` for `.`.
//! The line protocol sends one line per host, measurement (`cpu`, `mem`, …) and timestamp in
//! nanoseconds, about `--batch` points per body. Hosts are split across connections, so each
//! series arrives in time order. All bodies are encoded before the clock starts.
//!
//! It prints its own CPU time while sending, too. With `--pid`, the server's CPU time is read
//! from `/proc` before the first request and again once its CPU use has settled after the last
//! answer (servers that buffer writes finish them after answering).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use rand::{Rng, SeedableRng, rngs::StdRng};
use strata_benches::devops::{METRICS, START, STEP};
use strata_ingest::{Label, Sample, TimeSeries, WriteRequest, encode_write_request};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proto {
    RemoteWrite,
    Influx,
}

#[derive(Debug)]
struct Args {
    proto: Proto,
    addr: String,
    path: Option<String>,
    pid: Option<u32>,
    hosts: usize,
    hours: i64,
    connections: usize,
    batch: usize,
    seed: u64,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut a = Args {
        proto: Proto::RemoteWrite,
        addr: "127.0.0.1:4242".into(),
        path: None,
        pid: None,
        hosts: 200,
        hours: 1,
        connections: 4,
        batch: 2000,
        seed: 42,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--proto" => {
                a.proto = match val()?.as_str() {
                    "remote-write" | "rw" => Proto::RemoteWrite,
                    "influx" | "line" => Proto::Influx,
                    other => bail!("unknown protocol {other}"),
                }
            }
            "--addr" => a.addr = val()?,
            "--path" => a.path = Some(val()?),
            "--pid" => a.pid = Some(val()?.parse()?),
            "--hosts" => a.hosts = val()?.parse()?,
            "--hours" => a.hours = val()?.parse()?,
            "--connections" => a.connections = val()?.parse::<usize>()?.max(1),
            "--batch" => a.batch = val()?.parse::<usize>()?.max(1),
            "--seed" => a.seed = val()?.parse()?,
            "-h" | "--help" => {
                println!("see the module docs at the top of benches/src/bin/load_protocols.rs");
                std::process::exit(0);
            }
            other => bail!("unknown flag {other}"),
        }
    }
    Ok(a)
}

/// The value of every (host, metric) at every step, in time order, as `f(step, host, values)`.
fn walk(hosts: usize, hours: i64, seed: u64, mut f: impl FnMut(i64, usize, &[f64])) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut values: Vec<f64> = (0..hosts * METRICS.len())
        .map(|_| rng.gen_range(0.0..100.0))
        .collect();
    for step in 0..hours * 3600 / STEP {
        for h in 0..hosts {
            let row = &mut values[h * METRICS.len()..(h + 1) * METRICS.len()];
            for v in row.iter_mut() {
                *v = (*v + rng.gen_range(-1.0..1.0)).clamp(0.0, 100.0);
            }
            let rounded: Vec<f64> = row.iter().map(|v| (v * 10.0).round() / 10.0).collect();
            f(START + step * STEP, h, &rounded);
        }
    }
}

fn host_labels(h: usize) -> [(String, String); 6] {
    [
        ("arch".into(), "x86_64".into()),
        ("dc".into(), format!("dc-{}", h % 4)),
        ("host".into(), format!("host-{h:04}")),
        ("os".into(), "linux".into()),
        ("rack".into(), format!("r-{}", h % 50)),
        ("team".into(), format!("t-{}", h % 10)),
    ]
}

/// Encoded bodies per connection, and the number of points.
fn remote_write_bodies(a: &Args) -> (Vec<Vec<Vec<u8>>>, u64) {
    let names: Vec<Bytes> = METRICS
        .iter()
        .map(|m| Bytes::from(m.replace('.', "_")))
        .collect();
    let labels: Vec<Vec<Label>> = (0..a.hosts)
        .map(|h| {
            host_labels(h)
                .into_iter()
                .map(|(name, value)| Label {
                    name: name.into(),
                    value: value.into(),
                })
                .collect()
        })
        .collect();
    let mut pending: Vec<WriteRequest> = vec![WriteRequest::default(); a.connections];
    let mut out: Vec<Vec<Vec<u8>>> = vec![Vec::new(); a.connections];
    let mut points = 0u64;
    walk(a.hosts, a.hours, a.seed, |ts, h, values| {
        let c = h % a.connections;
        for (m, v) in values.iter().enumerate() {
            let mut ls = vec![Label {
                name: "__name__".into(),
                value: names[m].clone(),
            }];
            ls.extend(labels[h].iter().cloned());
            pending[c].timeseries.push(TimeSeries {
                labels: ls,
                samples: vec![Sample {
                    value: *v,
                    timestamp: ts * 1000,
                }],
            });
            points += 1;
            if pending[c].timeseries.len() >= a.batch {
                out[c].push(encode_write_request(&pending[c]));
                pending[c].timeseries.clear();
            }
        }
    });
    for (c, req) in pending.iter().enumerate() {
        if !req.timeseries.is_empty() {
            out[c].push(encode_write_request(req));
        }
    }
    (out, points)
}

/// Line protocol bodies per connection, and the number of points.
fn influx_bodies(a: &Args) -> (Vec<Vec<Vec<u8>>>, u64) {
    let tags: Vec<String> = (0..a.hosts)
        .map(|h| {
            host_labels(h)
                .iter()
                .map(|(k, v)| format!(",{k}={v}"))
                .collect()
        })
        .collect();
    let mut pending: Vec<(Vec<u8>, usize)> = vec![(Vec::new(), 0); a.connections];
    let mut out: Vec<Vec<Vec<u8>>> = vec![Vec::new(); a.connections];
    let mut points = 0u64;
    walk(a.hosts, a.hours, a.seed, |ts, h, values| {
        let c = h % a.connections;
        let (body, n) = &mut pending[c];
        let mut last_measurement = "";
        for (m, v) in values.iter().enumerate() {
            let (measurement, field) = METRICS[m].split_once('.').unwrap_or((METRICS[m], "value"));
            if measurement != last_measurement {
                if !last_measurement.is_empty() {
                    let _ = writeln!(body, " {}", ts * 1_000_000_000);
                }
                let _ = write!(body, "{measurement}{} {field}={v:.1}", tags[h]);
                last_measurement = measurement;
            } else {
                let _ = write!(body, ",{field}={v:.1}");
            }
            *n += 1;
            points += 1;
        }
        let _ = writeln!(body, " {}", ts * 1_000_000_000);
        if *n >= a.batch {
            out[c].push(std::mem::take(body));
            *n = 0;
        }
    });
    for (c, (body, _)) in pending.into_iter().enumerate() {
        if !body.is_empty() {
            out[c].push(body);
        }
    }
    (out, points)
}

/// Posts every body on one keep-alive connection; fails on any answer but 2xx.
fn send_all(addr: &str, path: &str, headers: &str, bodies: &[Vec<u8>]) -> anyhow::Result<()> {
    let stream = TcpStream::connect(addr)?;
    // As Go's HTTP client (Prometheus, Telegraf) does; with Nagle's algorithm each request
    // would wait for a delayed ACK.
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut request = Vec::new();
    for body in bodies {
        request.clear();
        write!(
            request,
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Length: {}\r\n\r\n",
            body.len()
        )?;
        request.extend_from_slice(body);
        writer.write_all(&request)?;
        let mut status = String::new();
        reader.read_line(&mut status)?;
        let mut len = 0usize;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line)?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse()?;
            }
        }
        let mut answer = vec![0; len];
        reader.read_exact(&mut answer)?;
        if !status.split(' ').nth(1).is_some_and(|s| s.starts_with('2')) {
            bail!(
                "{path}: {} {}",
                status.trim_end(),
                String::from_utf8_lossy(&answer)
            );
        }
    }
    Ok(())
}

/// The process' user + system CPU time in seconds.
fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let after = stat.rsplit_once(')').context("bad stat")?.1;
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>()? + f[12].parse::<f64>()?;
    Ok(ticks / 100.0)
}

/// Waits until the server's CPU use stays below 5 % for a second, at most 60 s.
fn settled_cpu(pid: u32) -> anyhow::Result<f64> {
    let mut last = cpu_seconds(pid)?;
    for _ in 0..60 {
        std::thread::sleep(Duration::from_secs(1));
        let now = cpu_seconds(pid)?;
        if now - last < 0.05 {
            return Ok(now);
        }
        last = now;
    }
    Ok(last)
}

fn main() -> anyhow::Result<()> {
    let a = parse_args()?;
    let started = Instant::now();
    let (bodies, points) = match a.proto {
        Proto::RemoteWrite => remote_write_bodies(&a),
        Proto::Influx => influx_bodies(&a),
    };
    let bytes: usize = bodies.iter().flatten().map(Vec::len).sum();
    let requests: usize = bodies.iter().map(Vec::len).sum();
    eprintln!(
        "encoded {points} points in {requests} bodies ({:.1} MB) in {:.1} s",
        bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    let (path, headers) = match a.proto {
        Proto::RemoteWrite => (
            "/api/v1/write",
            "Content-Encoding: snappy\r\nContent-Type: application/x-protobuf\r\n\
             X-Prometheus-Remote-Write-Version: 0.1.0\r\n",
        ),
        Proto::Influx => ("/write?db=bench&precision=ns", ""),
    };
    let path = a.path.clone().unwrap_or_else(|| path.to_string());
    let cpu_before = a.pid.map(cpu_seconds).transpose()?;
    let own_before = cpu_seconds(std::process::id())?;
    let t0 = Instant::now();
    std::thread::scope(|s| -> anyhow::Result<()> {
        let handles: Vec<_> = bodies
            .iter()
            .map(|b| s.spawn(|| send_all(&a.addr, &path, headers, b)))
            .collect();
        for h in handles {
            h.join()
                .map_err(|_| anyhow::anyhow!("a sender panicked"))??;
        }
        Ok(())
    })?;
    let wall = t0.elapsed().as_secs_f64();
    let own = cpu_seconds(std::process::id())? - own_before;
    println!(
        "{:?} {}{path}: {points} points in {wall:.2} s = {:.0} points/s over {} connections",
        a.proto,
        a.addr,
        points as f64 / wall,
        a.connections
    );
    // On a small machine the client's share of the cores bounds what any server can reach.
    println!(
        "client CPU: {own:.1} s sending = {:.2} CPU-s per million points",
        own / (points as f64 / 1e6)
    );
    if let (Some(pid), Some(before)) = (a.pid, cpu_before) {
        let at_answer = cpu_seconds(pid)? - before;
        let settled = settled_cpu(pid)? - before;
        println!(
            "server CPU: {at_answer:.1} s by the last answer, {settled:.1} s settled = {:.2} \
             CPU-s per million points",
            settled / (points as f64 / 1e6)
        );
    }
    Ok(())
}
