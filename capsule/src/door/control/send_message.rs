//! `mur send-message URL TEXT`: a message to a door the allow list names, waited on until its
//! task settles (`crate::peers::send`).
//!
//! Request `{"url": "…", "text": "…", "context_id"?: "…", "task_id"?: "…", "timeout_secs"?: N}`.
//! Answer `200 {"task": <the peer's task as it settled>}`, or a refusal: 403 `not_allowed` (the
//! allow list; nothing was sent), 502 `peer_refused` / `peer_unreachable`, 504 `timed_out`,
//! 409 `task_stopped`, `task_not_running`, `task_ending`.

use bytes::Bytes;
use hyper::StatusCode;
use serde_json::{json, Map, Value};

use super::{bad_request, lost_call, optional_text, refused, text, wait_within};
use crate::door::{json_response, plain_error, Door, HttpResponse};
use crate::ids::TaskId;
use crate::peers::send::{self, NotDelivered, Outbound};
use crate::trace::{Tool, TraceEvent};

pub async fn handle(door: &Door, task: TaskId, body: &Map<String, Value>) -> HttpResponse {
    let (Some(url), Some(message)) = (text(body, "url"), text(body, "text")) else {
        return bad_request("send-message takes a non-empty url and a non-empty text");
    };
    let (context_id, task_id, within) = match (
        optional_text(body, "context_id"),
        optional_text(body, "task_id"),
        wait_within(body),
    ) {
        (Ok(c), Ok(t), Ok(w)) => (c, t, w),
        (Err(why), ..) | (_, Err(why), _) | (.., Err(why)) => return bad_request(&why),
    };
    let session = door.session.clone();
    session.trace.event(TraceEvent::ToolCall {
        task_id: task.clone(),
        call: Tool::SendMessage {
            destination: crate::policy::shown(&url),
        },
    });
    let ticket = match session.errands.begin(&task) {
        Ok(t) => t,
        Err(r) => return refused(r),
    };
    // On a task of its own: a helper that goes away cannot cut the call short of its record.
    let sending = tokio::spawn(async move {
        let out = Outbound {
            url: &url,
            text: &message,
            context_id: context_id.as_deref(),
            task_id: task_id.as_deref(),
            within,
        };
        send::send(&session, &task, out, ticket).await
    });
    match sending.await {
        Ok(Ok(settled)) => json_response(
            StatusCode::OK,
            Bytes::from(json!({ "task": settled }).to_string()),
            None,
        ),
        Ok(Err(not)) => {
            let status = match &not {
                NotDelivered::NotAllowed(_) => StatusCode::FORBIDDEN,
                NotDelivered::Refused(_) | NotDelivered::Unreachable(_) => StatusCode::BAD_GATEWAY,
                NotDelivered::TimedOut(_) => StatusCode::GATEWAY_TIMEOUT,
                NotDelivered::Stopped(_) => StatusCode::CONFLICT,
            };
            plain_error(status, not.code(), not.message())
        }
        Err(_) => lost_call(),
    }
}
