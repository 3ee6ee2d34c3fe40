//! `subscriptions/listen`: `notifications/tasks` for the subscribed tasks (beside rmcp, which
//! cannot send them) and list-changed notifications from mounted extensions. A listen lives at
//! most `stream_max_lifetime` ([`crate::streams`]): it then ends cleanly with its final
//! `SubscriptionsListenResult` (`resultType: complete`, its `subscriptionId`), and the client
//! listens again; polling `tasks/get` stays authoritative meanwhile.

use rmcp::ErrorData as McpError;
use rmcp::service::SubscriptionContext;
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;
use vidforge_core::shared::ANY_TASK;

use super::extension::ListChange;
use super::wire_layer::RequestedTaskIds;

use super::declared::declared;
use super::request::*;

/// Waits for the next list change, or forever once the channel has closed.
async fn next_list_change(
    rx: &mut Option<tokio::sync::broadcast::Receiver<ListChange>>,
) -> Result<ListChange, RecvError> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

impl VidforgeMcp {
    pub(super) async fn run_listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let request = context.request_context();
        let task_ids = request
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<RequestedTaskIds>())
            .map(|ids| ids.0.clone())
            .unwrap_or_default();
        let principal = principal(request)?;
        let declared = declared(request);
        // Subscribe before the snapshot so no change between the two is lost.
        let mut changes = self.shared.service.subscribe();
        let mut list_changes = Some(self.shared.extensions.list_changes.subscribe());
        let peer = request.peer.clone();
        let subscription_id = request.id.clone();
        // The last (status, statusMessage) sent per task: identical repeats are skipped.
        let mut last_sent: std::collections::HashMap<String, (Value, Value)> = Default::default();
        // Each subscribed task's current state first, so a subscriber that arrives while a
        // task already waits for input learns it without a further change.
        let mut pending: Vec<String> = task_ids.clone();
        let lifetime = tokio::time::sleep(self.shared.service.config().stream_max_lifetime);
        tokio::pin!(lifetime);
        loop {
            for id in pending.drain(..) {
                // Re-checks ownership every time: another principal's id never fires.
                let Some(detailed) = self.detailed_any(&principal, &id, declared.elicitation())
                else {
                    continue;
                };
                let key = (
                    detailed["status"].clone(),
                    detailed["statusMessage"].clone(),
                );
                if last_sent.get(&id) == Some(&key) {
                    continue;
                }
                last_sent.insert(id, key);
                let notification =
                    super::notify::task_status_notification(detailed, &subscription_id)?;
                if peer.send_notification(notification).await.is_err() {
                    return Ok(());
                }
            }
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                // The clean end: rmcp sends the final result, the client listens again.
                () = &mut lifetime => return Ok(()),
                changed = changes.recv(), if !task_ids.is_empty() => match to_resend(changed, &task_ids) {
                    Some(ids) => pending.extend(ids),
                    None => return Ok(()),
                },
                change = next_list_change(&mut list_changes) => {
                    let sent = match change {
                        Ok(ListChange::Tools) => context.sink().notify_tool_list_changed().await,
                        Ok(ListChange::Prompts) => context.sink().notify_prompt_list_changed().await,
                        // Missed changes: both lists may have changed.
                        Err(RecvError::Lagged(_)) => match context.sink().notify_tool_list_changed().await {
                            Ok(()) | Err(rmcp::service::SubscriptionSendError::NotificationNotAccepted(_)) => {
                                context.sink().notify_prompt_list_changed().await
                            }
                            Err(e) => Err(e),
                        },
                        Err(_) => {
                            list_changes = None;
                            Ok(())
                        }
                    };
                    match sent {
                        // Filtered out by what this subscription asked for.
                        Ok(())
                        | Err(rmcp::service::SubscriptionSendError::NotificationNotAccepted(_)) => {}
                        Err(_) => return Ok(()),
                    }
                }
            }
        }
    }
}

/// The subscribed task ids a change event asks to (re)send, `None` once the broadcast has
/// closed. [`ANY_TASK`] (changes were missed) asks for all of them. A listener that fell
/// behind the broadcast (`Lagged`) may have missed any change, the terminal one included, so
/// every subscribed task's current state is sent again (unchanged ones are then skipped as
/// repeats).
fn to_resend(event: Result<String, RecvError>, task_ids: &[String]) -> Option<Vec<String>> {
    match event {
        Ok(id) if id == ANY_TASK => Some(task_ids.to_vec()),
        Ok(id) if task_ids.contains(&id) => Some(vec![id]),
        Ok(_) => Some(Vec::new()),
        Err(RecvError::Lagged(_)) => Some(task_ids.to_vec()),
        Err(RecvError::Closed) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lagging_listener_gets_every_subscribed_task_again() {
        let ids = vec!["task_a".to_string(), "task_b".to_string()];
        assert_eq!(
            to_resend(Ok("task_b".into()), &ids),
            Some(vec!["task_b".into()])
        );
        assert_eq!(to_resend(Ok("task_z".into()), &ids), Some(vec![]));
        assert_eq!(
            to_resend(Err(RecvError::Lagged(3)), &ids),
            Some(ids.clone())
        );
        assert_eq!(to_resend(Err(RecvError::Closed), &ids), None);
        // The cluster's feed came back: anything may have changed meanwhile.
        assert_eq!(to_resend(Ok(ANY_TASK.into()), &ids), Some(ids.clone()));
    }
}
