//! The read deadlines of an HTTP connection: a request's header must arrive within the
//! header timeout of its first byte, and a keep-alive connection may wait for its next request
//! for the idle timeout.
//!
//! hyper has one timer for both, its header read timeout, and starts it when it begins to wait
//! for a request: on a keep-alive connection that is as soon as the previous response is out,
//! so on its own it would either close idle connections after the short header timeout or let
//! a header trickle in for as long as the idle timeout. So hyper gets a timer of ours
//! ([`ReadTimer`]): the connection's reads are watched ([`WatchedIo`]), and a wait for a
//! request ends at the idle deadline while no byte of it has come, and at the header deadline
//! once one has.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use prometheus::IntCounter;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// No read yet, in [`Reads::first`].
const NONE: u64 = u64::MAX;

/// When the connection's reads happened, as [`WatchedIo`] sees them.
#[derive(Debug)]
struct Reads {
    /// The connection's start, which `first` counts from.
    base: Instant,
    /// Nanoseconds after `base` of the first read since the current wait for a request
    /// began, or [`NONE`].
    first: AtomicU64,
}

impl Reads {
    fn first(&self) -> Option<Instant> {
        match self.first.load(Ordering::Relaxed) {
            NONE => None,
            ns => Some(self.base + Duration::from_nanos(ns)),
        }
    }

    fn note_read(&self) {
        if self.first.load(Ordering::Relaxed) == NONE {
            let ns = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(NONE - 1);
            self.first.store(ns, Ordering::Relaxed);
        }
    }
}

/// A connection's socket, noting when bytes are read.
#[derive(Debug)]
pub(crate) struct WatchedIo<T> {
    inner: T,
    reads: Arc<Reads>,
}

impl<T: AsyncRead + Unpin> AsyncRead for WatchedIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.reads.note_read();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WatchedIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// The limits, and the counters of the connections they close.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// From a request's first byte to the end of its header.
    pub(crate) header: Option<Duration>,
    /// For a request's first byte.
    pub(crate) idle: Option<Duration>,
    pub(crate) header_timeouts: IntCounter,
    pub(crate) idle_timeouts: IntCounter,
}

/// The timer hyper's header read timeout runs on (see the module doc). hyper uses its timer
/// for nothing else on a server connection.
#[derive(Debug, Clone)]
pub(crate) struct ReadTimer {
    reads: Arc<Reads>,
    limits: Arc<Limits>,
}

/// Wraps `io` and makes the timer that watches its reads.
pub(crate) fn watch<T>(io: T, limits: Limits) -> (WatchedIo<T>, ReadTimer) {
    let reads = Arc::new(Reads {
        base: Instant::now(),
        first: AtomicU64::new(NONE),
    });
    let timer = ReadTimer {
        reads: reads.clone(),
        limits: Arc::new(limits),
    };
    (WatchedIo { inner: io, reads }, timer)
}

impl ReadTimer {
    /// A wait for a request that starts now. hyper's own deadline is ignored: the limits
    /// decide.
    fn request_wait(&self) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.reads.first.store(NONE, Ordering::Relaxed);
        Box::pin(RequestWait {
            timer: self.clone(),
            started: Instant::now(),
            sleep: Box::pin(tokio::time::sleep(Duration::ZERO)),
        })
    }
}

impl hyper::rt::Timer for ReadTimer {
    fn sleep(&self, _: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.request_wait()
    }

    fn sleep_until(&self, _: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.request_wait()
    }
}

/// Ends when the request being waited for is late (see the module doc).
struct RequestWait {
    timer: ReadTimer,
    started: Instant,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl hyper::rt::Sleep for RequestWait {}

impl Future for RequestWait {
    type Output = ();

    /// hyper polls this each time it finds the request's header incomplete, so after every
    /// read: the deadline moves from idle to header as soon as the first byte has come.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let limits = &this.timer.limits;
        let (deadline, timeouts) = match this.timer.reads.first() {
            None => (limits.idle.map(|d| this.started + d), &limits.idle_timeouts),
            Some(first) => (limits.header.map(|d| first + d), &limits.header_timeouts),
        };
        // No limit in this phase: hyper polls again after the next read.
        let Some(deadline) = deadline else {
            return Poll::Pending;
        };
        let deadline = tokio::time::Instant::from_std(deadline);
        if this.sleep.deadline() != deadline {
            this.sleep.as_mut().reset(deadline);
        }
        match this.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                timeouts.inc();
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
