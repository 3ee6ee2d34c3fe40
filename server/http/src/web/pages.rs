//! The HTML of every page and live fragment, as maud templates (escaped by construction).
//! No external assets: the stylesheet and the script are served by the binary
//! ([`super::STYLESHEET`], [`super::SCRIPT`]).

use maud::{DOCTYPE, Markup, html};

use super::view::{Ahead, HookView, RenderView, human_bytes, time_left};
use vidforge_core::catalog::MAX_NOTE_CHARS;
use vidforge_core::uri;

/// Who is looking, for the page header.
pub struct Chrome<'a> {
    /// `None` on the sign-in page.
    pub principal: Option<&'a str>,
    /// The session's CSRF token (for the sign-out form).
    pub csrf: Option<&'a str>,
    /// Sign-out is offered only where signing in exists (tokens configured).
    pub can_sign_out: bool,
}

/// The page around `body`.
pub fn layout(title: &str, chrome: &Chrome, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · vidforge" }
                link rel="stylesheet" href="/ui/app.css";
                script src="/ui/app.js" defer {}
            }
            body {
                header.top {
                    a.brand href="/" { "vidforge" }
                    @if let Some(p) = chrome.principal {
                        span.who { "Signed in as " strong { (p) } }
                        @if chrome.can_sign_out {
                            form.inline method="post" action="/signout" {
                                input type="hidden" name="csrf" value=(chrome.csrf.unwrap_or_default());
                                button.link type="submit" { "Sign out" }
                            }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// The sign-in form; `next` is where to go after it.
/// How a person may sign in: through the authorization server (its issuer), with a token,
/// or both.
#[derive(Clone, Copy, Debug)]
pub struct SignInOptions<'a> {
    /// "Sign in with ISSUER" (the pages' OAuth sign-in is configured).
    pub issuer: Option<&'a str>,
    /// The token form (static tokens are configured).
    pub token: bool,
}

pub fn sign_in(next: &str, error: Option<&str>, options: SignInOptions) -> Markup {
    let chrome = Chrome {
        principal: None,
        csrf: None,
        can_sign_out: false,
    };
    let login = format!("/oauth/login?next={}", super::query::encode_component(next));
    layout(
        "Sign in",
        &chrome,
        html! {
            h1 { "Sign in" }
            @if let Some(e) = error {
                p #error .error role="alert" { (e) }
            }
            @if let Some(issuer) = options.issuer {
                p { a #signin-oauth .button .primary href=(login) { "Sign in with " (issuer) } }
            }
            @if options.token || options.issuer.is_none() {
                p { "Paste the bearer token your vidforge operator gave you (the one your agent uses). \
                     It is not stored in the browser: a session cookie is." }
                form #signin method="post" action="/signin" {
                    input type="hidden" name="next" value=(next);
                    label for="token" { "Token" }
                    input #token type="password" name="token" autocomplete="current-password" required autofocus;
                    button #signin-submit .primary type="submit" { "Sign in" }
                }
            }
        },
    )
}

/// The same page for an unknown render and for another principal's.
pub fn not_found(chrome: &Chrome, id: &str) -> Markup {
    layout(
        "Not found",
        chrome,
        html! {
            h1 #not-found { "No such render" }
            p { "There is no render " code { (id) } " for you here. It may belong to someone else, \
                 or its record may have expired." }
            p { a href="/" { "Back to your renders" } }
        },
    )
}

/// A plain message page (refusals, conflicts), with a way back.
pub fn message(chrome: &Chrome, title: &str, text: &str, back: &str) -> Markup {
    layout(
        title,
        chrome,
        html! {
            h1 #message-title { (title) }
            p #message role="alert" { (text) }
            p { a href=(back) { "Back" } }
        },
    )
}

/// A page that reloads itself once: a link from another site does not carry the `Strict`
/// session cookie, a same-site reload does.
pub fn reload(to: &str) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="refresh" content=(format!("0;url={to}"));
                title { "vidforge" }
            }
            body { p { a href=(to) { "Continue" } } }
        }
    }
}

/// What the approval page shows beside the render itself.
pub struct ApprovalExtras {
    pub now_ms: u64,
    pub csrf: String,
    /// The watermark image's pixel size.
    pub watermark_size: Option<(u32, u32)>,
    /// The source: `1920x1080, 12.0 s, mp4`.
    pub source: Option<String>,
    pub approval_timeout: String,
}

/// `GET /approvals/{id}`.
pub fn approval(chrome: &Chrome, v: &RenderView, x: &ApprovalExtras) -> Markup {
    let title = format!("Approve the watermark of {}", v.id);
    let decided = v.approval.as_ref().and_then(|a| a.decision.as_ref());
    layout(
        &title,
        chrome,
        html! {
            h1 { "Watermark approval" }
            p.sub { "Render " code { (v.id) } }
            @if v.awaiting() && decided.is_none() {
                section.decide {
                    h2 { "Your decision" }
                    @if let Some(a) = &v.approval {
                        p {
                            "Time left: "
                            span #time-left data-deadline=(a.deadline_ms) { (time_left(a.deadline_ms, x.now_ms)) }
                            " (unanswered approvals time out after " (x.approval_timeout) ")."
                        }
                    }
                    @match v.ahead {
                        Some(Ahead::Ready) => p #ahead .ahead {
                            "The video is already rendered with these settings: it is ready the moment you approve."
                        },
                        Some(Ahead::Rendering) => p #ahead .ahead {
                            "The video is being rendered with these settings while you decide, so it is ready soon after you approve."
                        },
                        None => {},
                    }
                    form #decide method="post" action=(uri::approval_path(&v.id)) {
                        input type="hidden" name="csrf" value=(x.csrf);
                        label for="note" { "Note (optional, e.g. what to change)" }
                        textarea #note name="note" rows="2" maxlength=(MAX_NOTE_CHARS) {}
                        div.buttons {
                            button #approve .primary type="submit" name="decision" value="approve" { "Approve" }
                            button #reject .danger type="submit" name="decision" value="reject" { "Reject" }
                        }
                    }
                }
            }
            @if let Some(d) = decided {
                p #decision .decision {
                    @if d.approved { "Approved" } @else { "Rejected" }
                    " at " (d.decided_at)
                    @if let Some(n) = &d.note { ": " q { (n) } }
                }
            }
            (status(v, x.now_ms))
            @if let (Some(path), Some((w, h))) = (&v.preview_path, v.preview_size) {
                section.preview aria-label="Preview" {
                    h2 { "Preview frame, " (w) "×" (h) " (real size)" }
                    div.frame {
                        img #preview src=(path) width=(w) height=(h)
                            alt="The first frames of the output with the watermark applied";
                    }
                    @if let Some(wm) = &v.watermark {
                        h2 { "The watermark corner, zoomed 2×" }
                        div #corner .corner role="img" aria-label="The watermark's corner of the preview, enlarged"
                            style=(corner_style(path, w, h, &wm.position)) {}
                    }
                }
            } @else {
                p { "The preview is not available (any more)." }
            }
            section.facts {
                h2 { "Parameters" }
                dl #params {
                    @if let Some(wm) = &v.watermark {
                        dt { "Position" } dd #param-position { (wm.position.replace('_', " ")) }
                        dt { "Opacity" } dd #param-opacity { (format!("{:.0}%", wm.opacity * 100.0)) }
                    }
                    dt { "Watermark size" }
                    dd #param-size {
                        @match x.watermark_size {
                            Some((w, h)) => { (w) "×" (h) " px" }
                            None => { "unknown (the image asset expired)" }
                        }
                    }
                    dt { "Source" } dd #param-source { (x.source.as_deref().unwrap_or("unknown (the source asset expired)")) }
                    dt { "Output" } dd #param-output { (v.resolution) " " (v.format) }
                }
            }
        },
    )
}

/// The live status section of the approval page (`/ui/fragments/approvals/{id}`): replaced
/// every second until the render is finished (`data-final`).
pub fn status(v: &RenderView, now_ms: u64) -> Markup {
    let live = format!("/ui/fragments/approvals/{}", v.id);
    html! {
        section #status .status data-live=(live) data-state=(v.state) data-final=(v.terminal) aria-live="polite" {
            h2 { "Render" }
            p { "State: " span #state { (v.state) } }
            p #summary { (v.summary(now_ms)) }
            @if let Some(p) = &v.progress && !v.terminal {
                (progress_bar(p.percent))
                p.small {
                    (p.stage)
                    @if let Some(fps) = p.fps { ", " (format!("{fps:.1}")) " fps" }
                    @if let Some(b) = &p.backend { ", on " (b) }
                }
            }
            @if let Some(r) = &v.result {
                @let w = r.width.clamp(1, 960);
                video #player controls preload="metadata" src=(r.download_path) width=(w)
                    height=(u64::from(r.height) * u64::from(w) / u64::from(r.width.max(1))) {}
                p {
                    a #download href=(r.download_path) download { "Download (" (human_bytes(r.size_bytes)) ")" }
                    " · " (r.width) "×" (r.height) ", " (format!("{:.1}", r.duration_seconds)) " s, "
                    (format!("{:.0}", r.fps)) " fps on " (r.backend)
                }
                @if let Some(q) = &r.quality { p #quality { "Quality: " (q) } }
            }
            @if let Some(e) = &v.error {
                p.error { code { (e.code) } ": " (e.message) }
                @if let Some(r) = &e.repair { p.small { (r) } }
            }
        }
    }
}

fn progress_bar(percent: Option<f64>) -> Markup {
    html! {
        @match percent {
            Some(p) => progress #progress max="100" value=(format!("{p:.0}")) { (format!("{p:.0}%")) },
            None => progress #progress {},
        }
    }
}

/// A CSS background that shows the watermark's corner of the preview at twice its size.
fn corner_style(path: &str, w: u32, h: u32, position: &str) -> String {
    let anchor = match position {
        "top_left" => "left top",
        "top_right" => "right top",
        "bottom_left" => "left bottom",
        "center" => "center",
        _ => "right bottom",
    };
    format!(
        "background-image:url('{path}');background-size:{}px {}px;background-position:{anchor}",
        w * 2,
        h * 2
    )
}

/// What the dashboard shows beside the renders.
pub struct Capabilities {
    pub rows: Vec<(&'static str, String)>,
}

/// `GET /`: the principal's renders (an admin's: everyone's) and the capabilities.
pub fn dashboard(
    chrome: &Chrome,
    renders: &[RenderView],
    all: bool,
    hooks: Option<&[HookView]>,
    caps: &Capabilities,
    now_ms: u64,
) -> Markup {
    layout(
        "Renders",
        chrome,
        html! {
            h1 { @if all { "All renders" } @else { "Your renders" } }
            table #renders {
                thead { tr {
                    th { "Render" }
                    @if all { th { "Principal" } }
                    th { "Output" } th { "State" } th { "Progress" } th { "Result" }
                } }
                tbody #render-rows data-live="/ui/fragments/renders" data-keyed="true" {
                    (rows(renders, all, now_ms))
                }
            }
            @if renders.is_empty() {
                p #empty { "No renders yet. Ask your agent to render a video with vidforge." }
            }
            @if let Some(hooks) = hooks {
                (webhooks(hooks))
            }
            section #capabilities {
                h2 { "This server" }
                dl {
                    @for (k, v) in &caps.rows { dt { (k) } dd { (v) } }
                }
            }
        },
    )
}

/// The admins' list of the last webhook attempts per principal.
fn webhooks(hooks: &[HookView]) -> Markup {
    html! {
        section #webhooks {
            h2 { "Webhook deliveries" }
            @if hooks.is_empty() {
                p.small { "No webhook events yet." }
            } @else {
                table {
                    thead { tr {
                        th { "Event" } th { "Principal" } th { "Render" } th { "Status" }
                        th { "Attempts" } th { "Last attempt" } th { "Next" }
                    } }
                    tbody {
                        @for h in hooks {
                            tr data-event-id=(h.id) {
                                td { code { (h.id) } br; span.small { (h.kind) } }
                                td { (h.principal) }
                                td { code { (h.render_id) } }
                                td { span class=(format!("state {}", h.status)) { (h.status) } }
                                td { (h.attempts) }
                                td {
                                    @if let Some((at, outcome)) = &h.last {
                                        (outcome) br; span.small { (at) }
                                    }
                                }
                                td { @if let Some(at) = &h.next_at { span.small { (at) } } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The dashboard's rows (also the live fragment `/ui/fragments/renders`).
pub fn rows(renders: &[RenderView], all: bool, now_ms: u64) -> Markup {
    html! {
        @for v in renders {
            tr data-render-id=(v.id) data-state=(v.state) data-version=(format!("{}-{}", v.updated_ms, v.awaiting())) {
                td {
                    code { (v.id) } br;
                    span.small { (v.created_at) }
                }
                @if all { td { (v.principal) } }
                td { (v.resolution) " " (v.format) @if v.watermark.is_some() { br; span.small { "watermarked" } } }
                td { span class=(format!("state {}", v.state)) { (v.state.replace('_', " ")) } }
                td {
                    @if let Some(p) = &v.progress && !v.terminal {
                        (progress_bar(p.percent))
                        br;
                        span.small {
                            (p.stage)
                            @if let Some(fps) = p.fps { " · " (format!("{fps:.1}")) " fps" }
                            @if let Some(b) = &p.backend { " · " (b) }
                        }
                    } @else if v.awaiting() {
                        @if let Some(path) = &v.approval_path {
                            a.primary-link href=(path) { "Review the watermark" }
                        }
                        @if let Some(a) = &v.approval { br; span.small { (time_left(a.deadline_ms, now_ms)) " left" } }
                    } @else {
                        span.small { (v.summary(now_ms)) }
                        @if let Some(q) = v.result.as_ref().and_then(|r| r.quality.as_ref()) {
                            br; span.small.quality { (q) }
                        }
                    }
                }
                td {
                    @if let Some(r) = &v.result {
                        video.thumb muted playsinline preload="metadata" src=(format!("{}#t=0.1", r.download_path)) width="160" {}
                        br;
                        a href=(r.download_path) { "Download" } " · " (human_bytes(r.size_bytes))
                    } @else if let Some(e) = &v.error {
                        span.error { code { (e.code) } } br;
                        span.small { (e.message) }
                        @if let Some(r) = &e.repair { br; span.small.repair { (r) } }
                    }
                }
            }
        }
    }
}
