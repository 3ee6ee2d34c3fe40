//! `notifications/tasks` on a `subscriptions/listen` stream.
//!
//! rmcp 3.11's `SubscriptionFilter` has no `taskIds` field and its `SubscriptionSink` refuses
//! task notifications, so vidforge carries the requested ids beside rmcp (see
//! [`super::wire_layer`]) and sends the notifications through the request's peer itself,
//! tagged with the subscription id as the spec requires.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    DetailedTask, GetMeta, RequestId, ServerNotification, TaskStatusNotification,
    TaskStatusNotificationParams,
};
use serde_json::Value;

pub fn task_status_notification(
    detailed: Value,
    subscription_id: &RequestId,
) -> Result<ServerNotification, McpError> {
    let task: DetailedTask = serde_json::from_value(detailed).map_err(|e| {
        McpError::internal_error(format!("building a task notification: {e}"), None)
    })?;
    let mut notification = ServerNotification::TaskStatusNotification(TaskStatusNotification::new(
        TaskStatusNotificationParams::new(task),
    ));
    notification
        .get_meta_mut()
        .set_subscription_id(subscription_id.clone());
    Ok(notification)
}
