use std::fmt;

use futures_util::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

use super::{ProbeError, ProbeScope, probe};

/// How a [`Quirky`] store misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quirk {
    /// Every put overwrites, whatever its mode (as Garage does).
    IgnoresPutMode,
    /// A create of an existing object is refused, but it overwrites first.
    OverwritesThenRefuses,
    /// Listing fails, as with a missing bucket or refused credentials.
    ListFails,
}

/// An in-memory store with one [`Quirk`].
#[derive(Debug)]
struct Quirky {
    inner: InMemory,
    quirk: Quirk,
}

impl fmt::Display for Quirky {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Quirky({:?})", self.quirk)
    }
}

#[async_trait::async_trait]
impl ObjectStore for Quirky {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        match self.quirk {
            Quirk::IgnoresPutMode => {
                let opts = PutOptions {
                    mode: PutMode::Overwrite,
                    ..opts
                };
                self.inner.put_opts(location, payload, opts).await
            }
            Quirk::OverwritesThenRefuses if opts.mode == PutMode::Create => {
                let existed = self.inner.head(location).await.is_ok();
                let put = self.inner.put(location, payload).await?;
                if existed {
                    return Err(object_store::Error::AlreadyExists {
                        path: location.to_string(),
                        source: "exists".into(),
                    });
                }
                Ok(put)
            }
            _ => self.inner.put_opts(location, payload, opts).await,
        }
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
        self.inner.get_opts(location, options).await
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
        if self.quirk == Quirk::ListFails {
            return Err(object_store::Error::NotFound {
                path: "strata".into(),
                source: "NoSuchBucket".into(),
            });
        }
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

fn quirky(quirk: Quirk) -> Quirky {
    Quirky {
        inner: InMemory::new(),
        quirk,
    }
}

/// The keys left in `store`.
async fn keys(store: &dyn ObjectStore) -> anyhow::Result<Vec<String>> {
    use futures_util::TryStreamExt;
    let all: Vec<ObjectMeta> = store.list(None).try_collect().await?;
    Ok(all.into_iter().map(|m| m.location.to_string()).collect())
}

#[tokio::test]
async fn a_store_that_honours_create_passes_and_is_left_clean() -> anyhow::Result<()> {
    let store = InMemory::new();
    let report = probe(&store, "prod/tsdb", ProbeScope::Writes).await?;
    let key = report.key.clone().unwrap_or_default();
    assert!(key.starts_with("prod/tsdb/_probe/"), "{report:?}");
    assert!(!report.left_behind);
    assert_eq!(keys(&store).await?, Vec::<String>::new());
    let report = probe(&store, "", ProbeScope::Writes).await?;
    let key = report.key.clone().unwrap_or_default();
    assert!(key.starts_with("_probe/"), "{report:?}");
    let other = probe(&store, "", ProbeScope::Writes).await?;
    assert_ne!(report.key, other.key, "each probe uses its own key");
    Ok(())
}

#[tokio::test]
async fn a_replica_probe_only_lists() -> anyhow::Result<()> {
    let store = quirky(Quirk::IgnoresPutMode);
    let report = probe(&store, "p", ProbeScope::Reads).await?;
    assert_eq!(report.key, None);
    let store = quirky(Quirk::ListFails);
    assert!(probe(&store, "p", ProbeScope::Reads).await.is_err());
    Ok(())
}

#[tokio::test]
async fn a_store_that_ignores_put_mode_is_refused_by_name() -> anyhow::Result<()> {
    let store = quirky(Quirk::IgnoresPutMode);
    let err = probe(&store, "p", ProbeScope::Writes)
        .await
        .err()
        .map(|e| e.to_string());
    let err = err.ok_or_else(|| anyhow::anyhow!("a store that ignores PutMode passed"))?;
    assert!(
        err.contains("ignores conditional writes") && err.contains("Garage"),
        "{err}"
    );
    assert_eq!(
        keys(&store).await?,
        Vec::<String>::new(),
        "the probe object is deleted"
    );
    Ok(())
}

#[tokio::test]
async fn a_store_that_overwrites_before_refusing_is_refused() -> anyhow::Result<()> {
    let store = quirky(Quirk::OverwritesThenRefuses);
    let err = probe(&store, "p", ProbeScope::Writes).await.err();
    assert!(
        matches!(&err, Some(ProbeError::WriteNotKept { got, .. }) if got.ends_with("second")),
        "{err:?}"
    );
    Ok(())
}

#[tokio::test]
async fn an_unreachable_bucket_says_what_to_check() -> anyhow::Result<()> {
    let store = quirky(Quirk::ListFails);
    let err = probe(&store, "p", ProbeScope::Writes)
        .await
        .err()
        .map(|e| e.to_string());
    let err = err.ok_or_else(|| anyhow::anyhow!("a failing list passed"))?;
    assert!(
        err.contains("cannot use the bucket") && err.contains("listing the prefix"),
        "{err}"
    );
    Ok(())
}
