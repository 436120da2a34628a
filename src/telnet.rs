//! The telnet line protocol on one connection.

use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::server::Shared;
use crate::version;

const COMMANDS: &str = "available commands: stats dropcaches version exit help put \n";

/// Serves telnet commands until the client closes the connection, sends `exit`, or the server
/// shuts down.
pub(crate) async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) -> anyhow::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let mut shutdown = shared.shutdown.clone();
    let max = shared.config.max_line_bytes;
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        let n = tokio::select! {
            n = read_line(&mut read, &mut line, max) => n?,
            _ = shutdown.changed() => return Ok(()),
        };
        let Some(n) = n else {
            write
                .write_all(format!("error: line longer than {max} bytes; closing\n").as_bytes())
                .await?;
            return Ok(());
        };
        if n == 0 {
            return Ok(());
        }
        while matches!(line.last(), Some(b'\n' | b'\r')) {
            line.pop();
        }
        let text = String::from_utf8_lossy(&line);
        let command = text.split(' ').next().unwrap_or("");
        let reply = match command {
            "version" => version::telnet_lines(),
            "help" => COMMANDS.to_string(),
            "exit" => return Ok(()),
            "put" | "stats" | "dropcaches" => {
                format!("{command}: not available yet: storage is not wired into the server\n")
            }
            other => format!("unknown command: {other}.  Try `help'.\n"),
        };
        write.write_all(reply.as_bytes()).await?;
    }
}

/// Reads one line into `buf`. `Ok(None)` when the line exceeds `max` bytes.
async fn read_line<R: AsyncBufReadExt + Unpin>(
    read: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Option<usize>> {
    loop {
        let available = read.fill_buf().await?;
        if available.is_empty() {
            return Ok(Some(buf.len()));
        }
        let (take, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        buf.extend_from_slice(&available[..take]);
        read.consume(take);
        if buf.len() > max + 2 {
            return Ok(None);
        }
        if done {
            return Ok(Some(buf.len()));
        }
    }
}
