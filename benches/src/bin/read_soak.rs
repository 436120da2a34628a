//! The read-fairness soak: full-speed telnet ingest with Grafana-style readers at the same time.
//!
//! ```text
//! cargo build --release
//! cargo run -p strata-benches --release --bin read_soak -- --strata target/release/strata
//! ```
//!
//! It starts `strata serve` on a fresh data directory on 127.0.0.1 and writes the devops shape
//! (`--hosts` hosts × 20 metrics, 10 s apart, every series moving forward together) over
//! `--connections` telnet connections as fast as the server takes it. After `--warmup` seconds of
//! ingest alone, `--readers` threads each loop over the three kinds of request a Grafana
//! dashboard sends: a panel (`1m-avg` of one metric over every host, for the last written hour),
//! a metric `suggest`, and a `lookup` of one metric, pausing `--pause-ms` between requests.
//!
//! The readers run in windows of `--window` seconds that alternate with windows of ingest
//! alone, for `--seconds` seconds of each. The unloaded and the loaded ingest rates are the sums
//! over their windows, so other work on a shared machine weighs on both alike. At the end the
//! readers run once more on the idle server, for the latency the machine allows without ingest.
//!
//! Every answer is checked: a panel has one series per host, a suggest lists the metric, a
//! lookup finds the host's series. It prints both ingest rates, their ratio, and p50/p99/max
//! latency per request kind. The goal it measures is a panel p99 of at most 2 s with loaded
//! ingest at 0.8× the unloaded rate or better.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use strata_benches::devops::{METRICS, START};

/// Seconds between the points of a series.
const STEP: i64 = 10;

#[derive(Debug)]
struct Args {
    strata: String,
    hosts: usize,
    connections: usize,
    readers: usize,
    warmup_s: u64,
    seconds: u64,
    window_s: u64,
    pause_ms: u64,
    port: u16,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut a = Args {
        strata: "target/release/strata".into(),
        hosts: 500,
        connections: 4,
        readers: 4,
        warmup_s: 20,
        seconds: 60,
        window_s: 5,
        pause_ms: 200,
        port: 14_242,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--strata" => a.strata = value()?,
            "--hosts" => a.hosts = value()?.parse()?,
            "--connections" => a.connections = value()?.parse()?,
            "--readers" => a.readers = value()?.parse()?,
            "--warmup" => a.warmup_s = value()?.parse()?,
            "--seconds" => a.seconds = value()?.parse()?,
            "--window" => a.window_s = value()?.parse()?,
            "--pause-ms" => a.pause_ms = value()?.parse()?,
            "--port" => a.port = value()?.parse()?,
            other => bail!("unknown flag {other}"),
        }
    }
    if a.window_s == 0 {
        bail!("--window must be at least 1");
    }
    if a.hosts == 0 || a.connections == 0 || a.hosts < a.connections {
        bail!("--hosts must be at least --connections, and both above 0");
    }
    Ok(a)
}

/// A server process that is killed when dropped.
struct Server {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server(args: &Args) -> anyhow::Result<Server> {
    let dir = tempfile::tempdir()?;
    let child = Command::new(&args.strata)
        .args(["serve", "--bind", "127.0.0.1", "--port"])
        .arg(args.port.to_string())
        .arg("--data-dir")
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {}", args.strata))?;
    let server = Server { child, _dir: dir };
    let addr = format!("127.0.0.1:{}", args.port);
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if http_get(&addr, "/api/version").is_ok() {
            return Ok(server);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("the server did not answer on {addr} within 30 s")
}

/// Status and body of a GET.
fn http_get(addr: &str, path: &str) -> anyhow::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(120)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)?;
    let (head, body) = resp.split_once("\r\n\r\n").context("bad HTTP response")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("no HTTP status")?;
    Ok((status, body.to_string()))
}

/// Writes the devops shape on one connection, for hosts `hosts`, from timestamp step 0 until
/// `stop`; counts what it wrote in `written` and publishes its newest complete step in `newest`.
fn ingest(
    addr: &str,
    hosts: std::ops::Range<usize>,
    stop: &AtomicBool,
    written: &AtomicU64,
    newest: &AtomicI64,
) -> anyhow::Result<()> {
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    // Per series, the text before and after "<ts> <value>".
    let series: Vec<(Vec<u8>, Vec<u8>)> = hosts
        .flat_map(|h| {
            METRICS.iter().map(move |m| {
                let head = format!("put {m} ").into_bytes();
                let tail = format!(
                    " host=host_{h} region=r{} datacenter=dc{} rack=k{} os=linux arch=x64\n",
                    h % 3,
                    h % 7,
                    h % 31
                )
                .into_bytes();
                (head, tail)
            })
        })
        .collect();
    let mut buf = Vec::with_capacity(1 << 20);
    let mut step: i64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let ts = START + step * STEP;
        for (i, (head, tail)) in series.iter().enumerate() {
            buf.extend_from_slice(head);
            write!(buf, "{ts} ")?;
            // Alternate integer counters and one-decimal gauges, as collectors send them.
            if i % 2 == 0 {
                write!(buf, "{}", step * 7 + i as i64)?;
            } else {
                write!(buf, "{}.{}", (step + i as i64) % 100, step % 10)?;
            }
            buf.extend_from_slice(tail);
            if buf.len() > (1 << 20) - 256 {
                s.write_all(&buf)?;
                buf.clear();
            }
        }
        s.write_all(&buf)?;
        buf.clear();
        written.fetch_add(series.len() as u64, Ordering::Relaxed);
        newest.store(ts, Ordering::Relaxed);
        step += 1;
    }
    // A version request answers only after every put before it on the connection was read.
    s.write_all(b"version\n")?;
    s.set_read_timeout(Some(Duration::from_secs(120)))?;
    let mut b = [0u8; 4096];
    let n = s.read(&mut b)?;
    if n == 0 {
        bail!("the server closed the telnet connection");
    }
    let reply = String::from_utf8_lossy(&b[..n]);
    if reply.contains("put:") {
        bail!("the server refused puts: {reply}");
    }
    Ok(())
}

/// Latencies of one request kind, in seconds.
#[derive(Debug, Default)]
struct Latencies(Vec<f64>);

impl Latencies {
    fn summary(&mut self) -> String {
        if self.0.is_empty() {
            return "no requests".into();
        }
        self.0.sort_by(f64::total_cmp);
        let at = |q: f64| self.0[((self.0.len() - 1) as f64 * q).round() as usize];
        format!(
            "n={} p50={:.3}s p99={:.3}s max={:.3}s",
            self.0.len(),
            at(0.5),
            at(0.99),
            at(1.0)
        )
    }
}

/// One reader: loops over panel, suggest and lookup until `stop`, checking every answer.
fn read_loop(
    addr: &str,
    hosts: usize,
    reader: usize,
    pause: Duration,
    stop: &AtomicBool,
    active: &AtomicBool,
    newest: &[AtomicI64],
) -> anyhow::Result<[Latencies; 3]> {
    let mut out: [Latencies; 3] = Default::default();
    let mut i = reader;
    while !stop.load(Ordering::Relaxed) {
        if !active.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        let metric = METRICS[i % METRICS.len()];
        // The last step every connection has written: the panel's hour has every host.
        let end = newest
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .min()
            .unwrap_or(START);
        let kind = i % 3;
        let t = Instant::now();
        match kind {
            0 => {
                let start = (end - 3600).max(START);
                let path =
                    format!("/api/query?start={start}&end={end}&m=avg:1m-avg:{metric}%7Bhost=*%7D");
                let (status, body) = http_get(addr, &path)?;
                if status != 200 {
                    bail!("panel query answered {status}: {body}");
                }
                let v: serde_json::Value = serde_json::from_str(&body)?;
                let n = v.as_array().map_or(0, Vec::len);
                if end >= START + 60 && n != hosts {
                    bail!("panel for {metric} returned {n} series, not {hosts}");
                }
            }
            1 => {
                let (status, body) = http_get(
                    addr,
                    &format!("/api/suggest?type=metrics&q={metric}&max=25"),
                )?;
                if status != 200 || !body.contains(metric) {
                    bail!("suggest for {metric} answered {status}: {body}");
                }
            }
            _ => {
                let host = (i * 7919) % hosts;
                let (status, body) = http_get(
                    addr,
                    &format!("/api/search/lookup?m={metric}%7Bhost=host_{host}%7D"),
                )?;
                if status != 200 || !body.contains(&format!("host_{host}")) {
                    bail!("lookup of {metric} on host_{host} answered {status}: {body}");
                }
            }
        }
        out[kind].0.push(t.elapsed().as_secs_f64());
        i += 1;
        std::thread::sleep(pause);
    }
    Ok(out)
}

/// Reader threads running [`read_loop`] until [`Readers::finish`].
struct Readers {
    stop: Arc<AtomicBool>,
    active: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<anyhow::Result<[Latencies; 3]>>>,
}

fn start_readers(args: &Args, addr: &str, newest: &Arc<Vec<AtomicI64>>) -> Readers {
    let stop = Arc::new(AtomicBool::new(false));
    let active = Arc::new(AtomicBool::new(false));
    let threads = (0..args.readers)
        .map(|r| {
            let (addr, stop, active, newest) = (
                addr.to_string(),
                stop.clone(),
                active.clone(),
                newest.clone(),
            );
            let (hosts, pause) = (args.hosts, Duration::from_millis(args.pause_ms));
            std::thread::spawn(move || read_loop(&addr, hosts, r, pause, &stop, &active, &newest))
        })
        .collect();
    Readers {
        stop,
        active,
        threads,
    }
}

impl Readers {
    /// Stops the readers and merges their latencies by request kind.
    fn finish(self) -> anyhow::Result<[Latencies; 3]> {
        self.stop.store(true, Ordering::Relaxed);
        let mut kinds: [Latencies; 3] = Default::default();
        for r in self.threads {
            let got = r
                .join()
                .map_err(|_| anyhow::anyhow!("a reader panicked"))??;
            for (all, one) in kinds.iter_mut().zip(got) {
                all.0.extend(one.0);
            }
        }
        Ok(kinds)
    }
}

fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let server = start_server(&args)?;
    let addr = format!("127.0.0.1:{}", args.port);
    println!(
        "read_soak: {} series over {} connections, {} readers, warm-up {} s, soak {} s",
        args.hosts * METRICS.len(),
        args.connections,
        args.readers,
        args.warmup_s,
        args.seconds
    );
    let stop_ingest = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let newest: Arc<Vec<AtomicI64>> = Arc::new(
        (0..args.connections)
            .map(|_| AtomicI64::new(START))
            .collect(),
    );
    let per = args.hosts / args.connections;
    let writers: Vec<_> = (0..args.connections)
        .map(|c| {
            let hosts = c * per..if c + 1 == args.connections {
                args.hosts
            } else {
                (c + 1) * per
            };
            let (addr, stop, written, newest) = (
                addr.clone(),
                stop_ingest.clone(),
                written.clone(),
                newest.clone(),
            );
            std::thread::spawn(move || ingest(&addr, hosts, &stop, &written, &newest[c]))
        })
        .collect();
    // Points written in the next `secs` seconds.
    let count = |secs: u64| -> (u64, f64) {
        let before = written.load(Ordering::Relaxed);
        let t = Instant::now();
        let end = t + Duration::from_secs(secs);
        while Instant::now() < end {
            std::thread::sleep(Duration::from_millis(250));
        }
        (
            written.load(Ordering::Relaxed) - before,
            t.elapsed().as_secs_f64(),
        )
    };
    let (warm, warm_s) = count(args.warmup_s);
    println!("warm-up ingest: {:.0} points/s", warm as f64 / warm_s);
    let readers = start_readers(&args, &addr, &newest);
    let (mut alone, mut loaded) = ((0u64, 0f64), (0u64, 0f64));
    for _ in 0..args.seconds.div_ceil(args.window_s) {
        let (n, s) = count(args.window_s);
        alone = (alone.0 + n, alone.1 + s);
        readers.active.store(true, Ordering::Relaxed);
        let (n, s) = count(args.window_s);
        readers.active.store(false, Ordering::Relaxed);
        loaded = (loaded.0 + n, loaded.1 + s);
    }
    let mut loaded_latency = readers.finish()?;
    stop_ingest.store(true, Ordering::Relaxed);
    for w in writers {
        w.join()
            .map_err(|_| anyhow::anyhow!("a writer panicked"))??;
    }
    let readers = start_readers(&args, &addr, &newest);
    readers.active.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(args.window_s * 2));
    let mut idle_latency = readers.finish()?;
    let unloaded = alone.0 as f64 / alone.1;
    let loaded = loaded.0 as f64 / loaded.1;
    println!("ingest alone: {unloaded:.0} points/s");
    println!("ingest with readers: {loaded:.0} points/s");
    println!("loaded / unloaded ingest: {:.2}", loaded / unloaded);
    for (i, name) in ["panel", "suggest", "lookup"].iter().enumerate() {
        println!("{name:8} during ingest: {}", loaded_latency[i].summary());
        println!("{name:8} idle server:   {}", idle_latency[i].summary());
    }
    drop(server);
    Ok(())
}
