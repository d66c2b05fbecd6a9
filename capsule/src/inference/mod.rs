//! The http transport's inference drivers (DESIGN §2 `agent`): one call to a model provider's
//! API, streamed, in the provider's own wire format — Anthropic's Messages API, or OpenAI's Chat
//! Completions (OpenAI, DeepSeek, and any compatible server: llama.cpp, vLLM, Ollama). The loop
//! (`agent::http`) speaks only the neutral types here: a conversation of [`Msg`]s in, a
//! [`Reply`] out, [`Delta`]s as they stream.

mod anthropic;
mod client;
pub mod conversation;
mod error;
mod openai;
mod retry;
mod sse;

use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

pub use client::{Connection, Endpoint, EndpointError};
pub use error::{CallError, Failure};
pub use retry::{Backoff, MAX_ATTEMPTS};

use crate::manifest::Builtin;

/// The provider a built-in http driver speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Anthropic,
    OpenAi,
    DeepSeek,
}

impl Provider {
    /// The provider a built-in artifact names; `None` for the process presets.
    pub fn of(builtin: Builtin) -> Option<Provider> {
        match builtin {
            Builtin::Anthropic => Some(Provider::Anthropic),
            Builtin::OpenAi => Some(Provider::OpenAi),
            Builtin::DeepSeek => Some(Provider::DeepSeek),
            _ => None,
        }
    }

    /// How messages name it.
    pub fn name(&self) -> &'static str {
        match self {
            Provider::Anthropic => "Anthropic",
            Provider::OpenAi => "OpenAI",
            Provider::DeepSeek => "DeepSeek",
        }
    }

    /// The trace's spelling.
    pub fn word(&self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAi => "openai",
            Provider::DeepSeek => "deepseek",
        }
    }
}

/// Who said a message. The serde forms are the session's store's (a restarted http capsule
/// takes its conversations back), not any provider's wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Block {
    Text(String),
    /// An image the door took: its media type and base64 bytes.
    Image {
        media_type: String,
        base64: String,
    },
    /// The model asked for a tool.
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    /// What a tool answered, fed back to the model.
    ToolResult {
        id: String,
        content: String,
        is_error: bool,
    },
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Msg {
    pub role: Role,
    pub blocks: Vec<Block>,
}

impl Msg {
    /// What it holds, roughly, in bytes (the conversation store's bound).
    pub fn held_bytes(&self) -> usize {
        self.blocks
            .iter()
            .map(|b| match b {
                Block::Text(t) => t.len(),
                Block::Image { base64, .. } => base64.len(),
                Block::ToolUse { input, .. } => input.to_string().len(),
                Block::ToolResult { content, .. } => content.len(),
            })
            .sum()
    }
}

/// A tool offered to the model.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: String,
    /// A JSON schema for its input.
    pub schema: Value,
}

/// One call: what the model is given.
pub struct Request<'a> {
    pub model: &'a str,
    pub max_tokens: u32,
    pub system: &'a str,
    pub messages: &'a [Msg],
    pub tools: &'a [ToolSpec],
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// It finished its turn.
    EndTurn,
    /// It asked for tools.
    ToolUse,
    /// It reached `max_tokens`.
    MaxTokens,
    /// Anything else the provider named.
    Other(String),
}

/// Token counts the provider reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// A tool call the model made.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// Its arguments, as the model wrote them (JSON, possibly malformed).
    pub arguments: String,
}

/// What one call answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub text: String,
    pub thinking: String,
    pub tool_calls: Vec<ToolCall>,
    pub stop: Stop,
    pub usage: Usage,
    /// How long the attempt that answered took, request to last byte: not the failed attempts
    /// or the waits between them.
    pub latency: std::time::Duration,
}

impl Reply {
    /// Where a stream's reading starts: nothing yet, and no stop reason until the stream says.
    pub fn unfinished() -> Reply {
        Reply {
            text: String::new(),
            thinking: String::new(),
            tool_calls: Vec::new(),
            stop: Stop::Other("none".into()),
            usage: Usage::default(),
            latency: std::time::Duration::ZERO,
        }
    }
}

/// Something the model streamed, as it arrives.
pub enum Delta<'a> {
    Text(&'a str),
    Thinking(&'a str),
    ToolStarted { id: &'a str, name: &'a str },
    ToolProgress { id: &'a str, chunk: &'a str },
}

/// A built-in http driver, ready to call.
#[derive(Clone)]
pub struct Driver {
    pub provider: Provider,
    pub endpoint: Endpoint,
}

impl Driver {
    /// One call, retried on 429, 5xx and a mid-stream overload within [`MAX_ATTEMPTS`] while
    /// nothing of it has been streamed; each delta goes to `on`.
    pub async fn call(
        &self,
        req: &Request<'_>,
        on: &mut (dyn FnMut(Delta<'_>) + Send),
    ) -> Result<Reply, CallError> {
        let body = match self.provider {
            Provider::Anthropic => anthropic::body(req),
            Provider::OpenAi | Provider::DeepSeek => {
                let host = self.endpoint.host_port().0;
                openai::body(
                    req,
                    &openai::Spelling::for_server(self.provider, host, req.model),
                )
            }
        };
        let path = match self.provider {
            Provider::Anthropic => "/v1/messages",
            Provider::OpenAi | Provider::DeepSeek => "/chat/completions",
        };
        let mut backoff = Backoff::new();
        // Once any of the reply went out as a frame, another attempt would stream it again:
        // watchers would see it twice. Such a failure ends the call.
        let streamed = AtomicBool::new(false);
        let mut counted = |d: Delta<'_>| {
            streamed.store(true, Ordering::Relaxed);
            on(d)
        };
        loop {
            let attempt = self.attempt(path, &body, &mut counted).await;
            match attempt {
                Err(e) if e.retryable() && !streamed.load(Ordering::Relaxed) => {
                    match backoff.next(e.retry_after()) {
                        Some(wait) => tokio::time::sleep(wait).await,
                        None => return Err(e.after_attempts(backoff.attempts())),
                    }
                }
                other => return other.map_err(|e| e.after_attempts(backoff.attempts())),
            }
        }
    }

    async fn attempt(
        &self,
        path: &str,
        body: &Value,
        on: &mut (dyn FnMut(Delta<'_>) + Send),
    ) -> Result<Reply, CallError> {
        let fail = |f: Failure| CallError::new(self.provider, f);
        let began = std::time::Instant::now();
        let headers = match self.provider {
            Provider::Anthropic => anthropic::headers(self.endpoint.api_key()),
            Provider::OpenAi | Provider::DeepSeek => openai::headers(self.endpoint.api_key()),
        };
        let mut stream = self
            .endpoint
            .post(path, &headers, body)
            .await
            .map_err(|f| fail(self.endpoint.scrub(f)))?;
        let parsed = match self.provider {
            Provider::Anthropic => anthropic::read(&mut stream, on).await,
            Provider::OpenAi | Provider::DeepSeek => openai::read(&mut stream, on).await,
        };
        let mut reply = parsed.map_err(|f| fail(self.endpoint.scrub(f)))?;
        reply.latency = began.elapsed();
        Ok(reply)
    }
}

#[cfg(test)]
mod deadline_tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A provider that keeps a reply alive with a ping every 200 s, for ever, is given up at
    /// the whole-call bound, not the idle one (paused time: the test takes no half hour).
    #[tokio::test(start_paused = true)]
    async fn a_reply_that_trickles_for_ever_ends_at_the_call_bound() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 64 << 10];
            let _ = conn.read(&mut buf).await;
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            let _ = conn.write_all(head.as_bytes()).await;
            let ping = "event: ping\ndata: {\"type\": \"ping\"}\n\n";
            loop {
                let chunk = format!("{:x}\r\n{ping}\r\n", ping.len());
                if conn.write_all(chunk.as_bytes()).await.is_err() {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_secs(200)).await;
            }
        });
        let driver = Driver {
            provider: Provider::Anthropic,
            endpoint: Endpoint::parse(&format!("http://127.0.0.1:{port}"), Some("k")).unwrap(),
        };
        let req = Request {
            model: "m",
            max_tokens: 10,
            system: "",
            messages: &[],
            tools: &[],
        };
        let began = tokio::time::Instant::now();
        let err = driver.call(&req, &mut |_| {}).await.unwrap_err();
        assert_eq!(
            err.failure,
            error::Failure::Overran(client::CALL_WITHIN.as_secs())
        );
        assert_eq!(
            err.to_string(),
            "Anthropic's reply was still streaming after 1800 s, the most one call may take"
        );
        let took = began.elapsed();
        assert!(
            took >= client::CALL_WITHIN
                && took < client::CALL_WITHIN + std::time::Duration::from_secs(300)
        );
    }
}
