//! Every error the door answers: the standard JSON-RPC ones (no data), the A2A ones (one
//! `google.rpc.ErrorInfo` in `error.data`), murmur's completion errors, and the HTTP refusals of
//! steps 2–5. Codes, reasons and domains live in the table below and nowhere else.

use serde_json::{json, Map, Value};

use crate::tasks::TaskState;

/// An error answered inside a JSON-RPC envelope.
#[derive(Debug, Clone, PartialEq)]
pub enum RpcError {
    ParseError,
    InvalidRequest,
    MethodNotFound,
    /// -32602, with the sentence naming the parameter.
    InvalidParams(String),
    Internal(String),
    TaskNotFound(String),
    TaskNotCancelable(String, TaskState),
    PushNotSupported,
    /// -32004 with its sentence and metadata (`{}` when none).
    Unsupported(String, Vec<(&'static str, String)>),
    /// -32005: the first refused part's index, and its mediaType when it declared one.
    ContentType(String, usize, Option<String>),
    VersionNotSupported(String),
    CompletionMisaddressed(String),
    CompletionNotAwaited(String, Option<String>),
}

const A2A: &str = "a2a-protocol.org";
const MURMUR: &str = "murmur.nexus";

/// `(code, reason, domain)` of every error that carries an ErrorInfo.
const INFO: [(i64, &str, &str); 8] = [
    (-32001, "TASK_NOT_FOUND", A2A),
    (-32002, "TASK_NOT_CANCELABLE", A2A),
    (-32003, "PUSH_NOTIFICATION_NOT_SUPPORTED", A2A),
    (-32004, "UNSUPPORTED_OPERATION", A2A),
    (-32005, "CONTENT_TYPE_NOT_SUPPORTED", A2A),
    (-32009, "VERSION_NOT_SUPPORTED", A2A),
    (-31001, "COMPLETION_MISADDRESSED", MURMUR),
    (-31002, "COMPLETION_NOT_AWAITED", MURMUR),
];

impl RpcError {
    pub fn code(&self) -> i64 {
        match self {
            RpcError::ParseError => -32700,
            RpcError::InvalidRequest => -32600,
            RpcError::MethodNotFound => -32601,
            RpcError::InvalidParams(_) => -32602,
            RpcError::Internal(_) => -32603,
            RpcError::TaskNotFound(_) => -32001,
            RpcError::TaskNotCancelable(..) => -32002,
            RpcError::PushNotSupported => -32003,
            RpcError::Unsupported(..) => -32004,
            RpcError::ContentType(..) => -32005,
            RpcError::VersionNotSupported(_) => -32009,
            RpcError::CompletionMisaddressed(_) => -31001,
            RpcError::CompletionNotAwaited(..) => -31002,
        }
    }

    pub fn message(&self) -> String {
        match self {
            RpcError::ParseError => "Invalid JSON payload".into(),
            RpcError::InvalidRequest => "Request payload validation error".into(),
            RpcError::MethodNotFound => "Method not found".into(),
            RpcError::InvalidParams(m) | RpcError::Internal(m) => m.clone(),
            RpcError::TaskNotFound(_) => "Task not found".into(),
            RpcError::TaskNotCancelable(_, state) => {
                format!("Task cannot be canceled: it is already {}", state.wire())
            }
            RpcError::PushNotSupported => {
                "push notifications are not supported by this agent".into()
            }
            RpcError::Unsupported(m, _) | RpcError::ContentType(m, ..) => m.clone(),
            RpcError::VersionNotSupported(v) => {
                format!("A2A version '{v}' is not supported; this agent speaks 1.0")
            }
            RpcError::CompletionMisaddressed(_) => {
                "this completion is addressed to another session".into()
            }
            RpcError::CompletionNotAwaited(m, _) => m.clone(),
        }
    }

    fn metadata(&self) -> Map<String, Value> {
        let pairs: Vec<(&str, String)> = match self {
            RpcError::TaskNotFound(id) => vec![("taskId", id.clone())],
            RpcError::TaskNotCancelable(id, state) => {
                vec![("taskId", id.clone()), ("state", state.wire().into())]
            }
            RpcError::Unsupported(_, meta) => meta.clone(),
            RpcError::ContentType(_, index, media) => {
                let mut m = vec![("partIndex", index.to_string())];
                if let Some(media) = media {
                    m.push(("mediaType", media.clone()));
                }
                m
            }
            RpcError::VersionNotSupported(v) => {
                vec![
                    ("requestedVersion", v.clone()),
                    ("supportedVersions", "1.0".into()),
                ]
            }
            RpcError::CompletionMisaddressed(s) => vec![("addressedSession", s.clone())],
            RpcError::CompletionNotAwaited(_, Some(d)) => vec![("delegationId", d.clone())],
            _ => vec![],
        };
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_owned(), Value::from(v)))
            .collect()
    }

    /// The `error` member of the response.
    pub fn to_json(&self) -> Value {
        let code = self.code();
        let mut error = Map::new();
        error.insert("code".into(), Value::from(code));
        error.insert("message".into(), Value::from(self.message()));
        if let Some((_, reason, domain)) = INFO.iter().find(|(c, _, _)| *c == code) {
            error.insert(
                "data".into(),
                json!([{
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": reason,
                    "domain": domain,
                    "metadata": Value::Object(self.metadata()),
                }]),
            );
        }
        Value::Object(error)
    }
}

/// A refusal at steps 2–5 and 11, or of a body the door will not read: an HTTP status and a
/// plain JSON body, never an envelope. The token table makes the step 2 and 11 ones.
pub use crate::refusal::HttpRefusal;

/// The refusals the door makes itself.
impl HttpRefusal {
    /// 403 peer_not_accepted: byte-identical for every request it refuses.
    pub fn peer_not_accepted() -> Self {
        HttpRefusal {
            status: 403,
            www_authenticate: None,
            error: "peer_not_accepted",
            message: "this capsule does not accept tasks from peer capsules; its manifest would need exports.peer_tasks.accept: true".into(),
        }
    }

    /// 413 for a body past what any message this door reads can need.
    pub fn too_large(limit: usize) -> Self {
        HttpRefusal {
            status: 413,
            www_authenticate: None,
            error: "payload_too_large",
            message: format!(
                "the request body is larger than this door reads ({limit} bytes); context.images sets the room images take"
            ),
        }
    }

    /// 408 for a body that did not arrive within the door's deadline.
    pub fn body_timeout(deadline: std::time::Duration) -> Self {
        HttpRefusal {
            status: 408,
            www_authenticate: None,
            error: "request_timeout",
            message: format!(
                "the request body did not arrive within {} s of its headers",
                deadline.as_secs()
            ),
        }
    }

    /// 408 for a body that stopped arriving: no byte for `idle`.
    pub fn body_idle(idle: std::time::Duration) -> Self {
        HttpRefusal {
            status: 408,
            www_authenticate: None,
            error: "request_timeout",
            message: format!(
                "no byte of the request body arrived for {} s; send the body as you send its headers",
                idle.as_secs()
            ),
        }
    }

    /// 503 for a large body while other requests' bodies hold the whole body budget.
    pub fn budget_spent(budget: usize) -> Self {
        HttpRefusal {
            status: 503,
            www_authenticate: None,
            error: "busy",
            message: format!(
                "this door is reading other large request bodies, {} MiB between them, all it holds at once; send this one again shortly",
                budget >> 20
            ),
        }
    }

    /// 400 for a body the connection failed to deliver (a length that does not match, a
    /// broken chunked encoding, a client that left).
    pub fn body_unreadable() -> Self {
        HttpRefusal {
            status: 400,
            www_authenticate: None,
            error: "bad_request",
            message: "the request body could not be read to its end".into(),
        }
    }

    /// 404 for anything but a POST / with a JSON body.
    pub fn not_found() -> Self {
        HttpRefusal {
            status: 404,
            www_authenticate: None,
            error: "not_found",
            message: "this door answers POST / with content-type: application/json and a JSON-RPC body, and GET /.well-known/agent-card.json".into(),
        }
    }
}

/// Why a request stops before its method runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    Http(HttpRefusal),
    /// A JSON-RPC error, with the id to echo (`null` when none is valid).
    Rpc(Value, RpcError),
    /// Not a refusal: a step that answers the request itself (step 9, an accepted completion)
    /// stops the checks the same way. The id to echo, and the result.
    Answered(Value, Value),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_errors_carry_no_data_and_a2a_errors_one_error_info() {
        assert!(RpcError::MethodNotFound.to_json().get("data").is_none());
        let e = RpcError::TaskNotCancelable("tsk_1".into(), TaskState::Completed).to_json();
        assert_eq!(
            e,
            json!({"code": -32002,
                   "message": "Task cannot be canceled: it is already TASK_STATE_COMPLETED",
                   "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                             "reason": "TASK_NOT_CANCELABLE", "domain": "a2a-protocol.org",
                             "metadata": {"taskId": "tsk_1", "state": "TASK_STATE_COMPLETED"}}]})
        );
        let p = RpcError::PushNotSupported.to_json();
        assert_eq!(p["data"][0]["metadata"], json!({}));
    }
}
