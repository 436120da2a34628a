//! Starts and stops a `strata serve` process on 127.0.0.1 with a free port.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

/// The venv of the tests' tools from PyPI (Selenium, SeaweedFS's `weed`):
/// `$STRATA_E2E_VENV`, else `<target>/e2e-venv`, where `.ci/run` puts it.
pub(crate) fn e2e_venv() -> anyhow::Result<PathBuf> {
    match std::env::var_os("STRATA_E2E_VENV") {
        Some(v) => Ok(PathBuf::from(v)),
        None => Ok(Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .context("CARGO_TARGET_TMPDIR has no parent")?
            .join("e2e-venv")),
    }
}

/// A running server. Killed when dropped.
pub(crate) struct Server {
    child: Child,
    pub(crate) addr: SocketAddr,
    _dir: Option<tempfile::TempDir>,
}

impl Server {
    /// Starts a server on a fresh temporary data directory.
    pub(crate) fn start() -> anyhow::Result<Server> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().to_path_buf();
        let mut s = Server::start_in(&path, &[])?;
        s._dir = Some(dir);
        Ok(s)
    }

    /// Starts a server on `data_dir` with extra flags.
    pub(crate) fn start_in(data_dir: &Path, extra: &[&str]) -> anyhow::Result<Server> {
        Server::start_with_env(data_dir, extra, &[])
    }

    /// Starts a server on `data_dir` with extra flags and environment variables.
    pub(crate) fn start_with_env(
        data_dir: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Server> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
            .arg("serve")
            .arg("--data-dir")
            .arg(PathBuf::from(data_dir))
            .args(["--bind", "127.0.0.1", "--port", "0"])
            .args(extra)
            .env("RUST_LOG", "warn")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("spawning strata")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let Some(addr) = line.trim().strip_prefix("strata listening on ") else {
            let _ = child.kill();
            bail!("unexpected first line from strata: {line:?}");
        };
        let addr = addr.parse()?;
        Ok(Server {
            child,
            addr,
            _dir: None,
        })
    }

    /// The server's process id, for signals.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits for a clean exit.
    pub(crate) fn stop(mut self) -> anyhow::Result<std::process::ExitStatus> {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status()?;
        for _ in 0..200 {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        bail!("strata did not exit within 5 s of SIGTERM")
    }

    /// Opens a connection with a read timeout.
    pub(crate) fn connect(&self) -> anyhow::Result<TcpStream> {
        let s = TcpStream::connect(self.addr)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(s)
    }

    /// Sends one HTTP/1.1 request with extra header lines and returns (status, head, body
    /// bytes); for binary answers.
    pub(crate) fn http_bytes(
        &self,
        method: &str,
        path: &str,
        headers: &str,
        body: &[u8],
    ) -> anyhow::Result<(u16, String, Vec<u8>)> {
        let mut s = self.connect()?;
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        s.write_all(head.as_bytes())?;
        s.write_all(body)?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw)?;
        let end = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .context("no header end")?;
        let head = String::from_utf8(raw[..end].to_vec())?;
        let status = head.split(' ').nth(1).context("no status")?.parse()?;
        Ok((status, head, raw[end + 4..].to_vec()))
    }

    /// Sends one HTTP/1.1 request and returns (status, body).
    pub(crate) fn http(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> anyhow::Result<(u16, String)> {
        self.http_within(method, path, body, Duration::from_secs(10))
    }

    /// [`Server::http`], waiting up to `timeout` for the answer: for a write that may wait
    /// out a whole write stall first.
    pub(crate) fn http_within(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
        timeout: Duration,
    ) -> anyhow::Result<(u16, String)> {
        let mut s = self.connect()?;
        s.set_read_timeout(Some(timeout))?;
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        s.write_all(head.as_bytes())?;
        s.write_all(body)?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw)?;
        let text = String::from_utf8(raw)?;
        let (head, body) = text.split_once("\r\n\r\n").context("no header end")?;
        let status = head.split(' ').nth(1).context("no status")?.parse()?;
        Ok((status, body.to_string()))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The raw points of every series `/api/query` finds for `metric` with the literal `tags`
/// between `start_ms` and `end_ms`: `(tags, [(timestamp ms, JSON number)])`, so tests can check
/// each value's type and bits.
pub(crate) type QueriedSeries = (serde_json::Value, Vec<(i64, serde_json::Value)>);

impl Server {
    /// Queries raw points (aggregator `none`, millisecond keys); see [`QueriedSeries`].
    pub(crate) fn query_raw(
        &self,
        metric: &str,
        tags: &[(&str, &str)],
        start_ms: i64,
        end_ms: i64,
    ) -> anyhow::Result<Vec<QueriedSeries>> {
        let tags: serde_json::Map<String, serde_json::Value> = tags
            .iter()
            .map(|(k, v)| ((*k).to_string(), serde_json::Value::from(*v)))
            .collect();
        let body = serde_json::json!({
            "start": start_ms, "end": end_ms, "msResolution": true,
            "queries": [{"aggregator": "none", "metric": metric, "tags": tags}],
        });
        let (status, reply) = self.http("POST", "/api/query", body.to_string().as_bytes())?;
        anyhow::ensure!(status == 200, "query {metric}: {status} {reply}");
        let parsed: serde_json::Value = serde_json::from_str(&reply)?;
        let mut out = Vec::new();
        for series in parsed.as_array().context("not an array")? {
            let dps = series["dps"].as_object().context("no dps")?;
            let mut points = Vec::new();
            for (k, v) in dps {
                points.push((k.parse::<i64>()?, v.clone()));
            }
            points.sort_by_key(|p| p.0);
            out.push((series["tags"].clone(), points));
        }
        Ok(out)
    }
}
