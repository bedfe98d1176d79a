//! `d8`: one binary, one subcommand per component of the platform.

use clap::Parser;

/// Deckhouse platform core and registry, re-implemented in Rust.
#[derive(Debug, Parser)]
#[command(name = "d8", version, about)]
struct Cli {}

fn main() -> anyhow::Result<()> {
    let _cli = Cli::parse();
    Ok(())
}
