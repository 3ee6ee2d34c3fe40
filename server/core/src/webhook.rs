//! Webhook rules: which render transitions become events (written with the transition, see
//! [`crate::store::Store::update_render_emitting`]), and what follows a delivery attempt
//! (the retry schedule). The delivery itself (HTTP, signatures, payloads) is a front's:
//! `vidforge-webhooks`.

use std::time::Duration;

use crate::config::Config;
use crate::store::{Attempt, EventKind, Next, OutboxEvent, RenderRecord, RenderState};

/// The longest wait between two attempts.
pub const MAX_RETRY_INTERVAL: Duration = Duration::from_secs(3600);
/// How long delivered and dropped events stay listed (on the dashboard) before the sweeper
/// deletes them.
pub const FINISHED_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The event a change of `before` into `after` makes, if any: entering a state a principal
/// can be told of (awaiting approval, succeeded, failed, cancelled).
pub fn event_kind(before: &RenderRecord, after: &RenderRecord) -> Option<EventKind> {
    if before.state == after.state {
        return None;
    }
    match after.state {
        RenderState::AwaitingApproval => Some(EventKind::InputRequired),
        RenderState::Succeeded => Some(EventKind::Succeeded),
        RenderState::Failed => Some(EventKind::Failed),
        RenderState::Cancelled => Some(EventKind::Cancelled),
        RenderState::Queued | RenderState::Rendering | RenderState::Previewing => None,
    }
}

/// The outbox event for this change, when the principal's endpoint wants it.
pub fn event_for(
    config: &Config,
    before: &RenderRecord,
    after: &RenderRecord,
    now: u64,
) -> Option<OutboxEvent> {
    let kind = event_kind(before, after)?;
    let endpoint = config.webhook_endpoint(&after.principal)?;
    endpoint
        .wants(kind)
        .then(|| OutboxEvent::new(kind, after, now))
}

/// The retry schedule of one deployment.
#[derive(Clone, Copy, Debug)]
pub struct RetryPolicy {
    /// The wait after the first failure.
    pub initial: Duration,
    /// Attempts stop this long after the event was made.
    pub window: Duration,
}

impl RetryPolicy {
    pub fn from_config(c: &Config) -> RetryPolicy {
        RetryPolicy {
            initial: c.webhook_retry_initial,
            window: c.webhook_retry_for,
        }
    }

    /// What follows `attempt` at `event`, which already had `event.attempts` before it.
    /// `jitter` in `[0, 1)` spreads retries of events that failed together: the wait is
    /// between 3/4 and 5/4 of `initial · 2^(failures - 1)` (at most [`MAX_RETRY_INTERVAL`]).
    pub fn next(&self, event: &OutboxEvent, attempt: &Attempt, jitter: f64) -> Next {
        if attempt.succeeded() {
            return Next::Delivered;
        }
        let failures = event.attempts.saturating_add(1);
        let doubled = self
            .initial
            .saturating_mul(1u32 << failures.saturating_sub(1).min(20));
        let base = doubled.min(MAX_RETRY_INTERVAL);
        let wait = base.mul_f64(0.75 + jitter.clamp(0.0, 1.0) / 2.0);
        let next_at = attempt.ended_at() + wait.as_millis() as u64;
        let deadline = event.created_at + self.window.as_millis() as u64;
        if next_at > deadline {
            Next::Drop(format!(
                "no 2xx answer within {} ({failures} attempts; last: {})",
                humantime::format_duration(self.window),
                attempt.outcome()
            ))
        } else {
            Next::Retry(wait)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::sample;

    fn attempt(at: u64, status: Option<u16>) -> Attempt {
        Attempt {
            at,
            node: "n".into(),
            status,
            error: status.is_none().then(|| "timeout".into()),
            millis: 0,
        }
    }

    #[test]
    fn transitions_that_make_events() {
        let mut before = sample("task_1");
        before.state = RenderState::Previewing;
        let mut after = before.clone();
        after.state = RenderState::AwaitingApproval;
        assert_eq!(event_kind(&before, &after), Some(EventKind::InputRequired));
        assert_eq!(event_kind(&after, &after), None, "no change, no event");
        after.state = RenderState::Rendering;
        assert_eq!(event_kind(&before, &after), None);
        for (state, kind) in [
            (RenderState::Succeeded, EventKind::Succeeded),
            (RenderState::Failed, EventKind::Failed),
            (RenderState::Cancelled, EventKind::Cancelled),
        ] {
            after.state = state;
            assert_eq!(event_kind(&before, &after), Some(kind));
        }
    }

    #[test]
    fn only_configured_principals_get_events() {
        let mut config = Config::default();
        let mut before = sample("task_1");
        before.state = RenderState::Rendering;
        let mut after = before.clone();
        after.state = RenderState::Succeeded;
        assert!(event_for(&config, &before, &after, 5).is_none());
        config.webhook_url = Some("http://127.0.0.1:9/h".into());
        config.webhook_secret = Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into());
        config.webhook_events = vec!["render.failed".into()];
        assert!(event_for(&config, &before, &after, 5).is_none());
        config.webhook_events.clear();
        let e = event_for(&config, &before, &after, 5).unwrap();
        assert_eq!(
            (e.kind, e.principal.as_str(), e.next_attempt_at),
            (EventKind::Succeeded, "alice", 5)
        );
        assert!(e.id.starts_with("msg_"));
    }

    #[test]
    fn retries_back_off_then_drop() {
        let policy = RetryPolicy {
            initial: Duration::from_secs(5),
            window: Duration::from_secs(24 * 3600),
        };
        let mut event = OutboxEvent::new(EventKind::Succeeded, &sample("task_1"), 0);
        assert_eq!(
            policy.next(&event, &attempt(0, Some(204)), 0.5),
            Next::Delivered
        );
        let mut waits = Vec::new();
        let mut at = 0;
        for _ in 0..40 {
            let a = attempt(at, Some(503));
            let next = policy.next(&event, &a, 0.5);
            event.record(a, &next);
            match next {
                Next::Retry(w) => {
                    waits.push(w.as_secs());
                    at = event.next_attempt_at;
                }
                Next::Drop(reason) => {
                    assert!(reason.contains("503"), "{reason}");
                    break;
                }
                Next::Delivered => unreachable!(),
            }
        }
        assert_eq!(&waits[..4], &[5, 10, 20, 40]);
        assert!(waits.iter().all(|w| *w <= 3600));
        assert_eq!(event.status, crate::store::OutboxStatus::Dropped);
        assert!(at <= 24 * 3600 * 1000, "never past the window");
        assert_eq!(event.last_attempts.len(), crate::store::KEPT_ATTEMPTS);
        // Jitter stays within a quarter either way.
        let fresh = OutboxEvent::new(EventKind::Failed, &sample("task_2"), 0);
        for j in [0.0, 0.99] {
            let Next::Retry(w) = policy.next(&fresh, &attempt(0, None), j) else {
                panic!()
            };
            assert!((3750..=6250).contains(&(w.as_millis() as u64)));
        }
    }
}
