//! `mur send-message URL TEXT`: reads the helper's request and runs
//! [`crate::operations::send_message`].
//!
//! Request `{"url": "…", "text": "…", "context_id"?: "…", "task_id"?: "…", "timeout_secs"?: N}`.
//! Answer `200 {"task": <the peer's task as it settled>}`, or a refusal: 403 `not_allowed` (the
//! allow list; nothing was sent), 502 `peer_refused` / `peer_unreachable`, 504 `timed_out`,
//! 409 `task_stopped`, `task_not_running`, `task_ending`.

use serde_json::{Map, Value};

use super::{bad_request, optional_text, respond, text, wait_within};
use crate::door::{Door, HttpResponse};
use crate::ids::TaskId;
use crate::operations::{self, SendArgs};

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
    let args = SendArgs {
        url,
        text: message,
        context_id,
        task_id,
        within,
    };
    respond(operations::send_message(&door.session, &task, args).await)
}
