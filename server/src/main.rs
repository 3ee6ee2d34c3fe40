//! `vidforge`: the command-line front of the service.

use clap::Parser;

fn main() -> anyhow::Result<()> {
    vidforge::cli::init_tracing();
    let cli = vidforge::cli::Cli::parse();
    vidforge::cli::run(cli)
}
