//! `mur delegate-task CAPSULE TEXT`: asks the supervisor to start a sub-capsule from one of
//! `capabilities.delegate.allow` with TEXT as its task, and waits for its completion
//! (`crate::delegation::delegate`).
//!
//! Request `{"capsule": "…", "text": "…"}`. Answer `200` with the delegation's outcome whatever
//! its status — `{"delegation_id", "capsule", "status", "child_session_id", "response"}` on
//! `completed`, `"reason"` instead of `"response"` otherwise (`canceled` when this task was
//! canceled and the child ended) — or a refusal before any child runs: 409
//! `delegation_unavailable` (no control socket), 404 `unknown_capsule` (naming the capsules it
//! may delegate to), 502 `delegation_not_started` (the supervisor's reason), 409
//! `task_not_running` / `task_ending`.

use std::path::PathBuf;

use bytes::Bytes;
use hyper::StatusCode;
use serde_json::{Map, Value};

use super::{bad_request, lost_call, refused, text};
use crate::delegation::delegate::{self, Request};
use crate::door::{json_response, plain_error, Door, HttpResponse};
use crate::ids::TaskId;
use crate::manifest;
use crate::trace::{Tool, TraceEvent};

pub async fn handle(door: &Door, task: TaskId, body: &Map<String, Value>) -> HttpResponse {
    let (Some(capsule), Some(message)) = (text(body, "capsule"), text(body, "text")) else {
        return bad_request("delegate-task takes a non-empty capsule and a non-empty text");
    };
    let session = door.session.clone();
    session.trace.event(TraceEvent::ToolCall {
        task_id: task.clone(),
        call: Tool::DelegateTask {
            capsule: capsule.clone(),
        },
    });
    let Some(link) = session.supervisor.clone() else {
        return plain_error(
            StatusCode::CONFLICT,
            "delegation_unavailable",
            "this capsule has no control socket to a supervisor, so it cannot start sub-capsules; run it with mur run",
        );
    };
    let allowed = allowed_capsules(&session.manifest.capabilities.delegate_allow);
    let Some(manifest) = allowed
        .iter()
        .find(|(name, _)| *name == capsule)
        .map(|(_, path)| path.clone())
    else {
        let names: Vec<&str> = allowed.iter().map(|(n, _)| n.as_str()).collect();
        let may = match names.is_empty() {
            true => "capabilities.delegate.allow names no capsule".to_owned(),
            false => format!("it may delegate to {}", names.join(", ")),
        };
        return plain_error(
            StatusCode::NOT_FOUND,
            "unknown_capsule",
            &format!(
                "{capsule} is not a capsule {} may delegate to; {may}",
                session.manifest.name
            ),
        );
    };
    let ticket = match session.errands.begin(&task) {
        Ok(t) => t,
        Err(r) => return refused(r),
    };
    // On a task of its own: a helper that goes away cannot cut the delegation short of its
    // records, nor leave the child running.
    let delegating = tokio::spawn(async move {
        let req = Request {
            task: &task,
            capsule: &capsule,
            manifest,
            text: &message,
        };
        delegate::run(&session, &link, req, ticket).await
    });
    match delegating.await {
        Ok(Ok(delegated)) => json_response(
            StatusCode::OK,
            Bytes::from(delegated.to_json().to_string()),
            None,
        ),
        Ok(Err(not_started)) => plain_error(
            StatusCode::BAD_GATEWAY,
            "delegation_not_started",
            &format!(
                "the supervisor did not start the sub-capsule: {}",
                not_started.0
            ),
        ),
        Err(_) => lost_call(),
    }
}

/// `(name, manifest)` of each manifest `capabilities.delegate.allow` lists, read now (they may
/// have changed since launch; the supervisor reads the same file). One that does not load is
/// left out: the supervisor could not start it either.
fn allowed_capsules(paths: &[PathBuf]) -> Vec<(String, PathBuf)> {
    paths
        .iter()
        .filter_map(|p| manifest::load(p).ok().map(|m| (m.name, p.clone())))
        .collect()
}
