//! The job layer's unit tests.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use vidforge_core::clock::SharedClock;

use super::*;
use vidforge_core::clock::OffsetClock;
use vidforge_core::store::Store;

fn parts(store: &Store, clock: SharedClock) -> JobsParts {
    let flushed = store.clone();
    JobsParts {
        store: JobStore::new(store.open_tree(JOBS_TREE).unwrap()),
        flush: Arc::new(move || flushed.flush()),
        clock,
        publish: Arc::new(|_| {}),
        ttl: Duration::from_secs(60),
    }
}

fn jobs(dir: &std::path::Path) -> (Jobs, JobStore) {
    let store = Store::open(dir).unwrap();
    let parts = parts(&store, Arc::new(OffsetClock::new()));
    let tree = parts.store.clone();
    (Jobs::new(parts), tree)
}

async fn wait_for(jobs: &Jobs, id: &str, state: JobState) -> JobRecord {
    for _ in 0..200 {
        let rec = jobs.get("alice", id).unwrap();
        if rec.state == state {
            return rec;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("job {id} never reached {state:?}");
}

#[tokio::test]
async fn a_job_asks_resumes_and_completes_durably() {
    let dir = tempfile::tempdir().unwrap();
    let (jobs, store) = jobs(dir.path());
    let rec = jobs
        .spawn("alice", "ask", "Starting.", |ctx| async move {
            let answers = ctx
                .ask(
                    BTreeMap::from([("a".into(), json!({"q": 1})), ("b".into(), json!({"q": 2}))]),
                    "Need a and b.",
                )
                .await?;
            Ok(JobOutcome::Completed(json!({ "answers": answers })))
        })
        .await
        .unwrap();
    assert_eq!(rec.state, JobState::Working);
    // Durable at once: a fresh read of the tree sees it.
    assert!(store.get(&rec.id).unwrap().is_some());
    let waiting = wait_for(&jobs, &rec.id, JobState::InputRequired).await;
    assert_eq!(waiting.input_requests.len(), 2);
    // Unknown keys are ignored; a partial answer keeps the job waiting for the rest.
    let partial = jobs
        .answer(
            "alice",
            &rec.id,
            BTreeMap::from([("a".into(), json!(1)), ("zz".into(), json!(0))]),
        )
        .await
        .unwrap();
    assert_eq!(partial.state, JobState::InputRequired);
    assert_eq!(partial.input_requests.keys().collect::<Vec<_>>(), ["b"]);
    jobs.answer("alice", &rec.id, BTreeMap::from([("b".into(), json!(2))]))
        .await
        .unwrap();
    let done = wait_for(&jobs, &rec.id, JobState::Completed).await;
    assert_eq!(done.result, Some(json!({"answers": {"a": 1, "b": 2}})));
    // Other principals cannot see it.
    assert!(matches!(jobs.get("bob", &rec.id), Err(JobError::NotFound)));
}

#[tokio::test]
async fn cancel_stops_a_running_job_and_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let (jobs, _store) = jobs(dir.path());
    let rec = jobs
        .spawn("alice", "sleep", "Sleeping.", |ctx| async move {
            ctx.sleep(Duration::from_secs(600)).await?;
            Ok(JobOutcome::Completed(json!("never")))
        })
        .await
        .unwrap();
    let cancelled = jobs.cancel("alice", &rec.id).await.unwrap();
    assert_eq!(cancelled.state, JobState::Cancelled);
    let again = jobs.cancel("alice", &rec.id).await.unwrap();
    assert_eq!(again.state, JobState::Cancelled);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let rec = jobs.get("alice", &rec.id).unwrap();
    assert_eq!(rec.state, JobState::Cancelled);
    assert_eq!(rec.result, None);
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn recovery_fails_interrupted_jobs_and_sweep_expires_them() {
    let dir = tempfile::tempdir().unwrap();
    // First "process": a job starts; dropping the runtime kills its future mid-sleep and
    // releases every store handle.
    let id = {
        let rt = runtime();
        let id = rt.block_on(async {
            let (jobs, _store) = jobs(dir.path());
            jobs.spawn("alice", "sleep", "Sleeping.", |ctx| async move {
                ctx.sleep(Duration::from_secs(600)).await?;
                Ok(JobOutcome::Completed(json!("never")))
            })
            .await
            .unwrap()
            .id
        });
        drop(rt);
        id
    };
    let store = Store::open(dir.path()).unwrap();
    let clock = Arc::new(OffsetClock::new());
    let jobs = Jobs::new(parts(&store, clock.clone()));
    assert_eq!(jobs.recover().unwrap(), 1);
    let rec = jobs.get("alice", &id).unwrap();
    assert_eq!(rec.state, JobState::Failed);
    assert_eq!(rec.failure.unwrap().code, INTERRUPTED_CODE);
    assert_eq!(jobs.sweep().unwrap(), 0);
    clock.advance(Duration::from_secs(61));
    assert!(matches!(jobs.get("alice", &id), Err(JobError::NotFound)));
    assert_eq!(jobs.sweep().unwrap(), 1);
}
