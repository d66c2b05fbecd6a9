//! One file per door method. Each turns its params into a typed request (`parse`) and applies it
//! to the session (`apply`), as mini-redis does with its commands.

mod cancel_task;
mod get_task;
mod list_tasks;
mod send_message;
mod send_streaming_message;
mod stop_session;
mod subscribe_to_task;
mod watch_session;

use serde_json::{Map, Value};

use super::check::Inbound;
use super::error::RpcError;
use super::method::Method;
use super::{Answer, Door};

pub async fn apply(door: &Door, req: &Inbound) -> Answer {
    let outcome = match req.method {
        Some(Method::SendMessage) => send_message::apply(door, req).await,
        Some(Method::GetTask) => get_task::apply(door, req),
        Some(Method::ListTasks) => list_tasks::apply(door, req),
        Some(Method::CancelTask) => cancel_task::apply(door, req).await,
        Some(Method::GetExtendedAgentCard) => Ok(Answer::Result(door.extended_card(), None)),
        Some(Method::StopSession) => stop_session::apply(door).await,
        Some(Method::SendStreamingMessage) => send_streaming_message::apply(door, req),
        Some(Method::SubscribeToTask) => subscribe_to_task::apply(door, req),
        Some(Method::WatchSession) => Ok(watch_session::apply(door, req)),
        // Step 10 lets through only what this door serves; the rest never reach here.
        _ => Err(RpcError::MethodNotFound),
    };
    match outcome {
        Ok(answer) => answer,
        Err(e) => Answer::Error(e),
    }
}

/// The stream extension is active: the request's A2A-Extensions names its URI.
fn stream_extension_requested(req: &Inbound) -> bool {
    req.headers
        .get_all("a2a-extensions")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|uri| uri.trim() == crate::door::STREAM_URI)
}

/// The Last-Event-ID a reconnecting client sends.
fn last_event_id(req: &Inbound) -> Option<u64> {
    req.headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// `params.id` of GetTask, CancelTask and SubscribeToTask: a non-empty string.
fn required_id(params: &Map<String, Value>, method: Method) -> Result<String, RpcError> {
    match params.get("id") {
        Some(Value::String(id)) if !id.is_empty() => Ok(id.clone()),
        _ => Err(RpcError::InvalidParams(format!(
            "{} requires an id",
            method.name()
        ))),
    }
}
