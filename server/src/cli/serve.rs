//! `vidforge serve`: opens the store, recovers interrupted renders, starts the workers and the
//! sweeper, and serves HTTP (uploads, downloads, `/mcp`).

use anyhow::Context;
use clap::Args;

use crate::app;
use vidforge_core::config::{Config, ConfigArgs, display_path};
use vidforge_core::service::RenderService;
use vidforge_mcp::{ExtensionSpec, Extensions};

/// Prints a line on the console. An unwritable stdout (a full disk under a redirected log)
/// costs the line, never the server: `println!` would panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// How long open connections may finish after a shutdown request.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Gone from this binary: the conformance suite's fixtures are served by the separate
    /// `vidforge-conformance` binary (which mounts them always). Kept, hidden, to say so.
    #[arg(long, hide = true)]
    pub conformance_fixtures: bool,
}

/// `vidforge serve`: vidforge's own MCP surface only.
pub fn run_serve(args: ServeArgs) -> anyhow::Result<()> {
    if args.conformance_fixtures {
        anyhow::bail!(
            "--conformance-fixtures is not part of the production vidforge binary: the MCP \
             conformance suite's fixtures are served by the conformance build \
             (`cargo build -p vidforge-conformance`, then `vidforge-conformance serve ...`)"
        );
    }
    run_serve_with(args, Vec::new())
}

/// `serve` with MCP `extensions` mounted beside vidforge's own surface (mounted after the
/// service starts, before the listener serves). `--conformance-fixtures` is accepted and
/// ignored here: a binary that passes extensions mounts them regardless.
pub fn run_serve_with(args: ServeArgs, extensions: Vec<ExtensionSpec>) -> anyhow::Result<()> {
    let mut config = Config::load(&args.config)?;
    config.check_bind_safety()?;
    if let Some(spec) = extensions.iter().find(|e| e.loopback_only)
        && !config.listen.ip().is_loopback()
    {
        anyhow::bail!(
            "refusing to listen on {} with {} mounted: they are test tools; bind a loopback \
             address",
            config.listen,
            spec.name
        );
    }
    let names: Vec<String> = extensions.iter().map(|e| e.name.clone()).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("vidforge-io")
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        // Port 0 picks a free port; links must name the real one.
        config.listen = listener.local_addr()?;
        let banner = Banner {
            listen: config.listen,
            base: config.base_url(),
            data_dir: display_path(&config.data_dir),
            auth: auth_summary(&config),
            names,
        };
        let (service, extensions) = tokio::task::spawn_blocking(move || {
            let service = app::start_service(config)?;
            let extensions = Extensions::mount(&service, extensions)?;
            anyhow::Ok((service, extensions))
        })
        .await
        .context("service start panicked")??;
        banner.print(&service);
        let webhooks = vidforge_webhooks::start(&service)?;
        if webhooks.is_some() {
            say!("  webhooks      on (signed per Standard Webhooks)");
        }
        say!("Ready. Ctrl-C or SIGTERM stops it.");
        tracing::info!(listen = %banner.listen, data_dir = %banner.data_dir, "serving");
        serve_until_stopped(&service, listener, extensions).await?;
        if let Some(webhooks) = webhooks {
            webhooks.stop().await;
        }
        tokio::task::spawn_blocking(move || service.shutdown())
            .await
            .context("shutdown panicked")?;
        tracing::info!("stopped");
        say!("vidforge stopped");
        Ok(())
    })
}

/// How callers authenticate, for the banner.
fn auth_summary(config: &Config) -> String {
    if !config.auth_required() {
        return "none (anonymous principal, loopback only)".to_string();
    }
    let mut kinds = Vec::new();
    if !config.tokens.is_empty() {
        kinds.push(format!("{} static tokens", config.tokens.len()));
    }
    if !config.oauth_issuers.is_empty() {
        kinds.push(format!(
            "OAuth access tokens from {}",
            config.oauth_issuers.join(", ")
        ));
    }
    format!("bearer token ({})", kinds.join("; "))
}

/// What the startup banner says besides the service's own description.
struct Banner {
    listen: std::net::SocketAddr,
    base: String,
    data_dir: String,
    auth: String,
    /// The mounted extensions.
    names: Vec<String>,
}

impl Banner {
    /// Prints the banner up to the mounted extensions.
    fn print(&self, service: &RenderService) {
        let (listen, base) = (self.listen, &self.base);
        // The first line is stable (scripts and tests read the address from it).
        say!("vidforge listening on http://{listen}");
        say!("  MCP endpoint  {base}/mcp");
        say!("  uploads       POST {base}/assets?name=<file name>");
        say!("  data dir      {}", self.data_dir);
        let store = service.store();
        if store.is_shared() {
            say!(
                "  task store    {} (node {})",
                store.describe(),
                service.node()
            );
        }
        if store.is_shared() || service.media().is_object() {
            say!("  media store   {}", service.media().describe());
        }
        say!("  auth          {}", self.auth);
        let hw = service.hardware();
        say!("  backend       {}", hw.compositor);
        say!("  decoder       {}", hw.decoder);
        say!("  h264 encoder  {}", hw.h264_encoder);
        for line in &hw.why {
            say!("    because     {line}");
        }
        for name in &self.names {
            say!("  mounted       {name} (test use only)");
            tracing::warn!(extension = %name, "extension mounted beside the production tools");
        }
    }
}

/// Serves until Ctrl-C or SIGTERM. Long-lived streams (subscriptions/listen) would hold a
/// graceful shutdown open forever: open connections get [`SHUTDOWN_GRACE`], then are closed.
async fn serve_until_stopped(
    service: &RenderService,
    listener: tokio::net::TcpListener,
    extensions: Extensions,
) -> anyhow::Result<()> {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        app::shutdown_signal().await;
        let _ = stop_tx.send(true);
    });
    let mut graceful_rx = stop_rx.clone();
    let graceful = async move {
        let _ = graceful_rx.wait_for(|stop| *stop).await;
    };
    let mut deadline_rx = stop_rx;
    let deadline = async move {
        let _ = deadline_rx.wait_for(|stop| *stop).await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        served = app::serve_with(service, listener, graceful, extensions) => served?,
        _ = deadline => tracing::warn!(
            "connections still open {}s after the shutdown request; closing them",
            SHUTDOWN_GRACE.as_secs()
        ),
    }
    Ok(())
}
