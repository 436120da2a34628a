//! The telnet line protocol on one connection.
//!
//! Lines are read in chunks; every complete `put` line in a chunk is parsed and the chunk's good
//! points go to storage in one write (two when some of their series are new to the
//! connection). The points of known series are only queued (`Tsdb::write_series`): they become
//! readable shortly after, in order, and always before the connection's next reply, as a reply
//! first waits for them. The next chunk is read only after the writes return, and the queue is
//! bounded, so a stalled engine stops the socket from being read (backpressure) instead of
//! buffering without bound. Replies keep the order of the lines that caused them.
//!
//! A connection remembers the series it has sent, by the text of the metric and tags exactly
//! as sent: clients send a series' tags the same way every time. A line whose text it knows
//! skips the tag parsing, the name checks and the series lookup, and is written through the
//! series' [`strata_tsdb::SeriesHandle`]; any other line takes the full path once.

use std::sync::Arc;

use bytes::BytesMut;
use strata_ingest::{
    Command, LineSplitter, check_units, parse_command, parse_put_head, parse_put_line,
};
use strata_tsdb::{ErrorKind, PointRef, SeriesPoint, Tsdb, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::auth::{Role, Roles};
use crate::shared::Shared;
use crate::unwind::CatchUnwind;
use crate::version;

mod known;

use known::KnownSeries;

/// Bytes read from the socket at a time. A chunk's puts become one storage write.
const READ_CHUNK: usize = 64 << 10;
/// A connection lets its worker's other tasks run, between two chunks, once this long has
/// passed since it last did: a bound on how long it keeps them waiting.
const YIELD_AFTER: std::time::Duration = std::time::Duration::from_micros(300);
/// How long a reply may wait for the peer to read it. A collector that never reads (tcollector
/// reads only its `version` check) fills its receive buffer with error replies over time; were
/// the reply to wait for ever, the connection would stop reading its puts and the collector's
/// sends would block in turn. Past this the connection stops replying and goes on reading.
const REPLY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// Serves telnet commands until the client closes the connection, sends `exit`, or the server
/// shuts down.
pub(crate) async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) -> anyhow::Result<()> {
    let (read, write) = stream.into_split();
    serve_lines(read, write, shared).await
}

/// [`serve_connection`] over any stream, such as a TLS one.
pub(crate) async fn serve_stream<S>(stream: S, shared: Arc<Shared>) -> anyhow::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (read, write) = tokio::io::split(stream);
    serve_lines(read, write, shared).await
}

/// Serves the lines read from `read`, replying on `write`.
async fn serve_lines<R, W>(mut read: R, mut write: W, shared: Arc<Shared>) -> anyhow::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut shutdown = shared.shutdown.clone();
    let idle = shared.config.telnet_idle_timeout;
    let mut splitter = LineSplitter::new(shared.config.max_line_bytes);
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    // The lines of one read: their ranges in the read's chunk, and the slices (an empty
    // vector between reads; see [`recycle`]).
    let mut ranges = Vec::new();
    let mut lines_buf: Vec<&'static [u8]> = Vec::new();
    let mut session = Session::new(shared.clone());
    let mut ran_since = std::time::Instant::now();
    loop {
        // A read error (a reset) ends the connection like a close does, and the whole lines
        // read before it are still stored; an unterminated tail is dropped then, as it may be
        // cut anywhere.
        // A connection idle past `telnet_idle_timeout_ms` is closed like a reset: a line it
        // left unterminated is dropped.
        let read_or_idle = async {
            match idle {
                Some(idle) => tokio::time::timeout(idle, read.read_buf(&mut buf)).await,
                None => Ok(read.read_buf(&mut buf).await),
            }
        };
        let (n, reset) = tokio::select! {
            n = read_or_idle => match n {
                Ok(Ok(n)) => (n, false),
                Ok(Err(_)) => (0, true),
                Err(_) => {
                    shared
                        .metrics
                        .connections_timed_out
                        .with_label_values(&[crate::metrics::phase::TELNET_IDLE])
                        .inc();
                    (0, true)
                }
            },
            _ = shutdown.changed() => (0, false),
        };
        let eof = n == 0;
        let (chunk, mut too_long) = splitter.split(&mut buf, &mut ranges);
        let mut last = None;
        if eof && !reset && too_long.is_none() {
            // Clients may close right after a last line that has no terminator.
            match splitter.finish(&mut buf) {
                Ok(line) => last = line,
                Err(e) => too_long = Some(e),
            }
        }
        let mut lines: Vec<&[u8]> = recycle(std::mem::take(&mut lines_buf));
        lines.extend(ranges.iter().map(|r| &chunk[r.clone()]));
        lines.extend(last.as_deref());
        // A panic outside the put batches (which `store_puts` guards) still leaves the
        // connection open: counted, answered with an error line, the series cache dropped.
        let handled = CatchUnwind::new(session.handle_lines(&lines, &mut write)).await;
        let keep_going = match handled {
            Ok(keep_going) => keep_going,
            Err(panic) => {
                session.count_panic(&panic, "handling telnet lines panicked");
                session.known = KnownSeries::default();
                session.reply.push_str(INTERNAL_ERROR_LINES_REPLY);
                session.send(&mut write).await;
                true
            }
        };
        lines_buf = recycle(lines);
        if let Some(e) = too_long {
            session.reply.push_str(&format!("{e}\n"));
            session.send(&mut write).await;
            return Ok(());
        }
        if eof || !keep_going {
            session.settle();
            session.send(&mut write).await;
            return Ok(());
        }
        if buf.capacity() - buf.len() < READ_CHUNK / 4 {
            buf.reserve(READ_CHUNK);
        }
        // A bulk sender has the next chunk ready at once, and tokio's budget lets a task make
        // 128 reads before it must yield: that held the worker, and every query behind it,
        // for tens of milliseconds.
        if ran_since.elapsed() >= YIELD_AFTER {
            tokio::task::yield_now().await;
            ran_since = std::time::Instant::now();
        }
    }
}

struct Session {
    shared: Arc<Shared>,
    /// Put lines waiting for the next storage write: an empty vector between calls of
    /// [`Session::handle_lines`] (see [`recycle`]).
    puts_buf: Vec<&'static [u8]>,
    /// Reply text waiting to be sent.
    reply: String,
    /// False once a reply could not be sent. Senders that close right after their last line
    /// never read replies (tcollector, collectd's `write_tsdb`), so a failed write must not stop the lines
    /// already on their way from being stored: the connection keeps reading until EOF.
    writable: bool,
    /// How long a reply may wait for the peer to take it ([`REPLY_TIMEOUT`]).
    reply_timeout: std::time::Duration,
    /// The parsed points' buffer (with their line numbers), kept empty between batches (see
    /// [`recycle`]).
    parsed_buf: Vec<(usize, strata_ingest::PointRef<'static>)>,
    /// The storage points' buffer, kept empty between batches.
    points_buf: Vec<PointRef<'static>>,
    /// The series this connection has sent.
    known: KnownSeries,
    /// Points of known series, kept empty between batches.
    known_buf: Vec<KnownPoint>,
    /// Their storage form, kept empty between batches.
    handle_buf: Vec<SeriesPoint<'static>>,
    /// A line's series text, as [`KnownSeries`] keys it.
    key: Vec<u8>,
    /// Whether `put` lines are taken: always when authentication is off, else once an `auth`
    /// line named a client with the `write` role.
    may_put: bool,
    /// The roles the last `auth` line gave; `None` before one names a client (and always
    /// when authentication is off, when every command is allowed).
    roles: Option<Roles>,
    /// Panics to raise in the next batches, for the tests of [`Session::store_puts`].
    #[cfg(test)]
    inject_panics: u32,
}

/// The reply to a read whose lines could not all be handled because of a bug (a panic).
const INTERNAL_ERROR_LINES_REPLY: &str =
    "error: internal error (logged by the server); some of the last lines were not handled\n";

/// The reply to a put line whose batch could not be stored because of a bug (a panic).
const INTERNAL_ERROR_REPLY: &str =
    "put: storage error: internal error (logged by the server); the point may not be stored\n";

/// A point of a known series, and the line it came from.
struct KnownPoint {
    line: usize,
    series: u32,
    timestamp: i64,
    value: Value,
}

/// An empty vector on `v`'s allocation, for elements of another lifetime: a batch's points
/// borrow its lines, so its buffers cannot outlive it as they are, but their memory can.
/// (`collect` from a vector's own iterator into elements of the same size reuses the
/// allocation; the closure never runs, as `v` is empty.) A batch of a few hundred lines needs
/// a few hundred kB of parsed points (over 500 bytes each, with their inline tags), which were
/// otherwise allocated afresh per batch.
fn recycle<T, U>(mut v: Vec<T>) -> Vec<U> {
    v.clear();
    v.into_iter()
        .map(|_| unreachable!("the vector is empty"))
        .collect()
}

impl Session {
    fn new(shared: Arc<Shared>) -> Session {
        let shared_auth_off = shared.auth.is_none();
        Session {
            shared,
            puts_buf: Vec::new(),
            reply: String::new(),
            writable: true,
            reply_timeout: REPLY_TIMEOUT,
            parsed_buf: Vec::new(),
            points_buf: Vec::new(),
            known: KnownSeries::default(),
            known_buf: Vec::new(),
            handle_buf: Vec::new(),
            key: Vec::new(),
            may_put: shared_auth_off,
            roles: None,
            #[cfg(test)]
            inject_panics: 0,
        }
    }

    /// Handles lines in order. Returns false when the connection should close.
    async fn handle_lines<W: AsyncWrite + Unpin>(
        &mut self,
        lines: &[&[u8]],
        write: &mut W,
    ) -> bool {
        let mut open = true;
        self.shared
            .metrics
            .telnet_commands
            .inc_by(lines.len() as u64);
        let mut puts: Vec<&[u8]> = recycle(std::mem::take(&mut self.puts_buf));
        for &line in lines {
            // The tests of the guard in `serve_lines`.
            #[cfg(test)]
            if line == b"test-panic" {
                panic!("a panic injected by a test");
            }
            let command = parse_command(line);
            if matches!(command, Command::Put(_)) && self.shared.config.mode.writes() {
                if self.may_put {
                    puts.push(line);
                } else {
                    self.store_puts(&mut puts);
                    self.refuse(Role::Write, "put");
                }
                continue;
            }
            self.store_puts(&mut puts);
            let needs = match command {
                Command::Stats => Some((Role::Read, "stats")),
                Command::DropCaches => Some((Role::Admin, "dropcaches")),
                _ => None,
            };
            if let Some((role, name)) = needs
                && !self.has(role)
            {
                self.refuse(role, name);
                continue;
            }
            match command {
                Command::Unknown(b"auth") if self.shared.auth.is_some() => self.authenticate(line),
                Command::Version => self.reply.push_str(&version::telnet_lines()),
                Command::Help => self.reply.push_str(&strata_ingest::help_reply(
                    false,
                    self.shared.config.mode.writes(),
                )),
                Command::Exit => {
                    open = false;
                    break;
                }
                Command::Stats => self.reply.push_str(&crate::stats::lines_now(&self.shared)),
                Command::DropCaches => {
                    // Reading the UID table again takes a while on a large store.
                    match tokio::task::block_in_place(|| self.shared.tsdb.drop_caches()) {
                        Ok(()) => self.reply.push_str("Caches dropped.\n"),
                        Err(e) => self
                            .reply
                            .push_str(&format!("dropcaches: storage error: {e}\n")),
                    }
                }
                // Shutting the server down from a socket is disabled, as with OpenTSDB's
                // `tsd.no_diediedie`.
                Command::DieDieDie => self
                    .reply
                    .push_str(&strata_ingest::unknown_command_reply(b"diediedie")),
                Command::Unknown(tok) => self
                    .reply
                    .push_str(&strata_ingest::unknown_command_reply(tok)),
                // Only reached in `ro` mode, where OpenTSDB registers no `put`; a read
                // replica says why.
                Command::Put(_) => match self.shared.config.read_replica_of() {
                    Some(store) => self.reply.push_str(&format!(
                        "put: this server is a read replica of {store} and refuses writes; \
                         send them to the writer\n"
                    )),
                    None => self
                        .reply
                        .push_str(&strata_ingest::unknown_command_reply(b"put")),
                },
            }
        }
        self.store_puts(&mut puts);
        self.puts_buf = recycle(puts);
        self.send(write).await;
        open
    }

    /// Whether the connection may do what `role` allows.
    fn has(&self, role: Role) -> bool {
        self.shared.auth.is_none() || self.roles.is_some_and(|r| r.has(role))
    }

    /// Replies to a `command` the connection lacks `role` for: before `auth`, or with a
    /// client that does not have it.
    fn refuse(&mut self, role: Role, command: &str) {
        let (why, kind) = match self.roles {
            None => (
                "authentication required: send `auth <token>` first".to_string(),
                crate::metrics::auth_refusal::UNAUTHENTICATED,
            ),
            Some(_) => (
                format!("the client lacks the '{}' role", role.name()),
                crate::metrics::auth_refusal::FORBIDDEN,
            ),
        };
        self.shared
            .metrics
            .auth_refused
            .with_label_values(&[crate::metrics::TELNET, kind])
            .inc();
        self.reply.push_str(&format!("{command}: {why}\n"));
    }

    /// An `auth` line: names the client whose roles the connection has from now on. A line
    /// that names none takes them away, so a failed attempt never keeps earlier rights.
    fn authenticate(&mut self, line: &[u8]) {
        let found = self
            .shared
            .auth
            .as_ref()
            .and_then(|a| a.current().check_telnet_line(line));
        match found {
            Some(id) => {
                self.roles = Some(id.roles);
                self.may_put = id.roles.has(Role::Write);
                // OpenTSDB's authentication plugin answers the same way.
                self.reply.push_str("AUTH_SUCCESS.\n");
            }
            None => {
                self.roles = None;
                self.may_put = false;
                self.shared
                    .metrics
                    .count_auth_refusal(crate::metrics::TELNET, &crate::auth::AuthError::Unknown);
                self.reply.push_str("AUTH_FAIL\n");
            }
        }
    }

    /// Sends the waiting reply text, if the peer still takes replies. The points of the lines
    /// before are visible first: a client that waits for a reply (say to `version`) can then
    /// read what it wrote.
    async fn send<W: AsyncWrite + Unpin>(&mut self, write: &mut W) {
        if !self.reply.is_empty() {
            self.settle();
        }
        if self.writable && !self.reply.is_empty() {
            let reply = write.write_all(self.reply.as_bytes());
            match tokio::time::timeout(self.reply_timeout, reply).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "telnet peer stopped taking replies; still reading");
                    self.writable = false;
                }
                Err(_) => {
                    tracing::debug!("telnet peer does not read its replies; still reading");
                    self.writable = false;
                }
            }
        }
        self.reply.clear();
    }

    /// Waits until the points written so far are visible (see [`Tsdb::write_series`]). A
    /// failure here is the WAL's, which fails every write after it too.
    fn settle(&mut self) {
        match crate::unwind::catch(|| self.shared.tsdb.settle()) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::error!(error = %e, "queued telnet points were not stored");
                self.reply.push_str(&format!("put: storage error: {e}\n"));
            }
            Err(panic) => {
                self.count_panic(&panic, "waiting for queued telnet points panicked");
                self.reply.push_str(INTERNAL_ERROR_REPLY);
            }
        }
    }

    fn count_panic(&self, panic: &str, what: &str) {
        self.shared
            .metrics
            .ingest_panics
            .with_label_values(&[crate::metrics::TELNET])
            .inc();
        tracing::error!(panic, "{what}");
    }

    /// [`Session::flush_puts`], guarded: the connection stays open whatever happens in it.
    ///
    /// A panic there is a bug, perhaps in the connection's series cache, so the batch is
    /// stored again through the plain path, without that cache. A point stored twice is
    /// stored once (the second write of the same value at the same instant replaces the
    /// first), so nothing is doubled. If that panics too, every put line of the batch is
    /// answered with an error, so the client knows to send it again.
    fn store_puts(&mut self, puts: &mut Vec<&[u8]>) {
        if puts.is_empty() {
            return;
        }
        let reply_len = self.reply.len();
        // While writes stall, off the async worker as a whole: the names of a new series are
        // written before its points, and wait as well.
        let tsdb = self.shared.tsdb.clone();
        let stored =
            crate::unwind::catch(|| crate::shared::write_in_place(&tsdb, || self.flush_puts(puts)));
        let Err(first) = stored else {
            return;
        };
        self.count_panic(
            &first,
            "storing a telnet batch panicked; storing it again without the series cache",
        );
        self.reply.truncate(reply_len);
        self.known = KnownSeries::remembering_none();
        let again = crate::unwind::catch(|| self.flush_puts(puts));
        self.known = KnownSeries::default();
        if let Err(second) = again {
            self.count_panic(
                &second,
                "storing a telnet batch panicked again; refusing it",
            );
            self.reply.truncate(reply_len);
            let counters = &self.shared.metrics.telnet;
            for _ in puts.iter() {
                counters.rejected(crate::metrics::reason::STORAGE);
                self.reply.push_str(INTERNAL_ERROR_REPLY);
            }
            puts.clear();
        }
    }

    /// Parses the waiting put lines and writes their good points: those of known series in
    /// one batch, the others in another.
    fn flush_puts(&mut self, puts: &mut Vec<&[u8]>) {
        if puts.is_empty() {
            return;
        }
        let tsdb: &Tsdb = &self.shared.tsdb;
        let cfg = &self.shared.parse;
        let counters = &self.shared.metrics.telnet;
        counters.received.inc_by(puts.len() as u64);
        let known = &mut self.known;
        known.start_batch(tsdb.series_epoch());
        let mut parsed: Vec<(usize, strata_ingest::PointRef<'_>)> =
            recycle(std::mem::take(&mut self.parsed_buf));
        let mut known_points = std::mem::take(&mut self.known_buf);
        let key = &mut self.key;
        // Each refused line's reply, by line: parse errors are found here, storage errors
        // after the writes, and replies keep the order of the lines.
        let mut failed: Vec<(usize, String)> = Vec::new();
        for (i, &line) in puts.iter().enumerate() {
            let head = parse_put_head(line);
            if let Some(h) = &head
                && let Some(series) = known.find(h.metric, h.tags, key)
            {
                known_points.push(KnownPoint {
                    line: i,
                    series,
                    timestamp: h.timestamp,
                    value: h.value,
                });
                continue;
            }
            let p = match parse_put_line(line, cfg).and_then(check_units) {
                Ok(p) => p,
                Err(e) => {
                    counters.rejected(crate::metrics::rejection_reason(e.rejection()));
                    failed.push((i, e.reply_line()));
                    continue;
                }
            };
            // A series seen for the first time: remembered if storage takes its names, by
            // the text `key` still holds, and the cache has room. (If storage does not take
            // them, the write below says why.)
            if let Some(h) = head
                && let Ok(handle) = tsdb.series_handle(p.metric, p.tags.as_slice())
                && let Some(series) = known.add(key, handle)
            {
                known_points.push(KnownPoint {
                    line: i,
                    series,
                    timestamp: h.timestamp,
                    value: h.value,
                });
                continue;
            }
            parsed.push((i, p));
        }
        let mut stored = 0;
        let mut refused = |line: usize, e: strata_tsdb::Error| {
            counters.rejected(crate::metrics::rejection_reason(e.rejection()));
            let prefix = match e.kind() {
                ErrorKind::Client => "put: illegal argument: ",
                ErrorKind::NotFound => "put: unknown metric: ",
                _ => "put: storage error: ",
            };
            failed.push((line, format!("{prefix}{e}\n")));
        };
        let mut by_handle: Vec<SeriesPoint<'_>> = recycle(std::mem::take(&mut self.handle_buf));
        by_handle.extend(known_points.iter().map(|k| SeriesPoint {
            series: known.handle(k.series),
            timestamp: k.timestamp,
            value: k.value,
        }));
        if !by_handle.is_empty() {
            let results = crate::shared::write_in_place(tsdb, || tsdb.write_series(&by_handle));
            for (k, r) in known_points.iter().zip(results) {
                match r {
                    Ok(()) => stored += 1,
                    Err(e) => refused(k.line, e),
                }
            }
        }
        // Half-way through the batch: the known series' points are written, the others not.
        #[cfg(test)]
        if self.inject_panics > 0 {
            self.inject_panics -= 1;
            panic!("a panic injected by a test");
        }
        let mut points: Vec<PointRef<'_>> = recycle(std::mem::take(&mut self.points_buf));
        points.extend(parsed.iter().map(|(_, p)| p.to_tsdb()));
        if !points.is_empty() {
            let results = crate::shared::write_in_place(tsdb, || tsdb.write(&points));
            for ((line, _), r) in parsed.iter().zip(results) {
                match r {
                    Ok(()) => stored += 1,
                    Err(e) => refused(*line, e),
                }
            }
        }
        failed.sort_by_key(|(line, _)| *line);
        for (_, reply) in failed {
            self.reply.push_str(&reply);
        }
        counters.stored.inc_by(stored);
        self.handle_buf = recycle(by_handle);
        known_points.clear();
        self.known_buf = known_points;
        self.points_buf = recycle(points);
        self.parsed_buf = recycle(parsed);
        puts.clear();
    }
}

#[cfg(test)]
#[path = "telnet/tests.rs"]
mod tests;
