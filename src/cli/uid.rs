//! `strata uid`: OpenTSDB's `tsdb uid` subcommands, offline: `grep`, `assign`, `rename` and
//! `delete`. Each UID prints as OpenTSDB prints it, `kind name: [b0, b1, b2]`.

use anyhow::{Context, bail};
use strata_server::{Config, StorageArgs};
use strata_tsdb::{Tsdb, Uid, UidKind};

/// `strata uid` flags: a subcommand, each with the storage flags, so `--data-dir` may come
/// before the subcommand or after it.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct UidArgs {
    #[command(flatten)]
    pub(crate) storage: StorageArgs,
    #[command(subcommand)]
    pub(crate) command: UidCommand,
}

/// The `strata uid` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub(crate) enum UidCommand {
    /// Lists the names matching a regular expression: `grep [metrics|tagk|tagv] REGEX`
    /// (every kind when none is given).
    Grep {
        #[command(flatten)]
        storage: StorageArgs,
        /// `[KIND] REGEX`.
        #[arg(num_args = 1..=2, required = true)]
        args: Vec<String>,
        /// Match ignoring case.
        #[arg(long, short = 'i')]
        ignore_case: bool,
    },
    /// Assigns UIDs to new names: `assign KIND NAME…`.
    Assign {
        #[command(flatten)]
        storage: StorageArgs,
        /// metrics, tagk or tagv.
        kind: String,
        /// The names.
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Renames a name, keeping its UID: `rename KIND OLD NEW`.
    Rename {
        #[command(flatten)]
        storage: StorageArgs,
        /// metrics, tagk or tagv.
        kind: String,
        /// The current name.
        old: String,
        /// The new name.
        new: String,
    },
    /// Deletes a name's UID mapping: `delete KIND NAME`. Refused while a series uses it
    /// (delete those with `strata delete` first).
    Delete {
        #[command(flatten)]
        storage: StorageArgs,
        /// metrics, tagk or tagv.
        kind: String,
        /// The name.
        name: String,
    },
}

/// `metrics`, `tagk` or `tagv` (and `metric`, as OpenTSDB takes it).
fn kind(s: &str) -> anyhow::Result<UidKind> {
    match s {
        "metrics" | "metric" => Ok(UidKind::Metric),
        "tagk" => Ok(UidKind::Tagk),
        "tagv" => Ok(UidKind::Tagv),
        other => bail!("unknown UID kind {other:?}: use metrics, tagk or tagv"),
    }
}

/// One UID as OpenTSDB's tool prints it: `metrics sys.cpu.user: [0, 0, 1]`.
fn line(kind: UidKind, name: &str, uid: Uid) -> String {
    let [a, b, c] = uid.to_bytes();
    format!("{} {name}: [{a}, {b}, {c}]", kind.as_str())
}

/// Runs `strata uid`.
pub(crate) fn run(args: &UidArgs) -> anyhow::Result<()> {
    // The storage flags given after the subcommand win over those given before it.
    let config = Config::resolve_storage(&args.command.storage().or(&args.storage))?;
    let (_lock, tsdb) = super::open::open_existing(&config)?;
    for out in execute(&tsdb, &args.command)? {
        println!("{out}");
    }
    tsdb.sync()?;
    Ok(())
}

impl UidCommand {
    fn storage(&self) -> &StorageArgs {
        match self {
            UidCommand::Grep { storage, .. }
            | UidCommand::Assign { storage, .. }
            | UidCommand::Rename { storage, .. }
            | UidCommand::Delete { storage, .. } => storage,
        }
    }
}

/// Runs one subcommand and returns the lines to print.
pub(crate) fn execute(tsdb: &Tsdb, command: &UidCommand) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    match command {
        UidCommand::Grep {
            args, ignore_case, ..
        } => {
            let (kinds, pattern) = match args.as_slice() {
                [pattern] => (UidKind::ALL.to_vec(), pattern),
                [k, pattern] => (vec![kind(k)?], pattern),
                _ => bail!("usage: strata uid grep [metrics|tagk|tagv] REGEX"),
            };
            let re = regex::RegexBuilder::new(pattern)
                .case_insensitive(*ignore_case)
                .build()
                .with_context(|| format!("bad regular expression {pattern:?}"))?;
            for kind in kinds {
                for name in tsdb.suggest(kind, "", usize::MAX) {
                    if re.is_match(&name) {
                        out.push(line(kind, &name, tsdb.uid(kind, &name)?));
                    }
                }
            }
        }
        UidCommand::Assign { kind: k, names, .. } => {
            let kind = kind(k)?;
            for name in names {
                let uid = tsdb
                    .assign_uid(kind, name)
                    .with_context(|| format!("assigning a UID to {} {name}", kind.as_str()))?;
                out.push(line(kind, name, uid));
            }
        }
        UidCommand::Rename {
            kind: k, old, new, ..
        } => {
            let kind = kind(k)?;
            tsdb.rename_uid(kind, old, new)
                .with_context(|| format!("renaming {} {old} to {new}", kind.as_str()))?;
            out.push(line(kind, new, tsdb.uid(kind, new)?));
        }
        UidCommand::Delete { kind: k, name, .. } => {
            let kind = kind(k)?;
            let uid = tsdb
                .delete_uid(kind, name)
                .with_context(|| format!("deleting {} {name}", kind.as_str()))?;
            out.push(format!("deleted {}", line(kind, name, uid)));
        }
    }
    Ok(out)
}
