//! `mur call-member NAME TEXT`: a message to a member this capsule's formation wiring lets it
//! call, waited on until its task settles (`crate::peers::member`).
//!
//! Request `{"member": "…", "text": "…", "timeout_secs"?: N}`. Answer `200` with the call's
//! outcome whatever its status — `{"member", "status", "task_id", "context_id", "answer"}` on
//! `completed`, `"reason"` instead of `"answer"` otherwise — or a refusal before any call:
//! 404 `not_a_member` (a capsule launched alone) or `unknown_member` (naming the members it may
//! call), 409 `task_not_running` / `task_ending`.

use bytes::Bytes;
use hyper::StatusCode;
use serde_json::{Map, Value};

use super::{bad_request, lost_call, refused, text, wait_within};
use crate::door::{json_response, plain_error, Door, HttpResponse};
use crate::ids::TaskId;
use crate::peers::member;
use crate::trace::{Tool, TraceEvent};

pub async fn handle(door: &Door, task: TaskId, body: &Map<String, Value>) -> HttpResponse {
    let (Some(name), Some(message)) = (text(body, "member"), text(body, "text")) else {
        return bad_request("call-member takes a non-empty member and a non-empty text");
    };
    let within = match wait_within(body) {
        Ok(w) => w,
        Err(why) => return bad_request(&why),
    };
    let session = door.session.clone();
    session.trace.event(TraceEvent::ToolCall {
        task_id: task.clone(),
        call: Tool::CallMember {
            member: name.clone(),
        },
    });
    let Some(wiring) = &session.wiring else {
        return plain_error(
            StatusCode::NOT_FOUND,
            "not_a_member",
            "this capsule was launched alone, not as a formation member, so it has no members to call",
        );
    };
    let Some(callee) = wiring.callees.get(&name).cloned() else {
        let names: Vec<&str> = wiring.callees.keys().map(String::as_str).collect();
        let may = match names.is_empty() {
            true => "it may call no member".to_owned(),
            false => format!("it may call {}", names.join(", ")),
        };
        return plain_error(
            StatusCode::NOT_FOUND,
            "unknown_member",
            &format!(
                "{name} is not a member {} may call in formation {}; {may}",
                wiring.member, wiring.formation
            ),
        );
    };
    let ticket = match session.errands.begin(&task) {
        Ok(t) => t,
        Err(r) => return refused(r),
    };
    // On a task of its own: a helper that goes away cannot cut the call short of its record,
    // nor leave the member's task running.
    let calling = tokio::spawn(async move {
        member::call(&session, &task, &name, &callee, &message, within, ticket).await
    });
    match calling.await {
        Ok(called) => json_response(
            StatusCode::OK,
            Bytes::from(called.to_json().to_string()),
            None,
        ),
        Err(_) => lost_call(),
    }
}
