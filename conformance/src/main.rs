//! `vidforge-conformance`: the `vidforge` CLI whose `serve` also mounts the official MCP
//! conformance suite's fixtures (loopback only). For `scripts/run-conformance.sh` and the
//! fixture tests; the production `vidforge` binary contains none of this crate.

use clap::Parser;

fn main() -> anyhow::Result<()> {
    vidforge::cli::init_tracing();
    let cli = vidforge::cli::Cli::parse();
    vidforge::cli::run_with(cli, vec![vidforge_conformance::extension()])
}
