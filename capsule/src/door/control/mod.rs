//! The control surface: where a harness's helper commands (`mur request-input`,
//! `mur send-message`, `mur call-member`, `mur delegate-task`, `mur end-without-answer`) reach
//! their own capsule (DESIGN §8). Authorized by the task's `MURMUR_TASK_TOKEN`, not by a door token (step 1): the
//! token names the task a helper acts for. One file per helper, each only reading its body and
//! calling the shared operation (`crate::operations`), which an http capsule's agent loop calls
//! too; every body is a JSON object, every refusal `{"error": <code>, "message": <sentence>}`.

mod call_member;
mod delegate_task;
mod end_without_answer;
mod request_input;
mod send_message;

use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use serde_json::{json, Value};

use super::{closing, plain_error, unread, Door, HttpResponse};
use crate::operations::args::{optional_text, text, wait_within};
use crate::operations::Refusal;

pub const PREFIX: &str = "/control/";
/// A helper's request: a question, a message, a reason. Its text comes from a command line,
/// which Linux caps at 128 KiB an argument, so 1 MiB is room to spare.
const BODY_LIMIT: usize = 1 << 20;

/// The helpers, by path.
#[derive(Clone, Copy)]
enum Helper {
    RequestInput,
    SendMessage,
    CallMember,
    DelegateTask,
    EndWithoutAnswer,
}

const HELPERS: [(&str, Helper); 5] = [
    ("/control/request-input", Helper::RequestInput),
    ("/control/send-message", Helper::SendMessage),
    ("/control/call-member", Helper::CallMember),
    ("/control/delegate-task", Helper::DelegateTask),
    ("/control/end-without-answer", Helper::EndWithoutAnswer),
];

pub async fn handle(door: &Door, req: Request<Incoming>) -> HttpResponse {
    let (head, body) = req.into_parts();
    let token = head
        .headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let Some(task) = token.and_then(|t| door.session.task_for_token(&t)) else {
        let refused = plain_error(
            StatusCode::UNAUTHORIZED,
            "invalid_token",
            "MURMUR_TASK_TOKEN is missing or belongs to no running task of this capsule",
        );
        return unread(refused, &head.headers, body);
    };
    let helper = HELPERS
        .iter()
        .find(|(path, _)| *path == head.uri.path())
        .map(|(_, h)| *h)
        .filter(|_| head.method == hyper::Method::POST);
    let Some(helper) = helper else {
        let refused = plain_error(StatusCode::NOT_FOUND, "not_found", "no such helper");
        return unread(refused, &head.headers, body);
    };
    let body = match Limited::new(body, BODY_LIMIT).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            let refused = plain_error(StatusCode::BAD_REQUEST, "bad_request", "body too large");
            return closing(refused);
        }
    };
    let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(&body) else {
        return bad_request("a helper's request is a JSON object");
    };
    match helper {
        Helper::RequestInput => request_input::handle(door, task, &body).await,
        Helper::SendMessage => send_message::handle(door, task, &body).await,
        Helper::CallMember => call_member::handle(door, task, &body).await,
        Helper::DelegateTask => delegate_task::handle(door, task, &body).await,
        Helper::EndWithoutAnswer => end_without_answer::handle(door, task, &body),
    }
}

fn bad_request(message: &str) -> HttpResponse {
    plain_error(StatusCode::BAD_REQUEST, "bad_request", message)
}

/// An operation's refusal as the control surface answers it.
fn refusal(r: Refusal) -> HttpResponse {
    let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    match r.hint {
        Some(hint) => {
            let body = json!({"error": r.code, "message": r.message, "hint": hint});
            super::json_response(status, bytes::Bytes::from(body.to_string()), None)
        }
        None => plain_error(status, r.code, &r.message),
    }
}

/// An operation's JSON answer, 200.
fn answer(value: Value) -> HttpResponse {
    super::json_response(StatusCode::OK, bytes::Bytes::from(value.to_string()), None)
}

/// An operation's outcome as the control surface answers it.
fn respond(outcome: Result<Value, Refusal>) -> HttpResponse {
    match outcome {
        Ok(v) => answer(v),
        Err(r) => refusal(r),
    }
}
