//! `mur end-without-answer REASON`: the task ends TASK_STATE_FAILED with the reason as its
//! status message and `metadata.murmur.noAnswer: true` (agent-card.md "Task metadata"), however
//! its harness exits next. Member calls still in flight are canceled; the harness is told to
//! exit, and is stopped if it has not within the grace.
//!
//! Request `{"reason": "…"}`. Answer `200 {"ended": true, "message": "…"}`, or 409
//! `task_not_running` / `task_ending`.

use bytes::Bytes;
use hyper::StatusCode;
use serde_json::{json, Map, Value};

use super::{bad_request, refused, text};
use crate::door::{json_response, Door, HttpResponse};
use crate::ids::TaskId;
use crate::trace::{Tool, TraceEvent};

/// What the helper prints: the harness reads it as the helper's answer.
pub const TOLD: &str = "the task ends without an answer (TASK_STATE_FAILED); exit now";

pub fn handle(door: &Door, task: TaskId, body: &Map<String, Value>) -> HttpResponse {
    let Some(reason) = text(body, "reason") else {
        return bad_request("end-without-answer takes a non-empty reason");
    };
    let session = &door.session;
    session.trace.event(TraceEvent::ToolCall {
        task_id: task.clone(),
        call: Tool::EndWithoutAnswer {
            reason: reason.clone(),
        },
    });
    match session.errands.end_without_answer(&task, reason) {
        Ok(()) => json_response(
            StatusCode::OK,
            Bytes::from(json!({"ended": true, "message": TOLD}).to_string()),
            None,
        ),
        Err(r) => refused(r),
    }
}
