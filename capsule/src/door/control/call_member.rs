//! `mur call-member NAME TEXT`: reads the helper's request and runs
//! [`crate::operations::call_member`].
//!
//! Request `{"member": "…", "text": "…", "timeout_secs"?: N}`. Answer `200` with the call's
//! outcome whatever its status — `{"member", "status", "task_id", "context_id", "answer"}` on
//! `completed`, `"reason"` instead of `"answer"` otherwise — or a refusal before any call:
//! 404 `not_a_member` (a capsule launched alone) or `unknown_member` (naming the members it may
//! call), 409 `task_not_running` / `task_ending`.

use serde_json::{Map, Value};

use super::{bad_request, respond, text, wait_within};
use crate::door::{Door, HttpResponse};
use crate::ids::TaskId;
use crate::operations;

pub async fn handle(door: &Door, task: TaskId, body: &Map<String, Value>) -> HttpResponse {
    let (Some(name), Some(message)) = (text(body, "member"), text(body, "text")) else {
        return bad_request("call-member takes a non-empty member and a non-empty text");
    };
    let within = match wait_within(body) {
        Ok(w) => w,
        Err(why) => return bad_request(&why),
    };
    respond(operations::call_member(&door.session, &task, name, message, within).await)
}
