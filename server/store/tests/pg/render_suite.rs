//! The render indexes (`server/store/src/render_index.rs`), one suite both backends pass: the
//! sled unit tests (`src/render_index_tests.rs`) and the PostgreSQL tests (`main.rs`) include
//! this file. A store is filled with [`RECORDS`] renders written directly ([`fill`]), and
//! every indexed read is checked against a scan of what was written (the oracle): listings
//! newest first, the principal's own only, bounded; the unfinished renders; the expiry
//! orders read in batches; then the writes that move a record between the indexes.

use std::collections::HashSet;

use super::store::fixtures::{finished_render, unfinished_render};
use super::store::{
    Change, Outcome, RenderRecord, RenderState, Retained, Store, StoreError, catalog,
};

/// Records a suite store holds.
pub const RECORDS: usize = 50_000;
/// The busy principal's share.
pub const BUSY: usize = RECORDS / 10;
/// The first record's `created_at` (Unix ms); one more every 12 s (a week for 50,000).
const T0: u64 = 1_700_000_000_000;
const STEP: u64 = 12_000;

/// Record `i` of the suite's store: mostly succeeded renders of 97 principals, `busy` with a
/// tenth of them, `one` with one; every 50th unfinished, every 7th finished one a tombstone,
/// every 11th failed with its preview still named. Written out of time order.
pub fn record(i: usize) -> RenderRecord {
    let slot = (i as u64 * 7_919) % RECORDS as u64;
    let principal = match i {
        0 => "one".to_string(),
        i if i % 10 == 1 => "busy".to_string(),
        i => format!("p{}", i % 97),
    };
    let mut r = finished_render(&principal, T0 + slot * STEP, i as u64);
    if i % 50 == 3 {
        let state = [
            RenderState::Queued,
            RenderState::Rendering,
            RenderState::Previewing,
            RenderState::AwaitingApproval,
        ][i / 50 % 4];
        r = unfinished_render(&principal, T0 + slot * STEP, i as u64, state);
    } else if i % 11 == 5 {
        r.state = RenderState::Failed;
        r.preview_path = Some(format!("/previews/{}/preview.png", r.id).into());
        r.outcome = Some(Outcome::Error {
            code: catalog::ErrorCode::WatermarkRejected,
            message: "rejected".into(),
            reason: None,
            field: None,
            retry_after_ms: None,
            temporary: None,
        });
    }
    r.result_deleted = r.is_terminal() && i % 7 == 2;
    r
}

/// Every record of the suite, as written.
pub fn records() -> Vec<RenderRecord> {
    (0..RECORDS).map(record).collect()
}

/// Writes [`records`] into `s`, a batch at a time.
pub fn fill(s: &Store) -> Vec<RenderRecord> {
    let all = records();
    for chunk in all.chunks(5_000) {
        s.put_renders(chunk).unwrap();
    }
    s.flush().unwrap();
    all
}

fn ids(recs: &[RenderRecord]) -> Vec<&str> {
    recs.iter().map(|r| r.id.as_str()).collect()
}

/// `principal`'s records in `all`, newest first.
fn newest_of<'a>(all: &'a [RenderRecord], principal: &str) -> Vec<&'a RenderRecord> {
    let mut own: Vec<_> = all.iter().filter(|r| r.principal == principal).collect();
    own.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
    own
}

/// Reads `stage` below `until` in batches of `batch`, each after the last of the one before.
fn expired_in_batches(s: &Store, stage: Retained, until: u64, batch: usize) -> Vec<RenderRecord> {
    let mut out: Vec<RenderRecord> = Vec::new();
    loop {
        let after = out.last().map(|r| (r.retained_since(), r.id.as_str()));
        let next = s.expired_renders(stage, until, after, batch).unwrap();
        assert!(next.len() <= batch);
        let done = next.len() < batch;
        out.extend(next);
        if done {
            return out;
        }
    }
}

/// Every indexed read of `s` (holding `all`) agrees with a scan of `all`.
pub fn reads_agree_with_a_scan(s: &Store, all: &[RenderRecord]) {
    // Listings: newest first, the principal's own only, bounded by the limit.
    let busy = newest_of(all, "busy");
    assert_eq!(busy.len(), BUSY);
    let listed = s.recent_renders(Some("busy"), 100).unwrap();
    assert_eq!(
        ids(&listed),
        busy[..100]
            .iter()
            .map(|r| r.id.as_str())
            .collect::<Vec<_>>()
    );
    assert_eq!(listed[0], *busy[0]);
    let every = s.recent_renders(Some("busy"), 2 * BUSY).unwrap();
    assert_eq!(every.len(), BUSY);
    assert!(every.iter().all(|r| r.principal == "busy"));
    assert_eq!(
        ids(&s.recent_renders(Some("one"), 100).unwrap()),
        [all[0].id.as_str()]
    );
    assert!(s.recent_renders(Some("nobody"), 100).unwrap().is_empty());
    assert!(s.recent_renders(Some("bus"), 100).unwrap().is_empty());
    assert_eq!(s.recent_renders(Some("p5"), 3).unwrap().len(), 3);

    // The unfinished renders, oldest first.
    let mut unfinished: Vec<_> = all.iter().filter(|r| !r.is_terminal()).collect();
    unfinished.sort_by_key(|r| (r.created_at, r.id.clone()));
    assert_eq!(unfinished.len(), RECORDS / 50);
    let read = s.unfinished_renders().unwrap();
    assert_eq!(
        ids(&read),
        unfinished.iter().map(|r| r.id.as_str()).collect::<Vec<_>>()
    );

    // The expiry orders, in batches, up to a time (inclusive) and no further.
    let until = all[RECORDS / 3].retained_since();
    for stage in [Retained::Result, Retained::Tombstone] {
        let mut want: Vec<_> = all
            .iter()
            .filter(|r| r.is_terminal() && r.result_deleted == (stage == Retained::Tombstone))
            .filter(|r| r.retained_since() <= until)
            .collect();
        want.sort_by_key(|r| (r.retained_since(), r.id.clone()));
        assert!(want.len() > 1_000, "{stage:?}: {}", want.len());
        let got = expired_in_batches(s, stage, until, 997);
        assert_eq!(
            ids(&got),
            want.iter().map(|r| r.id.as_str()).collect::<Vec<_>>()
        );
        assert!(
            s.expired_renders(stage, T0 - 1, None, 10)
                .unwrap()
                .is_empty()
        );
    }

    // The previews to delete, by id, in batches.
    let mut stale: Vec<_> = all
        .iter()
        .filter(|r| matches!(r.state, RenderState::Failed | RenderState::Cancelled))
        .filter(|r| r.preview_path.is_some())
        .map(|r| r.id.as_str())
        .collect();
    stale.sort_unstable();
    let mut got: Vec<RenderRecord> = Vec::new();
    loop {
        let next = s
            .stale_previews(got.last().map(|r| r.id.as_str()), 500)
            .unwrap();
        let done = next.len() < 500;
        got.extend(next);
        if done {
            break;
        }
    }
    assert_eq!(ids(&got), stale);
}

/// A store filled with the suite's records answers like a scan of them.
pub fn a_full_store_answers_from_its_indexes(s: &Store) {
    let all = fill(s);
    reads_agree_with_a_scan(s, &all);
}

/// Every write moves a record's index entries with it, in the same write.
pub fn writes_move_records_between_indexes(s: &Store) {
    let mut all: Vec<RenderRecord> = (0..200).map(record).collect();
    s.put_renders(&all).unwrap();
    let unfinished = |s: &Store| -> HashSet<String> {
        s.unfinished_renders()
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect()
    };
    let queued = all.iter().find(|r| !r.is_terminal()).unwrap().id.clone();
    assert!(unfinished(s).contains(&queued));

    // It finishes: out of the unfinished index, into the results' expiry order.
    let done = s
        .update_render::<_, StoreError>(&queued, |r| {
            r.state = RenderState::Succeeded;
            r.finished_at = Some(T0 + 1);
            Ok(Change::Write(()))
        })
        .unwrap()
        .unwrap()
        .record;
    assert!(!unfinished(s).contains(&queued));
    let first = s
        .expired_renders(Retained::Result, T0 + 1, None, 10)
        .unwrap();
    assert!(ids(&first).contains(&queued.as_str()));
    // Its result is deleted: a tombstone.
    s.update_render::<_, StoreError>(&queued, |r| {
        r.result_deleted = true;
        Ok(Change::Write(()))
    })
    .unwrap();
    let results = s
        .expired_renders(Retained::Result, T0 + 1, None, 10)
        .unwrap();
    assert!(!ids(&results).contains(&queued.as_str()));
    let tombs = s
        .expired_renders(Retained::Tombstone, T0 + 1, None, 10)
        .unwrap();
    assert_eq!(ids(&tombs), [queued.as_str()]);
    // A stale preview leaves its order once the preview is gone.
    let stale = |s: &Store| -> HashSet<String> {
        s.stale_previews(None, 500)
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect()
    };
    let failed = all
        .iter()
        .find(|r| r.preview_path.is_some())
        .unwrap()
        .id
        .clone();
    let before = stale(s);
    assert!(before.contains(&failed));
    s.update_render::<_, StoreError>(&failed, |r| {
        r.preview_path = None;
        Ok(Change::Write(()))
    })
    .unwrap();
    let after = stale(s);
    assert_eq!(after.len() + 1, before.len());
    assert!(!after.contains(&failed));

    // Replaced under another principal: listed there only.
    let mut moved = all[7].clone();
    moved.principal = "elsewhere".into();
    s.put_render(&moved).unwrap();
    assert_eq!(
        ids(&s.recent_renders(Some("elsewhere"), 5).unwrap()),
        [moved.id.as_str()]
    );
    let old_owner = &all[7].principal;
    let theirs = s.recent_renders(Some(old_owner), 500).unwrap();
    assert!(!ids(&theirs).contains(&moved.id.as_str()));

    // Deleted: out of every index.
    s.delete_render(&queued).unwrap();
    s.delete_render(&moved.id).unwrap();
    let tombs = s
        .expired_renders(Retained::Tombstone, u64::MAX, None, 500)
        .unwrap();
    assert!(!tombs.is_empty() && !ids(&tombs).contains(&queued.as_str()));
    assert!(s.recent_renders(Some("elsewhere"), 5).unwrap().is_empty());
    let principal = &done.principal;
    let listed = s.recent_renders(Some(principal), 500).unwrap();
    assert!(!ids(&listed).contains(&queued.as_str()));

    // A new render through insert_render: listed and unfinished at once.
    let fresh = unfinished_render("newcomer", T0 + 5, 1_000_000, RenderState::Queued);
    s.insert_render(&fresh, None).unwrap();
    assert!(unfinished(s).contains(&fresh.id));
    assert_eq!(
        ids(&s.recent_renders(Some("newcomer"), 5).unwrap()),
        [fresh.id.as_str()]
    );
    all.push(fresh);
}

/// Calls `$m!` with the name of every test of the suite.
#[macro_export]
macro_rules! render_suite {
    ($m:ident) => {
        $m!(
            a_full_store_answers_from_its_indexes,
            writes_move_records_between_indexes
        );
    };
}
