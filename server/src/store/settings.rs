//! The `--store` settings of `strata serve`: flags, `STRATA_*` variables and file keys, the
//! `AWS_*` credentials, and their checks.

use std::fmt;
use std::time::Duration;

use super::location::StoreLocation;

/// The object-store flags of `strata serve`. Each can also come from the environment variable
/// named beside it, or from the config file under its name with `_` for `-`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct StoreArgs {
    /// Keep the data files and the manifest in an object store, `s3://bucket/prefix`, with
    /// `--data-dir` as the local WAL and cache; `file:///dir` uses a local directory as the
    /// bucket (for tests). Credentials come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
    /// AWS_SESSION_TOKEN [default: none, the local disk only].
    #[arg(long, env = "STRATA_STORE")]
    pub store: Option<String>,
    /// The S3 endpoint of a server other than AWS (MinIO, Ceph RGW, SeaweedFS), such as
    /// `http://127.0.0.1:8333`; requests use path-style addressing [default: AWS S3].
    #[arg(long, env = "STRATA_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
    /// The S3 region [default: AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1].
    #[arg(long, env = "STRATA_S3_REGION")]
    pub s3_region: Option<String>,
    /// Serve as a read replica of `--store`: follow the bucket's manifest, answer queries and
    /// refuse writes, as `--mode ro` does. Never writes to the bucket [default: false].
    #[arg(long, env = "STRATA_READ_ONLY", num_args = 0..=1, default_missing_value = "true")]
    pub read_only: Option<bool>,
    /// Size of the cache of the bucket's data file blocks on the local disk (under
    /// `--data-dir`) in MiB, least recently used out first; 0 turns it off [default: 4096].
    #[arg(long, env = "STRATA_CACHE_DISK_MB")]
    pub cache_disk_mb: Option<u64>,
    /// Longest an acknowledged point may sit only in the local WAL before a flush puts it in
    /// the bucket, in milliseconds; a write with `?sync` waits for the bucket instead
    /// [default: 10000].
    #[arg(long, env = "STRATA_STORE_FLUSH_INTERVAL_MS")]
    pub store_flush_interval_ms: Option<u64>,
    /// How often a `--read-only` replica reads the bucket's manifest again for newly flushed
    /// data, in milliseconds [default: 1000].
    #[arg(long, env = "STRATA_REFRESH_MS")]
    pub refresh_ms: Option<u64>,
    /// Partitioned ingest: this writer owns salt buckets LO-HI of the prefix (of
    /// `--salt-bucket-count`), keeps its own tree under it, and refuses points of other
    /// buckets; UIDs are shared through the bucket. See docs/operations-s3.md
    /// [default: none, one writer owns every bucket].
    #[arg(long, env = "STRATA_SALT_BUCKETS")]
    pub salt_buckets: Option<String>,
}

impl StoreArgs {
    /// These settings, with each one left unset taken from `base` (the config file's).
    pub fn or(&self, base: &StoreArgs) -> StoreArgs {
        StoreArgs {
            store: self.store.clone().or_else(|| base.store.clone()),
            s3_endpoint: self
                .s3_endpoint
                .clone()
                .or_else(|| base.s3_endpoint.clone()),
            s3_region: self.s3_region.clone().or_else(|| base.s3_region.clone()),
            read_only: self.read_only.or(base.read_only),
            cache_disk_mb: self.cache_disk_mb.or(base.cache_disk_mb),
            store_flush_interval_ms: self
                .store_flush_interval_ms
                .or(base.store_flush_interval_ms),
            refresh_ms: self.refresh_ms.or(base.refresh_ms),
            salt_buckets: self
                .salt_buckets
                .clone()
                .or_else(|| base.salt_buckets.clone()),
        }
    }

    /// Whether any store setting is given.
    fn any(&self) -> bool {
        self.store.is_some()
            || self.s3_endpoint.is_some()
            || self.s3_region.is_some()
            || self.read_only.is_some()
            || self.cache_disk_mb.is_some()
            || self.store_flush_interval_ms.is_some()
            || self.refresh_ms.is_some()
            || self.salt_buckets.is_some()
    }
}

/// The default `cache_disk_mb`: a few GiB of local disk hold the recent hours that dashboards
/// read over and over, so those reads never go to the bucket.
const DEFAULT_CACHE_DISK_MB: u64 = 4096;
/// The default `store_flush_interval_ms`: each flush costs a few PUTs (the data file and a
/// manifest version), so 10 s keeps the requests per point low while bounding what only the
/// writer's disk holds to seconds.
const DEFAULT_STORE_FLUSH_INTERVAL_MS: u64 = 10_000;
/// The default `refresh_ms`: one small GET a second per replica makes new data visible within
/// about a second of its flush.
const DEFAULT_REFRESH_MS: u64 = 1000;
/// The region when none is set; S3-compatible servers accept any, and it is AWS's default.
const DEFAULT_REGION: &str = "us-east-1";

/// The resolved object-store settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// The bucket and prefix, or the directory.
    pub location: StoreLocation,
    /// The S3 endpoint URL; `None` is AWS S3 (virtual-hosted addressing).
    pub s3_endpoint: Option<String>,
    /// The S3 region.
    pub s3_region: String,
    /// The static credentials; `None` lets AWS S3 use the instance's role.
    pub credentials: Option<S3Credentials>,
    /// Whether this server is a read replica.
    pub read_only: bool,
    /// The local disk cache size in MiB; 0 = off.
    pub cache_disk_mb: u64,
    /// The bound on how long acknowledged data may be only in the local WAL.
    pub flush_interval: Duration,
    /// How often a replica re-reads the manifest.
    pub refresh: Duration,
    /// The salt buckets this writer owns (partitioned ingest); `None` = all of them.
    pub salt_range: Option<super::partition::SaltRange>,
}

/// Static S3 credentials from the `AWS_*` environment variables. `Debug` shows the key id only.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Credentials {
    /// `AWS_ACCESS_KEY_ID`.
    pub access_key_id: String,
    /// `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: String,
    /// `AWS_SESSION_TOKEN`, for temporary credentials.
    pub session_token: Option<String>,
}

impl fmt::Debug for S3Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"********")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "********"),
            )
            .finish()
    }
}

impl S3Credentials {
    /// Reads the credentials through `env` (a variable's value, `None` when unset or empty).
    /// A key id without its secret, or a secret or token without a key id, is an error that
    /// names the variables.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<Option<S3Credentials>> {
        let get = |k: &str| env(k).filter(|v| !v.is_empty());
        match (
            get("AWS_ACCESS_KEY_ID"),
            get("AWS_SECRET_ACCESS_KEY"),
            get("AWS_SESSION_TOKEN"),
        ) {
            (Some(access_key_id), Some(secret_access_key), session_token) => {
                Ok(Some(S3Credentials {
                    access_key_id,
                    secret_access_key,
                    session_token,
                }))
            }
            (None, None, None) => Ok(None),
            (Some(_), None, _) => {
                anyhow::bail!("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not")
            }
            (None, _, _) => anyhow::bail!(
                "AWS_SECRET_ACCESS_KEY or AWS_SESSION_TOKEN is set but AWS_ACCESS_KEY_ID is not"
            ),
        }
    }
}

impl StoreConfig {
    /// Resolves the store settings, `args` already folded over the file's. `None` when no
    /// `store` is set, which is an error if any other store setting is. `env` reads the
    /// `AWS_*` variables.
    pub fn resolve(
        args: &StoreArgs,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Option<StoreConfig>> {
        let Some(url) = &args.store else {
            if args.read_only == Some(true) {
                anyhow::bail!(
                    "read_only needs store: a read replica follows a bucket's manifest (for a \
                     server that refuses writes on its own data directory use mode = ro)"
                );
            }
            anyhow::ensure!(
                !args.any() || args.read_only == Some(false),
                "s3_endpoint, s3_region, cache_disk_mb, store_flush_interval_ms and refresh_ms \
                 need store"
            );
            return Ok(None);
        };
        let location = StoreLocation::parse(url)?;
        let is_s3 = matches!(location, StoreLocation::S3 { .. });
        let s3_endpoint = match args.s3_endpoint.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(e) => Some(check_endpoint(e)?),
        };
        anyhow::ensure!(
            is_s3 || (s3_endpoint.is_none() && args.s3_region.is_none()),
            "s3_endpoint and s3_region need an s3:// store, not {location}"
        );
        let s3_region = match args.s3_region.as_deref().map(str::trim) {
            Some(r) => {
                anyhow::ensure!(
                    !r.is_empty() && r.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
                    "bad `s3_region` setting {r:?}: use a region name such as us-east-1"
                );
                r.to_string()
            }
            None => env("AWS_REGION")
                .or_else(|| env("AWS_DEFAULT_REGION"))
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| DEFAULT_REGION.into()),
        };
        let credentials = if is_s3 {
            S3Credentials::from_env(env)?
        } else {
            None
        };
        // Away from AWS there is no instance role to fall back on, and trying one would send
        // requests to the link-local metadata address.
        anyhow::ensure!(
            credentials.is_some() || s3_endpoint.is_none(),
            "s3_endpoint needs credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        );
        let read_only = args.read_only.unwrap_or(false);
        anyhow::ensure!(
            read_only || args.refresh_ms.is_none(),
            "refresh_ms applies to read replicas only: set read_only too, or leave it out"
        );
        let cache_disk_mb = args.cache_disk_mb.unwrap_or(DEFAULT_CACHE_DISK_MB);
        anyhow::ensure!(
            cache_disk_mb <= 1 << 24,
            "cache_disk_mb must be at most 16777216, not {cache_disk_mb}"
        );
        let flush_ms = args
            .store_flush_interval_ms
            .unwrap_or(DEFAULT_STORE_FLUSH_INTERVAL_MS);
        anyhow::ensure!(
            (100..=3_600_000).contains(&flush_ms),
            "store_flush_interval_ms must be 100 to 3600000, not {flush_ms}"
        );
        let refresh_ms = args.refresh_ms.unwrap_or(DEFAULT_REFRESH_MS);
        anyhow::ensure!(
            (50..=600_000).contains(&refresh_ms),
            "refresh_ms must be 50 to 600000, not {refresh_ms}"
        );
        let salt_range = salt_range(args, read_only)?;
        Ok(Some(StoreConfig {
            location,
            s3_endpoint,
            s3_region,
            credentials,
            read_only,
            cache_disk_mb,
            flush_interval: Duration::from_millis(flush_ms),
            refresh: Duration::from_millis(refresh_ms),
            salt_range,
        }))
    }
}

/// An endpoint is an `http://` or `https://` URL with a host, without spaces, query or
/// fragment; returned without a trailing `/`.
fn check_endpoint(e: &str) -> anyhow::Result<String> {
    let bad = |why: &str| {
        anyhow::anyhow!(
            "bad `s3_endpoint` setting {e:?}: {why} (use a URL such as http://127.0.0.1:8333)"
        )
    };
    let rest = e
        .strip_prefix("http://")
        .or_else(|| e.strip_prefix("https://"))
        .ok_or_else(|| bad("the scheme must be http:// or https://"))?;
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() || host.starts_with(':') {
        return Err(bad("no host"));
    }
    if e.chars().any(|c| c.is_whitespace() || c == '?' || c == '#') {
        return Err(bad("spaces, '?' and '#' are not allowed"));
    }
    if let Some((_, port)) = host.rsplit_once(':')
        && !host.ends_with(']')
        && port.parse::<u16>().is_err()
    {
        return Err(bad("the port is not a number up to 65535"));
    }
    Ok(e.trim_end_matches('/').to_string())
}

/// The `salt_buckets` setting, which only a writer takes.
fn salt_range(
    args: &StoreArgs,
    read_only: bool,
) -> anyhow::Result<Option<super::partition::SaltRange>> {
    let Some(s) = args.salt_buckets.as_deref() else {
        return Ok(None);
    };
    anyhow::ensure!(
        !read_only,
        "salt_buckets applies to writers only: a read replica answers for every salt bucket"
    );
    Ok(Some(super::partition::SaltRange::parse(s)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An environment holding `vars`.
    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    const KEYS: [(&str, &str); 2] = [
        ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
        ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI"),
    ];

    fn error_of<T: fmt::Debug>(r: anyhow::Result<T>) -> String {
        match r {
            Ok(v) => panic!("accepted: {v:?}"),
            Err(e) => format!("{e:#}"),
        }
    }

    #[test]
    fn no_store_is_the_local_disk_and_store_settings_alone_are_refused() -> anyhow::Result<()> {
        let none = env_of(&[]);
        assert_eq!(StoreConfig::resolve(&StoreArgs::default(), &none)?, None);
        let off = StoreArgs {
            read_only: Some(false),
            ..StoreArgs::default()
        };
        assert_eq!(StoreConfig::resolve(&off, &none)?, None);
        let err = error_of(StoreConfig::resolve(
            &StoreArgs {
                read_only: Some(true),
                ..StoreArgs::default()
            },
            &none,
        ));
        assert!(
            err.contains("read_only needs store") && err.contains("mode = ro"),
            "{err}"
        );
        let err = error_of(StoreConfig::resolve(
            &StoreArgs {
                s3_endpoint: Some("http://127.0.0.1:1".into()),
                ..StoreArgs::default()
            },
            &none,
        ));
        assert!(
            err.contains("s3_endpoint") && err.contains("need store"),
            "{err}"
        );
        Ok(())
    }

    #[test]
    fn an_s3_store_takes_defaults_and_the_aws_variables() -> anyhow::Result<()> {
        let args = StoreArgs {
            store: Some("s3://strata/prod".into()),
            s3_endpoint: Some("http://127.0.0.1:8333/".into()),
            ..StoreArgs::default()
        };
        let c =
            StoreConfig::resolve(&args, &env_of(&KEYS))?.ok_or_else(|| anyhow::anyhow!("none"))?;
        assert_eq!(c.location.to_string(), "s3://strata/prod");
        assert_eq!(c.s3_endpoint.as_deref(), Some("http://127.0.0.1:8333"));
        assert_eq!(c.s3_region, "us-east-1");
        assert!(!c.read_only);
        assert_eq!(c.cache_disk_mb, 4096);
        assert_eq!(c.flush_interval, Duration::from_secs(10));
        assert_eq!(c.refresh, Duration::from_secs(1));
        let creds = c
            .credentials
            .clone()
            .ok_or_else(|| anyhow::anyhow!("no keys"))?;
        assert_eq!(creds.access_key_id, "AKIDEXAMPLE");
        assert_eq!(creds.session_token, None);
        let shown = format!("{c:?}");
        assert!(
            shown.contains("AKIDEXAMPLE") && !shown.contains("wJalrXUtnFEMI"),
            "{shown}"
        );

        let mut vars = KEYS.to_vec();
        vars.extend([
            ("AWS_SESSION_TOKEN", "tok-secret"),
            ("AWS_REGION", "eu-west-1"),
        ]);
        let replica = StoreArgs {
            read_only: Some(true),
            refresh_ms: Some(250),
            cache_disk_mb: Some(0),
            store_flush_interval_ms: Some(500),
            ..args.clone()
        };
        let c = StoreConfig::resolve(&replica, &env_of(&vars))?
            .ok_or_else(|| anyhow::anyhow!("none"))?;
        assert_eq!(c.s3_region, "eu-west-1");
        assert!(c.read_only);
        assert_eq!(
            (c.cache_disk_mb, c.refresh),
            (0, Duration::from_millis(250))
        );
        assert_eq!(c.flush_interval, Duration::from_millis(500));
        let shown = format!("{c:?}");
        assert!(!shown.contains("tok-secret"), "{shown}");
        let c = StoreConfig::resolve(
            &StoreArgs {
                s3_region: Some("ap-south-2".into()),
                ..args
            },
            &env_of(&vars),
        )?
        .ok_or_else(|| anyhow::anyhow!("none"))?;
        assert_eq!(
            c.s3_region, "ap-south-2",
            "the setting wins over AWS_REGION"
        );
        Ok(())
    }

    #[test]
    fn bad_store_settings_name_the_setting() {
        let s3 = || StoreArgs {
            store: Some("s3://strata/p".into()),
            s3_endpoint: Some("http://127.0.0.1:8333".into()),
            ..StoreArgs::default()
        };
        let keys = env_of(&KEYS);
        for (args, env, want) in [
            (
                StoreArgs {
                    s3_endpoint: Some("127.0.0.1:8333".into()),
                    ..s3()
                },
                &keys,
                "`s3_endpoint`",
            ),
            (
                StoreArgs {
                    s3_endpoint: Some("http://:8333".into()),
                    ..s3()
                },
                &keys,
                "no host",
            ),
            (
                StoreArgs {
                    s3_endpoint: Some("http://h:99999".into()),
                    ..s3()
                },
                &keys,
                "port",
            ),
            (
                StoreArgs {
                    s3_region: Some("us east".into()),
                    ..s3()
                },
                &keys,
                "`s3_region`",
            ),
            (
                StoreArgs {
                    store: Some("gs://b/p".into()),
                    ..s3()
                },
                &keys,
                "`store`",
            ),
            (
                StoreArgs {
                    store: Some("file:///tmp/b".into()),
                    ..s3()
                },
                &keys,
                "need an s3:// store",
            ),
            (
                StoreArgs {
                    refresh_ms: Some(500),
                    ..s3()
                },
                &keys,
                "refresh_ms applies to read replicas",
            ),
            (
                StoreArgs {
                    read_only: Some(true),
                    refresh_ms: Some(10),
                    ..s3()
                },
                &keys,
                "refresh_ms must be",
            ),
            (
                StoreArgs {
                    store_flush_interval_ms: Some(0),
                    ..s3()
                },
                &keys,
                "store_flush_interval_ms must be",
            ),
            (
                StoreArgs {
                    cache_disk_mb: Some(u64::MAX),
                    ..s3()
                },
                &keys,
                "cache_disk_mb must be",
            ),
            (
                s3(),
                &env_of(&[]),
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
            ),
            (
                s3(),
                &env_of(&[("AWS_ACCESS_KEY_ID", "k")]),
                "AWS_SECRET_ACCESS_KEY is not",
            ),
            (
                s3(),
                &env_of(&[("AWS_SECRET_ACCESS_KEY", "s")]),
                "AWS_ACCESS_KEY_ID is not",
            ),
        ] {
            let err = error_of(StoreConfig::resolve(&args, env));
            assert!(err.contains(want), "{args:?}: {err}");
        }
    }

    #[test]
    fn a_file_store_needs_no_credentials_and_aws_without_endpoint_may_use_a_role()
    -> anyhow::Result<()> {
        let file = StoreArgs {
            store: Some("file:///tmp/bucket".into()),
            ..StoreArgs::default()
        };
        let c =
            StoreConfig::resolve(&file, &env_of(&KEYS))?.ok_or_else(|| anyhow::anyhow!("none"))?;
        assert_eq!(c.credentials, None);
        let aws = StoreArgs {
            store: Some("s3://strata".into()),
            ..StoreArgs::default()
        };
        let c = StoreConfig::resolve(&aws, &env_of(&[]))?.ok_or_else(|| anyhow::anyhow!("none"))?;
        assert_eq!((c.s3_endpoint, c.credentials), (None, None));
        Ok(())
    }
}
