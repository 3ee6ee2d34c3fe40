//! The sweeper over a store of many renders written directly (no rendering): it finds what has
//! expired through the store's expiry indexes, in batches, and deletes exactly that: results
//! past their retention (the record kept as a tombstone), tombstones past their grace, results
//! so old their grace has passed too, and the previews of renders that ended without a result;
//! everything else stays as it was.

use std::collections::HashMap;
use std::time::Duration;

use vidforge_core::store::{RenderRecord, RenderState};
use vidforge_store_fixtures::{finished_render, unfinished_render};

use crate::common::*;

const RECORDS: u64 = 50_000;
const HOUR: u64 = 3_600_000;
const DAY: u64 = 24 * HOUR;

/// What the sweep is to do with a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Kept,
    Tombstone,
    Deleted,
    PreviewDeleted,
}

/// Record `i`, `now` being the sweep's time (7-day retention, 7-day grace), and its fate.
/// Every age keeps a minute from each boundary, so the seconds the test takes change nothing.
fn record(i: u64, now: u64) -> (RenderRecord, Fate) {
    let spread = |from: u64, to: u64| from + 60_000 + (i * 7_919) % (to - from - 120_000);
    let principal = format!("p{}", i % 97);
    let (age, result_deleted, fate) = match i % 100 {
        // Results past 7 days but within 7 days and 4 hours: their files go.
        0..=1 => (spread(7 * DAY, 7 * DAY + 4 * HOUR), false, Fate::Tombstone),
        // Tombstones past their grace go; so do results that old never swept.
        2..=5 => (
            spread(14 * DAY, 15 * DAY),
            !i.is_multiple_of(5),
            Fate::Deleted,
        ),
        // Tombstones within their grace stay.
        6..=40 => (spread(7 * DAY + 4 * HOUR, 14 * DAY), true, Fate::Kept),
        // Failed renders that still name their preview: it goes.
        41..=43 => (spread(0, 7 * DAY), false, Fate::PreviewDeleted),
        _ => (spread(0, 7 * DAY), false, Fate::Kept),
    };
    let mut r = finished_render(&principal, now - age - 30_000, i);
    r.result_deleted = result_deleted;
    if fate == Fate::PreviewDeleted {
        r.state = RenderState::Failed;
        r.preview_path = Some(format!("/nowhere/previews/{}/preview.png", r.id).into());
    } else if i % 100 == 99 {
        // Unfinished renders, whatever their age, are not the sweeper's.
        r = unfinished_render(&principal, now - 20 * DAY, i, RenderState::Queued);
    }
    (r, fate)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_deletes_exactly_what_expired_across_batches() {
    let h = Harness::start(ScriptedRenderer::new(1, Duration::from_millis(1)), |_| {});
    let store = h.service.store().clone();
    let now = h.service.now_ms();
    let written: Vec<(RenderRecord, Fate)> = (0..RECORDS).map(|i| record(i, now)).collect();
    let records: Vec<RenderRecord> = written.iter().map(|(r, _)| r.clone()).collect();
    for chunk in records.chunks(5_000) {
        store.put_renders(chunk).unwrap();
    }
    let count = |fate| written.iter().filter(|(_, f)| *f == fate).count();
    // Each kind spans several of the sweep's batches (256 records).
    assert!(count(Fate::Tombstone) > 3 * 256 && count(Fate::Deleted) > 3 * 256);

    let report = h.service.sweep().unwrap();
    assert_eq!(report.results_deleted, count(Fate::Tombstone));
    assert_eq!(report.records_deleted, count(Fate::Deleted));
    assert_eq!(report.previews_deleted, count(Fate::PreviewDeleted));

    let fates: HashMap<&str, Fate> = written.iter().map(|(r, f)| (r.id.as_str(), *f)).collect();
    for r in &records {
        let now_stored = store.get_render(&r.id).unwrap();
        match fates[r.id.as_str()] {
            Fate::Kept => assert_eq!(now_stored.as_ref(), Some(r), "{}", r.id),
            Fate::Deleted => assert_eq!(now_stored, None, "{}", r.id),
            Fate::Tombstone => {
                let t = now_stored.unwrap();
                assert!(t.result_deleted && !r.result_deleted, "{}", r.id);
                assert_eq!(t.preview_path, r.preview_path);
            }
            Fate::PreviewDeleted => {
                let p = now_stored.unwrap();
                assert!(p.preview_path.is_none() && !p.result_deleted, "{}", r.id);
            }
        }
    }
    // Nothing more is due.
    assert_eq!(h.service.sweep().unwrap(), Default::default());
}

/// The walk for what a crash left: a result directory whose render is gone, or failed, goes;
/// one whose render succeeded, or is still running, stays. Its records are read a batch at a
/// time, so the directories span several batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_walk_for_orphans_removes_exactly_the_unclaimed_result_directories() {
    let h = Harness::start(ScriptedRenderer::new(1, Duration::from_millis(1)), |_| {});
    let store = h.service.store().clone();
    let now = h.service.now_ms();
    let results = h.service.config().results_dir();
    let mut kept = Vec::new();
    let mut orphans = Vec::new();
    for i in 0..900u64 {
        let mut r = finished_render("walker", now - HOUR, 1_000_000 + i);
        match i % 3 {
            // No record at all (a crash between deleting the files and the record).
            0 => orphans.push(r.id.clone()),
            // Failed: no result to keep.
            1 if i % 2 == 0 => {
                r.state = RenderState::Failed;
                store.put_render(&r).unwrap();
                orphans.push(r.id.clone());
            }
            _ => {
                if i % 2 == 0 {
                    r = unfinished_render(
                        "walker",
                        now - HOUR,
                        1_000_000 + i,
                        RenderState::Rendering,
                    );
                }
                store.put_render(&r).unwrap();
                kept.push(r.id.clone());
            }
        }
        std::fs::create_dir_all(results.join(&r.id)).unwrap();
    }
    // (The maintenance thread's own first sweep, right after boot, may have taken some.)
    h.service.sweep().unwrap();
    for id in &orphans {
        assert!(!results.join(id).exists(), "{id} stayed");
    }
    for id in &kept {
        assert!(results.join(id).exists(), "{id} went");
    }
}
