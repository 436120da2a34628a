//! Answers every HTTP/1.1 request with the same stored body, at once, so that a client's own
//! cost for one answer (its round trip, its header parse and its JSON decode) can be measured
//! apart from any server's work. `benches/peers/q1_floor.py` uses it to put a floor under the
//! peer benchmark's small queries: no OpenTSDB-compatible server can answer Q1 in less time
//! than this tool takes to answer it with Q1's own bytes.
//!
//! ```text
//! cargo run -p strata-benches --release --bin fixed_answer -- --body q1.json --port 4545
//! ```
//!
//! It binds 127.0.0.1 only, serves each connection on a thread of its own with keep-alive, and
//! reads `Content-Length` bodies (the only kind the harness sends). A request it cannot frame
//! closes its connection.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use anyhow::{Context, bail};

/// A request's head may not grow past this; a client that sends more is dropped.
const MAX_HEAD: usize = 64 << 10;

fn main() -> anyhow::Result<()> {
    let mut body_path = None;
    let mut port = 4545u16;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--body" => body_path = args.next(),
            "--port" => port = args.next().context("--port needs a value")?.parse()?,
            other => bail!("unknown argument {other} (--body FILE --port N)"),
        }
    }
    let path = body_path.context("--body FILE is required")?;
    let body = std::fs::read(&path).with_context(|| format!("reading {path}"))?;
    let mut answer = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json; charset=UTF-8\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(&body);
    let answer: &'static [u8] = answer.leak();
    let listener = TcpListener::bind(("127.0.0.1", port))?;
    eprintln!(
        "fixed_answer: {} body bytes on 127.0.0.1:{port}",
        body.len()
    );
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        std::thread::spawn(move || {
            if let Err(e) = serve(stream, answer) {
                eprintln!("fixed_answer: connection closed: {e}");
            }
        });
    }
    Ok(())
}

/// Answers each whole request on `stream` until the client closes it.
fn serve(mut stream: TcpStream, answer: &[u8]) -> anyhow::Result<()> {
    stream.set_nodelay(true)?;
    let mut buf = vec![0u8; 64 << 10];
    let mut pending = Vec::new();
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        pending.extend_from_slice(&buf[..n]);
        while let Some(len) = request_len(&pending)? {
            pending.drain(..len);
            stream.write_all(answer)?;
        }
        if pending.len() > MAX_HEAD {
            bail!("request head over {MAX_HEAD} bytes");
        }
    }
}

/// The length of the first whole request in `bytes` (head and `Content-Length` body), or
/// `None` while it is still incomplete.
fn request_len(bytes: &[u8]) -> anyhow::Result<Option<usize>> {
    let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = std::str::from_utf8(&bytes[..end]).context("request head is not UTF-8")?;
    let mut body_len = 0usize;
    for line in head.split("\r\n").skip(1) {
        if let Some((name, value)) = line.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            body_len = value.trim().parse().context("bad Content-Length")?;
        }
    }
    let total = end + 4 + body_len;
    Ok((bytes.len() >= total).then_some(total))
}

#[cfg(test)]
mod tests {
    use super::request_len;

    #[test]
    fn frames_requests_by_head_and_content_length() {
        let get = b"GET /api/version HTTP/1.1\r\nHost: x\r\n\r\n";
        assert_eq!(request_len(get).ok().flatten(), Some(get.len()));
        let post = b"POST /api/query HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}GET";
        assert_eq!(request_len(post).ok().flatten(), Some(post.len() - 3));
        assert_eq!(request_len(&post[..post.len() - 4]).ok().flatten(), None);
        assert!(request_len(b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n").is_err());
    }
}
