//! A model provider for tests: a local HTTP/1.1 server started by the test, speaking the real
//! wire formats — Anthropic's Messages SSE events, OpenAI's chat.completion.chunk stream and
//! OpenAI's Responses API events — from a script of replies, one per request, in order, or,
//! once the script is empty, from a responder the test gives ([`Fake::start_with`]), which is
//! how a real agent CLI (Codex, Claude Code) can be driven through a conversation whose length
//! the test does not know in advance. It records every request (method, path, headers, JSON
//! body) so tests can assert what the client sent, and notes when a held connection is closed
//! by the client (a canceled call).
//!
//! Each connection carries one request and is closed after its reply (every reply says
//! `connection: close`): the streams are close-delimited, and a keep-alive client then simply
//! opens a new connection for its next request. Each test uses part of this file.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{json, Value};

/// One scripted reply.
#[derive(Clone, Debug)]
pub enum Reply {
    /// 200 text/event-stream with this body, written in pieces; the connection then closes.
    Stream(Vec<String>),
    /// An error status with headers and a body.
    Status(u16, Vec<(String, String)>, String),
    /// 200 with a body that is not the wire format.
    Raw(String),
    /// 200, the first pieces, then hold the connection open until the client closes it.
    Hold(Vec<String>),
    /// No answer at all, not even a status line: hold until the client closes.
    Silent,
}

/// A request as the fake received it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// The body as JSON; `Value::Null` when there is none (GET, HEAD) or it is not JSON.
    pub body: Value,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What answers a request the script has no reply for.
type Brain = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

#[derive(Default)]
struct State {
    script: VecDeque<Reply>,
    seen: Vec<Seen>,
    /// How many held connections the client closed.
    closed: usize,
    /// Every byte the fake received, to search for secrets that should not be there.
    raw: Vec<u8>,
}

/// The state. Nothing is meant to panic while holding it (a responder runs unlocked, and its
/// panic is answered as a 500), but if something did, the fake should go on serving the other
/// connections rather than fail each of them on a poisoned lock.
fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The largest request body read: a client is expected to send a conversation, not a disk.
const MAX_BODY: usize = 64 << 20;

/// The running fake; it stops serving when the test ends.
#[derive(Clone)]
pub struct Fake {
    pub port: u16,
    state: Arc<Mutex<State>>,
}

impl Fake {
    pub fn start() -> Fake {
        Fake::start_at("127.0.0.1:0")
    }

    /// A fake listening on `addr` (`[::1]:0` for IPv6 loopback).
    pub fn start_at(addr: &str) -> Fake {
        Fake::listen(addr, None)
    }

    /// A fake that answers each request the script has no reply for by calling `brain` with
    /// the request as seen: GET and HEAD requests too (their body is `Value::Null`), which a
    /// fake without a brain answers 404 without taking a scripted reply.
    pub fn start_with(brain: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Fake {
        Fake::listen("127.0.0.1:0", Some(Arc::new(brain)))
    }

    fn listen(addr: &str, brain: Option<Brain>) -> Fake {
        let listener = TcpListener::bind(addr).unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let st = shared.clone();
                let brain = brain.clone();
                std::thread::spawn(move || serve(conn, st, brain));
            }
        });
        Fake { port, state }
    }

    /// Queues replies, served in order.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        lock(&self.state).script.extend(replies);
    }

    pub fn seen(&self) -> Vec<Seen> {
        lock(&self.state).seen.clone()
    }

    pub fn closed(&self) -> usize {
        lock(&self.state).closed
    }

    pub fn left(&self) -> usize {
        lock(&self.state).script.len()
    }
}

/// One request off the wire.
struct Incoming {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// The bytes as received (a chunked body decoded), for [`State::raw`].
    raw: Vec<u8>,
}

impl Incoming {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a request was not read: the peer went away (or sent what cannot be framed), or it
/// asked for what the fake refuses with this status and message.
enum Unread {
    Gone,
    Refused(u16, &'static str),
}

fn read_request(
    reader: &mut BufReader<TcpStream>,
    out: &mut TcpStream,
) -> Result<Incoming, Unread> {
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return Err(Unread::Gone);
    }
    let mut parts = line.split(' ');
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    let mut raw = line.clone().into_bytes();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return Err(Unread::Gone);
        }
        raw.extend_from_slice(line.as_bytes());
        if line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let mut req = Incoming {
        method,
        path,
        headers,
        body: Vec::new(),
        raw,
    };
    // A client that asks leave to send its body (`expect: 100-continue`, as curl does for
    // large ones) is given it, rather than left waiting for a second or so.
    if req
        .header("expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        out.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .map_err(|_| Unread::Gone)?;
    }
    let chunked = req
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    req.body = if chunked {
        read_chunked(reader)?
    } else {
        let len: usize = req
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if len > MAX_BODY {
            return Err(Unread::Refused(413, "the fake reads bodies up to 64 MiB"));
        }
        let mut body = vec![0u8; len];
        reader.read_exact(&mut body).map_err(|_| Unread::Gone)?;
        body
    };
    req.raw.extend_from_slice(&req.body);
    Ok(req)
}

/// A `transfer-encoding: chunked` body, decoded (a streaming client may send one).
fn read_chunked(reader: &mut BufReader<TcpStream>) -> Result<Vec<u8>, Unread> {
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return Err(Unread::Gone);
        }
        let size = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size, 16).map_err(|_| Unread::Gone)?;
        if size == 0 {
            // Trailers, up to the blank line that ends the body.
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        if body.len() + size > MAX_BODY {
            return Err(Unread::Refused(413, "the fake reads bodies up to 64 MiB"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader
            .read_exact(&mut body[start..])
            .map_err(|_| Unread::Gone)?;
        line.clear();
        reader.read_line(&mut line).map_err(|_| Unread::Gone)?;
    }
}

/// A JSON error body in the providers' shape.
fn error_body(message: &str) -> String {
    json!({"error": {"message": message}}).to_string()
}

fn serve(conn: TcpStream, state: Arc<Mutex<State>>, brain: Option<Brain>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(60)));
    let Ok(half) = conn.try_clone() else { return };
    let mut reader = BufReader::new(half);
    let mut out = conn;
    let req = match read_request(&mut reader, &mut out) {
        Ok(req) => req,
        Err(Unread::Gone) => return,
        Err(Unread::Refused(code, why)) => {
            let _ = respond(&mut out, code, &[], &error_body(why), true);
            return;
        }
    };
    // GET and HEAD carry no conversation: a CLI probing the server (a model list, a health
    // check) must not take the reply scripted for its next model call.
    let bodyless = req.method == "GET" || req.method == "HEAD";
    let with_body = req.method != "HEAD";
    // The fake cannot decompress; a compressed body is refused out loud rather than recorded
    // as no body at all.
    let encoded = req
        .header("content-encoding")
        .filter(|e| !e.eq_ignore_ascii_case("identity"))
        .map(str::to_owned);
    let seen = Seen {
        body: serde_json::from_slice(&req.body).unwrap_or(Value::Null),
        method: req.method,
        path: req.path,
        headers: req.headers,
    };
    let scripted = {
        let mut st = lock(&state);
        st.raw.extend_from_slice(&req.raw);
        st.seen.push(seen.clone());
        if bodyless || encoded.is_some() {
            None
        } else {
            st.script.pop_front()
        }
    };
    if let Some(enc) = encoded {
        let why = format!("the fake cannot read a body with content-encoding {enc}");
        let _ = respond(&mut out, 415, &[], &error_body(&why), with_body);
        return;
    }
    let reply = match (scripted, brain) {
        (Some(reply), _) => reply,
        (None, Some(brain)) => match std::panic::catch_unwind(AssertUnwindSafe(|| brain(&seen))) {
            Ok(reply) => reply,
            Err(_) => Reply::Status(500, vec![], error_body("the fake's responder panicked")),
        },
        (None, None) if bodyless => Reply::Status(404, vec![], "{}".to_owned()),
        (None, None) => Reply::Status(500, vec![], error_body("the fake has no reply scripted")),
    };
    match reply {
        Reply::Status(code, hs, body) => {
            let _ = respond(&mut out, code, &hs, &body, with_body);
        }
        Reply::Raw(body) => {
            let _ = respond(&mut out, 200, &[], &body, with_body);
        }
        Reply::Stream(pieces) => {
            let pieces = if with_body { &pieces[..] } else { &[] };
            let _ = stream(&mut out, pieces);
        }
        Reply::Silent => {
            let mut buf = [0u8; 64];
            while matches!(reader.read(&mut buf), Ok(n) if n > 0) {}
            lock(&state).closed += 1;
        }
        Reply::Hold(pieces) => {
            // Wait for the client to close: a read answers 0 (or fails, at the 60 s read
            // timeout at the latest) then. A write that fails means it already had: a cancel
            // can land between the request being seen and the first piece going out.
            if stream(&mut out, &pieces).is_ok() {
                let mut buf = [0u8; 64];
                loop {
                    match reader.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => continue,
                    }
                }
            }
            lock(&state).closed += 1;
        }
    }
}

/// A whole reply; `with_body` is false for HEAD, whose reply has the headers only.
fn respond(
    out: &mut TcpStream,
    code: u16,
    headers: &[(String, String)],
    body: &str,
    with_body: bool,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    if with_body {
        out.write_all(body.as_bytes())?;
    }
    out.flush()
}

/// A close-delimited event stream, each piece its own write.
fn stream(out: &mut TcpStream, pieces: &[String]) -> std::io::Result<()> {
    out.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
    )?;
    for p in pieces {
        out.write_all(p.as_bytes())?;
        out.flush()?;
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

/// Anthropic's Messages stream.
pub mod anthropic {
    use super::*;

    fn event(name: &str, data: Value) -> String {
        format!("event: {name}\ndata: {data}\n\n")
    }

    fn start(input_tokens: u64) -> String {
        event(
            "message_start",
            json!({"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "content": [],
            "model": "claude-test", "stop_reason": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}),
        )
    }

    fn end(stop: &str, output_tokens: u64) -> Vec<String> {
        vec![
            event(
                "message_delta",
                json!({"type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": {"output_tokens": output_tokens}}),
            ),
            event("message_stop", json!({"type": "message_stop"})),
        ]
    }

    /// Text in pieces, after an optional thinking block; then `stop`.
    pub fn text(thinking: &str, pieces: &[&str], stop: &str, usage: (u64, u64)) -> Vec<String> {
        let mut out = vec![start(usage.0), event("ping", json!({"type": "ping"}))];
        let mut index = 0;
        if !thinking.is_empty() {
            out.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "thinking", "thinking": ""}}),
            ));
            out.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "thinking_delta", "thinking": thinking}}),
            ));
            out.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ));
            index = 1;
        }
        if !pieces.is_empty() {
            out.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "text", "text": ""}}),
            ));
            for p in pieces {
                out.push(event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "text_delta", "text": p}}),
                ));
            }
            out.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
        }
        out.extend(end(stop, usage.1));
        out
    }

    /// One tool_use block whose input arrives as these partial JSON pieces, after the empty
    /// one the real API opens every tool input with.
    pub fn tool(id: &str, name: &str, json_pieces: &[&str], usage: (u64, u64)) -> Vec<String> {
        let mut out = vec![start(usage.0)];
        out.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ));
        for p in std::iter::once(&"").chain(json_pieces) {
            out.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": p}}),
            ));
        }
        out.push(event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ));
        out.extend(end("tool_use", usage.1));
        out
    }

    /// An `error` event mid-stream.
    pub fn error(kind: &str, message: &str) -> Vec<String> {
        vec![
            start(5),
            event(
                "error",
                json!({"type": "error", "error": {"type": kind, "message": message}}),
            ),
        ]
    }
}

/// OpenAI's chat.completion.chunk stream.
pub mod openai {
    use super::*;

    fn chunk(delta: Value, finish: Option<&str>) -> String {
        let data = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-test", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {data}\n\n")
    }

    fn usage(usage: (u64, u64)) -> String {
        let data = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-test", "choices": [],
            "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1,
                      "total_tokens": usage.0 + usage.1}});
        format!("data: {data}\n\n")
    }

    /// Text in pieces (reasoning first when given); then `finish`, usage, `[DONE]`.
    pub fn text(reasoning: &str, pieces: &[&str], finish: &str, u: (u64, u64)) -> Vec<String> {
        let mut out = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        if !reasoning.is_empty() {
            out.push(chunk(json!({"reasoning_content": reasoning}), None));
        }
        for p in pieces {
            out.push(chunk(json!({"content": p}), None));
        }
        out.push(chunk(json!({}), Some(finish)));
        out.push(usage(u));
        out.push("data: [DONE]\n\n".into());
        out
    }

    /// One tool call whose arguments arrive split across chunks.
    pub fn tool(id: &str, name: &str, arg_pieces: &[&str], u: (u64, u64)) -> Vec<String> {
        let mut out = vec![chunk(
            json!({"role": "assistant", "content": null, "tool_calls": [
            {"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            None,
        )];
        for p in arg_pieces {
            out.push(chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}),
                None,
            ));
        }
        out.push(chunk(json!({}), Some("tool_calls")));
        out.push(usage(u));
        out.push("data: [DONE]\n\n".into());
        out
    }
}

/// OpenAI's Responses API stream (`POST /v1/responses` with `stream: true`), the wire format of
/// the Codex CLI: typed events, each `event: <type>` and `data: <json>` whose `type` repeats
/// the event's, numbered by `sequence_number` from 0, framed by the response object at
/// `response.created`, `response.in_progress` and the terminal `response.completed` (or
/// `response.failed`). Field names and shapes follow openai-python's
/// `openai/types/responses/` (the `Response*Event` models).
pub mod responses {
    use super::*;

    /// The ids of the fake's one response and its items: fixed, so a test can name them.
    pub const RESPONSE_ID: &str = "resp_fake_1";
    pub const MESSAGE_ID: &str = "msg_fake_1";
    pub const MODEL: &str = "gpt-test";
    const CREATED_AT: u64 = 1_700_000_000;

    /// Numbers the events of one stream as the real API does, from 0.
    #[derive(Default)]
    struct Events {
        out: Vec<String>,
    }

    impl Events {
        fn push(&mut self, kind: &str, fields: Value) {
            let mut data = serde_json::Map::new();
            data.insert("type".into(), json!(kind));
            data.insert("sequence_number".into(), json!(self.out.len()));
            if let Value::Object(fields) = fields {
                data.extend(fields);
            }
            self.out
                .push(format!("event: {kind}\ndata: {}\n\n", Value::Object(data)));
        }

        /// `response.created` then `response.in_progress`, both with the response as it
        /// starts: in progress, no output yet.
        fn open(&mut self) {
            let started = response("in_progress", json!([]), Value::Null, Value::Null);
            self.push("response.created", json!({"response": started}));
            self.push("response.in_progress", json!({"response": started}));
        }
    }

    /// The response object the lifecycle events carry.
    fn response(status: &str, output: Value, usage: Value, error: Value) -> Value {
        json!({
            "id": RESPONSE_ID,
            "object": "response",
            "created_at": CREATED_AT,
            "status": status,
            "background": false,
            "error": error,
            "incomplete_details": null,
            "instructions": null,
            "max_output_tokens": null,
            "model": MODEL,
            "output": output,
            "parallel_tool_calls": true,
            "previous_response_id": null,
            "reasoning": {"effort": null, "summary": null},
            "store": false,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": usage,
            "user": null,
            "metadata": {},
        })
    }

    fn usage((input, output): (u64, u64)) -> Value {
        json!({
            "input_tokens": input,
            // `cache_write_tokens` is required by the SDK's types (openai 3.57).
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input + output,
        })
    }

    fn message(status: &str, content: Value) -> Value {
        json!({"id": MESSAGE_ID, "type": "message", "status": status, "content": content,
               "role": "assistant"})
    }

    fn output_text(text: &str) -> Value {
        json!({"type": "output_text", "annotations": [], "logprobs": [], "text": text})
    }

    /// One assistant message whose text arrives in these pieces; then `response.completed`
    /// with `usage` as (input, output) tokens.
    pub fn text(pieces: &[&str], u: (u64, u64)) -> Vec<String> {
        let full: String = pieces.concat();
        let mut ev = Events::default();
        ev.open();
        let at = json!({"item_id": MESSAGE_ID, "output_index": 0, "content_index": 0});
        let with = |extra: Value| {
            let mut fields = at.clone();
            if let (Value::Object(f), Value::Object(e)) = (&mut fields, extra) {
                f.extend(e);
            }
            fields
        };
        ev.push(
            "response.output_item.added",
            json!({"output_index": 0, "item": message("in_progress", json!([]))}),
        );
        ev.push(
            "response.content_part.added",
            with(json!({"part": output_text("")})),
        );
        for p in pieces {
            ev.push(
                "response.output_text.delta",
                with(json!({"delta": p, "logprobs": []})),
            );
        }
        ev.push(
            "response.output_text.done",
            with(json!({"text": full, "logprobs": []})),
        );
        ev.push(
            "response.content_part.done",
            with(json!({"part": output_text(&full)})),
        );
        let done = message("completed", json!([output_text(&full)]));
        ev.push(
            "response.output_item.done",
            json!({"output_index": 0, "item": done}),
        );
        ev.push(
            "response.completed",
            json!({"response": response("completed", json!([done]), usage(u), Value::Null)}),
        );
        ev.out
    }

    /// One function call (`fc_<call_id>`) whose arguments arrive split in two or three pieces
    /// (fewer when they are too short to split); then `response.completed`.
    pub fn function_call(call_id: &str, name: &str, arguments: &str, u: (u64, u64)) -> Vec<String> {
        let id = format!("fc_{call_id}");
        let item = |status: &str, arguments: &str| {
            json!({"id": id, "type": "function_call", "status": status,
                   "arguments": arguments, "call_id": call_id, "name": name})
        };
        let mut ev = Events::default();
        ev.open();
        ev.push(
            "response.output_item.added",
            json!({"output_index": 0, "item": item("in_progress", "")}),
        );
        for piece in thirds(arguments) {
            ev.push(
                "response.function_call_arguments.delta",
                json!({"item_id": id, "output_index": 0, "delta": piece}),
            );
        }
        ev.push(
            "response.function_call_arguments.done",
            json!({"item_id": id, "output_index": 0, "arguments": arguments}),
        );
        let done = item("completed", arguments);
        ev.push(
            "response.output_item.done",
            json!({"output_index": 0, "item": done}),
        );
        ev.push(
            "response.completed",
            json!({"response": response("completed", json!([done]), usage(u), Value::Null)}),
        );
        ev.out
    }

    /// `text` cut at character boundaries into up to three non-empty pieces of about equal
    /// length, so a client must join deltas to get the arguments.
    fn thirds(text: &str) -> Vec<&str> {
        let chars: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        let n = chars.len();
        let mut cuts: Vec<usize> = [n / 3, 2 * n / 3]
            .into_iter()
            .filter(|&c| c > 0 && c < n)
            .map(|c| chars[c])
            .collect();
        cuts.dedup();
        let mut pieces = Vec::new();
        let mut from = 0;
        for cut in cuts.into_iter().chain(std::iter::once(text.len())) {
            if cut > from {
                pieces.push(&text[from..cut]);
                from = cut;
            }
        }
        pieces
    }

    /// A response that fails before any output: created, in progress, then `response.failed`
    /// with the error object (`code` is e.g. `server_error`, `rate_limit_exceeded`).
    pub fn failed(code: &str, message: &str) -> Vec<String> {
        let mut ev = Events::default();
        ev.open();
        let error = json!({"code": code, "message": message});
        ev.push(
            "response.failed",
            json!({"response": response("failed", json!([]), Value::Null, error)}),
        );
        ev.out
    }
}
