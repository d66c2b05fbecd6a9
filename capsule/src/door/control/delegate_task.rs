//! `mur delegate-task CAPSULE TEXT`: reads the helper's request and runs
//! [`crate::operations::delegate_task`].
//!
//! Request `{"capsule": "…", "text": "…", "timeout_secs": N}` (`timeout_secs` optional: how long
//! to wait for the child's answer, as `call-member` takes it; past it the child is ended and the
//! status is `timed_out`). Answer `200` with the delegation's outcome whatever
//! its status — `{"delegation_id", "capsule", "status", "child_session_id", "response"}` on
//! `completed`, `"reason"` instead of `"response"` otherwise (`canceled` when this task was
//! canceled and the child ended) — or a refusal before any child runs: 409
//! `delegation_unavailable` (no control socket), 404 `unknown_capsule` (naming the capsules it
//! may delegate to), 502 `delegation_not_started` (the supervisor's reason), 409
//! `task_not_running` / `task_ending`.

use serde_json::{Map, Value};

use super::{bad_request, respond, text};
use crate::door::{Door, HttpResponse};
use crate::ids::TaskId;
use crate::operations;

pub async fn handle(door: &Door, task: TaskId, body: &Map<String, Value>) -> HttpResponse {
    let (Some(capsule), Some(message)) = (text(body, "capsule"), text(body, "text")) else {
        return bad_request("delegate-task takes a non-empty capsule and a non-empty text");
    };
    let within = match crate::operations::args::timeout(body) {
        Ok(w) => w.unwrap_or(std::time::Duration::from_secs(
            crate::peers::DEFAULT_WAIT_SECS,
        )),
        Err(why) => return bad_request(&why),
    };
    respond(operations::delegate_task(&door.session, &task, capsule, message, within).await)
}
