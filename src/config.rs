//! Server configuration: a TOML file, then `STRATA_*` environment variables, then flags, with the
//! later ones winning.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;

/// `strata serve` flags. Each can also come from the environment variable named beside it.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ServeArgs {
    /// TOML configuration file. Its keys are the long flag names with `_` for `-`.
    #[arg(long, env = "STRATA_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// Data directory [default: ./strata-data].
    #[arg(long, env = "STRATA_DATA_DIR")]
    pub(crate) data_dir: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1].
    #[arg(long, env = "STRATA_BIND")]
    pub(crate) bind: Option<IpAddr>,
    /// Port for telnet and HTTP [default: 4242].
    #[arg(long, env = "STRATA_PORT")]
    pub(crate) port: Option<u16>,
    /// WAL fsync policy: `always` or `interval:<ms>` [default: interval:100].
    #[arg(long, env = "STRATA_FSYNC")]
    pub(crate) fsync: Option<String>,
    /// Longest telnet line accepted, in bytes [default: 1024].
    #[arg(long, env = "STRATA_MAX_LINE_BYTES")]
    pub(crate) max_line_bytes: Option<usize>,
    /// Most concurrent connections [default: 4096].
    #[arg(long, env = "STRATA_MAX_CONNECTIONS")]
    pub(crate) max_connections: Option<usize>,
    /// Largest HTTP request body accepted, in bytes, after decompression [default: 64 MiB].
    #[arg(long, env = "STRATA_MAX_BODY_BYTES")]
    pub(crate) max_body_bytes: Option<usize>,
}

/// The same settings as they appear in the TOML file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    data_dir: Option<PathBuf>,
    bind: Option<IpAddr>,
    port: Option<u16>,
    fsync: Option<String>,
    max_line_bytes: Option<usize>,
    max_connections: Option<usize>,
    max_body_bytes: Option<usize>,
}

/// The resolved configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Config {
    pub(crate) data_dir: PathBuf,
    pub(crate) bind: IpAddr,
    pub(crate) port: u16,
    pub(crate) fsync: String,
    pub(crate) max_line_bytes: usize,
    pub(crate) max_connections: usize,
    pub(crate) max_body_bytes: usize,
}

impl Config {
    /// Resolves `args` (flags, with the environment already folded in by clap) over the file.
    pub(crate) fn resolve(args: &ServeArgs) -> anyhow::Result<Config> {
        let file = match &args.config {
            Some(path) => read_file(path)?,
            None => FileConfig::default(),
        };
        let config = Config {
            data_dir: args
                .data_dir
                .clone()
                .or(file.data_dir)
                .unwrap_or_else(|| "strata-data".into()),
            bind: args.bind.or(file.bind).unwrap_or([127, 0, 0, 1].into()),
            port: args.port.or(file.port).unwrap_or(4242),
            fsync: args
                .fsync
                .clone()
                .or(file.fsync)
                .unwrap_or_else(|| "interval:100".into()),
            max_line_bytes: args.max_line_bytes.or(file.max_line_bytes).unwrap_or(1024),
            max_connections: args
                .max_connections
                .or(file.max_connections)
                .unwrap_or(4096),
            max_body_bytes: args
                .max_body_bytes
                .or(file.max_body_bytes)
                .unwrap_or(64 << 20),
        };
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
        Ok(config)
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
            "port = 5000\ndata_dir = \"/from/file\"\nfsync = \"always\"\n",
        )?;
        let args = ServeArgs {
            config: Some(path),
            data_dir: Some("/from/flag".into()),
            ..ServeArgs::default()
        };
        let c = Config::resolve(&args)?;
        assert_eq!(c.data_dir, PathBuf::from("/from/flag"));
        assert_eq!(c.port, 5000);
        assert_eq!(c.fsync, "always");
        assert_eq!(c.bind, IpAddr::from([127, 0, 0, 1]));
        assert_eq!(c.max_line_bytes, 1024);
        Ok(())
    }

    #[test]
    fn bad_settings_are_rejected_with_the_key_named() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("strata.toml");
        std::fs::write(&path, "prot = 5000\n")?;
        let err = Config::resolve(&ServeArgs {
            config: Some(path),
            ..ServeArgs::default()
        })
        .err()
        .map(|e| format!("{e:#}"))
        .unwrap_or_default();
        assert!(err.contains("prot"), "{err}");
        let err = Config::resolve(&ServeArgs {
            fsync: Some("never".into()),
            ..ServeArgs::default()
        })
        .err()
        .map(|e| format!("{e:#}"))
        .unwrap_or_default();
        assert!(err.contains("fsync"), "{err}");
        Ok(())
    }
}
