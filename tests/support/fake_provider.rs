//! A model provider for tests: a local HTTP/1.1 server started by the test, speaking the real
//! wire formats — Anthropic's Messages SSE events and OpenAI's chat.completion.chunk stream —
//! from a script of replies, one per request, in order. It records every request (path,
//! headers, JSON body) so tests can assert what the capsule sent, and notes when a held
//! connection is closed by the client (a canceled call).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
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
    pub path: String,
    pub headers: Vec<(String, String)>,
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

#[derive(Default)]
struct State {
    script: VecDeque<Reply>,
    seen: Vec<Seen>,
    /// How many held connections the client closed.
    closed: usize,
    /// Every byte the fake received, to search for secrets that should not be there.
    raw: Vec<u8>,
}

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
        let listener = TcpListener::bind(addr).unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let st = shared.clone();
                std::thread::spawn(move || serve(conn, st));
            }
        });
        Fake { port, state }
    }

    /// Queues replies, served in order.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.state.lock().unwrap().script.extend(replies);
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    pub fn closed(&self) -> usize {
        self.state.lock().unwrap().closed
    }

    pub fn left(&self) -> usize {
        self.state.lock().unwrap().script.len()
    }
}

fn serve(conn: TcpStream, state: Arc<Mutex<State>>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(60)));
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let path = line.split(' ').nth(1).unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    let mut raw = line.clone().into_bytes();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        raw.extend_from_slice(line.as_bytes());
        if line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    raw.extend_from_slice(&body);
    let reply = {
        let mut st = state.lock().unwrap();
        st.raw.extend_from_slice(&raw);
        st.seen.push(Seen {
            path,
            headers,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        });
        st.script.pop_front()
    };
    let mut out = conn;
    let Some(reply) = reply else {
        let _ = respond(
            &mut out,
            500,
            &[],
            "{\"error\":{\"message\":\"the fake has no reply scripted\"}}",
        );
        return;
    };
    match reply {
        Reply::Status(code, hs, body) => {
            let _ = respond(&mut out, code, &hs, &body);
        }
        Reply::Raw(body) => {
            let _ = respond(&mut out, 200, &[], &body);
        }
        Reply::Stream(pieces) => {
            let _ = stream(&mut out, &pieces);
        }
        Reply::Silent => {
            let mut buf = [0u8; 64];
            while matches!(reader.read(&mut buf), Ok(n) if n > 0) {}
            state.lock().unwrap().closed += 1;
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
            state.lock().unwrap().closed += 1;
        }
    }
}

fn respond(
    out: &mut TcpStream,
    code: u16,
    headers: &[(String, String)],
    body: &str,
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
    out.write_all(body.as_bytes())?;
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
