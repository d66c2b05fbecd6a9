//! One JSON-RPC call to another door: HTTP/1.1 over the policy's one connect (TLS to an
//! `https://` door), a fresh connection a call, bounded in time and in what it reads. Every request carries what a
//! capsule's runtime stamps on what it sends (agent-card.md "Runtime headers"): `A2A-Version:
//! 1.0`, `x-murmur-task-origin: peer`, `x-murmur-task-trust` with the class of the task it is
//! sent for, and, to a formation member, `Authorization: Bearer` with the `member:<self>` token.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1;
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

use crate::policy::{self, Allowed, Scheme};
use crate::provenance::{
    Trust, COMPLETION, COMPLETION_SESSION_HEADER, DELEGATION_HEADER, ORIGIN_HEADER, PEER,
    TRUST_HEADER,
};

/// How long a connection may take to open.
pub const CONNECT_WITHIN: Duration = Duration::from_secs(5);
/// How long one call may take from connect to its whole answer. Every call this capsule makes
/// is answered at once by a door (SendMessage with returnImmediately, GetTask, CancelTask), so
/// a door silent this long is treated as unreachable.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(30);
/// The largest answer read: a task with the largest response a harness gives (8 MiB), escaped,
/// fits. A larger answer is unreadable, and is not held.
pub const ANSWER_CAP: usize = 16 << 20;

/// What the runtime stamps on a request, besides `A2A-Version: 1.0` and the token.
enum Stamp {
    /// A message or call for one of this capsule's tasks: origin `peer` and its trust class.
    Peer(Trust),
    /// A sub-capsule's completion: origin `completion`, the parent's session, the delegation.
    Completion {
        session_id: String,
        delegation_id: String,
    },
}

/// A door this capsule may call: where (already allowed) and with which token.
pub struct PeerDoor {
    allowed: Allowed,
    /// `member:<self>`'s token on a formation member's door. A secret: never traced or logged,
    /// and not printed by `Debug`.
    token: Option<String>,
    /// `traceparent` (and `tracestate`) of the span the call is made under.
    trace: Vec<(&'static str, String)>,
}

impl fmt::Debug for PeerDoor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerDoor")
            .field("peer", &self.peer_url())
            .field("token", &self.token.as_ref().map(|_| "…"))
            .finish()
    }
}

/// Why a call has no result.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// No connection, or no whole answer on it within the bounds.
    Unreachable(String),
    /// No TLS to the peer: why, and what to check.
    Tls(crate::tls::TlsError),
    /// An HTTP refusal (401, 403 peer_not_accepted, 404, 413 …): its status, `error` code and
    /// sentence.
    Refused {
        status: u16,
        error: String,
        message: String,
    },
    /// A JSON-RPC error.
    Rpc { code: i64, message: String },
    /// An answer that is not a JSON-RPC response, or one past [`ANSWER_CAP`].
    Unreadable(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Unreachable(why) => write!(f, "{why}"),
            Failure::Tls(e) => write!(f, "{e}"),
            Failure::Refused {
                status,
                error,
                message,
            } => write!(f, "HTTP {status} {error}: {message}"),
            Failure::Rpc { code, message } => write!(f, "JSON-RPC error {code}: {message}"),
            Failure::Unreadable(why) => write!(f, "an unreadable answer: {why}"),
        }
    }
}

impl PeerDoor {
    pub fn new(allowed: Allowed, token: Option<String>) -> PeerDoor {
        PeerDoor {
            allowed,
            token,
            trace: Vec::new(),
        }
    }

    /// The same door, each request carrying `span` as its W3C parent.
    pub fn traced(mut self, span: &crate::telemetry::SpanContext) -> PeerDoor {
        self.trace = crate::telemetry::propagation::headers_of(span);
        self
    }

    /// `host:port`: how the trace names the door.
    pub fn peer_url(&self) -> String {
        self.allowed.target().authority()
    }

    /// One JSON-RPC call; answers its `result`.
    pub async fn call(&self, method: &str, params: Value, trust: Trust) -> Result<Value, Failure> {
        self.call_as(method, params, &Stamp::Peer(trust)).await
    }

    /// A sub-capsule's completion to its parent (`crate::delegation::completion`): a
    /// SendMessage stamped `completion`, naming the parent's session and the delegation.
    pub async fn complete(
        &self,
        params: Value,
        session_id: &str,
        delegation_id: &str,
    ) -> Result<Value, Failure> {
        let stamp = Stamp::Completion {
            session_id: session_id.to_owned(),
            delegation_id: delegation_id.to_owned(),
        };
        self.call_as("SendMessage", params, &stamp).await
    }

    async fn call_as(&self, method: &str, params: Value, stamp: &Stamp) -> Result<Value, Failure> {
        match tokio::time::timeout(ANSWER_WITHIN, self.exchange(method, params, stamp)).await {
            Ok(answer) => answer,
            Err(_) => Err(Failure::Unreachable(format!(
                "no answer within {} s",
                ANSWER_WITHIN.as_secs()
            ))),
        }
    }

    fn unreachable(&self, e: &dyn fmt::Display) -> Failure {
        // The peer's address is said once, by whoever reports the failure.
        Failure::Unreachable(e.to_string())
    }

    /// HTTP/1.1 over `io`, its connection driven until its one response is read (or dropped,
    /// the call given up).
    async fn handshake<T>(&self, io: T) -> Result<http1::SendRequest<Full<Bytes>>, Failure>
    where
        T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (sender, conn) = http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| self.unreachable(&e))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }

    /// Connects (through the allow list) and posts one JSON-RPC request; answers the response
    /// with its body unread. An `https://` door is spoken to over TLS (`crate::tls`), its
    /// certificate checked against its name.
    async fn post(
        &self,
        method: &str,
        params: Value,
        stamp: &Stamp,
    ) -> Result<hyper::Response<hyper::body::Incoming>, Failure> {
        let peer = self.peer_url();
        let stream = policy::dial(&self.allowed, CONNECT_WITHIN)
            .await
            .map_err(|e| self.unreachable(&e))?;
        let _ = stream.set_nodelay(true);
        let mut sender = match self.allowed.target().scheme() {
            Scheme::Http => self.handshake(stream).await?,
            Scheme::Https => {
                let host = self.allowed.target().host();
                let tls = tokio::time::timeout(CONNECT_WITHIN, crate::tls::connect(host, stream))
                    .await
                    .map_err(|_| self.unreachable(&"no TLS handshake within the connect bound"))?
                    .map_err(Failure::Tls)?;
                self.handshake(tls).await?
            }
        };
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut req = Request::post(self.allowed.target().path())
            .header(hyper::header::HOST, &peer)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header("a2a-version", "1.0");
        req = match stamp {
            Stamp::Peer(trust) => req
                .header(ORIGIN_HEADER, PEER)
                .header(TRUST_HEADER, trust.as_str()),
            Stamp::Completion {
                session_id,
                delegation_id,
            } => req
                .header(ORIGIN_HEADER, COMPLETION)
                .header(COMPLETION_SESSION_HEADER, session_id.as_str())
                .header(DELEGATION_HEADER, delegation_id.as_str()),
        };
        if let Some(token) = &self.token {
            req = req.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        for (name, value) in &self.trace {
            req = req.header(*name, value.as_str());
        }
        let req = req
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| Failure::Unreadable(format!("the request could not be built: {e}")))?;
        sender
            .send_request(req)
            .await
            .map_err(|e| self.unreachable(&e))
    }

    /// SubscribeToTask on task `id`: the task's events as they happen (see [`Events`]).
    pub async fn subscribe(&self, id: &str, trust: Trust) -> Result<Events, Failure> {
        let resp = tokio::time::timeout(
            ANSWER_WITHIN,
            self.post("SubscribeToTask", json!({"id": id}), &Stamp::Peer(trust)),
        )
        .await
        .map_err(|_| self.unreachable(&"no answer to SubscribeToTask"))??;
        let streams = resp
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if resp.status() != hyper::StatusCode::OK || !streams {
            return Err(Failure::Unreadable(
                "the peer answered SubscribeToTask with no stream".into(),
            ));
        }
        Ok(Events {
            body: resp.into_body(),
            pending: Vec::new(),
        })
    }

    async fn exchange(&self, method: &str, params: Value, stamp: &Stamp) -> Result<Value, Failure> {
        let unreachable = |e: &dyn fmt::Display| Failure::Unreachable(e.to_string());
        let resp = self.post(method, params, stamp).await?;
        let status = resp.status().as_u16();
        let bytes = match Limited::new(resp.into_body(), ANSWER_CAP).collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                return Err(Failure::Unreadable(format!(
                    "the peer answered more than {} MiB",
                    ANSWER_CAP >> 20
                )))
            }
            Err(e) => return Err(unreachable(&e)),
        };
        read_answer(status, &bytes)
    }
}

/// A door's answer: a JSON-RPC result or error on 200, an HTTP refusal otherwise.
/// A task's SSE stream, read one event at a time. Bounded: a line longer than [`ANSWER_CAP`]
/// ends the stream.
pub struct Events {
    body: hyper::body::Incoming,
    pending: Vec<u8>,
}

impl Events {
    /// The state of the next event that names one (a task or a status update); `None` once the
    /// stream ends or breaks.
    pub async fn next_state(&mut self) -> Option<String> {
        loop {
            while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                if let Some(state) = state_in(&line) {
                    return Some(state);
                }
            }
            if self.pending.len() > ANSWER_CAP {
                return None;
            }
            let frame = self.body.frame().await?.ok()?;
            if let Ok(data) = frame.into_data() {
                self.pending.extend_from_slice(&data);
            }
        }
    }
}

/// The task state a `data:` line of a stream carries, if any.
fn state_in(line: &[u8]) -> Option<String> {
    let json = line.strip_prefix(b"data:")?;
    let v: Value = serde_json::from_slice(json.trim_ascii()).ok()?;
    let result = v.get("result")?;
    result
        .pointer("/task/status/state")
        .or_else(|| result.pointer("/statusUpdate/status/state"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn read_answer(status: u16, bytes: &[u8]) -> Result<Value, Failure> {
    let parsed: Option<Value> = serde_json::from_slice(bytes).ok();
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    if status != 200 {
        let v = parsed.unwrap_or_default();
        return Err(Failure::Refused {
            status,
            error: text(&v, "error").unwrap_or_else(|| "refused".into()),
            message: text(&v, "message").unwrap_or_default(),
        });
    }
    let Some(Value::Object(mut v)) = parsed else {
        return Err(Failure::Unreadable(
            "the answer is not a JSON object".into(),
        ));
    };
    if let Some(result) = v.remove("result") {
        return Ok(result);
    }
    match v.get("error") {
        Some(e) => Err(Failure::Rpc {
            code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: text(e, "message").unwrap_or_default(),
        }),
        None => Err(Failure::Unreadable(
            "the answer has neither result nor error".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_lines_name_their_task_state() {
        let task = br#"data: {"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t","status":{"state":"TASK_STATE_WORKING"}}}}"#;
        assert_eq!(state_in(task).as_deref(), Some("TASK_STATE_WORKING"));
        let update = br#"data: {"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"t","status":{"state":"TASK_STATE_COMPLETED"}}}}"#;
        assert_eq!(state_in(update).as_deref(), Some("TASK_STATE_COMPLETED"));
        assert_eq!(state_in(b"id: 4"), None);
        assert_eq!(state_in(b": heartbeat"), None);
        assert_eq!(state_in(br#"data: {"result":{"artifactUpdate":{}}}"#), None);
        assert_eq!(state_in(b"data: not json"), None);
    }

    #[test]
    fn answers_read_as_result_error_or_refusal() {
        assert_eq!(
            read_answer(200, br#"{"jsonrpc":"2.0","id":1,"result":{"task":1}}"#),
            Ok(json!({"task": 1}))
        );
        assert_eq!(
            read_answer(
                200,
                br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Task not found"}}"#
            ),
            Err(Failure::Rpc {
                code: -32001,
                message: "Task not found".into()
            })
        );
        assert_eq!(
            read_answer(403, br#"{"error":"peer_not_accepted","message":"no"}"#),
            Err(Failure::Refused {
                status: 403,
                error: "peer_not_accepted".into(),
                message: "no".into()
            })
        );
        assert_eq!(
            read_answer(502, b"<html>"),
            Err(Failure::Refused {
                status: 502,
                error: "refused".into(),
                message: String::new()
            })
        );
        assert!(matches!(
            read_answer(200, b"[1]"),
            Err(Failure::Unreadable(_))
        ));
        assert!(matches!(
            read_answer(200, b"{}"),
            Err(Failure::Unreadable(_))
        ));
    }

    #[test]
    fn a_token_never_shows_in_debug_output() {
        let allowed = policy::check(&["localhost".into()], "localhost:1").unwrap();
        let door = PeerDoor::new(allowed, Some("mur_secret".into()));
        assert!(!format!("{door:?}").contains("mur_secret"));
    }
}
