//! `mur end-without-answer REASON`: reads the helper's request and runs
//! [`crate::operations::end_without_answer`]; the harness is told to exit, and is stopped if
//! it has not within the grace.
//!
//! Request `{"reason": "…"}`. Answer `200 {"ended": true, "message": "…"}`, or 409
//! `task_not_running` / `task_ending`.

use serde_json::{json, Map, Value};

use super::{answer, bad_request, refusal, text};
use crate::door::{Door, HttpResponse};
use crate::ids::TaskId;
use crate::operations::{self, TOLD};

pub fn handle(door: &Door, task: TaskId, body: &Map<String, Value>) -> HttpResponse {
    let Some(reason) = text(body, "reason") else {
        return bad_request("end-without-answer takes a non-empty reason");
    };
    match operations::end_without_answer(&door.session, &task, reason) {
        Ok(()) => answer(json!({"ended": true, "message": TOLD})),
        Err(r) => refusal(r),
    }
}
