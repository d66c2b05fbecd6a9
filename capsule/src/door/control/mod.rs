//! The control surface: where a harness's helper commands (`mur request-input`, …) reach their
//! own capsule. Authorized by the task's `MURMUR_TASK_TOKEN`, not by a door token (step 1).

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use serde_json::{json, Value};

use super::{json_response, plain_error, Door, HttpResponse};
use crate::trace::{Tool, TraceEvent};

pub const PREFIX: &str = "/control/";
pub const REQUEST_INPUT: &str = "/control/request-input";
const BODY_LIMIT: usize = 1 << 20;

pub async fn handle(door: &Door, req: Request<Incoming>) -> HttpResponse {
    let token = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let Some(task) = token.and_then(|t| door.session.task_for_token(&t)) else {
        return plain_error(
            StatusCode::UNAUTHORIZED,
            "invalid_token",
            "MURMUR_TASK_TOKEN is missing or belongs to no running task of this capsule",
        );
    };
    if req.method() != hyper::Method::POST || req.uri().path() != REQUEST_INPUT {
        return plain_error(StatusCode::NOT_FOUND, "not_found", "no such helper");
    }
    let body = match Limited::new(req.into_body(), BODY_LIMIT).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return plain_error(StatusCode::BAD_REQUEST, "bad_request", "body too large"),
    };
    let question = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("question").and_then(Value::as_str).map(str::to_owned))
        .filter(|q| !q.trim().is_empty());
    let Some(question) = question else {
        return plain_error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "request-input takes a non-empty question",
        );
    };
    let session = &door.session;
    session.trace.event(TraceEvent::ToolCall {
        task_id: task.clone(),
        call: Tool::RequestInput {
            question: question.clone(),
        },
    });
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
