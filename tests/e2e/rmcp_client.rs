//! vidforge driven by the official Rust SDK client (rmcp, `server/discover` lifecycle, tasks
//! extension declared): cancelling a render task, and a task that survives `kill -9` of the
//! server and is then answered with `tasks/update` and completes.
//!
//! The server is the real binary (`target/<profile>/vidforge`); the rmcp client runs on its own
//! tokio runtime while the blocking fixture helpers run outside it.

use std::time::{Duration, Instant};

use crate::support::*;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    GetTaskParams, Implementation, ProtocolVersion, TaskPayload, TaskStatus, UpdateTaskParams,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ClientConfig>;

const WAIT: Duration = Duration::from_secs(120);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Connects with the 2026-07-28 discover lifecycle, declaring the tasks extension and form
/// elicitation, and checks what discovery returned.
async fn connect(server_base: &str) -> Client {
    let caps: ClientCapabilities = serde_json::from_value(json!({
        "elicitation": { "form": {} },
        "extensions": { TASKS: {} }
    }))
    .expect("client capabilities");
    let transport = StreamableHttpClientTransport::from_uri(format!("{server_base}/mcp"));
    let client = ClientConfig::new(caps, Implementation::new("vidforge-rmcp-check", "1.0.0"))
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("rmcp client connects with server/discover");
    let info = client.peer_info().expect("discover result");
    let server = info
        .server_info
        .as_ref()
        .expect("discover names the server");
    assert_eq!(server.name, "vidforge");
    assert!(
        info.capabilities.supports_tasks(),
        "tasks extension advertised"
    );
    let tools = client.list_tools(None).await.expect("tools/list");
    assert!(
        tools
            .tools
            .iter()
            .any(|t| t.name == "vidforge_render_video"),
        "tools/list lacks vidforge_render_video"
    );
    client
}

/// Starts a render and expects a task back (the extension is declared).
async fn start_render(client: &Client, args: Value) -> String {
    let Value::Object(arguments) = args else {
        panic!("render arguments must be an object");
    };
    let response = client
        .call_tool_once(
            CallToolRequestParams::new("vidforge_render_video").with_arguments(arguments),
        )
        .await
        .expect("tools/call");
    match response {
        CallToolResponse::Task(create) => {
            assert_eq!(create.task.status, TaskStatus::Working);
            create.task.task_id
        }
        other => panic!("expected a CreateTaskResult, got {other:?}"),
    }
}

/// Polls `tasks/get` until the status is `want` (or the task ends otherwise).
async fn wait_status(client: &Client, id: &str, want: TaskStatus) -> TaskPayload {
    let deadline = Instant::now() + WAIT;
    loop {
        let got = client
            .get_task(GetTaskParams::new(id))
            .await
            .expect("tasks/get");
        let status = got.task.status();
        if status == want {
            return got.task.payload;
        }
        assert!(
            !status.is_terminal() && Instant::now() < deadline,
            "task {id} reached {status:?}, not {want:?}: {:?}",
            got.task.payload
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    server: Server,
    clip: String,
    logo: String,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(&dir.path().join("data"), &[]);
    let clip = upload(
        &server,
        None,
        &make_clip(dir.path(), "clip.mp4", 320, 180, 0.6, true),
    );
    let logo = upload(&server, None, &make_logo(dir.path()));
    Fixture {
        _dir: dir,
        server,
        clip,
        logo,
    }
}

fn render_args(f: &Fixture) -> Value {
    json!({
        "source_asset_uri": f.clip,
        "output_format": "mp4",
        "resolution": "720p",
        "watermark": { "image_asset_uri": f.logo, "position": "top_left", "opacity": 0.6 }
    })
}

#[test]
fn rmcp_client_cancels_a_render_task() {
    let f = fixture();
    let rt = runtime();
    rt.block_on(async {
        let client = connect(&f.server.base()).await;
        // With a watermark the render parks at input_required: a cancel always lands mid-task.
        let id = start_render(&client, render_args(&f)).await;
        match wait_status(&client, &id, TaskStatus::InputRequired).await {
            TaskPayload::InputRequired { input_requests } => {
                assert!(input_requests.contains_key("watermark-approval-1"));
            }
            other => panic!("expected inputRequests, got {other:?}"),
        }
        client
            .cancel_task(CancelTaskParams::new(id.clone()))
            .await
            .expect("tasks/cancel is acknowledged");
        let payload = wait_status(&client, &id, TaskStatus::Cancelled).await;
        assert!(matches!(payload, TaskPayload::Cancelled));
        // Cancelling a terminal task is the same bare acknowledgement.
        client
            .cancel_task(CancelTaskParams::new(id.clone()))
            .await
            .expect("tasks/cancel on a terminal task is acknowledged");
        client.cancel().await.expect("close client");
    });
}

#[test]
fn rmcp_client_task_survives_kill_9_and_completes_after_restart() {
    let mut f = fixture();
    let rt = runtime();
    let id = rt.block_on(async {
        let client = connect(&f.server.base()).await;
        let id = start_render(&client, render_args(&f)).await;
        wait_status(&client, &id, TaskStatus::InputRequired).await;
        client.cancel().await.expect("close client");
        id
    });

    // SIGKILL: no shutdown hooks run. The task must come back from the sled store.
    f.server.kill9();
    f.server.restart();

    rt.block_on(async {
        let client = connect(&f.server.base()).await;
        wait_status(&client, &id, TaskStatus::InputRequired).await;
        let mut responses = rmcp::model::InputResponses::new();
        responses.insert(
            "watermark-approval-1".to_string(),
            json!({ "action": "accept", "content": { "approved": true } }),
        );
        client
            .update_task(UpdateTaskParams::new(id.clone(), responses))
            .await
            .expect("tasks/update after restart");
        let payload = wait_status(&client, &id, TaskStatus::Completed).await;
        let TaskPayload::Completed { result } = payload else {
            panic!("expected a completed payload");
        };
        assert_eq!(result.get("isError"), Some(&json!(false)), "{result:?}");
        let sc = &result["structuredContent"];
        assert_eq!(sc["watermark_applied"], true);
        assert_eq!(sc["video_uri"], format!("vidforge://videos/{id}/final.mp4"));
        client.cancel().await.expect("close client");
    });
}
