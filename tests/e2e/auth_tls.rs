//! Authentication (`--auth-file`) and TLS (`--tls-cert`, `--tls-key`) end to end: roles per
//! endpoint over HTTP, telnet's `auth` line, TLS with curl, Python's `ssl` and
//! `openssl s_client`, refusing plaintext, and SIGHUP reloading both.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, ensure};

use crate::harness::Server;

const READ: &str = "reader-token-0123456789";
const WRITE: &str = "writer-token-0123456789";
const ADMIN: &str = "admin-token-0123456789";

/// An auth file with a reader, a writer (who also reads) and an admin.
fn write_auth_file(dir: &Path) -> anyhow::Result<PathBuf> {
    let path = dir.join("tokens.toml");
    std::fs::write(
        &path,
        format!(
            "[[tokens]]\nname = \"grafana\"\ntoken = \"{READ}\"\nroles = [\"read\"]\n\n\
             [[tokens]]\nname = \"tcollector\"\ntoken = \"{WRITE}\"\nroles = [\"read\", \"write\"]\n\n\
             [[tokens]]\nname = \"ops\"\ntoken = \"{ADMIN}\"\nroles = [\"read\", \"write\", \"admin\"]\n"
        ),
    )?;
    Ok(path)
}

/// A self-signed certificate for `localhost` and `127.0.0.1`, as `<name>.crt` and
/// `<name>.key` in `dir`.
fn self_signed(dir: &Path, name: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
    let (c, k) = (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    );
    std::fs::write(&c, cert.cert.pem())?;
    std::fs::write(&k, cert.signing_key.serialize_pem())?;
    Ok((c, k))
}

fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}\r\n")
}

fn status_of(server: &Server, method: &str, path: &str, headers: &str, body: &str) -> u16 {
    server
        .http_bytes(method, path, headers, body.as_bytes())
        .map_or(0, |(status, _, _)| status)
}

const PUT: &str = r#"[{"metric":"auth.m","timestamp":1700000000,"value":1,"tags":{"h":"a"}}]"#;
const QUERY: &str =
    r#"{"start":1699990000,"end":1700010000,"queries":[{"aggregator":"sum","metric":"auth.m"}]}"#;
const DELETE_QUERY: &str = r#"{"start":1699990000,"end":1700010000,"delete":true,"queries":[{"aggregator":"sum","metric":"auth.m"}]}"#;

#[test]
fn http_endpoints_need_their_roles() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let auth = write_auth_file(dir.path())?;
    let data = dir.path().join("data");
    let auth = auth.to_string_lossy().into_owned();
    let server = Server::start_in(
        &data,
        &[
            "--auth-file",
            &auth,
            "--allow-delete",
            "--cors-domains",
            "*",
        ],
    )?;

    // No credentials, or unknown ones: 401, the error JSON and the schemes to answer with.
    let (status, head, body) = server.http_bytes("GET", "/api/version", "", b"")?;
    assert_eq!(status, 401);
    let head = head.to_ascii_lowercase();
    assert!(head.contains("www-authenticate: bearer"), "{head}");
    assert!(head.contains("www-authenticate: basic"), "{head}");
    let json: serde_json::Value = serde_json::from_slice(&body)?;
    assert_eq!(json["error"]["code"], 401, "{json}");
    let (status, _, body) = server.http_bytes("GET", "/api/version", &bearer("nope"), b"")?;
    assert_eq!(status, 401);
    assert!(!String::from_utf8_lossy(&body).contains("nope"));

    // A reader reads, and may not write or delete.
    for path in [
        "/api/version",
        "/api/config",
        "/metrics",
        "/api/aggregators",
        "/",
    ] {
        assert_eq!(
            status_of(&server, "GET", path, &bearer(READ), ""),
            200,
            "{path}"
        );
    }
    let (status, _, body) = server.http_bytes("POST", "/api/put", &bearer(READ), PUT.as_bytes())?;
    assert_eq!(status, 403);
    let json: serde_json::Value = serde_json::from_slice(&body)?;
    assert_eq!(json["error"]["code"], 403, "{json}");
    assert!(
        json["error"]["details"]
            .as_str()
            .is_some_and(|d| d.contains("write")),
        "{json}"
    );

    let (_, _, body) = server.http_bytes("GET", "/api/config", &bearer(READ), b"")?;
    let config: serde_json::Value = serde_json::from_slice(&body)?;
    assert_eq!(config["tsd.core.authentication.enable"], "true", "{config}");
    assert_eq!(config["strata.auth_file"], auth.as_str(), "{config}");
    assert_eq!(config["strata.tls_required"], "false", "{config}");

    // Basic with the name as the user and the token as the password.
    let basic = |user: &str, token: &str| {
        format!(
            "Authorization: Basic {}\r\n",
            base64_alphabet(&format!("{user}:{token}"))
        )
    };
    assert_eq!(
        status_of(
            &server,
            "POST",
            "/api/put",
            &basic("tcollector", WRITE),
            PUT
        ),
        204
    );
    assert_eq!(
        status_of(&server, "POST", "/api/put", &basic("grafana", WRITE), PUT),
        401
    );
    assert_eq!(
        status_of(&server, "POST", "/api/query", &bearer(READ), QUERY),
        200
    );

    // Deleting and the admin endpoints need `admin`.
    let assign = "/api/uid/assign?metric=auth.new";
    let admin_only = [
        ("POST", "/api/query", DELETE_QUERY),
        ("DELETE", "/api/query", QUERY),
        ("POST", "/api/query?method_override=delete", QUERY),
        ("POST", "/api/admin/compact", ""),
        ("GET", "/api/dropcaches", ""),
        ("GET", assign, ""),
    ];
    for (method, path, body) in admin_only {
        let status = status_of(&server, method, path, &bearer(WRITE), body);
        assert_eq!(status, 403, "{method} {path} {body}");
    }
    for (method, path) in [
        ("GET", assign),
        ("POST", "/api/admin/compact"),
        ("GET", "/api/dropcaches"),
    ] {
        assert_eq!(
            status_of(&server, method, path, &bearer(ADMIN), ""),
            200,
            "{method} {path}"
        );
    }
    let (_, _, body) = server.http_bytes("POST", "/api/query", &bearer(READ), QUERY.as_bytes())?;
    assert!(
        String::from_utf8_lossy(&body).contains("auth.m"),
        "still there"
    );
    assert_eq!(
        status_of(&server, "POST", "/api/query", &bearer(ADMIN), DELETE_QUERY),
        200
    );

    // A CORS preflight carries no credentials and is answered.
    let preflight = "Origin: http://grafana.example\r\nAccess-Control-Request-Method: POST\r\n";
    assert_eq!(
        status_of(&server, "OPTIONS", "/api/query", preflight, ""),
        200
    );
    Ok(())
}

/// Standard base64, enough for a Basic header.
fn base64_alphabet(input: &str) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Sends `lines` on a telnet connection, then `version`, and returns the reply lines before
/// the version's.
fn telnet(server: &Server, lines: &str) -> anyhow::Result<Vec<String>> {
    let mut conn = server.connect()?;
    let mut reader = BufReader::new(conn.try_clone()?);
    conn.write_all(lines.as_bytes())?;
    crate::telnet_put::barrier(&mut conn, &mut reader)
}

fn count_points(server: &Server, metric: &str) -> anyhow::Result<usize> {
    let body = format!(
        r#"{{"start":1699990000,"end":1700010000,"queries":[{{"aggregator":"none","metric":"{metric}"}}]}}"#
    );
    let (status, _, reply) =
        server.http_bytes("POST", "/api/query", &bearer(READ), body.as_bytes())?;
    if status != 200 {
        return Ok(0);
    }
    let json: serde_json::Value = serde_json::from_slice(&reply)?;
    Ok(json.as_array().map_or(0, |a| {
        a.iter()
            .map(|s| s["dps"].as_object().map_or(0, |d| d.len()))
            .sum()
    }))
}

#[test]
fn telnet_puts_need_an_auth_line_with_the_write_role() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let auth = write_auth_file(dir.path())?;
    let auth = auth.to_string_lossy().into_owned();
    let server = Server::start_in(&dir.path().join("data"), &["--auth-file", &auth])?;

    let replies = telnet(&server, "put tel.m 1700000000 1 h=a\nstats\n")?;
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert!(
        replies[0].starts_with("put: authentication required"),
        "{replies:?}"
    );
    assert!(
        replies[1].starts_with("stats: authentication required"),
        "{replies:?}"
    );

    let replies = telnet(&server, "auth wrong\nput tel.m 1700000000 1 h=a\n")?;
    assert_eq!(replies[0], "AUTH_FAIL\n");
    assert!(
        replies[1].starts_with("put: authentication required"),
        "{replies:?}"
    );

    let replies = telnet(
        &server,
        &format!("auth {READ}\nput tel.m 1700000000 1 h=a\n"),
    )?;
    assert_eq!(replies[0], "AUTH_SUCCESS.\n");
    assert!(replies[1].contains("lacks the 'write' role"), "{replies:?}");
    assert_eq!(count_points(&server, "tel.m")?, 0, "no put was stored");

    let lines = format!("auth {WRITE}\nput tel.m 1700000000 1 h=a\nput tel.m 1700000001 2 h=a\n");
    assert_eq!(telnet(&server, &lines)?, ["AUTH_SUCCESS.\n"]);
    // OpenTSDB's plugin shape: `auth basic <name> <token>`.
    let lines = format!("auth basic ops {ADMIN}\nput tel.m 1700000002 3 h=a\ndropcaches\n");
    assert_eq!(
        telnet(&server, &lines)?,
        ["AUTH_SUCCESS.\n", "Caches dropped.\n"]
    );
    assert_eq!(count_points(&server, "tel.m")?, 3);
    let (_, _, metrics) = server.http_bytes("GET", "/metrics", &bearer(READ), b"")?;
    let metrics = String::from_utf8(metrics)?;
    // Two commands before `auth`, one failed `auth` and one put after it; one put without
    // the role.
    let refused =
        |kind: &str| format!("strata_auth_refused_total{{kind=\"{kind}\",protocol=\"telnet\"}}");
    assert!(
        metrics.contains(&format!("{} 4\n", refused("unauthenticated"))),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!("{} 1\n", refused("forbidden"))),
        "{metrics}"
    );
    Ok(())
}

/// A Python interpreter: the e2e venv's when there is one (`STRATA_E2E_VENV`, as `.ci/run`
/// sets it), else `python3`. Only the standard library is used.
fn python() -> PathBuf {
    std::env::var_os("STRATA_E2E_VENV")
        .map(|v| PathBuf::from(v).join("bin").join("python"))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| "python3".into())
}

fn curl(server: &Server, ca: &Path, path: &str, token: &str) -> anyhow::Result<(bool, String)> {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "--cacert"])
        .arg(ca)
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .arg(format!("https://localhost:{}{path}", server.addr.port()))
        .args([
            "--resolve",
            &format!("localhost:{}:127.0.0.1", server.addr.port()),
        ])
        .output()
        .context("running curl (install it; .ci/run does)")?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Ok((out.status.success(), text))
}

/// Runs `openssl s_client` with `input` as the telnet session and returns what came back.
fn openssl_telnet(server: &Server, ca: &Path, input: &str) -> anyhow::Result<String> {
    let mut child = Command::new("openssl")
        .args([
            "s_client",
            "-quiet",
            "-verify_return_error",
            "-servername",
            "localhost",
        ])
        .args(["-connect", &server.addr.to_string(), "-CAfile"])
        .arg(ca)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("running openssl (install it; .ci/run does)")?;
    let mut stdin = child.stdin.take().context("no stdin")?;
    stdin.write_all(input.as_bytes())?;
    let stdout = child.stdout.take().context("no stdout")?;
    // `exit` closes the connection from the server's side, which ends s_client.
    let mut out = String::new();
    let mut reader = BufReader::new(stdout);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        out.push_str(&line);
    }
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    Ok(out)
}

#[test]
fn tls_serves_http_and_telnet_and_a_reloaded_certificate() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let auth = write_auth_file(dir.path())?;
    let (cert, key) = self_signed(dir.path(), "first")?;
    // The server reads these paths; the CA files the clients trust are kept apart.
    let ca_first = dir.path().join("ca-first.pem");
    std::fs::copy(&cert, &ca_first)?;
    let args: Vec<String> = [
        "--auth-file".into(),
        auth.to_string_lossy().into_owned(),
        "--tls-cert".into(),
        cert.to_string_lossy().into_owned(),
        "--tls-key".into(),
        key.to_string_lossy().into_owned(),
    ]
    .into();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = Server::start_in(&dir.path().join("data"), &args)?;

    // curl, with the CA, over HTTPS; and plain HTTP still works beside it.
    let (ok, out) = curl(&server, &ca_first, "/api/version", READ)?;
    assert!(ok && out.contains("\"version\""), "{out}");
    assert_eq!(
        status_of(&server, "GET", "/api/version", &bearer(READ), ""),
        200
    );

    // Python's own TLS client, checking the certificate against the CA.
    let script = r#"
import json, ssl, sys, urllib.request
ctx = ssl.create_default_context(cafile=sys.argv[1])
body = json.dumps([{"metric": "tls.py", "timestamp": 1700000000, "value": 7, "tags": {"h": "a"}}]).encode()
req = urllib.request.Request(sys.argv[2] + "/api/put", data=body, method="POST",
                             headers={"Authorization": "Bearer " + sys.argv[3],
                                      "Content-Type": "application/json"})
print(urllib.request.urlopen(req, context=ctx).status)
"#;
    let out = Command::new(python())
        .args(["-c", script])
        .arg(&ca_first)
        .arg(format!("https://127.0.0.1:{}", server.addr.port()))
        .arg(WRITE)
        .output()?;
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(said.trim(), "204", "{said}");
    assert_eq!(count_points(&server, "tls.py")?, 1);

    // Telnet inside TLS.
    let out = openssl_telnet(
        &server,
        &ca_first,
        &format!("auth {WRITE}\nput tls.tel 1700000000 5 h=a\nversion\nexit\n"),
    )?;
    assert!(out.starts_with("AUTH_SUCCESS.\n"), "{out}");
    assert!(out.contains("net.opentsdb.tools"), "{out}");
    assert_eq!(count_points(&server, "tls.tel")?, 1);

    // SIGHUP: a new pair in the same files is served to new connections; so is a new token.
    let (cert2, key2) = self_signed(dir.path(), "second")?;
    std::fs::copy(&cert2, &cert)?;
    std::fs::copy(&key2, &key)?;
    std::fs::write(
        &auth,
        "[[tokens]]\nname = \"new\"\ntoken = \"fresh-token-42\"\nroles = [\"read\"]\n",
    )?;
    let status = Command::new("kill")
        .args(["-HUP", &server.pid().to_string()])
        .status()?;
    ensure!(status.success(), "kill -HUP failed");
    let mut served = false;
    for _ in 0..100 {
        if curl(&server, &cert2, "/api/version", "fresh-token-42")?.0 {
            served = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(served, "the reloaded certificate and token are not served");
    let (ok, out) = curl(&server, &ca_first, "/api/version", "fresh-token-42")?;
    assert!(!ok, "the old certificate is still served: {out}");
    assert_eq!(
        status_of(&server, "GET", "/api/version", &bearer(READ), ""),
        401
    );

    // A pair that does not load leaves the last good one in use.
    std::fs::write(&cert, "not a certificate")?;
    Command::new("kill")
        .args(["-HUP", &server.pid().to_string()])
        .status()?;
    std::thread::sleep(Duration::from_millis(300));
    assert!(curl(&server, &cert2, "/api/version", "fresh-token-42")?.0);
    Ok(())
}

#[test]
fn plaintext_is_refused_when_tls_is_required() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (cert, key) = self_signed(dir.path(), "a")?;
    let (c, k) = (cert.to_string_lossy(), key.to_string_lossy());
    let server = Server::start_in(
        &dir.path().join("data"),
        &["--tls-cert", &c, "--tls-key", &k, "--tls-required"],
    )?;
    let (status, _, body) = server.http_bytes("GET", "/api/version", "", b"")?;
    assert_eq!(status, 400);
    assert!(String::from_utf8_lossy(&body).contains("TLS"), "{body:?}");
    let mut conn = server.connect()?;
    conn.write_all(b"put m 1700000000 1 h=a\n")?;
    let mut line = String::new();
    BufReader::new(conn).read_line(&mut line)?;
    assert!(line.starts_with("error:") && line.contains("TLS"), "{line}");
    let (ok, out) = curl(&server, &cert, "/api/version", "")?;
    assert!(ok && out.contains("\"version\""), "{out}");
    Ok(())
}
