//! The `strata` binary.

use clap::{Parser, Subcommand};

/// Strata: an OpenTSDB-compatible time-series database.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the server.
    Serve,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve => anyhow::bail!("the server is not wired up yet"),
    }
}
