//! Wiring of the running server: the production service (media engine, process clock), the
//! full router (HTTP routes + MCP), and graceful shutdown.

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;

use crate::clock;
use crate::config::Config;
use crate::http;
use crate::mcp::Extensions;
use crate::media_backend::{MediaProber, MediaRenderer};
use crate::service::{RenderService, ServiceParts};

/// Starts the service with the media engine (`config.backend`) and the process clock
/// ([`clock::from_env`]). Blocking: opens the store and runs boot recovery.
pub fn start_service(config: Config) -> anyhow::Result<RenderService> {
    let renderer = MediaRenderer::new(config.backend)
        .map_err(|e| anyhow::anyhow!("cannot initialise the render engine: {e}"))?;
    tracing::info!(backend = %crate::engine::Renderer::backend_name(&renderer), "render engine ready");
    let service = RenderService::start(ServiceParts {
        config,
        clock: clock::from_env(),
        renderer: Arc::new(renderer),
        prober: Arc::new(MediaProber),
    })?;
    Ok(service)
}

/// Every route the server answers: [`http::http_routes`] plus the MCP endpoint at `/mcp`.
/// Each router authenticates its own routes with the bearer-token middleware (all but
/// `/healthz`): [`http::http_routes`] and [`crate::mcp::router`] apply it themselves, so
/// nothing here wraps them again.
pub fn router(service: &RenderService) -> Router {
    router_with(service, Extensions::default())
}

/// [`router`] with MCP `extensions` mounted beside vidforge's own surface.
pub fn router_with(service: &RenderService, extensions: Extensions) -> Router {
    let mcp = crate::mcp::router(service.clone(), service.config(), extensions);
    http::http_routes(service.clone()).merge(mcp)
}

/// Serves [`router`] on `listener` until `shutdown` resolves, then drains connections.
pub async fn serve(
    service: &RenderService,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(service, listener, shutdown, Extensions::default()).await
}

/// [`serve`] with MCP `extensions` mounted ([`router_with`]).
pub async fn serve_with(
    service: &RenderService,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    extensions: Extensions,
) -> std::io::Result<()> {
    axum::serve(listener, router_with(service, extensions))
        .with_graceful_shutdown(shutdown)
        .await
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutdown requested");
}
