//! send-message: a message to a door the allow list names, waited on until its task settles
//! (`crate::peers::send`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::Refusal;
use crate::ids::TaskId;
use crate::peers::send::{self, NotDelivered, Outbound};
use crate::session::Session;
use crate::trace::{Tool, TraceEvent};

/// What send-message is asked.
pub struct SendArgs {
    pub url: String,
    pub text: String,
    pub context_id: Option<String>,
    pub task_id: Option<String>,
    pub within: Duration,
}

/// `{"task": <the peer's task as it settled>}`, or a refusal: 403 `not_allowed` (the allow
/// list; nothing was sent), 502 `peer_refused` / `peer_unreachable`, 504 `timed_out`, 409
/// `task_stopped`, `task_not_running`, `task_ending`.
pub async fn send_message(
    session: &Arc<Session>,
    task: &TaskId,
    args: SendArgs,
) -> Result<Value, Refusal> {
    super::traced(session, task, "send-message", |tool| {
        run(session, task, args, tool)
    })
    .await
}

async fn run(
    session: &Arc<Session>,
    task: &TaskId,
    args: SendArgs,
    tool: crate::telemetry::SpanContext,
) -> Result<Value, Refusal> {
    session.trace.event(TraceEvent::ToolCall {
        task_id: task.clone(),
        call: Tool::SendMessage {
            destination: crate::policy::shown(&args.url),
        },
    });
    let ticket = session
        .errands
        .begin(task)
        .map_err(Refusal::errands)?
        .under(&tool);
    // On a task of its own: a caller that goes away cannot cut the call short of its record.
    let (session, task) = (session.clone(), task.clone());
    let sending = tokio::spawn(async move {
        let out = Outbound {
            url: &args.url,
            text: &args.text,
            context_id: args.context_id.as_deref(),
            task_id: args.task_id.as_deref(),
            within: args.within,
        };
        send::send(&session, &task, out, ticket).await
    });
    match sending.await {
        Ok(Ok(settled)) => Ok(json!({ "task": settled })),
        Ok(Err(not)) => {
            let status = match &not {
                NotDelivered::NotAllowed(_) => 403,
                NotDelivered::Refused(_)
                | NotDelivered::Unreachable(_)
                | NotDelivered::NoTls { .. } => 502,
                NotDelivered::TimedOut(_) => 504,
                NotDelivered::Stopped(_) => 409,
            };
            let refusal = Refusal::new(status, not.code(), not.message());
            Err(match not.hint() {
                Some(hint) => refusal.with_hint(hint),
                None => refusal,
            })
        }
        Err(_) => Err(Refusal::lost()),
    }
}
