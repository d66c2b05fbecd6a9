//! `mur request-input QUESTION`: the task waits in TASK_STATE_INPUT_REQUIRED with a prompt
//! artifact until a message names it; the reply is the answer.
//!
//! Request `{"question": "…"}`; answer `200 {"reply": "…"}`, or 409 `task_not_working` /
//! `task_canceled` / `task_ending`.

use bytes::Bytes;
use hyper::StatusCode;
use serde_json::{json, Map, Value};

use super::{bad_request, refused, text};
use crate::door::{json_response, plain_error, Door, HttpResponse};
use crate::errands::Refused;
use crate::ids::TaskId;
use crate::trace::{Tool, TraceEvent};

pub async fn handle(door: &Door, task: TaskId, body: &Map<String, Value>) -> HttpResponse {
    let Some(question) = text(body, "question") else {
        return bad_request("request-input takes a non-empty question");
    };
    let session = &door.session;
    session.trace.event(TraceEvent::ToolCall {
        task_id: task.clone(),
        call: Tool::RequestInput {
            question: question.clone(),
        },
    });
    // A task ending without an answer waits for nothing, a reply included.
    if session.errands.is_ending(&task) {
        return refused(Refused::EndingWithoutAnswer);
    }
    let Some(waiter) = session.registry.request_input(&task, question) else {
        return plain_error(
            StatusCode::CONFLICT,
            "task_not_working",
            "the task is no longer working, so it cannot wait for input",
        );
    };
    match waiter.await {
        Ok(reply) => json_response(
            StatusCode::OK,
            Bytes::from(json!({ "reply": reply }).to_string()),
            None,
        ),
        Err(_) => plain_error(
            StatusCode::CONFLICT,
            "task_canceled",
            "the task was canceled while it waited for input",
        ),
    }
}
