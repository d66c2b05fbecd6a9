//! The agent's model gateway (DESIGN §8, docs/keys-and-spend.md): every provider call a
//! harness makes goes through its capsule, so the agent never holds the provider's key and no
//! call passes a spend ceiling.
//!
//! A process capsule serves its CLI a provider endpoint on loopback (forwarded into the jail
//! like the door, `egress::Grant`), and the CLI is pointed at it with a placeholder key minted
//! for its attempt ([`Gateway::admit`]), which only this gateway accepts and only while the
//! attempt lives. Each request presenting it is checked against the ceilings
//! ([`spend::Spend::check`]), sent on to the real endpoint with the real key (or, for a CLI
//! logged in with an account, with its own credential), and its answer streamed back as it
//! arrives while [`meter`] reads the usage from a copy of each chunk. When the answer ends the
//! call is added to every scope and the ledger, and traced as an `inference` record.
//!
//! A refused call is answered in the provider's own error format, so the CLI ends its turn and
//! says why, and the attempt is told to wind down; its task fails with the ceiling's sentence.
//!
//! Over 600 lines: a call's one path (placeholder, ceilings, forwarding, the metered answer and
//! its span) reads top to bottom here; the API shapes, meter, spend and ledger are apart.

mod api;
pub mod ledger;
mod meter;
pub mod spend;

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full, Limited};
use hyper::body::{Body, Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use rand::RngCore;
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use api::{Api, Asked, ErrorKind};
pub use ledger::Totals;
pub use meter::Usage;
pub use spend::{Counted, DailyCeiling, Scope, Shared, Spend, Stop, Who};

use crate::ids::TaskId;
use crate::inference::{Connection, Endpoint};
use crate::telemetry::{keys, Kind, Span, SpanContext};
use crate::trace::{GatewayCall, TraceEvent};

/// The most one connection buffers of what it reads and writes.
const CONNECTION_BUFFER: usize = 64 << 10;
/// The most of a request body the gateway reads (a model call with images can be large).
const MOST_REQUEST: usize = 32 << 20;
/// The header a placeholder may also come in, beside the CLI's own credential: how a CLI logged
/// in with an account (which sends its own `Authorization`) still proves its attempt.
pub const PLACEHOLDER_HEADER: &str = "x-murmur-gateway-key";
/// Headers that describe one hop, never forwarded (RFC 9110 §7.6.1), and the credentials the
/// gateway replaces.
const NOT_FORWARDED: [&str; 11] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "host",
    "content-length",
    // The meter reads the answer: it must come as the provider writes it, not compressed.
    "accept-encoding",
    PLACEHOLDER_HEADER,
];

/// Where the gateway sends calls, and with which key.
pub struct Upstream {
    pub endpoint: Endpoint,
    pub api: Api,
    /// The real key and its header; `None` passes the CLI's own credential on (an account
    /// login).
    pub key: Option<(KeyHeader, Secret)>,
}

/// Which header the real key goes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyHeader {
    /// Anthropic's `x-api-key`.
    XApiKey,
    /// `Authorization: Bearer`.
    Bearer,
}

/// A key that no `Debug` or log line prints.
#[derive(Clone)]
pub struct Secret(Arc<str>);

impl Secret {
    pub fn new(key: &str) -> Secret {
        Secret(Arc::from(key))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// Writes one trace record: the session's trace, handed in by whoever serves the gateway (the
/// gateway knows nothing of the session it belongs to).
pub type Recorder = Arc<dyn Fn(TraceEvent) + Send + Sync>;

/// What a served gateway works with: the session's spend scopes, its trace, and the signal
/// that it is going down.
#[derive(Clone)]
pub struct Served {
    pub spend: Arc<Spend>,
    pub record: Recorder,
    pub going_down: watch::Receiver<bool>,
}

/// One live attempt's entry.
struct Admitted {
    task_id: String,
    /// The attempt's span: each call's `chat` span goes under it.
    span: SpanContext,
    /// Set when a ceiling refused one of its calls.
    stop: watch::Sender<bool>,
    calls: u32,
}

/// One capsule's gateway.
pub struct Gateway {
    upstream: Upstream,
    port: u16,
    /// sha256 of each live placeholder → its attempt.
    keys: Mutex<HashMap<[u8; 32], Admitted>>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Gateway(127.0.0.1:{} → {:?})",
            self.port, self.upstream.endpoint
        )
    }
}

/// A placeholder key, valid until dropped (the attempt's end).
pub struct Placeholder {
    pub key: String,
    digest: [u8; 32],
    gateway: Arc<Gateway>,
    /// Becomes true when a ceiling refused one of the attempt's calls.
    pub stopped: watch::Receiver<bool>,
}

impl Drop for Placeholder {
    fn drop(&mut self) {
        self.gateway.keys().remove(&self.digest);
    }
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

impl Gateway {
    /// The gateway of a capsule whose listener is at `port` on 127.0.0.1.
    pub fn new(upstream: Upstream, port: u16) -> Gateway {
        Gateway {
            upstream,
            port,
            keys: Mutex::new(HashMap::new()),
        }
    }

    /// The base URL a CLI is given: the gateway's address and the upstream's path prefix
    /// (`http://127.0.0.1:PORT/v1` for OpenAI, no prefix for Anthropic).
    pub fn url(&self) -> String {
        format!(
            "http://127.0.0.1:{}{}",
            self.port,
            self.upstream.endpoint.base_path()
        )
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn api(&self) -> Api {
        self.upstream.api
    }

    /// Whether the CLI's own credential is passed on (no key of murmur's).
    pub fn passes_credential(&self) -> bool {
        self.upstream.key.is_none()
    }

    /// Mints the placeholder of one attempt of `task_id`.
    pub fn admit(self: &Arc<Self>, task_id: &str, span: SpanContext) -> Placeholder {
        let mut bytes = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut bytes);
        let key = format!("mur_gw_{}", hex(&bytes));
        let digest = digest(&key);
        let (stop, stopped) = watch::channel(false);
        self.keys().insert(
            digest,
            Admitted {
                task_id: task_id.to_owned(),
                span,
                stop,
                calls: 0,
            },
        );
        Placeholder {
            key,
            digest,
            gateway: self.clone(),
            stopped,
        }
    }

    fn keys(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Admitted>> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The attempt a request's placeholder belongs to, and its call's number.
    fn attempt_of(&self, headers: &hyper::HeaderMap) -> Option<(String, u32, SpanContext)> {
        let presented = headers
            .get(PLACEHOLDER_HEADER)
            .and_then(|v| v.to_str().ok())
            .or_else(|| Api::presented(headers))?;
        let mut keys = self.keys();
        let admitted = keys.get_mut(&digest(presented))?;
        admitted.calls += 1;
        Some((
            admitted.task_id.clone(),
            admitted.calls,
            admitted.span.clone(),
        ))
    }

    fn stop_attempts_of(&self, task_id: &str) {
        for admitted in self.keys().values().filter(|a| a.task_id == task_id) {
            let _ = admitted.stop.send_replace(true);
        }
    }

    /// Serves `listener` until `served.going_down` is set.
    pub async fn serve(self: Arc<Self>, served: Served, listener: TcpListener) {
        let mut down = served.going_down.clone();
        let going_down = async move {
            let _ = down.wait_for(|d| *d).await;
        };
        tokio::pin!(going_down);
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    let (gateway, served) = (self.clone(), served.clone());
                    let service = service_fn(move |req| {
                        let (gateway, served) = (gateway.clone(), served.clone());
                        async move { Ok::<_, Infallible>(gateway.handle(&served, req).await) }
                    });
                    tokio::spawn(async move {
                        let _ = http1::Builder::new()
                            .timer(TokioTimer::new())
                            .max_buf_size(CONNECTION_BUFFER)
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                _ = &mut going_down => break,
            }
        }
    }

    async fn handle(&self, served: &Served, req: Request<Incoming>) -> Answer {
        let arrived = Instant::now();
        let arrived_at = SystemTime::now();
        let api = self.upstream.api;
        // A wrong placeholder never reaches the provider, nor is its body read.
        let Some((task_id, turn, parent)) = self.attempt_of(req.headers()) else {
            return refusal(
                api,
                ErrorKind::Key,
                "murmur's model gateway does not know this key: it accepts only the \
                 placeholder of a running attempt",
            );
        };
        let (head, body) = req.into_parts();
        let body = match Limited::new(body, MOST_REQUEST).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => {
                return refusal(
                    api,
                    ErrorKind::Invalid,
                    &format!(
                        "the request body could not be read whole (at most {} MiB)",
                        MOST_REQUEST >> 20
                    ),
                )
            }
        };
        let path = head
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        let call = api.is_call(&path);
        let mut asked = Asked::default();
        let mut body = body;
        if call {
            if let Ok(mut json) = serde_json::from_slice::<serde_json::Value>(&body) {
                asked = Asked::of(api, &json);
                if api::ask_for_usage(api, &mut json) {
                    body = Bytes::from(json.to_string());
                }
            }
            if let Err(stop) = served.spend.check(&task_id, asked.model.as_deref()) {
                let mut span = chat_span(api, &asked, &parent, arrived_at);
                stop.fail_span(&mut span);
                span.end_with(&*served.record);
                return self.refuse_spend(served, &task_id, stop);
            }
        }
        let mut forwarded = Request::builder().method(head.method).uri(path.as_str());
        for (name, value) in &head.headers {
            let n = name.as_str();
            let credential =
                self.upstream.key.is_some() && (n == "x-api-key" || n == "authorization");
            if !NOT_FORWARDED.contains(&n) && !credential {
                forwarded = forwarded.header(name, value);
            }
        }
        if let Some((header, key)) = &self.upstream.key {
            forwarded = match header {
                KeyHeader::Bearer => {
                    forwarded.header("authorization", format!("Bearer {}", key.expose()))
                }
                KeyHeader::XApiKey => forwarded.header("x-api-key", key.expose()),
            };
        }
        let Ok(forwarded) = forwarded.body(Full::new(body)) else {
            return refusal(
                api,
                ErrorKind::Invalid,
                "the request cannot be sent on as written",
            );
        };
        let (answer, connection) = match self.upstream.endpoint.forward(forwarded).await {
            Ok(a) => a,
            Err(failure) => {
                let said = match failure {
                    crate::inference::Failure::Connect(s) | crate::inference::Failure::Tls(s) => s,
                    other => format!("{other:?}"),
                };
                let said = match &self.upstream.key {
                    Some((_, k)) => said.replace(k.expose(), "[redacted]"),
                    None => said,
                };
                return refusal(
                    api,
                    ErrorKind::Upstream,
                    &format!(
                        "murmur's model gateway could not reach {}: {said}",
                        self.upstream.endpoint.shown()
                    ),
                );
            }
        };
        let first_byte = arrived.elapsed();
        let (mut parts, incoming) = answer.into_parts();
        for name in [
            "connection",
            "keep-alive",
            "transfer-encoding",
            "content-length",
        ] {
            parts.headers.remove(name);
        }
        if !call {
            let body = Passed {
                incoming,
                _connection: connection,
                meter: None,
            };
            return Response::from_parts(parts, Either::Right(body));
        }
        let sse = parts
            .headers
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        let span = Some(chat_span(api, &asked, &parent, arrived_at));
        let metering = Metering {
            meter: Some(meter::Meter::new(api, sse)),
            served: served.clone(),
            task_id,
            turn,
            api,
            asked,
            status: parts.status.as_u16(),
            arrived,
            first_byte,
            span,
        };
        let body = Passed {
            incoming,
            _connection: connection,
            meter: Some(metering),
        };
        Response::from_parts(parts, Either::Right(body))
    }

    fn refuse_spend(&self, served: &Served, task_id: &str, stop: Stop) -> Answer {
        (served.record)(TraceEvent::SpendCeiling {
            task_id: TaskId::from_wire(task_id),
            scope: stop.scope.word(),
            key: stop.key.clone(),
            used: stop.used.clone(),
            ceiling: stop.ceiling.clone(),
        });
        let sentence = stop.sentence.clone();
        served.spend.stopped_task(task_id, stop);
        self.stop_attempts_of(task_id);
        refusal(self.upstream.api, ErrorKind::Spend, &sentence)
    }
}

type Answer = Response<Either<Full<Bytes>, Passed>>;

fn refusal(api: Api, kind: ErrorKind, message: &str) -> Answer {
    let mut resp = Response::new(Either::Left(Full::new(Bytes::from(
        api.error_body(kind, message),
    ))));
    *resp.status_mut() = hyper::StatusCode::from_u16(api.error_status(kind))
        .unwrap_or(hyper::StatusCode::BAD_GATEWAY);
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    resp
}

/// `error.type` of a provider's error answer: its HTTP status (the conventions' choice for
/// HTTP failures).
fn http_error_type(status: u16) -> &'static str {
    match status {
        400 => "400",
        401 => "401",
        403 => "403",
        404 => "404",
        408 => "408",
        413 => "413",
        429 => "429",
        500 => "500",
        502 => "502",
        503 => "503",
        504 => "504",
        529 => "529",
        _ => "_OTHER",
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A call being metered, recorded once its answer ends (or is dropped).
struct Metering {
    meter: Option<meter::Meter>,
    served: Served,
    task_id: String,
    turn: u32,
    api: Api,
    asked: Asked,
    status: u16,
    arrived: Instant,
    first_byte: Duration,
    /// The call's `chat` span, ended with its usage.
    span: Option<Span>,
}

/// The `chat {model}` span of one provider call, under the attempt's span.
fn chat_span(api: Api, asked: &Asked, parent: &SpanContext, at: SystemTime) -> Span {
    let model = asked.model.as_deref().unwrap_or("unknown");
    let mut span = Span::start(
        format!("{} {model}", keys::CHAT),
        Kind::Client,
        Some(parent),
    )
    .started_at(at);
    span.set(keys::OPERATION, keys::CHAT);
    span.set(keys::PROVIDER, api.word());
    span.set_some(keys::REQUEST_MODEL, asked.model.clone());
    span
}

impl Metering {
    /// Ends the call's `chat` span with what the provider reported.
    fn end_chat(&self, mut span: Span, model: &str, u: &meter::Usage, ok: bool) {
        span.set(keys::RESPONSE_MODEL, model.to_owned());
        span.set(keys::INPUT_TOKENS, u.input as i64);
        span.set(keys::OUTPUT_TOKENS, u.output as i64);
        if let Some(reason) = &u.stop_reason {
            span.set(
                keys::FINISH_REASONS,
                opentelemetry::Value::Array(opentelemetry::Array::String(vec![reason
                    .clone()
                    .into()])),
            );
        }
        span.set(
            keys::TIME_TO_FIRST_TOKEN,
            self.first_byte.as_millis() as i64,
        );
        span.set("http.response.status_code", i64::from(self.status));
        if !ok {
            span.fail(
                http_error_type(self.status),
                format!("the provider answered HTTP {}", self.status),
            );
        }
        span.end_with(&*self.served.record);
    }

    fn finish(&mut self) {
        let Some(meter) = self.meter.take() else {
            return;
        };
        // An error answer used nothing; an answer with no usage counts as what it asked for.
        let ok = (200..300).contains(&self.status);
        let usage = meter.finish();
        let model = usage
            .as_ref()
            .and_then(|u| u.model.clone())
            .or_else(|| self.asked.model.clone())
            .unwrap_or_else(|| "unknown".into());
        let (counted, metered) = match (&usage, ok) {
            (Some(u), _) => (
                Some(self.served.spend.record(&self.task_id, &model, Some(u), 0)),
                true,
            ),
            (None, true) => (
                Some(
                    self.served
                        .spend
                        .record(&self.task_id, &model, None, self.asked.max_tokens),
                ),
                false,
            ),
            (None, false) => (None, false),
        };
        let u = usage.unwrap_or_default();
        if let Some(span) = self.span.take() {
            self.end_chat(span, &model, &u, ok);
        }
        (self.served.record)(TraceEvent::Inference {
            task_id: TaskId::from_wire(&self.task_id),
            turn: self.turn,
            provider: self.api.word(),
            model,
            input_tokens: u.input,
            output_tokens: u.output,
            stop_reason: u.stop_reason.unwrap_or_default(),
            tool_calls: Vec::new(),
            latency_ms: self.arrived.elapsed().as_millis() as u64,
            call: Some(Box::new(GatewayCall {
                cache_read_tokens: u.cache_read,
                cache_write_tokens: u.cache_write,
                usd: counted.and_then(|c| c.usd).map(|d| d.dollars()),
                status: self.status,
                first_byte_ms: self.first_byte.as_millis() as u64,
                metered,
                counted_tokens: counted.map_or(0, |c| c.tokens),
            })),
        });
    }
}

/// The provider's answer on its way to the CLI, each chunk as it arrives.
struct Passed {
    incoming: Incoming,
    _connection: Connection,
    meter: Option<Metering>,
}

impl Drop for Passed {
    fn drop(&mut self) {
        if let Some(m) = &mut self.meter {
            m.finish();
        }
    }
}

impl Body for Passed {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.incoming).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some(m)) = (frame.data_ref(), self.meter.as_mut()) {
                    if let Some(meter) = m.meter.as_mut() {
                        meter.feed(data);
                    }
                }
            }
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => {
                if let Some(m) = self.meter.as_mut() {
                    m.finish();
                }
            }
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.incoming.size_hint()
    }
}
