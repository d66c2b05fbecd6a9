//! `mur request-input QUESTION`: reads the helper's request and runs
//! [`crate::operations::request_input`], waiting as long as the task runs.
//!
//! Request `{"question": "…"}`; answer `200 {"reply": "…"}`, or 409 `task_not_working` /
//! `task_canceled` / `task_ending`.

use serde_json::{json, Map, Value};

use super::{answer, bad_request, refusal, text};
use crate::door::{Door, HttpResponse};
use crate::ids::TaskId;
use crate::operations;

pub async fn handle(door: &Door, task: TaskId, body: &Map<String, Value>) -> HttpResponse {
    let Some(question) = text(body, "question") else {
        return bad_request("request-input takes a non-empty question");
    };
    match operations::request_input(&door.session, &task, question, None).await {
        Ok(reply) => answer(json!({ "reply": reply })),
        Err(r) => refusal(r),
    }
}
