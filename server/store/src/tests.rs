//! The store over sled: records survive a reopen, and a second open is refused.

use crate::fixtures::sample;
use crate::{Store, StoreError};

#[test]
fn records_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let rec = sample("task_1");
    {
        let s = Store::open(dir.path()).unwrap();
        s.put_render(&rec).unwrap();
        s.flush().unwrap();
    }
    let s = Store::open(dir.path()).unwrap();
    assert_eq!(s.get_render("task_1").unwrap(), Some(rec.clone()));
    let json = serde_json::to_value(&rec).unwrap();
    assert_eq!(json["state"], "failed");
    assert_eq!(json["args"]["resolution"], "4k");
    assert_eq!(json["outcome"]["code"], "watermark_rejected");
    assert_eq!(
        rec.repair_arguments(),
        serde_json::json!({"source_asset_uri": "vidforge://assets/a_X"})
    );
}

#[test]
fn second_open_reports_lock() {
    let dir = tempfile::tempdir().unwrap();
    let _s = Store::open(dir.path()).unwrap();
    // sled allows re-opening inside one process via a shared lock file, so spawn the check
    // through the lock semantics: a second sled::open in-process fails to lock too.
    match Store::open(dir.path()) {
        Err(StoreError::Locked { .. }) => {}
        other => panic!("expected Locked, got {other:?}"),
    }
}
