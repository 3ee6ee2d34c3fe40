//! The dashboard (`GET /`): the principal's renders (admins: everyone's), their live rows
//! fragment, and the server's capabilities.

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::session::Session;
use vidforge_core::catalog::human_duration;
use vidforge_core::error::ServiceError;
use vidforge_core::service::RenderService;

use super::pages::{self, Capabilities};
use super::state::{ReloadQuery, Web, html, service_error_page};
use super::view::{HookView, RenderView};

/// Renders the dashboard lists (newest first).
const DASHBOARD_RENDERS: usize = 100;
/// Webhook events read for the admins' list, and how many of them per principal it shows.
const DASHBOARD_HOOKS: usize = 200;
const HOOKS_PER_PRINCIPAL: usize = 5;

pub(super) async fn dashboard(
    State(web): State<Web>,
    Query(q): Query<ReloadQuery>,
    headers: HeaderMap,
) -> Response {
    let Some(session) = web.session(&headers) else {
        return web.signed_out(&headers, "/", q.reload.is_some());
    };
    let all = web.is_admin(&session);
    let renders = match load_rows(&web, &session, all).await {
        Ok(r) => r,
        Err(e) => return service_error_page(&web, &session, &e),
    };
    let hooks = if all && web.service.config().webhooks_enabled() {
        match load_hooks(&web).await {
            Ok(h) => Some(h),
            Err(e) => return service_error_page(&web, &session, &e),
        }
    } else {
        None
    };
    let csrf = web.sessions.csrf_token(&session);
    let caps = capabilities(&web.service);
    let now = web.service.now_ms();
    html(
        StatusCode::OK,
        pages::dashboard(
            &web.chrome(&session, &csrf),
            &renders,
            all,
            hooks.as_deref(),
            &caps,
            now,
        ),
    )
}

/// The newest webhook events, [`HOOKS_PER_PRINCIPAL`] of each principal at most.
async fn load_hooks(web: &Web) -> Result<Vec<HookView>, ServiceError> {
    let outbox = web.service.outbox();
    tokio::task::spawn_blocking(move || {
        outbox
            .recent(None, DASHBOARD_HOOKS)
            .map(|events| HookView::list(&events, HOOKS_PER_PRINCIPAL))
            .map_err(ServiceError::from)
    })
    .await
    .map_err(|e| ServiceError::Internal(format!("listing webhook events: {e}")))?
}

pub(super) async fn load_rows(
    web: &Web,
    session: &Session,
    all: bool,
) -> Result<Vec<RenderView>, ServiceError> {
    let service = web.service.clone();
    let principal = (!all).then(|| session.principal.as_str().to_string());
    tokio::task::spawn_blocking(move || {
        service
            .recent_renders(principal.as_deref(), DASHBOARD_RENDERS)
            .map(|recs| recs.iter().map(RenderView::of).collect())
    })
    .await
    .map_err(|e| ServiceError::Internal(format!("listing renders: {e}")))?
}

pub(super) async fn rows_fragment(State(web): State<Web>, headers: HeaderMap) -> Response {
    let Some(session) = web.session(&headers) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let all = web.is_admin(&session);
    match load_rows(&web, &session, all).await {
        Ok(renders) => html(
            StatusCode::OK,
            pages::rows(&renders, all, web.service.now_ms()),
        ),
        Err(e) => (crate::routes::status_for(&e), e.to_string()).into_response(),
    }
}

pub(super) fn capabilities(service: &RenderService) -> Capabilities {
    let c = service.config();
    let hw = service.hardware();
    let store = if service.store().is_shared() {
        "PostgreSQL (shared by the cluster)"
    } else {
        "sled (embedded)"
    };
    Capabilities {
        rows: vec![
            ("Node", service.node().to_string()),
            ("Compositor", hw.compositor),
            ("Decoder", hw.decoder),
            (
                "Encoders",
                format!("mp4 and mov: {}; webm: libvpx-vp9", hw.h264_encoder),
            ),
            ("Resolutions", "720p, 1080p, 4k".into()),
            ("Render slots", c.render_slots.to_string()),
            (
                "Unfinished renders per principal",
                c.per_principal_concurrent.to_string(),
            ),
            (
                "Largest upload",
                super::view::human_bytes(c.max_upload_bytes).to_string(),
            ),
            (
                "Longest source",
                human_duration(std::time::Duration::from_secs(c.max_source_seconds)),
            ),
            ("Approval timeout", human_duration(c.approval_timeout)),
            ("Results kept", human_duration(c.result_ttl)),
            ("Task store", store.into()),
        ],
    }
}
