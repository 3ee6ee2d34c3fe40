//! Every transition of a render's record, named, in one place: the worker's run of a render
//! ([`run`]), speculative rendering ([`speculative`]), the person's and the client's
//! decisions ([`decisions`]) and upkeep ([`upkeep`]: boot recovery, the sweeper). Each is a
//! compare-and-swap on the stored record through [`write`], the one update that stamps
//! `updated_at`, re-indexes, records the transition's metrics and writes its webhook event
//! in the same transaction. Nothing outside this module changes a render's record, so a
//! new state or transition is added here. The same holds for the segments of a split
//! render ([`segments`]): every write of theirs, fenced by the holder's claim.

pub(crate) mod decisions;
pub(crate) mod run;
pub(crate) mod segments;
pub(crate) mod speculative;
pub(crate) mod upkeep;

use std::time::{Duration, Instant};

use crate::catalog::ErrorCode;
use crate::error::ServiceError;
use crate::shared::{Ledger, Pool};
use crate::store::{
    Change, Outcome, ProgressSnapshot, ProgressStage, RenderRecord, RenderState, Updated,
};

/// What a transition wrote: the record as stored after it, and the transition's answer.
pub(crate) type Written<T> = Option<Updated<RenderRecord, T>>;

/// The compare-and-swap update every transition goes through. Not flushed.
fn write<T>(
    ledger: &Ledger,
    id: &str,
    mut f: impl FnMut(&mut RenderRecord) -> Result<Change<T>, ServiceError>,
) -> Result<Written<T>, ServiceError> {
    let now = ledger.now();
    let mut before = None;
    // The webhook event this change makes (if any) is written with it, atomically.
    let emitted = std::cell::Cell::new(None);
    let emit = |old: &RenderRecord, new: &RenderRecord| {
        let event = ledger.webhook_event(old, new, now);
        emitted.set(event.as_ref().map(|e| e.kind));
        event
    };
    let out = ledger.store.update_render_emitting(
        id,
        |r| {
            before = Some(r.state);
            let c = f(r)?;
            if matches!(c, Change::Write(_)) {
                r.updated_at = now.max(r.updated_at);
            }
            Ok::<_, ServiceError>(c)
        },
        &emit,
    )?;
    if let Some(u) = &out
        && u.written
    {
        ledger.index(&u.record);
        if let Some(before) = before {
            crate::render_metrics::render_transition(before, &u.record, now);
        }
        if let Some(kind) = emitted.get() {
            crate::telemetry::webhook_event(kind.as_str());
        }
    }
    Ok(out)
}

/// [`write`], then flush, then notify subscribers.
fn write_durable<T>(
    ledger: &Ledger,
    id: &str,
    f: impl FnMut(&mut RenderRecord) -> Result<Change<T>, ServiceError>,
) -> Result<Written<T>, ServiceError> {
    let out = write(ledger, id, f)?;
    if let Some(u) = &out
        && u.written
    {
        ledger.store.flush()?;
        ledger.notify(id);
    }
    Ok(out)
}

/// How long a worker keeps trying to record how its render ended while the store cannot be
/// reached (PostgreSQL restarting).
const FINAL_WRITE_PATIENCE: Duration = Duration::from_secs(10 * 60);
/// The pause between those tries.
const FINAL_WRITE_RETRY: Duration = Duration::from_secs(1);

/// [`write_durable`] for the write that ends a step of a render (its result, its failure,
/// its preview, its hand-back): while the store cannot be reached it is tried again (bounded
/// by [`FINAL_WRITE_PATIENCE`] and shutdown), since giving up would leave the render running
/// in the record with nobody running it, to be started over as if this process had died.
/// The lease keeper goes on renewing meanwhile; a render taken over in the meantime is left
/// alone by the step's own [`taken_over`] check.
fn write_final<T>(
    ledger: &Ledger,
    pool: &Pool,
    id: &str,
    mut f: impl FnMut(&mut RenderRecord) -> Result<Change<T>, ServiceError>,
) -> Result<Written<T>, ServiceError> {
    let deadline = Instant::now() + FINAL_WRITE_PATIENCE;
    loop {
        match write_durable(ledger, id, &mut f) {
            Err(ServiceError::Unavailable { reason })
                if Instant::now() < deadline && !pool.stopping() =>
            {
                tracing::warn!(render_id = %id, %reason, "the store cannot be reached; retrying the render's write");
                std::thread::sleep(FINAL_WRITE_RETRY);
            }
            other => return other,
        }
    }
}

/// Whether another attempt has claimed the render since this worker's claim (`claimed`, the
/// record as the claim wrote it): every claim counts an attempt, so the count is the fencing
/// token. A worker whose render was taken over (its node lost the lease) writes nothing more.
fn taken_over(current: &RenderRecord, claimed: &RenderRecord) -> bool {
    current.attempts != claimed.attempts
}

/// `r` succeeded with `outcome` (a `Success`) at `now`.
fn mark_succeeded(r: &mut RenderRecord, mut outcome: Outcome, now: u64) {
    if let Outcome::Success {
        finished_at,
        frames,
        fps,
        backend,
        ..
    } = &mut outcome
    {
        *finished_at = now;
        r.progress = Some(
            ProgressSnapshot::new(ProgressStage::Finalizing, *frames, Some(*frames))
                .with_rate(*fps, backend.clone()),
        );
    }
    r.state = RenderState::Succeeded;
    r.finished_at = Some(now);
    r.outcome = Some(outcome);
}

/// `r` ends cancelled at `now`.
fn mark_cancelled(r: &mut RenderRecord, now: u64) {
    r.state = RenderState::Cancelled;
    r.finished_at = Some(now);
}

/// `r` ends failed with `outcome` at `now`.
fn mark_failed(r: &mut RenderRecord, outcome: Outcome, now: u64) {
    r.state = RenderState::Failed;
    r.finished_at = Some(now);
    r.outcome = Some(outcome);
}

/// Ends a render whose attempts keep dying with their process (or node): `render_failed`,
/// not temporary (the same attempt would end the same way). No crash loops.
fn mark_crash_loop(r: &mut RenderRecord, now: u64) {
    let crashes = r.crashes;
    tracing::error!(render_id = %r.id, crashes, "render ended its server process too often; failing it instead of restarting it");
    r.progress = None;
    mark_failed(
        r,
        Outcome::Error {
            code: ErrorCode::RenderFailed,
            message: format!(
                "The render was stopped: {crashes} attempts ended the server process before \
                 they finished (a crash, an abort, an out-of-memory kill or a node lost), so it \
                 is not restarted again."
            ),
            reason: Some(format!(
                "{crashes} attempts were found unfinished, at server start or by another node"
            )),
            field: None,
            retry_after_ms: None,
            temporary: Some(false),
        },
        now,
    );
}
