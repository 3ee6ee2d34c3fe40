//! The wire shapes of render records in every state, for a deployment with non-default
//! lifetimes.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use super::*;

const FORM: Elicitation = Elicitation {
    form: true,
    url: false,
};
use vidforge_core::store::{
    Approval, Figures, HdrPolicy, OutputFormat, ProgressSnapshot, ProgressStage, QualityFigures,
    RenderArgs, Resolution, SegmentFigures, WatermarkArgs, WorstFigures,
};

const T0: u64 = 1_780_000_000_000;

fn presenter() -> Presenter {
    Presenter::new(
        Lifetimes {
            task_ttl: Duration::from_secs(2 * 3600),
            result_ttl: Duration::from_secs(3 * 86_400),
            idempotency_ttl: Duration::from_secs(3600),
            approval_timeout: Duration::from_secs(45 * 60),
            asset_ttl: Duration::from_secs(86_400),
        },
        "http://127.0.0.1:9999",
    )
}

fn record(state: RenderState) -> RenderRecord {
    let args = RenderArgs {
        source_asset: "a_1".into(),
        output_format: OutputFormat::Webm,
        resolution: Resolution::P720,
        watermark: Some(WatermarkArgs {
            image_asset: "a_2".into(),
            position: vidforge_core::store::Position::TopLeft,
            opacity: 0.5,
        }),
        idempotency_key: None,
        quality_report: None,
    };
    let id = "task_01JABCDEFGHJKMNPQRSTVWXYZ0".to_string();
    let mut r = RenderRecord::new(id, "alice", args, json!({}), T0);
    r.state = state;
    r.updated_at = T0 + 1_000;
    r
}

fn succeeded() -> RenderRecord {
    let mut rec = record(RenderState::Succeeded);
    rec.finished_at = Some(T0 + 60_000);
    rec.outcome = Some(Outcome::Success {
        video_path: PathBuf::from("/data/final.webm"),
        video_file_name: "final.webm".into(),
        mime_type: "video/webm".into(),
        size_bytes: 123_456,
        duration_seconds: 2.5,
        width: 1280,
        height: 720,
        resolution: "720p".into(),
        watermark_applied: true,
        finished_at: T0 + 60_000,
        backend: "cpu".into(),
        frames: 75,
        fps: 30.0,
        quality: None,
    });
    rec
}

/// Figures of a measured render (or of one of its segments).
fn figures(psnr_db: f64, worst_at: u32) -> Figures {
    Figures {
        psnr_y_db: psnr_db - 1.0,
        psnr_db,
        ssim: 0.98765,
        frames_measured: 75,
        worst: WorstFigures {
            at_seconds: worst_at,
            psnr_y_db: psnr_db - 4.0,
            psnr_db: psnr_db - 3.0,
            ssim: 0.95,
        },
    }
}

fn json_of<T: Serialize>(v: &T) -> Value {
    serde_json::from_str(&serde_json::to_string(v).unwrap()).unwrap()
}

#[test]
fn a_running_render_is_a_working_task_with_the_configured_ttl() {
    let mut rec = record(RenderState::Rendering);
    rec.progress = Some(ProgressSnapshot::new(
        ProgressStage::Rendering,
        30,
        Some(120),
    ));
    let task = json_of(&presenter().detailed_task(&rec, FORM));
    assert_eq!(task["taskId"], rec.id.as_str());
    assert_eq!(task["status"], "working");
    assert_eq!(task["statusMessage"], "Rendering: 25% (frame 30/120).");
    assert_eq!(task["ttlMs"], 2 * 3600 * 1000);
    assert_eq!(task["pollIntervalMs"], wire::poll_interval_ms(true));
    assert_eq!(task["createdAt"], wire::rfc3339(T0));
    assert!(task.get("result").is_none() && task.get("inputRequests").is_none());
}

#[test]
fn awaiting_approval_asks_only_in_a_declared_mode() {
    let mut rec = record(RenderState::AwaitingApproval);
    rec.approval = Some(Approval {
        decision: None,
        requested_at: T0,
        deadline: T0 + 45 * 60_000,
    });
    let p = presenter();
    let with_form = json_of(&p.detailed_task(&rec, FORM));
    assert_eq!(with_form["status"], "input_required");
    let request = &with_form["inputRequests"][wire::APPROVAL_INPUT_KEY];
    assert_eq!(request["method"], "elicitation/create");
    assert!(
        with_form["statusMessage"]
            .as_str()
            .unwrap()
            .contains("45 minutes")
    );
    let without = json_of(&p.detailed_task(&rec, Elicitation::NONE));
    assert_eq!(without["inputRequests"], json!({}));
    let message = without["statusMessage"].as_str().unwrap();
    assert!(message.contains(tools::APPROVE_WATERMARK), "{message}");
    let page = p.approval_url(&rec.id);
    assert!(message.contains(&page), "{message}");
    assert!(!with_form["statusMessage"].as_str().unwrap().contains(&page));

    // URL mode: the approval page, with no credential in it and no `elicitationId`
    // (2026-07-28 removed it); with both modes declared, both requests.
    let both = Elicitation {
        form: true,
        url: true,
    };
    for (modes, keys) in [
        (
            Elicitation {
                form: false,
                url: true,
            },
            vec![wire::APPROVAL_PAGE_INPUT_KEY],
        ),
        (
            both,
            vec![wire::APPROVAL_INPUT_KEY, wire::APPROVAL_PAGE_INPUT_KEY],
        ),
    ] {
        // As the wire layer sends it: a `tasks/get` result, and a task one level down.
        let mut message = json!({"result": json_of(&p.detailed_task(&rec, modes)),
                                 "params": {"task": json_of(&p.detailed_task(&rec, modes))}});
        wire::drop_removed_fields(&mut message);
        assert_eq!(message["result"], message["params"]["task"]);
        let task = message["result"].take();
        let requests = task["inputRequests"].as_object().unwrap();
        let mut got: Vec<&str> = requests.keys().map(String::as_str).collect();
        got.sort();
        assert_eq!(got, keys);
        let params = &requests[wire::APPROVAL_PAGE_INPUT_KEY]["params"];
        assert_eq!(
            params,
            &json!({"mode": "url", "message": params["message"], "url": page}),
            "{task}"
        );
    }

    let status = json_of(&p.fallback_status(&rec));
    assert_eq!(status["state"], "awaiting_watermark_approval");
    assert_eq!(
        status["poll_after_ms"],
        catalog::POLL_AFTER_AWAITING_FALLBACK.as_millis() as u64
    );
    assert_eq!(status["follow_up"]["tool"], tools::APPROVE_WATERMARK);
    assert_eq!(
        status["follow_up"]["arguments"],
        json!({ "render_id": rec.id, "approved": true })
    );
    assert_eq!(
        status["watermark_preview_uri"],
        uri::preview_uri(&rec.id).as_str()
    );
    assert_eq!(
        status["status_message"],
        format!(
            "Waiting for watermark approval; times out {}.",
            wire::rfc3339(T0 + 45 * 60_000)
        )
    );
}

#[test]
fn a_succeeded_render_links_its_video_and_the_fallback_mirrors_it() {
    let rec = succeeded();
    let p = presenter();
    let result = json_of(&p.terminal_tool_result(&rec).unwrap());
    assert_eq!(result["isError"], false);
    assert_eq!(result["resultType"], "complete");
    let link = &result["content"][1];
    assert_eq!(link["type"], "resource_link");
    assert_eq!(
        link["uri"],
        uri::video_uri(&rec.id, OutputFormat::Webm).as_str()
    );
    assert_eq!(link["mimeType"], "video/webm");
    assert_eq!(link["size"], 123_456);
    assert_eq!(link["annotations"]["priority"], 0.9);
    assert_eq!(link["annotations"]["audience"], json!(["user"]));
    assert_eq!(
        link["_meta"][DOWNLOAD_URL_META],
        format!("http://127.0.0.1:9999/videos/{}/final.webm", rec.id)
    );
    assert_eq!(
        link["description"],
        "Rendered 720p webm with approved watermark; retained 3 days."
    );
    let summary: Value =
        serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(summary["status"], "completed");
    let structured = &result["structuredContent"];
    assert_eq!(structured["resolution"], "720p");
    assert_eq!(structured["watermark_applied"], true);
    assert_eq!(
        structured["expires_at"],
        wire::rfc3339(T0 + 60_000 + 3 * 86_400_000)
    );

    // The task carries the same result, priorities as written.
    let task = json_of(&p.detailed_task(&rec, Elicitation::NONE));
    assert_eq!(task["status"], "completed");
    assert_eq!(task["result"], result);

    let status = json_of(&p.fallback_status(&rec));
    assert_eq!(status["terminal"], true);
    assert_eq!(status["progress"], 1.0);
    assert_eq!(status["poll_after_ms"], 0);
    for key in [
        "video_uri",
        "duration_seconds",
        "size_bytes",
        "resolution",
        "watermark_applied",
    ] {
        assert_eq!(status[key], structured[key], "{key}");
    }
    assert!(status.get("error").is_none() && status.get("follow_up").is_none());
    // Not measured: no quality key, never a made-up figure.
    assert!(structured.get("quality").is_none() && status.get("quality").is_none());
}

#[test]
fn a_measured_render_reports_its_quality_everywhere_its_result_shows() {
    let mut rec = succeeded();
    if let Some(Outcome::Success { quality, .. }) = rec.outcome.as_mut() {
        *quality = Some(Box::new(QualityFigures {
            whole: figures(43.216, 7),
            segments: vec![SegmentFigures {
                index: 0,
                start_seconds: 0.0,
                end_seconds: 2.5,
                figures: figures(43.216, 7),
            }],
        }));
    }
    let p = presenter();
    let result = json_of(&p.terminal_tool_result(&rec).unwrap());
    let q = &result["structuredContent"]["quality"];
    assert_eq!(q["psnr_db"], 43.22);
    assert_eq!(q["psnr_y_db"], 42.22);
    assert_eq!(q["ssim"], 0.9877);
    assert_eq!(q["worst"]["at_seconds"], 7);
    assert_eq!(q["segments"][0]["index"], 0);
    assert_eq!(q["segments"][0]["worst"]["psnr_db"], 40.22);
    assert_eq!(
        result["content"][1]["description"],
        "Rendered 720p webm with approved watermark; PSNR 43.2 dB, worst 40.2 dB at 00:07, SSIM 0.988; retained 3 days."
    );
    let status = json_of(&p.fallback_status(&rec));
    assert_eq!(&status["quality"], q);
    assert!(
        status["status_message"]
            .as_str()
            .unwrap()
            .ends_with("Quality: PSNR 43.2 dB, worst 40.2 dB at 00:07, SSIM 0.988."),
        "{status}"
    );
    // The served output schema names every key the result carries.
    let tools = crate::tools::tool_definitions(&Lifetimes::default());
    let schema = &tools[0]["outputSchema"]["properties"]["quality"];
    for key in q.as_object().unwrap().keys() {
        assert!(schema["properties"].get(key).is_some(), "{key}");
    }
    let segment = &schema["properties"]["segments"]["items"]["properties"];
    for key in q["segments"][0].as_object().unwrap().keys() {
        assert!(segment.get(key).is_some(), "segments.{key}");
    }
}

#[test]
fn a_rejected_watermark_is_a_tool_error_with_the_reason() {
    let mut rec = record(RenderState::Failed);
    rec.finished_at = Some(T0 + 5_000);
    rec.outcome = Some(Outcome::Error {
        code: ErrorCode::WatermarkRejected,
        message: "The user rejected the watermark.".into(),
        reason: Some("too big".into()),
        field: Some("watermark".into()),
        retry_after_ms: None,
        temporary: None,
    });
    let p = presenter();
    let result = json_of(&p.terminal_tool_result(&rec).unwrap());
    assert_eq!(result["isError"], true);
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("User rejected the watermark"), "{text}");
    assert_eq!(result["structuredContent"]["code"], "watermark_rejected");
    let task = json_of(&p.detailed_task(&rec, FORM));
    assert_eq!(task["status"], "completed");
    assert_eq!(task["result"]["isError"], true);
    let status = json_of(&p.fallback_status(&rec));
    assert_eq!(status["state"], "failed");
    assert_eq!(status["error"]["code"], "watermark_rejected");
    assert!(status.get("video_uri").is_none());
}

#[test]
fn cancelled_and_queued_renders_have_no_result() {
    let p = presenter();
    let cancelled = record(RenderState::Cancelled);
    assert!(p.terminal_tool_result(&cancelled).is_none());
    let task = json_of(&p.detailed_task(&cancelled, FORM));
    assert_eq!(task["status"], "cancelled");
    assert!(task.get("result").is_none());
    let queued = json_of(&p.accepted(&record(RenderState::Queued)));
    assert_eq!(queued["status"], "accepted");
    assert_eq!(queued["state"], "queued");
    assert_eq!(queued["follow_up"]["tool"], tools::GET_RENDER_STATUS);
    assert!(queued["follow_up"].get("alternative").is_none());
}

#[test]
fn every_state_has_a_declared_fallback_state_and_task_status() {
    for state in [
        RenderState::Queued,
        RenderState::Rendering,
        RenderState::Previewing,
        RenderState::AwaitingApproval,
        RenderState::Succeeded,
        RenderState::Failed,
        RenderState::Cancelled,
    ] {
        assert!(tools::FALLBACK_STATES.contains(&state.public_name()));
        assert_eq!(
            tools::TERMINAL_FALLBACK_STATES.contains(&state.public_name()),
            state.is_terminal()
        );
        assert_eq!(task_status(state).is_terminal(), state.is_terminal());
    }
}

#[test]
fn an_expired_task_names_the_configured_ttls() {
    let env = presenter().task_expired(&record(RenderState::Succeeded), T0 + 7_200_000);
    assert_eq!(env.code, ErrorCode::TaskExpired);
    assert!(env.message.contains("2 hours"), "{}", env.message);
    assert!(env.message.contains("3 days"), "{}", env.message);
}

#[test]
fn an_hdr_source_says_it_was_tone_mapped() {
    let p = presenter();
    let mut rec = succeeded();
    assert_eq!(
        p.status_message(&rec, Elicitation::NONE),
        "Render completed."
    );
    rec.source_hdr = Some("pq".into());
    assert_eq!(
        p.status_message(&rec, Elicitation::NONE),
        "Render completed. The source is HDR (PQ): tone-mapped to SDR (BT.709)."
    );
    let mut running = record(RenderState::Rendering);
    running.source_hdr = Some("hlg".into());
    assert!(
        p.status_message(&running, Elicitation::NONE)
            .ends_with(" The source is HDR (HLG): tone-mapped to SDR (BT.709)."),
        "{}",
        p.status_message(&running, Elicitation::NONE)
    );
    // Kept HDR (the operator's `keep_hdr`), named by the codec of the output's container
    // (webm here).
    rec.hdr = HdrPolicy::Keep;
    assert!(
        p.status_message(&rec, Elicitation::NONE).ends_with(
            " The source is HDR (PQ): kept HDR (VP9 profile 2, 10-bit, its metadata carried)."
        ),
        "{}",
        p.status_message(&rec, Elicitation::NONE)
    );
}
