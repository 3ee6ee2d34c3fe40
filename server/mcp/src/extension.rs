//! The extension seam of the MCP front: what a separately built binary mounts beside
//! vidforge's own tools, resources and tasks, on the same rmcp protocol layer, HTTP stack,
//! auth and task store, without this crate knowing any of its names.
//!
//! The production `vidforge` binary mounts none. The `vidforge-conformance` binary (the
//! `conformance/` crate) mounts the official conformance suite's fixtures through
//! `vidforge::cli::run_with`. [`super::VidforgeMcp`] consults the mounted extensions, in order:
//! - `server/discover`: the capabilities each adds ([`McpExtension::capabilities`]);
//! - `tools/list` / `tools/call`: their tools after vidforge's own, and calls for names
//!   vidforge does not own;
//! - `prompts/*`, `completion/complete`: served only when an extension serves them (`-32601`
//!   otherwise);
//! - `resources/list`, `resources/templates/list`, `resources/read`: theirs after vidforge's;
//! - `tasks/get|update|cancel` and `notifications/tasks` for task ids an extension owns
//!   ([`McpExtension::owns_task`]);
//! - list-changed notifications on `subscriptions/listen` ([`ExtensionHost::list_changed`]).
//!
//! An extension gets what it needs from the server through its [`ExtensionHost`]: trees of its
//! own in the server's sled database, durable flushes, the clock, the task TTL, the task-change
//! broadcast behind `notifications/tasks`, and a step in the sweeper.

use std::sync::Arc;
use std::time::Duration;

pub use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse,
    InputResponses,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use vidforge_core::clock::SharedClock;
use vidforge_core::service::{RenderService, Sweeper};
use vidforge_core::store::{ExtensionTree, StoreError};

pub use super::declared::Declared;

/// A list-changed event for `subscriptions/listen` streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListChange {
    Tools,
    Prompts,
}

/// The answer to a `tools/call`.
pub type ToolResult = Result<CallToolResponse, McpError>;

/// One `tools/call` of a name vidforge does not own.
pub struct ToolCall<'a> {
    /// The authenticated principal.
    pub principal: &'a str,
    pub request: &'a CallToolRequestParams,
    /// What the request declared in its per-request client capabilities.
    pub declared: &'a Declared,
    /// rmcp's request context (peer for progress and log notifications, `_meta`).
    pub ctx: &'a RequestContext<RoleServer>,
}

/// Tools, prompts, resources and tasks served beside vidforge's own. Every method but
/// [`McpExtension::call_tool`] has a default that adds nothing.
pub trait McpExtension: Send + Sync + 'static {
    /// Server capabilities it adds to `server/discover` (top-level keys merged in).
    fn capabilities(&self) -> Value {
        json!({})
    }

    /// Its tool definitions, listed after vidforge's own.
    fn tools(&self) -> Vec<Value> {
        Vec::new()
    }

    /// Whether its tool list changes while serving (`tools/list` is then not cacheable).
    fn tools_change(&self) -> bool {
        false
    }

    /// Runs a tool it owns; `None` when `call.request.name` is not one of its tools.
    fn call_tool<'a>(&'a self, call: ToolCall<'a>) -> BoxFuture<'a, Option<ToolResult>>;

    /// Its prompts; `None` when it serves no prompts.
    fn prompts(&self) -> Option<Vec<Value>> {
        None
    }

    /// `prompts/get` for a prompt it owns; `None` when the name is not one of its prompts.
    fn get_prompt(
        &self,
        _request: &GetPromptRequestParams,
    ) -> Option<Result<GetPromptResponse, McpError>> {
        None
    }

    /// The `completion` object of `completion/complete`; `None` when it serves no
    /// completions.
    fn complete(&self, _reference: &Value, _argument: &str, _value: &str) -> Option<Value> {
        None
    }

    /// Its resources, listed after vidforge's own.
    fn resources(&self) -> Vec<Value> {
        Vec::new()
    }

    /// Its resource templates, listed after vidforge's own.
    fn resource_templates(&self) -> Vec<Value> {
        Vec::new()
    }

    /// The `ReadResourceResult` of a URI it owns; `None` when it is not one of its URIs.
    fn read_resource(&self, _uri: &str) -> Option<Value> {
        None
    }

    /// Whether `task_id` names one of its tasks (then it answers every task method for it).
    fn owns_task(&self, _task_id: &str) -> bool {
        false
    }

    /// The principal's task as a `DetailedTask` (`-32602` when unknown, expired or another
    /// principal's).
    fn get_task(&self, _principal: &str, task_id: &str) -> Result<Value, McpError> {
        Err(unknown_task(task_id))
    }

    /// `tasks/update`: answers to the task's input requests.
    fn update_task<'a>(
        &'a self,
        _principal: &'a str,
        task_id: &'a str,
        _responses: &'a InputResponses,
    ) -> BoxFuture<'a, Result<(), McpError>> {
        Box::pin(async move { Err(unknown_task(task_id)) })
    }

    /// `tasks/cancel`.
    fn cancel_task<'a>(
        &'a self,
        _principal: &'a str,
        task_id: &'a str,
    ) -> BoxFuture<'a, Result<(), McpError>> {
        Box::pin(async move { Err(unknown_task(task_id)) })
    }
}

/// The `-32602` of an unknown, expired or foreign task id (the same for all three).
pub fn unknown_task(task_id: &str) -> McpError {
    McpError::new(
        rmcp::model::ErrorCode::INVALID_PARAMS,
        "Unknown or expired task.",
        Some(json!({ "taskId": task_id })),
    )
}

/// What the server lends an extension.
#[derive(Clone)]
pub struct ExtensionHost {
    service: RenderService,
    list_changes: broadcast::Sender<ListChange>,
}

impl std::fmt::Debug for ExtensionHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtensionHost").finish_non_exhaustive()
    }
}

impl ExtensionHost {
    /// Opens (or creates) a tree of the extension's own in the server's sled database (see
    /// [`vidforge_core::store::Store::open_tree`]).
    pub fn open_tree(&self, name: &str) -> Result<ExtensionTree, StoreError> {
        self.service.store().open_tree(name)
    }

    /// Makes every previous write durable (blocking: call it off the async runtime).
    pub fn flush(&self) -> Result<(), StoreError> {
        self.service.store().flush()
    }

    /// The server's injected clock.
    pub fn clock(&self) -> SharedClock {
        self.service.clock().clone()
    }

    /// How long a task stays readable after creation.
    pub fn task_ttl(&self) -> Duration {
        self.service.config().task_ttl
    }

    /// Announces a change of one of its tasks to `notifications/tasks` subscribers.
    pub fn task_changed(&self, task_id: &str) {
        self.service.publish_task_change(task_id);
    }

    /// Announces a change of its tool or prompt list to `subscriptions/listen` streams.
    pub fn list_changed(&self, change: ListChange) {
        // No listeners is fine.
        let _ = self.list_changes.send(change);
    }

    /// Adds a step to every sweep (every `sweep_interval`).
    pub fn add_sweeper(&self, sweeper: Sweeper) {
        self.service.add_sweeper(sweeper);
    }
}

/// Why an extension could not be built: its own error, whatever its type.
pub type MountFailure = Box<dyn std::error::Error + Send + Sync>;

/// Builds an extension once the service has started (blocking; runs before serving).
pub type Mount =
    Box<dyn FnOnce(ExtensionHost) -> Result<Arc<dyn McpExtension>, MountFailure> + Send>;

/// An extension [`Extensions::mount`] could not mount: its name, and why (the source).
#[derive(Debug, thiserror::Error)]
#[error("cannot mount {name}")]
pub struct MountError {
    name: String,
    #[source]
    source: MountFailure,
}

/// An extension a binary asks `serve` to mount.
pub struct ExtensionSpec {
    /// For the startup banner and errors ("the conformance fixtures").
    pub name: String,
    /// Refuse a non-loopback listen address while it is mounted (test tools).
    pub loopback_only: bool,
    pub mount: Mount,
}

/// The extensions mounted on one server, and the list-change broadcast they share.
#[derive(Clone)]
pub struct Extensions {
    pub(super) mounted: Vec<Arc<dyn McpExtension>>,
    pub(super) list_changes: broadcast::Sender<ListChange>,
}

impl Default for Extensions {
    fn default() -> Self {
        Extensions {
            mounted: Vec::new(),
            list_changes: broadcast::channel(16).0,
        }
    }
}

impl Extensions {
    /// Mounts `specs` on the started `service`, in order.
    pub fn mount(
        service: &RenderService,
        specs: Vec<ExtensionSpec>,
    ) -> Result<Extensions, MountError> {
        let mut extensions = Extensions::default();
        for spec in specs {
            let host = ExtensionHost {
                service: service.clone(),
                list_changes: extensions.list_changes.clone(),
            };
            let mounted = (spec.mount)(host).map_err(|source| MountError {
                name: spec.name,
                source,
            })?;
            extensions.mounted.push(mounted);
        }
        Ok(extensions)
    }

    pub fn is_empty(&self) -> bool {
        self.mounted.is_empty()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Arc<dyn McpExtension>> {
        self.mounted.iter()
    }

    /// The extension owning task `id`, if any.
    pub(super) fn task_owner(&self, id: &str) -> Option<&Arc<dyn McpExtension>> {
        self.mounted.iter().find(|e| e.owns_task(id))
    }
}
