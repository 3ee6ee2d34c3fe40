//! A node holding many renders, written straight into its store (no rendering), as the real
//! binary meets them: a store written before the render indexes gets them on its first start,
//! and a start killed (`kill -9`) mid-way resumes where it stopped; boot recovery then finds
//! every unfinished render through the index of unfinished ones; and `resources/list` answers
//! from the principal's own index: newest first, that principal's renders only, bounded.

use std::time::Duration;

use serde_json::{Value, json};
use vidforge_core::store::{RenderRecord, RenderState};
use vidforge_store_fixtures::{
    awaiting_render, finished_render, unfinished_render, write_unindexed,
};

use crate::support::*;

/// Records in the store.
const RECORDS: usize = 50_000;
/// Unfinished renders among them (carol's): half crashed mid-render, half awaiting an
/// approval whose deadline has passed.
const UNFINISHED: usize = 200;
const TOKENS: [&str; 8] = [
    "--token",
    "alice-busy-token=alice",
    "--token",
    "bob-busy-token=bob",
    "--token",
    "carol-busy-token=carol",
    "--token",
    "dave-busy-token=dave",
];

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The week in the store: alice's renders every tenth, bob's one, carol's unfinished ones,
/// the rest 97 other principals'; all within the last six days, written out of time order.
fn records(now: u64) -> Vec<RenderRecord> {
    let span = 6 * 24 * 3_600_000u64;
    (0..RECORDS)
        .map(|i| {
            let slot = (i as u64 * 7_919) % RECORDS as u64;
            let created = now - span + slot * (span / RECORDS as u64);
            let principal = match i {
                0 => "bob".to_string(),
                i if i % 10 == 1 => "alice".to_string(),
                i if i % 250 == 7 => "carol".to_string(),
                i => format!("p{}", i % 97),
            };
            if principal == "carol" {
                // Within the task lifetime, so tasks/get still answers.
                let created = now - 3_600_000 + i as u64;
                return match i % 500 {
                    7 => unfinished_render(&principal, created, i as u64, RenderState::Rendering),
                    _ => awaiting_render(&principal, created, i as u64, created + 60_000),
                };
            }
            finished_render(&principal, created, i as u64)
        })
        .collect()
}

fn listed_renders(server: &Server, token: &str) -> Vec<String> {
    let mut mcp = server.mcp().with_token(token);
    let reply = mcp.call("resources/list", json!({}), Caps::NONE);
    reply.result()["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .filter(|u| u.starts_with("vidforge://videos/"))
        .map(String::from)
        .collect()
}

#[test]
fn a_store_from_before_the_indexes_is_indexed_across_a_kill_then_recovered_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let now = now_ms();
    let all = records(now);
    write_unindexed(&data.join("db"), &all).unwrap();

    // Killed while it builds the indexes, then started again: it resumes.
    let mut server = Server::start_killed_at(&data, &TOKENS, "render index build: a batch");
    let first_run = server.log().len();
    assert!(!server.log().contains("the render indexes are built"));
    server.start_again();
    let log = server.log()[first_run..].to_string();
    assert!(log.contains("resuming the render index build"), "{log}");
    assert!(log.contains("the render indexes are built"), "{log}");

    // Recovery found every unfinished render: each has ended with an error (crashed ones
    // restarted without their source, awaiting ones past their approval deadline).
    let carol: Vec<&RenderRecord> = all.iter().filter(|r| r.principal == "carol").collect();
    assert_eq!(carol.len(), UNFINISHED);
    let mut mcp = server.mcp().with_token("carol-busy-token");
    for r in &carol {
        let task = mcp.wait_task(&r.id, Caps::TASKS, Duration::from_secs(60), |t| {
            t["status"] != "working" && t["status"] != "input_required"
        });
        assert_eq!(task["result"]["isError"], true, "{task}");
    }

    // Listings: the principal's newest first, only theirs, at most 100.
    let video = |r: &RenderRecord| format!("vidforge://videos/{}/final.mp4", r.id);
    let mut alice: Vec<&RenderRecord> = all.iter().filter(|r| r.principal == "alice").collect();
    alice.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
    let want: Vec<String> = alice[..100].iter().map(|r| video(r)).collect();
    assert_eq!(listed_renders(&server, "alice-busy-token"), want);
    assert_eq!(listed_renders(&server, "bob-busy-token"), [video(&all[0])]);
    assert!(listed_renders(&server, "dave-busy-token").is_empty());
    // And a task of another principal is unknown, as ever.
    let reply = server
        .mcp()
        .with_token("dave-busy-token")
        .task_get(&all[0].id, Caps::TASKS);
    let _: &Value = reply.error();
}
