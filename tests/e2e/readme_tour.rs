//! The README's two-minute tour, run command by command against the built server, as a
//! reader would paste it (only the port differs).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::harness::Server;

/// A stand-in for `nc [-q secs] host port` where netcat is not installed: sends stdin, prints
/// the replies, and closes `secs` after stdin ends. Bash's `/dev/tcp` does the networking.
const NC_STANDIN: &str = r#"#!/usr/bin/env bash
q=0
while getopts "q:" o; do case $o in q) q=$OPTARG ;; *) ;; esac; done
shift $((OPTIND - 1))
exec 3<>"/dev/tcp/$1/$2" || exit 1
cat <&3 &
reader=$!
cat >&3
sleep "$q"
kill "$reader" 2>/dev/null
exit 0
"#;

/// The commands of the tour's code block, continuation lines joined.
fn tour_commands(readme: &str) -> anyhow::Result<Vec<String>> {
    let tour = readme
        .split_once("## A two-minute tour")
        .context("README has no tour section")?
        .1;
    let block = tour
        .split_once("```\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .context("the tour has no code block")?
        .0;
    let mut commands = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        match line.strip_suffix('\\') {
            Some(part) => current.push_str(part),
            None => {
                current.push_str(line);
                if !current.trim().is_empty() {
                    commands.push(current.trim().to_string());
                }
                current.clear();
            }
        }
    }
    Ok(commands)
}

fn found(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs one tour command with `bash`, `path` first on the PATH; returns its stdout.
fn run(command: &str, path: &str) -> anyhow::Result<String> {
    let out = Command::new("bash")
        .args(["-c", &format!("set -o pipefail; {command}")])
        .env("PATH", path)
        // A proxy set in the environment must not take the loopback requests.
        .env("NO_PROXY", "127.0.0.1")
        .env("no_proxy", "127.0.0.1")
        .output()
        .with_context(|| format!("running {command}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    anyhow::ensure!(
        out.status.success(),
        "`{command}` failed ({}): {stdout} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(stdout)
}

/// The series of a query answer, by their `host` tag.
fn hosts(answer: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(answer).unwrap_or_default();
    let mut hosts: Vec<String> = v
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["dps"].as_object().is_some_and(|d| !d.is_empty()))
        .filter_map(|s| s["tags"]["host"].as_str().map(str::to_owned))
        .collect();
    hosts.sort();
    hosts
}

#[test]
fn the_readme_tour_runs_as_written() -> anyhow::Result<()> {
    if !found("bash") || !found("curl") {
        eprintln!("SKIPPED the_readme_tour_runs_as_written: it needs bash and curl on the PATH");
        return Ok(());
    }
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))?;
    let commands = tour_commands(&readme)?;
    assert_eq!(commands.len(), 5, "{commands:#?}");
    let tools = tempfile::tempdir()?;
    if !found("nc") {
        use std::os::unix::fs::PermissionsExt;
        let nc = tools.path().join("nc");
        std::fs::write(&nc, NC_STANDIN)?;
        std::fs::set_permissions(&nc, std::fs::Permissions::from_mode(0o755))?;
    }
    let path = format!(
        "{}:{}",
        tools.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let server = Server::start()?;
    let port = server.addr.port().to_string();
    for command in &commands {
        assert!(command.contains("127.0.0.1 4242") || command.contains("127.0.0.1:4242"));
        let command = command
            .replace("127.0.0.1 4242", &format!("127.0.0.1 {port}"))
            .replace("127.0.0.1:4242", &format!("127.0.0.1:{port}"));
        let out = run(&command, &path)?;
        if command.starts_with("echo \"put") {
            // A good put line gets no reply.
            assert_eq!(out, "", "{command}");
        } else if command.contains("/api/put") {
            assert!(out.starts_with("HTTP/1.1 200"), "{command}: {out}");
            assert!(out.contains(r#""success":1"#), "{command}: {out}");
        } else if command.contains("/api/suggest") {
            let v: serde_json::Value = serde_json::from_str(&out)?;
            assert_eq!(v, serde_json::json!(["sys.cpu.user"]), "{command}");
        } else if command.contains("/api/query") {
            // The telnet point is stored once the server has read the line and the close
            // that `nc` sent; poll until both hosts' points answer.
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut out = out;
            while hosts(&out) != ["web01", "web02"] && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
                out = run(&command, &path)?;
            }
            assert_eq!(hosts(&out), ["web01", "web02"], "{command}: {out}");
        } else if command.contains("/api/version") {
            let v: serde_json::Value = serde_json::from_str(&out)?;
            assert!(v["version"].is_string(), "{command}: {out}");
        } else {
            anyhow::bail!("a tour command this test does not know: {command}");
        }
    }
    Ok(())
}
