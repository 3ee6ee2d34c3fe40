//! `tasks/get`, `tasks/update` and `tasks/cancel` for renders (and for the tasks a mounted
//! extension owns).

use rmcp::model::{
    CancelTaskParams, ErrorCode as RpcCode, GetTaskParams, GetTaskResult, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};

use vidforge_core::error::ServiceError;
use vidforge_core::store::{RenderRecord, RenderState};

use super::presentation::{Elicitation, to_value};
use super::wire;

use super::declared::declared;
use super::request::*;

impl VidforgeMcp {
    pub(super) async fn task_get(
        &self,
        request: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let principal = principal(&ctx)?;
        let declared = declared(&ctx);
        if let Some(owner) = self.shared.extensions.task_owner(&request.task_id) {
            let mut detailed = owner.get_task(&principal, &request.task_id)?;
            detailed["resultType"] = json!("complete");
            return from_json(detailed);
        }
        let rec = self.task_record(&principal, &request.task_id)?;
        Ok(GetTaskResult::new(
            self.shared
                .presenter
                .detailed_task(&rec, declared.elicitation()),
        ))
    }

    pub(super) async fn task_update(
        &self,
        request: UpdateTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let principal = principal(&ctx)?;
        let id = request.task_id.clone();
        if let Some(owner) = self.shared.extensions.task_owner(&id) {
            return owner
                .update_task(&principal, &id, &request.input_responses)
                .await;
        }
        let rec = self.task_record(&principal, &id)?;
        // The form's answer decides; the page's (URL mode) only when it declines. Responses
        // to keys that are not outstanding are ignored.
        let responses = &request.input_responses;
        let read = if let Some(r) = responses.get(wire::APPROVAL_INPUT_KEY) {
            super::args::approval_from_elicitation(r)
        } else if let Some(r) = responses.get(wire::APPROVAL_PAGE_INPUT_KEY) {
            super::args::approval_from_page_elicitation(r)
        } else {
            return Ok(());
        };
        let decision = match read {
            Ok(Some(decision)) => decision,
            // `cancel` (or the page accepted): nothing decided yet; keep waiting.
            Ok(None) => return Ok(()),
            Err(env) => {
                return Err(McpError::new(
                    RpcCode::INVALID_PARAMS,
                    env.message.clone(),
                    Some(env.to_jsonrpc_data()),
                ));
            }
        };
        if rec.state != RenderState::AwaitingApproval
            && rec
                .approval
                .as_ref()
                .and_then(|a| a.decision.as_ref())
                .is_none()
        {
            // Nothing outstanding: the response answers no current input request.
            return Ok(());
        }
        match self
            .shared
            .service
            .decide_approval(&principal, &id, decision.0, decision.1)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => {
                let env = service_envelope(&e, Some(&id));
                Err(McpError::new(
                    RpcCode::INVALID_PARAMS,
                    env.message.clone(),
                    Some(env.to_jsonrpc_data()),
                ))
            }
        }
    }

    pub(super) async fn task_cancel(
        &self,
        request: CancelTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let principal = principal(&ctx)?;
        if let Some(owner) = self.shared.extensions.task_owner(&request.task_id) {
            return owner.cancel_task(&principal, &request.task_id).await;
        }
        self.task_record(&principal, &request.task_id)?;
        self.shared
            .service
            .cancel(&principal, &request.task_id)
            .await
            .map(|_| ())
            .map_err(service_fault)
    }

    /// Resolves a render for a task method: unknown and other principals' ids are the same
    /// `-32602`; an id past its task TTL is `-32602` with the `task_expired` envelope.
    pub(super) fn task_record(&self, principal: &str, id: &str) -> Result<RenderRecord, McpError> {
        let service = &self.shared.service;
        let rec = match service.get(principal, id) {
            Ok(rec) => rec,
            Err(ServiceError::NotFound) => return Err(invalid_params_unknown_task(id)),
            Err(e) => return Err(service_fault(e)),
        };
        if service.task_expired(&rec) {
            let env = self
                .shared
                .presenter
                .task_expired(&rec, service.task_expires_at(&rec));
            return Err(McpError::new(
                RpcCode::INVALID_PARAMS,
                "Unknown or expired task.",
                Some(env.to_jsonrpc_data()),
            ));
        }
        Ok(rec)
    }

    /// The `DetailedTask` of a render (or an extension's task) the principal owns, as wire
    /// JSON for task notifications.
    pub(super) fn detailed_any(
        &self,
        principal: &str,
        id: &str,
        modes: Elicitation,
    ) -> Option<Value> {
        if let Some(owner) = self.shared.extensions.task_owner(id) {
            return owner.get_task(principal, id).ok();
        }
        let rec = self.shared.service.get(principal, id).ok()?;
        Some(to_value(&self.shared.presenter.detailed_task(&rec, modes)))
    }
}
