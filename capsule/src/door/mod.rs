//! The capsule's door: a hyper HTTP/1.1 server answering the agent card, the harness helpers'
//! control surface, and JSON-RPC on POST / after the ordered checks of [`check`].

mod body;
mod card;
mod check;
mod connections;
mod control;
mod error;
mod host;
mod message;
mod method;
mod methods;
mod parts;
mod span;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{json, Map, Value};
use tokio::net::TcpListener;

pub use card::{CAPSULE_URI, DOOR_URI, STREAM_URI};
pub use error::HttpRefusal;
pub use method::Method;

use crate::auth::TokenTable;
use crate::session::Session;
use check::Inbound;
use error::{Refusal, RpcError};

pub const CARD_PATH: &str = "/.well-known/agent-card.json";

/// The most one connection buffers of what it reads before hyper parses it (headers, and body
/// bytes on their way to [`body::BodyReader`]). A request's headers never need more; hyper
/// answers 431 to headers that do.
const CONNECTION_BUFFER: usize = 64 << 10;

/// The most connections a door holds at once, unless `MURMUR_DOOR_CONNECTIONS` says otherwise.
/// Each costs a task and its buffers; at the cap the oldest connection waiting for a request
/// gives way to a new one (`connections`), so a flood of idle connections can take neither the
/// descriptors and memory the door's real callers need nor their place. Far above what a
/// formation uses (a few per member).
pub const MAX_CONNECTIONS: usize = 1024;
/// The variable that sets [`MAX_CONNECTIONS`] for a capsule.
pub const CONNECTIONS_ENV: &str = "MURMUR_DOOR_CONNECTIONS";

/// The connection cap in force: [`CONNECTIONS_ENV`] when it is a number from 1, else the
/// default.
fn connection_cap() -> usize {
    std::env::var(CONNECTIONS_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n >= 1)
        .unwrap_or(MAX_CONNECTIONS)
}

/// What a connection past the cap is answered, whole, before it is closed.
fn over_capacity(cap: usize) -> Vec<u8> {
    let body = json!({"error": "busy", "message": format!(
        "this door holds {cap} connections, each of them being answered, as many as it takes at once; connect again shortly")})
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The door of one session.
pub struct Door {
    pub session: Arc<Session>,
    /// The minted tokens, on a door declaring network.authentication.
    pub tokens: Option<TokenTable>,
    /// What POST / serves, in the door extension's order.
    pub methods: Vec<Method>,
    card: Bytes,
    /// GetExtendedAgentCard's result, on an authenticated door.
    extended: Option<Value>,
    bodies: body::BodyReader,
}

/// The largest request body the door reads: room for every image a message may carry,
/// base64-encoded, plus 1 MiB of text, within 4 MiB..=256 MiB. The manifest's numbers may be as
/// large as u64 allows, so every step saturates instead of overflowing (a panic in debug, a
/// wrapped, tiny limit in release).
fn body_limit(limits: &crate::manifest::ContextLimits) -> usize {
    let per_image = usize::try_from(limits.images_max_bytes).unwrap_or(usize::MAX);
    let images = per_image.saturating_mul(limits.images_max_per_turn);
    (images / 3)
        .saturating_mul(4)
        .saturating_add(1 << 20)
        .clamp(4 << 20, 256 << 20)
}

/// What a method answers.
pub enum Answer {
    /// A served result, with the A2A-Extensions header value naming what the request used.
    Result(Value, Option<String>),
    /// A served result already rendered as JSON text (GetTask), spliced into the envelope as is.
    Text(Bytes, Option<String>),
    Error(RpcError),
    /// A `text/event-stream`, with its A2A-Extensions header value.
    Stream(crate::stream::SseBody, Option<String>),
}

type HttpResponse = Response<BoxBody<Bytes, Infallible>>;

impl Door {
    pub fn new(session: Arc<Session>, tokens: Option<TokenTable>) -> Door {
        let m = &session.manifest;
        let authenticated = m.network.authentication.is_some();
        let methods = method::served(m.lifecycle.task_acceptance, authenticated);
        let inputs = card::CardInputs {
            manifest: m,
            url: &session.url,
            session_id: session.id.as_str(),
            methods: &methods,
            network: !session.allow.is_empty(),
        };
        let kind = if authenticated {
            card::CardKind::AuthenticatedPublic
        } else {
            card::CardKind::Public
        };
        let card = Bytes::from(card::build(&inputs, kind).to_string());
        let extended = authenticated.then(|| card::build(&inputs, card::CardKind::Extended));
        let body_limit = body_limit(&m.context);
        Door {
            session,
            tokens,
            methods,
            card,
            extended,
            bodies: body::BodyReader::new(body_limit),
        }
    }

    /// The extended card (step 10 lets GetExtendedAgentCard through only when there is one).
    pub fn extended_card(&self) -> Value {
        self.extended.clone().unwrap_or(Value::Null)
    }

    /// Serves until `session.shutdown` is set, then answers held requests and stops.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        let hosts = Arc::new(self.hosts(listener.local_addr().ok().map(|a| a.port())));
        let open = Arc::new(connections::Connections::new(connection_cap()));
        let refusal = Bytes::from(over_capacity(open.cap()));
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        let going_down = self.session.going_down();
        tokio::pin!(going_down);
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else {
                        // Out of descriptors or the like: back off instead of spinning.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    let Some(admitted) = open.admit() else {
                        tokio::spawn(refuse_connection(stream, refusal.clone()));
                        continue;
                    };
                    let (door, hosts) = (self.clone(), hosts.clone());
                    let phase = admitted.phase.clone();
                    let service = service_fn(move |req| {
                        let (door, hosts, phase) = (door.clone(), hosts.clone(), phase.clone());
                        async move {
                            phase.reading();
                            // Before anything is read or answered, the card included.
                            if let Err(refused) = hosts.check(req.headers()) {
                                phase.waiting();
                                let (head, body) = req.into_parts();
                                let resp = unread(http_refusal(refused), &head.headers, body);
                                return Ok::<_, Infallible>(resp);
                            }
                            let resp = door.handle(req, &phase).await;
                            // A stream goes on answering; anything else is done with.
                            if !is_stream(&resp) {
                                phase.waiting();
                            }
                            Ok(resp)
                        }
                    });
                    // The timer arms hyper's header read timeout (30 s): a client that opens
                    // a connection, or keeps one idle, and sends nothing does not hold it for
                    // ever. The buffer bound caps what one connection's headers may take.
                    let conn = http1::Builder::new()
                        .timer(TokioTimer::new())
                        .max_buf_size(CONNECTION_BUFFER)
                        .serve_connection(TokioIo::new(stream), service);
                    let conn = graceful.watch(conn);
                    let (id, connections) = (admitted.id, open.clone());
                    let serving = tokio::spawn(async move {
                        let _ = conn.await;
                        connections.ended(id);
                    });
                    open.serving(id, serving.abort_handle());
                }
                _ = &mut going_down => break,
            }
        }
        drop(listener);
        self.session.registry.close();
        let _ = tokio::time::timeout(Duration::from_secs(5), graceful.shutdown()).await;
    }

    /// The addresses this door answers for: its advertised address, its harnesses' address,
    /// the loopback names at those ports and at the port it listens on, `network.hosts`.
    fn hosts(&self, listening: Option<u16>) -> host::Hosts {
        let s = &self.session;
        let urls = [Some(s.url.as_str()), s.harness_url.as_deref()];
        let urls: Vec<&str> = urls.into_iter().flatten().collect();
        host::Hosts::new(&urls, listening, &s.manifest.network.hosts)
    }

    async fn handle(&self, req: Request<Incoming>, phase: &connections::Phase) -> HttpResponse {
        if req.method() == hyper::Method::GET && req.uri().path() == CARD_PATH {
            return json_response(StatusCode::OK, self.card.clone(), None);
        }
        if req.uri().path().starts_with(control::PREFIX) {
            // A helper's call may wait long on its answer: it is being answered throughout.
            phase.answering();
            return control::handle(self, req).await;
        }
        let (head, body) = req.into_parts();
        let mut inbound = Inbound {
            http_method: head.method,
            path: head.uri.path().to_owned(),
            headers: head.headers,
            body: Bytes::new(),
            json: Value::Null,
            id: Value::Null,
            method_name: String::new(),
            method: None,
            params: Map::new(),
            credential: None,
            parent: None,
        };
        if let Err(refusal) = check::run(self, &check::BEFORE_BODY, &mut inbound) {
            return unread(refusal_response(*refusal), &inbound.headers, body);
        }
        let read = match self.bodies.read(&inbound.headers, body).await {
            Ok(read) => read,
            // What was sent of the body is not all read: the connection ends with this answer.
            Err(refusal) => return closing(http_refusal(refusal)),
        };
        inbound.body = read.bytes;
        phase.answering();
        let checked = check::run(self, &check::AFTER_BODY, &mut inbound);
        // Parsed: the body's bytes are done with, and so is its share of the body budget. What
        // was parsed from it lives on only while this request is handled, on one of the
        // runtime's two threads, or while a held request waits on its task (one per slot).
        inbound.body = Bytes::new();
        drop(read.share);
        if let Err(refusal) = checked {
            return refusal_response(*refusal);
        }
        let span = span::open(inbound.method, &inbound.headers, &inbound.params);
        inbound.parent = span.as_ref().map(|s| s.context().clone());
        let answer = methods::apply(self, &inbound).await;
        // What the answer says is on disk before it leaves (docs/store.md): a stream's opening
        // snapshot here, each of its events as the stream writes it.
        self.session.kept().await;
        if let Some(span) = span {
            span::close(span, &answer, &self.session.trace);
        }
        rpc_response(&inbound.id, answer)
    }
}

fn is_stream(resp: &HttpResponse) -> bool {
    resp.headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"))
}

/// Answers a connection past the cap its 503 and closes it, giving a client that does not read
/// one second.
async fn refuse_connection(mut stream: tokio::net::TcpStream, answer: Bytes) {
    use tokio::io::AsyncWriteExt;
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(&answer).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

fn json_response(status: StatusCode, body: Bytes, extensions: Option<&str>) -> HttpResponse {
    let mut resp = Response::new(Full::new(body).boxed());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    set_extensions(&mut resp, extensions);
    resp
}

fn set_extensions(resp: &mut HttpResponse, extensions: Option<&str>) {
    if let Some(ext) = extensions.and_then(|e| HeaderValue::from_str(e).ok()) {
        resp.headers_mut().insert("a2a-extensions", ext);
    }
}

fn sse_response(body: crate::stream::SseBody, extensions: Option<&str>) -> HttpResponse {
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert("cache-control", HeaderValue::from_static("no-cache"));
    h.insert("connection", HeaderValue::from_static("keep-alive"));
    set_extensions(&mut resp, extensions);
    resp
}

fn envelope(id: &Value, member: &str, value: Value) -> Bytes {
    let mut obj = Map::new();
    obj.insert("jsonrpc".into(), Value::from("2.0"));
    obj.insert("id".into(), id.clone());
    obj.insert(member.into(), value);
    Bytes::from(Value::Object(obj).to_string())
}

/// [`envelope`]'s bytes around a result that is already JSON text: the same members in the
/// same order, without parsing the result back into a tree.
fn envelope_text(id: &Value, result: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(result.len() + 48);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    // An id is a string or an integer (step 7): printing it cannot fail.
    let _ = serde_json::to_writer(&mut out, id);
    out.extend_from_slice(br#","result":"#);
    out.extend_from_slice(result);
    out.push(b'}');
    Bytes::from(out)
}

fn rpc_response(id: &Value, answer: Answer) -> HttpResponse {
    match answer {
        Answer::Result(value, ext) => json_response(
            StatusCode::OK,
            envelope(id, "result", value),
            ext.as_deref(),
        ),
        Answer::Text(text, ext) => {
            json_response(StatusCode::OK, envelope_text(id, &text), ext.as_deref())
        }
        Answer::Error(e) => json_response(StatusCode::OK, envelope(id, "error", e.to_json()), None),
        Answer::Stream(body, ext) => sse_response(body, ext.as_deref()),
    }
}

fn http_refusal(r: HttpRefusal) -> HttpResponse {
    let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::FORBIDDEN);
    let mut resp = json_response(status, Bytes::from(r.body()), None);
    if let Some(v) = r
        .www_authenticate
        .and_then(|v| HeaderValue::from_str(&v).ok())
    {
        resp.headers_mut().insert(WWW_AUTHENTICATE, v);
    }
    resp
}

/// An answer given from a request's headers alone: its body is discarded
/// ([`body::discard`]), or the answer says the connection closes.
fn unread(resp: HttpResponse, headers: &hyper::HeaderMap, body: Incoming) -> HttpResponse {
    match body::discard(headers, body) {
        true => resp,
        false => closing(resp),
    }
}

/// `resp`, saying that its connection ends with it, so that no client sends another request
/// on it.
fn closing(mut resp: HttpResponse) -> HttpResponse {
    resp.headers_mut()
        .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

fn refusal_response(refusal: Refusal) -> HttpResponse {
    match refusal {
        Refusal::Http(r) => http_refusal(r),
        Refusal::Rpc(id, e) => rpc_response(&id, Answer::Error(e)),
        Refusal::Answered(id, result) => rpc_response(&id, Answer::Result(result, None)),
    }
}

/// A JSON error body for the control surface.
fn plain_error(status: StatusCode, error: &str, message: &str) -> HttpResponse {
    json_response(
        status,
        Bytes::from(json!({"error": error, "message": message}).to_string()),
        None,
    )
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::{body_limit, envelope, envelope_text};
    use crate::manifest::ContextLimits;

    /// GetTask's spliced envelope is byte for byte the one built from a tree.
    #[test]
    fn spliced_envelope_matches_the_built_one() {
        let result = json!({"id": "tsk_1", "status": {"state": "TASK_STATE_COMPLETED"}});
        let text = result.to_string();
        for id in [json!(1), json!(-7), json!(u64::MAX), json!("req \"1\" é")] {
            assert_eq!(
                envelope_text(&id, text.as_bytes()),
                envelope(&id, "result", result.clone())
            );
        }
        assert_eq!(
            envelope_text(&Value::Null, b"{}"),
            envelope(&Value::Null, "result", json!({}))
        );
    }

    #[test]
    fn body_limit_saturates_on_any_manifest_numbers() {
        let limit = |images_max_bytes, images_max_per_turn| {
            body_limit(&ContextLimits {
                images_max_bytes,
                images_max_per_turn,
            })
        };
        // The defaults (4 images of 5 MiB): 5242880 * 4 / 3 * 4 + 1 MiB.
        assert_eq!(limit(5_242_880, 4), 29_010_600);
        assert_eq!(limit(1, 0), 4 << 20);
        assert_eq!(limit(u64::MAX, u32::MAX as usize), 256 << 20);
        assert_eq!(limit(u64::MAX, 1), 256 << 20);
        assert_eq!(limit(u64::MAX / 2, 3), 256 << 20);
    }
}
