//! call-member: a message to a member this capsule's formation wiring lets it call, waited on
//! until its task settles (`crate::peers::member`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::Refusal;
use crate::ids::TaskId;
use crate::peers::member;
use crate::session::Session;
use crate::trace::{Tool, TraceEvent};

/// The call's outcome whatever its status — `{"member", "status", "task_id", "context_id",
/// "answer"}` on `completed`, `"reason"` instead of `"answer"` otherwise — or a refusal before
/// any call: 404 `not_a_member` / `unknown_member`, 409 `task_not_running` / `task_ending`.
pub async fn call_member(
    session: &Arc<Session>,
    task: &TaskId,
    name: String,
    message: String,
    within: Duration,
) -> Result<Value, Refusal> {
    super::traced(session, task, "call-member", |tool| {
        run(session, task, name, message, within, tool)
    })
    .await
}

async fn run(
    session: &Arc<Session>,
    task: &TaskId,
    name: String,
    message: String,
    within: Duration,
    tool: crate::telemetry::SpanContext,
) -> Result<Value, Refusal> {
    session.trace.event(TraceEvent::ToolCall {
        task_id: task.clone(),
        call: Tool::CallMember {
            member: name.clone(),
        },
    });
    let Some(wiring) = &session.wiring else {
        return Err(Refusal::new(
            404,
            "not_a_member",
            "this capsule was launched alone, not as a formation member, so it has no members to call",
        ));
    };
    let Some(callee) = wiring.callees.get(&name).cloned() else {
        let names: Vec<&str> = wiring.callees.keys().map(String::as_str).collect();
        let may = match names.is_empty() {
            true => "it may call no member".to_owned(),
            false => format!("it may call {}", names.join(", ")),
        };
        return Err(Refusal::new(
            404,
            "unknown_member",
            format!(
                "{name} is not a member {} may call in formation {}; {may}",
                wiring.member, wiring.formation
            ),
        ));
    };
    let ticket = session
        .errands
        .begin(task)
        .map_err(Refusal::errands)?
        .under(&tool);
    // On a task of its own: a caller that goes away cannot cut the call short of its record,
    // nor leave the member's task running.
    let (session, task) = (session.clone(), task.clone());
    let calling = tokio::spawn(async move {
        member::call(&session, &task, &name, &callee, &message, within, ticket).await
    });
    match calling.await {
        Ok(called) => Ok(called.to_json()),
        Err(_) => Err(Refusal::lost()),
    }
}
