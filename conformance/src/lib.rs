//! The official MCP conformance suite's fixtures, as an MCP extension of vidforge.
//!
//! [`fixtures`] holds the suite's fixed tools, prompts, resources and multi round-trip flows;
//! [`jobs`] the durable generic jobs its task fixtures run as. [`ConformanceExtension`]
//! mounts both through the server's extension seam ([`vidforge_mcp::extension`]): the jobs
//! live in a `jobs` tree of the server's sled database, are flushed with it, announce changes
//! on its task broadcast (`notifications/tasks`), expire after its task TTL and are swept by its
//! sweeper. The `vidforge-conformance` binary (`src/main.rs`) is the `vidforge` CLI with this
//! extension mounted on `serve`.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    ErrorCode as RpcCode, GetPromptRequestParams, GetPromptResponse, InputResponses,
};
use serde_json::{Value, json};
use vidforge_core::ServiceError;
use vidforge_core::store::StoreError;
use vidforge_mcp::extension::{
    BoxFuture, ExtensionHost, ExtensionSpec, McpExtension, ToolCall, ToolResult, unknown_task,
};
use vidforge_mcp::wire;

pub mod fixtures;
pub mod jobs;

use fixtures::Fixtures;
use jobs::{JobError, Jobs};

/// The extension spec `serve` mounts: the fixtures, refused on a non-loopback address.
pub fn extension() -> ExtensionSpec {
    ExtensionSpec {
        name: "the MCP conformance fixtures".into(),
        loopback_only: true,
        mount: Box::new(|host| Ok(ConformanceExtension::mount(host)?)),
    }
}

/// The fixtures and their jobs, mounted on one server.
pub struct ConformanceExtension {
    fixtures: Fixtures,
    jobs: Jobs,
}

impl ConformanceExtension {
    /// Opens the jobs on the server's store, ends jobs a previous process left unfinished as
    /// `failed` (boot recovery), sweeps expired ones, and joins the server's sweeper.
    pub fn mount(host: ExtensionHost) -> Result<Arc<dyn McpExtension>, StoreError> {
        let jobs = Jobs::on_host(&host)?;
        let interrupted = jobs.recover()?;
        if interrupted > 0 {
            tracing::warn!(
                interrupted,
                "jobs interrupted by the restart ended as failed"
            );
        }
        jobs.sweep()?;
        let sweeping = jobs.clone();
        host.add_sweeper(Box::new(move || {
            sweeping.sweep().map_err(ServiceError::from)
        }));
        let announcer = host.clone();
        let fixtures = Fixtures::new(Box::new(move |change| announcer.list_changed(change)));
        Ok(Arc::new(ConformanceExtension { fixtures, jobs }))
    }
}

fn job_error(id: &str, e: JobError) -> McpError {
    match e {
        JobError::NotFound => unknown_task(id),
        other => McpError::internal_error(format!("vidforge internal error: {other}"), None),
    }
}

impl McpExtension for ConformanceExtension {
    fn capabilities(&self) -> Value {
        json!({
            "prompts": { "listChanged": true },
            "completions": {},
            "logging": {},
        })
    }

    fn tools(&self) -> Vec<Value> {
        self.fixtures.tools()
    }

    /// `test_trigger_tool_change` adds and removes a tool.
    fn tools_change(&self) -> bool {
        true
    }

    fn call_tool<'a>(&'a self, call: ToolCall<'a>) -> BoxFuture<'a, Option<ToolResult>> {
        Box::pin(async move {
            self.fixtures
                .call(
                    &self.jobs,
                    call.principal,
                    call.request,
                    call.declared,
                    call.ctx,
                )
                .await
        })
    }

    fn prompts(&self) -> Option<Vec<Value>> {
        Some(self.fixtures.prompts())
    }

    fn get_prompt(
        &self,
        request: &GetPromptRequestParams,
    ) -> Option<Result<GetPromptResponse, McpError>> {
        let listed = self
            .fixtures
            .prompts()
            .iter()
            .any(|p| p["name"] == request.name.as_str());
        listed.then(|| self.fixtures.get_prompt(request))
    }

    fn complete(&self, reference: &Value, argument: &str, value: &str) -> Option<Value> {
        Some(self.fixtures.complete(reference, argument, value))
    }

    fn resources(&self) -> Vec<Value> {
        self.fixtures.resources()
    }

    fn resource_templates(&self) -> Vec<Value> {
        self.fixtures.resource_templates()
    }

    fn read_resource(&self, uri: &str) -> Option<Value> {
        self.fixtures.read(uri)
    }

    fn owns_task(&self, task_id: &str) -> bool {
        Jobs::is_job_id(task_id)
    }

    fn get_task(&self, principal: &str, task_id: &str) -> Result<Value, McpError> {
        let rec = self
            .jobs
            .get(principal, task_id)
            .map_err(|e| job_error(task_id, e))?;
        Ok(self.jobs.detailed(&rec))
    }

    fn update_task<'a>(
        &'a self,
        principal: &'a str,
        task_id: &'a str,
        responses: &'a InputResponses,
    ) -> BoxFuture<'a, Result<(), McpError>> {
        Box::pin(async move {
            let rec = self
                .jobs
                .get(principal, task_id)
                .map_err(|e| job_error(task_id, e))?;
            // Answers to outstanding requests must fit the request; other keys are ignored.
            for (key, response) in responses {
                if let Some(asked) = rec.input_requests.get(key)
                    && let Err(reason) = wire::check_input_response(
                        asked["method"].as_str().unwrap_or_default(),
                        response,
                    )
                {
                    return Err(McpError::new(
                        RpcCode::INVALID_PARAMS,
                        format!("inputResponses.{key}: {reason}"),
                        Some(json!({ "taskId": task_id, "key": key })),
                    ));
                }
            }
            let answers = responses.clone().into_iter().collect();
            self.jobs
                .answer(principal, task_id, answers)
                .await
                .map(|_| ())
                .map_err(|e| job_error(task_id, e))
        })
    }

    fn cancel_task<'a>(
        &'a self,
        principal: &'a str,
        task_id: &'a str,
    ) -> BoxFuture<'a, Result<(), McpError>> {
        Box::pin(async move {
            self.jobs
                .cancel(principal, task_id)
                .await
                .map(|_| ())
                .map_err(|e| job_error(task_id, e))
        })
    }
}
