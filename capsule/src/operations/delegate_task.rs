//! delegate-task: asks the supervisor to start a sub-capsule from one of
//! `capabilities.delegate.allow` with the text as its task, and waits for its completion
//! (`delegation`).

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use super::delegation::{self, Request};
use super::Refusal;
use crate::ids::TaskId;
use crate::manifest;
use crate::session::Session;
use crate::trace::{Tool, TraceEvent};

/// The delegation's outcome whatever its status — `{"delegation_id", "capsule", "status",
/// "child_session_id", "response"}` on `completed`, `"reason"` instead of `"response"`
/// otherwise — or a refusal before any child runs: 409 `delegation_unavailable` (no control
/// socket), 404 `unknown_capsule`, 502 `delegation_not_started`, 409 `task_not_running` /
/// `task_ending`.
pub async fn delegate_task(
    session: &Arc<Session>,
    task: &TaskId,
    capsule: String,
    message: String,
    within: std::time::Duration,
) -> Result<Value, Refusal> {
    super::traced(session, task, "delegate-task", |tool| {
        run(session, task, capsule, message, within, tool)
    })
    .await
}

async fn run(
    session: &Arc<Session>,
    task: &TaskId,
    capsule: String,
    message: String,
    within: std::time::Duration,
    tool: crate::telemetry::SpanContext,
) -> Result<Value, Refusal> {
    session.trace.event(TraceEvent::ToolCall {
        task_id: task.clone(),
        call: Tool::DelegateTask {
            capsule: capsule.clone(),
        },
    });
    let Some(link) = session.supervisor.clone() else {
        return Err(Refusal::new(
            409,
            "delegation_unavailable",
            "this capsule has no control socket to a supervisor, so it cannot start sub-capsules; run it with mur run",
        ));
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
        return Err(Refusal::new(
            404,
            "unknown_capsule",
            format!(
                "{capsule} is not a capsule {} may delegate to; {may}",
                session.manifest.name
            ),
        ));
    };
    // A sub-capsule exists for its launch task: one that takes none would never answer.
    if manifest::load(&manifest)
        .is_ok_and(|m| m.lifecycle.task_acceptance == manifest::TaskAcceptance::None)
    {
        return Err(Refusal::new(
            409,
            "capsule_takes_no_task",
            format!(
                "{capsule} sets lifecycle.task_acceptance: none in {}: it takes no task, so it could never answer one; set task_acceptance: single there",
                manifest.display()
            ),
        ));
    }
    let ticket = session
        .errands
        .begin(task)
        .map_err(Refusal::errands)?
        .under(&tool);
    // On a task of its own: a caller that goes away cannot cut the delegation short of its
    // records, nor leave the child running.
    let (session, task) = (session.clone(), task.clone());
    let delegating = tokio::spawn(async move {
        let req = Request {
            task: &task,
            capsule: &capsule,
            manifest,
            text: &message,
            within,
        };
        delegation::run(&session, &link, req, ticket).await
    });
    match delegating.await {
        Ok(Ok(delegated)) => Ok(delegated.to_json()),
        Ok(Err(not_started)) => Err(Refusal::new(
            502,
            "delegation_not_started",
            format!(
                "the supervisor did not start the sub-capsule: {}",
                not_started.0
            ),
        )),
        Err(_) => Err(Refusal::lost()),
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
