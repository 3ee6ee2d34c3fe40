//! Wiring of the running server: the production service (media engine, process clock), the
//! full router (HTTP routes + MCP behind one request policy), the accept loop with its
//! connection limits, and graceful shutdown.

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use tokio::net::TcpListener;
use tower_http::timeout::RequestBodyTimeoutLayer;

use vidforge_core::clock;
use vidforge_core::config::Config;
use vidforge_core::media_backend::{MediaProber, MediaRenderer};
use vidforge_core::service::{RenderService, ServiceParts};
use vidforge_http::auth::Auth;
use vidforge_http::connections::{self, ConnectionLimits};
use vidforge_http::policy::{self, RequestPolicy};
use vidforge_http::routes;
use vidforge_http::session::{SessionLimits, Sessions};
use vidforge_http::{metrics as telemetry, web};
use vidforge_mcp::Extensions;

/// Starts the service with the media engine (`config.backend`) and the process clock
/// ([`clock::from_env`]). Blocking: opens the store and runs boot recovery.
pub fn start_service(config: Config) -> anyhow::Result<RenderService> {
    let renderer = MediaRenderer::new(&config)
        .map_err(|e| anyhow::anyhow!("cannot initialise the render engine: {e}"))?;
    tracing::info!(backend = %vidforge_core::engine::Renderer::backend_name(&renderer), "render engine ready");
    let objects = vidforge_s3::backend_for(&config)
        .map_err(|e| anyhow::anyhow!("cannot set up the media store: {e}"))?;
    let service = RenderService::start(ServiceParts {
        config,
        clock: clock::from_env(),
        renderer: Arc::new(renderer),
        prober: Arc::new(MediaProber),
        objects,
    })?;
    Ok(service)
}

/// Every route the server answers: [`routes::http_routes`], the pages ([`web::web_routes`])
/// and the MCP endpoint at `/mcp`, all behind the Host/Origin [`policy`] and the
/// request-body timeout (`body_idle_timeout`); [`routes::health_routes`] (`/healthz`) and
/// `/metrics` (its own access rule, [`telemetry::metrics_endpoint`]) outside both. Each
/// router authenticates its own routes, so nothing here wraps them again; a route added to
/// any of them is behind the policy without further wiring. Every request is counted
/// ([`telemetry::count_requests`]).
pub fn router(service: &RenderService) -> Router {
    router_with(service, Extensions::default())
}

/// [`router`] with MCP `extensions` mounted beside vidforge's own surface.
pub fn router_with(service: &RenderService, extensions: Extensions) -> Router {
    let config = service.config();
    // One token table and one failure budget per peer for every route.
    let auth = Auth::from_config(config);
    // OAuth: the protected resource metadata (unauthenticated, behind the policy), and the
    // issuers' keys fetched once now so the first request finds them.
    let resource_metadata = match auth.oauth() {
        Some(oauth) => {
            if tokio::runtime::Handle::try_current().is_ok() {
                oauth.prefetch();
            }
            vidforge_http::oauth::metadata::routes(oauth.clone())
        }
        None => Router::new(),
    };
    let mcp = vidforge_mcp::router(service.clone(), config, extensions, auth.clone());
    let policy = Arc::new(RequestPolicy::from_config(config));
    let secure = config.base_url().starts_with("https://");
    let sessions = Sessions::new(
        auth.clone(),
        service.store().clone(),
        service.clock().clone(),
        SessionLimits::from_config(config),
        secure,
    );
    telemetry::install();
    let guarded = routes::http_routes(service.clone(), sessions.clone())
        .merge(web::web_routes(service.clone(), sessions.clone()))
        .merge(mcp)
        .merge(resource_metadata)
        .layer(RequestBodyTimeoutLayer::new(config.body_idle_timeout))
        .layer(axum::middleware::from_fn_with_state(
            policy.clone(),
            policy::enforce,
        ));
    // Signed playback links: the Host check, not the Origin one (a sandboxed player sends
    // `Origin: null`; the link is the only credential, nothing ambient to forge).
    let playback = vidforge_http::playback::routes(
        service.clone(),
        vidforge_http::playback::PlaybackLinks::new(service.store().clone(), config.base_url()),
    )
    .layer(axum::middleware::from_fn_with_state(
        policy.clone(),
        policy::enforce,
    ))
    .layer(axum::middleware::from_fn(
        vidforge_http::playback::without_origin,
    ));
    let metrics = Router::new()
        .route("/metrics", get(telemetry::metrics_endpoint))
        .with_state(telemetry::MetricsState {
            service: service.clone(),
            sessions,
        });
    routes::health_routes(service.clone(), auth)
        .merge(metrics)
        .merge(playback)
        .merge(guarded)
        .layer(axum::middleware::from_fn(telemetry::count_requests))
        .layer(axum::middleware::from_fn(
            vidforge_http::unread_body::close_if_body_unread,
        ))
        .layer(axum::middleware::from_fn_with_state(
            vidforge_http::peer::TrustedProxies::new(config.trusted_proxies.clone()),
            vidforge_http::peer::resolve,
        ))
}

/// Serves [`router`] on `listener` until `shutdown` resolves, then drains connections.
pub async fn serve(
    service: &RenderService,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(service, listener, shutdown, Extensions::default()).await
}

/// [`serve`] with MCP `extensions` mounted ([`router_with`]), within the configured
/// connection limits ([`connections::serve`]).
pub async fn serve_with(
    service: &RenderService,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    extensions: Extensions,
) -> std::io::Result<()> {
    let limits = ConnectionLimits::from_config(service.config());
    connections::serve(listener, router_with(service, extensions), limits, shutdown).await
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
