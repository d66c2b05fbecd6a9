//! request-input: the task waits in TASK_STATE_INPUT_REQUIRED with a prompt artifact until a
//! message names it; the reply is the answer. `within` bounds the wait (the http loop's tool
//! takes one; a harness helper waits as long as its task runs).

use std::time::Duration;

use super::Refusal;
use crate::errands::Refused;
use crate::ids::TaskId;
use crate::session::Session;
use crate::trace::{Tool, TraceEvent};

/// The reply, or a refusal: 409 `task_not_working` / `task_canceled` / `task_ending`, 504
/// `input_timed_out` when `within` passed first.
pub async fn request_input(
    session: &Session,
    task: &TaskId,
    question: String,
    within: Option<Duration>,
) -> Result<String, Refusal> {
    super::traced(session, task, "request-input", |_| {
        run(session, task, question, within)
    })
    .await
}

async fn run(
    session: &Session,
    task: &TaskId,
    question: String,
    within: Option<Duration>,
) -> Result<String, Refusal> {
    session.trace.event(TraceEvent::ToolCall {
        task_id: task.clone(),
        call: Tool::RequestInput {
            question: question.clone(),
        },
    });
    // A task ending without an answer waits for nothing, a reply included.
    if session.errands.is_ending(task) {
        return Err(Refusal::errands(Refused::EndingWithoutAnswer));
    }
    let Some(waiter) = session.registry.request_input(task, question) else {
        return Err(Refusal::new(
            409,
            "task_not_working",
            "the task is no longer working, so it cannot wait for input",
        ));
    };
    let canceled = || {
        Refusal::new(
            409,
            "task_canceled",
            "the task was canceled while it waited for input",
        )
    };
    match within {
        None => waiter.await.map_err(|_| canceled()),
        Some(bound) => match tokio::time::timeout(bound, waiter).await {
            Ok(reply) => reply.map_err(|_| canceled()),
            Err(_) => Err(Refusal::new(
                504,
                "input_timed_out",
                format!("no reply came within {} s", bound.as_secs()),
            )),
        },
    }
}
