//! [`RetryReads`]: tries a read again when the request failed in transport with a cause that
//! `object_store` does not retry by itself.
//!
//! `object_store` retries a request that failed to connect, or was cut off, but not one whose
//! transport error it cannot classify (its `HttpErrorKind::Unknown`), nor a response body that
//! failed to decode. Against a live S3 endpoint such a failure is nearly always a connection
//! that the server closed just as it was reused, and a second try succeeds; giving up at once
//! fails a query, a replica's refresh or an `fsck` for nothing. Reads are safe to repeat.
//! Writes are passed through untouched: a conditional create that may have reached the store
//! must not be sent twice, and the engine retries a failed flush as a whole.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::stream::{self, BoxStream, StreamExt};
use object_store::client::{HttpError, HttpErrorKind};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};

/// The pauses before each further try of a read; their count is the number of retries.
const BACKOFF: [Duration; 3] = [
    Duration::from_millis(50),
    Duration::from_millis(200),
    Duration::from_millis(800),
];

/// An [`ObjectStore`] that retries reads which failed in transport; see the module docs.
#[derive(Debug)]
pub struct RetryReads {
    inner: Arc<dyn ObjectStore>,
}

impl RetryReads {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn ObjectStore>) -> RetryReads {
        RetryReads { inner }
    }

    /// Runs `op` until it succeeds, fails with an error not worth another try, or has had
    /// every try of [`BACKOFF`].
    async fn retried<T, F, Fut>(&self, mut op: F) -> object_store::Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = object_store::Result<T>>,
    {
        let mut pauses = BACKOFF.iter();
        loop {
            match op().await {
                Err(e) if unretried_transport_error(&e) => match pauses.next() {
                    Some(pause) => {
                        tracing::info!(error = %e, "an object-store read failed in transport; trying again");
                        tokio::time::sleep(*pause).await;
                    }
                    None => return Err(e),
                },
                done => return done,
            }
        }
    }
}

impl fmt::Display for RetryReads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.inner)
    }
}

/// Whether `e` is a transport failure, with no HTTP status, of a kind that `object_store` did
/// not retry itself: those it does retry have had their tries.
fn unretried_transport_error(e: &object_store::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(http) = s.downcast_ref::<HttpError>() {
            return matches!(http.kind(), HttpErrorKind::Unknown | HttpErrorKind::Decode);
        }
        source = s.source();
    }
    false
}

#[async_trait]
impl ObjectStore for RetryReads {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    /// The body is read within the retried request, so that a body cut off is retried too;
    /// the engine reads every body whole anyway.
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.retried(|| async {
            let got = self.inner.get_opts(location, options.clone()).await?;
            if options.head || !matches!(got.payload, GetResultPayload::Stream(_)) {
                return Ok(got);
            }
            let (meta, range) = (got.meta.clone(), got.range.clone());
            let (attributes, extensions) = (got.attributes.clone(), got.extensions.clone());
            let bytes = got.bytes().await?;
            Ok(GetResult {
                payload: GetResultPayload::Stream(stream::once(async { Ok(bytes) }).boxed()),
                meta,
                range,
                attributes,
                extensions,
            })
        })
        .await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.retried(|| self.inner.list_with_delimiter(prefix))
            .await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;

    use super::*;

    /// An in-memory store whose puts, gets and lists fail in transport, with `kind`, `failures` times.
    #[derive(Debug)]
    struct Flaky {
        inner: InMemory,
        kind: HttpErrorKind,
        failures: AtomicUsize,
        calls: AtomicUsize,
    }

    impl fmt::Display for Flaky {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "Flaky")
        }
    }

    impl Flaky {
        fn new(kind: HttpErrorKind, failures: usize) -> Flaky {
            Flaky {
                inner: InMemory::new(),
                kind,
                failures: AtomicUsize::new(failures),
                calls: AtomicUsize::new(0),
            }
        }

        /// Fails while failures are left, the way the S3 client reports a transport error.
        fn fail(&self) -> object_store::Result<()> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let left = self.failures.load(Ordering::SeqCst);
            if left == 0 {
                return Ok(());
            }
            self.failures.store(left - 1, Ordering::SeqCst);
            let cause = std::io::Error::other("connection closed by the server");
            Err(object_store::Error::Generic {
                store: "S3",
                source: Box::new(HttpError::new(self.kind, cause)),
            })
        }
    }

    #[async_trait]
    impl ObjectStore for Flaky {
        async fn put_opts(
            &self,
            location: &Path,
            payload: PutPayload,
            opts: PutOptions,
        ) -> object_store::Result<PutResult> {
            self.fail()?;
            self.inner.put_opts(location, payload, opts).await
        }

        async fn put_multipart_opts(
            &self,
            location: &Path,
            opts: PutMultipartOptions,
        ) -> object_store::Result<Box<dyn MultipartUpload>> {
            self.inner.put_multipart_opts(location, opts).await
        }

        async fn get_opts(
            &self,
            location: &Path,
            options: GetOptions,
        ) -> object_store::Result<GetResult> {
            self.fail()?;
            self.inner.get_opts(location, options).await
        }

        fn delete_stream(
            &self,
            locations: BoxStream<'static, object_store::Result<Path>>,
        ) -> BoxStream<'static, object_store::Result<Path>> {
            self.inner.delete_stream(locations)
        }

        fn list(
            &self,
            prefix: Option<&Path>,
        ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
            self.inner.list(prefix)
        }

        async fn list_with_delimiter(
            &self,
            prefix: Option<&Path>,
        ) -> object_store::Result<ListResult> {
            self.fail()?;
            self.inner.list_with_delimiter(prefix).await
        }

        async fn copy_opts(
            &self,
            from: &Path,
            to: &Path,
            options: CopyOptions,
        ) -> object_store::Result<()> {
            self.inner.copy_opts(from, to, options).await
        }
    }

    async fn seeded(kind: HttpErrorKind, failures: usize) -> anyhow::Result<Arc<Flaky>> {
        let flaky = Arc::new(Flaky::new(kind, 0));
        flaky
            .inner
            .put(&Path::from("dir/a"), PutPayload::from_static(b"hello"))
            .await?;
        flaky.failures.store(failures, Ordering::SeqCst);
        Ok(flaky)
    }

    #[tokio::test]
    async fn a_read_cut_off_unclassified_is_tried_again() -> anyhow::Result<()> {
        let flaky = seeded(HttpErrorKind::Unknown, 2).await?;
        let store = RetryReads::new(flaky.clone());
        let listed = store.list_with_delimiter(Some(&Path::from("dir"))).await?;
        anyhow::ensure!(listed.objects.len() == 1, "{listed:?}");
        anyhow::ensure!(flaky.calls.load(Ordering::SeqCst) == 3);
        flaky.failures.store(1, Ordering::SeqCst);
        let bytes = store.get(&Path::from("dir/a")).await?.bytes().await?;
        anyhow::ensure!(&bytes[..] == b"hello");
        flaky.failures.store(1, Ordering::SeqCst);
        let range = store.get_range(&Path::from("dir/a"), 1..3).await?;
        anyhow::ensure!(&range[..] == b"el");
        flaky.failures.store(1, Ordering::SeqCst);
        anyhow::ensure!(store.head(&Path::from("dir/a")).await?.size == 5);
        Ok(())
    }

    #[tokio::test]
    async fn a_read_that_keeps_failing_fails_after_every_try() -> anyhow::Result<()> {
        let flaky = seeded(HttpErrorKind::Unknown, usize::MAX).await?;
        let store = RetryReads::new(flaky.clone());
        let e = store.list_with_delimiter(None).await.err();
        anyhow::ensure!(e.is_some_and(|e| unretried_transport_error(&e)));
        anyhow::ensure!(flaky.calls.load(Ordering::SeqCst) == BACKOFF.len() + 1);
        Ok(())
    }

    #[tokio::test]
    async fn errors_object_store_retries_itself_and_writes_are_not_retried() -> anyhow::Result<()> {
        // A connect failure has had object_store's own tries already.
        let flaky = seeded(HttpErrorKind::Connect, 1).await?;
        let store = RetryReads::new(flaky.clone());
        anyhow::ensure!(store.list_with_delimiter(None).await.is_err());
        anyhow::ensure!(flaky.calls.load(Ordering::SeqCst) == 1);
        // A write may have reached the store: it is not sent again.
        let flaky = seeded(HttpErrorKind::Unknown, 1).await?;
        let store = RetryReads::new(flaky.clone());
        let put = store
            .put(&Path::from("dir/b"), PutPayload::from_static(b"x"))
            .await;
        anyhow::ensure!(put.is_err());
        anyhow::ensure!(flaky.calls.load(Ordering::SeqCst) == 1);
        // Not found is an answer, not a failure.
        let store = RetryReads::new(seeded(HttpErrorKind::Unknown, 0).await?);
        let missing = store.get(&Path::from("dir/none")).await;
        anyhow::ensure!(matches!(missing, Err(object_store::Error::NotFound { .. })));
        Ok(())
    }
}
