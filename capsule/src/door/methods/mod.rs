//! One file per door method. Each turns its params into a typed request (`parse`) and applies it
//! to the session (`apply`), as mini-redis does with its commands.

mod cancel_task;
mod get_task;
mod list_tasks;
mod send_message;
mod stop_session;

use serde_json::{Map, Value};

use super::check::Inbound;
use super::error::RpcError;
use super::method::Method;
use super::{Answer, Door};

pub async fn apply(door: &Door, req: &Inbound) -> Answer {
    let outcome = match req.method {
        Some(Method::SendMessage) => send_message::apply(door, &req.params).await,
        Some(Method::GetTask) => get_task::apply(door, &req.params),
        Some(Method::ListTasks) => list_tasks::apply(door, &req.params),
        Some(Method::CancelTask) => cancel_task::apply(door, &req.params),
        Some(Method::StopSession) => stop_session::apply(door),
        // Streams arrive with the stream module; until then they answer as not served.
        _ => Err(RpcError::MethodNotFound),
    };
    match outcome {
        Ok(answer) => answer,
        Err(e) => Answer::Error(e),
    }
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
