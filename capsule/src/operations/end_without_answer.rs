//! end-without-answer: the task ends TASK_STATE_FAILED with the reason as its status message
//! and `metadata.murmur.noAnswer: true` (agent-card.md "Task metadata"), whatever its agent
//! does next. Member calls still in flight are canceled.

use super::Refusal;
use crate::ids::TaskId;
use crate::session::Session;
use crate::trace::{Tool, TraceEvent};

/// What the agent is told: it reads it as the operation's answer.
pub const TOLD: &str = "the task ends without an answer (TASK_STATE_FAILED); exit now";

/// Marks the task's ending, or refuses: 409 `task_not_running` / `task_ending`.
pub fn end_without_answer(session: &Session, task: &TaskId, reason: String) -> Result<(), Refusal> {
    let span = super::tool_span(session, task, "end-without-answer");
    let outcome = run(session, task, reason);
    super::end_tool(session, span, &outcome);
    outcome
}

fn run(session: &Session, task: &TaskId, reason: String) -> Result<(), Refusal> {
    session.trace.event(TraceEvent::ToolCall {
        task_id: task.clone(),
        call: Tool::EndWithoutAnswer {
            reason: reason.clone(),
        },
    });
    session
        .errands
        .end_without_answer(task, reason)
        .map_err(Refusal::errands)
}
