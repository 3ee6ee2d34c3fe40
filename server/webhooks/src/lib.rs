//! Completion webhooks: what tells systems that are not MCP clients (billing, a CMS, a queue)
//! that a render needs approval, succeeded, failed or was cancelled.
//!
//! The events themselves are made by the domain, in the store's outbox, in the same
//! transaction as the transition (`vidforge_core::webhook`, `vidforge_core::store::outbox`):
//! a `kill -9` cannot separate the two. This crate delivers them: a loop on each node
//! ([`start`]) claims due events under a lease (the database's `FOR UPDATE SKIP LOCKED` in a
//! cluster, so each attempt is one node's), posts each, signed per Standard Webhooks
//! ([`send`]), with the body of [`payload`], and records the attempt: delivered on a `2xx`,
//! else retried with exponential backoff and jitter until `webhook_retry_for`, then dropped.
//! The `webhook-id` (the event's id) is the same on every attempt, so receivers de-duplicate.
//!
//! Bounded: at most `webhook_max_in_flight` attempts at once per node, a quarter of them to
//! one principal's endpoint; each attempt within `webhook_timeout`; nothing here runs on the
//! workers or the MCP front, so a slow or dead receiver slows neither.

pub mod payload;
pub mod send;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use vidforge_core::RenderService;
use vidforge_core::store::{Attempt, Next, OutboxEvent};
use vidforge_core::telemetry;
use vidforge_core::webhook::RetryPolicy;
use vidforge_mcp::presentation::Presenter;

pub use send::ClientError;
use send::Sender;

/// How often the outbox is read when nothing wakes the loop (a retry falling due, another
/// node's event).
const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// How long a change waits for the changes right behind it before the outbox is read.
const COALESCE: Duration = Duration::from_millis(50);
/// The wait after a failed read of the outbox (the store is away).
const STORE_RETRY: Duration = Duration::from_secs(2);
/// How long attempts in flight may finish after a stop (the rest are retried after the
/// restart: their leases run out).
const STOP_GRACE: Duration = Duration::from_secs(3);

/// The delivery loop of this node (stop it with [`Webhooks::stop`]).
pub struct Webhooks {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// What every delivery needs.
struct Ctx {
    service: RenderService,
    sender: Sender,
    presenter: Presenter,
    policy: RetryPolicy,
    node: String,
}

/// Starts delivering when any endpoint is configured (on the current tokio runtime).
pub fn start(service: &RenderService) -> Result<Option<Webhooks>, ClientError> {
    let config = service.config();
    if !config.webhooks_enabled() {
        return Ok(None);
    }
    let ctx = Arc::new(Ctx {
        sender: Sender::new(config.webhook_timeout, service.node())?,
        presenter: Presenter::new(config.lifetimes(), config.base_url()),
        policy: RetryPolicy::from_config(config),
        node: service.node().to_string(),
        service: service.clone(),
    });
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(run(ctx, stopped));
    Ok(Some(Webhooks { stop, task }))
}

impl Webhooks {
    /// Stops claiming, gives attempts in flight a few seconds to finish, then ends.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

async fn run(ctx: Arc<Ctx>, mut stopped: watch::Receiver<bool>) {
    let config = ctx.service.config();
    let max = config.webhook_max_in_flight;
    let per_endpoint = (max / 4).max(1);
    // An attempt takes at most the timeout: the lease outlives it with room to record it.
    let lease = config.webhook_timeout * 2 + Duration::from_secs(5);
    let mut changes = ctx.service.subscribe();
    let mut in_flight: JoinSet<String> = JoinSet::new();
    let mut per_principal: HashMap<String, usize> = HashMap::new();
    tracing::info!(max_in_flight = max, "webhook delivery started");
    loop {
        // Claim one event at a time while there is room, so each claim skips the principals
        // already at their share.
        let mut store_down = false;
        while in_flight.len() < max {
            let skip: Vec<String> = per_principal
                .iter()
                .filter(|(_, n)| **n >= per_endpoint)
                .map(|(p, _)| p.clone())
                .collect();
            let outbox = ctx.service.outbox();
            let claimed = tokio::task::spawn_blocking(move || outbox.claim(lease, 1, &skip)).await;
            let event = match claimed {
                Ok(Ok(mut events)) => match events.pop() {
                    Some(e) => e,
                    None => break,
                },
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "cannot read the webhook outbox; retrying");
                    store_down = true;
                    break;
                }
                Err(e) => {
                    tracing::error!(error = %e, "webhook claim panicked");
                    store_down = true;
                    break;
                }
            };
            *per_principal.entry(event.principal.clone()).or_default() += 1;
            in_flight.spawn(deliver(ctx.clone(), event));
        }
        let wait = if store_down {
            STORE_RETRY
        } else {
            POLL_INTERVAL
        };
        tokio::select! {
            Some(done) = in_flight.join_next(), if !in_flight.is_empty() => {
                if let Ok(principal) = done
                    && let Some(n) = per_principal.get_mut(&principal)
                {
                    *n -= 1;
                    if *n == 0 {
                        per_principal.remove(&principal);
                    }
                }
            }
            // A render changed here: its event may be in the outbox now.
            change = changes.recv() => {
                if matches!(change, Err(tokio::sync::broadcast::error::RecvError::Closed)) {
                    break;
                }
                // Progress comes in bursts: one read of the outbox for all of a burst.
                tokio::time::sleep(COALESCE).await;
                while changes.try_recv().is_ok() {}
            }
            _ = tokio::time::sleep(wait) => {}
            _ = stopped.changed() => break,
        }
    }
    let _ = tokio::time::timeout(STOP_GRACE, async {
        while in_flight.join_next().await.is_some() {}
    })
    .await;
    in_flight.abort_all();
    tracing::info!("webhook delivery stopped");
}

/// One attempt at `event`, recorded; returns its principal.
async fn deliver(ctx: Arc<Ctx>, mut event: OutboxEvent) -> String {
    let config = ctx.service.config();
    let at = ctx.service.now_ms();
    let endpoint = config
        .webhook_endpoint(&event.principal)
        .filter(|e| e.wants(event.kind));
    let (attempt, next) = match endpoint {
        Some(endpoint) => {
            let body = payload::body(&ctx.presenter, &event);
            let attempt = ctx.sender.attempt(&endpoint, &event.id, body, at).await;
            telemetry::webhook_attempt(attempt.succeeded(), Duration::from_millis(attempt.millis));
            let next = ctx.policy.next(&event, &attempt, jitter());
            (attempt, next)
        }
        None => (
            Attempt {
                at,
                node: ctx.node.clone(),
                status: None,
                error: Some("no endpoint".into()),
                millis: 0,
            },
            Next::Drop("no endpoint is configured for this principal and event any more".into()),
        ),
    };
    match &next {
        Next::Delivered => {
            tracing::debug!(event = %event.id, render = %event.render.id, "webhook delivered")
        }
        Next::Retry(after) => tracing::info!(
            event = %event.id, render = %event.render.id, outcome = %attempt.outcome(),
            retry_in_ms = after.as_millis() as u64, "webhook attempt failed"
        ),
        Next::Drop(reason) => {
            telemetry::webhook_dropped();
            tracing::warn!(event = %event.id, render = %event.render.id, %reason, "webhook dropped");
        }
    }
    event.record(attempt, &next);
    let principal = event.principal.clone();
    let outbox = ctx.service.outbox();
    let recorded = tokio::task::spawn_blocking(move || {
        outbox
            .finish_attempt(&event, &next)
            .map(|held| (held, event.id))
    })
    .await;
    match recorded {
        Ok(Ok((true, _))) => {}
        Ok(Ok((false, id))) => {
            tracing::warn!(event = %id, "webhook lease lost before the attempt was recorded")
        }
        // The lease runs out and the event is attempted again (at least once).
        Ok(Err(e)) => tracing::warn!(error = %e, "cannot record a webhook attempt"),
        Err(e) => tracing::error!(error = %e, "recording a webhook attempt panicked"),
    }
    principal
}

/// A number in `[0, 1)` from the OS random source (the retry jitter).
fn jitter() -> f64 {
    let mut b = [0u8; 4];
    if getrandom::fill(&mut b).is_err() {
        return 0.5;
    }
    f64::from(u32::from_le_bytes(b)) / (f64::from(u32::MAX) + 1.0)
}
