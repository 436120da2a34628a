//! The Influx line protocol end to end: `/write` and `/api/v2/write` over raw HTTP (escaping,
//! types, every precision, a partly bad batch), and with InfluxData's Python clients from PyPI.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use anyhow::{Context, bail};
use serde_json::Value as Json;

use crate::harness::Server;

/// An hour boundary in the past, in seconds.
const T: i64 = 1_700_000_000 - 1_700_000_000 % 3600;

/// The one point of the one series a query finds, as (timestamp ms, JSON number).
fn only_point(server: &Server, metric: &str, tags: &[(&str, &str)]) -> anyhow::Result<(i64, Json)> {
    let found = server.query_raw(metric, tags, 0, (T + 7200) * 1000)?;
    match found.as_slice() {
        [(_, points)] if points.len() == 1 => Ok(points[0].clone()),
        _ => bail!("{metric} {tags:?}: expected one point, got {found:?}"),
    }
}

/// Whether a query finds no point (an unknown name is an error, which counts as none).
fn absent(server: &Server, metric: &str, tags: &[(&str, &str)]) -> bool {
    server
        .query_raw(metric, tags, 0, (T + 7200) * 1000)
        .map_or(true, |found| {
            found.iter().all(|(_, points)| points.is_empty())
        })
}

fn assert_int(v: &Json, want: i64) {
    assert!(v.is_i64(), "{v} is not an integer");
    assert_eq!(v.as_i64(), Some(want));
}

fn assert_float(v: &Json, want: f64) {
    assert!(v.is_f64(), "{v} is not a float");
    assert_eq!(v.as_f64().map(f64::to_bits), Some(want.to_bits()), "{v}");
}

#[test]
fn raw_lines_keep_escapes_types_and_precisions() -> anyhow::Result<()> {
    let server = Server::start()?;
    // Spaces, commas and equals signs, escaped with backslashes, in every kind of name.
    let body = format!(
        "disk\\ io,host=server\\ 01,region=us\\,west,k\\=ey=a\\=b read\\ ops=42i,util=0.1,\
         busy=true,idle=F {T}\n"
    );
    let (status, reply) = server.http("POST", "/write?db=x&precision=s", body.as_bytes())?;
    assert_eq!((status, reply.as_str()), (204, ""));
    let tags = [
        ("host", "server__x20_01"),
        ("region", "us__x2C_west"),
        ("k__x3D_ey", "a__x3D_b"),
    ];
    let ms = T * 1000;
    let (ts, v) = only_point(&server, "disk__x20_io.read__x20_ops", &tags)?;
    assert_eq!(ts, ms);
    assert_int(&v, 42);
    let (_, v) = only_point(&server, "disk__x20_io.util", &tags)?;
    assert_float(&v, 0.1);
    let (_, v) = only_point(&server, "disk__x20_io.busy", &tags)?;
    assert_int(&v, 1);
    let (_, v) = only_point(&server, "disk__x20_io.idle", &tags)?;
    assert_int(&v, 0);

    // Every precision of both APIs names the same instant: T + 1.234 s.
    let at = T * 1000 + 1234;
    let cases: [(&str, String); 10] = [
        ("/write?precision=n", format!("{at}000000")),
        ("/write?precision=ns", format!("{at}000000")),
        ("/write", format!("{at}000000")),
        ("/write?precision=u", format!("{at}000")),
        ("/write?precision=ms", format!("{at}")),
        (
            "/api/v2/write?org=o&bucket=b&precision=ns",
            format!("{at}999999"),
        ),
        (
            "/api/v2/write?org=o&bucket=b&precision=us",
            format!("{at}000"),
        ),
        ("/api/v2/write?org=o&bucket=b&precision=ms", format!("{at}")),
        ("/api/v2/write?bucket=b", format!("{at}000001")),
        ("/write?precision=u", format!("{at}999")),
    ];
    for (i, (path, ts)) in cases.iter().enumerate() {
        let line = format!("prec,case=c{i} v={i}i {ts}");
        let (status, reply) = server.http("POST", path, line.as_bytes())?;
        assert_eq!((status, reply.as_str()), (204, ""), "{path}");
        let tag = format!("c{i}");
        let (got, v) = only_point(&server, "prec.v", &[("case", &tag)])?;
        assert_eq!(got, at, "{path} {ts}");
        assert_int(&v, i as i64);
    }
    // Coarse precisions: seconds, minutes and hours.
    for (p, ts, want) in [
        ("s", T, T * 1000),
        ("m", T / 60, T * 1000),
        ("h", T / 3600, T * 1000),
    ] {
        let line = format!("coarse,p={p} v=-9223372036854775808i {ts}");
        let (status, _) = server.http("POST", &format!("/write?precision={p}"), line.as_bytes())?;
        assert_eq!(status, 204);
        let (got, v) = only_point(&server, "coarse.v", &[("p", p)])?;
        assert_eq!(got, want);
        assert_int(&v, i64::MIN);
    }
    // A bad precision is refused in each API's words.
    let (status, reply) = server.http("POST", "/write?precision=x", b"m,a=b v=1")?;
    assert_eq!(status, 400);
    assert!(reply.contains("invalid precision"), "{reply}");
    let (status, reply) = server.http("POST", "/api/v2/write?precision=h", b"m,a=b v=1")?;
    assert_eq!(status, 400);
    let v: Json = serde_json::from_str(&reply)?;
    assert_eq!(v["code"], "invalid");
    Ok(())
}

#[test]
fn a_partly_bad_batch_is_answered_as_influxdb_answers_it() -> anyhow::Result<()> {
    let server = Server::start()?;
    let body = format!(
        "part,h=a v=1i {T}\npart,h=b v=not_a_number {T}\npart,h=c v=3i {T}\n\
         part,h=d s=\"text\",v=4i {T}\n"
    );
    // 1.x: the good lines and fields are stored; 400 says what was dropped.
    let (status, reply) = server.http("POST", "/write?precision=s", body.as_bytes())?;
    assert_eq!(status, 400, "{reply}");
    let v: Json = serde_json::from_str(&reply)?;
    let msg = v["error"].as_str().context("no error")?;
    assert!(
        msg.starts_with("partial write: unable to parse 'part,h=b v=not_a_number"),
        "{msg}"
    );
    assert!(msg.contains("field \"s\" is a string"), "{msg}");
    assert!(msg.ends_with("dropped=1"), "{msg}");
    for (h, want) in [("a", 1), ("c", 3), ("d", 4)] {
        let (_, v) = only_point(&server, "part.v", &[("h", h)])?;
        assert_int(&v, want);
    }
    assert!(absent(&server, "part.v", &[("h", "b")]));

    // 2.x: a line that does not parse rejects the whole batch.
    let body = format!("v2,h=a v=1i {T}\nv2,h=b v= {T}\n");
    let (status, reply) = server.http("POST", "/api/v2/write?precision=s", body.as_bytes())?;
    assert_eq!(status, 400);
    let v: Json = serde_json::from_str(&reply)?;
    assert_eq!(v["code"], "invalid");
    assert_eq!(
        v["message"],
        format!("unable to parse 'v2,h=b v= {T}': missing field value")
    );
    assert!(absent(&server, "v2.v", &[]));
    // 2.x: a field storage cannot hold is dropped with 422, and the rest is stored.
    let body = format!("v2,h=a v=1i,s=\"x\" {T}\n");
    let (status, reply) = server.http("POST", "/api/v2/write?precision=s", body.as_bytes())?;
    assert_eq!(status, 422, "{reply}");
    let v: Json = serde_json::from_str(&reply)?;
    assert_eq!(v["code"], "unprocessable entity");
    let (_, v) = only_point(&server, "v2.v", &[("h", "a")])?;
    assert_int(&v, 1);

    // The counters of /metrics.
    let (_, metrics) = server.http("GET", "/metrics", b"")?;
    for line in [
        "strata_points_stored_total{protocol=\"influx\"} 4",
        "strata_points_rejected_total{protocol=\"influx\",reason=\"bad_syntax\"} 3",
        "strata_points_rejected_total{protocol=\"influx\",reason=\"bad_value\"} 2",
    ] {
        assert!(metrics.contains(line), "no {line} in\n{metrics}");
    }
    Ok(())
}

/// The Python clients' packages, pinned.
const PY_PACKAGES: [&str; 2] = ["influxdb==5.3.2", "influxdb-client==1.50.0"];

/// A venv with InfluxData's Python clients: `STRATA_PY_VENV`, or one under the target
/// directory, created and filled with pip when missing. Fails (never skips) when pip cannot
/// install them.
fn python_with_clients() -> anyhow::Result<PathBuf> {
    static SETUP: Mutex<()> = Mutex::new(());
    let _one_at_a_time = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    let venv = match std::env::var_os("STRATA_PY_VENV") {
        Some(v) => PathBuf::from(v),
        None => Path::new(env!("CARGO_TARGET_TMPDIR")).join("py-venv"),
    };
    let python = venv.join("bin/python");
    let has_clients = |p: &Path| {
        Command::new(p)
            .args(["-c", "import influxdb, influxdb_client"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if has_clients(&python) {
        return Ok(python);
    }
    if !python.exists() {
        let out = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .output()
            .context("running python3 -m venv (is python3 installed?)")?;
        if !out.status.success() {
            bail!(
                "python3 -m venv {} failed: {}",
                venv.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let out = Command::new(&python)
        .args(["-m", "pip", "install", "--quiet"])
        .args(PY_PACKAGES)
        .output()
        .context("running pip")?;
    if !out.status.success() || !has_clients(&python) {
        bail!(
            "could not install the Influx Python clients ({}) into {}: {}\n\
             install them there or set STRATA_PY_VENV to a venv that has them",
            PY_PACKAGES.join(" "),
            venv.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(python)
}

/// Writes with both clients: `influxdb` (1.x API) and `influxdb_client` (2.x API, synchronous).
const CLIENT_SCRIPT: &str = r#"
import sys
from influxdb import InfluxDBClient
from influxdb.exceptions import InfluxDBClientError
from influxdb_client import InfluxDBClient as V2Client, Point, WritePrecision
from influxdb_client.client.write_api import SYNCHRONOUS
from influxdb_client.rest import ApiException

host, port, t = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

v1 = InfluxDBClient(host=host, port=port, database="ignored")
ok = v1.write_points([
    {"measurement": "py v1", "tags": {"host": "server 01", "region": "us,west", "k=ey": "a=b"},
     "time": t * 1000 + 123, "fields": {"count": 9007199254740993, "ratio": 0.1, "up": True}},
], time_precision="ms")
assert ok, "write_points returned False"
try:
    v1.write_points([{"measurement": "py v1", "tags": {"host": "x"}, "time": t,
                      "fields": {"text": "a string"}}], time_precision="s")
    print("v1 string: accepted")
except InfluxDBClientError as e:
    print("v1 string:", e.code)

with V2Client(url="http://%s:%d" % (host, port), token="unused", org="any") as v2:
    w = v2.write_api(write_options=SYNCHRONOUS)
    w.write(bucket="ignored", record=Point("py_v2").tag("host", "a b").field("n", -7)
            .field("f", 2.5).time(t * 10**9 + 456789123, WritePrecision.NS))
    w.write(bucket="ignored", record="py_v2,host=c n=8i %d" % t, write_precision=WritePrecision.S)
    try:
        w.write(bucket="ignored", record="py_v2,host=d n=", write_precision=WritePrecision.S)
        print("v2 bad line: accepted")
    except ApiException as e:
        print("v2 bad line:", e.status)
print("done")
"#;

#[test]
fn python_clients_from_pypi_write_exactly() -> anyhow::Result<()> {
    let python = python_with_clients()?;
    let server = Server::start()?;
    let dir = tempfile::tempdir()?;
    let script = dir.path().join("clients.py");
    std::fs::write(&script, CLIENT_SCRIPT)?;
    let out = Command::new(&python)
        .arg(&script)
        .arg(server.addr.ip().to_string())
        .arg(server.addr.port().to_string())
        .arg(T.to_string())
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the client script failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout, "v1 string: 400\nv2 bad line: 400\ndone\n");

    let tags = [
        ("host", "server__x20_01"),
        ("region", "us__x2C_west"),
        ("k__x3D_ey", "a__x3D_b"),
    ];
    let (ts, v) = only_point(&server, "py__x20_v1.count", &tags)?;
    assert_eq!(ts, T * 1000 + 123);
    assert_int(&v, 9_007_199_254_740_993);
    let (_, v) = only_point(&server, "py__x20_v1.ratio", &tags)?;
    assert_float(&v, 0.1);
    let (_, v) = only_point(&server, "py__x20_v1.up", &tags)?;
    assert_int(&v, 1);
    let (ts, v) = only_point(&server, "py_v2.n", &[("host", "a__x20_b")])?;
    assert_eq!(ts, T * 1000 + 456);
    assert_int(&v, -7);
    let (_, v) = only_point(&server, "py_v2.f", &[("host", "a__x20_b")])?;
    assert_float(&v, 2.5);
    let (ts, v) = only_point(&server, "py_v2.n", &[("host", "c")])?;
    assert_eq!(ts, T * 1000);
    assert_int(&v, 8);
    Ok(())
}

#[test]
fn gzip_bodies_and_sync_writes() -> anyhow::Result<()> {
    use std::io::Write as _;
    let server = Server::start()?;
    let body = format!("gz,h=a v=5i {T}\n");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(body.as_bytes())?;
    let gz = gz.finish()?;
    for (path, h) in [
        ("/write?precision=s&sync", "a"),
        ("/api/v2/write?bucket=b&precision=s&sync", "a"),
    ] {
        let (status, _, reply) =
            server.http_bytes("POST", path, "Content-Encoding: gzip\r\n", &gz)?;
        assert_eq!((status, reply.len()), (204, 0), "{path}");
        let (_, v) = only_point(&server, "gz.v", &[("h", h)])?;
        assert_int(&v, 5);
    }
    // A body that is not gzip although it says so.
    let (status, _, _) = server.http_bytes(
        "POST",
        "/write",
        "Content-Encoding: gzip\r\n",
        b"gz,h=a v=1",
    )?;
    assert_eq!(status, 400);
    // Other methods are not allowed.
    assert_eq!(server.http("GET", "/write", b"")?.0, 405);
    assert_eq!(server.http("GET", "/api/v2/write", b"")?.0, 405);
    Ok(())
}
