//! Server configuration: a TOML file, then `STRATA_*` environment variables, then flags, with the
//! later ones winning.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde::Deserialize;

use crate::store::{StoreArgs, StoreConfig};

/// The storage flags every command that opens a data directory shares (`serve`, `import`,
/// `scan`, `compact`). Each can also come from the environment variable named beside it.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct StorageArgs {
    /// TOML configuration file. Its keys are the long flag names with `_` for `-`.
    #[arg(long, env = "STRATA_CONFIG")]
    pub config: Option<PathBuf>,
    /// Data directory [default: ./strata-data].
    #[arg(long, env = "STRATA_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// WAL fsync policy: `always` or `interval:<ms>` [default: interval:100].
    #[arg(long, env = "STRATA_FSYNC")]
    pub fsync: Option<String>,
    /// Size of the write buffer (memtable) in MiB; up to four more fill while full ones are
    /// written out, so writes can hold about five times this [default: 32].
    #[arg(long, env = "STRATA_MEMTABLE_MB", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub memtable_mb: Option<u64>,
    /// Size of the block cache for reads in MiB; 0 turns it off [default: 64].
    #[arg(long, env = "STRATA_CACHE_MB", value_parser = clap::value_parser!(u64).range(0..=1048576))]
    pub cache_mb: Option<u64>,
    /// Compression of the data files' blocks: `none`, `lz4`, or `zstd` with an optional level,
    /// `zstd:<1-22>` (`zstd` is level 3). Applies to files written from then on; older files
    /// keep theirs until compaction rewrites them [default: lz4].
    #[arg(long, env = "STRATA_COMPRESSION")]
    pub compression: Option<String>,
    /// Uncompressed size of a data file block in KiB: larger blocks compress better, smaller
    /// ones make a point lookup read less [default: 64].
    #[arg(long, env = "STRATA_BLOCK_SIZE_KB", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub block_size_kb: Option<u64>,
    /// Bloom filters over rowkeys in data files, so a query skips files without its rows
    /// [default: true].
    #[arg(long, env = "STRATA_BLOOM_FILTERS", num_args = 0..=1, default_missing_value = "true")]
    pub bloom_filters: Option<bool>,
    /// Salt buckets of the rowkeys (OpenTSDB's `tsd.storage.salt.buckets`), 1 to 254. Fixed
    /// when the data directory is created; a different count later is refused [default: 20].
    #[arg(long, env = "STRATA_SALT_BUCKET_COUNT", value_parser = clap::value_parser!(u8).range(1..=254))]
    pub salt_bucket_count: Option<u8>,
    /// Width of metric UIDs in bytes (`tsd.storage.uid.width.metric`); fixed when the data
    /// directory is created. Only 3 is supported [default: 3].
    #[arg(long, env = "STRATA_METRIC_UID_WIDTH")]
    pub metric_uid_width: Option<u8>,
    /// Width of tag key UIDs in bytes (`tsd.storage.uid.width.tagk`); as
    /// --metric-uid-width [default: 3].
    #[arg(long, env = "STRATA_TAGK_UID_WIDTH")]
    pub tagk_uid_width: Option<u8>,
    /// Width of tag value UIDs in bytes (`tsd.storage.uid.width.tagv`); as
    /// --metric-uid-width [default: 3].
    #[arg(long, env = "STRATA_TAGV_UID_WIDTH")]
    pub tagv_uid_width: Option<u8>,
    /// Assign a UID to an unknown metric name on write (`tsd.core.auto_create_metrics`);
    /// when false, a put of an unknown metric is refused until `/api/uid/assign` or
    /// `strata uid assign` creates it. OpenTSDB's default is false [default: true].
    #[arg(long, env = "STRATA_AUTO_CREATE_METRICS", num_args = 0..=1, default_missing_value = "true")]
    pub auto_create_metrics: Option<bool>,
    /// Assign a UID to an unknown tag key on write (`tsd.core.auto_create_tagks`)
    /// [default: true].
    #[arg(long, env = "STRATA_AUTO_CREATE_TAGKS", num_args = 0..=1, default_missing_value = "true")]
    pub auto_create_tagks: Option<bool>,
    /// Assign a UID to an unknown tag value on write (`tsd.core.auto_create_tagvs`)
    /// [default: true].
    #[arg(long, env = "STRATA_AUTO_CREATE_TAGVS", num_args = 0..=1, default_missing_value = "true")]
    pub auto_create_tagvs: Option<bool>,
}

impl StorageArgs {
    /// These settings, with each one left unset taken from `base`.
    pub fn or(&self, base: &StorageArgs) -> StorageArgs {
        StorageArgs {
            config: self.config.clone().or_else(|| base.config.clone()),
            data_dir: self.data_dir.clone().or_else(|| base.data_dir.clone()),
            fsync: self.fsync.clone().or_else(|| base.fsync.clone()),
            memtable_mb: self.memtable_mb.or(base.memtable_mb),
            cache_mb: self.cache_mb.or(base.cache_mb),
            compression: self
                .compression
                .clone()
                .or_else(|| base.compression.clone()),
            block_size_kb: self.block_size_kb.or(base.block_size_kb),
            bloom_filters: self.bloom_filters.or(base.bloom_filters),
            salt_bucket_count: self.salt_bucket_count.or(base.salt_bucket_count),
            metric_uid_width: self.metric_uid_width.or(base.metric_uid_width),
            tagk_uid_width: self.tagk_uid_width.or(base.tagk_uid_width),
            tagv_uid_width: self.tagv_uid_width.or(base.tagv_uid_width),
            auto_create_metrics: self.auto_create_metrics.or(base.auto_create_metrics),
            auto_create_tagks: self.auto_create_tagks.or(base.auto_create_tagks),
            auto_create_tagvs: self.auto_create_tagvs.or(base.auto_create_tagvs),
        }
    }
}

/// `strata serve` flags. Each can also come from the environment variable named beside it.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub storage: StorageArgs,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Address to listen on [default: 127.0.0.1].
    #[arg(long, env = "STRATA_BIND")]
    pub bind: Option<IpAddr>,
    /// Port for telnet and HTTP [default: 4242].
    #[arg(long, env = "STRATA_PORT")]
    pub port: Option<u16>,
    /// Longest telnet line accepted, in bytes [default: 1024].
    #[arg(long, env = "STRATA_MAX_LINE_BYTES")]
    pub max_line_bytes: Option<usize>,
    /// Most concurrent connections [default: 4096].
    #[arg(long, env = "STRATA_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Threads that serve connections (OpenTSDB's `tsd.network.worker_threads`). The storage
    /// engine runs its own threads beside them [default: one per core].
    #[arg(long, env = "STRATA_WORKER_THREADS", value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub worker_threads: Option<u64>,
    /// Largest HTTP request body accepted, in bytes, after decompression [default: 64 MiB].
    #[arg(long, env = "STRATA_MAX_BODY_BYTES")]
    pub max_body_bytes: Option<usize>,
    /// Longest a query may run, in milliseconds, before it is answered with a 408; 0 means no
    /// limit (OpenTSDB's `tsd.query.timeout`) [default: 60000].
    #[arg(long, env = "STRATA_QUERY_TIMEOUT_MS")]
    pub query_timeout_ms: Option<u64>,
    /// Most series one sub-query of `/api/query` may read; past it the query gets a 413 that
    /// names the limit. 0 means no limit [default: 500000].
    #[arg(long, env = "STRATA_QUERY_MAX_SERIES")]
    pub query_max_series: Option<usize>,
    /// Most data points one query may read (OpenTSDB's `tsd.query.limits.data_points.default`);
    /// past it the query gets a 413 that names the limit. 0 means no limit [default:
    /// 100000000].
    #[arg(long, env = "STRATA_QUERY_MAX_DATA_POINTS")]
    pub query_max_data_points: Option<usize>,
    /// Origins allowed to make cross-origin (CORS) HTTP requests: empty turns CORS off, `*`
    /// allows any origin, otherwise a comma-separated list (OpenTSDB's
    /// `tsd.http.request.cors_domains`) [default: empty].
    #[arg(long, env = "STRATA_CORS_DOMAINS")]
    pub cors_domains: Option<String>,
    /// The `Access-Control-Allow-Headers` value sent to allowed origins (OpenTSDB's
    /// `tsd.http.request.cors_headers`) [default: Authorization, Content-Type, Accept, Origin,
    /// User-Agent, DNT, Cache-Control, X-Mx-ReqToken, Keep-Alive, X-Requested-With,
    /// If-Modified-Since].
    #[arg(long, env = "STRATA_CORS_HEADERS")]
    pub cors_headers: Option<String>,
    /// Longest a new connection may take to send its first byte, and an HTTP request its
    /// whole header after its first byte, in milliseconds; past it the connection is closed,
    /// so clients that send nothing or half a header cannot hold connection slots. 0 means no
    /// limit [default: 10000].
    #[arg(long, env = "STRATA_HEADER_TIMEOUT_MS")]
    pub header_timeout_ms: Option<u64>,
    /// Longest an HTTP connection may wait for its next request, and a request body may
    /// pause, in milliseconds; 0 means no limit [default: 60000].
    #[arg(long, env = "STRATA_HTTP_IDLE_TIMEOUT_MS")]
    pub http_idle_timeout_ms: Option<u64>,
    /// Longest a telnet connection may send nothing before it is closed, in milliseconds; 0
    /// means never (OpenTSDB's `tsd.core.socket.timeout`). Collectors such as tcollector keep
    /// a connection open and write every 15 s or so [default: 0].
    #[arg(long, env = "STRATA_TELNET_IDLE_TIMEOUT_MS")]
    pub telnet_idle_timeout_ms: Option<u64>,
    /// Which requests the server answers (OpenTSDB's `tsd.mode`): `rw` both, `ro` refuses
    /// writes (telnet `put` is an unknown command, as in OpenTSDB, and HTTP write endpoints
    /// answer 404), `wo` refuses queries (for a write-only ingest node) [default: rw].
    #[arg(long, env = "STRATA_MODE")]
    pub mode: Option<String>,
    /// Allow `/api/query` to delete what it matches (`DELETE`, or `delete: true`), OpenTSDB's
    /// `tsd.http.query.allow_delete` [default: false].
    #[arg(long, env = "STRATA_ALLOW_DELETE", num_args = 0..=1, default_missing_value = "true")]
    pub allow_delete: Option<bool>,
    /// Tokens and their roles, a TOML file of `[[tokens]]` entries (`name`, `token`, `roles`
    /// from `read`, `write` and `admin`). When set, every HTTP request and telnet connection
    /// must authenticate; SIGHUP reads the file again [default: none, authentication off].
    #[arg(long, env = "STRATA_AUTH_FILE")]
    pub auth_file: Option<PathBuf>,
    /// The TLS certificate chain, a PEM file; with `--tls-key`, clients may speak TLS on the
    /// same port (sniffed from the first byte). SIGHUP reads the pair again [default: none].
    #[arg(long, env = "STRATA_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// The TLS private key of `--tls-cert`, a PEM file [default: none].
    #[arg(long, env = "STRATA_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// Refuse plaintext connections when TLS is configured: a telnet client gets one error
    /// line, an HTTP client a 400 error, then the connection closes [default: false].
    #[arg(long, env = "STRATA_TLS_REQUIRED", num_args = 0..=1, default_missing_value = "true")]
    pub tls_required: Option<bool>,
    /// How long points are kept, by their timestamp: a whole number and a unit (ms, s, m, h,
    /// d, w, n = 30 days, y = 365 days), such as `90d`; `none` or `0` keeps them forever.
    /// Older points are refused, never returned, and their space is reclaimed. Per-metric
    /// rules go in the config file as `[[retention_rules]]` with `metric` (a glob with `*`
    /// and `?`) and `duration`; the first match wins [default: none].
    #[arg(long, env = "STRATA_RETENTION")]
    pub retention: Option<String>,
}

/// The default memtable size in MiB. Since a flush folds each row into one block, small
/// memtables cost little CPU, and they keep the peak resident memory down.
const DEFAULT_MEMTABLE_MB: u64 = 32;
/// The default block cache size in MiB: it holds decompressed blocks, and row-compacted data
/// takes about 1.5 bytes a point, so 64 MiB holds tens of millions of recent points; the OS page
/// cache keeps the rest of the files' bytes.
const DEFAULT_CACHE_MB: u64 = 64;

/// The default number of connection-serving threads: one per core. Writes are parsed and
/// stored on the worker that read them (see `write.rs`), so ingest on several connections
/// needs a worker per core to use the cores; the engine's apply, flush, compaction and WAL
/// threads share them. Heavy work (a large query or put, a write that waits) hands the
/// worker's connections to another thread while it runs.
fn default_worker_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The default `header_timeout_ms`. Clients send a request, or tcollector its `version`,
/// as soon as they connect, and a header takes one round trip, so 10 s is far past any real
/// client; it is also how long a socket that sends nothing or half a header holds a slot of
/// `max_connections`, and a connection over the limit waits twice this for a slot, so a new
/// client is served within 20 s however many silent sockets came first.
const DEFAULT_HEADER_TIMEOUT_MS: u64 = 10_000;
/// The default `http_idle_timeout_ms`: a keep-alive connection outlives Grafana's refresh
/// intervals up to a minute, and a body that stops for a minute is not coming.
const DEFAULT_HTTP_IDLE_TIMEOUT_MS: u64 = 60_000;

/// The default `query_max_series`, per sub-query. A Grafana panel over every host of a
/// 100,000-host fleet reads 100,000 series, and the 1 M-series benchmark's panels read 50,000;
/// a query past half a million series holds hundreds of MB of names and buckets, which no
/// panel can draw.
const DEFAULT_QUERY_MAX_SERIES: usize = 500_000;
/// The default `query_max_data_points`, per query: a week of 10 s points over 1,650 series, or
/// a day over 11,500; reading that takes seconds, and a `none` answer of it is gigabytes of
/// JSON. OpenTSDB has the limit but leaves it off.
const DEFAULT_QUERY_MAX_DATA_POINTS: usize = 100_000_000;

/// OpenTSDB's default `tsd.http.request.cors_headers`.
pub(crate) const DEFAULT_CORS_HEADERS: &str = "Authorization, Content-Type, Accept, Origin, \
     User-Agent, DNT, Cache-Control, X-Mx-ReqToken, Keep-Alive, X-Requested-With, \
     If-Modified-Since";

/// The same settings as they appear in the TOML file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    data_dir: Option<PathBuf>,
    bind: Option<IpAddr>,
    port: Option<u16>,
    fsync: Option<String>,
    memtable_mb: Option<u64>,
    cache_mb: Option<u64>,
    compression: Option<String>,
    block_size_kb: Option<u64>,
    bloom_filters: Option<bool>,
    salt_bucket_count: Option<u8>,
    metric_uid_width: Option<u8>,
    tagk_uid_width: Option<u8>,
    tagv_uid_width: Option<u8>,
    auto_create_metrics: Option<bool>,
    auto_create_tagks: Option<bool>,
    auto_create_tagvs: Option<bool>,
    mode: Option<String>,
    max_line_bytes: Option<usize>,
    max_connections: Option<usize>,
    worker_threads: Option<u64>,
    max_body_bytes: Option<usize>,
    query_timeout_ms: Option<u64>,
    header_timeout_ms: Option<u64>,
    http_idle_timeout_ms: Option<u64>,
    telnet_idle_timeout_ms: Option<u64>,
    query_max_series: Option<usize>,
    query_max_data_points: Option<usize>,
    cors_domains: Option<String>,
    cors_headers: Option<String>,
    allow_delete: Option<bool>,
    auth_file: Option<PathBuf>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_required: Option<bool>,
    retention: Option<String>,
    #[serde(default)]
    retention_rules: Vec<FileRetentionRule>,
    store: Option<String>,
    s3_endpoint: Option<String>,
    s3_region: Option<String>,
    read_only: Option<bool>,
    cache_disk_mb: Option<u64>,
    store_flush_interval_ms: Option<u64>,
    refresh_ms: Option<u64>,
    salt_buckets: Option<String>,
}

/// A `[[retention_rules]]` entry of the TOML file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRetentionRule {
    /// Metric glob (`*`, `?`).
    metric: String,
    /// As `--retention`; `none` or `0` keeps the matching metrics forever.
    duration: String,
}

/// Which origins may make cross-origin requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cors {
    /// CORS is off: no headers, `OPTIONS` is not allowed.
    Off,
    /// Every origin is allowed (`*`).
    Any,
    /// These origins, upper-cased (OpenTSDB compares them case-insensitively).
    Domains(Vec<String>),
}

impl Cors {
    /// Parses `cors_domains`: empty is off, a list holding `*` allows all.
    pub fn parse(s: &str) -> Cors {
        let domains: Vec<String> = s
            .split(',')
            .map(|d| d.trim().to_ascii_uppercase())
            .filter(|d| !d.is_empty())
            .collect();
        if domains.is_empty() {
            Cors::Off
        } else if domains.iter().any(|d| d == "*") {
            Cors::Any
        } else {
            Cors::Domains(domains)
        }
    }

    /// Whether requests from `origin` are allowed (false when CORS is off).
    pub fn allows(&self, origin: &str) -> bool {
        match self {
            Cors::Off => false,
            Cors::Any => true,
            Cors::Domains(d) => d.iter().any(|d| d.eq_ignore_ascii_case(origin)),
        }
    }
}

/// The resolved configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub data_dir: PathBuf,
    pub bind: IpAddr,
    pub port: u16,
    pub fsync: String,
    pub memtable_mb: u64,
    pub cache_mb: u64,
    /// How the data table's blocks are compressed.
    pub compression: strata_engine::Compression,
    pub block_size_kb: u64,
    pub bloom_filters: bool,
    /// Salt buckets asked for; `None` keeps what the directory has (20 on creation).
    pub salt_bucket_count: Option<u8>,
    /// Metric, tag key and tag value UID widths asked for; `None` keeps the directory's.
    pub uid_widths: [Option<u8>; 3],
    pub auto_create_metrics: bool,
    pub auto_create_tagks: bool,
    pub auto_create_tagvs: bool,
    /// Which requests the server answers (OpenTSDB's `tsd.mode`).
    pub mode: Mode,
    pub max_line_bytes: usize,
    pub max_connections: usize,
    /// Threads of the connection-serving runtime.
    pub worker_threads: usize,
    pub max_body_bytes: usize,
    /// `None` = no limit.
    pub query_timeout: Option<std::time::Duration>,
    /// For a new connection's first byte and an HTTP request's header; `None` = no limit.
    pub header_timeout: Option<Duration>,
    /// For an HTTP connection between requests and a body's pauses; `None` = no limit.
    pub http_idle_timeout: Option<Duration>,
    /// For a telnet connection that sends nothing; `None` = never.
    pub telnet_idle_timeout: Option<Duration>,
    /// Most series per sub-query; 0 = no limit.
    pub query_max_series: usize,
    /// Most data points per query; 0 = no limit.
    pub query_max_data_points: usize,
    pub cors: Cors,
    pub cors_headers: String,
    /// Whether queries may delete.
    pub allow_delete: bool,
    /// How long points are kept, globally and per metric.
    pub retention: strata_tsdb::Retention,
    /// The tokens file; `None` = authentication off.
    pub auth_file: Option<PathBuf>,
    /// The TLS certificate and key files; `None` = no TLS.
    pub tls: Option<TlsFiles>,
    /// Whether plaintext connections are refused (only with `tls`).
    pub tls_required: bool,
    /// The object store behind the engine; `None` = the local disk only.
    pub store: Option<StoreConfig>,
}

/// The PEM files of the TLS certificate chain and its private key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Config {
    /// The store this server is a read replica of (`--read-only`); `None` on a writer.
    pub fn read_replica_of(&self) -> Option<&crate::store::StoreLocation> {
        self.store
            .as_ref()
            .filter(|s| s.read_only)
            .map(|s| &s.location)
    }

    /// Resolves the storage settings of an offline command (`import`, `scan`, `compact`) the
    /// same way `serve` does; the other settings take their file values or defaults.
    pub fn resolve_storage(args: &StorageArgs) -> anyhow::Result<Config> {
        Config::resolve(&ServeArgs {
            storage: args.clone(),
            ..ServeArgs::default()
        })
    }

    /// Resolves `args` (flags, with the environment already folded in by clap) over the file.
    pub fn resolve(args: &ServeArgs) -> anyhow::Result<Config> {
        let storage = &args.storage;
        let file = match &storage.config {
            Some(path) => read_file(path)?,
            None => FileConfig::default(),
        };
        let file_store = StoreArgs {
            store: file.store.clone(),
            s3_endpoint: file.s3_endpoint.clone(),
            s3_region: file.s3_region.clone(),
            read_only: file.read_only,
            cache_disk_mb: file.cache_disk_mb,
            store_flush_interval_ms: file.store_flush_interval_ms,
            refresh_ms: file.refresh_ms,
            salt_buckets: file.salt_buckets.clone(),
        };
        let store = StoreConfig::resolve(&args.store.or(&file_store), &|k| std::env::var(k).ok())?;
        let mode = args.mode.as_deref().or(file.mode.as_deref());
        let mode = match (store.as_ref().is_some_and(|s| s.read_only), mode) {
            // A replica never writes, so it answers as OpenTSDB's read-only mode does.
            (true, None) => Mode::ReadOnly,
            (true, Some(m)) => {
                let m: Mode = m.parse()?;
                anyhow::ensure!(
                    m == Mode::ReadOnly,
                    "read_only (a read replica) conflicts with mode = {}: leave mode out or \
                     set it to ro",
                    m.name()
                );
                m
            }
            (false, m) => m.unwrap_or("rw").parse()?,
        };
        let config = Config {
            data_dir: storage
                .data_dir
                .clone()
                .or(file.data_dir)
                .unwrap_or_else(|| "strata-data".into()),
            bind: args.bind.or(file.bind).unwrap_or([127, 0, 0, 1].into()),
            port: args.port.or(file.port).unwrap_or(4242),
            fsync: storage
                .fsync
                .clone()
                .or(file.fsync)
                .unwrap_or_else(|| "interval:100".into()),
            memtable_mb: storage
                .memtable_mb
                .or(file.memtable_mb)
                .unwrap_or(DEFAULT_MEMTABLE_MB),
            cache_mb: storage
                .cache_mb
                .or(file.cache_mb)
                .unwrap_or(DEFAULT_CACHE_MB),
            compression: parse_compression(
                storage
                    .compression
                    .as_deref()
                    .or(file.compression.as_deref())
                    .unwrap_or("lz4"),
            )?,
            block_size_kb: storage
                .block_size_kb
                .or(file.block_size_kb)
                .unwrap_or(DEFAULT_BLOCK_SIZE_KB),
            bloom_filters: storage.bloom_filters.or(file.bloom_filters).unwrap_or(true),
            salt_bucket_count: storage.salt_bucket_count.or(file.salt_bucket_count),
            uid_widths: [
                storage.metric_uid_width.or(file.metric_uid_width),
                storage.tagk_uid_width.or(file.tagk_uid_width),
                storage.tagv_uid_width.or(file.tagv_uid_width),
            ],
            auto_create_metrics: storage
                .auto_create_metrics
                .or(file.auto_create_metrics)
                .unwrap_or(true),
            auto_create_tagks: storage
                .auto_create_tagks
                .or(file.auto_create_tagks)
                .unwrap_or(true),
            auto_create_tagvs: storage
                .auto_create_tagvs
                .or(file.auto_create_tagvs)
                .unwrap_or(true),
            mode,
            max_line_bytes: args.max_line_bytes.or(file.max_line_bytes).unwrap_or(1024),
            max_connections: args
                .max_connections
                .or(file.max_connections)
                .unwrap_or(4096),
            worker_threads: match args.worker_threads.or(file.worker_threads) {
                Some(n) => usize::try_from(n).context("worker_threads is too large")?,
                None => default_worker_threads(),
            },
            max_body_bytes: args
                .max_body_bytes
                .or(file.max_body_bytes)
                .unwrap_or(64 << 20),
            query_timeout: match args.query_timeout_ms.or(file.query_timeout_ms) {
                None => Some(strata_query::DEFAULT_QUERY_TIMEOUT),
                Some(0) => None,
                Some(ms) => Some(std::time::Duration::from_millis(ms)),
            },
            header_timeout: millis(
                args.header_timeout_ms.or(file.header_timeout_ms),
                DEFAULT_HEADER_TIMEOUT_MS,
            ),
            http_idle_timeout: millis(
                args.http_idle_timeout_ms.or(file.http_idle_timeout_ms),
                DEFAULT_HTTP_IDLE_TIMEOUT_MS,
            ),
            telnet_idle_timeout: millis(
                args.telnet_idle_timeout_ms.or(file.telnet_idle_timeout_ms),
                0,
            ),
            query_max_series: args
                .query_max_series
                .or(file.query_max_series)
                .unwrap_or(DEFAULT_QUERY_MAX_SERIES),
            query_max_data_points: args
                .query_max_data_points
                .or(file.query_max_data_points)
                .unwrap_or(DEFAULT_QUERY_MAX_DATA_POINTS),
            cors: Cors::parse(
                args.cors_domains
                    .as_deref()
                    .or(file.cors_domains.as_deref())
                    .unwrap_or(""),
            ),
            cors_headers: args
                .cors_headers
                .clone()
                .or(file.cors_headers)
                .unwrap_or_else(|| DEFAULT_CORS_HEADERS.into()),
            allow_delete: args.allow_delete.or(file.allow_delete).unwrap_or(false),
            auth_file: args.auth_file.clone().or(file.auth_file),
            tls: match (
                args.tls_cert.clone().or(file.tls_cert),
                args.tls_key.clone().or(file.tls_key),
            ) {
                (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
                (None, None) => None,
                _ => anyhow::bail!("tls_cert and tls_key must be set together"),
            },
            tls_required: args.tls_required.or(file.tls_required).unwrap_or(false),
            retention: retention(
                args.retention.as_deref().or(file.retention.as_deref()),
                &file.retention_rules,
            )?,
            store,
        };
        anyhow::ensure!(
            !config.tls_required || config.tls.is_some(),
            "tls_required needs tls_cert and tls_key"
        );
        config
            .fsync
            .parse::<strata_engine::SyncPolicy>()
            .context("bad `fsync` setting")?;
        anyhow::ensure!(
            config.max_line_bytes >= 64,
            "max_line_bytes must be at least 64"
        );
        anyhow::ensure!(
            config.max_connections >= 1,
            "max_connections must be at least 1"
        );
        anyhow::ensure!(
            (1..=1024).contains(&config.worker_threads),
            "worker_threads must be 1 to 1024, not {}",
            config.worker_threads
        );
        anyhow::ensure!(
            (1..=4096).contains(&config.memtable_mb),
            "memtable_mb must be 1 to 4096, not {}",
            config.memtable_mb
        );
        anyhow::ensure!(
            (1..=4096).contains(&config.block_size_kb),
            "block_size_kb must be 1 to 4096, not {}",
            config.block_size_kb
        );
        if let Some(b) = config.salt_bucket_count {
            anyhow::ensure!(
                (1..=254).contains(&b),
                "salt_bucket_count must be 1 to 254, not {b}"
            );
        }
        anyhow::ensure!(
            config.cache_mb <= 1 << 20,
            "cache_mb must be at most 1048576, not {}",
            config.cache_mb
        );
        Ok(config)
    }
}

/// The retention settings: the global duration and the file's rules, in order.
fn retention(
    global: Option<&str>,
    rules: &[FileRetentionRule],
) -> anyhow::Result<strata_tsdb::Retention> {
    let parse = |s: &str| strata_tsdb::parse_retention(s).map_err(anyhow::Error::msg);
    Ok(strata_tsdb::Retention {
        global: global.map(parse).transpose()?.flatten(),
        rules: rules
            .iter()
            .map(|r| {
                anyhow::ensure!(!r.metric.is_empty(), "a retention rule has an empty metric");
                Ok(strata_tsdb::RetentionRule {
                    metric: r.metric.clone(),
                    keep: parse(&r.duration)
                        .with_context(|| format!("retention rule for {:?}", r.metric))?,
                })
            })
            .collect::<anyhow::Result<_>>()?,
    })
}

/// The default `block_size_kb`: a 64 KiB block holds about an hour of a few dozen row-compacted
/// series, and compresses well without making a point lookup read much.
const DEFAULT_BLOCK_SIZE_KB: u64 = 64;
/// zstd's own default level: most of its ratio at a fraction of the high levels' CPU.
const DEFAULT_ZSTD_LEVEL: i32 = 3;

/// Parses `compression`: `none`, `lz4`, `zstd` or `zstd:<level>`.
fn parse_compression(s: &str) -> anyhow::Result<strata_engine::Compression> {
    use strata_engine::Compression;
    let bad =
        || anyhow::anyhow!("bad `compression` setting {s:?}: use none, lz4, zstd or zstd:<1-22>");
    let lower = s.trim().to_ascii_lowercase();
    match lower.split_once(':') {
        None => match lower.as_str() {
            "none" => Ok(Compression::None),
            "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd(DEFAULT_ZSTD_LEVEL)),
            _ => Err(bad()),
        },
        Some(("zstd", level)) => match level.parse::<i32>() {
            Ok(l) if (1..=22).contains(&l) => Ok(Compression::Zstd(l)),
            _ => Err(bad()),
        },
        Some(_) => Err(bad()),
    }
}

/// Which requests a server answers: OpenTSDB's `tsd.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Reads and writes (`rw`).
    ReadWrite,
    /// Reads only (`ro`): writes are refused.
    ReadOnly,
    /// Writes only (`wo`): queries are refused.
    WriteOnly,
}

impl Mode {
    /// OpenTSDB's name for the mode.
    pub fn name(self) -> &'static str {
        match self {
            Mode::ReadWrite => "rw",
            Mode::ReadOnly => "ro",
            Mode::WriteOnly => "wo",
        }
    }

    /// Whether writes are answered.
    pub fn writes(self) -> bool {
        self != Mode::ReadOnly
    }

    /// Whether reads are answered.
    pub fn reads(self) -> bool {
        self != Mode::WriteOnly
    }
}

impl std::str::FromStr for Mode {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Mode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "rw" => Ok(Mode::ReadWrite),
            "ro" => Ok(Mode::ReadOnly),
            "wo" => Ok(Mode::WriteOnly),
            _ => anyhow::bail!("bad `mode` setting {s:?}: use rw, ro or wo"),
        }
    }
}

/// A setting in milliseconds, `default` if unset; 0 means none.
fn millis(ms: Option<u64>, default: u64) -> Option<Duration> {
    match ms.unwrap_or(default) {
        0 => None,
        ms => Some(Duration::from_millis(ms)),
    }
}

fn read_file(path: &Path) -> anyhow::Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("parsing config file {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_over_file_and_defaults_fill_the_rest() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("strata.toml");
        std::fs::write(
            &path,
            "port = 5000\ndata_dir = \"/from/file\"\nfsync = \"always\"\nmemtable_mb = 8\ncache_mb = 9\n",
        )?;
        let args = ServeArgs {
            storage: StorageArgs {
                config: Some(path),
                data_dir: Some("/from/flag".into()),
                cache_mb: Some(0),
                ..StorageArgs::default()
            },
            ..ServeArgs::default()
        };
        let c = Config::resolve(&args)?;
        assert_eq!(c.data_dir, PathBuf::from("/from/flag"));
        assert_eq!(c.port, 5000);
        assert_eq!(c.fsync, "always");
        assert_eq!((c.memtable_mb, c.cache_mb), (8, 0));
        assert_eq!(c.bind, IpAddr::from([127, 0, 0, 1]));
        assert_eq!(c.max_line_bytes, 1024);
        assert_eq!(c.worker_threads, default_worker_threads());
        assert!(c.worker_threads >= 1);
        assert_eq!(c.cors, Cors::Off);
        assert_eq!(c.cors_headers, DEFAULT_CORS_HEADERS);
        assert_eq!(c.header_timeout, Some(Duration::from_secs(10)));
        assert_eq!(c.http_idle_timeout, Some(Duration::from_secs(60)));
        assert_eq!(c.telnet_idle_timeout, None, "telnet idling is allowed");
        assert_eq!(
            (c.query_max_series, c.query_max_data_points),
            (500_000, 100_000_000)
        );
        Ok(())
    }

    #[test]
    fn limits_come_from_the_file_and_flags_and_zero_turns_them_off() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("strata.toml");
        std::fs::write(
            &path,
            "header_timeout_ms = 0\nhttp_idle_timeout_ms = 5000\ntelnet_idle_timeout_ms = 900000\n\
             query_max_series = 0\nquery_max_data_points = 7\n",
        )?;
        let args = ServeArgs {
            storage: StorageArgs {
                config: Some(path),
                ..StorageArgs::default()
            },
            http_idle_timeout_ms: Some(7000),
            ..ServeArgs::default()
        };
        let c = Config::resolve(&args)?;
        assert_eq!(c.header_timeout, None);
        assert_eq!(c.http_idle_timeout, Some(Duration::from_secs(7)));
        assert_eq!(c.telnet_idle_timeout, Some(Duration::from_secs(900)));
        assert_eq!((c.query_max_series, c.query_max_data_points), (0, 7));
        Ok(())
    }

    #[test]
    fn bad_settings_are_rejected_with_the_key_named() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("strata.toml");
        // The message of a rejected configuration, or "" if it was accepted.
        fn error_of<T>(r: anyhow::Result<T>) -> String {
            r.err().map(|e| format!("{e:#}")).unwrap_or_default()
        }
        let from_file = || ServeArgs {
            storage: StorageArgs {
                config: Some(path.clone()),
                ..StorageArgs::default()
            },
            ..ServeArgs::default()
        };
        std::fs::write(&path, "prot = 5000\n")?;
        let err = error_of(Config::resolve_storage(&from_file().storage));
        assert!(err.contains("prot"), "{err}");
        let err = error_of(Config::resolve_storage(&StorageArgs {
            fsync: Some("never".into()),
            ..StorageArgs::default()
        }));
        assert!(err.contains("fsync"), "{err}");
        let err = error_of(Config::resolve_storage(&StorageArgs {
            memtable_mb: Some(0),
            ..StorageArgs::default()
        }));
        assert!(err.contains("memtable_mb"), "{err}");
        std::fs::write(&path, "worker_threads = 0\n")?;
        let err = error_of(Config::resolve(&from_file()));
        assert!(err.contains("worker_threads"), "{err}");
        std::fs::write(&path, "worker_threads = 3\n")?;
        let c = Config::resolve(&from_file())?;
        assert_eq!(c.worker_threads, 3);
        Ok(())
    }

    #[test]
    fn auth_and_tls_come_from_the_file_and_flags_and_go_together() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("strata.toml");
        std::fs::write(
            &path,
            "auth_file = \"/etc/strata/tokens.toml\"\ntls_cert = \"/c.pem\"\ntls_key = \"/k.pem\"\n",
        )?;
        let args = ServeArgs {
            storage: StorageArgs {
                config: Some(path.clone()),
                ..StorageArgs::default()
            },
            tls_key: Some("/flag.pem".into()),
            tls_required: Some(true),
            ..ServeArgs::default()
        };
        let c = Config::resolve(&args)?;
        assert_eq!(c.auth_file, Some(PathBuf::from("/etc/strata/tokens.toml")));
        let tls = c.tls.context("no tls")?;
        assert_eq!((tls.cert, tls.key), ("/c.pem".into(), "/flag.pem".into()));
        assert!(c.tls_required);
        let d = Config::resolve(&ServeArgs::default())?;
        assert_eq!((d.auth_file, d.tls, d.tls_required), (None, None, false));
        let half = Config::resolve(&ServeArgs {
            tls_cert: Some("/c.pem".into()),
            ..ServeArgs::default()
        });
        let err = format!("{:#}", half.err().context("accepted a cert without a key")?);
        assert!(err.contains("tls_key"), "{err}");
        let required = Config::resolve(&ServeArgs {
            tls_required: Some(true),
            ..ServeArgs::default()
        });
        let err = format!(
            "{:#}",
            required.err().context("accepted tls_required alone")?
        );
        assert!(err.contains("tls_required"), "{err}");
        Ok(())
    }

    #[test]
    fn storage_settings_come_from_the_file_env_style_flags_and_defaults() -> anyhow::Result<()> {
        use strata_engine::Compression;
        let c = Config::resolve_storage(&StorageArgs::default())?;
        assert_eq!(c.compression, Compression::Lz4);
        assert_eq!((c.block_size_kb, c.bloom_filters), (64, true));
        assert_eq!((c.salt_bucket_count, c.uid_widths), (None, [None; 3]));
        assert!(c.auto_create_metrics && c.auto_create_tagks && c.auto_create_tagvs);
        assert_eq!(c.mode, Mode::ReadWrite);
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("strata.toml");
        std::fs::write(
            &path,
            "compression = \"zstd:9\"\nblock_size_kb = 16\nbloom_filters = false\n\
             salt_bucket_count = 8\ntagv_uid_width = 3\nauto_create_metrics = false\n\
             mode = \"ro\"\n",
        )?;
        let file = StorageArgs {
            config: Some(path),
            ..StorageArgs::default()
        };
        let c = Config::resolve(&ServeArgs {
            storage: file.clone(),
            ..ServeArgs::default()
        })?;
        assert_eq!(c.compression, Compression::Zstd(9));
        assert_eq!((c.block_size_kb, c.bloom_filters), (16, false));
        assert_eq!(c.salt_bucket_count, Some(8));
        assert_eq!(c.uid_widths, [None, None, Some(3)]);
        assert!(!c.auto_create_metrics && c.auto_create_tagks);
        assert_eq!(c.mode, Mode::ReadOnly);
        let c = Config::resolve(&ServeArgs {
            storage: StorageArgs {
                compression: Some("none".into()),
                auto_create_metrics: Some(true),
                ..file
            },
            mode: Some("wo".into()),
            ..ServeArgs::default()
        })?;
        assert_eq!(c.compression, Compression::None);
        assert!(c.auto_create_metrics);
        assert_eq!(c.mode, Mode::WriteOnly);
        Ok(())
    }

    #[test]
    fn compression_and_mode_settings_parse_or_name_the_choices() {
        use strata_engine::Compression;
        assert_eq!(parse_compression("LZ4").ok(), Some(Compression::Lz4));
        assert_eq!(parse_compression("zstd").ok(), Some(Compression::Zstd(3)));
        assert_eq!(
            parse_compression("zstd:22").ok(),
            Some(Compression::Zstd(22))
        );
        for bad in ["zstd:0", "zstd:23", "zstd:x", "gzip", "lz4:1", ""] {
            let err = parse_compression(bad).err().map(|e| e.to_string());
            assert!(
                err.as_deref().is_some_and(|e| e.contains("zstd:<1-22>")),
                "{bad:?}: {err:?}"
            );
        }
        assert_eq!("RO".parse::<Mode>().ok(), Some(Mode::ReadOnly));
        let err = "readonly".parse::<Mode>().err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("rw, ro or wo")));
        assert!(Mode::ReadOnly.reads() && !Mode::ReadOnly.writes());
        assert!(Mode::WriteOnly.writes() && !Mode::WriteOnly.reads());
    }

    #[test]
    fn store_settings_come_from_the_file_and_a_replica_is_mode_ro() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("strata.toml");
        // A file store, so that no AWS_* variable of the environment plays a part.
        std::fs::write(
            &path,
            "store = \"file:///srv/bucket\"\nread_only = true\nrefresh_ms = 200\n\
             cache_disk_mb = 0\n",
        )?;
        let args = |mode: Option<&str>| ServeArgs {
            storage: StorageArgs {
                config: Some(path.clone()),
                ..StorageArgs::default()
            },
            mode: mode.map(String::from),
            ..ServeArgs::default()
        };
        let c = Config::resolve(&args(None))?;
        assert_eq!(
            c.read_replica_of().map(ToString::to_string).as_deref(),
            Some("file:///srv/bucket")
        );
        let store = c.store.context("no store")?;
        assert_eq!(store.location.to_string(), "file:///srv/bucket");
        assert!(store.read_only);
        assert_eq!(
            (store.refresh, store.cache_disk_mb),
            (Duration::from_millis(200), 0)
        );
        assert_eq!(c.mode, Mode::ReadOnly, "a replica answers as mode ro");
        assert_eq!(Config::resolve(&args(Some("ro")))?.mode, Mode::ReadOnly);
        let err = format!(
            "{:#}",
            Config::resolve(&args(Some("wo")))
                .err()
                .context("accepted wo")?
        );
        assert!(err.contains("conflicts with mode = wo"), "{err}");
        let writer = Config::resolve(&ServeArgs {
            store: StoreArgs {
                read_only: Some(false),
                refresh_ms: None,
                ..StoreArgs::default()
            },
            ..args(None)
        });
        let err = format!(
            "{:#}",
            writer.err().context("accepted refresh_ms on a writer")?
        );
        assert!(err.contains("refresh_ms applies to read replicas"), "{err}");
        std::fs::write(&path, "s3_regoin = \"x\"\n")?;
        let err = format!("{:#}", Config::resolve(&args(None)).err().context("typo")?);
        assert!(err.contains("s3_regoin"), "{err}");
        assert_eq!(Config::resolve(&ServeArgs::default())?.store, None);
        Ok(())
    }

    #[test]
    fn cors_domains_parse_and_match_case_insensitively() {
        assert_eq!(Cors::parse(""), Cors::Off);
        assert_eq!(Cors::parse(" , "), Cors::Off);
        assert_eq!(Cors::parse("a.com, *"), Cors::Any);
        let c = Cors::parse("http://a.com, https://B.org");
        assert!(c.allows("HTTP://A.COM"));
        assert!(c.allows("https://b.org"));
        assert!(!c.allows("https://c.org"));
        assert!(!Cors::Off.allows("x"));
        assert!(Cors::Any.allows("anything"));
    }

    #[test]
    fn offline_commands_read_storage_settings_from_the_file() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("strata.toml");
        std::fs::write(
            &path,
            "data_dir = \"/from/file\"\ncors_domains = \"*\"\nport = 1\n",
        )?;
        let c = Config::resolve_storage(&StorageArgs {
            config: Some(path),
            ..StorageArgs::default()
        })?;
        assert_eq!(c.data_dir, PathBuf::from("/from/file"));
        assert_eq!(c.cors, Cors::Any);
        assert_eq!(c.fsync, "interval:100");
        assert_eq!(
            (c.memtable_mb, c.cache_mb),
            (DEFAULT_MEMTABLE_MB, DEFAULT_CACHE_MB)
        );
        Ok(())
    }

    #[test]
    fn retention_comes_from_the_flag_or_the_file_with_rules_in_order() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("strata.toml");
        std::fs::write(
            &path,
            "retention = \"30d\"\n[[retention_rules]]\nmetric = \"sys.*\"\nduration = \"2w\"\n\
             [[retention_rules]]\nmetric = \"audit.*\"\nduration = \"0\"\n",
        )?;
        let args = |retention: Option<&str>| ServeArgs {
            storage: StorageArgs {
                config: Some(path.clone()),
                ..StorageArgs::default()
            },
            retention: retention.map(String::from),
            ..ServeArgs::default()
        };
        let day = |n: u64| Some(Duration::from_secs(n * 86_400));
        let c = Config::resolve(&args(None))?;
        assert_eq!(c.retention.global, day(30));
        let rules: Vec<_> = c
            .retention
            .rules
            .iter()
            .map(|r| (r.metric.as_str(), r.keep))
            .collect();
        assert_eq!(rules, vec![("sys.*", day(14)), ("audit.*", None)]);
        assert_eq!(
            Config::resolve(&args(Some("90d")))?.retention.global,
            day(90)
        );
        assert_eq!(Config::resolve(&args(Some("none")))?.retention.global, None);
        assert!(Config::resolve(&args(Some("90"))).is_err());
        assert_eq!(
            Config::resolve(&ServeArgs::default())?.retention,
            strata_tsdb::Retention::default()
        );
        std::fs::write(
            &path,
            "[[retention_rules]]\nmetric = \"a\"\nduration = \"1q\"\n",
        )?;
        let e = format!(
            "{:#}",
            Config::resolve(&args(None)).err().context("accepted 1q")?
        );
        assert!(e.contains("retention rule for \"a\""), "{e}");
        Ok(())
    }
}
