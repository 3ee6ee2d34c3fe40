//! `vidforge-conformance serve` (the conformance build: vidforge with the suite's fixtures
//! mounted through the MCP extension seam), driven over real HTTP: the fixtures are absent
//! from a production server, and the fixture tasks run through the durable task layer (input
//! requests, answers, cancellation, principal isolation, `kill -9`). The official conformance
//! suite itself runs in `scripts/run-conformance.sh`; these tests pin what it relies on.

use std::time::Duration;

use serde_json::json;
mod support;
use support::*;

const WAIT: Duration = Duration::from_secs(20);

fn terminal(task: &serde_json::Value) -> bool {
    matches!(
        task["status"].as_str(),
        Some("completed" | "failed" | "cancelled")
    )
}

/// The conformance build refuses a non-loopback bind. (That the production binary has no
/// fixtures is `mcp_protocol.rs`'s: its test target has the `vidforge` binary.)
#[test]
fn the_conformance_build_refuses_a_non_loopback_bind() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(conformance_bin())
        .args(["serve", "--listen", "0.0.0.0:0"])
        .args(["--token", "token-alice-1=alice", "--data-dir"])
        .arg(dir.path().join("other"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("conformance fixtures"), "{stderr}");
    assert!(stderr.contains("loopback"), "{stderr}");
}

#[test]
fn fixture_tasks_ask_resume_cancel_and_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start_conformance(
        &dir.path().join("data"),
        &[
            "--token",
            "token-alice-1=alice",
            "--token",
            "token-bob-22=bob",
        ],
    );
    let mut alice = server.mcp().with_token("token-alice-1");
    let mut bob = server.mcp().with_token("token-bob-22");

    // A task that needs input: input_required with the elicitation, answered by tasks/update.
    let created = alice.tool(
        "confirm_delete",
        json!({"filename": "notes.txt"}),
        Caps::FULL,
    );
    assert_eq!(created.result()["resultType"], "task");
    let id = created.result()["taskId"].as_str().unwrap().to_string();
    assert!(id.starts_with("job_"), "{id}");
    let waiting = alice.wait_task(&id, Caps::FULL, WAIT, |t| t["status"] == "input_required");
    assert_eq!(
        waiting["inputRequests"]["confirm_delete"]["method"],
        "elicitation/create"
    );
    // Bob sees exactly what an unknown id gets, and cannot answer or cancel it.
    let theirs = bob.task_get(&id, Caps::FULL);
    assert_rpc_error(&theirs, -32602);
    let unknown = bob.task_get("job_00000000000000000000000000", Caps::FULL);
    assert_eq!(theirs.error()["message"], unknown.error()["message"]);
    let cancel = bob.call("tasks/cancel", json!({"taskId": id}), Caps::FULL);
    assert_rpc_error(&cancel, -32602);

    // An answer that is not an elicitation result is refused and the task keeps waiting.
    let bad = alice.call(
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"confirm_delete": 12345}}),
        Caps::FULL,
    );
    assert_rpc_error(&bad, -32602);
    let still = alice.task_get(&id, Caps::FULL);
    assert_eq!(still.result()["status"], "input_required");

    let ack = alice.call(
        "tasks/update",
        json!({"taskId": id, "inputResponses": {
            "confirm_delete": {"action": "accept", "content": {"confirm": true}},
            "not-asked": {"action": "accept", "content": {}}
        }}),
        Caps::FULL,
    );
    assert_eq!(ack.result()["resultType"], "complete");
    let done = alice.wait_task(&id, Caps::FULL, WAIT, terminal);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["isError"], false);
    assert_eq!(done["result"]["content"][0]["text"], "Deleted notes.txt.");

    // Cancelling a running task ends it as cancelled; cancelling again is the same ack.
    let slow = alice.tool("slow_compute", json!({"seconds": 60}), Caps::TASKS);
    let slow_id = slow.result()["taskId"].as_str().unwrap().to_string();
    for _ in 0..2 {
        let ack = alice.call("tasks/cancel", json!({"taskId": slow_id}), Caps::TASKS);
        assert_eq!(ack.result()["resultType"], "complete");
    }
    let cancelled = alice.task_get(&slow_id, Caps::TASKS);
    assert_eq!(cancelled.result()["status"], "cancelled");

    // kill -9 while a task runs: after the restart the record is still there, ended as
    // failed (its work died with the process), and finished tasks are unchanged.
    let running = alice.tool("slow_compute", json!({"seconds": 60}), Caps::TASKS);
    let running_id = running.result()["taskId"].as_str().unwrap().to_string();
    server.kill9();
    server.restart();
    let mut alice = server.mcp().with_token("token-alice-1");
    let after = alice.task_get(&running_id, Caps::TASKS);
    assert_eq!(after.result()["status"], "failed", "{}", after.body);
    assert_eq!(after.result()["error"]["code"], -32603);
    assert!(after.result().get("result").is_none());
    let still_done = alice.task_get(&id, Caps::TASKS);
    assert_eq!(still_done.result()["status"], "completed");
    assert_eq!(
        alice.task_get(&slow_id, Caps::TASKS).result()["status"],
        "cancelled"
    );
}

#[test]
fn mrtr_fixtures_reject_tampered_state_and_gate_capabilities() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_conformance(&dir.path().join("data"), &[]);
    let mut mcp = server.mcp();

    let round1 = mcp.tool(
        "test_input_required_result_request_state",
        json!({}),
        Caps::FULL,
    );
    let r = round1.result();
    assert_eq!(r["resultType"], "input_required");
    let state = r["requestState"].as_str().unwrap().to_string();
    let answer = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    let good = mcp.call(
        "tools/call",
        json!({"name": "test_input_required_result_request_state", "arguments": {},
               "inputResponses": answer, "requestState": state}),
        Caps::FULL,
    );
    assert!(
        good.result()["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("state-ok")
    );
    let tampered = mcp.call(
        "tools/call",
        json!({"name": "test_input_required_result_request_state", "arguments": {},
               "inputResponses": answer, "requestState": format!("{state}x")}),
        Caps::FULL,
    );
    assert_rpc_error(&tampered, -32602);

    // failing_job requires the tasks extension: -32021 naming it, HTTP 400.
    let required = mcp.tool("failing_job", json!({}), Caps::NONE);
    assert_eq!(required.status, 400);
    assert_rpc_error(&required, -32021);
    assert!(
        required.error()["data"]["requiredCapabilities"]["extensions"]
            .get(TASKS)
            .is_some()
    );
}
