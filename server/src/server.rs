//! The listener: one port, two protocols. The first byte of a connection decides, as in
//! OpenTSDB: an upper-case ASCII letter starts an HTTP request (every method is one), anything
//! else is the telnet line protocol. With `--tls-cert`, a TLS handshake record is a third
//! choice, and inside TLS the first byte decides again ([`crate::tls`]).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tracing::{debug, info, warn};

use crate::config::Config;
use crate::metrics::Metrics;
use crate::shared::Shared;
use crate::{http, telnet};

/// How often retention is applied without new writes. Rows expire by the hour, so a pass
/// an hour frees each expired hour about an hour late at most; the pass itself only compares
/// file properties unless something has expired.
const EXPIRE_INTERVAL: Duration = Duration::from_secs(3600);

/// Serves until SIGINT or SIGTERM, then stops accepting, lets connections finish, and returns.
pub async fn serve(config: Config, tsdb: strata_tsdb::Tsdb) -> anyhow::Result<()> {
    let addr = (config.bind, config.port);
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {}:{}", config.bind, config.port))?;
    let signal = shutdown_signal()?;
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("installing the SIGHUP handler")?;
    let auth = match &config.auth_file {
        Some(path) => Some(crate::auth::AuthFile::load(path)?),
        None => None,
    };
    let tls = match &config.tls {
        Some(files) => Some(crate::tls::Tls::load(&files.cert, &files.key)?),
        None => None,
    };
    if let Some(warning) = exposure_warning(&config) {
        warn!(bind = %config.bind, "{warning}");
    }
    let local = listener.local_addr()?;
    // Tests start the server on port 0 and read the real port from this line.
    info!(%local, data_dir = %config.data_dir.display(), "listening");
    println!("strata listening on {local}");
    let (stop_tx, stop_rx) = watch::channel(false);
    let limit = Arc::new(Semaphore::new(config.max_connections));
    // Connections over the limit waiting for a slot: at most as many again.
    let waiting = Arc::new(Semaphore::new(config.max_connections));
    let parse = strata_ingest::ParseConfig::new();
    let shared = Arc::new(Shared {
        config,
        tsdb: tsdb.clone(),
        parse,
        shutdown: stop_rx,
        metrics: Metrics::new().context("registering metrics")?,
        host: crate::stats::hostname(),
        remote_write_series: strata_ingest::KnownSeries::new(),
        influx_series: strata_ingest::KnownLines::new(),
        auth,
        tls,
    });
    let background = Background::start(&shared)?;
    let mut tasks = tokio::task::JoinSet::new();
    tokio::pin!(signal);
    loop {
        tokio::select! {
            _ = &mut signal => break,
            Some(()) = hangup.recv() => tokio::task::block_in_place(|| reload(&shared)),
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(x) => x,
                    Err(e) => {
                        warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let shared = shared.clone();
                match limit.clone().try_acquire_owned() {
                    Ok(permit) => {
                        tasks.spawn(serve_counted(stream, peer, permit, shared));
                    }
                    // Over the limit: wait for a slot (see `slot_wait`), unless as many
                    // connections wait already.
                    Err(_) => match waiting.clone().try_acquire_owned() {
                        Ok(queued) => {
                            let limit = limit.clone();
                            tasks.spawn(async move {
                                let slot = wait_for_slot(&limit, &shared).await;
                                drop(queued);
                                match slot {
                                    Some(permit) => {
                                        serve_counted(stream, peer, permit, shared).await;
                                    }
                                    None => refuse(stream, peer, &shared).await,
                                }
                            });
                        }
                        Err(_) => {
                            tasks.spawn(async move { refuse(stream, peer, &shared).await });
                        }
                    },
                }
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    info!("shutting down: no new connections; waiting for open ones");
    let _ = stop_tx.send(true);
    let drain = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(Duration::from_secs(10), drain)
        .await
        .is_err()
    {
        warn!("connections still open after 10 s; closing them");
    }
    drop(shared);
    tokio::task::block_in_place(|| drop(background));
    tokio::task::block_in_place(|| tsdb.sync()).context("syncing the WAL at shutdown")?;
    info!("stopped");
    Ok(())
}

/// The server's background threads; dropping them stops them. A writer compacts rows (compat
/// exception 13) and applies retention; a read replica follows the writer's manifest, and
/// the writer's compactions and expiry reach it that way.
struct Background {
    _rowcompactor: Option<strata_tsdb::RowCompactor>,
    _expirer: Option<strata_tsdb::Expirer>,
    _refresher: Option<strata_tsdb::Refresher>,
}

impl Background {
    fn start(shared: &Shared) -> anyhow::Result<Background> {
        let tsdb = &shared.tsdb;
        if let Some(store) = shared.config.store.as_ref().filter(|s| s.read_only) {
            let refresher = tsdb
                .spawn_refresher(store.refresh)
                .context("starting the replica's refresh thread")?;
            return Ok(Background {
                _rowcompactor: None,
                _expirer: None,
                _refresher: Some(refresher),
            });
        }
        // Row compaction runs in small paced passes.
        let rowcompactor = tsdb
            .spawn_rowcompactor(Duration::from_secs(10))
            .context("starting the row compactor")?;
        let expirer = match tsdb.retention().is_forever() {
            true => None,
            false => Some(
                tsdb.spawn_expirer(EXPIRE_INTERVAL)
                    .context("starting the retention thread")?,
            ),
        };
        Ok(Background {
            _rowcompactor: Some(rowcompactor),
            _expirer: expirer,
            _refresher: None,
        })
    }
}

/// The warning for a server that any host may reach and that asks for no credentials.
fn exposure_warning(config: &Config) -> Option<&'static str> {
    (config.auth_file.is_none() && !config.bind.is_loopback()).then_some(
        "authentication is off and the server listens beyond this host: any client that \
         reaches the port can write, read and delete data; set --auth-file",
    )
}

/// Reads the auth file and the TLS pair again (SIGHUP). What does not load is logged and the
/// old one stays in use; connections already open keep what they started with.
fn reload(shared: &Shared) {
    if let Some(auth) = &shared.auth {
        match auth.reload() {
            Ok(()) => info!(file = %auth.path().display(), "auth file reloaded"),
            Err(e) => tracing::error!(
                error = format!("{e:#}"),
                "auth file not reloaded; the old tokens stay in use"
            ),
        }
    }
    if let Some(tls) = &shared.tls {
        match tls.reload() {
            Ok(()) => info!("TLS certificate and key reloaded"),
            Err(e) => tracing::error!(
                error = format!("{e:#}"),
                "TLS certificate and key not reloaded; the old pair stays in use"
            ),
        }
    }
}

/// How long a connection over `max_connections` waits for a slot before it is refused: twice
/// the header timeout, as a slot held by a client that sends nothing or half a header comes
/// free within one. With no header timeout, it is refused at once, as OpenTSDB does.
fn slot_wait(config: &Config) -> Duration {
    config.header_timeout.map_or(Duration::ZERO, |t| t * 2)
}

/// A slot for a connection over the limit, once one comes free within [`slot_wait`]; `None`
/// if none does, or the server shuts down.
async fn wait_for_slot(
    limit: &Arc<Semaphore>,
    shared: &Shared,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    let mut shutdown = shared.shutdown.clone();
    tokio::select! {
        permit = tokio::time::timeout(slot_wait(&shared.config), limit.clone().acquire_owned()) => {
            permit.ok()?.ok()
        }
        _ = shutdown.changed() => None,
    }
}

/// Serves a connection that holds a slot of `max_connections`, counting it as open.
async fn serve_counted(
    stream: TcpStream,
    peer: std::net::SocketAddr,
    permit: tokio::sync::OwnedSemaphorePermit,
    shared: Arc<Shared>,
) {
    shared.metrics.connections_open.inc();
    let open = shared.metrics.connections_open.clone();
    let _open = scopeguard(move || open.dec());
    if let Err(e) = handle(stream, shared).await {
        debug!(%peer, error = %e, "connection ended with an error");
    }
    drop(permit);
}

async fn refuse(mut stream: TcpStream, peer: std::net::SocketAddr, shared: &Shared) {
    use tokio::io::AsyncWriteExt;
    warn!(%peer, "connection limit reached; refusing connection");
    shared.metrics.connections_refused.inc();
    let _ = stream.write_all(b"error: too many connections\n").await;
}

async fn handle(stream: TcpStream, shared: Arc<Shared>) -> anyhow::Result<()> {
    stream.set_nodelay(true)?;
    let mut first = [0u8; 1];
    // A client must say something within the header timeout: a socket that sends nothing
    // would otherwise hold its slot of `max_connections` for ever.
    let Some(peeked) = within_header_timeout(stream.peek(&mut first), &shared).await else {
        return Ok(());
    };
    if peeked? == 0 {
        // A probe that opened and closed the connection.
        return Ok(());
    }
    if let Some(tls) = &shared.tls {
        if crate::tls::starts_tls(first[0]) {
            let acceptor = tls.acceptor();
            return serve_tls(stream, acceptor, shared).await;
        }
        if shared.config.tls_required {
            return refuse_plaintext(stream, first[0], &shared).await;
        }
    }
    if count_protocol(first[0], &shared) == crate::metrics::HTTP {
        http::serve_connection(stream, shared).await
    } else {
        telnet::serve_connection(stream, shared).await
    }
}

/// What `start` gives if it is done within the header timeout; `None` if the time runs out
/// (counted) or the server shuts down first.
async fn within_header_timeout<T>(
    start: impl std::future::Future<Output = T>,
    shared: &Shared,
) -> Option<T> {
    let mut shutdown = shared.shutdown.clone();
    let timed = async {
        match shared.config.header_timeout {
            Some(t) => tokio::time::timeout(t, start).await.ok(),
            None => Some(start.await),
        }
    };
    let done = tokio::select! {
        done = timed => done,
        _ = shutdown.changed() => return None,
    };
    if done.is_none() {
        shared
            .metrics
            .connections_timed_out
            .with_label_values(&[crate::metrics::phase::FIRST_BYTE])
            .inc();
    }
    done
}

/// The protocol a connection whose first byte is `first` speaks, counted.
fn count_protocol(first: u8, shared: &Shared) -> &'static str {
    let protocol = if first.is_ascii_uppercase() {
        crate::metrics::HTTP
    } else {
        crate::metrics::TELNET
    };
    shared
        .metrics
        .connections
        .with_label_values(&[protocol])
        .inc();
    protocol
}

/// Completes a TLS handshake and serves HTTP or telnet inside it, told apart by the first
/// byte as on a plain connection. The handshake and that byte must come within the header
/// timeout, like a plain connection's first byte.
async fn serve_tls(
    stream: TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
    shared: Arc<Shared>,
) -> anyhow::Result<()> {
    use tokio::io::AsyncBufReadExt;
    let start = async {
        // Peeking through a buffer keeps the first byte for the protocol that reads it.
        let mut io = tokio::io::BufReader::new(acceptor.accept(stream).await?);
        let first = io.fill_buf().await?.first().copied();
        anyhow::Ok((io, first))
    };
    let Some(started) = within_header_timeout(start, &shared).await else {
        return Ok(());
    };
    let (io, first) = started.context("TLS handshake")?;
    let Some(first) = first else {
        return Ok(());
    };
    if count_protocol(first, &shared) == crate::metrics::HTTP {
        http::serve_connection(io, shared).await
    } else {
        telnet::serve_stream(io, shared).await
    }
}

/// Answers a plaintext connection when TLS is required: an HTTP client gets a 400 with the
/// error JSON, a telnet client one error line.
async fn refuse_plaintext(mut stream: TcpStream, first: u8, shared: &Shared) -> anyhow::Result<()> {
    use tokio::io::AsyncWriteExt;
    if count_protocol(first, shared) == crate::metrics::HTTP {
        return http::refuse_plaintext(stream).await;
    }
    stream
        .write_all(b"error: this server takes only TLS connections\n")
        .await?;
    stream.shutdown().await?;
    drain(&mut stream).await;
    Ok(())
}

/// Reads what the peer still sends, for a moment, before the connection closes: closing with
/// unread bytes resets it, and a reset can drop the reply before the peer reads it.
pub(crate) async fn drain(stream: &mut (impl tokio::io::AsyncRead + Unpin)) {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 4096];
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
    })
    .await;
}

/// Runs `f` when dropped, so a count is undone however a task ends.
fn scopeguard(f: impl FnOnce()) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

/// Waits for SIGINT or SIGTERM. The handlers are installed when this is called, not when the
/// future is first polled, so a signal sent right after start-up is never missed.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_open_server_beyond_loopback_is_warned_about() -> anyhow::Result<()> {
        let at = |bind: &str, auth: Option<&str>| -> anyhow::Result<bool> {
            let config = Config::resolve(&crate::config::ServeArgs {
                bind: Some(bind.parse()?),
                auth_file: auth.map(Into::into),
                ..crate::config::ServeArgs::default()
            })?;
            Ok(exposure_warning(&config).is_some())
        };
        assert!(at("0.0.0.0", None)?);
        assert!(at("10.1.2.3", None)?);
        assert!(at("::", None)?);
        assert!(!at("127.0.0.1", None)?);
        assert!(!at("::1", None)?);
        assert!(!at("0.0.0.0", Some("/etc/strata/tokens.toml"))?);
        Ok(())
    }
}
