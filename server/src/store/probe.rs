//! The start-up probe of a store: is the bucket reachable, and does it honour create-if-absent
//! writes? The manifest's fencing rests on the second (each manifest version has exactly one
//! author), and some S3-compatible servers, Garage among them, accept `If-None-Match: *` and
//! overwrite anyway, so a writer on such a store could lose a newer writer's commit.

use std::hash::{BuildHasher, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

/// Why a store failed the probe.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// A request failed: the bucket is missing, the credentials are refused, or the endpoint
    /// does not answer.
    #[error(
        "cannot use the bucket at {store}: {what} failed: {source} (check that the bucket \
         exists, the endpoint is right and the AWS_* credentials may read and write it)"
    )]
    Unreachable {
        /// The store, as object_store shows it.
        store: String,
        /// The step that failed.
        what: String,
        /// The store's error.
        #[source]
        source: object_store::Error,
    },
    /// The store took a second create-if-absent write of an existing object.
    #[error(
        "the store at {store} ignores conditional writes: a second create-if-absent PUT \
         (If-None-Match: *) of {key} succeeded, so it cannot fence writers. Use a store that \
         honours them, such as AWS S3, MinIO, Ceph RGW or SeaweedFS (Garage does not)"
    )]
    ConditionalWritesIgnored {
        /// The store.
        store: String,
        /// The probe object's key.
        key: String,
    },
    /// The store refused the second write but changed the object anyway, or lost the first.
    #[error(
        "the store at {store} does not keep create-if-absent writes: after a refused second \
         write, {key} holds {got:?} instead of what the first write put there"
    )]
    WriteNotKept {
        /// The store.
        store: String,
        /// The probe object's key.
        key: String,
        /// What the object held.
        got: String,
    },
}

/// What a probe checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeScope {
    /// That the prefix can be listed: all a read replica needs, and it may hold read-only
    /// credentials.
    Reads,
    /// That, and that create-if-absent writes are honoured: a writer's manifest needs them.
    Writes,
}

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeReport {
    /// The probe object's key (deleted again); `None` when the probe only read.
    pub key: Option<String>,
    /// Whether deleting the probe object failed; a leftover probe object is harmless.
    pub left_behind: bool,
}

/// Probes `store` under `prefix`: lists the prefix (the bucket answers and the credentials
/// are accepted); then, for [`ProbeScope::Writes`], creates a unique probe object with
/// `PutMode::Create`, creates it again and requires that to fail with `AlreadyExists` (or a
/// precondition failure), reads the object back unchanged, and deletes it.
pub async fn probe(
    store: &dyn ObjectStore,
    prefix: &str,
    scope: ProbeScope,
) -> Result<ProbeReport, ProbeError> {
    let name = store.to_string();
    let unreachable = |what: &str| {
        let name = name.clone();
        let what = what.to_string();
        move |source| ProbeError::Unreachable {
            store: name,
            what,
            source,
        }
    };
    let root = (!prefix.is_empty()).then(|| Path::from(prefix));
    store
        .list_with_delimiter(root.as_ref())
        .await
        .map_err(unreachable("listing the prefix"))?;
    if scope == ProbeScope::Reads {
        return Ok(ProbeReport {
            key: None,
            left_behind: false,
        });
    }
    let key = probe_key(prefix);
    let path = Path::from(key.as_str());
    let create = PutOptions::from(PutMode::Create);
    let first = format!("strata probe {key}: first");
    store
        .put_opts(&path, PutPayload::from(first.clone()), create.clone())
        .await
        .map_err(unreachable("writing a probe object"))?;
    let second = store
        .put_opts(
            &path,
            PutPayload::from(format!("strata probe {key}: second")),
            create,
        )
        .await;
    let outcome = match second {
        Ok(_) => Err(ProbeError::ConditionalWritesIgnored {
            store: name.clone(),
            key: key.clone(),
        }),
        Err(
            object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. },
        ) => check_kept(store, &path, &first, &name, &key).await,
        Err(e) => Err(unreachable("the second create-if-absent write")(e)),
    };
    let left_behind = match store.delete(&path).await {
        Ok(()) => false,
        Err(e) => {
            tracing::warn!(store = %name, key, error = %e, "cannot delete the store probe object");
            true
        }
    };
    outcome.map(|()| ProbeReport {
        key: Some(key),
        left_behind,
    })
}

/// Reads the probe object back and requires the first write's bytes.
async fn check_kept(
    store: &dyn ObjectStore,
    path: &Path,
    first: &str,
    name: &str,
    key: &str,
) -> Result<(), ProbeError> {
    let unreachable = |source| ProbeError::Unreachable {
        store: name.to_string(),
        what: "reading the probe object back".into(),
        source,
    };
    let got = store
        .get(path)
        .await
        .map_err(unreachable)?
        .bytes()
        .await
        .map_err(unreachable)?;
    if got.as_ref() == first.as_bytes() {
        return Ok(());
    }
    Err(ProbeError::WriteNotKept {
        store: name.to_string(),
        key: key.to_string(),
        got: String::from_utf8_lossy(&got).into_owned(),
    })
}

/// A key no other probe uses: the process id, the time in nanoseconds and a random number,
/// under `prefix/_probe/`.
fn probe_key(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    // RandomState is seeded from the OS once per process and per instance after that.
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let name = format!("_probe/{}-{nanos}-{random:016x}", std::process::id());
    if prefix.is_empty() {
        name
    } else {
        format!("{prefix}/{name}")
    }
}

#[cfg(test)]
mod tests;
