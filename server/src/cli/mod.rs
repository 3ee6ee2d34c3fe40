//! Command-line interface: one module per subcommand.

use clap::{Parser, Subcommand};

// TEMP-MEDIA pub mod assets;
pub mod render;
// TEMP-MEDIA pub mod serve;

/// GPU-accelerated video render service driven over MCP.
#[derive(Debug, Parser)]
#[command(name = "vidforge", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Render a video file: scale, optional watermark, encode.
    Render(render::RenderArgs),
    /// Print what the engine sees in a media file.
    Probe(render::ProbeArgs),
    // TEMP-MEDIA /// Run the MCP server (HTTP: /mcp, uploads, downloads).
    // TEMP-MEDIA Serve(serve::ServeArgs),
    // TEMP-MEDIA /// Manage uploaded assets.
    // TEMP-MEDIA Assets(assets::AssetsArgs),
}

/// Logs to stderr; `RUST_LOG` overrides the default `info` level.
pub fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Render(args) => render::run_render(args),
        Command::Probe(args) => render::run_probe(args),
        // TEMP-MEDIA Command::Serve(args) => serve::run_serve(args),
        // TEMP-MEDIA Command::Assets(args) => assets::run_assets(args),
    }
}
