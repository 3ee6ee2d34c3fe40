//! Command-line interface: one module per subcommand.

use clap::{Parser, Subcommand};

pub mod assets;
pub mod probe;
pub mod render;
pub mod serve;

/// GPU-accelerated video render service driven over MCP.
#[derive(Debug, Parser)]
#[command(name = "vidforge", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per process: the size of the `serve` flags does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Render a video file: scale, optional watermark, encode.
    Render(render::RenderArgs),
    /// Print what the engine sees in a media file.
    Probe(probe::ProbeArgs),
    /// Run the MCP server (HTTP: /mcp, uploads, downloads).
    Serve(serve::ServeArgs),
    /// Manage uploaded assets.
    Assets(assets::AssetsArgs),
    /// Benchmark renders side by side with the ffmpeg CLI (report.json, report.md, fps.svg).
    Bench(vidforge_bench::BenchArgs),
    /// Load-test the MCP front on loopback while a render runs (req/s, p50/p99, peak RSS).
    Load(vidforge_bench::load::LoadArgs),
}

/// Logs to stderr; `RUST_LOG` overrides the default `info` level. Colours only when stderr is a
/// terminal: a log file or journal gets plain text, no escape sequences.
pub fn init_tracing() {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    vidforge_core::malloc::limit_arenas();
    match cli.command {
        Command::Serve(args) => serve::run_serve(args),
        other => run_with(Cli { command: other }, Vec::new()),
    }
}

/// [`run`] for a binary that mounts MCP `extensions` on `serve` (the conformance build); the
/// other subcommands are the same.
pub fn run_with(cli: Cli, extensions: Vec<vidforge_mcp::ExtensionSpec>) -> anyhow::Result<()> {
    vidforge_core::malloc::limit_arenas();
    match cli.command {
        Command::Render(args) => render::run_render(args),
        Command::Probe(args) => probe::run_probe(args),
        Command::Serve(args) => serve::run_serve_with(args, extensions),
        Command::Assets(args) => assets::run_assets(args),
        Command::Bench(args) => vidforge_bench::run_bench(args),
        Command::Load(args) => vidforge_bench::load::run_load(args),
    }
}
