//! The approval page (`GET /approvals/{id}`), its live status fragment, and the decision
//! (`POST /approvals/{id}`, CSRF-checked; the same durable decision as `tasks/update`).

use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use vidforge_core::catalog::{MAX_NOTE_CHARS, human_duration};
use vidforge_core::error::ServiceError;

use super::pages::{self, ApprovalExtras};
use super::state::{ReloadQuery, Web, csrf_refused, html, service_error_page};
use super::view::RenderView;

pub(super) async fn approval_page(
    State(web): State<Web>,
    Path(id): Path<String>,
    Query(q): Query<ReloadQuery>,
    headers: HeaderMap,
) -> Response {
    let path = vidforge_core::uri::approval_path(&id);
    let Some(session) = web.session(&headers) else {
        return web.signed_out(&headers, &path, q.reload.is_some());
    };
    let csrf = web.sessions.csrf_token(&session);
    let chrome = web.chrome(&session, &csrf);
    let rec = match web.service.get(session.principal.as_str(), &id) {
        Ok(rec) if rec.args.watermark.is_some() && !web.service.task_expired(&rec) => rec,
        Ok(_) | Err(ServiceError::NotFound) => {
            return html(StatusCode::NOT_FOUND, pages::not_found(&chrome, &id));
        }
        Err(e) => return service_error_page(&web, &session, &e),
    };
    let principal = session.principal.as_str();
    let asset = |asset_id: &str| web.service.resolve_asset(principal, asset_id).ok();
    let watermark_size = rec
        .args
        .watermark
        .as_ref()
        .and_then(|w| asset(&w.image_asset))
        .and_then(|a| Some((a.probe.width?, a.probe.height?)));
    let source = asset(&rec.args.source_asset).map(|a| {
        let p = &a.probe;
        let mut parts = Vec::new();
        if let (Some(w), Some(h)) = (p.width, p.height) {
            parts.push(format!("{w}×{h}"));
        }
        if let Some(d) = p.duration_seconds {
            parts.push(format!("{d:.1} s"));
        }
        parts.push(a.file_name.clone());
        parts.join(", ")
    });
    let extras = ApprovalExtras {
        now_ms: web.service.now_ms(),
        csrf: csrf.clone(),
        watermark_size,
        source,
        approval_timeout: human_duration(web.service.config().approval_timeout),
    };
    html(
        StatusCode::OK,
        pages::approval(
            &chrome,
            &RenderView::of(&rec).with_preview_size(&rec),
            &extras,
        ),
    )
}

pub(super) async fn status_fragment(
    State(web): State<Web>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(session) = web.session(&headers) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    match web.service.get(session.principal.as_str(), &id) {
        Ok(rec) => html(
            StatusCode::OK,
            pages::status(&RenderView::of(&rec), web.service.now_ms()),
        ),
        Err(e) => (crate::routes::status_for(&e), e.to_string()).into_response(),
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct DecideForm {
    csrf: Option<String>,
    decision: Option<String>,
    note: Option<String>,
}

pub(super) async fn decide(
    State(web): State<Web>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Form(form): Form<DecideForm>,
) -> Response {
    let path = vidforge_core::uri::approval_path(&id);
    let Some(session) = web.session(&headers) else {
        return web.signed_out(&headers, &path, true);
    };
    if !web.sessions.csrf_ok(&session, form.csrf.as_deref()) {
        return csrf_refused(&web, &session, &path);
    }
    let csrf = web.sessions.csrf_token(&session);
    let chrome = web.chrome(&session, &csrf);
    let principal = session.principal.as_str();
    // Another principal's render is as unknown as a missing one, before anything else.
    match web.service.get(principal, &id) {
        Ok(r) if r.args.watermark.is_some() => {}
        Ok(_) | Err(ServiceError::NotFound) => {
            return html(StatusCode::NOT_FOUND, pages::not_found(&chrome, &id));
        }
        Err(e) => return service_error_page(&web, &session, &e),
    }
    // A decision changes state: `vidforge:render` (an OAuth session's token may have only
    // `vidforge:read`).
    if !session.scopes.allow(crate::scope::Need::Render) {
        return html(
            StatusCode::FORBIDDEN,
            pages::message(
                &chrome,
                "Not allowed",
                "Your sign-in may read renders but not decide (it lacks vidforge:render).",
                &path,
            ),
        );
    }
    let approved = match form.decision.as_deref() {
        Some("approve") => true,
        Some("reject") => false,
        _ => {
            return html(
                StatusCode::BAD_REQUEST,
                pages::message(
                    &chrome,
                    "Choose Approve or Reject",
                    "The form did not say which button was pressed.",
                    &path,
                ),
            );
        }
    };
    let note = form
        .note
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty());
    if note
        .as_ref()
        .is_some_and(|n| n.chars().count() > MAX_NOTE_CHARS)
    {
        return html(
            StatusCode::BAD_REQUEST,
            pages::message(
                &chrome,
                "The note is too long",
                &format!("Notes are at most {MAX_NOTE_CHARS} characters."),
                &path,
            ),
        );
    }
    match web
        .service
        .decide_approval(principal, &id, approved, note)
        .await
    {
        Ok(_) => {
            tracing::info!(render_id = %id, principal, approved, "decision from the approval page");
            Redirect::to(&path).into_response()
        }
        Err(e) => service_error_page(&web, &session, &e),
    }
}
