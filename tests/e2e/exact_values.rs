//! Every value comes back exactly as written (exception #14 of docs/compat.md): integers with
//! all 64 bits and their type, doubles with their bits, through telnet and HTTP, raw cells,
//! compacted blocks beside newer raw cells, and a restart. The JSON number tokens are compared
//! as text, so a rounded value labelled an integer cannot pass.

use std::io::{BufRead, BufReader, Write};

use crate::harness::Server;

/// An hour in the past, on a minute and an hour boundary, in seconds.
const T: i64 = 1_700_000_000 - 1_700_000_000 % 3600;

/// The values written, with the token the JSON answer must hold for each.
const VALUES: [(&str, &str); 9] = [
    ("1", "1"),
    ("2.5", "2.5"),
    ("9007199254740993", "9007199254740993"),
    ("-1759178098916822391", "-1759178098916822391"),
    ("-9223372036854775808", "-9223372036854775808"),
    ("9223372036854775807", "9223372036854775807"),
    ("0.1", "0.1"),
    ("1e300", "1.0E300"),
    ("7", "7"),
];

/// Two integer series whose exact sum, i64::MAX, needs all 63 bits.
const HALVES: [i64; 2] = [4_611_686_018_427_387_904, 4_611_686_018_427_387_903];

/// Sends telnet lines and waits until they are stored (`version` answers after them).
fn telnet(server: &Server, lines: &[String]) -> anyhow::Result<()> {
    let mut conn = server.connect()?;
    let mut reader = BufReader::new(conn.try_clone()?);
    for l in lines {
        conn.write_all(l.as_bytes())?;
    }
    conn.write_all(b"version\n")?;
    let mut line = String::new();
    reader.read_line(&mut line)?;
    anyhow::ensure!(line.starts_with("net.opentsdb"), "telnet replied {line:?}");
    Ok(())
}

/// Writes `VALUES[range]` at `T + 10 i` to `exact.telnet` over telnet and to `exact.http` over
/// HTTP, and the two halves to `exact.wide` at `T + 60 i` (one point a minute).
fn write(server: &Server, range: std::ops::Range<usize>) -> anyhow::Result<()> {
    let mut lines = Vec::new();
    let mut json = Vec::new();
    for i in range {
        let ts = T + 10 * i as i64;
        let v = VALUES[i].0;
        lines.push(format!("put exact.telnet {ts} {v} host=a\n"));
        json.push(format!(
            r#"{{"metric":"exact.http","timestamp":{ts},"value":{v},"tags":{{"host":"a"}}}}"#
        ));
        for (h, half) in ["x", "y"].iter().zip(HALVES) {
            let ts = T + 60 * i as i64;
            lines.push(format!("put exact.wide {ts} {half} host={h}\n"));
        }
    }
    telnet(server, &lines)?;
    let body = format!("[{}]", json.join(","));
    let (status, reply) = server.http("POST", "/api/put?details", body.as_bytes())?;
    anyhow::ensure!(status == 200, "put: {status} {reply}");
    anyhow::ensure!(reply.contains(r#""failed":0"#), "put: {reply}");
    Ok(())
}

/// The `dps` of each result of a query, as (key, number token) pairs in order.
fn dps_tokens(body: &str) -> anyhow::Result<Vec<Vec<(String, String)>>> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(at) = rest.find("\"dps\":{") {
        let after = &rest[at + 7..];
        let end = after
            .find('}')
            .ok_or_else(|| anyhow::anyhow!("no dps end: {body}"))?;
        let mut points = Vec::new();
        for entry in after[..end].split(',').filter(|e| !e.is_empty()) {
            let (k, v) = entry
                .split_once(':')
                .ok_or_else(|| anyhow::anyhow!("bad dps entry {entry:?}"))?;
            points.push((k.trim_matches('"').to_owned(), v.to_owned()));
        }
        out.push(points);
        rest = &after[end..];
    }
    Ok(out)
}

fn query(server: &Server, m: &str) -> anyhow::Result<Vec<Vec<(String, String)>>> {
    let path = format!("/api/query?start={T}&end={}&m={m}", T + 3599);
    let (status, body) = server.http("GET", &path, b"")?;
    anyhow::ensure!(status == 200, "{path}: {status} {body}");
    dps_tokens(&body)
}

/// The nearest double to `half_units / 2`, in Java's form (the exact value is a half-integer
/// that an i64 holds doubled; doubling commutes with rounding to a double).
fn nearest_half(half_units: i64) -> String {
    java_double(half_units as f64 / 2.0)
}

/// Java's `Double.toString` for the magnitudes used here.
fn java_double(v: f64) -> String {
    let s = format!("{v:E}");
    let (mantissa, exp) = s.split_once('E').unwrap_or((&s, "0"));
    let mantissa = if mantissa.contains('.') {
        mantissa.to_owned()
    } else {
        format!("{mantissa}.0")
    };
    format!("{mantissa}E{exp}")
}

/// Checks every query of the contract against the points written so far (`n` values).
fn check(server: &Server, n: usize, stage: &str) -> anyhow::Result<()> {
    let expect: Vec<(String, String)> = VALUES[..n]
        .iter()
        .enumerate()
        .map(|(i, (_, token))| ((T + 10 * i as i64).to_string(), (*token).to_owned()))
        .collect();
    for metric in ["exact.telnet", "exact.http"] {
        // A single series: `none` returns each point as written, and so do the functions that
        // are the identity on one value.
        for agg in ["none", "sum", "max", "min", "first", "last", "zimsum"] {
            let got = query(server, &format!("{agg}:{metric}"))?;
            anyhow::ensure!(got == [expect.clone()], "{stage} {agg}:{metric}: {got:?}");
        }
        // 1m-sum: the first minute mixes integers and doubles, so it is a double: the exact sum
        // -1750170899662081395.5, rounded once; the second is 0.1 + 1e300 + 7.
        let got = query(server, &format!("sum:1m-sum:{metric}"))?;
        let mut want = vec![(T.to_string(), nearest_half(-3_500_341_799_324_162_791))];
        if n > 6 {
            want.push(((T + 60).to_string(), "1.0E300".to_owned()));
        }
        if n >= 6 {
            anyhow::ensure!(got == [want], "{stage} 1m-sum:{metric}: {got:?}");
        }
    }
    // Two integer series: their sum is i64::MAX exactly, raw and downsampled (one point a
    // minute); max is the larger half exactly.
    let times = |v: &str| -> Vec<(String, String)> {
        (0..n)
            .map(|i| ((T + 60 * i as i64).to_string(), v.to_owned()))
            .collect()
    };
    for m in [
        "sum:exact.wide",
        "sum:1m-sum:exact.wide",
        "zimsum:1m-max:exact.wide",
    ] {
        let got = query(server, m)?;
        anyhow::ensure!(
            got == [times("9223372036854775807")],
            "{stage} {m}: {got:?}"
        );
    }
    let got = query(server, "max:exact.wide")?;
    anyhow::ensure!(
        got == [times("4611686018427387904")],
        "{stage} max:exact.wide: {got:?}"
    );
    // /api/query/last answers the newest point's value as written, as a string.
    let (status, body) = server.http(
        "GET",
        "/api/query/last?timeseries=exact.telnet{host=a}&back_scan=0",
        b"",
    )?;
    anyhow::ensure!(status == 200, "last: {status} {body}");
    let last = VALUES[n - 1].0;
    let last = if last == "1e300" { "1.0E300" } else { last };
    anyhow::ensure!(
        body.contains(&format!(r#""value":"{last}""#)),
        "{stage} last: {body}"
    );
    Ok(())
}

#[test]
fn values_come_back_exactly_as_written() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Server::start_in(dir.path(), &[])?;
    // Raw cells in the memtable.
    write(&server, 0..6)?;
    check(&server, 6, "raw")?;
    // Compacted blocks (row compaction, flush, LSM compaction), then newer raw cells beside
    // them in the same rows.
    let (status, body) = server.http("POST", "/api/admin/compact", b"")?;
    anyhow::ensure!(status == 200, "compact: {status} {body}");
    check(&server, 6, "compacted")?;
    write(&server, 6..9)?;
    check(&server, 9, "blocks and raw cells")?;
    let (status, body) = server.http("POST", "/api/admin/compact", b"")?;
    anyhow::ensure!(status == 200, "compact: {status} {body}");
    check(&server, 9, "compacted again")?;
    // After a restart, from the files alone.
    let status = server.stop()?;
    anyhow::ensure!(status.success(), "strata exited with {status:?}");
    let server = Server::start_in(dir.path(), &[])?;
    check(&server, 9, "restarted")?;
    Ok(())
}
