//! The A2A client `mur` itself uses (stop, cancel, ps, the harness helpers): plain HTTP/1.1 over
//! hyper, one connection a call, every JSON-RPC request carrying `A2A-Version: 1.0`.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpStream;

use crate::error::{CliError, CliResult, Code};

/// `host:port` of a door URL (`http://localhost:PORT` or `localhost:PORT`). `localhost` is
/// dialled as 127.0.0.1, the address every door binds.
pub fn authority(url: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    let host_port = rest.split('/').next().unwrap_or(rest);
    match host_port.strip_prefix("localhost:") {
        Some(port) => format!("127.0.0.1:{port}"),
        None => host_port.to_owned(),
    }
}

fn unreachable(url: &str, e: impl std::fmt::Display) -> CliError {
    CliError::new(
        Code::Unreachable,
        format!("cannot reach the door at {url}: {e}"),
        "check that the capsule is still running with `mur ps`",
    )
}

/// Sends one request on a fresh connection and answers the response as it starts (a stream's
/// body is read as it comes).
pub async fn open(url: &str, req: Request<Full<Bytes>>) -> CliResult<Response<Incoming>> {
    let stream = TcpStream::connect(authority(url))
        .await
        .map_err(|e| unreachable(url, e))?;
    let (mut sender, conn) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| unreachable(url, e))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    sender
        .send_request(req)
        .await
        .map_err(|e| unreachable(url, e))
}

/// Sends one request and answers the status and the whole body.
pub async fn send(
    url: &str,
    req: Request<Full<Bytes>>,
    timeout: Option<Duration>,
) -> CliResult<(u16, Bytes)> {
    let call = async {
        let resp = open(url, req).await?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| unreachable(url, e))?
            .to_bytes();
        Ok((status, body))
    };
    match timeout {
        Some(t) => tokio::time::timeout(t, call)
            .await
            .map_err(|_| unreachable(url, "no answer in time"))?,
        None => call.await,
    }
}

/// A POST with a JSON body and `A2A-Version: 1.0` (every JSON-RPC request mur sends carries it).
pub fn post(
    url: &str,
    path: &str,
    body: Value,
    extra: &[(&str, String)],
) -> CliResult<Request<Full<Bytes>>> {
    let mut b = Request::post(path)
        .header("host", authority(url))
        .header("content-type", "application/json")
        .header("a2a-version", "1.0");
    for (k, v) in extra {
        b = b.header(*k, v);
    }
    b.body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| unreachable(url, e))
}

/// A door and the token (the operator's) to call it with, when it is authenticated.
pub struct DoorRef<'a> {
    pub url: &'a str,
    pub token: Option<String>,
}

impl<'a> DoorRef<'a> {
    /// A running session's door, with its operator token when it has one.
    pub fn of(rec: &'a crate::records::RunningCapsule) -> Self {
        DoorRef {
            url: &rec.url,
            token: crate::tokens::operator(&rec.session_id),
        }
    }

    /// The `authorization` header this door needs, if any.
    pub fn auth_header(&self) -> Vec<(&'static str, String)> {
        self.token
            .iter()
            .map(|t| ("authorization", format!("Bearer {t}")))
            .collect()
    }
}

/// A JSON-RPC call: `Ok(result)` or `Err(error)` as the door answered it.
pub async fn rpc(
    door: &DoorRef<'_>,
    method: &str,
    params: Value,
) -> CliResult<Result<Value, Value>> {
    let url = door.url;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let (status, bytes) = send(url, post(url, "/", body, &door.auth_header())?, None).await?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| unreachable(url, e))?;
    match (v.get("result"), v.get("error")) {
        (Some(r), _) => Ok(Ok(r.clone())),
        (_, Some(Value::Object(e))) => Ok(Err(Value::Object(e.clone()))),
        // An HTTP refusal (401/403): {"error": code, "message": sentence}.
        (_, Some(Value::String(code))) => Err(CliError::new(
            Code::Refused,
            format!(
                "the door at {} refused the call (HTTP {status} {}): {}",
                crate::terminal::field(url),
                crate::terminal::field(code),
                crate::terminal::field(v.get("message").and_then(Value::as_str).unwrap_or(""))
            ),
            "check the session's tokens with `mur token`",
        )),
        _ => Err(unreachable(url, "the answer is not a JSON-RPC response")),
    }
}

/// The public agent card, within `timeout`.
pub async fn card(url: &str, timeout: Duration) -> CliResult<Value> {
    let req = Request::get("/.well-known/agent-card.json")
        .header("host", authority(url))
        .body(Full::new(Bytes::new()))
        .map_err(|e| unreachable(url, e))?;
    let (status, bytes) = send(url, req, Some(timeout)).await?;
    if status != 200 {
        return Err(unreachable(url, format!("the card answered HTTP {status}")));
    }
    serde_json::from_slice(&bytes).map_err(|e| unreachable(url, e))
}

/// A call to the capsule's control surface with a task token.
pub async fn control(url: &str, path: &str, token: &str, body: Value) -> CliResult<(u16, Value)> {
    let req = post(
        url,
        path,
        body,
        &[("authorization", format!("Bearer {token}"))],
    )?;
    let (status, bytes) = send(url, req, None).await?;
    let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Ok((status, v))
}

/// How long a door has to answer the head of a murmur.WatchSession.
const WATCH_OPENS_WITHIN: Duration = Duration::from_secs(10);

/// murmur.WatchSession on `door`: the stream's body, once the door answered 200.
pub async fn watch_session(door: &DoorRef<'_>) -> CliResult<Incoming> {
    let url = door.url;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "murmur.WatchSession", "params": {}});
    let req = post(url, "/", body, &door.auth_header())?;
    let resp = tokio::time::timeout(WATCH_OPENS_WITHIN, open(url, req))
        .await
        .map_err(|_| unreachable(url, "no answer to murmur.WatchSession"))??;
    if resp.status() != 200 {
        return Err(unreachable(
            url,
            format!("murmur.WatchSession answered HTTP {}", resp.status()),
        ));
    }
    Ok(resp.into_body())
}

/// The most one stream event may hold: the largest is a task's whole answer (8 MiB from a
/// harness), so a stream past this is not a door's and is given up.
pub const EVENT_MAX: usize = 16 << 20;

/// Server-sent events as they arrive: bytes in, each event's `data:` JSON out. Kept as bytes
/// until an event is whole, so a character split across two reads is never mangled.
#[derive(Default)]
pub struct SseEvents {
    pending: Vec<u8>,
}

impl SseEvents {
    /// The events `bytes` completed, or `None` once an event grew past [`EVENT_MAX`].
    pub fn feed(&mut self, bytes: &[u8]) -> Option<Vec<Value>> {
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(end) = self.pending.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = self.pending.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&event);
            let data = text.lines().find_map(|l| l.strip_prefix("data: "));
            if let Some(v) = data.and_then(|d| serde_json::from_str::<Value>(d).ok()) {
                events.push(v);
            }
        }
        (self.pending.len() <= EVENT_MAX).then_some(events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_whole_even_when_a_character_is_split_between_reads() {
        let mut sse = SseEvents::default();
        let wire = "id: 1\ndata: {\"t\":\"é\"}\n\n: heartbeat\n\nid: 2\ndata: {\"t\":2}\n\n";
        let bytes = wire.as_bytes();
        let cut = wire.find('é').unwrap() + 1;
        assert_eq!(sse.feed(&bytes[..cut]), Some(vec![]));
        let events = sse.feed(&bytes[cut..]).unwrap();
        assert_eq!(events, vec![json!({"t": "é"}), json!({"t": 2})]);
    }

    #[test]
    fn an_endless_event_is_given_up() {
        let mut sse = SseEvents::default();
        assert_eq!(sse.feed(&vec![b'x'; EVENT_MAX + 1]), None);
    }
}
