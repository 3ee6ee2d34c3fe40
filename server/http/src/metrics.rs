//! Prometheus metrics, the HTTP side: the exporter (`metrics-exporter-prometheus`, installed
//! once per process with the buckets of [`vidforge_core::telemetry`]), the middleware that
//! counts every request, and `GET /metrics`. The series and the recording helpers the domain
//! calls are in [`vidforge_core::telemetry`].

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{LazyLock, OnceLock, RwLock};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics::{Counter, Histogram, counter, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use vidforge_core::store::RenderState;
use vidforge_core::telemetry::{FPS_BUCKETS, LATENCY_BUCKETS, LONG_BUCKETS, PSNR_BUCKETS};

use crate::session::Sessions;

/// JSON-RPC methods counted by name; anything else is `other` (bounded label values).
const MCP_METHODS: [&str; 16] = [
    "server/discover",
    "initialize",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "tasks/list",
    "subscriptions/listen",
    "completion/complete",
    "ping",
];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the process-wide recorder (once; later calls return the same handle). `None` when
/// another recorder was installed first (an embedding program's own).
pub fn install() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let mut builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &LATENCY_BUCKETS);
            for (name, buckets) in [
                ("vidforge_render_duration_seconds", &LONG_BUCKETS[..]),
                ("vidforge_approval_wait_seconds", &LONG_BUCKETS[..]),
                ("vidforge_stage_busy_seconds", &LONG_BUCKETS[..]),
                ("vidforge_speculative_seconds", &LONG_BUCKETS[..]),
                ("vidforge_render_fps", &FPS_BUCKETS[..]),
                ("vidforge_render_psnr_db", &PSNR_BUCKETS[..]),
            ] {
                builder = builder
                    .and_then(|b| b.set_buckets_for_metric(Matcher::Full(name.into()), buckets));
            }
            let handle = match builder.map(PrometheusBuilder::install_recorder) {
                Ok(Ok(h)) => h,
                Ok(Err(e)) | Err(e) => {
                    tracing::warn!(error = %e, "metrics recorder not installed; /metrics is empty");
                    return None;
                }
            };
            // Histograms keep raw samples until upkeep folds them into buckets.
            let upkeep = handle.clone();
            let spawned = std::thread::Builder::new()
                .name("vidforge-metrics".into())
                .spawn(move || {
                    loop {
                        std::thread::sleep(Duration::from_secs(5));
                        upkeep.run_upkeep();
                    }
                });
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "metrics upkeep thread not started");
            }
            Some(handle)
        })
        .clone()
}

// ---- HTTP ----

/// One request series' handles: looked up in the registry once, then only incremented.
#[derive(Clone)]
struct RequestSeries {
    requests: Counter,
    latency: Histogram,
    /// `/mcp` requests: by JSON-RPC method too.
    mcp: Option<(Counter, Histogram)>,
}

/// (method, matched route, status, JSON-RPC method): every label value comes from a bounded
/// set (standard methods, the router's routes, status codes, [`MCP_METHODS`]).
type SeriesKey = (&'static str, String, u16, Option<&'static str>);

static REQUEST_SERIES: LazyLock<RwLock<HashMap<SeriesKey, RequestSeries>>> =
    LazyLock::new(Default::default);

fn request_series(key: SeriesKey) -> RequestSeries {
    if let Some(s) = REQUEST_SERIES
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key)
    {
        return s.clone();
    }
    let (method, route, status, mcp) = key.clone();
    let series = RequestSeries {
        requests: counter!(
            "vidforge_http_requests_total",
            "method" => method,
            "route" => route.clone(),
            "status" => status.to_string()
        ),
        latency: histogram!(
            "vidforge_http_request_duration_seconds",
            "method" => method,
            "route" => route
        ),
        mcp: mcp.map(|m| {
            (
                counter!("vidforge_mcp_requests_total", "method" => m, "status" => status.to_string()),
                histogram!("vidforge_mcp_request_duration_seconds", "method" => m),
            )
        }),
    };
    REQUEST_SERIES
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, series.clone());
    series
}

/// The method as a label value: the standard ones by name, anything else `other`.
fn method_label(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        Method::PATCH => "PATCH",
        _ => "other",
    }
}

/// Middleware: counts every request by method, matched route and status, with its latency;
/// `/mcp` requests also by JSON-RPC method (the `Mcp-Method` header).
pub async fn count_requests(req: Request, next: Next) -> Response {
    let start = Instant::now();
    let method = method_label(req.method());
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_string();
    let mcp_method = (route == "/mcp").then(|| {
        let named = req
            .headers()
            .get("mcp-method")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        MCP_METHODS
            .iter()
            .find(|m| **m == named)
            .copied()
            .unwrap_or("other")
    });
    let response = next.run(req).await;
    let took = start.elapsed().as_secs_f64();
    let series = request_series((method, route, response.status().as_u16(), mcp_method));
    series.requests.increment(1);
    series.latency.record(took);
    if let Some((requests, latency)) = &series.mcp {
        requests.increment(1);
        latency.record(took);
    }
    response
}

/// What `/metrics` needs: the service (for the gauges), who may read it, and the sessions
/// (an admin's bearer token from elsewhere).
#[derive(Clone)]
pub struct MetricsState {
    pub service: vidforge_core::service::RenderService,
    pub sessions: Sessions,
}

/// Whether `/metrics` answers `peer` without a bearer token: with `metrics_public`, or for a
/// loopback peer. An IPv4 peer of a dual-stack (`[::]`) listener arrives IPv4-mapped
/// (`::ffff:127.0.0.1`), so the address is made canonical first. An unknown peer needs a token.
fn open_without_credentials(peer: Option<IpAddr>, metrics_public: bool) -> bool {
    metrics_public || peer.is_some_and(|ip| ip.to_canonical().is_loopback())
}

/// `GET /metrics`: the Prometheus text format. Loopback peers (and anyone with
/// `metrics_public`) read it without authentication; others need an admin's bearer token.
pub async fn metrics_endpoint(State(state): State<MetricsState>, req: Request) -> Response {
    let config = state.service.config();
    let peer = crate::peer::client_ip(req.extensions());
    if !open_without_credentials(peer, config.metrics_public) {
        let auth = state.sessions.auth();
        let outcome = auth.authenticate(req.headers()).await;
        if let crate::auth_limit::Verdict::Limited(wait) = auth.judge(peer, &outcome) {
            return crate::auth::rate_limited(wait);
        }
        match outcome {
            // An admin: a static token's principal in `admins`, or the vidforge:admin scope.
            Ok(grant) if grant.scopes.allow(crate::scope::Need::Admin) => {}
            Ok(_) => return auth.insufficient_scope(crate::scope::Need::Admin),
            Err(e) => return auth.unauthorized(e),
        }
    }
    let Some(handle) = install() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "/metrics: another metrics recorder is installed in this process\n",
        )
            .into_response();
    };
    let load = state.service.load_snapshot();
    for s in [
        RenderState::Queued,
        RenderState::Previewing,
        RenderState::Rendering,
        RenderState::AwaitingApproval,
    ] {
        let n = load.by_state.get(&s).copied().unwrap_or(0);
        gauge!("vidforge_renders", "state" => s.as_str()).set(n as f64);
    }
    let count = |s| load.by_state.get(&s).copied().unwrap_or(0) as f64;
    gauge!("vidforge_queue_depth").set(count(RenderState::Queued));
    gauge!("vidforge_approvals_pending").set(count(RenderState::AwaitingApproval));
    gauge!("vidforge_workers_busy").set(load.workers_busy as f64);
    gauge!("vidforge_render_slots").set(load.render_slots as f64);
    let mut response = handle.render().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_peers_read_metrics_without_a_token() {
        let open = |peer: &str| open_without_credentials(Some(peer.parse().unwrap()), false);
        for loopback in ["127.0.0.1", "127.3.4.5", "::1", "::ffff:127.0.0.1"] {
            assert!(open(loopback), "{loopback}");
        }
        for other in [
            "192.0.2.2",
            "10.0.0.7",
            "fd00::2",
            "::ffff:192.0.2.2",
            "0.0.0.0",
        ] {
            assert!(!open(other), "{other}");
        }
        assert!(!open_without_credentials(None, false));
        assert!(open_without_credentials(
            Some("192.0.2.2".parse().unwrap()),
            true
        ));
        assert!(open_without_credentials(None, true));
    }
}
