//! The SERVER span of each JSON-RPC request the door answers (docs/telemetry.md): named after
//! the method, continuing the caller's `traceparent`, with the task it answered about. A method
//! that starts a task (SendMessage, SendStreamingMessage) is always spanned and written to the
//! trace, since its task's attempt runs under it; the others only when a collector is
//! configured. A poll (GetTask, ListTasks) is spanned only inside a trace: one that carries no
//! `traceparent` would be a trace of one span, at the door's busiest path.

use hyper::HeaderMap;
use serde_json::{Map, Value};

use super::method::Method;
use super::Answer;
use crate::tasks::TaskState;
use crate::telemetry::{self, keys, Kind, Span};

/// The span of a request for `method` with these headers and params, when it gets one.
pub fn open(
    method: Option<Method>,
    headers: &HeaderMap,
    params: &Map<String, Value>,
) -> Option<Span> {
    let method = method?;
    let starts_tasks = matches!(method, Method::SendMessage | Method::SendStreamingMessage);
    if !starts_tasks && !telemetry::exporting() {
        return None;
    }
    let parent = telemetry::propagation::extract(headers);
    if parent.is_none() && matches!(method, Method::GetTask | Method::ListTasks) {
        return None;
    }
    let mut span = Span::start(method.name(), Kind::Server, parent.as_ref());
    if !starts_tasks {
        span = span.export_only();
    }
    span.set(keys::A2A_METHOD, method.name());
    span.set(keys::A2A_VERSION, "1.0");
    if let Some(Value::String(id)) = params.get("id") {
        span.set(keys::A2A_TASK, id.clone());
    }
    Some(span)
}

/// Closes `span` with what `answer` says of its task, or its error. Only a message that took a
/// task (or answered one) is written to the trace: a refusal writes no trace record, as
/// before, so a caller cannot fill the file with refused requests; it is still exported.
pub fn close(mut span: Span, answer: &Answer, trace: &crate::trace::Trace) {
    let took = match answer {
        Answer::Result(v, _) => {
            v.get("task").unwrap_or(v)["status"]["state"] != "TASK_STATE_REJECTED"
        }
        Answer::Stream(..) => true,
        Answer::Text(..) | Answer::Error(_) => false,
    };
    if !took {
        span = span.export_only();
    }
    match answer {
        Answer::Result(v, _) => {
            let task = v.get("task").unwrap_or(v);
            if let Some(id) = task.get("id").and_then(Value::as_str) {
                span.set(keys::A2A_TASK, id.to_owned());
            }
            if let Some(ctx) = task.get("contextId").and_then(Value::as_str) {
                span.set(keys::CONVERSATION, ctx.to_owned());
            }
            if let Some(state) = task["status"]["state"]
                .as_str()
                .and_then(TaskState::from_wire)
            {
                span.set(keys::A2A_STATE, state.wire());
            }
        }
        Answer::Text(text, _) => {
            if let Some(state) = state_in(text) {
                span.set(keys::A2A_STATE, state);
            }
        }
        Answer::Error(e) => span.fail(
            error_type(e.code()),
            e.to_json()["message"].as_str().unwrap_or_default(),
        ),
        Answer::Stream(..) => {}
    }
    span.end(trace);
}

/// The door span of a sub-capsule's completion, which the door answers among its checks (the
/// acknowledgement) rather than as a method: a SendMessage continuing the completion's
/// `traceparent` (the delegating span), naming the delegation and the task it was delivered to.
pub fn completion(headers: &HeaderMap, delegation: &str, task: &str, trace: &crate::trace::Trace) {
    let parent = telemetry::propagation::extract(headers);
    let mut span = Span::start(Method::SendMessage.name(), Kind::Server, parent.as_ref());
    span.set(keys::A2A_METHOD, Method::SendMessage.name());
    span.set(keys::A2A_VERSION, "1.0");
    span.set(keys::ORIGIN, "completion");
    span.set(keys::DELEGATION, delegation.to_owned());
    span.set(keys::A2A_TASK, task.to_owned());
    span.end(trace);
}

/// The JSON-RPC code as the conventions' `error.type`.
fn error_type(code: i64) -> &'static str {
    const CODES: [(i64, &str); 13] = [
        (-32700, "-32700"),
        (-32600, "-32600"),
        (-32601, "-32601"),
        (-32602, "-32602"),
        (-32603, "-32603"),
        (-32001, "-32001"),
        (-32002, "-32002"),
        (-32003, "-32003"),
        (-32004, "-32004"),
        (-32005, "-32005"),
        (-32009, "-32009"),
        (-31001, "-31001"),
        (-31002, "-31002"),
    ];
    CODES
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, w)| *w)
        .unwrap_or("_OTHER")
}

/// The first task state a rendered task names (GetTask's answer is text, not a value).
fn state_in(text: &[u8]) -> Option<&'static str> {
    const KEY: &[u8] = b"\"state\":\"";
    let at = memchr::memmem::find(text, KEY)? + KEY.len();
    let len = memchr::memchr(b'"', &text[at..])?;
    let state = std::str::from_utf8(&text[at..at + len]).ok()?;
    TaskState::from_wire(state).map(TaskState::wire)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rendered_task_names_its_state() {
        let text = br#"{"id":"tsk_1","contextId":"ctx_1","status":{"state":"TASK_STATE_WORKING"}}"#;
        assert_eq!(state_in(text), Some("TASK_STATE_WORKING"));
        assert_eq!(state_in(br#"{"status":{"state":"NOT_A_STATE"}}"#), None);
        assert_eq!(state_in(b"{}"), None);
    }

    #[test]
    fn every_door_error_code_has_its_error_type() {
        assert_eq!(error_type(-32001), "-32001");
        assert_eq!(error_type(1), "_OTHER");
    }
}
