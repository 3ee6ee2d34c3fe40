//! Prometheus metrics, the recording side: the names and buckets of every series vidforge
//! exports and the recording helpers the domain calls (the `metrics` facade: a no-op until a
//! recorder is installed). The exporter, the HTTP middleware that counts requests and
//! `GET /metrics` are the HTTP side's (`vidforge_http::metrics`).
//!
//! | series | type | labels |
//! |---|---|---|
//! | `vidforge_renders_created_total` | counter | |
//! | `vidforge_renders_finished_total` | counter | `state` (succeeded/failed/cancelled), `outcome` (`succeeded`, `cancelled` or the error code) |
//! | `vidforge_renders` | gauge | `state`: unfinished renders now (cluster-wide with a shared store) |
//! | `vidforge_queue_depth` | gauge | queued renders |
//! | `vidforge_workers_busy`, `vidforge_render_slots` | gauge | this node's workers |
//! | `vidforge_approvals_pending` | gauge | renders awaiting a watermark decision |
//! | `vidforge_approval_wait_seconds` | histogram | `outcome` (approved/rejected/timeout/cancelled) |
//! | `vidforge_render_duration_seconds`, `vidforge_render_fps` | histogram | `resolution`, `format`, `backend` |
//! | `vidforge_stage_busy_seconds` | histogram | `stage` (decode/compose/encode): busy time per render; `_sum` is the total |
//! | `vidforge_render_psnr_db` | histogram | `window` (whole, worst_second), `format`: PSNR (all planes) of each render whose quality was measured |
//! | `vidforge_uploads_total` | counter | `outcome` (created/refused) |
//! | `vidforge_upload_bytes_total` | counter | |
//! | `vidforge_http_requests_total`, `vidforge_http_request_duration_seconds` | counter, histogram | `method`, `route`, `status` (duration: no status) |
//! | `vidforge_mcp_requests_total`, `vidforge_mcp_request_duration_seconds` | counter, histogram | `method` (JSON-RPC, from `Mcp-Method`), `status` |
//! | `vidforge_store_flush_seconds` | histogram | `backend` (sled: flush; postgres: the durable write) |
//! | `vidforge_speculative_seconds` | histogram | `outcome` (used/wasted): rendering time of each speculative render whose output became a result, or was thrown away; `_sum` is the total |
//! | `vidforge_speculative_renders_total` | counter | `end` (used, preempted: real work took the slot, discarded: rejected, timed out or cancelled, failed, interrupted: shutdown or crash) |
//! | `vidforge_renders_split_total` | counter | renders split into segments (`fanout`) |
//! | `vidforge_segments_total` | counter | `end` (done, failed: retried or the render fails, stopped: cancel, preemption, shutdown, a lost lease) |
//! | `vidforge_segment_join_seconds` | histogram | how long joining a split render's segments took |
//! | `vidforge_webhook_events_total` | counter | `type` (`render.succeeded`, ...): events written to the outbox |
//! | `vidforge_webhook_attempts_total` | counter | `result` (delivered: a `2xx`; failed: anything else, retried) |
//! | `vidforge_webhook_attempt_seconds` | histogram | `result`: how long each delivery attempt took |
//! | `vidforge_webhooks_dropped_total` | counter | events given up (retry window over, or no endpoint any more) |
//!
//! The series about a render record (`vidforge_approval_wait_seconds`,
//! `vidforge_renders_finished_total`, the render duration, fps, stage and PSNR series) are recorded
//! by `render_metrics.rs`, which reads the records; `vidforge_store_flush_seconds` by the store
//! itself (`vidforge_store`).
//!
//! The unfinished-render gauges are set when `/metrics` is read, from the service's index.
//! With a shared store every node reports the whole cluster's unfinished renders: aggregate
//! them with `max`, and the counters with `sum`.

use std::time::Duration;

use metrics::{counter, histogram};

/// Seconds buckets of request latencies and store flushes (1 ms … 10 s).
pub const LATENCY_BUCKETS: [f64; 13] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Seconds buckets of whole renders and approval waits (0.5 s … 1 h).
pub const LONG_BUCKETS: [f64; 12] = [
    0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];
/// PSNR buckets, dB (100: identical pictures).
pub const PSNR_BUCKETS: [f64; 12] = [
    20.0, 25.0, 30.0, 33.0, 36.0, 38.0, 40.0, 42.0, 44.0, 46.0, 50.0, 60.0,
];
/// Frames-per-second buckets.
pub const FPS_BUCKETS: [f64; 12] = [
    1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 200.0, 400.0, 800.0, 1600.0, 3200.0, 6400.0,
];

// ---- recording helpers ----

/// How a speculative render ended (the `end` label of `vidforge_speculative_renders_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpeculationEnd {
    /// Its output became the render's result.
    Used,
    /// Real work needed its slot.
    Preempted,
    /// The render was rejected, timed out or cancelled.
    Discarded,
    Failed,
    /// The server stopped under it.
    Interrupted,
}

vidforge_names::enum_names!(SpeculationEnd {
    Used => "used",
    Preempted => "preempted",
    Discarded => "discarded",
    Failed => "failed",
    Interrupted => "interrupted",
});

/// A speculative render ended after `seconds` of rendering.
pub fn speculation_ended(end: SpeculationEnd, seconds: f64) {
    let outcome = if end == SpeculationEnd::Used {
        "used"
    } else {
        "wasted"
    };
    counter!("vidforge_speculative_renders_total", "end" => end.as_str()).increment(1);
    histogram!("vidforge_speculative_seconds", "outcome" => outcome).record(seconds.max(0.0));
}

/// A render was split into segments.
pub fn render_split() {
    counter!("vidforge_renders_split_total").increment(1);
}

/// A split render could not be finished or joined and ran again in one pass.
pub fn split_given_up() {
    counter!("vidforge_splits_given_up_total").increment(1);
}

/// A segment's run ended: `done`, `failed` or `stopped`.
pub fn segment_ended(end: &'static str) {
    counter!("vidforge_segments_total", "end" => end).increment(1);
}

/// A split render's segments were joined in `took`.
pub fn segments_joined(took: Duration) {
    histogram!("vidforge_segment_join_seconds").record(took.as_secs_f64());
}

/// A render was created.
pub fn render_created() {
    counter!("vidforge_renders_created_total").increment(1);
}

/// An upload ended: created with `bytes`, or refused.
pub fn upload(created: bool, bytes: u64) {
    let outcome = if created { "created" } else { "refused" };
    counter!("vidforge_uploads_total", "outcome" => outcome).increment(1);
    if created {
        counter!("vidforge_upload_bytes_total").increment(bytes);
    }
}

/// An event of type `kind` was written to the webhook outbox.
pub fn webhook_event(kind: &'static str) {
    counter!("vidforge_webhook_events_total", "type" => kind).increment(1);
}

/// A webhook delivery attempt ended (`delivered`: a `2xx` answer) after `took`.
pub fn webhook_attempt(delivered: bool, took: Duration) {
    let result = if delivered { "delivered" } else { "failed" };
    counter!("vidforge_webhook_attempts_total", "result" => result).increment(1);
    histogram!("vidforge_webhook_attempt_seconds", "result" => result).record(took.as_secs_f64());
}

/// A webhook event was given up.
pub fn webhook_dropped() {
    counter!("vidforge_webhooks_dropped_total").increment(1);
}
