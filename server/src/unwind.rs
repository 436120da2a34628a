//! Panics turned into errors at the edge of a connection's unit of work.
//!
//! A panic is a bug, but on the ingest path it must not cost a client its connection or a
//! batch it was never told about: a telnet batch or an HTTP request that panics is caught
//! here, counted in `strata_ingest_panics_total`, and answered with an error.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Runs `f`, returning the panic's message if it panics.
///
/// `AssertUnwindSafe`: after a panic the caller drops or resets whatever `f` was changing (a
/// connection's caches, a request's state); the storage behind it takes no lock that a panic
/// can poison (parking_lot's do not poison).
pub(crate) fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| message(&*p))
}

/// A panic's message: its `&str` or `String` payload.
fn message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// Polls a future and turns a panic in any of its polls into `Err(message)`; it is not
/// polled again after one.
pub(crate) struct CatchUnwind<F: Future>(Pin<Box<F>>);

impl<F: Future> CatchUnwind<F> {
    pub(crate) fn new(future: F) -> CatchUnwind<F> {
        CatchUnwind(Box::pin(future))
    }
}

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, String>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.get_mut().0.as_mut();
        match catch(|| inner.poll(cx)) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(m) => Poll::Ready(Err(m)),
        }
    }
}

impl<F: Future> std::fmt::Debug for CatchUnwind<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatchUnwind").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_their_messages() {
        assert_eq!(catch(|| 1), Ok(1));
        assert_eq!(catch(|| -> u8 { panic!("boom") }), Err("boom".to_owned()));
        let n = 3;
        assert_eq!(
            catch(|| -> u8 { panic!("boom {n}") }),
            Err("boom 3".to_owned())
        );
    }

    #[tokio::test]
    async fn a_future_that_panics_gives_an_error() {
        assert_eq!(CatchUnwind::new(async { 7 }).await, Ok(7));
        let panics = async {
            tokio::task::yield_now().await;
            if true {
                panic!("in a later poll");
            }
            7
        };
        assert_eq!(
            CatchUnwind::new(panics).await,
            Err("in a later poll".to_owned())
        );
    }
}
